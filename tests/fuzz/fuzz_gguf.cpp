// libFuzzer target: arbitrary bytes through the GGUF reader and the model configuration read
// from its metadata. Any input may only end in a tinyfin::Error (FormatError, ConfigError).
#include <cstddef>
#include <cstdint>

#include <tinyfin/llm.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try {
        const tinyfin::llm::GgufFile file({reinterpret_cast<const std::byte *>(data), size}, "fuzz");
        for (const auto &[key, value] : file.metadata())
            if (value.is_integer()) (void)value.to_double(key);
        try {
            (void)tinyfin::llm::read_gguf_config(file);
        } catch (const tinyfin::Error &) {
        }
    } catch (const tinyfin::Error &) {
    }
    return 0;
}
