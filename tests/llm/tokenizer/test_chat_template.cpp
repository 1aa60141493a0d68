// Chat prompts of each family against the text the families' published templates produce
// (written out by hand from those templates) and the "auto" detection from template text.
#include <doctest/doctest.h>

#include "tinyfin/llm/tokenizer.hpp"

using namespace tinyfin::llm;

namespace {
const std::vector<ChatMessage> conversation = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}};
}

TEST_CASE("chat templates: each family's text") {
    CHECK(apply_chat_template(conversation, "llama3", "") ==
          "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
          "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
          "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
          "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
          "<|start_header_id|>assistant<|end_header_id|>\n\n");
    CHECK(apply_chat_template(conversation, "chatml", "", false) ==
          "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
          "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n");
    CHECK(apply_chat_template({{"user", "Hi"}}, "chatml", "") == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    CHECK(apply_chat_template(conversation, "llama2", "") ==
          "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello. </s><s>[INST] Bye [/INST]");
    CHECK(apply_chat_template(conversation, "mistral", "") ==
          "<s>[INST] Be brief.\n\nHi [/INST]Hello.</s>[INST] Bye [/INST]");
}

TEST_CASE("chat templates: auto detects the family from the model's template") {
    const std::vector<ChatMessage> hi = {{"user", "Hi"}};
    CHECK(apply_chat_template(hi, "auto", "{{ '<|start_header_id|>' + message['role'] }}") ==
          apply_chat_template(hi, "llama3", ""));
    CHECK(apply_chat_template(hi, "auto", "{{'<|im_start|>' + message['role']}}") == apply_chat_template(hi, "chatml", ""));
    CHECK(apply_chat_template(hi, "auto", "{{ bos_token + '[INST] ' + content + ' [/INST]' }}") ==
          apply_chat_template(hi, "mistral", ""));
    CHECK(apply_chat_template(hi, "auto", "{{ '<<SYS>>\\n' }}{{ '[INST] ' }}") == apply_chat_template(hi, "llama2", ""));
    CHECK(detect_chat_family("{{ messages }}").empty());
    CHECK_THROWS_WITH_AS(apply_chat_template(hi, "auto", ""), doctest::Contains("no chat template"), TokenizerError);
    CHECK_THROWS_WITH_AS(apply_chat_template(hi, "auto", "{{ messages }}"), doctest::Contains("cannot tell"), TokenizerError);
    CHECK_THROWS_WITH_AS(apply_chat_template(hi, "vicuna", ""), doctest::Contains("vicuna"), TokenizerError);
    CHECK_THROWS_WITH_AS(apply_chat_template({{"user", "a"}, {"system", "b"}}, "llama2", ""),
                         doctest::Contains("system message must come first"), TokenizerError);
    CHECK_THROWS_WITH_AS(apply_chat_template({{"tool", "a"}}, "mistral", ""), doctest::Contains("tool"), TokenizerError);
}
