// tinyfin::llm — Llama-family language models from Hugging Face safetensors directories and
// GGUF files, on tinyfin's backends (libtinyfin-llm; docs/llm.md).
#pragma once

#include <tinyfin/llm/config.hpp>
#include <tinyfin/llm/errors.hpp>
#include <tinyfin/llm/gguf.hpp>
#include <tinyfin/llm/mapped_file.hpp>
#include <tinyfin/llm/model.hpp>
#include <tinyfin/llm/quantize.hpp>
#include <tinyfin/llm/safetensors.hpp>
#include <tinyfin/llm/sampler.hpp>
#include <tinyfin/llm/tensor_data.hpp>
#include <tinyfin/llm/tokenizer.hpp>
