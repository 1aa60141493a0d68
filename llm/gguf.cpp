// GGUF reader (gguf.hpp). All reads go through Reader, which checks each length against the
// bytes left before using it; counts are checked against what the remaining bytes could hold
// before anything is allocated for them.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include <tinyfin/llm/errors.hpp>
#include <tinyfin/llm/gguf.hpp>

#include "utf8.hpp"

namespace tinyfin::llm {

namespace {

constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kMaxStringBytes = uint64_t{1} << 30;

[[noreturn]] void fail(const std::string &file, const std::string &what) {
    throw FormatError("FormatError: GGUF '" + file + "': " + what);
}

// The smallest number of bytes a value of this type takes (so a count can be bounded by the
// bytes left): a string is at least its 8-byte length, an array its type and count.
uint64_t min_value_bytes(GgufType type) {
    switch (type) {
    case GgufType::u8:
    case GgufType::i8:
    case GgufType::boolean: return 1;
    case GgufType::u16:
    case GgufType::i16: return 2;
    case GgufType::u32:
    case GgufType::i32:
    case GgufType::f32: return 4;
    case GgufType::u64:
    case GgufType::i64:
    case GgufType::f64:
    case GgufType::string: return 8;
    case GgufType::array: return 12;
    }
    return 1;
}

class Reader {
public:
    Reader(std::span<const std::byte> bytes, const std::string &file) : bytes_(bytes), file_(file) {}

    uint64_t left() const { return bytes_.size() - pos_; }
    uint64_t pos() const { return pos_; }

    template <typename T>
    T read(const char *what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }

    std::string string(const char *what) {
        const uint64_t len = read<uint64_t>(what);
        if (len > kMaxStringBytes)
            fail(file_, std::string(what) + ": string length " + std::to_string(len) + " is absurd");
        need(len, what);
        std::string s(reinterpret_cast<const char *>(bytes_.data() + pos_), len);
        pos_ += len;
        return s;
    }

    // A count of items of at least min_bytes each that must fit in the bytes left.
    uint64_t count(const char *what, uint64_t min_bytes) {
        const uint64_t n = read<uint64_t>(what);
        if (n > left() / min_bytes)
            fail(file_, std::string(what) + " " + std::to_string(n) + " is more than the " + std::to_string(left()) +
                            " bytes left could hold");
        return n;
    }

private:
    void need(uint64_t n, const char *what) {
        if (n > left())
            fail(file_, std::string(what) + " at byte " + std::to_string(pos_) + " needs " + std::to_string(n) +
                            " bytes, the file has " + std::to_string(left()) + " left");
    }
    std::span<const std::byte> bytes_;
    uint64_t pos_ = 0;
    const std::string &file_;
};

GgufType read_type(Reader &r, const std::string &file, const char *what) {
    const uint32_t t = r.read<uint32_t>(what);
    if (t > static_cast<uint32_t>(GgufType::f64))
        fail(file, std::string(what) + ": unknown value type " + std::to_string(t));
    return static_cast<GgufType>(t);
}

GgufValue read_value(Reader &r, GgufType type, const std::string &file, bool in_array) {
    GgufValue v;
    v.type = type;
    switch (type) {
    case GgufType::u8: v.u = r.read<uint8_t>("u8 value"); break;
    case GgufType::i8: v.i = r.read<int8_t>("i8 value"); break;
    case GgufType::u16: v.u = r.read<uint16_t>("u16 value"); break;
    case GgufType::i16: v.i = r.read<int16_t>("i16 value"); break;
    case GgufType::u32: v.u = r.read<uint32_t>("u32 value"); break;
    case GgufType::i32: v.i = r.read<int32_t>("i32 value"); break;
    case GgufType::u64: v.u = r.read<uint64_t>("u64 value"); break;
    case GgufType::i64: v.i = r.read<int64_t>("i64 value"); break;
    case GgufType::f32: v.f = r.read<float>("f32 value"); break;
    case GgufType::f64: v.f = r.read<double>("f64 value"); break;
    case GgufType::boolean: {
        const uint8_t b = r.read<uint8_t>("bool value");
        if (b > 1) fail(file, "bool value " + std::to_string(b) + " is neither 0 nor 1");
        v.u = b;
        break;
    }
    case GgufType::string: v.s = r.string("string value"); break;
    case GgufType::array: {
        if (in_array) fail(file, "an array nested in an array");
        v.element_type = read_type(r, file, "array element type");
        if (v.element_type == GgufType::array) fail(file, "an array nested in an array");
        const uint64_t n = r.count("array length", min_value_bytes(v.element_type));
        v.array.reserve(n);
        for (uint64_t i = 0; i < n; ++i) v.array.push_back(read_value(r, v.element_type, file, true));
        break;
    }
    }
    return v;
}

}  // namespace

const char *gguf_type_name(GgufType type) {
    static constexpr const char *names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                            "bool", "string", "array", "u64", "i64", "f64"};
    const auto i = static_cast<uint32_t>(type);
    return i < std::size(names) ? names[i] : "unknown";
}

bool GgufValue::is_integer() const {
    switch (type) {
    case GgufType::u8:
    case GgufType::i8:
    case GgufType::u16:
    case GgufType::i16:
    case GgufType::u32:
    case GgufType::i32:
    case GgufType::u64:
    case GgufType::i64: return true;
    default: return false;
    }
}

static bool is_signed(GgufType t) {
    return t == GgufType::i8 || t == GgufType::i16 || t == GgufType::i32 || t == GgufType::i64;
}

int64_t GgufValue::to_int(std::string_view key) const {
    if (!is_integer())
        throw ConfigError("ConfigError: GGUF key '" + std::string(key) + "' is " + gguf_type_name(type) +
                          ", expected an integer");
    if (is_signed(type)) return i;
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw ConfigError("ConfigError: GGUF key '" + std::string(key) + "' = " + std::to_string(u) +
                          " is out of range");
    return static_cast<int64_t>(u);
}

double GgufValue::to_double(std::string_view key) const {
    if (is_float()) return f;
    if (is_integer()) return is_signed(type) ? static_cast<double>(i) : static_cast<double>(u);
    throw ConfigError("ConfigError: GGUF key '" + std::string(key) + "' is " + gguf_type_name(type) +
                      ", expected a number");
}

bool GgufValue::to_bool(std::string_view key) const {
    if (type != GgufType::boolean)
        throw ConfigError("ConfigError: GGUF key '" + std::string(key) + "' is " + gguf_type_name(type) +
                          ", expected bool");
    return u != 0;
}

const std::string &GgufValue::to_string(std::string_view key) const {
    if (type != GgufType::string)
        throw ConfigError("ConfigError: GGUF key '" + std::string(key) + "' is " + gguf_type_name(type) +
                          ", expected a string");
    return s;
}

GgufFile::GgufFile(const std::string &path) : file_(std::make_shared<MappedFile>(path)), name_(path) {
    parse(file_->bytes());
}

GgufFile::GgufFile(std::span<const std::byte> bytes, std::string name) : name_(std::move(name)) { parse(bytes); }

void GgufFile::parse(std::span<const std::byte> bytes) {
    Reader r(bytes, name_);
    char magic[4];
    for (char &c : magic) c = static_cast<char>(r.read<uint8_t>("magic"));
    if (std::memcmp(magic, "GGUF", 4) != 0) fail(name_, "no GGUF magic at the start (not a GGUF file)");
    version_ = r.read<uint32_t>("version");
    if (version_ != 2 && version_ != 3)
        fail(name_, "version " + std::to_string(version_) + " is not supported (tinyfin reads GGUF 2 and 3)");
    // A tensor info is at least a name length, one dim count, a type and an offset (28 bytes);
    // a key/value at least a key length and a type (12 bytes).
    const uint64_t n_tensors = r.read<uint64_t>("tensor count");
    const uint64_t n_kv = r.count("metadata count", 12);
    if (n_tensors > r.left() / 28)
        fail(name_, "tensor count " + std::to_string(n_tensors) + " is more than the file could hold");
    for (uint64_t i = 0; i < n_kv; ++i) {
        std::string key = r.string("metadata key");
        if (!is_valid_utf8(key)) fail(name_, "metadata key " + std::to_string(i) + " is not valid UTF-8");
        const GgufType type = read_type(r, name_, "metadata value type");
        GgufValue value = read_value(r, type, name_, false);
        if (metadata_.count(key)) fail(name_, "metadata key '" + key + "' appears twice");
        metadata_.emplace(std::move(key), std::move(value));
    }
    if (const GgufValue *a = find_value("general.alignment")) {
        if (a->type != GgufType::u32) fail(name_, "general.alignment is not u32");
        if (a->u == 0 || !std::has_single_bit(a->u))
            fail(name_, "general.alignment " + std::to_string(a->u) + " is not a power of two");
        alignment_ = a->u;
    }
    if (n_tensors > r.left() / 28)
        fail(name_, "tensor count " + std::to_string(n_tensors) + " is more than the file could hold");
    struct Info {
        std::string name;
        Shape shape;
        TensorType type;
        uint64_t offset, nbytes;
    };
    std::vector<Info> infos;
    infos.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) {
        Info info;
        info.name = r.string("tensor name");
        if (!is_valid_utf8(info.name)) fail(name_, "tensor name " + std::to_string(i) + " is not valid UTF-8");
        const std::string what = "GGUF '" + name_ + "' tensor '" + info.name + "'";
        const uint32_t n_dims = r.read<uint32_t>("tensor dimension count");
        if (n_dims > kMaxDims) fail(name_, "tensor '" + info.name + "' has " + std::to_string(n_dims) + " dimensions");
        int64_t ne[kMaxDims];
        for (uint32_t d = 0; d < n_dims; ++d) {
            const uint64_t v = r.read<uint64_t>("tensor dimension");
            if (v >= (uint64_t{1} << 62)) fail(name_, "tensor '" + info.name + "' has dimension " + std::to_string(v));
            ne[d] = static_cast<int64_t>(v);
        }
        // ne[0] is the fastest-varying axis: the row-major shape is ne reversed.
        for (uint32_t d = n_dims; d-- > 0;) info.shape.push_back(ne[d]);
        const int64_t elements = checked_element_count(info.shape, what);
        const uint32_t type_id = r.read<uint32_t>("tensor type");
        const TensorTypeInfo *type = tensor_type_info(type_id);
        if (!type) fail(name_, "tensor '" + info.name + "' has unknown type " + std::to_string(type_id));
        info.type = type->type;
        if (n_dims > 0 && ne[0] % type->block_elements != 0)
            fail(name_, "tensor '" + info.name + "' rows of " + std::to_string(ne[0]) + " elements are not whole " +
                            type->name + " blocks");
        info.nbytes = checked_byte_size(info.type, elements, what);
        info.offset = r.read<uint64_t>("tensor offset");
        if (info.offset % alignment_ != 0)
            fail(name_, "tensor '" + info.name + "' offset " + std::to_string(info.offset) +
                            " is not a multiple of the alignment " + std::to_string(alignment_));
        if (by_name_.count(info.name)) fail(name_, "tensor name '" + info.name + "' appears twice");
        by_name_.emplace(info.name, infos.size());
        infos.push_back(std::move(info));
    }
    // The data section starts at the next multiple of the alignment.
    const uint64_t pos = r.pos();
    const uint64_t pad = (alignment_ - pos % alignment_) % alignment_;
    if (pad > r.left()) {
        if (!infos.empty()) fail(name_, "the file ends before its tensor data");
    }
    const uint64_t data_start = std::min<uint64_t>(pos + pad, bytes.size());
    const uint64_t data_size = bytes.size() - data_start;
    std::vector<std::size_t> order(infos.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    for (const auto &info : infos)
        if (info.offset > data_size || info.nbytes > data_size - info.offset)
            fail(name_, "tensor '" + info.name + "' bytes [" + std::to_string(info.offset) + ", +" +
                            std::to_string(info.nbytes) + ") run past the end of the " + std::to_string(data_size) +
                            " data bytes");
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return infos[a].offset < infos[b].offset; });
    for (std::size_t k = 1; k < order.size(); ++k) {
        const Info &prev = infos[order[k - 1]], &cur = infos[order[k]];
        if (cur.offset < prev.offset + prev.nbytes && cur.nbytes > 0)
            fail(name_, "tensors '" + prev.name + "' and '" + cur.name + "' overlap");
    }
    tensors_.reserve(infos.size());
    for (auto &info : infos)
        tensors_.push_back({std::move(info.name), info.type, std::move(info.shape),
                            bytes.subspan(data_start + info.offset, info.nbytes)});
}

const GgufValue *GgufFile::find_value(std::string_view key) const {
    auto it = metadata_.find(key);
    return it == metadata_.end() ? nullptr : &it->second;
}

const TensorData *GgufFile::find(std::string_view name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace tinyfin::llm
