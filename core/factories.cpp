// Factories: empty, full, zeros, ones, scalar, arange, from_host, rand, randn.
#include <cmath>

#include "ops_common.hpp"
#include "registry.hpp"

namespace tinyfin {

using namespace detail;

namespace {

Tensor empty_on(const Device &device, const Shape &shape, DType dtype) {
    Backend *backend = Registry::checked().usable(device.backend);
    if (!backend) raise<DeviceError>("device " + device.str() + " is not available");
    if (device.index < 0 || device.index >= backend->device_count())
        raise<DeviceError>("device " + device.str() + " does not exist");
    return make_tensor(*backend, device.index, shape, dtype);
}

}  // namespace

// ---- Factories ---------------------------------------------------------------------

Device default_device() { return Device{Registry::checked().selected().name(), 0}; }

Tensor empty(const Shape &shape, DType dtype, std::optional<Device> device) {
    dtype_block_length(dtype);  // rejects values outside the enum
    return empty_on(device ? *device : default_device(), shape, dtype);
}

Tensor full(const Shape &shape, double value, DType dtype, std::optional<Device> device) {
    Tensor out = empty(shape, dtype, std::move(device));
    // Nothing to fill; and a plugin may refuse to address [0, 2^62] although it holds nothing.
    if (out.numel() == 0) return out;
    tf_params_fill params{sizeof(tf_params_fill), value};
    dispatch(TF_OP_FILL, {}, {out}, &params);
    return out;
}

Tensor zeros(const Shape &shape, DType dtype, std::optional<Device> device) {
    return full(shape, 0.0, dtype, std::move(device));
}

Tensor ones(const Shape &shape, DType dtype, std::optional<Device> device) {
    return full(shape, 1.0, dtype, std::move(device));
}

Tensor scalar(double value, DType dtype, std::optional<Device> device) {
    return full({}, value, dtype, std::move(device));
}

namespace {

// Copies out.nbytes() bytes from host memory into a fresh tensor's storage.
void upload(const Tensor &out, const void *data) {
    std::size_t bytes = out.nbytes();
    if (bytes == 0) return;
    if (!data) raise<ValueError>("from_host: data is NULL for shape " + shape_str(out.shape()));
    Storage &storage = *out.impl()->storage;
    tf_error err = make_error();
    tf_status status = guarded(err, "buffer_write", [&] {
        return storage.backend->table().buffer_write(storage.buffer, 0, data, bytes, &err);
    });
    if (!storage.host) Registry::instance().counters().backends[storage.backend->slot()].bytes_to_device += bytes;
    if (status != TF_STATUS_OK)
        raise_status(status, "from_host to " + out.device().str() + ": " + error_text(err, "failed without a message"));
}

}  // namespace

Tensor from_host(const void *data, const Shape &shape, DType dtype, std::optional<Device> device) {
    Tensor out = empty(shape, dtype, std::move(device));
    upload(out, data);
    return out;
}

Tensor arange(double start, double end, double step, DType dtype, std::optional<Device> device) {
    if (step == 0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
        raise<ValueError>("arange: start, end and step must be finite and step non-zero");
    double count = std::ceil((end - start) / step);
    if (count > 1e12) raise<ValueError>("arange: " + std::to_string(count) + " elements is too many");
    int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
    bool integral = dtype == DType::i32 || dtype == DType::i64 || dtype == DType::boolean;
    if (integral && n > 0) {
        // The values are monotonic: the ends bound them. Out of range they would wrap (i32) or
        // be undefined (the double to int64 conversion).
        double lo = dtype == DType::i32 ? -2147483648.0 : -9223372036854775808.0;
        double hi = dtype == DType::i32 ? 2147483647.0 : 9223372036854775807.0;  // rounds to 2^63
        double last = start + static_cast<double>(n - 1) * step;
        for (double v : {start, last})
            if (v < lo || (dtype == DType::i32 ? v > hi : v >= hi))
                raise<ValueError>("arange: value " + std::to_string(v) + " does not fit in " + dtype_name(dtype) +
                                  " (start " + std::to_string(start) + ", end " + std::to_string(end) + ", step " +
                                  std::to_string(step) + "); use a wider dtype or a smaller range");
    }
    // Generated in double on the host, then cast on the device: exact for every dtype.
    std::vector<double> values(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) values[i] = start + static_cast<double>(i) * step;
    std::vector<float> f32(values.begin(), values.end());
    std::vector<int64_t> i64(n);
    for (int64_t i = 0; i < n; ++i) i64[i] = static_cast<int64_t>(values[i]);
    Tensor t = integral ? from_host(i64.data(), {n}, DType::i64, std::move(device))
                        : from_host(f32.data(), {n}, DType::f32, std::move(device));
    return cast(t, dtype);
}

Tensor arange(int64_t start, int64_t end, int64_t step, DType dtype, std::optional<Device> device) {
    if (step == 0) raise<ValueError>("arange: step must be non-zero");
    // The count in 128 bits: end - start overflows int64 for arange(INT64_MIN, INT64_MAX).
    __int128 span = static_cast<__int128>(end) - start;
    __int128 count = span / step + (span % step != 0 && (span > 0) == (step > 0));
    if (count > static_cast<__int128>(1e12))
        raise<ValueError>("arange: more than 10^12 elements (start " + std::to_string(start) + ", end " +
                          std::to_string(end) + ", step " + std::to_string(step) + ")");
    int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
    std::vector<int64_t> values(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) values[i] = start + i * step;
    return cast(from_host(values.data(), {n}, DType::i64, std::move(device)), dtype);
}

namespace {

// splitmix64: a tiny, well-mixed generator; same stream on every platform.
struct SplitMix64 {
    uint64_t state;
    uint64_t next() {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    // Uniform in [0, 1) with 24 bits, exactly representable in f32.
    float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
};

}  // namespace

Tensor rand(const Shape &shape, uint64_t seed, std::optional<Device> device) {
    // Allocated first: an absurd shape fails in the plugin, not in std::vector.
    Tensor out = empty(shape, DType::f32, std::move(device));
    std::vector<float> values(static_cast<std::size_t>(out.numel()));
    SplitMix64 gen{seed};
    for (float &v : values) v = gen.uniform();
    upload(out, values.data());
    return out;
}

Tensor randn(const Shape &shape, uint64_t seed, std::optional<Device> device) {
    Tensor out = empty(shape, DType::f32, std::move(device));
    int64_t n = out.numel();
    std::vector<float> values(static_cast<std::size_t>(n));
    SplitMix64 gen{seed};
    // Box-Muller in double, two normals per pair of uniforms.
    for (int64_t i = 0; i < n; i += 2) {
        double u1 = (static_cast<double>(gen.next() >> 11) + 1.0) * (1.0 / 9007199254740993.0);
        double u2 = static_cast<double>(gen.next() >> 11) * (1.0 / 9007199254740992.0);
        double r = std::sqrt(-2.0 * std::log(u1));
        values[i] = static_cast<float>(r * std::cos(2.0 * M_PI * u2));
        if (i + 1 < n) values[i + 1] = static_cast<float>(r * std::sin(2.0 * M_PI * u2));
    }
    upload(out, values.data());
    return out;
}

}  // namespace tinyfin
