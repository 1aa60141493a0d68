// Tokenizers of the models tinyfin::llm runs: SentencePiece (tokenizer.model, through
// libsentencepiece), byte-level BPE (tokenizer.json: Llama 3, Qwen2, GPT-2), and GGUF's embedded
// vocabularies (tokenizer.ggml.model "llama" and "gpt2"); chat templates of the common families.
// Every loader treats its input as hostile: bad files raise TokenizerError, never crash.
// docs/llm-tokenizers.md describes the formats, the options and the limits.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tinyfin::llm {

// Any failure to load a tokenizer or to encode/decode with it: the message names the file, the
// field and the value, and what to do.
class TokenizerError : public std::runtime_error {
 public:
  using runtime_error::runtime_error;
};

// What GGUF's tokenizer.ggml.* metadata carries (filled by the GGUF loader in `llm`).
struct Vocabulary {
  std::string model;                 // tokenizer.ggml.model: "llama" (SentencePiece-style) or "gpt2" (byte-level BPE)
  std::string pre;                   // tokenizer.ggml.pre (pre-tokenizer name), may be empty
  std::vector<std::string> tokens;   // tokenizer.ggml.tokens
  std::vector<float> scores;         // tokenizer.ggml.scores (may be empty for gpt2)
  std::vector<int32_t> token_types;  // tokenizer.ggml.token_type (1 normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte)
  std::vector<std::string> merges;   // tokenizer.ggml.merges ("a b")
  int32_t bos_id = -1, eos_id = -1, pad_id = -1, unk_id = -1;
  bool add_bos = true, add_eos = false;
  std::string chat_template;         // tokenizer.chat_template
  // --- appended by `tokenizers` ---
  int32_t eot_id = -1;               // tokenizer.ggml.eot_token_id (e.g. <|eot_id|>), -1 if absent
  bool add_space_prefix = true;      // tokenizer.ggml.add_space_prefix ("llama" model only)
};

struct EncodeOptions {
  bool add_bos = true;         // prepend BOS when the tokenizer's config says so
  bool parse_special = false;  // recognise special/added tokens spelled in the text
  // --- appended by `tokenizers` ---
  bool add_eos = true;         // append EOS when the tokenizer's config says so (rarely set)
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  static std::unique_ptr<Tokenizer> from_sentencepiece(const std::string& model_path);
  static std::unique_ptr<Tokenizer> from_tokenizer_json(const std::string& json_path); // reads tokenizer_config.json beside it when present
  static std::unique_ptr<Tokenizer> from_vocabulary(const Vocabulary& v);
  static std::unique_ptr<Tokenizer> from_directory(const std::string& dir); // HF model directory: tokenizer.json, else tokenizer.model
  virtual std::vector<int32_t> encode(std::string_view text, const EncodeOptions& = {}) const = 0;
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special = true) const = 0;
  virtual std::string token_to_piece(int32_t id) const = 0;  // bytes of one token (streaming; may be a partial UTF-8 sequence)
  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 if none
  virtual int32_t eos_id() const = 0;
  virtual std::vector<int32_t> eos_ids() const = 0;  // all ids that end generation (eos, <|eot_id|>, <|im_end|> ...)
  virtual std::string chat_template() const = 0;     // raw template text from the model, may be empty
  // --- appended by `tokenizers` ---
  // The id of a token spelled exactly as in the vocabulary ("<|eot_id|>", "▁the", "Ġthe"), if any.
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  // The vocabulary's spelling of an id (not its decoded bytes); TokenizerError when out of range.
  virtual std::string id_to_token(int32_t id) const = 0;
  // Control/special tokens (BOS, EOS, <|im_start|> ...): decode(skip_special=true) drops them.
  virtual bool is_special(int32_t id) const = 0;
  // The tokenizer's own BOS/EOS policy (from tokenizer_config.json, the .model or GGUF metadata).
  virtual bool adds_bos() const = 0;
  virtual bool adds_eos() const = 0;
};

struct ChatMessage { std::string role, content; };
// family: "llama2", "llama3", "mistral", "chatml", or "auto" (detected from the template text / model).
std::string apply_chat_template(const std::vector<ChatMessage>& messages, std::string_view family,
                                std::string_view model_template, bool add_generation_prompt = true);
// --- appended by `tokenizers` ---
// The family "auto" resolves to for a template text ("llama3", "chatml", "mistral", "llama2"),
// or an empty string when no marker is recognised.
std::string detect_chat_family(std::string_view model_template);
}  // namespace tinyfin::llm
