// The cpu plugin called directly through the plugin ABI, with no core: dlopen the built .so,
// call tf_plugin_entry with a small host table, then drive supports()/run() with hand-built
// descriptors and compare against hand-computed values.
#include <doctest/doctest.h>

#include <tinyfin/plugin.h>

#include "plugin_closer.hpp"

#include <dlfcn.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#ifndef TF_CPU_PLUGIN_PATH
#error "build with -DTF_CPU_PLUGIN_PATH=\"/path/to/tinyfin-cpu.so\""
#endif

namespace {

// ---- Loading the plugin -------------------------------------------------------------------

std::vector<std::string> &log_lines() {
    static std::vector<std::string> lines;
    return lines;
}

void host_log(int32_t level, const char *plugin, const char *message) {
    log_lines().push_back(std::to_string(level) + " " + plugin + ": " + message);
}

const char *host_get_env(const char *name) { return std::getenv(name); }

const tf_host_api k_host = {sizeof(tf_host_api), TF_ABI_VERSION, host_log, host_get_env};

using DlCloser = PluginCloser<&k_host>;

struct LoadedPlugin {
    std::unique_ptr<void, DlCloser> handle;
    tf_plugin_entry_fn entry = nullptr;
    const tf_plugin *table = nullptr;
};

const LoadedPlugin &loaded() {
    static const LoadedPlugin plugin = [] {
        LoadedPlugin p;
        p.handle.reset(dlopen(TF_CPU_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL));
        const char *why = dlerror();
        INFO("dlopen(" TF_CPU_PLUGIN_PATH "): ", why ? why : "");
        REQUIRE(p.handle != nullptr);
        p.entry = reinterpret_cast<tf_plugin_entry_fn>(dlsym(p.handle.get(), TF_PLUGIN_ENTRY_NAME));
        REQUIRE((p.entry != nullptr));  // parenthesised: doctest cannot print function pointers
        p.table = p.entry(&k_host);
        REQUIRE(p.table != nullptr);
        tf_error err{sizeof(tf_error), {}};
        REQUIRE(p.table->probe(&err) == TF_STATUS_OK);
        REQUIRE(p.table->init(&err) == TF_STATUS_OK);
        return p;
    }();
    return plugin;
}

const tf_plugin &P() { return *loaded().table; }

tf_error make_error() {
    tf_error err{};
    err.struct_size = sizeof err;
    return err;
}

// ---- Test-side dtype handling, independent of the plugin's ----------------------------------

size_t size_of(int32_t dtype) {
    switch (dtype) {
    case TF_DTYPE_F32:
    case TF_DTYPE_I32: return 4;
    case TF_DTYPE_F16:
    case TF_DTYPE_BF16: return 2;
    case TF_DTYPE_I64: return 8;
    default: return 1;
    }
}

const char *name_of(int32_t dtype) {
    static const char *names[] = {"f32", "f16", "bf16", "i32", "i64", "bool"};
    return dtype >= 0 && dtype < TF_DTYPE_COUNT_ ? names[dtype] : "?";
}

double half_value(uint16_t h) {
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

// The f16 pattern of a value f16 holds exactly (searched, so it cannot share a bug with the plugin).
uint16_t half_bits(double v) {
    for (uint32_t b = 0; b < 0x10000; ++b) {
        const double h = half_value(static_cast<uint16_t>(b));
        if (h == v && std::signbit(h) == std::signbit(v)) return static_cast<uint16_t>(b);
    }
    if (std::isnan(v)) return 0x7e00;
    FAIL("test bug: ", v, " is not exact in f16");
    return 0;
}

uint16_t bf16_bits(double v) {
    const float f = static_cast<float>(v);
    if (!std::isnan(v)) REQUIRE_MESSAGE(static_cast<double>(f) == v, "test bug: ", v, " is not exact in f32");
    const uint32_t b = std::bit_cast<uint32_t>(f);
    if (!std::isnan(v)) REQUIRE_MESSAGE((b & 0xffff) == 0, "test bug: ", v, " is not exact in bf16");
    return static_cast<uint16_t>(b >> 16);
}

double bf16_value(uint16_t h) { return std::bit_cast<float>(uint32_t{h} << 16); }

void put(char *p, int32_t dtype, double v) {
    switch (dtype) {
    case TF_DTYPE_F32: {
        const float f = static_cast<float>(v);
        if (!std::isnan(v)) REQUIRE_MESSAGE(static_cast<double>(f) == v, "test bug: ", v, " is not exact in f32");
        std::memcpy(p, &f, 4);
        return;
    }
    case TF_DTYPE_F16: {
        const uint16_t b = half_bits(v);
        std::memcpy(p, &b, 2);
        return;
    }
    case TF_DTYPE_BF16: {
        const uint16_t b = bf16_bits(v);
        std::memcpy(p, &b, 2);
        return;
    }
    case TF_DTYPE_I32: {
        const auto i = static_cast<int32_t>(v);
        REQUIRE(static_cast<double>(i) == v);
        std::memcpy(p, &i, 4);
        return;
    }
    case TF_DTYPE_I64: {
        const auto i = static_cast<int64_t>(v);
        REQUIRE(static_cast<double>(i) == v);
        std::memcpy(p, &i, 8);
        return;
    }
    default: *reinterpret_cast<unsigned char *>(p) = v != 0; return;
    }
}

double take(const char *p, int32_t dtype) {
    switch (dtype) {
    case TF_DTYPE_F32: {
        float f;
        std::memcpy(&f, p, 4);
        return f;
    }
    case TF_DTYPE_F16: {
        uint16_t b;
        std::memcpy(&b, p, 2);
        return half_value(b);
    }
    case TF_DTYPE_BF16: {
        uint16_t b;
        std::memcpy(&b, p, 2);
        return bf16_value(b);
    }
    case TF_DTYPE_I32: {
        int32_t i;
        std::memcpy(&i, p, 4);
        return i;
    }
    case TF_DTYPE_I64: {
        int64_t i;
        std::memcpy(&i, p, 8);
        return static_cast<double>(i);
    }
    default: return *reinterpret_cast<const unsigned char *>(p);
    }
}

// ---- Test tensors -------------------------------------------------------------------------

constexpr unsigned char k_sentinel = 0xab;

// Storage from the plugin's own buffer_alloc, filled with sentinel bytes so a test can tell
// which bytes a kernel wrote.
struct Block {
    tf_buffer *buffer = nullptr;
    char *data = nullptr;
    size_t bytes = 0;

    explicit Block(size_t n) : bytes(n) {
        tf_error err = make_error();
        REQUIRE(P().buffer_alloc(0, n > 0 ? n : 1, &buffer, &err) == TF_STATUS_OK);
        data = static_cast<char *>(P().buffer_host_ptr(buffer));
        REQUIRE(data != nullptr);
        std::memset(data, k_sentinel, n);
    }
    ~Block() { P().buffer_free(buffer); }
    Block(const Block &) = delete;
    Block &operator=(const Block &) = delete;
};

struct TensorDesc {
    std::shared_ptr<Block> mem;
    tf_tensor_desc d{};
};

using Dims = std::vector<int64_t>;

int64_t count_of(const Dims &shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
}

tf_tensor_desc describe(int32_t dtype, const Dims &shape, const Dims &strides, int64_t offset_elems) {
    tf_tensor_desc d{};
    d.struct_size = sizeof d;
    d.dtype = dtype;
    d.rank = static_cast<int32_t>(shape.size());
    for (size_t i = 0; i < shape.size(); ++i) {
        d.shape[i] = shape[i];
        d.strides[i] = strides[i];
    }
    d.offset = static_cast<uint64_t>(offset_elems) * size_of(dtype);
    return d;
}

Dims contiguous_strides(const Dims &shape) {
    Dims strides(shape.size());
    int64_t s = 1;
    for (size_t i = shape.size(); i-- > 0;) {
        strides[i] = s;
        s *= shape[i];
    }
    return strides;
}

TensorDesc make(int32_t dtype, const Dims &shape) {
    TensorDesc t;
    t.mem = std::make_shared<Block>(static_cast<size_t>(count_of(shape)) * size_of(dtype));
    t.d = describe(dtype, shape, contiguous_strides(shape), 0);
    t.d.buffer = t.mem->buffer;
    t.d.data = t.mem->data;
    return t;
}

// A view of base's storage with its own shape, strides (elements) and offset (elements).
TensorDesc view(const TensorDesc &base, const Dims &shape, const Dims &strides, int64_t offset_elems = 0) {
    TensorDesc t = base;
    t.d = describe(base.d.dtype, shape, strides, offset_elems);
    t.d.buffer = base.d.buffer;
    t.d.data = base.d.data;
    return t;
}

// Rank 2: the transpose as a view.
TensorDesc transposed(const TensorDesc &t) {
    return view(t, {t.d.shape[1], t.d.shape[0]}, {t.d.strides[1], t.d.strides[0]},
                static_cast<int64_t>(t.d.offset / size_of(t.d.dtype)));
}

// A tensor without storage: only valid with zero elements.
TensorDesc no_data(int32_t dtype, const Dims &shape) {
    TensorDesc t;
    t.d = describe(dtype, shape, contiguous_strides(shape), 0);
    return t;
}

// Byte offsets (from data) of the view's elements in row-major order.
std::vector<size_t> element_offsets(const tf_tensor_desc &d) {
    std::vector<size_t> offsets;
    int64_t n = 1;
    for (int i = 0; i < d.rank; ++i) n *= d.shape[i];
    std::vector<int64_t> idx(static_cast<size_t>(d.rank), 0);
    for (int64_t e = 0; e < n; ++e) {
        int64_t off = 0;
        for (int i = 0; i < d.rank; ++i) off += idx[static_cast<size_t>(i)] * d.strides[i];
        offsets.push_back(d.offset + static_cast<size_t>(off) * size_of(d.dtype));
        for (int i = d.rank - 1; i >= 0; --i) {
            if (++idx[static_cast<size_t>(i)] < d.shape[i]) break;
            idx[static_cast<size_t>(i)] = 0;
        }
    }
    return offsets;
}

void set(const TensorDesc &t, const std::vector<double> &values) {
    const auto offsets = element_offsets(t.d);
    REQUIRE(offsets.size() == values.size());
    for (size_t i = 0; i < values.size(); ++i) put(t.mem->data + offsets[i], t.d.dtype, values[i]);
}

std::vector<double> get(const TensorDesc &t) {
    std::vector<double> values;
    for (size_t off : element_offsets(t.d)) values.push_back(take(t.mem->data + off, t.d.dtype));
    return values;
}

// Raw element access for bit patterns and extreme integers.
template <class T>
void set_raw(const TensorDesc &t, const std::vector<T> &values) {
    REQUIRE(sizeof(T) == size_of(t.d.dtype));
    const auto offsets = element_offsets(t.d);
    REQUIRE(offsets.size() == values.size());
    for (size_t i = 0; i < values.size(); ++i) std::memcpy(t.mem->data + offsets[i], &values[i], sizeof(T));
}

template <class T>
std::vector<T> get_raw(const TensorDesc &t) {
    REQUIRE(sizeof(T) == size_of(t.d.dtype));
    std::vector<T> values;
    for (size_t off : element_offsets(t.d)) {
        T v;
        std::memcpy(&v, t.mem->data + off, sizeof(T));
        values.push_back(v);
    }
    return values;
}

TensorDesc make(int32_t dtype, const Dims &shape, const std::vector<double> &values) {
    TensorDesc t = make(dtype, shape);
    set(t, values);
    return t;
}

void check_values(const TensorDesc &t, const std::vector<double> &expected) {
    const auto got = get(t);
    REQUIRE(got.size() == expected.size());
    for (size_t i = 0; i < got.size(); ++i) {
        INFO(name_of(t.d.dtype), " element ", i, ": got ", got[i], ", expected ", expected[i]);
        if (std::isnan(expected[i]))
            CHECK(std::isnan(got[i]));
        else
            CHECK(got[i] == expected[i]);
    }
}

// True when no byte of t's storage outside t's elements changed from the sentinel.
bool only_elements_written(const TensorDesc &t) {
    std::vector<bool> mine(t.mem->bytes, false);
    for (size_t off : element_offsets(t.d))
        for (size_t b = 0; b < size_of(t.d.dtype); ++b) mine[off + b] = true;
    for (size_t b = 0; b < t.mem->bytes; ++b)
        if (!mine[b] && static_cast<unsigned char>(t.mem->data[b]) != k_sentinel) return false;
    return true;
}

bool untouched(const TensorDesc &t) {
    for (size_t b = 0; b < t.mem->bytes; ++b)
        if (static_cast<unsigned char>(t.mem->data[b]) != k_sentinel) return false;
    return true;
}

// ---- Calling ops --------------------------------------------------------------------------

struct Call {
    tf_op_desc op{};
    std::vector<tf_tensor_desc> inputs;
    tf_tensor_desc output{};

    Call(uint32_t id, std::initializer_list<const TensorDesc *> ins, const TensorDesc &out,
         const void *params = nullptr) {
        for (const TensorDesc *t : ins) inputs.push_back(t->d);
        output = out.d;
        op.struct_size = sizeof op;
        op.op = id;
        op.n_inputs = static_cast<uint32_t>(inputs.size());
        op.n_outputs = 1;
        op.inputs = inputs.empty() ? nullptr : inputs.data();
        op.outputs = &output;
        op.params = params;
    }
    Call(const Call &) = delete;

    int32_t supports() const { return P().supports(0, &op); }
    tf_status run(std::string *message = nullptr) const {
        tf_error err = make_error();
        const tf_status status = P().run(0, &op, &err);
        if (message) *message = err.message;
        return status;
    }
};

void run_ok(uint32_t id, std::initializer_list<const TensorDesc *> ins, const TensorDesc &out,
            const void *params = nullptr) {
    const Call c(id, ins, out, params);
    INFO("op ", id, " dtype ", name_of(out.d.dtype));
    REQUIRE(c.supports() == 1);
    std::string message;
    const tf_status status = c.run(&message);
    INFO("message: ", message);
    REQUIRE(status == TF_STATUS_OK);
}

tf_params_reduce reduce_params(uint32_t mask) { return {sizeof(tf_params_reduce), mask}; }
tf_params_fill fill_params(double value) { return {sizeof(tf_params_fill), value}; }

constexpr int32_t k_numeric[] = {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16, TF_DTYPE_I32, TF_DTYPE_I64};
constexpr int32_t k_float[] = {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16};
constexpr int32_t k_all[] = {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16, TF_DTYPE_I32, TF_DTYPE_I64, TF_DTYPE_BOOL};

bool is_float(int32_t dtype) { return dtype <= TF_DTYPE_BF16; }

std::string hex(uint32_t v) {
    char text[16];
    std::snprintf(text, sizeof text, "0x%x", v);
    return text;
}

uint32_t f32_bits(float f) { return std::bit_cast<uint32_t>(f); }
float bits_f32(uint32_t b) { return std::bit_cast<float>(b); }

}  // namespace

// ---- Plugin table, device, buffers ------------------------------------------------------------

TEST_CASE("entry point returns the cpu table and refuses another ABI major") {
    const tf_plugin &p = P();
    CHECK(p.struct_size == sizeof(tf_plugin));
    CHECK(p.abi_version == TF_ABI_VERSION);
    CHECK(std::string(p.name) == "cpu");
    CHECK(p.priority == 0);
    REQUIRE(p.version != nullptr);
    CHECK(std::strlen(p.version) > 0);
    CHECK((p.probe != nullptr));
    CHECK((p.init != nullptr));
    CHECK((p.shutdown != nullptr));
    CHECK((p.device_count != nullptr));
    CHECK((p.device_info != nullptr));
    CHECK((p.buffer_alloc != nullptr));
    CHECK((p.buffer_free != nullptr));
    CHECK((p.buffer_host_ptr != nullptr));
    CHECK((p.buffer_write != nullptr));
    CHECK((p.buffer_read != nullptr));
    CHECK((p.buffer_copy != nullptr));
    CHECK((p.supports != nullptr));
    CHECK((p.run != nullptr));
    CHECK((p.synchronize != nullptr));
    CHECK((p.list_features != nullptr));

    const tf_plugin_entry_fn entry = loaded().entry;
    CHECK(entry(nullptr) == nullptr);
    tf_host_api other = k_host;
    other.abi_version = (2u << 16) | 0;
    CHECK(entry(&other) == nullptr);
    other.abi_version = (0u << 16) | 9;
    CHECK(entry(&other) == nullptr);
    // A newer minor of the same major is fine.
    other.abi_version = (uint32_t{TF_ABI_VERSION_MAJOR} << 16) | 7;
    CHECK(entry(&other) == &p);
    CHECK(entry(&k_host) == &p);  // back to the test's host table
}

TEST_CASE("one cpu device") {
    tf_error err = make_error();
    CHECK(P().probe(&err) == TF_STATUS_OK);
    CHECK(P().init(&err) == TF_STATUS_OK);
    REQUIRE(P().device_count() == 1);

    tf_device_info info{};
    info.struct_size = sizeof info;
    REQUIRE(P().device_info(0, &info, &err) == TF_STATUS_OK);
    CHECK(info.struct_size == sizeof info);
    CHECK(info.kind == TF_DEVICE_KIND_CPU);
    CHECK(info.host_addressable == 1);
    CHECK(std::strlen(info.name) > 0);
    CHECK(std::strlen(info.name) < sizeof info.name);
    CHECK(info.memory_total > 0);
    CHECK(info.memory_free <= info.memory_total);
    CHECK(std::string(info.uuid).empty());
    MESSAGE("cpu device: ", info.name);

    CHECK(P().device_info(1, &info, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(err.message).find("1") != std::string::npos);
    CHECK(P().synchronize(0, &err) == TF_STATUS_OK);
}

TEST_CASE("list_features reports simd and threads") {
    std::map<std::string, std::string> features;
    P().list_features(
        [](void *user, const char *key, const char *value) {
            (*static_cast<std::map<std::string, std::string> *>(user))[key] = value;
        },
        &features);
    REQUIRE(features.count("simd") == 1);
    const std::string simd = features["simd"];
    CHECK((simd == "avx2" || simd == "sse2" || simd == "none"));
    // The thread pool's size (TINYFIN_THREADS, else the cores) and the GEMM's instruction set.
    CHECK(std::atoi(features["threads"].c_str()) >= 1);
    const std::string kernels = features["kernels"];
    CHECK((kernels == "generic" || kernels == "avx2" || kernels == "avx512"));
}

TEST_CASE("buffers: aligned, bounds-checked, and a huge request fails cleanly") {
    tf_error err = make_error();
    tf_buffer *a = nullptr, *b = nullptr;
    REQUIRE(P().buffer_alloc(0, 100, &a, &err) == TF_STATUS_OK);
    REQUIRE(P().buffer_alloc(0, 100, &b, &err) == TF_STATUS_OK);
    CHECK(reinterpret_cast<uintptr_t>(P().buffer_host_ptr(a)) % 64 == 0);

    unsigned char src[100], dst[100];
    for (int i = 0; i < 100; ++i) src[i] = static_cast<unsigned char>(i * 7);
    CHECK(P().buffer_write(a, 0, src, 100, &err) == TF_STATUS_OK);
    CHECK(P().buffer_copy(b, 10, a, 20, 50, &err) == TF_STATUS_OK);
    std::memset(dst, 0, sizeof dst);
    CHECK(P().buffer_read(b, 10, dst, 50, &err) == TF_STATUS_OK);
    CHECK(std::memcmp(dst, src + 20, 50) == 0);
    CHECK(std::memcmp(P().buffer_host_ptr(a), src, 100) == 0);

    err = make_error();
    CHECK(P().buffer_write(a, 90, src, 20, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(err.message).find("100") != std::string::npos);
    CHECK(P().buffer_read(a, 101, dst, 0, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(P().buffer_read(a, 1, dst, UINT64_MAX, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(P().buffer_copy(a, 0, b, 60, 41, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(P().buffer_read(a, 100, dst, 0, &err) == TF_STATUS_OK);
    P().buffer_free(a);
    P().buffer_free(b);

    tf_buffer *huge = reinterpret_cast<tf_buffer *>(&err);  // must be reset to NULL
    err = make_error();
    CHECK(P().buffer_alloc(0, uint64_t{1} << 50, &huge, &err) == TF_STATUS_OUT_OF_MEMORY);
    CHECK(huge == nullptr);
    CHECK(std::string(err.message).find("1125899906842624") != std::string::npos);
    CHECK(P().buffer_alloc(0, UINT64_MAX, &huge, &err) == TF_STATUS_OUT_OF_MEMORY);
    CHECK(P().buffer_alloc(0, 0, &huge, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(P().buffer_alloc(1, 8, &huge, &err) == TF_STATUS_INVALID_ARGUMENT);
}

// ---- f16 / bf16 conversions -----------------------------------------------------------------

TEST_CASE("f32 -> f16 rounds to nearest even on known bit patterns") {
    struct Row {
        uint32_t f32;
        uint16_t f16;
    };
    const Row rows[] = {
        {0x3f800000, 0x3c00},  // 1
        {0xc0000000, 0xc000},  // -2
        {0x00000000, 0x0000},  // 0
        {0x80000000, 0x8000},  // -0
        {0x477fe000, 0x7bff},  // 65504, the largest f16
        {0x477fef00, 0x7bff},  // 65519: below the midpoint to infinity
        {0x477ff000, 0x7c00},  // 65520: the midpoint, ties to even = infinity
        {0x49742400, 0x7c00},  // 1e6
        {0x7f800000, 0x7c00},  // inf
        {0xff800000, 0xfc00},  // -inf
        {0x33800000, 0x0001},  // 2^-24, the smallest subnormal
        {0x33000000, 0x0000},  // 2^-25: tie between 0 and 2^-24, to even
        {0x33400000, 0x0001},  // 1.5 * 2^-25
        {0x387fc000, 0x03ff},  // 1023 * 2^-24, the largest subnormal
        {0x38800000, 0x0400},  // 2^-14, the smallest normal
        {0x3f801000, 0x3c00},  // 1 + 2^-11: tie, to even (down)
        {0x3f803000, 0x3c02},  // 1 + 3 * 2^-11: tie, to even (up)
        {0x3f801001, 0x3c01},  // just above the tie
        {0x3dcccccd, 0x2e66},  // 0.1f
        {0x7fc00000, 0x7e00},  // quiet NaN
        {0xffc00000, 0xfe00},  // negative quiet NaN keeps its sign
        {0x7f800001, 0x7e00},  // signalling NaN stays NaN (quietened), not infinity
    };
    const size_t n = std::size(rows);
    TensorDesc in = make(TF_DTYPE_F32, {static_cast<int64_t>(n)});
    TensorDesc out = make(TF_DTYPE_F16, {static_cast<int64_t>(n)});
    std::vector<uint32_t> src;
    for (const Row &r : rows) src.push_back(r.f32);
    set_raw(in, src);
    run_ok(TF_OP_CAST, {&in}, out);
    const auto got = get_raw<uint16_t>(out);
    for (size_t i = 0; i < n; ++i) {
        INFO("f32 ", hex(rows[i].f32), " -> got ", hex(got[i]), ", expected ", hex(rows[i].f16));
        CHECK(got[i] == rows[i].f16);
    }
}

TEST_CASE("f32 -> bf16 rounds to nearest even on known bit patterns") {
    struct Row {
        uint32_t f32;
        uint16_t bf16;
    };
    const Row rows[] = {
        {0x3f800000, 0x3f80},  // 1
        {0x3f808000, 0x3f80},  // 1 + 2^-8: tie, to even (down)
        {0x3f818000, 0x3f82},  // tie, to even (up)
        {0x3f808001, 0x3f81},  // just above the tie
        {0x7f7fffff, 0x7f80},  // FLT_MAX rounds up to infinity
        {0x7f7f7fff, 0x7f7f}, {0x00000001, 0x0000},  // smallest f32 subnormal
        {0x00008000, 0x0000},  // tie, to even
        {0x00018000, 0x0002}, {0x80000000, 0x8000},  // -0
        {0x7f800000, 0x7f80},  // inf
        {0x7fc00000, 0x7fc0},  // quiet NaN
        {0xffc00001, 0xffc0},  // negative NaN
        {0x7f800001, 0x7fc0},  // signalling NaN stays NaN
    };
    const size_t n = std::size(rows);
    TensorDesc in = make(TF_DTYPE_F32, {static_cast<int64_t>(n)});
    TensorDesc out = make(TF_DTYPE_BF16, {static_cast<int64_t>(n)});
    std::vector<uint32_t> src;
    for (const Row &r : rows) src.push_back(r.f32);
    set_raw(in, src);
    run_ok(TF_OP_CAST, {&in}, out);
    const auto got = get_raw<uint16_t>(out);
    for (size_t i = 0; i < n; ++i) {
        INFO("f32 ", hex(rows[i].f32), " -> got ", hex(got[i]), ", expected ", hex(rows[i].bf16));
        CHECK(got[i] == rows[i].bf16);
    }
}

TEST_CASE("every f16 and bf16 pattern widens to f32 exactly and comes back unchanged") {
    for (int32_t dtype : {TF_DTYPE_F16, TF_DTYPE_BF16}) {
        CAPTURE(name_of(dtype));
        TensorDesc narrow = make(dtype, {0x10000});
        TensorDesc wide = make(TF_DTYPE_F32, {0x10000});
        TensorDesc back = make(dtype, {0x10000});
        std::vector<uint16_t> all(0x10000);
        for (uint32_t b = 0; b < 0x10000; ++b) all[b] = static_cast<uint16_t>(b);
        set_raw(narrow, all);
        run_ok(TF_OP_CAST, {&narrow}, wide);
        run_ok(TF_OP_CAST, {&wide}, back);
        const auto widened = get_raw<uint32_t>(wide);
        const auto returned = get_raw<uint16_t>(back);
        const uint16_t quiet = dtype == TF_DTYPE_F16 ? 0x0200 : 0x0040;
        int wrong = 0;
        for (uint32_t b = 0; b < 0x10000; ++b) {
            const double expected =
                dtype == TF_DTYPE_F16 ? half_value(static_cast<uint16_t>(b)) : bf16_value(static_cast<uint16_t>(b));
            const float got = bits_f32(widened[b]);
            bool ok;
            if (std::isnan(expected))
                ok = std::isnan(got) && std::signbit(got) == std::signbit(expected) && returned[b] == (b | quiet);
            else
                ok = static_cast<double>(got) == expected && std::signbit(got) == std::signbit(expected) &&
                     returned[b] == b;
            if (!ok && ++wrong <= 5)
                FAIL_CHECK("pattern ", hex(b), " -> f32 ", hex(widened[b]), " -> ", hex(returned[b]));
        }
        CHECK(wrong == 0);
    }
}

TEST_CASE("f16 <-> bf16 casts round once") {
    TensorDesc h = make(TF_DTYPE_F16, {3});
    TensorDesc b = make(TF_DTYPE_BF16, {3});
    set_raw<uint16_t>(h, {0x3c00, 0x7bff, 0x0001});  // 1, 65504, 2^-24
    run_ok(TF_OP_CAST, {&h}, b);
    // 65504 = 1.1111111111b * 2^15 has 11 bits; bf16 keeps 8 and rounds up to 2^16.
    CHECK(get_raw<uint16_t>(b) == std::vector<uint16_t>{0x3f80, 0x4780, 0x3380});

    set_raw<uint16_t>(b, {0x4780, 0x3eab, 0xff80});  // 65536, 171/512, -inf
    run_ok(TF_OP_CAST, {&b}, h);
    CHECK(get_raw<uint16_t>(h) == std::vector<uint16_t>{0x7c00, 0x3558, 0xfc00});
}

TEST_CASE("narrowing from double or a wide integer rounds once, not through f32") {
    // 1 + 2^-11 + 2^-40 is just above an f16 tie; through f32 the 2^-40 is lost and the tie
    // goes down to even. Rounded once it goes up.
    TensorDesc h = make(TF_DTYPE_F16, {});
    const tf_params_fill fh = fill_params(1.0 + 0x1p-11 + 0x1p-40);
    run_ok(TF_OP_FILL, {}, h, &fh);
    CHECK(get_raw<uint16_t>(h) == std::vector<uint16_t>{0x3c01});

    TensorDesc b = make(TF_DTYPE_BF16, {});
    const tf_params_fill fb = fill_params(1.0 + 0x1p-8 + 0x1p-30);
    run_ok(TF_OP_FILL, {}, b, &fb);
    CHECK(get_raw<uint16_t>(b) == std::vector<uint16_t>{0x3f81});

    // 2^24 + 2^16 + 1: f32 rounds it to 2^24 + 2^16 (a bf16 tie, then down to 2^24); the exact
    // value rounds up to 2^24 + 2^17 = 0x4b81.
    TensorDesc i64 = make(TF_DTYPE_I64, {8});
    TensorDesc i32 = make(TF_DTYPE_I32, {1});
    set_raw<int64_t>(i64, {16842753, 2049, 2051, 65519, 65520, -65520, INT64_MAX, 16777217});
    set_raw<int32_t>(i32, {16842753});
    TensorDesc b1 = make(TF_DTYPE_BF16, {1});
    run_ok(TF_OP_CAST, {&i32}, b1);
    CHECK(get_raw<uint16_t>(b1) == std::vector<uint16_t>{0x4b81});

    TensorDesc b8 = make(TF_DTYPE_BF16, {8});
    run_ok(TF_OP_CAST, {&i64}, b8);
    CHECK(get_raw<uint16_t>(b8)[0] == 0x4b81);

    TensorDesc h8 = make(TF_DTYPE_F16, {8});
    run_ok(TF_OP_CAST, {&i64}, h8);
    const auto hb = get_raw<uint16_t>(h8);
    CHECK(hb[1] == 0x6800);  // 2049: tie between 2048 and 2050, to even
    CHECK(hb[2] == 0x6802);  // 2051: tie between 2050 and 2052, to even
    CHECK(hb[3] == 0x7bff);  // 65519 -> 65504
    CHECK(hb[4] == 0x7c00);  // 65520 -> inf
    CHECK(hb[5] == 0xfc00);  // -65520 -> -inf
    CHECK(hb[6] == 0x7c00);

    TensorDesc f8 = make(TF_DTYPE_F32, {8});
    run_ok(TF_OP_CAST, {&i64}, f8);
    const auto fb8 = get_raw<uint32_t>(f8);
    CHECK(fb8[6] == 0x5f000000);  // INT64_MAX -> 2^63
    CHECK(fb8[7] == f32_bits(16777216.0f));  // 2^24 + 1: tie, to even
}

// ---- cast ---------------------------------------------------------------------------------

TEST_CASE("cast: every pair of dtypes") {
    for (int32_t from : k_all) {
        for (int32_t to : k_all) {
            CAPTURE(name_of(from));
            CAPTURE(name_of(to));
            TensorDesc in = make(from, {2, 2});
            const bool from_bool = from == TF_DTYPE_BOOL;
            set(in, from_bool ? std::vector<double>{0, 1, 1, 0} : std::vector<double>{0, 1, 3, -2});
            TensorDesc out = make(to, {2, 2});
            run_ok(TF_OP_CAST, {&in}, out);
            if (to == TF_DTYPE_BOOL)
                check_values(out, {0, 1, 1, from_bool ? 0.0 : 1.0});
            else
                check_values(out, from_bool ? std::vector<double>{0, 1, 1, 0} : std::vector<double>{0, 1, 3, -2});
            CHECK(only_elements_written(out));
        }
    }
}

TEST_CASE("cast: float -> int truncates toward zero and saturates") {
    TensorDesc f = make(TF_DTYPE_F32, {12});
    set_raw<float>(f, {3.7f, -3.7f, 1e10f, -1e10f, NAN, INFINITY, -INFINITY, 2147483520.0f, 2147483648.0f,
                       -2147483648.0f, 0.99f, -0.0f});
    TensorDesc i = make(TF_DTYPE_I32, {12});
    run_ok(TF_OP_CAST, {&f}, i);
    CHECK(get_raw<int32_t>(i) == std::vector<int32_t>{3, -3, INT32_MAX, INT32_MIN, 0, INT32_MAX, INT32_MIN, 2147483520,
                                                      INT32_MAX, INT32_MIN, 0, 0});

    TensorDesc f5 = make(TF_DTYPE_F32, {6});
    set_raw<float>(f5, {1e30f, -1e30f, -9223372036854775808.0f, 9223372036854775808.0f, 9223371487098961920.0f, NAN});
    TensorDesc l = make(TF_DTYPE_I64, {6});
    run_ok(TF_OP_CAST, {&f5}, l);
    CHECK(get_raw<int64_t>(l) ==
          std::vector<int64_t>{INT64_MAX, INT64_MIN, INT64_MIN, INT64_MAX, 9223371487098961920LL, 0});

    TensorDesc h = make(TF_DTYPE_F16, {4});
    set_raw<uint16_t>(h, {0xfbff, 0x7c00, 0x7e00, 0x3e00});  // -65504, inf, NaN, 1.5
    TensorDesc hi = make(TF_DTYPE_I32, {4});
    run_ok(TF_OP_CAST, {&h}, hi);
    CHECK(get_raw<int32_t>(hi) == std::vector<int32_t>{-65504, INT32_MAX, 0, 1});

    TensorDesc b = make(TF_DTYPE_BF16, {3});
    set_raw<uint16_t>(b, {0x4f00, 0xcf00, 0xc2f7});  // 2^31, -2^31, -123.5
    TensorDesc bi = make(TF_DTYPE_I32, {3});
    run_ok(TF_OP_CAST, {&b}, bi);
    CHECK(get_raw<int32_t>(bi) == std::vector<int32_t>{INT32_MAX, INT32_MIN, -123});
}

TEST_CASE("cast: bool, and integer narrowing wraps") {
    TensorDesc f = make(TF_DTYPE_F32, {5});
    set_raw<float>(f, {0.0f, -0.0f, 0.5f, NAN, -INFINITY});
    TensorDesc fb = make(TF_DTYPE_BOOL, {5});
    run_ok(TF_OP_CAST, {&f}, fb);
    CHECK(get_raw<uint8_t>(fb) == std::vector<uint8_t>{0, 0, 1, 1, 1});

    TensorDesc i = make(TF_DTYPE_I32, {3});
    set_raw<int32_t>(i, {0, 2, -1});
    TensorDesc ib = make(TF_DTYPE_BOOL, {3});
    run_ok(TF_OP_CAST, {&i}, ib);
    CHECK(get_raw<uint8_t>(ib) == std::vector<uint8_t>{0, 1, 1});

    TensorDesc bools = make(TF_DTYPE_BOOL, {3});
    set_raw<uint8_t>(bools, {1, 0, 2});  // a stray 2 still reads as true, never as 2
    TensorDesc bh = make(TF_DTYPE_F16, {3});
    run_ok(TF_OP_CAST, {&bools}, bh);
    CHECK(get_raw<uint16_t>(bh) == std::vector<uint16_t>{0x3c00, 0x0000, 0x3c00});

    TensorDesc l = make(TF_DTYPE_I64, {4});
    set_raw<int64_t>(l, {4294967301LL, -1, 2147483648LL, -7});
    TensorDesc li = make(TF_DTYPE_I32, {4});
    run_ok(TF_OP_CAST, {&l}, li);
    CHECK(get_raw<int32_t>(li) == std::vector<int32_t>{5, -1, INT32_MIN, -7});
    TensorDesc back = make(TF_DTYPE_I64, {4});
    run_ok(TF_OP_CAST, {&li}, back);
    CHECK(get_raw<int64_t>(back) == std::vector<int64_t>{5, -1, INT32_MIN, -7});

    TensorDesc big = make(TF_DTYPE_I32, {1});
    set_raw<int32_t>(big, {70000});
    TensorDesc bigh = make(TF_DTYPE_F16, {1});
    run_ok(TF_OP_CAST, {&big}, bigh);
    CHECK(get_raw<uint16_t>(bigh) == std::vector<uint16_t>{0x7c00});
}

// ---- Elementwise ----------------------------------------------------------------------------

TEST_CASE("binary ops broadcast through stride 0, every dtype") {
    for (int32_t dt : k_numeric) {
        CAPTURE(name_of(dt));
        TensorDesc a = make(dt, {2, 3}, {1, 2, 3, 4, 5, 6});
        TensorDesc row = make(dt, {3}, {1, 2, 4});
        TensorDesc b = view(row, {2, 3}, {0, 1});  // [3] broadcast along axis 0
        TensorDesc out = make(dt, {2, 3});

        run_ok(TF_OP_ADD, {&a, &b}, out);
        check_values(out, {2, 4, 7, 5, 7, 10});
        run_ok(TF_OP_SUB, {&a, &b}, out);
        check_values(out, {0, 0, -1, 3, 3, 2});
        run_ok(TF_OP_MUL, {&a, &b}, out);
        check_values(out, {1, 4, 12, 4, 10, 24});
        run_ok(TF_OP_DIV, {&a, &b}, out);
        if (is_float(dt))
            check_values(out, {1, 1, 0.75, 4, 2.5, 1.5});
        else
            check_values(out, {1, 1, 0, 4, 2, 1});

        TensorDesc col = make(dt, {2}, {10, 20});
        TensorDesc c = view(col, {2, 3}, {1, 0});  // [2, 1] broadcast along axis 1
        run_ok(TF_OP_ADD, {&a, &c}, out);
        check_values(out, {11, 12, 13, 24, 25, 26});

        TensorDesc scalar = make(dt, {}, {3});
        TensorDesc s = view(scalar, {2, 3}, {0, 0});
        run_ok(TF_OP_SUB, {&s, &a}, out);
        check_values(out, {2, 1, 0, -1, -2, -3});
    }
}

TEST_CASE("elementwise on transposed and strided inputs and outputs") {
    for (int32_t dt : k_numeric) {
        CAPTURE(name_of(dt));
        // Transposed input: storage [3, 2] seen as [2, 3].
        TensorDesc st = make(dt, {3, 2}, {1, 2, 3, 4, 5, 6});
        TensorDesc t = transposed(st);
        TensorDesc b = make(dt, {2, 3}, {10, 20, 30, 40, 50, 60});
        TensorDesc out = make(dt, {2, 3});
        run_ok(TF_OP_ADD, {&t, &b}, out);
        check_values(out, {11, 23, 35, 42, 54, 66});

        // Slice with step 2 from offset 1.
        TensorDesc line = make(dt, {8}, {0, 1, 2, 3, 4, 5, 6, 7});
        TensorDesc odd = view(line, {4}, {2}, 1);
        TensorDesc neg = make(dt, {4});
        run_ok(TF_OP_NEG, {&odd}, neg);
        check_values(neg, {-1, -3, -5, -7});

        // Transposed output: out[i][j] lands at storage[j * 3 + i].
        TensorDesc x = make(dt, {3, 2}, {1, 2, 3, 4, 5, 6});
        TensorDesc out_storage = make(dt, {2, 3});
        TensorDesc out_t = transposed(out_storage);
        run_ok(TF_OP_ADD, {&x, &x}, out_t);
        check_values(out_t, {2, 4, 6, 8, 10, 12});
        check_values(out_storage, {2, 6, 10, 4, 8, 12});

        // Output sliced with step 3 from offset 1: the other bytes stay as they were.
        TensorDesc wide = make(dt, {10});
        TensorDesc every_third = view(wide, {3}, {3}, 1);
        TensorDesc y = make(dt, {3}, {-1, 2, -3});
        run_ok(TF_OP_RELU, {&y}, every_third);
        check_values(every_third, {0, 2, 0});
        CHECK(only_elements_written(every_third));

        // Rank 3, permuted input against a broadcast input.
        TensorDesc cube = make(dt, {2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
        TensorDesc perm = view(cube, {2, 2, 2}, {1, 4, 2});  // axes (2, 0, 1): p[i][j][k] = cube[j][k][i]
        TensorDesc ones = make(dt, {}, {1});
        TensorDesc bone = view(ones, {2, 2, 2}, {0, 0, 0});
        TensorDesc out3 = make(dt, {2, 2, 2});
        run_ok(TF_OP_MUL, {&perm, &bone}, out3);
        check_values(out3, {0, 2, 4, 6, 1, 3, 5, 7});
    }
}

// Dense f32 + - * / of one layout take a shortcut to the row loop; these layouts sit at its edges.
TEST_CASE("f32 arithmetic on dense operands: size-1 axes, offsets, lengths, misaligned data") {
    const uint32_t ops[] = {TF_OP_ADD, TF_OP_SUB, TF_OP_MUL, TF_OP_DIV};
    auto expect = [](uint32_t op, float x, float y) {
        return op == TF_OP_ADD ? x + y : op == TF_OP_SUB ? x - y : op == TF_OP_MUL ? x * y : x / y;
    };
    for (uint32_t op : ops) {
        CAPTURE(op);
        // A size-1 axis with any stride is still dense; the output sits at an offset in a larger
        // storage and only its elements are written.
        TensorDesc a = make(TF_DTYPE_F32, {2, 3}, {1, 2, 3, 4, 5, 6});
        TensorDesc a3 = view(a, {2, 1, 3}, {3, 99, 1});
        TensorDesc b = make(TF_DTYPE_F32, {2, 1, 3}, {7, 3, 2, 0.5, 8, 4});
        TensorDesc wide = make(TF_DTYPE_F32, {8});
        TensorDesc out = view(wide, {2, 1, 3}, {3, 3, 1}, 1);
        run_ok(op, {&a3, &b}, out);
        const std::vector<double> av = {1, 2, 3, 4, 5, 6}, bv = {7, 3, 2, 0.5, 8, 4};
        std::vector<double> want;
        for (size_t i = 0; i < av.size(); ++i) want.push_back(expect(op, float(av[i]), float(bv[i])));
        check_values(out, want);
        CHECK(only_elements_written(out));

        // Lengths around the vector widths, and data that is not float-aligned (any byte offset).
        for (int64_t n : {1, 15, 16, 17, 1000}) {
            for (uint64_t shift : {uint64_t{0}, uint64_t{2}}) {
                CAPTURE(n);
                CAPTURE(shift);
                const size_t bytes = static_cast<size_t>(n) * sizeof(float) + shift;
                std::vector<char> x(bytes), y(bytes), z(bytes + 4, 0x5a);
                std::vector<float> xs, ys;
                for (int64_t i = 0; i < n; ++i) {
                    xs.push_back(float(i % 13) - 6.5f);
                    ys.push_back(float(i % 7) + 0.25f);
                }
                std::memcpy(x.data() + shift, xs.data(), xs.size() * sizeof(float));
                std::memcpy(y.data() + shift, ys.data(), ys.size() * sizeof(float));
                tf_tensor_desc dx = describe(TF_DTYPE_F32, {n}, {1}, 0), dy = dx, dz = dx;
                dx.offset = dy.offset = dz.offset = shift;
                dx.data = x.data();
                dy.data = y.data();
                dz.data = z.data();
                tf_tensor_desc ins[2] = {dx, dy};
                tf_op_desc desc{sizeof(tf_op_desc), op, 2, 1, ins, &dz, nullptr};
                tf_error err = make_error();
                REQUIRE(P().run(0, &desc, &err) == TF_STATUS_OK);
                for (int64_t i = 0; i < n; ++i) {
                    float got;
                    std::memcpy(&got, z.data() + shift + i * sizeof(float), sizeof got);
                    REQUIRE(f32_bits(got) == f32_bits(expect(op, xs[i], ys[i])));
                }
                CHECK(static_cast<unsigned char>(z[bytes]) == 0x5a);  // nothing past the last element
            }
        }
    }
}

TEST_CASE("elementwise reads only desc.data, never the buffer") {
    std::vector<float> a = {1, 2, 3}, b = {4, 5, 6}, c(3, 0);
    tf_tensor_desc da = describe(TF_DTYPE_F32, {3}, {1}, 0), db = da, dc = da;
    da.data = a.data();
    db.data = b.data();
    dc.data = c.data();  // foreign host memory: buffer stays NULL
    tf_tensor_desc ins[2] = {da, db};
    tf_op_desc op{sizeof(tf_op_desc), TF_OP_ADD, 2, 1, ins, &dc, nullptr};
    tf_error err = make_error();
    REQUIRE(P().supports(0, &op) == 1);
    REQUIRE(P().run(0, &op, &err) == TF_STATUS_OK);
    CHECK(c == std::vector<float>{5, 7, 9});
}

TEST_CASE("unary ops, every dtype") {
    for (int32_t dt : k_numeric) {
        CAPTURE(name_of(dt));
        TensorDesc x = make(dt, {4}, {1, -2, 0, 6});
        TensorDesc out = make(dt, {4});
        run_ok(TF_OP_NEG, {&x}, out);
        check_values(out, {-1, 2, 0, -6});
        run_ok(TF_OP_RELU, {&x}, out);
        check_values(out, {1, 0, 0, 6});
    }
    // neg wraps INT_MIN; relu keeps NaN and -0.
    TensorDesc i = make(TF_DTYPE_I32, {2});
    set_raw<int32_t>(i, {INT32_MIN, INT32_MAX});
    TensorDesc io = make(TF_DTYPE_I32, {2});
    run_ok(TF_OP_NEG, {&i}, io);
    CHECK(get_raw<int32_t>(io) == std::vector<int32_t>{INT32_MIN, -INT32_MAX});
    TensorDesc l = make(TF_DTYPE_I64, {1});
    set_raw<int64_t>(l, {INT64_MIN});
    TensorDesc lo = make(TF_DTYPE_I64, {1});
    run_ok(TF_OP_NEG, {&l}, lo);
    CHECK(get_raw<int64_t>(lo) == std::vector<int64_t>{INT64_MIN});

    TensorDesc f = make(TF_DTYPE_F32, {3});
    set_raw<float>(f, {NAN, -0.0f, -INFINITY});
    TensorDesc fo = make(TF_DTYPE_F32, {3});
    run_ok(TF_OP_RELU, {&f}, fo);
    const auto r = get_raw<float>(fo);
    CHECK(std::isnan(r[0]));
    CHECK(f32_bits(r[1]) == 0x80000000u);
    CHECK(r[2] == 0.0f);
}

TEST_CASE("exp, float dtypes") {
    TensorDesc f = make(TF_DTYPE_F32, {5});
    set_raw<float>(f, {0.0f, 1.0f, -INFINITY, INFINITY, NAN});
    TensorDesc fo = make(TF_DTYPE_F32, {5});
    run_ok(TF_OP_EXP, {&f}, fo);
    const auto r = get_raw<float>(fo);
    CHECK(r[0] == 1.0f);
    CHECK(r[1] == doctest::Approx(2.718281828).epsilon(1e-7));
    CHECK(r[2] == 0.0f);
    CHECK(r[3] == INFINITY);
    CHECK(std::isnan(r[4]));

    // e = 2.71828... and e^2 = 7.38905... rounded to the narrow types by hand.
    TensorDesc h = make(TF_DTYPE_F16, {3}, {0, 1, 2});
    TensorDesc ho = make(TF_DTYPE_F16, {3});
    run_ok(TF_OP_EXP, {&h}, ho);
    CHECK(get_raw<uint16_t>(ho) == std::vector<uint16_t>{0x3c00, 0x4170, 0x4764});

    TensorDesc b = make(TF_DTYPE_BF16, {3}, {0, 1, 2});
    TensorDesc bo = make(TF_DTYPE_BF16, {3});
    run_ok(TF_OP_EXP, {&b}, bo);
    CHECK(get_raw<uint16_t>(bo) == std::vector<uint16_t>{0x3f80, 0x402e, 0x40ec});
}

TEST_CASE("exp on a dense f32 tensor is e^x in double rounded once") {
    // The dense f32 path (kernels_erf.cpp, vector_erf.hpp's exp_rounded) across the f32 range:
    // subnormal results, 0 below, inf above FLT_MAX; the same bits as libm's double exp rounded
    // to f32 (cpu-vector-erf sweeps 2 million arguments for the same).
    std::vector<float> x;
    for (int i = 0; i < 4099; ++i) x.push_back(-110.0f + 200.0f * static_cast<float>(i) / 4098.0f);
    TensorDesc f = make(TF_DTYPE_F32, {static_cast<int64_t>(x.size())});
    set_raw<float>(f, x);
    TensorDesc fo = make(TF_DTYPE_F32, {static_cast<int64_t>(x.size())});
    run_ok(TF_OP_EXP, {&f}, fo);
    const auto r = get_raw<float>(fo);
    int bad = 0;
    for (size_t i = 0; i < x.size(); ++i)
        bad += f32_bits(r[i]) != f32_bits(static_cast<float>(std::exp(static_cast<double>(x[i]))));
    CHECK(bad == 0);
    CHECK(r.front() == 0.0f);
    CHECK(r.back() == INFINITY);
}

TEST_CASE("division: integers truncate, floats follow IEEE") {
    for (int32_t dt : {TF_DTYPE_I32, TF_DTYPE_I64}) {
        TensorDesc a = make(dt, {4}, {7, -7, 7, -7});
        TensorDesc b = make(dt, {4}, {2, 2, -2, -2});
        TensorDesc out = make(dt, {4});
        run_ok(TF_OP_DIV, {&a, &b}, out);
        check_values(out, {3, -3, -3, 3});
    }
    TensorDesc a = make(TF_DTYPE_F32, {3}, {1, -1, 0});
    TensorDesc z = make(TF_DTYPE_F32, {3}, {0, 0, 0});
    TensorDesc out = make(TF_DTYPE_F32, {3});
    run_ok(TF_OP_DIV, {&a, &z}, out);
    check_values(out, {INFINITY, -INFINITY, NAN});
}

TEST_CASE("integer division by zero and MIN / -1 fail without touching the output") {
    for (int32_t dt : {TF_DTYPE_I32, TF_DTYPE_I64}) {
        CAPTURE(name_of(dt));
        TensorDesc a = make(dt, {3}, {1, 2, 3});
        TensorDesc b = make(dt, {3}, {1, 0, 1});
        TensorDesc out = make(dt, {3});
        const Call c(TF_OP_DIV, {&a, &b}, out);
        CHECK(c.supports() == 1);
        std::string message;
        CHECK(c.run(&message) == TF_STATUS_INVALID_ARGUMENT);
        CHECK(message.find("div") == 0);
        CHECK(message.find("division by zero") != std::string::npos);
        CHECK(untouched(out));

        // A zero broadcast through stride 0.
        TensorDesc zero = make(dt, {}, {0});
        TensorDesc bz = view(zero, {3}, {0});
        CHECK(Call(TF_OP_DIV, {&a, &bz}, out).run() == TF_STATUS_INVALID_ARGUMENT);
        CHECK(untouched(out));

        TensorDesc m = make(dt, {2});
        if (dt == TF_DTYPE_I32)
            set_raw<int32_t>(m, {INT32_MIN, 4});
        else
            set_raw<int64_t>(m, {INT64_MIN, 4});
        TensorDesc minus_one = make(dt, {2}, {-1, -1});
        TensorDesc out2 = make(dt, {2});
        const Call overflow(TF_OP_DIV, {&m, &minus_one}, out2);
        CHECK(overflow.run(&message) == TF_STATUS_INVALID_ARGUMENT);
        CHECK(message.find("div") == 0);
        CHECK(message.find("overflow") != std::string::npos);
        CHECK(untouched(out2));
    }
}

// ---- sum ------------------------------------------------------------------------------------

TEST_CASE("sum over each axis mask, every dtype") {
    for (int32_t dt : k_numeric) {
        CAPTURE(name_of(dt));
        TensorDesc x = make(dt, {2, 3}, {1, 2, 3, 4, 5, 6});
        TensorDesc rows = make(dt, {2, 1});
        const tf_params_reduce p1 = reduce_params(0b10);
        run_ok(TF_OP_SUM, {&x}, rows, &p1);
        check_values(rows, {6, 15});

        TensorDesc cols = make(dt, {1, 3});
        const tf_params_reduce p0 = reduce_params(0b01);
        run_ok(TF_OP_SUM, {&x}, cols, &p0);
        check_values(cols, {5, 7, 9});

        TensorDesc all = make(dt, {1, 1});
        const tf_params_reduce p01 = reduce_params(0b11);
        run_ok(TF_OP_SUM, {&x}, all, &p01);
        check_values(all, {21});

        TensorDesc same = make(dt, {2, 3});
        const tf_params_reduce none = reduce_params(0);
        run_ok(TF_OP_SUM, {&x}, same, &none);
        check_values(same, {1, 2, 3, 4, 5, 6});

        // Transposed input: [[1, 3, 5], [2, 4, 6]].
        TensorDesc st = make(dt, {3, 2}, {1, 2, 3, 4, 5, 6});
        TensorDesc t = transposed(st);
        run_ok(TF_OP_SUM, {&t}, rows, &p1);
        check_values(rows, {9, 12});

        // Rank 3, axes 0 and 2: out[0][j][0] = sum over i, k of x[i][j][k].
        TensorDesc cube = make(dt, {2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
        TensorDesc mid = make(dt, {1, 2, 1});
        const tf_params_reduce p02 = reduce_params(0b101);
        run_ok(TF_OP_SUM, {&cube}, mid, &p02);
        check_values(mid, {10, 18});

        // Strided output: rows of a [3, 4] land at storage 0, 2, 4.
        TensorDesc y = make(dt, {3, 4}, {1, 1, 1, 1, 2, 2, 2, 2, 3, 0, 0, 3});
        TensorDesc storage = make(dt, {6});
        TensorDesc out = view(storage, {3, 1}, {2, 1});
        run_ok(TF_OP_SUM, {&y}, out, &p1);
        check_values(out, {4, 8, 6});
        CHECK(only_elements_written(out));

        // A broadcast input: one element seen three times.
        TensorDesc one = make(dt, {}, {2});
        TensorDesc bcast = view(one, {3}, {0});
        TensorDesc s = make(dt, {1});
        const tf_params_reduce pa = reduce_params(0b1);
        run_ok(TF_OP_SUM, {&bcast}, s, &pa);
        check_values(s, {6});
    }
}

TEST_CASE("sum accumulates floats in double, integers wrap") {
    // In f32, 1e8 + 1 == 1e8 and the total would come out as 1.
    TensorDesc x = make(TF_DTYPE_F32, {4}, {1e8, 1, -1e8, 1});
    TensorDesc s = make(TF_DTYPE_F32, {1});
    const tf_params_reduce p = reduce_params(1);
    run_ok(TF_OP_SUM, {&x}, s, &p);
    check_values(s, {2});

    // f16: 2048 + 1 + 1 + ... in f16 steps would stay at 2048; the double sum is 2052.
    TensorDesc h = make(TF_DTYPE_F16, {5}, {2048, 1, 1, 1, 1});
    TensorDesc hs = make(TF_DTYPE_F16, {1});
    run_ok(TF_OP_SUM, {&h}, hs, &p);
    check_values(hs, {2052});

    TensorDesc i = make(TF_DTYPE_I32, {2});
    set_raw<int32_t>(i, {INT32_MAX, 1});
    TensorDesc is = make(TF_DTYPE_I32, {1});
    run_ok(TF_OP_SUM, {&i}, is, &p);
    CHECK(get_raw<int32_t>(is) == std::vector<int32_t>{INT32_MIN});

    TensorDesc l = make(TF_DTYPE_I64, {3});
    set_raw<int64_t>(l, {INT64_MAX, 1, 5});
    TensorDesc ls = make(TF_DTYPE_I64, {1});
    run_ok(TF_OP_SUM, {&l}, ls, &p);
    CHECK(get_raw<int64_t>(ls) == std::vector<int64_t>{INT64_MIN + 5});
}

TEST_CASE("sum is deterministic and matches a row-major double sum") {
    const int n = 10007;
    std::vector<float> v(n);
    uint32_t state = 12345;
    for (float &f : v) {
        state = state * 1664525u + 1013904223u;
        f = static_cast<float>(static_cast<int32_t>(state >> 8) - (1 << 23)) * 0x1p-13f;
    }
    double expected = 0;
    for (float f : v) expected += f;
    TensorDesc x = make(TF_DTYPE_F32, {n});
    set_raw(x, v);
    TensorDesc s1 = make(TF_DTYPE_F32, {1}), s2 = make(TF_DTYPE_F32, {1});
    const tf_params_reduce p = reduce_params(1);
    run_ok(TF_OP_SUM, {&x}, s1, &p);
    run_ok(TF_OP_SUM, {&x}, s2, &p);
    CHECK(f32_bits(get_raw<float>(s1)[0]) == f32_bits(get_raw<float>(s2)[0]));
    CHECK(get_raw<float>(s1)[0] == static_cast<float>(expected));
}

TEST_CASE("sum and mean with many outputs (lockstep lanes) match each output's row-major double sum") {
    // [N, C, H, W] over axes 0, 2, 3 (a conv bias gradient) with C = 13 (a group of 8 lanes and
    // one of 5), and over axis 0 of [N, C] with C = 131; values whose double sums depend on order.
    struct ReduceCase {
        std::vector<int64_t> shape, out_shape;
        uint32_t mask;
    };
    const ReduceCase cases[] = {
        {{5, 13, 6, 7}, {1, 13, 1, 1}, 0b1101}, {{37, 131}, {1, 131}, 0b01}, {{3, 9, 4}, {3, 1, 4}, 0b010}};
    uint32_t state = 777;
    for (const ReduceCase &c : cases) {
        int64_t count = 1;
        for (int64_t d : c.shape) count *= d;
        std::vector<float> v(static_cast<size_t>(count));
        for (float &f : v) {
            state = state * 1664525u + 1013904223u;
            f = std::ldexp(static_cast<float>(static_cast<int32_t>(state >> 8) - (1 << 23)),
                           static_cast<int>(state % 40) - 30);
        }
        // The expected sums: row-major over each output's inputs.
        const int rank = static_cast<int>(c.shape.size());
        std::vector<int64_t> strides(static_cast<size_t>(rank));
        for (int i = rank - 1, st = 1; i >= 0; st *= static_cast<int>(c.shape[static_cast<size_t>(i)]), --i)
            strides[static_cast<size_t>(i)] = st;
        int64_t outputs = 1;
        for (int64_t d : c.out_shape) outputs *= d;
        std::vector<double> sums(static_cast<size_t>(outputs), 0.0);
        std::vector<int64_t> count_in(static_cast<size_t>(outputs), 0);
        for (int64_t e = 0; e < count; ++e) {  // row-major over the input is row-major within each output
            int64_t o = 0, rest = e;
            for (int i = 0; i < rank; ++i) {
                const int64_t idx = rest / strides[static_cast<size_t>(i)];
                rest %= strides[static_cast<size_t>(i)];
                if (!(c.mask >> i & 1)) o = o * c.shape[static_cast<size_t>(i)] + idx;
            }
            sums[static_cast<size_t>(o)] += v[static_cast<size_t>(e)];
            ++count_in[static_cast<size_t>(o)];
        }
        TensorDesc x = make(TF_DTYPE_F32, c.shape);
        set_raw(x, v);
        TensorDesc s = make(TF_DTYPE_F32, c.out_shape), m = make(TF_DTYPE_F32, c.out_shape);
        const tf_params_reduce p = reduce_params(c.mask);
        run_ok(TF_OP_SUM, {&x}, s, &p);
        run_ok(TF_OP_MEAN, {&x}, m, &p);
        const std::vector<float> got_s = get_raw<float>(s), got_m = get_raw<float>(m);
        for (size_t o = 0; o < sums.size(); ++o) {
            CAPTURE(o);
            CHECK(f32_bits(got_s[o]) == f32_bits(static_cast<float>(sums[o])));
            CHECK(f32_bits(got_m[o]) == f32_bits(static_cast<float>(sums[o] / static_cast<double>(count_in[o]))));
        }
    }
}

// ---- matmul ---------------------------------------------------------------------------------

TEST_CASE("matmul, float dtypes, any strides") {
    // [[1, 2, 3], [4, 5, 6]] x [[7, 8], [9, 10], [11, 12]] = [[58, 64], [139, 154]]
    for (int32_t dt : k_float) {
        CAPTURE(name_of(dt));
        TensorDesc a = make(dt, {2, 3}, {1, 2, 3, 4, 5, 6});
        TensorDesc b = make(dt, {3, 2}, {7, 8, 9, 10, 11, 12});
        TensorDesc out = make(dt, {2, 2});
        run_ok(TF_OP_MATMUL, {&a, &b}, out);
        check_values(out, {58, 64, 139, 154});

        TensorDesc a_storage = make(dt, {3, 2}, {1, 4, 2, 5, 3, 6});
        TensorDesc at = transposed(a_storage);
        TensorDesc b_storage = make(dt, {2, 3}, {7, 9, 11, 8, 10, 12});
        TensorDesc bt = transposed(b_storage);
        TensorDesc out_storage = make(dt, {2, 2});
        TensorDesc out_t = transposed(out_storage);
        run_ok(TF_OP_MATMUL, {&at, &bt}, out_t);
        check_values(out_t, {58, 64, 139, 154});
        check_values(out_storage, {58, 139, 64, 154});

        // b sliced with step 2 along both axes out of a [6, 4] storage.
        TensorDesc big = make(dt, {6, 4});
        set(big, {7, 0, 8, 0, 0, 0, 0, 0, 9, 0, 10, 0, 0, 0, 0, 0, 11, 0, 12, 0, 0, 0, 0, 0});
        TensorDesc bs = view(big, {3, 2}, {8, 2});
        run_ok(TF_OP_MATMUL, {&a, &bs}, out);
        check_values(out, {58, 64, 139, 154});

        // [1, 3] x [3, 1]
        TensorDesc r = make(dt, {1, 3}, {1, 2, 3});
        TensorDesc c = make(dt, {3, 1}, {7, 9, 11});
        TensorDesc dot = make(dt, {1, 1});
        run_ok(TF_OP_MATMUL, {&r, &c}, dot);
        check_values(dot, {58});
    }
}

TEST_CASE("batched matmul with broadcast batch axes") {
    for (int32_t dt : k_float) {
        CAPTURE(name_of(dt));
        // Batch 1 of a picks rows of b: [0, 1, 0] -> b[1], [1, 0, 1] -> b[0] + b[2].
        TensorDesc a = make(dt, {2, 2, 3}, {1, 2, 3, 4, 5, 6, 0, 1, 0, 1, 0, 1});
        TensorDesc b_one = make(dt, {3, 2}, {7, 8, 9, 10, 11, 12});
        TensorDesc b = view(b_one, {2, 3, 2}, {0, 2, 1});
        TensorDesc out = make(dt, {2, 2, 2});
        run_ok(TF_OP_MATMUL, {&a, &b}, out);
        check_values(out, {58, 64, 139, 154, 9, 10, 18, 20});

        // The other way round: a broadcast, b batched (batch 1 picks the first two columns of a).
        TensorDesc a_one = make(dt, {2, 3}, {1, 2, 3, 4, 5, 6});
        TensorDesc ab = view(a_one, {2, 2, 3}, {0, 3, 1});
        TensorDesc b2 = make(dt, {2, 3, 2}, {7, 8, 9, 10, 11, 12, 1, 0, 0, 1, 0, 0});
        run_ok(TF_OP_MATMUL, {&ab, &b2}, out);
        check_values(out, {58, 64, 139, 154, 1, 2, 4, 5});

        // Rank 4 with a transposed output batch layout: out [2, 1, 2, 2] stored batch-minor.
        TensorDesc a4 = view(a, {2, 1, 2, 3}, {6, 6, 3, 1});
        TensorDesc b4 = view(b_one, {2, 1, 3, 2}, {0, 0, 2, 1});
        TensorDesc out_storage = make(dt, {2, 2, 2});
        TensorDesc out4 = view(out_storage, {2, 1, 2, 2}, {1, 2, 4, 2});
        run_ok(TF_OP_MATMUL, {&a4, &b4}, out4);
        check_values(out4, {58, 64, 139, 154, 9, 10, 18, 20});
        check_values(out_storage, {58, 9, 64, 10, 139, 18, 154, 20});
    }
}

TEST_CASE("matmul against a plain triple loop on a larger shape") {
    const int m = 37, k = 53, n = 41;
    TensorDesc a = make(TF_DTYPE_F32, {m, k});
    TensorDesc b = make(TF_DTYPE_F32, {k, n});
    std::vector<float> va(m * k), vb(k * n);
    for (int i = 0; i < m * k; ++i) va[i] = static_cast<float>((i * 7) % 11 - 5);
    for (int i = 0; i < k * n; ++i) vb[i] = static_cast<float>((i * 5) % 13 - 6);
    set_raw(a, va);
    set_raw(b, vb);
    TensorDesc out = make(TF_DTYPE_F32, {m, n});
    run_ok(TF_OP_MATMUL, {&a, &b}, out);
    const auto got = get_raw<float>(out);
    int wrong = 0;
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
            double ref = 0;  // small integers: every partial sum is exact in f32
            for (int kk = 0; kk < k; ++kk) ref += double(va[i * k + kk]) * vb[kk * n + j];
            wrong += got[i * n + j] != static_cast<float>(ref);
        }
    CHECK(wrong == 0);
}

// ---- contiguous, fill -----------------------------------------------------------------------

TEST_CASE("contiguous copies any layout, every dtype") {
    for (int32_t dt : k_all) {
        CAPTURE(name_of(dt));
        const bool b = dt == TF_DTYPE_BOOL;
        const std::vector<double> v = b ? std::vector<double>{1, 0, 0, 1, 1, 1} : std::vector<double>{1, 2, 3, 4, 5, 6};
        TensorDesc st = make(dt, {3, 2}, v);
        TensorDesc t = transposed(st);
        TensorDesc out = make(dt, {2, 3});
        run_ok(TF_OP_CONTIGUOUS, {&t}, out);
        check_values(out, {v[0], v[2], v[4], v[1], v[3], v[5]});

        TensorDesc line = make(
            dt, {8}, b ? std::vector<double>{0, 1, 0, 0, 0, 1, 0, 1} : std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7});
        TensorDesc sliced = view(line, {2, 2}, {4, 2}, 1);
        TensorDesc out2 = make(dt, {2, 2});
        run_ok(TF_OP_CONTIGUOUS, {&sliced}, out2);
        check_values(out2, b ? std::vector<double>{1, 0, 1, 1} : std::vector<double>{1, 3, 5, 7});

        // A contiguous input into a strided output view: how the core copies into views.
        TensorDesc src = make(dt, {2, 2}, {v[0], v[1], v[2], v[3]});
        TensorDesc gaps = make(dt, {2, 4});
        TensorDesc into = view(gaps, {2, 2}, {4, 2}, 1);
        run_ok(TF_OP_CONTIGUOUS, {&src}, into);
        check_values(into, {v[0], v[1], v[2], v[3]});
        CHECK(only_elements_written(into));

        // A broadcast input into a strided output.
        TensorDesc one = make(dt, {}, {1});
        TensorDesc bcast = view(one, {2, 2}, {0, 0});
        TensorDesc wide = make(dt, {8});
        TensorDesc strided = view(wide, {2, 2}, {4, 2});
        run_ok(TF_OP_CONTIGUOUS, {&bcast}, strided);
        check_values(strided, {1, 1, 1, 1});
        CHECK(only_elements_written(strided));
    }
}

TEST_CASE("fill converts its double to every dtype") {
    // Per row: f32, f16, bf16, i32, bool, then i64 exactly. 1e20 in bf16 is 0x60ad by hand
    // (1e20 / 2^66 = 1.3553, nearest 1 + 45/128).
    struct Row {
        double value;
        std::vector<double> expected;
        int64_t i64;
    };
    const Row rows[] = {
        {2.5, {2.5, 2.5, 2.5, 2, 1}, 2},
        {-2.75, {-2.75, -2.75, -2.75, -2, 1}, -2},
        {0.0, {0, 0, 0, 0, 0}, 0},
        {NAN, {NAN, NAN, NAN, 0, 1}, 0},
        {1e20, {1e20f, INFINITY, 99727710148492263424.0, INT32_MAX, 1}, INT64_MAX},
        {-1e20, {-1e20f, -INFINITY, -99727710148492263424.0, INT32_MIN, 1}, INT64_MIN},
    };
    const int32_t order[] = {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16, TF_DTYPE_I32, TF_DTYPE_BOOL};
    for (const Row &r : rows) {
        CAPTURE(r.value);
        for (size_t d = 0; d < std::size(order); ++d) {
            CAPTURE(name_of(order[d]));
            TensorDesc out = make(order[d], {2, 2});
            const tf_params_fill p = fill_params(r.value);
            run_ok(TF_OP_FILL, {}, out, &p);
            check_values(out, std::vector<double>(4, r.expected[d]));
        }
        TensorDesc out = make(TF_DTYPE_I64, {2, 2});
        const tf_params_fill p = fill_params(r.value);
        run_ok(TF_OP_FILL, {}, out, &p);
        CHECK(get_raw<int64_t>(out) == std::vector<int64_t>(4, r.i64));
    }
    // A strided output keeps its gaps.
    TensorDesc wide = make(TF_DTYPE_I32, {3, 4});
    TensorDesc cols = view(wide, {3, 2}, {4, 2}, 1);
    const tf_params_fill p = fill_params(-7);
    run_ok(TF_OP_FILL, {}, cols, &p);
    check_values(cols, {-7, -7, -7, -7, -7, -7});
    CHECK(only_elements_written(cols));

    // Beyond f32's range: infinity in every float type, the limit in the integers.
    TensorDesc huge = make(TF_DTYPE_F32, {1});
    const tf_params_fill ph = fill_params(-1e300);
    run_ok(TF_OP_FILL, {}, huge, &ph);
    CHECK(get_raw<uint32_t>(huge) == std::vector<uint32_t>{0xff800000u});
    TensorDesc huge_bf16 = make(TF_DTYPE_BF16, {1});
    run_ok(TF_OP_FILL, {}, huge_bf16, &ph);
    CHECK(get_raw<uint16_t>(huge_bf16) == std::vector<uint16_t>{0xff80});

    TensorDesc nan16 = make(TF_DTYPE_F16, {1});
    const tf_params_fill pn = fill_params(-NAN);
    run_ok(TF_OP_FILL, {}, nan16, &pn);
    CHECK(get_raw<uint16_t>(nan16) == std::vector<uint16_t>{0xfe00});
}

// ---- Rank 0 and empty tensors ---------------------------------------------------------------

TEST_CASE("rank-0 tensors") {
    for (int32_t dt : k_numeric) {
        CAPTURE(name_of(dt));
        TensorDesc a = make(dt, {}, {2});
        TensorDesc b = make(dt, {}, {4});
        TensorDesc out = make(dt, {});
        run_ok(TF_OP_ADD, {&a, &b}, out);
        check_values(out, {6});
        run_ok(TF_OP_NEG, {&a}, out);
        check_values(out, {-2});
        const tf_params_reduce none = reduce_params(0);
        run_ok(TF_OP_SUM, {&b}, out, &none);
        check_values(out, {4});
        const tf_params_fill f = fill_params(3);
        run_ok(TF_OP_FILL, {}, out, &f);
        check_values(out, {3});
        TensorDesc as_bool = make(TF_DTYPE_BOOL, {});
        run_ok(TF_OP_CAST, {&a}, as_bool);
        check_values(as_bool, {1});
        run_ok(TF_OP_CONTIGUOUS, {&b}, out);
        check_values(out, {4});
    }
    TensorDesc e = make(TF_DTYPE_F32, {}, {0});
    TensorDesc eo = make(TF_DTYPE_F32, {});
    run_ok(TF_OP_EXP, {&e}, eo);
    check_values(eo, {1});
}

TEST_CASE("zero-size tensors: no data needed, sums are 0") {
    for (int32_t dt : k_numeric) {
        CAPTURE(name_of(dt));
        TensorDesc a = no_data(dt, {0, 3});
        TensorDesc out = no_data(dt, {0, 3});
        run_ok(TF_OP_ADD, {&a, &a}, out);
        run_ok(TF_OP_RELU, {&a}, out);
        run_ok(TF_OP_CONTIGUOUS, {&a}, out);
        TensorDesc other = no_data(dt == TF_DTYPE_F32 ? TF_DTYPE_I64 : TF_DTYPE_F32, {0, 3});
        run_ok(TF_OP_CAST, {&a}, other);
        const tf_params_fill f = fill_params(1);
        run_ok(TF_OP_FILL, {}, out, &f);

        // Summing over an empty axis writes zeros.
        TensorDesc empty = no_data(dt, {2, 0});
        TensorDesc rows = make(dt, {2, 1});
        const tf_params_reduce p = reduce_params(0b10);
        run_ok(TF_OP_SUM, {&empty}, rows, &p);
        check_values(rows, {0, 0});
        TensorDesc empty1 = no_data(dt, {0});
        TensorDesc whole1 = make(dt, {1});
        const tf_params_reduce p1 = reduce_params(1);
        run_ok(TF_OP_SUM, {&empty1}, whole1, &p1);
        check_values(whole1, {0});
        // Keeping the empty axis: nothing to write.
        TensorDesc empty_out = no_data(dt, {1, 0});
        const tf_params_reduce p0 = reduce_params(0b01);
        run_ok(TF_OP_SUM, {&empty}, empty_out, &p0);
    }
    for (int32_t dt : k_float) {
        // K = 0: out is all zeros. M = 0: nothing to do.
        TensorDesc a = no_data(dt, {2, 0});
        TensorDesc b = no_data(dt, {0, 3});
        TensorDesc out = make(dt, {2, 3});
        run_ok(TF_OP_MATMUL, {&a, &b}, out);
        check_values(out, {0, 0, 0, 0, 0, 0});
        TensorDesc a0 = no_data(dt, {0, 4});
        TensorDesc b0 = make(dt, {4, 3});
        TensorDesc out0 = no_data(dt, {0, 3});
        run_ok(TF_OP_MATMUL, {&a0, &b0}, out0);
        TensorDesc batch0 = no_data(dt, {0, 2, 3});
        TensorDesc ab0 = no_data(dt, {0, 2, 4});
        TensorDesc bb0 = no_data(dt, {0, 4, 3});
        run_ok(TF_OP_MATMUL, {&ab0, &bb0}, batch0);
    }
}

// ---- supports() and run() on bad descriptors --------------------------------------------------

TEST_CASE("supports answers descriptors without memory") {
    // The core asks before any data is on the host: tinyfin-info's op matrix, and whether an op
    // on a device tensor could fall back to cpu. data and buffer are NULL there.
    const tf_params_reduce rp = reduce_params(0b01);
    const tf_params_fill fp = fill_params(0);
    auto bare = [](const Dims &shape) { return no_data(TF_DTYPE_F32, shape); };
    const TensorDesc x = bare({2, 3}), sum_out = bare({1, 3}), b = bare({3, 4}), mm_out = bare({2, 4});
    for (uint32_t op : {TF_OP_ADD, TF_OP_SUB, TF_OP_MUL, TF_OP_DIV}) CHECK(Call(op, {&x, &x}, x).supports() == 1);
    for (uint32_t op : {TF_OP_NEG, TF_OP_EXP, TF_OP_RELU, TF_OP_CONTIGUOUS, TF_OP_CAST})
        CHECK(Call(op, {&x}, x).supports() == 1);
    CHECK(Call(TF_OP_SUM, {&x}, sum_out, &rp).supports() == 1);
    CHECK(Call(TF_OP_MATMUL, {&x, &b}, mm_out).supports() == 1);
    CHECK(Call(TF_OP_FILL, {}, x, &fp).supports() == 1);
}

TEST_CASE("supports says no to wrong dtypes, arity, params and layouts") {
    TensorDesc f = make(TF_DTYPE_F32, {2, 2}, {1, 2, 3, 4});
    TensorDesc h = make(TF_DTYPE_F16, {2, 2});
    TensorDesc i = make(TF_DTYPE_I32, {2, 2});
    TensorDesc l = make(TF_DTYPE_I64, {2, 2});
    TensorDesc bl = make(TF_DTYPE_BOOL, {2, 2});
    TensorDesc f1 = make(TF_DTYPE_F32, {2, 1});
    const tf_params_reduce p = reduce_params(0b10);
    const tf_params_fill fp = fill_params(1);

    SUBCASE("dtypes") {
        CHECK(Call(TF_OP_ADD, {&f, &f}, f).supports() == 1);
        CHECK(Call(TF_OP_ADD, {&f, &h}, f).supports() == 0);
        CHECK(Call(TF_OP_ADD, {&f, &f}, h).supports() == 0);
        CHECK(Call(TF_OP_ADD, {&bl, &bl}, bl).supports() == 0);
        CHECK(Call(TF_OP_EXP, {&i}, i).supports() == 0);
        CHECK(Call(TF_OP_EXP, {&bl}, bl).supports() == 0);
        CHECK(Call(TF_OP_NEG, {&bl}, bl).supports() == 0);
        CHECK(Call(TF_OP_RELU, {&f}, h).supports() == 0);
        TensorDesc b1 = make(TF_DTYPE_BOOL, {2, 1});
        CHECK(Call(TF_OP_SUM, {&bl}, b1, &p).supports() == 0);
        CHECK(Call(TF_OP_SUM, {&f}, f1, &p).supports() == 1);
        CHECK(Call(TF_OP_MATMUL, {&i, &i}, i).supports() == 0);
        CHECK(Call(TF_OP_MATMUL, {&l, &l}, l).supports() == 0);
        CHECK(Call(TF_OP_MATMUL, {&f, &h}, f).supports() == 0);
        CHECK(Call(TF_OP_CONTIGUOUS, {&f}, h).supports() == 0);
        CHECK(Call(TF_OP_CAST, {&f}, bl).supports() == 1);
        TensorDesc bad = f;
        bad.d.dtype = TF_DTYPE_COUNT_;
        CHECK(Call(TF_OP_CAST, {&bad}, f).supports() == 0);
        CHECK(Call(TF_OP_FILL, {}, bad, &fp).supports() == 0);
        bad.d.dtype = -1;
        CHECK(Call(TF_OP_CONTIGUOUS, {&bad}, bad).supports() == 0);
    }
    SUBCASE("arity") {
        CHECK(Call(TF_OP_ADD, {&f}, f).supports() == 0);
        CHECK(Call(TF_OP_ADD, {&f, &f, &f}, f).supports() == 0);
        CHECK(Call(TF_OP_NEG, {&f, &f}, f).supports() == 0);
        CHECK(Call(TF_OP_FILL, {&f}, f, &fp).supports() == 0);
        Call no_out(TF_OP_ADD, {&f, &f}, f);
        no_out.op.n_outputs = 0;
        CHECK(no_out.supports() == 0);
        Call null_inputs(TF_OP_ADD, {&f, &f}, f);
        null_inputs.op.inputs = nullptr;
        CHECK(null_inputs.supports() == 0);
    }
    SUBCASE("params") {
        CHECK(Call(TF_OP_SUM, {&f}, f1, nullptr).supports() == 0);
        CHECK(Call(TF_OP_FILL, {}, f, nullptr).supports() == 0);
        tf_params_reduce small = p;
        small.struct_size = 4;
        CHECK(Call(TF_OP_SUM, {&f}, f1, &small).supports() == 0);
        tf_params_fill small_fill = fp;
        small_fill.struct_size = sizeof(uint32_t);
        CHECK(Call(TF_OP_FILL, {}, f, &small_fill).supports() == 0);
        const tf_params_reduce beyond = reduce_params(0b110);  // axis 2 of a rank-2 tensor
        CHECK(Call(TF_OP_SUM, {&f}, f1, &beyond).supports() == 0);
        CHECK(Call(TF_OP_SUM, {&f}, f, &p).supports() == 0);  // axis 1 not reduced in the output
    }
    SUBCASE("descriptors") {
        Call c(TF_OP_ADD, {&f, &f}, f);
        REQUIRE(c.supports() == 1);
        CHECK(P().supports(1, &c.op) == 0);
        CHECK(P().supports(0, nullptr) == 0);
        c.op.struct_size = 8;
        CHECK(c.supports() == 0);
        c.op.struct_size = sizeof c.op;
        c.op.op = TF_OP_COUNT_;
        CHECK(c.supports() == 0);
        c.op.op = 999;
        CHECK(c.supports() == 0);
        c.op.op = TF_OP_ADD;

        c.inputs[0].rank = TF_MAX_RANK + 1;
        CHECK(c.supports() == 0);
        c.inputs[0].rank = -1;
        CHECK(c.supports() == 0);
        c.inputs[0] = f.d;
        c.inputs[0].shape[1] = -2;
        CHECK(c.supports() == 0);
        c.inputs[0] = f.d;
        c.inputs[0].strides[0] = -1;
        CHECK(c.supports() == 0);
        c.inputs[0] = f.d;
        c.inputs[0].struct_size = 0;
        CHECK(c.supports() == 0);
        c.inputs[0] = f.d;
        c.inputs[0].data = nullptr;  // elements but no host address: a question supports() answers
        CHECK(c.supports() == 1);  // (the core asks before data is on the host), run() refuses
        std::string message;
        CHECK(c.run(&message) == TF_STATUS_INVALID_ARGUMENT);
        CHECK(message.find("no host address") != std::string::npos);
        c.inputs[0] = f.d;
        c.inputs[0].shape[0] = INT64_MAX;  // shape mismatch and an unaddressable extent
        CHECK(c.supports() == 0);
        c.inputs[0] = f.d;
        REQUIRE(c.supports() == 1);

        TensorDesc wrong_shape = make(TF_DTYPE_F32, {2, 3});
        CHECK(Call(TF_OP_ADD, {&f, &wrong_shape}, f).supports() == 0);
        CHECK(Call(TF_OP_NEG, {&wrong_shape}, f).supports() == 0);
        TensorDesc r1 = make(TF_DTYPE_F32, {4});
        CHECK(Call(TF_OP_ADD, {&f, &r1}, f).supports() == 0);  // not broadcast to the output rank
        CHECK(Call(TF_OP_MATMUL, {&f, &wrong_shape}, f).supports() == 0);  // [2,2] x [2,3] -> [2,2]
        CHECK(Call(TF_OP_MATMUL, {&wrong_shape, &f}, f).supports() == 0);  // K mismatch
        CHECK(Call(TF_OP_MATMUL, {&r1, &r1}, r1).supports() == 0);  // rank 1
        // Any stride on a size-1 axis, even one that would overflow as a byte count.
        TensorDesc row = make(TF_DTYPE_F32, {1, 3}, {1, 2, 3});
        TensorDesc odd_row = view(row, {1, 3}, {INT64_MAX, 1});
        TensorDesc row_out = make(TF_DTYPE_F32, {1, 3});
        run_ok(TF_OP_ADD, {&odd_row, &odd_row}, row_out);
        check_values(row_out, {2, 4, 6});
        TensorDesc r9 = make(TF_DTYPE_F32, {1, 1, 1, 1, 1, 1, 1, 1});
        CHECK(Call(TF_OP_ADD, {&r9, &r9}, r9).supports() == 1);  // rank TF_MAX_RANK is fine
    }
    SUBCASE("run rejects what supports rejects, with a message naming the op") {
        std::string message;
        CHECK(Call(TF_OP_EXP, {&i}, i).run(&message) == TF_STATUS_UNSUPPORTED);
        CHECK(message.find("exp") == 0);
        CHECK(message.find("i32") != std::string::npos);
        CHECK(Call(TF_OP_SUM, {&f}, f1, nullptr).run(&message) == TF_STATUS_INVALID_ARGUMENT);
        CHECK(message.find("sum") == 0);
        Call c(TF_OP_ADD, {&f, &f}, f);
        c.op.op = 999;
        CHECK(c.run(&message) == TF_STATUS_UNSUPPORTED);
        CHECK(message.find("999") != std::string::npos);
        tf_error err = make_error();
        CHECK(P().run(0, nullptr, &err) == TF_STATUS_INVALID_ARGUMENT);
        CHECK(P().run(0, nullptr, nullptr) == TF_STATUS_INVALID_ARGUMENT);  // err is optional
    }
}
