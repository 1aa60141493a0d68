// tinyfin — C++ API: tensors, ops, backends.
//
// Everything here runs through libtinyfin.so, which dispatches each op to the
// plugin of the device its operands live on and falls back to the cpu plugin
// for what that plugin does not support. Errors are exceptions derived from
// tinyfin::Error; bad input never aborts the process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace tinyfin {

// ---- Errors -----------------------------------------------------------------

// Base of every exception tinyfin throws. what() starts with the error class
// ("ShapeError: add: shapes [2,3] and [4,3] cannot broadcast").
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};
// Shapes, ranks or axes that do not fit the op.
class ShapeError : public Error { public: using Error::Error; };
// A dtype the op does not accept, or operands of different dtypes.
class DTypeError : public Error { public: using Error::Error; };
// An index, label or parameter value out of range.
class ValueError : public Error { public: using Error::Error; };
// A device that does not exist, or a tensor without storage.
class DeviceError : public Error { public: using Error::Error; };
// Backend selection or plugin loading failed (TINYFIN_STRICT, set_backend).
class BackendError : public Error { public: using Error::Error; };
// An op had to leave its device while TINYFIN_FALLBACK=error.
class FallbackError : public Error { public: using Error::Error; };
// Host or device memory is exhausted.
class OutOfMemoryError : public Error { public: using Error::Error; };
// A plugin reported a failure while running an op or moving data.
class PluginError : public Error { public: using Error::Error; };

// ---- Data types and devices ---------------------------------------------------

// Same values as tf_dtype in plugin.h.
enum class DType : int32_t { f32 = 0, f16 = 1, bf16 = 2, i32 = 3, i64 = 4, boolean = 5 };

const char *dtype_name(DType dtype);
std::size_t dtype_size(DType dtype);

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<bool>() { return DType::boolean; }

// A device of a loaded backend: "cpu", "vulkan:0", "cuda:1".
struct Device {
    std::string backend = "cpu";
    int index = 0;

    // Parses "name" or "name:index"; throws DeviceError for a backend that is not loaded.
    static Device parse(std::string_view text);
    std::string str() const;
    bool operator==(const Device &other) const = default;
};

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape &shape);

// ---- Tensors ------------------------------------------------------------------

struct TensorImpl;

// A view of refcounted storage on one device: dtype, shape, strides (in
// elements) and an element offset. Copying a Tensor copies the handle, not the
// data. View methods share storage; ops return new tensors.
class Tensor {
public:
    Tensor() = default;
    explicit Tensor(std::shared_ptr<TensorImpl> impl);

    bool defined() const { return impl_ != nullptr; }
    DType dtype() const;
    int rank() const;
    const Shape &shape() const;
    // Size of one axis; negative axes count from the end.
    int64_t size(int axis) const;
    const Shape &strides() const;
    int64_t offset() const;
    int64_t numel() const;
    std::size_t nbytes() const;
    Device device() const;
    bool is_contiguous() const;

    // Views (no copy). -1 in reshape's shape is inferred; reshape copies only
    // when the strides cannot express the new shape.
    Tensor reshape(const Shape &shape) const;
    // Like reshape but never copies: throws ShapeError when a view is impossible.
    Tensor view(const Shape &shape) const;
    Tensor transpose(int axis0, int axis1) const;
    Tensor permute(const std::vector<int> &axes) const;
    // Elements start, start+step, ... < end along axis (negative start/end count from the end).
    Tensor slice(int axis, int64_t start, int64_t end, int64_t step = 1) const;
    // Broadcasts size-1 axes (and new leading axes) to shape with stride 0; -1 keeps a size.
    Tensor expand(const Shape &shape) const;

    // Returns this tensor when already contiguous, else a contiguous copy on the same device.
    Tensor contiguous() const;
    // Copy to another device (same tensor when already there); counted in stats().
    Tensor to(const Device &device) const;
    Tensor to(std::string_view device) const { return to(Device::parse(device)); }
    // Cast to another dtype on the same device.
    Tensor to(DType dtype) const;

    // Host read-back, in row-major order. Waits for pending device work.
    void copy_to_host(void *dst, std::size_t bytes) const;
    template <typename T> std::vector<T> to_vector() const;
    // The value of a one-element tensor.
    template <typename T> T item() const;

    TensorImpl *impl() const { return impl_.get(); }

private:
    std::shared_ptr<TensorImpl> impl_;
};

// ---- Factories -----------------------------------------------------------------
// device defaults to default_device(), the first device of the selected backend.

Tensor empty(const Shape &shape, DType dtype = DType::f32, std::optional<Device> device = {});
Tensor full(const Shape &shape, double value, DType dtype = DType::f32,
            std::optional<Device> device = {});
Tensor zeros(const Shape &shape, DType dtype = DType::f32, std::optional<Device> device = {});
Tensor ones(const Shape &shape, DType dtype = DType::f32, std::optional<Device> device = {});
// A rank-0 tensor.
Tensor scalar(double value, DType dtype = DType::f32, std::optional<Device> device = {});
// start, start+step, ... < end.
Tensor arange(double start, double end, double step = 1, DType dtype = DType::f32,
              std::optional<Device> device = {});
// Copies numel(shape) elements of dtype from host memory.
Tensor from_host(const void *data, const Shape &shape, DType dtype,
                 std::optional<Device> device = {});
template <typename T>
Tensor from_vector(const std::vector<T> &values, const Shape &shape,
                   std::optional<Device> device = {});
// Uniform in [0, 1) / standard normal, f32, reproducible for a given seed on every backend.
Tensor rand(const Shape &shape, uint64_t seed, std::optional<Device> device = {});
Tensor randn(const Shape &shape, uint64_t seed, std::optional<Device> device = {});

// ---- Ops -------------------------------------------------------------------------
// Binary ops broadcast (numpy rules) and require one dtype on both sides.

Tensor add(const Tensor &a, const Tensor &b);
Tensor sub(const Tensor &a, const Tensor &b);
Tensor mul(const Tensor &a, const Tensor &b);
Tensor div(const Tensor &a, const Tensor &b);
Tensor neg(const Tensor &a);
Tensor exp(const Tensor &a);
Tensor relu(const Tensor &a);
// Sum over axes (all axes when empty); negative axes count from the end.
Tensor sum(const Tensor &a, const std::vector<int> &axes = {}, bool keepdim = false);
// 1-D, 2-D and batched ([..., M, K] x [..., K, N], batch dims broadcast).
Tensor matmul(const Tensor &a, const Tensor &b);
Tensor cast(const Tensor &a, DType dtype);

inline Tensor operator+(const Tensor &a, const Tensor &b) { return add(a, b); }
inline Tensor operator-(const Tensor &a, const Tensor &b) { return sub(a, b); }
inline Tensor operator*(const Tensor &a, const Tensor &b) { return mul(a, b); }
inline Tensor operator/(const Tensor &a, const Tensor &b) { return div(a, b); }
inline Tensor operator-(const Tensor &a) { return neg(a); }

// Broadcast shape of two shapes; throws ShapeError naming op when they do not broadcast.
Shape broadcast_shapes(const Shape &a, const Shape &b, std::string_view op = "broadcast");

// ---- Backends --------------------------------------------------------------------

// Chooses backends like TINYFIN_BACKEND ("auto" or a list such as "vulkan,blas").
// Returns false (and logs why) when no listed backend is usable; cpu remains.
bool set_backend(std::string_view list);
// Name of the backend factories place tensors on ("cpu", "vulkan").
std::string backend_name();
Device default_device();
// Names of backends that are loaded and usable, best first (cpu last).
std::vector<std::string> available_backends();
// Waits for all queued work on every initialised backend.
void synchronize();

// ---- Statistics ------------------------------------------------------------------

struct Stats {
    struct Backend {
        std::string name;
        uint64_t ops = 0;                 // ops run by this backend
        uint64_t bytes_to_device = 0;     // host -> this backend's devices
        uint64_t bytes_to_host = 0;       // this backend's devices -> host
        uint64_t allocations = 0;         // buffers allocated
        uint64_t bytes_allocated = 0;
    };
    std::vector<Backend> backends;
    // (op name, count) for every op that fell back to cpu at least once.
    std::vector<std::pair<std::string, uint64_t>> fallbacks;
    uint64_t total_fallbacks = 0;

    const Backend *backend(std::string_view name) const;
    uint64_t fallbacks_of(std::string_view op) const;
};
Stats stats();
void reset_stats();

// ---- Introspection (tinyfin-info) --------------------------------------------------

struct DeviceReport {
    std::string name;
    std::string kind;   // "cpu", "gpu", "integrated-gpu", "software-gpu", "other"
    uint64_t memory_total = 0;
    uint64_t memory_free = 0;
    std::string uuid;
    bool host_addressable = false;
};

struct PluginReport {
    std::string path;          // as found on the search path
    std::string resolved_path; // realpath
    std::string name;          // backend name ("" when the plugin never said)
    std::string outcome;       // "loaded", "dlopen-failed", "no-entry-symbol", "entry-refused",
                               // "abi-mismatch", "invalid-table", "probe-refused",
                               // "init-failed", "shadowed"
    std::string message;       // why, for every outcome but "loaded"
    std::string version;
    uint32_t abi_version = 0;  // the plugin's, packed (major << 16) | minor
    int priority = 0;
    bool initialised = false;
    std::vector<DeviceReport> devices;
    std::vector<std::pair<std::string, std::string>> features;
    std::vector<std::string> supported_ops; // ops whose sample descriptor supports() accepts
};

struct SearchDir {
    std::string path;
    std::string origin; // "TINYFIN_PLUGIN_PATH", "install", "build-tree"
};

struct Report {
    std::vector<SearchDir> search_path;
    std::vector<PluginReport> plugins;
    std::string requested;         // TINYFIN_BACKEND or set_backend text
    std::string selected;          // backend factories use
    std::vector<std::string> selection_notes; // why: one line per decision
    uint32_t core_abi_version = 0;
    std::string core_version;
};
// Initialises every loaded plugin (to list devices) and describes the whole registry.
Report report();
// Names of all ops in ops.def order.
std::vector<std::string> op_names();

// ---- Template definitions -------------------------------------------------------

template <typename T> std::vector<T> Tensor::to_vector() const {
    static_assert(std::is_arithmetic_v<T>);
    if (dtype() != dtype_of<T>())
        throw DTypeError(std::string("DTypeError: to_vector: tensor is ") + dtype_name(dtype()) +
                         ", requested " + dtype_name(dtype_of<T>()));
    std::vector<T> out(static_cast<std::size_t>(numel()));
    if constexpr (std::is_same_v<T, bool>) {
        std::vector<uint8_t> raw(out.size());
        copy_to_host(raw.data(), raw.size());
        for (std::size_t i = 0; i < raw.size(); ++i) out[i] = raw[i] != 0;
    } else {
        copy_to_host(out.data(), out.size() * sizeof(T));
    }
    return out;
}

template <typename T> T Tensor::item() const {
    if (numel() != 1)
        throw ShapeError("ShapeError: item: tensor of shape " + shape_str(shape()) +
                         " has " + std::to_string(numel()) + " elements, expected 1");
    Tensor t = dtype() == dtype_of<T>() ? *this : to(dtype_of<T>());
    return t.to_vector<T>()[0];
}

template <typename T>
Tensor from_vector(const std::vector<T> &values, const Shape &shape, std::optional<Device> device) {
    static_assert(!std::is_same_v<T, bool>, "use from_host with uint8_t data for bool tensors");
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    if (n != static_cast<int64_t>(values.size()))
        throw ShapeError("ShapeError: from_vector: " + std::to_string(values.size()) +
                         " values do not fill shape " + shape_str(shape));
    return from_host(values.data(), shape, dtype_of<T>(), std::move(device));
}

} // namespace tinyfin
