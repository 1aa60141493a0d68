// The tokenizer of a model path: a Hugging Face directory's tokenizer files or a GGUF file's
// tokenizer.ggml.* vocabulary.
#pragma once

#include <memory>
#include <string>

#include <tinyfin/llm/gguf.hpp>
#include <tinyfin/llm/tokenizer.hpp>

namespace tinyfin::llm {

// tokenizer.ggml.* of a GGUF file (element types and lengths checked: FormatError), or nullopt
// when it has no tokenizer.ggml.model.
std::optional<Vocabulary> read_gguf_vocabulary(const GgufFile &file);
// The tokenizer of a model: nullptr when its files have none.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string &path, const GgufFile *gguf);

}  // namespace tinyfin::llm
