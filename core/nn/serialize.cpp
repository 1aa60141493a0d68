// The TFNN file format (docs/nn.md): save, load and load_all of named tensors.
//
// Every integer is little-endian. Loading checks, in order: the file opens and is a regular file,
// the magic, the version, the size recorded in the header against the real size, then in one
// pass each entry's bounds (against the real size, before anything is allocated) and contents,
// and the CRC32; then the names, dtypes and shapes against the destination. Nothing is written
// into a destination tensor unless every check passed.
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <new>
#include <stdexcept>
#include <set>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "../errors.hpp"
#include "atomic_file.hpp"
#include "regular_file.hpp"
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
// After a malformed entry, the rest of the file is read for its CRC (damage is then reported as
// a CRC mismatch) only when at most this much is left.
constexpr uint64_t kMaxCrcDrainBytes = uint64_t{256} << 20;
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

// True when `name` is UTF-8 with no control characters (they would reach error messages and
// terminals verbatim).
bool printable_utf8(const std::string &name) {
    const auto *p = reinterpret_cast<const unsigned char *>(name.data());
    const auto *end = p + name.size();
    while (p < end) {
        unsigned char c = *p;
        if (c < 0x20 || c == 0x7f) return false;
        // Continuation bytes after the lead byte: 110xxxxx 1, 1110xxxx 2, 11110xxx 3.
        int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xe ? 2 : (c >> 3) == 0x1e ? 3 : -1;
        if (extra < 0 || end - p <= extra) return false;
        uint32_t code = extra == 0 ? c : c & (0x3f >> extra);
        for (int i = 1; i <= extra; ++i) {
            if ((p[i] & 0xc0) != 0x80) return false;
            code = (code << 6) | (p[i] & 0x3f);
        }
        static constexpr uint32_t smallest[] = {0, 0x80, 0x800, 0x10000};
        if (code < smallest[extra] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff) ||
            (code >= 0x80 && code < 0xa0))
            return false;
        p += extra + 1;
    }
    return true;
}

// Sequential little-endian reads from the opened file, with the CRC32 of everything read so
// far: one pass, in 64 KiB chunks, so memory follows what the entries need (each bounded by the
// file's real size) and never what a header claims.
class FileReader {
public:
    FileReader(int fd, const std::string &path, uint64_t size) : fd_(fd), path_(path), size_(size) {}

    void read(void *dst, std::size_t bytes, const std::string &what, bool crc = true) {
        auto *out = static_cast<uint8_t *>(dst);
        while (bytes > 0) {
            if (head_ == tail_) fill(what);
            std::size_t n = std::min(bytes, tail_ - head_);
            std::memcpy(out, buffer_ + head_, n);
            if (crc) crc_ = crc32(crc_, buffer_ + head_, static_cast<uInt>(n));
            head_ += n;
            pos_ += n;
            out += n;
            bytes -= n;
        }
    }
    uint64_t uint(int bytes, const std::string &what) {
        uint8_t raw[8];
        read(raw, static_cast<std::size_t>(bytes), what);
        uint64_t value = 0;
        for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(raw[i]) << (8 * i);
        return value;
    }
    // Fails as malformed unless `bytes` more fit before `end`.
    void need(uint64_t bytes, uint64_t end, const std::string &what) const {
        if (bytes > end - std::min(end, pos_))
            raise<ValueError>("load: '" + path_ + "': malformed: " + what + " at byte " + std::to_string(pos_) +
                              " needs " + std::to_string(bytes) + " bytes, only " +
                              std::to_string(end - std::min(end, pos_)) + " remain");
    }
    // Reads (for the CRC) and discards everything up to `end`.
    void skip_to(uint64_t end) {
        uint8_t sink[4096];
        while (pos_ < end) read(sink, static_cast<std::size_t>(std::min<uint64_t>(sizeof sink, end - pos_)), "data");
    }
    // True when the file has no byte past the current position.
    bool at_end() {
        if (head_ < tail_) return false;
        ssize_t n;
        do n = ::read(fd_, buffer_, 1);
        while (n < 0 && errno == EINTR);
        return n == 0;
    }
    uint64_t pos() const { return pos_; }
    uint32_t crc() const { return static_cast<uint32_t>(crc_); }

private:
    void fill(const std::string &what) {
        head_ = tail_ = 0;
        ssize_t n;
        do n = ::read(fd_, buffer_, sizeof buffer_);
        while (n < 0 && errno == EINTR);
        if (n < 0)
            raise<ValueError>("load: error reading '" + path_ + "' at byte " + std::to_string(pos_) + ": " +
                              std::strerror(errno));
        if (n == 0)
            raise<ValueError>("load: '" + path_ + "' is truncated: it ended at byte " + std::to_string(pos_) +
                              " (reading the " + what + ") although it had " + std::to_string(size_) +
                              " bytes when opened");
        tail_ = static_cast<std::size_t>(n);
    }

    int fd_;
    const std::string &path_;
    uint64_t size_;
    uint64_t pos_ = 0;
    uLong crc_ = crc32(0L, Z_NULL, 0);
    std::size_t head_ = 0, tail_ = 0;
    uint8_t buffer_[1 << 16];
};

struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    std::vector<uint8_t> data;
};

bool valid_dtype(uint32_t code) { return code <= static_cast<uint32_t>(DType::boolean); }

// The entries after the header; every failure a ValueError naming the file.
std::vector<Entry> parse_entries(FileReader &reader, const std::string &path, uint64_t count, uint64_t payload) {
    std::vector<Entry> entries;
    std::set<std::string> names;
    for (uint64_t i = 0; i < count; ++i) {
        std::string where = "entry " + std::to_string(i);
        Entry e;
        // The smallest entry (name length, a 1-byte name, dtype, rank 0, data size) is 21 bytes.
        reader.need(21, payload, where);
        uint64_t name_len = reader.uint(4, where + " name length");
        if (name_len == 0 || name_len > kMaxNameBytes)
            raise<ValueError>("load: '" + path + "': malformed: " + where + " has a name of " +
                              std::to_string(name_len) + " bytes (1.." + std::to_string(kMaxNameBytes) + ")");
        reader.need(name_len, payload, where + " name");
        e.name.resize(name_len);
        reader.read(e.name.data(), name_len, where + " name");
        if (!printable_utf8(e.name))
            raise<ValueError>("load: '" + path + "': malformed: " + where +
                              " has a name that is not UTF-8 text without control characters");
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
            raise<ValueError>("load: '" + path + "': malformed: " + where + " has rank " + std::to_string(rank) +
                              " (at most " + std::to_string(kMaxRank) + ")");
        reader.need(8 * rank + 8, payload, where + " shape");
        uint64_t numel = 1;
        for (uint64_t d = 0; d < rank; ++d) {
            auto dim = static_cast<int64_t>(reader.uint(8, where + " shape"));
            const auto limit = static_cast<uint64_t>(kMaxElements);
            if (dim < 0 || (dim > 0 && numel > limit / static_cast<uint64_t>(dim)))
                raise<ValueError>("load: '" + path + "': malformed: " + where + " has size " + std::to_string(dim) +
                                  " on axis " + std::to_string(d));
            e.shape.push_back(dim);
            numel *= static_cast<uint64_t>(dim);
        }
        uint64_t data_bytes = reader.uint(8, where + " data size");
        if (data_bytes != numel * dtype_size(e.dtype))
            raise<ValueError>("load: '" + path + "': malformed: " + where + " records " + std::to_string(data_bytes) +
                              " data bytes for shape " + shape_str(e.shape) + " of " + dtype_name(e.dtype));
        // Checked against the real file before anything is allocated for it.
        reader.need(data_bytes, payload, where + " data");
        // More than the machine's memory is refused before asking for it (a sanitizer's allocator
        // aborts on such a request where glibc's throws).
        const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
        bool fits = pages <= 0 || page <= 0 || data_bytes / static_cast<uint64_t>(page) < static_cast<uint64_t>(pages);
        try {
            if (fits) e.data.resize(static_cast<std::size_t>(data_bytes));
        } catch (const std::bad_alloc &) {
            fits = false;
        }
        if (!fits)
            raise<ValueError>("load: '" + path + "': cannot allocate " + std::to_string(data_bytes) + " bytes for " +
                              where);
        reader.read(e.data.data(), e.data.size(), where + " data");
        if (e.dtype == DType::boolean)
            for (uint8_t byte : e.data)
                if (byte > 1)
                    raise<ValueError>("load: '" + path + "': malformed: " + where + " is bool but holds the byte " +
                                      std::to_string(byte) + " (bools are 0 or 1)");
        entries.push_back(std::move(e));
    }
    if (reader.pos() != payload)
        raise<ValueError>("load: '" + path + "': malformed: " + std::to_string(payload - reader.pos()) +
                          " unread bytes after the " + std::to_string(count) + " entries");
    return entries;
}

// Reads and validates the whole file: a regular file (opened without blocking, checked on the
// descriptor), the header against the file's real size, then the entries in one pass with the
// CRC of what was read. A structural error found before the end is reported as a CRC mismatch
// when the rest of the file shows the CRC does not match either (damage, not a crafted file).
std::vector<Entry> parse(const std::string &path) {
    struct stat st;
    std::string why;
    tf_common::UniqueFd fd(tf_common::open_regular_file(path, st, why));
    if (fd.get() < 0) raise<ValueError>("load: cannot open '" + path + "': " + why);
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    FileReader reader(fd.get(), path, size);

    uint8_t magic[4] = {};
    const std::size_t seen_bytes = static_cast<std::size_t>(std::min<uint64_t>(size, 4));
    if (seen_bytes > 0) reader.read(magic, seen_bytes, "magic");
    if (seen_bytes < 4 || std::memcmp(magic, kMagic, 4) != 0) {
        std::string seen;
        for (std::size_t i = 0; i < seen_bytes; ++i)
            seen += (magic[i] >= 32 && magic[i] < 127) ? static_cast<char>(magic[i]) : '?';
        raise<ValueError>("load: '" + path + "' is not a TFNN file (starts with \"" + seen + "\", expected \"TFNN\")");
    }
    if (size < kHeaderBytes + kCrcBytes)
        raise<ValueError>("load: '" + path + "' is truncated: " + std::to_string(size) + " bytes is shorter than the " +
                          std::to_string(kHeaderBytes + kCrcBytes) + "-byte header and checksum");
    uint64_t version = reader.uint(4, "version");
    if (version != kVersion)
        raise<ValueError>("load: '" + path + "' has TFNN version " + std::to_string(version) +
                          "; this build reads version " + std::to_string(kVersion));
    uint64_t count = reader.uint(8, "count");
    uint64_t recorded = reader.uint(8, "file size");
    if (size < recorded)
        raise<ValueError>("load: '" + path + "' is truncated: " + std::to_string(size) + " bytes, its header says " +
                          std::to_string(recorded));
    if (size > recorded)
        raise<ValueError>("load: '" + path + "' has " + std::to_string(size - recorded) +
                          " bytes after the end its header records (" + std::to_string(recorded) + " bytes)");
    const uint64_t payload = size - kCrcBytes;

    auto check_crc = [&] {
        uint32_t computed = reader.crc();
        uint8_t raw[4];
        reader.read(raw, 4, "checksum", false);
        uint32_t stored = raw[0] | raw[1] << 8 | raw[2] << 16 | static_cast<uint32_t>(raw[3]) << 24;
        if (stored != computed) {
            char text[64];
            std::snprintf(text, sizeof text, "stored 0x%08x, computed 0x%08x", stored, computed);
            raise<ValueError>("load: '" + path + "' is corrupt: CRC32 mismatch (" + text + ")");
        }
        if (!reader.at_end())
            raise<ValueError>("load: '" + path + "' grew while it was read: more than the " + std::to_string(size) +
                              " bytes it had when opened");
    };
    std::vector<Entry> entries;
    try {
        entries = parse_entries(reader, path, count, payload);
    } catch (const ValueError &) {
        // Bounded, so a huge (sparse) file with a bad entry is not read to its end.
        if (reader.pos() <= payload && payload - reader.pos() <= kMaxCrcDrainBytes) {
            reader.skip_to(payload);
            check_crc();
        }
        throw;
    }
    check_crc();
    return entries;
}

Tensor to_tensor(const Entry &e, const Device &device) {
    if constexpr (std::endian::native == std::endian::little) return from_host(e.data.data(), e.shape, e.dtype, device);
    std::vector<uint8_t> copy = e.data;
    swap_elements(copy.data(), copy.size(), dtype_size(e.dtype));
    return from_host(copy.data(), e.shape, e.dtype, device);
}

}  // namespace

void save(const std::string &path, const NamedTensors &tensors) {
    std::vector<uint8_t> out(kMagic, kMagic + 4);
    append_le(out, kVersion, 4);
    append_le(out, tensors.size(), 8);
    append_le(out, 0, 8);  // file size, patched below
    std::set<std::string> names;
    for (const auto &[name, tensor] : tensors) {
        if (name.empty() || name.size() > kMaxNameBytes)
            raise<ValueError>("save: '" + path + "': tensor name '" + name + "' must have 1.." +
                              std::to_string(kMaxNameBytes) + " bytes");
        if (!printable_utf8(name))
            raise<ValueError>("save: '" + path + "': tensor name '" + name +
                              "' must be UTF-8 text without control characters");
        if (!names.insert(name).second) raise<ValueError>("save: '" + path + "': the name '" + name + "' repeats");
        if (!tensor.defined()) raise<ValueError>("save: '" + path + "': tensor '" + name + "' is undefined");
        append_le(out, name.size(), 4);
        out.insert(out.end(), name.begin(), name.end());
        append_le(out, static_cast<uint32_t>(tensor.dtype()), 4);
        append_le(out, static_cast<uint64_t>(tensor.rank()), 4);
        for (int64_t dim : tensor.shape()) append_le(out, static_cast<uint64_t>(dim), 8);
        // A broadcast view (expand) can have more elements than a file can hold, or than memory:
        // refuse it by name instead of writing a file load rejects or throwing std::bad_alloc.
        if (tensor.numel() > kMaxElements)
            raise<ValueError>("save: '" + path + "': tensor '" + name + "' " + shape_str(tensor.shape()) + " has " +
                              std::to_string(tensor.numel()) + " elements, more than the 2^48 a " +
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
            raise<OutOfMemoryError>("save: '" + path + "': tensor '" + name + "' " + shape_str(tensor.shape()) +
                                    " needs " + std::to_string(bytes) +
                                    " bytes of host memory to write; save a smaller tensor");
        tensor.copy_to_host(out.data() + at, bytes);
        if constexpr (std::endian::native == std::endian::big)
            swap_elements(out.data() + at, bytes, dtype_size(tensor.dtype()));
    }
    uint64_t total = out.size() + kCrcBytes;
    for (int i = 0; i < 8; ++i) out[16 + i] = static_cast<uint8_t>(total >> (8 * i));
    append_le(out, crc32_of(out.data(), out.size()), 4);

    // Written to a fresh temp file beside the target and renamed over it (common/atomic_file.hpp):
    // a failed or concurrent save leaves the old file or one complete new one.
    if (std::string why = tf_common::write_file_atomically(path, out.data(), out.size(), 0666); !why.empty())
        raise<ValueError>("save: '" + path + "': " + why);
}

void save(const std::string &path, const Module &module) { save(path, module.named_parameters()); }

void load(const std::string &path, const NamedTensors &tensors) {
    std::vector<Entry> entries = parse(path);
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
            raise<ValueError>("load: '" + path + "' has no tensor '" + name +
                              "' (it has: " + (have.empty() ? "none" : have) + ")");
        }
        const Entry &e = *found->second;
        if (e.dtype != tensor.dtype())
            raise<ValueError>("load: '" + path + "': tensor '" + name + "' is " + dtype_name(e.dtype) +
                              " in the file, " + dtype_name(tensor.dtype()) + " in the destination");
        if (e.shape != tensor.shape())
            raise<ValueError>("load: '" + path + "': tensor '" + name + "' has shape " + shape_str(e.shape) +
                              " in the file, " + shape_str(tensor.shape()) + " in the destination");
        plan.emplace_back(tensor, &e);
    }
    for (const Entry &e : entries)
        if (!wanted.count(e.name))
            raise<ValueError>("load: '" + path + "' has tensor '" + e.name + "' that the destination does not have");

    NoGradGuard no_grad;
    for (auto &[tensor, e] : plan) tensor.assign_(to_tensor(*e, tensor.device()));
}

void load(const std::string &path, Module &module) { load(path, module.named_parameters()); }

NamedTensors load_all(const std::string &path, std::optional<Device> device) {
    std::vector<Entry> entries = parse(path);
    Device target = device ? *device : default_device();
    NamedTensors out;
    for (const Entry &e : entries) out.emplace_back(e.name, to_tensor(e, target));
    return out;
}

}  // namespace tinyfin::nn
