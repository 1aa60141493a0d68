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

struct tf_plugin; // plugin.h

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
// Misuse of autograd: backward through a freed graph, grad of an integer tensor, ...
class AutogradError : public Error { public: using Error::Error; };

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
    // True when both tensors view the same storage (a view and its base).
    bool shares_storage(const Tensor &other) const;

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

    // Copies src (broadcast to this shape, cast to this dtype) into this tensor's
    // elements in place, on this tensor's device. Not recorded by autograd: for
    // optimizers and initialisers. Throws when this tensor requires grad and grad mode is on.
    void assign_(const Tensor &src);

    // ---- Autograd ----
    bool requires_grad() const;
    // Marks a leaf (a tensor no recorded op produced) as a parameter; floats only.
    Tensor &requires_grad_(bool on = true);
    bool is_leaf() const;
    // Accumulated gradient of a leaf after backward(); undefined before.
    Tensor grad() const;
    void set_grad(const Tensor &grad);
    void zero_grad();
    // Reverse-mode backward from this tensor. gradient defaults to 1 for a one-element
    // tensor. The graph is freed afterwards unless retain_graph.
    void backward(const Tensor &gradient = Tensor(), bool retain_graph = false) const;
    // Same storage, no autograd history.
    Tensor detach() const;

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
// relu's gradient in one pass: dy where x > 0 or x is NaN, else 0 (torch's threshold_backward).
// x may be relu's input or its output: both give the same mask.
Tensor relu_backward(const Tensor &dy, const Tensor &x);
Tensor pow(const Tensor &a, const Tensor &b);
Tensor maximum(const Tensor &a, const Tensor &b);
Tensor minimum(const Tensor &a, const Tensor &b);
// Comparisons: bool result, broadcasting, one dtype on both sides.
Tensor eq(const Tensor &a, const Tensor &b);
Tensor ne(const Tensor &a, const Tensor &b);
Tensor lt(const Tensor &a, const Tensor &b);
Tensor le(const Tensor &a, const Tensor &b);
Tensor gt(const Tensor &a, const Tensor &b);
Tensor ge(const Tensor &a, const Tensor &b);

// Preallocated outputs ("out="): add(a, b, out), and the same for every op in
// TINYFIN_BINARY_OUT_OPS, writes the result into out's elements instead of allocating a tensor.
// - out must have the broadcast shape of a and b (ShapeError otherwise; out is never resized),
//   the result's dtype (a's, or bool for comparisons; DTypeError) and be on the device of a and b
//   (DeviceError; inputs are not moved). out may be any view whose elements are distinct
//   (strided, sliced, transposed); a view that repeats elements, such as expand(), is a ValueError.
// - out may share memory with a or b, in any way (add(x, y, x) updates x in place): the result is
//   then as if computed into a new tensor and copied into out.
// - No autograd history is recorded: while grad mode is on, an a, b or out that requires grad is
//   an AutogradError. Under NoGradGuard it runs, and overwrites out's elements like assign_.
// The list is checked against ops.def when the library is built: every BINARY and COMPARE op.
#define TINYFIN_BINARY_OUT_OPS(X) \
    X(add, ADD) X(sub, SUB) X(mul, MUL) X(div, DIV) X(pow, POW) X(maximum, MAXIMUM)            \
    X(minimum, MINIMUM) X(eq, EQ) X(ne, NE) X(lt, LT) X(le, LE) X(gt, GT) X(ge, GE)           \
    X(relu_backward, RELU_BACKWARD)
#define TINYFIN_DECLARE_OUT(fn, SYM) void fn(const Tensor &a, const Tensor &b, const Tensor &out);
TINYFIN_BINARY_OUT_OPS(TINYFIN_DECLARE_OUT)
#undef TINYFIN_DECLARE_OUT

// Elementwise cond ? a : b, all three broadcast; cond is bool.
Tensor where(const Tensor &cond, const Tensor &a, const Tensor &b);

Tensor abs(const Tensor &a);
Tensor log(const Tensor &a);
Tensor sqrt(const Tensor &a);
Tensor rsqrt(const Tensor &a);
Tensor sin(const Tensor &a);
Tensor cos(const Tensor &a);
Tensor tanh(const Tensor &a);
Tensor erf(const Tensor &a);
Tensor sigmoid(const Tensor &a);
// approximate = false: x * Phi(x) with erf; true: the tanh approximation.
Tensor gelu(const Tensor &a, bool approximate = false);
Tensor silu(const Tensor &a);
Tensor square(const Tensor &a);
// Pass -INFINITY / INFINITY to leave a side open.
Tensor clamp(const Tensor &a, double min, double max);

// Reductions over axes (all axes when empty); negative axes count from the end.
Tensor sum(const Tensor &a, const std::vector<int> &axes = {}, bool keepdim = false);
Tensor mean(const Tensor &a, const std::vector<int> &axes = {}, bool keepdim = false);
Tensor max(const Tensor &a, const std::vector<int> &axes = {}, bool keepdim = false);
Tensor min(const Tensor &a, const std::vector<int> &axes = {}, bool keepdim = false);
// Divisor n - correction (1: unbiased, like torch.var's default).
Tensor var(const Tensor &a, const std::vector<int> &axes = {}, double correction = 1,
           bool keepdim = false);
// i64 index of the first extreme along axis.
Tensor argmax(const Tensor &a, int axis, bool keepdim = false);
Tensor argmin(const Tensor &a, int axis, bool keepdim = false);

// 1-D, 2-D and batched ([..., M, K] x [..., K, N], batch dims broadcast).
Tensor matmul(const Tensor &a, const Tensor &b);
Tensor cast(const Tensor &a, DType dtype);

// ---- Neural-network ops ---------------------------------------------------------------

struct Conv2dOptions {
    int stride_h = 1, stride_w = 1;
    int pad_h = 0, pad_w = 0;
    int dilation_h = 1, dilation_w = 1;
    int groups = 1;
};
// x [N,C,H,W], weight [O,C/groups,KH,KW], bias [O] or undefined -> [N,O,OH,OW].
Tensor conv2d(const Tensor &x, const Tensor &weight, const Tensor &bias = Tensor(),
              const Conv2dOptions &options = {});

struct Pool2dOptions {
    int kernel_h = 2, kernel_w = 2;
    int stride_h = 0, stride_w = 0; // 0: the kernel size
    int pad_h = 0, pad_w = 0;
    bool count_include_pad = true;  // avg only
};
Tensor max_pool2d(const Tensor &x, const Pool2dOptions &options = {});
Tensor avg_pool2d(const Tensor &x, const Pool2dOptions &options = {});

Tensor softmax(const Tensor &x, int axis = -1);
Tensor log_softmax(const Tensor &x, int axis = -1);
// Normalises over the last n_axes axes; weight and bias have those axes' shape (or are undefined).
Tensor layer_norm(const Tensor &x, int n_axes, const Tensor &weight = Tensor(),
                  const Tensor &bias = Tensor(), double eps = 1e-5);
Tensor rms_norm(const Tensor &x, int n_axes, const Tensor &weight = Tensor(), double eps = 1e-6);
// Rotary embedding of x [..., T, D] (D even) at positions offset .. offset+T-1.
Tensor rope(const Tensor &x, double theta = 10000.0, bool interleaved = false,
            int64_t position_offset = 0);
// softmax(q k^T * scale + mask) v; scale <= 0 means 1/sqrt(D); mask is additive and broadcast.
Tensor scaled_dot_product_attention(const Tensor &q, const Tensor &k, const Tensor &v,
                                    const Tensor &mask = Tensor(), bool causal = false,
                                    double scale = 0);
// Rows of weight [V, D] picked by integer indices [...] -> [..., D].
// An index outside [0, V) (for cross_entropy and one_hot, a label outside [0, C) that is not
// ignore_index) is a ValueError of the calling thread: raised by the op on cpu; on vulkan and
// opengl found by the kernel and raised by this thread's next read or synchronize on that
// device, the rows it picks reading 0 and the loss NaN.
Tensor embedding(const Tensor &weight, const Tensor &indices);

enum class Reduction { none = 0, mean = 1, sum = 2 };
// logits [N, C], integer labels [N]. Labels equal to ignore_index are skipped.
Tensor cross_entropy(const Tensor &logits, const Tensor &labels, Reduction reduction = Reduction::mean,
                     int64_t ignore_index = -100);
Tensor one_hot(const Tensor &labels, int num_classes, DType dtype = DType::f32);

// ---- Layout ---------------------------------------------------------------------------

// Copy along an existing axis / a new axis.
Tensor concat(const std::vector<Tensor> &tensors, int axis = 0);
Tensor stack(const std::vector<Tensor> &tensors, int axis = 0);
// Views of consecutive pieces of the given sizes along axis.
std::vector<Tensor> split(const Tensor &tensor, const std::vector<int64_t> &sizes, int axis = 0);
// Constant padding: pads = {before_0, after_0, before_1, after_1, ...} from the first axis.
Tensor pad(const Tensor &tensor, const std::vector<int64_t> &pads, double value = 0);
// length elements from start along axis (a view).
Tensor narrow(const Tensor &tensor, int axis, int64_t start, int64_t length);

inline Tensor operator+(const Tensor &a, const Tensor &b) { return add(a, b); }
inline Tensor operator-(const Tensor &a, const Tensor &b) { return sub(a, b); }
inline Tensor operator*(const Tensor &a, const Tensor &b) { return mul(a, b); }
inline Tensor operator/(const Tensor &a, const Tensor &b) { return div(a, b); }
inline Tensor operator-(const Tensor &a) { return neg(a); }
// Tensor-scalar arithmetic: the scalar takes the tensor's dtype and device.
Tensor operator+(const Tensor &a, double b);
Tensor operator-(const Tensor &a, double b);
Tensor operator*(const Tensor &a, double b);
Tensor operator/(const Tensor &a, double b);
Tensor operator+(double a, const Tensor &b);
Tensor operator-(double a, const Tensor &b);
Tensor operator*(double a, const Tensor &b);
Tensor operator/(double a, const Tensor &b);
// A rank-0 tensor of like's dtype on like's device.
Tensor scalar_like(const Tensor &like, double value);

// ---- Grad mode ---------------------------------------------------------------------

// Whether ops record autograd history on this thread (default true).
bool grad_enabled();
// Disables recording on this thread while alive.
class NoGradGuard {
public:
    NoGradGuard();
    ~NoGradGuard();
    NoGradGuard(const NoGradGuard &) = delete;
    NoGradGuard &operator=(const NoGradGuard &) = delete;

private:
    bool previous_;
};

// Broadcast shape of two shapes; throws ShapeError naming op when they do not broadcast.
Shape broadcast_shapes(const Shape &a, const Shape &b, std::string_view op = "broadcast");

// ---- Backends --------------------------------------------------------------------

// Chooses backends like TINYFIN_BACKEND ("auto" or a list such as "vulkan,blas").
// Returns false (and logs why) when no listed backend is usable; cpu remains.
bool set_backend(std::string_view list);
// Chooses the backend as set_backend(preference) does, but only among backends whose device 0
// reports at least required_bytes of free memory (tinyfin-info's "free"; a device that reports
// none counts as fitting): with "auto" the best-priority one that fits, cpu last; with a list
// the first listed one that fits. preference "" means TINYFIN_BACKEND (auto when unset). Returns
// the chosen backend's name; throws OutOfMemoryError naming every device, its free memory and
// the requirement when none fits.
std::string select_backend_for_memory(uint64_t required_bytes, std::string_view preference = {});
// Name of the backend factories place tensors on ("cpu", "vulkan").
std::string backend_name();
Device default_device();
// Names of backends that are loaded and usable, best first (cpu last).
std::vector<std::string> available_backends();
// Waits for all queued work on every initialised backend.
void synchronize();
// The plugin.h table of a loaded backend after its init, or nullptr when it is not loaded or its
// init failed. For tools that call plugins directly (tinyfin-conform): such calls bypass
// dispatch, fallback and stats().
const tf_plugin *plugin_table(std::string_view backend);

// ---- Statistics ------------------------------------------------------------------

struct Stats {
    struct Backend {
        std::string name;
        uint64_t ops = 0;                 // ops run by this backend
        uint64_t bytes_to_device = 0;     // host -> this backend's devices
        uint64_t bytes_to_host = 0;       // this backend's devices -> host
        uint64_t allocations = 0;         // buffers allocated
        uint64_t bytes_allocated = 0;
        uint64_t bytes_in_use = 0;        // bytes of tensor storage alive now
        uint64_t peak_bytes_in_use = 0;   // the most alive at once since reset_stats()
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
                               // "init-failed", "shadowed", "insecure"; with
                               // tinyfin-info --isolate also "crashed", "timed-out"
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
// The report of one loaded backend, initialising only that one: its devices (with free memory
// now), features (live counters) and sample op support. Throws BackendError when no loaded
// backend has that name.
PluginReport backend_report(std::string_view name);
// Names of all ops in ops.def order.
std::vector<std::string> op_names();

// ---- Plugin isolation (tinyfin-info --isolate) ----------------------------------

// An outcome decided outside the loader, e.g. "crashed" by a child process that probed the file.
struct PluginVerdict {
    std::string path; // as plugin_candidates() lists it
    std::string outcome;
    std::string message;
};
// The files the loader would try, in search order, without opening any of them.
std::vector<std::string> plugin_candidates();
// Before any other tinyfin call: load only the files in `only` (the whole search path when
// empty), and give each verdict's file its outcome without opening it. Throws BackendError once
// plugins are loaded.
void configure_plugin_loading(const std::vector<std::string> &only,
                              const std::vector<PluginVerdict> &verdicts);

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
