// Hugging Face safetensors files (https://huggingface.co/docs/safetensors): an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype, shape and byte range,
// then the data. Single files and shard sets (model.safetensors.index.json).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <tinyfin/llm/mapped_file.hpp>
#include <tinyfin/llm/tensor_data.hpp>

namespace tinyfin::llm {

// One mapped safetensors file, parsed and checked when constructed: the header length within
// the file (and at most 100 MB), the header valid JSON (nesting at most 64 deep), each entry's
// dtype one of F32/F16/BF16 (others: ConfigError), dims non-negative with a product that does
// not overflow, byte ranges inside the data, of the size the shape needs, and not overlapping.
// Errors: FileError (path), FormatError (contents).
class SafetensorsFile {
public:
    explicit SafetensorsFile(const std::string &path);
    // Parses bytes the caller keeps alive (fuzzing, tests); name is for messages.
    SafetensorsFile(std::span<const std::byte> bytes, std::string name);

    const std::vector<TensorData> &tensors() const { return tensors_; }
    const TensorData *find(std::string_view name) const;
    // __metadata__: string to string.
    const std::map<std::string, std::string> &metadata() const { return metadata_; }
    const std::string &name() const { return name_; }
    // The mapping the tensors' bytes live in (null for caller-owned bytes): tensors made over
    // those bytes keep it alive.
    const std::shared_ptr<MappedFile> &mapping() const { return file_; }

private:
    void parse(std::span<const std::byte> bytes);
    std::shared_ptr<MappedFile> file_;
    std::string name_;
    std::vector<TensorData> tensors_;
    std::map<std::string, std::string> metadata_;
};

// Every tensor of a model directory's safetensors: model.safetensors, or the shards that
// model.safetensors.index.json's weight_map names (plain file names inside the directory only;
// a tensor the index assigns to a shard must be in that shard, and no name may appear twice).
class SafetensorsSet {
public:
    explicit SafetensorsSet(const std::string &directory);
    const TensorData *find(std::string_view name) const;
    std::vector<std::string> names() const;
    const std::vector<std::unique_ptr<SafetensorsFile>> &files() const { return files_; }

private:
    std::vector<std::unique_ptr<SafetensorsFile>> files_;
    std::map<std::string, const TensorData *, std::less<>> by_name_;
};

}  // namespace tinyfin::llm
