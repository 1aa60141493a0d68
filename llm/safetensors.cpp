// safetensors reader (safetensors.hpp). Every length and offset comes from the file: each is
// checked against the bytes that exist before it is used.
#include <algorithm>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include <tinyfin/llm/errors.hpp>
#include <tinyfin/llm/safetensors.hpp>

#include "json_util.hpp"
#include "utf8.hpp"

namespace tinyfin::llm {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the format's own limit

[[noreturn]] void fail(const std::string &file, const std::string &what) {
    throw FormatError("FormatError: safetensors '" + file + "': " + what);
}

std::optional<TensorType> parse_dtype(const std::string &dtype) {
    if (dtype == "F32") return TensorType::f32;
    if (dtype == "F16") return TensorType::f16;
    if (dtype == "BF16") return TensorType::bf16;
    return std::nullopt;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string &path) : file_(std::make_shared<MappedFile>(path)), name_(path) {
    parse(file_->bytes());
}

SafetensorsFile::SafetensorsFile(std::span<const std::byte> bytes, std::string name) : name_(std::move(name)) {
    parse(bytes);
}

void SafetensorsFile::parse(std::span<const std::byte> bytes) {
    if (bytes.size() < 8)
        fail(name_, "the file has " + std::to_string(bytes.size()) + " bytes, fewer than the 8 of the header length");
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i)
        header_len = (header_len << 8) | std::to_integer<uint64_t>(bytes[static_cast<std::size_t>(i)]);
    if (header_len > bytes.size() - 8)
        fail(name_, "header length " + std::to_string(header_len) + " runs past the end of the file (" +
                        std::to_string(bytes.size()) + " bytes)");
    if (header_len > kMaxHeaderBytes) fail(name_, "header length " + std::to_string(header_len) + " exceeds 100 MB");
    const auto *header_begin = reinterpret_cast<const char *>(bytes.data() + 8);
    nlohmann::json header =
        parse_json(std::string_view(header_begin, header_len), "safetensors '" + name_ + "' header");
    if (!header.is_object()) fail(name_, "the header is not a JSON object");
    const std::span<const std::byte> data = bytes.subspan(8 + header_len);

    struct Range {
        uint64_t begin, end;
        std::size_t index;
    };
    std::vector<Range> ranges;
    for (auto it = header.begin(); it != header.end(); ++it) {
        const std::string &key = it.key();
        const nlohmann::json &entry = it.value();
        if (!is_valid_utf8(key)) fail(name_, "a tensor name is not valid UTF-8");
        if (key == "__metadata__") {
            if (!entry.is_object()) fail(name_, "__metadata__ is not an object");
            for (auto m = entry.begin(); m != entry.end(); ++m) {
                if (!m.value().is_string()) fail(name_, "__metadata__ value of '" + m.key() + "' is not a string");
                metadata_[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        const std::string what = "tensor '" + key + "'";
        if (!entry.is_object()) fail(name_, what + " is not an object");
        auto dtype_it = entry.find("dtype"), shape_it = entry.find("shape"), offsets_it = entry.find("data_offsets");
        if (dtype_it == entry.end() || !dtype_it->is_string()) fail(name_, what + " has no string dtype");
        if (shape_it == entry.end() || !shape_it->is_array()) fail(name_, what + " has no shape array");
        if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2)
            fail(name_, what + " has no data_offsets [begin, end]");
        const std::string dtype = dtype_it->get<std::string>();
        const auto type = parse_dtype(dtype);
        if (!type)
            throw ConfigError("ConfigError: safetensors '" + name_ + "': " + what + " has dtype " + dtype +
                              "; tinyfin reads F32, F16 and BF16");
        if (shape_it->size() > 8) fail(name_, what + " has " + std::to_string(shape_it->size()) + " dimensions");
        Shape shape;
        for (const auto &d : *shape_it) {
            if (!d.is_number_unsigned()) fail(name_, what + " has a dimension that is not a non-negative integer");
            const uint64_t v = d.get<uint64_t>();
            if (v >= (uint64_t{1} << 62)) fail(name_, what + " has dimension " + std::to_string(v) + ", out of range");
            shape.push_back(static_cast<int64_t>(v));
        }
        const int64_t elements = checked_element_count(shape, "safetensors '" + name_ + "' " + what);
        const uint64_t nbytes = checked_byte_size(*type, elements, "safetensors '" + name_ + "' " + what);
        for (const auto &o : *offsets_it)
            if (!o.is_number_unsigned()) fail(name_, what + " has an offset that is not a non-negative integer");
        const uint64_t begin = (*offsets_it)[0].get<uint64_t>(), end = (*offsets_it)[1].get<uint64_t>();
        if (begin > end || end > data.size())
            fail(name_, what + " has data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                            "] outside the " + std::to_string(data.size()) + " data bytes");
        if (end - begin != nbytes)
            fail(name_, what + " holds " + std::to_string(end - begin) + " bytes, but " + dtype + " " +
                            shape_str(shape) + " needs " + std::to_string(nbytes));
        ranges.push_back({begin, end, tensors_.size()});
        tensors_.push_back({key, *type, std::move(shape), data.subspan(begin, end - begin)});
    }
    std::sort(ranges.begin(), ranges.end(), [](const Range &a, const Range &b) { return a.begin < b.begin; });
    for (std::size_t i = 1; i < ranges.size(); ++i)
        if (ranges[i].begin < ranges[i - 1].end && ranges[i].begin != ranges[i].end &&
            ranges[i - 1].begin != ranges[i - 1].end)
            fail(name_, "tensors '" + tensors_[ranges[i - 1].index].name + "' and '" + tensors_[ranges[i].index].name +
                            "' overlap");
}

const TensorData *SafetensorsFile::find(std::string_view name) const {
    for (const auto &t : tensors_)
        if (t.name == name) return &t;
    return nullptr;
}

SafetensorsSet::SafetensorsSet(const std::string &directory) {
    namespace fs = std::filesystem;
    const fs::path dir(directory);
    const fs::path index_path = dir / "model.safetensors.index.json";
    std::error_code ec;
    if (fs::exists(index_path, ec)) {
        const nlohmann::json index = read_json_file(index_path.string());
        auto map_it = index.is_object() ? index.find("weight_map") : index.end();
        if (map_it == index.end() || !map_it->is_object())
            throw FormatError("FormatError: '" + index_path.string() + "' has no weight_map object");
        std::map<std::string, std::vector<std::string>> by_file;
        for (auto it = map_it->begin(); it != map_it->end(); ++it) {
            if (!it.value().is_string())
                throw FormatError("FormatError: '" + index_path.string() + "': weight_map entry '" + it.key() +
                                  "' is not a file name");
            const std::string file = it.value().get<std::string>();
            if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
                throw FormatError("FormatError: '" + index_path.string() + "': shard name '" + file +
                                  "' is not a plain file name in the model directory");
            by_file[file].push_back(it.key());
        }
        for (const auto &[file, names] : by_file) {
            files_.push_back(std::make_unique<SafetensorsFile>((dir / file).string()));
            const SafetensorsFile &shard = *files_.back();
            for (const auto &name : names)
                if (!shard.find(name))
                    throw FormatError("FormatError: '" + index_path.string() + "' puts tensor '" + name + "' in '" +
                                      file + "', which does not hold it");
        }
    } else {
        files_.push_back(std::make_unique<SafetensorsFile>((dir / "model.safetensors").string()));
    }
    for (const auto &file : files_)
        for (const auto &t : file->tensors())
            if (!by_name_.emplace(t.name, &t).second)
                throw FormatError("FormatError: tensor '" + t.name + "' appears in more than one shard of '" +
                                  directory + "'");
}

const TensorData *SafetensorsSet::find(std::string_view name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
}

std::vector<std::string> SafetensorsSet::names() const {
    std::vector<std::string> out;
    for (const auto &[name, t] : by_name_) out.push_back(name);
    return out;
}

}  // namespace tinyfin::llm
