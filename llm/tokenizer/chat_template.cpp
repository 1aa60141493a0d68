// Chat prompts of the common model families, written out in C++ (no Jinja engine): the text the
// families' own templates produce for system/user/assistant turns. The text spells BOS and the
// turn markers; encode it with EncodeOptions::parse_special (encode adds no second BOS).
#include <string>

#include "tinyfin/llm/tokenizer.hpp"
#include "utf8.hpp"

namespace tinyfin::llm {

namespace {

std::string_view trim(std::string_view s) {
    const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    while (!s.empty() && space(s.front())) s.remove_prefix(1);
    while (!s.empty() && space(s.back())) s.remove_suffix(1);
    return s;
}

void check_roles(const std::vector<ChatMessage> &messages, std::string_view family) {
    for (std::size_t i = 0; i < messages.size(); ++i) {
        const std::string &role = messages[i].role;
        if (role == "system" && i == 0) continue;
        if (role == "system")
            throw TokenizerError("chat template " + std::string(family) +
                                 ": a system message must come first (message " + std::to_string(i) + ")");
        if (role != "user" && role != "assistant")
            throw TokenizerError("chat template " + std::string(family) + ": message " + std::to_string(i) +
                                 " has role " + detail::quote_for_message(role) + "; use system, user or assistant");
    }
}

// <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s><s>[INST] {user} [/INST]
// (the system block joins the first user message, and the template strips the joined text).
std::string llama2(const std::vector<ChatMessage> &messages) {
    check_roles(messages, "llama2");
    std::string out, system;
    std::size_t start = 0;
    if (!messages.empty() && messages[0].role == "system") system = messages[0].content, start = 1;
    bool first_user = true;
    for (std::size_t i = start; i < messages.size(); ++i) {
        const ChatMessage &m = messages[i];
        if (m.role == "user") {
            const std::string content =
                first_user && start == 1 ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + m.content : m.content;
            out.append("<s>[INST] ").append(trim(content)).append(" [/INST]");
            first_user = false;
        } else {
            out.append(" ").append(trim(m.content)).append(" </s>");
        }
    }
    return out;
}

// <s>[INST] {system}\n\n{user} [/INST]{assistant}</s>[INST] {user} [/INST]
std::string mistral(const std::vector<ChatMessage> &messages) {
    check_roles(messages, "mistral");
    std::string out = "<s>", system;
    std::size_t start = 0;
    if (!messages.empty() && messages[0].role == "system") system = messages[0].content, start = 1;
    bool first_user = true;
    for (std::size_t i = start; i < messages.size(); ++i) {
        const ChatMessage &m = messages[i];
        if (m.role == "user") {
            out += "[INST] ";
            if (first_user && !system.empty()) out += system + "\n\n";
            out += m.content + " [/INST]";
            first_user = false;
        } else {
            out += m.content + "</s>";
        }
    }
    return out;
}

// <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>...
std::string llama3(const std::vector<ChatMessage> &messages, bool add_generation_prompt) {
    std::string out = "<|begin_of_text|>";
    for (const ChatMessage &m : messages)
        out.append("<|start_header_id|>")
            .append(m.role)
            .append("<|end_header_id|>\n\n")
            .append(trim(m.content))
            .append("<|eot_id|>");
    if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    return out;
}

// <|im_start|>{role}\n{content}<|im_end|>\n...
std::string chatml(const std::vector<ChatMessage> &messages, bool add_generation_prompt) {
    std::string out;
    for (const ChatMessage &m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    if (add_generation_prompt) out += "<|im_start|>assistant\n";
    return out;
}

}  // namespace

std::string detect_chat_family(std::string_view t) {
    if (t.find("<|start_header_id|>") != std::string_view::npos) return "llama3";
    if (t.find("<|im_start|>") != std::string_view::npos) return "chatml";
    if (t.find("[INST]") != std::string_view::npos)
        return t.find("<<SYS>>") != std::string_view::npos ? "llama2" : "mistral";
    return "";
}

std::string apply_chat_template(const std::vector<ChatMessage> &messages, std::string_view family,
                                std::string_view model_template, bool add_generation_prompt) {
    std::string name(family);
    if (name == "auto") {
        name = detect_chat_family(model_template);
        if (name.empty())
            throw TokenizerError(model_template.empty()
                                     ? "chat template: the model has no chat template; name the family (llama2, "
                                       "llama3, mistral, chatml) or send a raw prompt"
                                     : "chat template: cannot tell the family from the model's template (no "
                                       "<|start_header_id|>, <|im_start|> or [INST]); name it (llama2, llama3, "
                                       "mistral, chatml) or send a raw prompt");
    }
    if (name == "llama2") return llama2(messages);
    if (name == "mistral") return mistral(messages);
    if (name == "llama3") return llama3(messages, add_generation_prompt);
    if (name == "chatml") return chatml(messages, add_generation_prompt);
    throw TokenizerError("chat template: unknown family " + detail::quote_for_message(name) +
                         "; use llama2, llama3, mistral, chatml or auto");
}

}  // namespace tinyfin::llm
