// GGUF files (versions 2 and 3; ggml's docs/gguf.md): typed metadata key/values, tensor infos,
// then the aligned tensor data.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <tinyfin/llm/mapped_file.hpp>
#include <tinyfin/llm/tensor_data.hpp>

namespace tinyfin::llm {

// GGUF metadata value types (the file's numbering).
enum class GgufType : uint32_t {
    u8 = 0,
    i8 = 1,
    u16 = 2,
    i16 = 3,
    u32 = 4,
    i32 = 5,
    f32 = 6,
    boolean = 7,
    string = 8,
    array = 9,
    u64 = 10,
    i64 = 11,
    f64 = 12,
};
const char *gguf_type_name(GgufType type);

// One metadata value. Integers are kept in i (signed types) or u (unsigned and bool), floats
// in f; an array holds scalars or strings (an array of arrays is a FormatError).
struct GgufValue {
    GgufType type = GgufType::u8;
    int64_t i = 0;
    uint64_t u = 0;
    double f = 0;
    std::string s;
    GgufType element_type = GgufType::u8;  // arrays only
    std::vector<GgufValue> array;

    bool is_integer() const;
    bool is_float() const { return type == GgufType::f32 || type == GgufType::f64; }
    // Conversions with checks: ConfigError naming key when the type does not fit or the value
    // is out of range.
    int64_t to_int(std::string_view key) const;
    double to_double(std::string_view key) const;
    bool to_bool(std::string_view key) const;
    const std::string &to_string(std::string_view key) const;
};

// A parsed GGUF file. Checks: magic, version 2 or 3, counts no larger than the bytes left could
// hold, every string and array inside the file, keys and tensor names valid UTF-8 and unique,
// at most 4 dims with a non-overflowing product, known tensor types, general.alignment a power
// of two, every tensor offset aligned and its bytes inside the data section, no two tensors
// overlapping. Errors: FileError (path), FormatError (contents).
class GgufFile {
public:
    explicit GgufFile(const std::string &path);
    GgufFile(std::span<const std::byte> bytes, std::string name);

    uint32_t version() const { return version_; }
    uint64_t alignment() const { return alignment_; }
    const std::map<std::string, GgufValue, std::less<>> &metadata() const { return metadata_; }
    const GgufValue *find_value(std::string_view key) const;
    const std::vector<TensorData> &tensors() const { return tensors_; }
    const TensorData *find(std::string_view name) const;
    const std::string &name() const { return name_; }
    // The mapping the tensors' bytes live in (null for caller-owned bytes): tensors made over
    // those bytes keep it alive.
    const std::shared_ptr<MappedFile> &mapping() const { return file_; }

private:
    void parse(std::span<const std::byte> bytes);
    std::shared_ptr<MappedFile> file_;
    std::string name_;
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    std::map<std::string, GgufValue, std::less<>> metadata_;
    std::vector<TensorData> tensors_;
    std::map<std::string, std::size_t, std::less<>> by_name_;
};

}  // namespace tinyfin::llm
