// libFuzzer target: arbitrary bytes through the safetensors reader and the config.json parser.
// Any input may only end in a tinyfin::Error (FormatError, ConfigError).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <tinyfin/llm.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try {
        const tinyfin::llm::SafetensorsFile file({reinterpret_cast<const std::byte *>(data), size}, "fuzz");
        for (const auto &t : file.tensors()) (void)t.bytes.size();
    } catch (const tinyfin::Error &) {
    }
    try {
        (void)tinyfin::llm::parse_hf_config(std::string_view(reinterpret_cast<const char *>(data), size), "fuzz");
    } catch (const tinyfin::Error &) {
    }
    return 0;
}
