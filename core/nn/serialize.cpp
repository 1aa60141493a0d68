// The TFNN file format (docs/nn.md): save, load and load_all of named tensors.
//
// Every integer is little-endian. Loading checks, in order: the file opens, the magic, the
// version, the size recorded in the header against the real size (truncation), the CRC32, each
// entry's bounds, and then the names, dtypes and shapes against the destination; nothing is
// written into a destination tensor unless every check passed.
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <new>
#include <stdexcept>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>
#include <zlib.h>

#include "../errors.hpp"
#include "tinyfin/nn.hpp"

namespace tinyfin::nn {

using detail::raise;

namespace {

constexpr char kMagic[4] = {'T', 'F', 'N', 'N'};
constexpr uint32_t kVersion = 1;
// magic, version, count, file size.
constexpr std::size_t kHeaderBytes = 4 + 4 + 8 + 8;
constexpr std::size_t kCrcBytes = 4;
constexpr uint32_t kMaxNameBytes = 4096;
constexpr uint32_t kMaxRank = 8;
// Elements one tensor may have in a file: load refuses more, so save does too.
constexpr int64_t kMaxElements = int64_t{1} << 48;

uint32_t crc32_of(const uint8_t *data, std::size_t size) {
    uLong crc = crc32(0L, Z_NULL, 0);
    while (size > 0) {
        uInt chunk = static_cast<uInt>(std::min<std::size_t>(size, 1u << 30));
        crc = crc32(crc, data, chunk);
        data += chunk;
        size -= chunk;
    }
    return static_cast<uint32_t>(crc);
}

// Reverses the bytes of each element; tensor data is little-endian in the file.
void swap_elements(uint8_t *data, std::size_t bytes, std::size_t element) {
    if (element < 2) return;
    for (std::size_t i = 0; i + element <= bytes; i += element)
        for (std::size_t a = i, b = i + element - 1; a < b; ++a, --b) std::swap(data[a], data[b]);
}

void append_le(std::vector<uint8_t> &out, uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

// Bounds-checked little-endian reads from the loaded file.
class Reader {
public:
    Reader(const std::vector<uint8_t> &data, std::size_t end, const std::string &path)
        : data_(data), end_(end), path_(path) {}

    uint64_t uint(int bytes, const std::string &what) {
        const uint8_t *p = take(static_cast<std::size_t>(bytes), what);
        uint64_t value = 0;
        for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(p[i]) << (8 * i);
        return value;
    }
    const uint8_t *take(std::size_t bytes, const std::string &what) {
        if (bytes > end_ - pos_)
            raise<ValueError>("load: '" + path_ + "': malformed: " + what + " at byte " +
                              std::to_string(pos_) + " needs " + std::to_string(bytes) +
                              " bytes, only " + std::to_string(end_ - pos_) + " remain");
        const uint8_t *p = data_.data() + pos_;
        pos_ += bytes;
        return p;
    }
    std::size_t pos() const { return pos_; }
    void seek(std::size_t pos) { pos_ = pos; }

private:
    const std::vector<uint8_t> &data_;
    std::size_t end_;
    const std::string &path_;
    std::size_t pos_ = 0;
};

struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    const uint8_t *data;
    std::size_t bytes;
};

bool valid_dtype(uint32_t code) { return code <= static_cast<uint32_t>(DType::boolean); }

// Reads and validates the whole file; entries point into `bytes`.
std::vector<Entry> parse(const std::string &path, std::vector<uint8_t> &bytes) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
        raise<ValueError>("load: cannot open '" + path + "': " + std::strerror(errno));
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (in.bad()) raise<ValueError>("load: error reading '" + path + "'");
    const std::size_t size = bytes.size();

    if (size < 4 || std::memcmp(bytes.data(), kMagic, 4) != 0) {
        std::string seen;
        for (std::size_t i = 0; i < std::min<std::size_t>(size, 4); ++i)
            seen += (bytes[i] >= 32 && bytes[i] < 127) ? static_cast<char>(bytes[i]) : '?';
        raise<ValueError>("load: '" + path + "' is not a TFNN file (starts with \"" + seen +
                          "\", expected \"TFNN\")");
    }
    if (size < kHeaderBytes + kCrcBytes)
        raise<ValueError>("load: '" + path + "' is truncated: " + std::to_string(size) +
                          " bytes is shorter than the " +
                          std::to_string(kHeaderBytes + kCrcBytes) + "-byte header and checksum");
    Reader header(bytes, kHeaderBytes, path);
    header.seek(4);
    uint64_t version = header.uint(4, "version");
    if (version != kVersion)
        raise<ValueError>("load: '" + path + "' has TFNN version " + std::to_string(version) +
                          "; this build reads version " + std::to_string(kVersion));
    uint64_t count = header.uint(8, "count");
    uint64_t recorded = header.uint(8, "file size");
    if (size < recorded)
        raise<ValueError>("load: '" + path + "' is truncated: " + std::to_string(size) +
                          " bytes, its header says " + std::to_string(recorded));
    if (size > recorded)
        raise<ValueError>("load: '" + path + "' has " + std::to_string(size - recorded) +
                          " bytes after the end its header records (" + std::to_string(recorded) +
                          " bytes)");
    const std::size_t payload = size - kCrcBytes;
    uint32_t stored = 0;
    for (int i = 0; i < 4; ++i) stored |= static_cast<uint32_t>(bytes[payload + i]) << (8 * i);
    uint32_t computed = crc32_of(bytes.data(), payload);
    if (stored != computed) {
        char text[64];
        std::snprintf(text, sizeof text, "stored 0x%08x, computed 0x%08x", stored, computed);
        raise<ValueError>("load: '" + path + "' is corrupt: CRC32 mismatch (" + text + ")");
    }

    Reader reader(bytes, payload, path);
    reader.seek(kHeaderBytes);
    std::vector<Entry> entries;
    std::set<std::string> names;
    for (uint64_t i = 0; i < count; ++i) {
        std::string where = "entry " + std::to_string(i);
        Entry e;
        uint64_t name_len = reader.uint(4, where + " name length");
        if (name_len == 0 || name_len > kMaxNameBytes)
            raise<ValueError>("load: '" + path + "': malformed: " + where + " has a name of " +
                              std::to_string(name_len) + " bytes (1.." +
                              std::to_string(kMaxNameBytes) + ")");
        const uint8_t *name = reader.take(name_len, where + " name");
        e.name.assign(reinterpret_cast<const char *>(name), name_len);
        where += " ('" + e.name + "')";
        if (!names.insert(e.name).second)
            raise<ValueError>("load: '" + path + "': malformed: the name '" + e.name + "' repeats");
        uint64_t dtype = reader.uint(4, where + " dtype");
        if (dtype > 0xff || !valid_dtype(static_cast<uint32_t>(dtype)))
            raise<ValueError>("load: '" + path + "': malformed: " + where + " has unknown dtype " +
                              std::to_string(dtype));
        e.dtype = static_cast<DType>(dtype);
        uint64_t rank = reader.uint(4, where + " rank");
        if (rank > kMaxRank)
            raise<ValueError>("load: '" + path + "': malformed: " + where + " has rank " +
                              std::to_string(rank) + " (at most " + std::to_string(kMaxRank) + ")");
        uint64_t numel = 1;
        for (uint64_t d = 0; d < rank; ++d) {
            auto dim = static_cast<int64_t>(reader.uint(8, where + " shape"));
            if (dim < 0 || (dim > 0 && numel > (uint64_t{1} << 48) / static_cast<uint64_t>(dim)))
                raise<ValueError>("load: '" + path + "': malformed: " + where + " has size " +
                                  std::to_string(dim) + " on axis " + std::to_string(d));
            e.shape.push_back(dim);
            numel *= static_cast<uint64_t>(dim);
        }
        uint64_t data_bytes = reader.uint(8, where + " data size");
        if (data_bytes != numel * dtype_size(e.dtype))
            raise<ValueError>("load: '" + path + "': malformed: " + where + " records " +
                              std::to_string(data_bytes) + " data bytes for shape " +
                              shape_str(e.shape) + " of " + dtype_name(e.dtype));
        e.bytes = static_cast<std::size_t>(data_bytes);
        e.data = reader.take(e.bytes, where + " data");
        entries.push_back(std::move(e));
    }
    if (reader.pos() != payload)
        raise<ValueError>("load: '" + path + "': malformed: " + std::to_string(payload - reader.pos()) +
                          " unread bytes after the " + std::to_string(count) + " entries");
    return entries;
}

Tensor to_tensor(const Entry &e, const Device &device) {
    if constexpr (std::endian::native == std::endian::little)
        return from_host(e.data, e.shape, e.dtype, device);
    std::vector<uint8_t> copy(e.data, e.data + e.bytes);
    swap_elements(copy.data(), copy.size(), dtype_size(e.dtype));
    return from_host(copy.data(), e.shape, e.dtype, device);
}

} // namespace

void save(const std::string &path, const NamedTensors &tensors) {
    std::vector<uint8_t> out(kMagic, kMagic + 4);
    append_le(out, kVersion, 4);
    append_le(out, tensors.size(), 8);
    append_le(out, 0, 8); // file size, patched below
    std::set<std::string> names;
    for (const auto &[name, tensor] : tensors) {
        if (name.empty() || name.size() > kMaxNameBytes)
            raise<ValueError>("save: '" + path + "': tensor name '" + name + "' must have 1.." +
                              std::to_string(kMaxNameBytes) + " bytes");
        if (!names.insert(name).second)
            raise<ValueError>("save: '" + path + "': the name '" + name + "' repeats");
        if (!tensor.defined())
            raise<ValueError>("save: '" + path + "': tensor '" + name + "' is undefined");
        append_le(out, name.size(), 4);
        out.insert(out.end(), name.begin(), name.end());
        append_le(out, static_cast<uint32_t>(tensor.dtype()), 4);
        append_le(out, static_cast<uint64_t>(tensor.rank()), 4);
        for (int64_t dim : tensor.shape()) append_le(out, static_cast<uint64_t>(dim), 8);
        // A broadcast view (expand) can have more elements than a file can hold, or than memory:
        // refuse it by name instead of writing a file load rejects or throwing std::bad_alloc.
        if (tensor.numel() > kMaxElements)
            raise<ValueError>("save: '" + path + "': tensor '" + name + "' " + shape_str(tensor.shape()) +
                              " has " + std::to_string(tensor.numel()) + " elements, more than the 2^48 a " +
                              "file holds; save a smaller tensor (a broadcast view's source, not the view)");
        std::size_t bytes = tensor.nbytes();
        append_le(out, bytes, 8);
        std::size_t at = out.size();
        // More than the machine's memory is refused before asking for it: a sanitizer's allocator
        // aborts on such a request where glibc's throws.
        const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
        bool resized = false;
        if (pages <= 0 || page <= 0 || bytes / static_cast<uint64_t>(page) < static_cast<uint64_t>(pages)) {
            try {
                out.resize(at + bytes);
                resized = true;
            } catch (const std::bad_alloc &) {
            } catch (const std::length_error &) {
            }
        }
        if (!resized)
            raise<OutOfMemoryError>("save: '" + path + "': tensor '" + name + "' " +
                                    shape_str(tensor.shape()) + " needs " + std::to_string(bytes) +
                                    " bytes of host memory to write; save a smaller tensor");
        tensor.copy_to_host(out.data() + at, bytes);
        if constexpr (std::endian::native == std::endian::big)
            swap_elements(out.data() + at, bytes, dtype_size(tensor.dtype()));
    }
    uint64_t total = out.size() + kCrcBytes;
    for (int i = 0; i < 8; ++i) out[16 + i] = static_cast<uint8_t>(total >> (8 * i));
    append_le(out, crc32_of(out.data(), out.size()), 4);

    // Written beside the target and renamed over it, so a failed save leaves the old file.
    std::string tmp = path + ".tmp." + std::to_string(::getpid());
    std::FILE *f = std::fopen(tmp.c_str(), "wb");
    if (!f) raise<ValueError>("save: cannot create '" + tmp + "': " + std::strerror(errno));
    bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size();
    int saved_errno = errno;
    ok = (std::fclose(f) == 0) && ok;
    if (!ok) {
        std::remove(tmp.c_str());
        raise<ValueError>("save: cannot write '" + tmp + "': " + std::strerror(saved_errno));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        saved_errno = errno;
        std::remove(tmp.c_str());
        raise<ValueError>("save: cannot rename '" + tmp + "' to '" + path + "': " +
                          std::strerror(saved_errno));
    }
}

void save(const std::string &path, const Module &module) { save(path, module.named_parameters()); }

void load(const std::string &path, const NamedTensors &tensors) {
    std::vector<uint8_t> bytes;
    std::vector<Entry> entries = parse(path, bytes);
    std::map<std::string, const Entry *> by_name;
    for (const Entry &e : entries) by_name[e.name] = &e;

    std::set<std::string> wanted;
    std::vector<std::pair<Tensor, const Entry *>> plan;
    for (const auto &[name, tensor] : tensors) {
        wanted.insert(name);
        auto found = by_name.find(name);
        if (found == by_name.end()) {
            std::string have;
            for (const Entry &e : entries) have += (have.empty() ? "" : ", ") + e.name;
            raise<ValueError>("load: '" + path + "' has no tensor '" + name + "' (it has: " +
                              (have.empty() ? "none" : have) + ")");
        }
        const Entry &e = *found->second;
        if (e.dtype != tensor.dtype())
            raise<ValueError>("load: '" + path + "': tensor '" + name + "' is " +
                              dtype_name(e.dtype) + " in the file, " + dtype_name(tensor.dtype()) +
                              " in the destination");
        if (e.shape != tensor.shape())
            raise<ValueError>("load: '" + path + "': tensor '" + name + "' has shape " +
                              shape_str(e.shape) + " in the file, " + shape_str(tensor.shape()) +
                              " in the destination");
        plan.emplace_back(tensor, &e);
    }
    for (const Entry &e : entries)
        if (!wanted.count(e.name))
            raise<ValueError>("load: '" + path + "' has tensor '" + e.name +
                              "' that the destination does not have");

    NoGradGuard no_grad;
    for (auto &[tensor, e] : plan) tensor.assign_(to_tensor(*e, tensor.device()));
}

void load(const std::string &path, Module &module) { load(path, module.named_parameters()); }

NamedTensors load_all(const std::string &path, std::optional<Device> device) {
    std::vector<uint8_t> bytes;
    std::vector<Entry> entries = parse(path, bytes);
    Device target = device ? *device : default_device();
    NamedTensors out;
    for (const Entry &e : entries) out.emplace_back(e.name, to_tensor(e, target));
    return out;
}

} // namespace tinyfin::nn
