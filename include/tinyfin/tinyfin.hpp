// tinyfin — C++ API: tensors, ops, backends.
//
// Everything here runs through libtinyfin.so, which dispatches each op to the
// plugin of the device its operands live on and falls back to the cpu plugin
// for what that plugin does not support. Errors are exceptions derived from
// tinyfin::Error; bad input never aborts the process.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

struct tf_plugin;  // plugin.h

namespace tinyfin {

// ---- Errors -----------------------------------------------------------------

// Base of every exception tinyfin throws. what() starts with the error class
// ("ShapeError: add: shapes [2,3] and [4,3] cannot broadcast").
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};
// Shapes, ranks or axes that do not fit the op.
class ShapeError : public Error {
public:
    using Error::Error;
};
// A dtype the op does not accept, or operands of different dtypes.
class DTypeError : public Error {
public:
    using Error::Error;
};
// An index, label or parameter value out of range.
class ValueError : public Error {
public:
    using Error::Error;
};
// A device that does not exist, or a tensor without storage.
class DeviceError : public Error {
public:
    using Error::Error;
};
// Backend selection or plugin loading failed (TINYFIN_STRICT, set_backend).
class BackendError : public Error {
public:
    using Error::Error;
};
// An op had to leave its device while TINYFIN_FALLBACK=error.
class FallbackError : public Error {
public:
    using Error::Error;
};
// Host or device memory is exhausted.
class OutOfMemoryError : public Error {
public:
    using Error::Error;
};
// A plugin reported a failure while running an op or moving data.
class PluginError : public Error {
public:
    using Error::Error;
};
// Misuse of autograd: backward through a freed graph, grad of an integer tensor, ...
class AutogradError : public Error {
public:
    using Error::Error;
};

// ---- Data types and devices ---------------------------------------------------

// Same values as tf_dtype in plugin.h (include/tinyfin/dtypes.def). q8_0 .. q8_k are ggml's
// block-quantized formats, bit for bit as GGUF stores them (docs/quantization.md): a tensor of
// one has its shape in elements, its last axis a multiple of the block length, and
// (elements / block length) * block bytes of storage. Only the quantized ops (quantize,
// dequantize, matmul_q, embedding_q, embedding) take them; every other op raises DTypeError.
enum class DType : int32_t {
    f32 = 0,
    f16 = 1,
    bf16 = 2,
    i32 = 3,
    i64 = 4,
    boolean = 5,
    q8_0 = 6,
    q4_0 = 7,
    q4_1 = 8,
    q5_0 = 9,
    q5_1 = 10,
    q4_k = 11,
    q5_k = 12,
    q6_k = 13,
    q8_k = 14,
};

// "f32", "q4_k", ...
const char *dtype_name(DType dtype);
// The dtype named so ("f32", "q4_k"); nullopt for an unknown name.
std::optional<DType> dtype_named(std::string_view name);
// Bytes per element of a plain dtype; DTypeError for a quantized one (it has none: use
// dtype_bytes) or a value outside the enum.
std::size_t dtype_size(DType dtype);
// Whether dtype is block-quantized (q8_0 .. q8_k).
bool is_quantized(DType dtype);
// Elements per block: 32 or 256 for the quantized dtypes, 1 for the plain ones.
int64_t dtype_block_length(DType dtype);
// Bytes per block (a plain dtype's element size).
std::size_t dtype_block_bytes(DType dtype);
// The dtype's number in ggml's enum ggml_type (a GGUF tensor's type), -1 for bool.
int ggml_type_of(DType dtype);
// The dtype of a ggml type number; nullopt for types tinyfin does not have.
std::optional<DType> dtype_from_ggml_type(int ggml_type);

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
    return DType::f32;
}
template <>
constexpr DType dtype_of<int32_t>() {
    return DType::i32;
}
template <>
constexpr DType dtype_of<int64_t>() {
    return DType::i64;
}
template <>
constexpr DType dtype_of<bool>() {
    return DType::boolean;
}

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

// The bytes of a dense tensor of shape and dtype, overflow-checked. ShapeError for a quantized
// dtype whose shape is rank 0 or whose last axis is not a multiple of the block length.
uint64_t dtype_bytes(DType dtype, const Shape &shape);

// Axes, like sizes, are int64_t throughout (negative axes count from the end). A list of axes
// is built from a brace list ({0, -1}) or a vector of int64_t or int, so older code that keeps
// its axes in a std::vector<int> still compiles.
class Axes {
public:
    Axes() = default;
    Axes(std::initializer_list<int64_t> axes) : axes_(axes) {}
    Axes(std::vector<int64_t> axes) : axes_(std::move(axes)) {}
    Axes(const std::vector<int> &axes) : axes_(axes.begin(), axes.end()) {}
    const std::vector<int64_t> &values() const { return axes_; }
    std::size_t size() const { return axes_.size(); }
    bool empty() const { return axes_.empty(); }
    int64_t operator[](std::size_t i) const { return axes_[i]; }
    std::vector<int64_t>::const_iterator begin() const { return axes_.begin(); }
    std::vector<int64_t>::const_iterator end() const { return axes_.end(); }

private:
    std::vector<int64_t> axes_;
};

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
    int64_t size(int64_t axis) const;
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
    Tensor transpose(int64_t axis0, int64_t axis1) const;
    Tensor permute(const Axes &axes) const;
    // Elements start, start+step, ... < end along axis (negative start/end count from the end).
    Tensor slice(int64_t axis, int64_t start, int64_t end, int64_t step = 1) const;
    // Broadcasts size-1 axes (and new leading axes) to shape with stride 0; -1 keeps a size.
    Tensor expand(const Shape &shape) const;

    // Returns this tensor when already contiguous, else a contiguous copy on the same device.
    Tensor contiguous() const;
    // Copy to another device (same tensor when already there); counted in stats().
    Tensor to(const Device &device) const;
    Tensor to(std::string_view device) const { return to(Device::parse(device)); }
    // Cast to another dtype on the same device.
    Tensor to(DType dtype) const;

    // Copies src (broadcast to this shape, cast to this dtype) into this tensor's elements in
    // place, on this tensor's device (PyTorch's copy_). Under NoGradGuard (optimizers,
    // initialisers) nothing is recorded. With grad mode on, a write into a tensor with history,
    // or of a src that requires grad, is recorded: this tensor's history (a view's base's, for a
    // view) becomes the write, so t.assign_(op(t, x)) is an in-place op with a gradient. Writing
    // into a leaf that requires grad (or a view of one) with grad mode on is an AutogradError.
    // A backward rule that saved this tensor's values before the write then refuses to run.
    void assign_(const Tensor &src);
    // How many in-place writes (assign_, the out= forms, copy_from_host) its storage has had;
    // shared by every view of it. Autograd compares it with the version a rule saved.
    uint64_t version() const;
    // Makes this leaf view data's storage (dtype, shape, strides, offset) in place, keeping its
    // autograd state (requires_grad, grad): every handle to it (a module's, an optimizer's) sees
    // the new data, as PyTorch's `t.data = data`. For moving parameters between devices. The
    // grad is left as it was (move or reset it to match).
    void set_data(const Tensor &data);

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

    // Host address of the first element when the storage is host-addressable (cpu, blas), after
    // waiting for pending work on the device; nullptr on a device without host addresses
    // (vulkan, opengl, cuda). For zero-copy interop (numpy, DLPack): the memory stays valid while
    // this tensor or any view of its storage lives. Layout: strides() and dtype().
    void *host_data() const;

    // Host read-back, in row-major order. Waits for pending device work.
    void copy_to_host(void *dst, std::size_t bytes) const;
    template <typename T>
    std::vector<T> to_vector() const;
    // The value of a one-element tensor.
    template <typename T>
    T item() const;

    TensorImpl *impl() const { return impl_.get(); }

private:
    std::shared_ptr<TensorImpl> impl_;
};

// ---- Factories -----------------------------------------------------------------
// device defaults to default_device(), the first device of the selected backend.

Tensor empty(const Shape &shape, DType dtype = DType::f32, std::optional<Device> device = {});
Tensor full(const Shape &shape, double value, DType dtype = DType::f32, std::optional<Device> device = {});
Tensor zeros(const Shape &shape, DType dtype = DType::f32, std::optional<Device> device = {});
Tensor ones(const Shape &shape, DType dtype = DType::f32, std::optional<Device> device = {});
// A rank-0 tensor.
Tensor scalar(double value, DType dtype = DType::f32, std::optional<Device> device = {});
// start, start+step, ... < end.
Tensor arange(double start, double end, double step = 1, DType dtype = DType::f32, std::optional<Device> device = {});
// Integer arguments give i64, like torch.arange(0, 5): arange(5), arange(2, 8, 2).
// arange(0, 5.0) (any floating-point argument) picks the overload above and gives f32.
Tensor arange(int64_t start, int64_t end, int64_t step, DType dtype = DType::i64, std::optional<Device> device = {});
// (A template so that arange(0, 5) is an exact match rather than a tie with the double form.)
template <std::integral A, std::integral B, std::integral C = int64_t>
Tensor arange(A start, B end, C step = 1, DType dtype = DType::i64, std::optional<Device> device = {}) {
    return arange(static_cast<int64_t>(start), static_cast<int64_t>(end), static_cast<int64_t>(step), dtype,
                  std::move(device));
}
inline Tensor arange(int64_t end) { return arange(int64_t{0}, end, int64_t{1}); }
// Copies numel(shape) elements of dtype from host memory.
Tensor from_host(const void *data, const Shape &shape, DType dtype, std::optional<Device> device = {});
template <typename T>
Tensor from_vector(const std::vector<T> &values, const Shape &shape, std::optional<Device> device = {});
// A cpu tensor over host memory the caller owns (no copy): shape and strides in elements
// (strides >= 0; elements may not overlap unless the tensor is only read). release runs once,
// when the last tensor viewing this memory is gone; the caller keeps data alive until then.
// For zero-copy numpy and DLPack imports. Throws ValueError for a NULL data with elements,
// negative strides or mismatched ranks, BackendError when the cpu plugin cannot wrap memory.
Tensor from_blob(void *data, const Shape &shape, const Shape &strides, DType dtype, std::function<void()> release);
// The same on any device whose memory is host memory (cpu, blas: Device's host_addressable in
// devices()): the tensor lives on that device and its ops read the memory in place. Throws
// DeviceError for a device that is not available, BackendError for one that does not address
// host memory (copy with from_host there) or cannot wrap it.
Tensor from_blob(void *data, const Shape &shape, const Shape &strides, DType dtype, std::function<void()> release,
                 const Device &device);
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
// The exact gelu's gradient in one pass: dy (Phi(x) + x phi(x)), float dtypes. One op where the
// operands' plugin has a kernel for it, the same formula as ordinary ops on that device otherwise.
Tensor gelu_backward(const Tensor &dy, const Tensor &x);
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
// Tensor-scalar forms: the scalar takes the tensor's dtype and device (a rank-0 operand).
Tensor add(const Tensor &a, double b);
Tensor sub(const Tensor &a, double b);
Tensor mul(const Tensor &a, double b);
Tensor div(const Tensor &a, double b);
Tensor pow(const Tensor &a, double exponent);
Tensor maximum(const Tensor &a, double b);
Tensor minimum(const Tensor &a, double b);
Tensor add(double a, const Tensor &b);
Tensor sub(double a, const Tensor &b);
Tensor mul(double a, const Tensor &b);
Tensor div(double a, const Tensor &b);
Tensor pow(double base, const Tensor &exponent);
Tensor maximum(double a, const Tensor &b);
Tensor minimum(double a, const Tensor &b);
// Comparisons with a scalar, both orders (gt(x, 0.5), lt(0.5, x)). A float tensor compares with
// the scalar rounded to its dtype (as above, and as torch does); an integer or bool tensor with
// the scalar's exact value: lt(i, 0.5) is i <= 0, eq(i, 0.5) all false.
Tensor eq(const Tensor &a, double b);
Tensor ne(const Tensor &a, double b);
Tensor lt(const Tensor &a, double b);
Tensor le(const Tensor &a, double b);
Tensor gt(const Tensor &a, double b);
Tensor ge(const Tensor &a, double b);
Tensor eq(double a, const Tensor &b);
Tensor ne(double a, const Tensor &b);
Tensor lt(double a, const Tensor &b);
Tensor le(double a, const Tensor &b);
Tensor gt(double a, const Tensor &b);
Tensor ge(double a, const Tensor &b);

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
// clang-format off
#define TINYFIN_BINARY_OUT_OPS(X) \
    X(add, ADD) X(sub, SUB) X(mul, MUL) X(div, DIV) X(pow, POW) X(maximum, MAXIMUM)            \
    X(minimum, MINIMUM) X(eq, EQ) X(ne, NE) X(lt, LT) X(le, LE) X(gt, GT) X(ge, GE)           \
    X(relu_backward, RELU_BACKWARD) X(gelu_backward, GELU_BACKWARD)
// clang-format on
#define TINYFIN_DECLARE_OUT(fn, SYM) void fn(const Tensor &a, const Tensor &b, const Tensor &out);
TINYFIN_BINARY_OUT_OPS(TINYFIN_DECLARE_OUT)
#undef TINYFIN_DECLARE_OUT

// Elementwise cond ? a : b, all three broadcast; cond is bool.
Tensor where(const Tensor &cond, const Tensor &a, const Tensor &b);
// The scalar takes the tensor operand's dtype and device.
Tensor where(const Tensor &cond, const Tensor &a, double b);
Tensor where(const Tensor &cond, double a, const Tensor &b);

Tensor abs(const Tensor &a);
Tensor log(const Tensor &a);
Tensor sqrt(const Tensor &a);
Tensor rsqrt(const Tensor &a);
Tensor sin(const Tensor &a);
Tensor cos(const Tensor &a);
Tensor tanh(const Tensor &a);
Tensor erf(const Tensor &a);
// The inverse trigonometric and hyperbolic functions (NaN outside their domains).
Tensor asin(const Tensor &a);
Tensor acos(const Tensor &a);
Tensor atan(const Tensor &a);
Tensor asinh(const Tensor &a);
Tensor acosh(const Tensor &a);
Tensor atanh(const Tensor &a);
Tensor sigmoid(const Tensor &a);
// approximate = false: x * Phi(x) with erf; true: the tanh approximation.
Tensor gelu(const Tensor &a, bool approximate = false);
Tensor silu(const Tensor &a);
Tensor square(const Tensor &a);
// Pass -INFINITY / INFINITY to leave a side open.
Tensor clamp(const Tensor &a, double min, double max);

// Reductions over axes (all axes when empty); negative axes count from the end.
Tensor sum(const Tensor &a, const Axes &axes = {}, bool keepdim = false);
Tensor mean(const Tensor &a, const Axes &axes = {}, bool keepdim = false);
Tensor max(const Tensor &a, const Axes &axes = {}, bool keepdim = false);
Tensor min(const Tensor &a, const Axes &axes = {}, bool keepdim = false);
// The divisor of var is n - correction: Correction(1) is the unbiased estimate (torch.var's
// default), Correction(0) the population variance. A number converts to a Correction; a bool
// does not, so a keepdim flag can never be taken for a correction.
struct Correction {
    template <typename T>
    requires(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) constexpr Correction(T value)
        : value(static_cast<double>(value)) {}
    double value;
};
Tensor var(const Tensor &a, const Axes &axes, Correction correction, bool keepdim = false);
// var(x), var(x, axes) and var(x, axes, keepdim) use correction 1; like sum, the flag after the
// axes is keepdim (var(x, {-1}, true) keeps the axis).
Tensor var(const Tensor &a, const Axes &axes = {});
template <typename B>
requires std::is_same_v<B, bool> Tensor var(const Tensor &a, const Axes &axes, B keepdim) {
    return var(a, axes, Correction(1), keepdim);
}
// i64 index of the first extreme along axis.
Tensor argmax(const Tensor &a, int64_t axis, bool keepdim = false);
Tensor argmin(const Tensor &a, int64_t axis, bool keepdim = false);
// Over all elements: a rank-0 i64 index into the flattened (row-major) tensor, like torch.argmax(x).
Tensor argmax(const Tensor &a);
Tensor argmin(const Tensor &a);

// 1-D, 2-D and batched ([..., M, K] x [..., K, N], batch dims broadcast).
Tensor matmul(const Tensor &a, const Tensor &b);
Tensor cast(const Tensor &a, DType dtype);

// ---- Neural-network ops ---------------------------------------------------------------

// x weight^T + bias: x [..., in], weight [out, in], bias [out] or undefined -> [..., out]
// (torch.nn.functional.linear).
Tensor linear(const Tensor &x, const Tensor &weight, const Tensor &bias = Tensor());
// Collapses axes start_dim..end_dim into one (a view when the strides allow, like reshape):
// [N, C, H, W] -> [N, C*H*W] by default. A rank-0 tensor becomes [1].
Tensor flatten(const Tensor &x, int64_t start_dim = 1, int64_t end_dim = -1);

// Per-axis fields, or both axes at once: Conv2dOptions{}.stride(2).padding(1).
struct Conv2dOptions {
    int stride_h = 1, stride_w = 1;
    int pad_h = 0, pad_w = 0;
    int dilation_h = 1, dilation_w = 1;
    int groups = 1;

    Conv2dOptions &stride(int s) {
        stride_h = stride_w = s;
        return *this;
    }
    Conv2dOptions &padding(int p) {
        pad_h = pad_w = p;
        return *this;
    }
    Conv2dOptions &dilation(int d) {
        dilation_h = dilation_w = d;
        return *this;
    }
};
// x [N,C,H,W], weight [O,C/groups,KH,KW], bias [O] or undefined -> [N,O,OH,OW].
Tensor conv2d(const Tensor &x, const Tensor &weight, const Tensor &bias = Tensor(), const Conv2dOptions &options = {});
// conv2d, plus residual when defined, then an activation, in one pass where the backend fuses
// them (the conv2d_act op): relu(conv2d(...) + residual) for Conv2dActivation::relu,
// minimum(maximum(., min), max) for clip. The same values as the separate ops; with autograd,
// under autocast, for a residual of another shape than the output, or on a backend without the
// fused kernel, those ops run.
enum class Conv2dActivation { none, relu, clip };
Tensor conv2d_activation(const Tensor &x, const Tensor &weight, const Tensor &bias, const Conv2dOptions &options,
                         Conv2dActivation activation, double min = 0, double max = 0,
                         const Tensor &residual = Tensor());

// Per-axis fields, or both axes at once: Pool2dOptions{}.kernel(3).stride(2).padding(1).
// Output size per axis, as torch: (in + 2 pad - dilation (kernel - 1) - 1) / stride + 1, rounded
// down, or up with ceil_mode (then a last window that would start in the right padding is
// dropped). Padding is at most kernel / 2.
struct Pool2dOptions {
    int kernel_h = 2, kernel_w = 2;
    int stride_h = 0, stride_w = 0;  // 0: the kernel size
    int pad_h = 0, pad_w = 0;
    bool count_include_pad = true;  // avg only: the divisor counts the padding (never the
        // ceil_mode overhang past it)
    int dilation_h = 1, dilation_w = 1;  // max only (torch's avg_pool2d has no dilation)
    bool ceil_mode = false;

    Pool2dOptions &kernel(int k) {
        kernel_h = kernel_w = k;
        return *this;
    }
    Pool2dOptions &stride(int s) {
        stride_h = stride_w = s;
        return *this;
    }
    Pool2dOptions &padding(int p) {
        pad_h = pad_w = p;
        return *this;
    }
    Pool2dOptions &dilation(int d) {
        dilation_h = dilation_w = d;
        return *this;
    }
    Pool2dOptions &ceil(bool on = true) {
        ceil_mode = on;
        return *this;
    }
};
Tensor max_pool2d(const Tensor &x, const Pool2dOptions &options = {});
Tensor avg_pool2d(const Tensor &x, const Pool2dOptions &options = {});

Tensor softmax(const Tensor &x, int64_t axis = -1);
// The running sum along axis (torch.cumsum; ONNX CumSum's flags): exclusive starts each sum at 0
// (element i sums the elements before it), reverse runs from the last element. Keeps x's dtype;
// integers wrap. Under autocast computed in f32.
Tensor cumsum(const Tensor &x, int64_t axis, bool exclusive = false, bool reverse = false);
Tensor log_softmax(const Tensor &x, int64_t axis = -1);
// Normalises over the last n_axes axes; weight and bias have those axes' shape (or are undefined).
Tensor layer_norm(const Tensor &x, int n_axes, const Tensor &weight = Tensor(), const Tensor &bias = Tensor(),
                  double eps = 1e-5);
Tensor rms_norm(const Tensor &x, int n_axes, const Tensor &weight = Tensor(), double eps = 1e-6);
// Rotary embedding of x (D = the last axis, even) at positions offset .. offset+T-1 along
// seq_axis, of size T: -2 for [..., T, D] ([B, H, T, D]), 1 for [B, T, H, D].
Tensor rope(const Tensor &x, double theta = 10000.0, bool interleaved = false, int64_t position_offset = 0,
            int64_t seq_axis = -2);
// The same at explicit positions: positions is [T] (any dtype, read to the host), element t the
// position of index t along seq_axis (packed sequences, left padding, gaps). The rotation is
// composed of elementwise ops on cos/sin tables computed in double, so gradients flow to x.
Tensor rope(const Tensor &x, const Tensor &positions, double theta = 10000.0, bool interleaved = false,
            int64_t seq_axis = -2);

// Which query row the causal mask starts from when Tq != Tk (with Tq == Tk both are the
// usual lower triangle):
// - bottom_right: query i sees keys j <= i + (Tk - Tq), so the last query sees every key: the
//   queries are the last Tq positions of the sequence (decoding with a KV cache; flash-attention's
//   and plugin.h's convention).
// - top_left: query i sees keys j <= i, as torch's scaled_dot_product_attention(is_causal=True).
enum class CausalAlignment { bottom_right = 0, top_left = 1 };

// softmax(q k^T * scale + mask) v over q [..., Tq, D], k [..., Tk, D], v [..., Tk, Dv];
// scale <= 0 means 1/sqrt(D). mask broadcasts to [..., Tq, Tk] and is either additive (q's dtype)
// or bool, where true means "may attend" like torch's SDPA (false positions get -inf; a row with
// no true entry gives NaN, as in torch). Without a mask (the default) nothing is added to the
// scores and no mask tensor is made, not even a zero one. causal hides the keys after each
// query, aligned as `alignment` says.
Tensor scaled_dot_product_attention(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor &mask = Tensor(),
                                    bool causal = false, double scale = 0,
                                    CausalAlignment alignment = CausalAlignment::bottom_right);
// Rows of weight [V, D] picked by integer indices [...] -> [..., D].
// An index outside [0, V) (for cross_entropy and one_hot, a label outside [0, C) that is not
// ignore_index) is a ValueError of the calling thread: raised by the op on cpu; on vulkan and
// opengl found by the kernel and raised by this thread's next read or synchronize on that
// device, the rows it picks reading 0 and the loss NaN.
Tensor embedding(const Tensor &weight, const Tensor &indices);

// ---- Block-quantized tensors (docs/quantization.md) ----
// Inference ops, not recorded by autograd. A quantized tensor comes from quantize(), from
// from_host() / from_blob() over GGUF's block bytes (shape in elements), or from a loader.
// x [..., K] (f32, f16, bf16; K a multiple of the block length) encoded as dtype (q8_0 .. q8_k)
// block by block, as ggml's quantize_row_*_ref encodes it.
Tensor quantize(const Tensor &x, DType dtype);
// q [..., K] quantized -> the same shape in dtype (f32, f16, bf16).
Tensor dequantize(const Tensor &q, DType dtype = DType::f32);
// x [..., K] (f32, f16, bf16) times the transpose of w [N, K] (quantized; ggml's and
// torch.nn.Linear's weight layout) -> [..., N] of out_dtype: f32 or x's dtype (the default).
Tensor matmul_q(const Tensor &x, const Tensor &w, std::optional<DType> out_dtype = {});
// Promises that w's bytes stay as they are while its storage lives (no in-place writes) and lets
// its backend keep a private copy of w in a layout of its own, which matmul_q then reads instead:
// the cpu plugin repacks q4_0, q8_0, q4_k and q6_k weights [N, K] eight rows at a time (docs/quantization.md;
// TINYFIN_CPU_PREPACK=0 turns it off). Returns the copy's bytes, 0 when the backend made none.
// Results equal the plain layout's up to the order of f32 additions.
uint64_t prepack_weight(const Tensor &w);
// weight [V, D] quantized, indices (i32/i64) [...] -> [..., D] of dtype (f32, f16, bf16).
// embedding(weight, indices) with a quantized weight is this with f32.
Tensor embedding_q(const Tensor &weight, const Tensor &indices, DType dtype = DType::f32);

enum class Reduction { none = 0, mean = 1, sum = 2 };
// logits [N, C], integer labels [N]. Labels equal to ignore_index are skipped.
Tensor cross_entropy(const Tensor &logits, const Tensor &labels, Reduction reduction = Reduction::mean,
                     int64_t ignore_index = -100);
// torch.nn.functional.cross_entropy's options. weight [C] (logits' dtype) scales each class's
// loss, and mean divides by the summed weights of the counted labels; label_smoothing in [0, 1]
// mixes the one-hot target with the uniform 1/C (the smoothing term weighted by weight too).
struct CrossEntropyOptions {
    Reduction reduction = Reduction::mean;
    int64_t ignore_index = -100;
    Tensor weight{};  // undefined: every class weighs 1
    double label_smoothing = 0;
};
// cross_entropy(logits, labels, {.weight = w, .label_smoothing = 0.1}).
Tensor cross_entropy(const Tensor &logits, const Tensor &labels, const CrossEntropyOptions &options);
Tensor one_hot(const Tensor &labels, int num_classes, DType dtype = DType::f32);

// ---- Optimizer updates (in place; what nn::optim's AdamW and SGD call per parameter) ----------

// One AdamW update, PyTorch's rule at step `step` (counting from 1):
//   m = beta1 m + (1 - beta1) g,  v = beta2 v + (1 - beta2) g^2,
//   param = param (1 - lr weight_decay) - lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
struct AdamWStep {
    double lr = 1e-3;
    double beta1 = 0.9, beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 0;
    int64_t step = 1;
};
// param (float), grad and the moments exp_avg, exp_avg_sq share shape, dtype and device; param
// and the moments are updated in place (undefined moments: the first step, they are created). One
// op (adamw_step) where the device's plugin has it, else ordinary ops on that device; on one
// device both give the same bits. Not recorded by autograd.
void adamw_step_(const Tensor &param, const Tensor &grad, Tensor &exp_avg, Tensor &exp_avg_sq, const AdamWStep &step);

// One SGD update with momentum (> 0), PyTorch's rule without dampening:
//   d = g + weight_decay param,  buf = momentum buf + d (d on the first step),
//   param = param - lr (nesterov ? d + momentum buf : buf)
struct SGDStep {
    double lr = 1e-2;
    double momentum = 0.9;
    double weight_decay = 0;
    bool nesterov = false;
};
// Like adamw_step_ (op sgd_step): param and momentum_buffer updated in place, an undefined
// buffer created on the first step.
void sgd_step_(const Tensor &param, const Tensor &grad, Tensor &momentum_buffer, const SGDStep &step);

// ---- Layout ---------------------------------------------------------------------------

// Copy along an existing axis / a new axis.
Tensor concat(const std::vector<Tensor> &tensors, int64_t axis = 0);
Tensor stack(const std::vector<Tensor> &tensors, int64_t axis = 0);
// Views of consecutive pieces of the given sizes along axis.
std::vector<Tensor> split(const Tensor &tensor, const std::vector<int64_t> &sizes, int64_t axis = 0);
// Constant padding: pads = {before_0, after_0, before_1, after_1, ...} from the first axis.
Tensor pad(const Tensor &tensor, const std::vector<int64_t> &pads, double value = 0);
// length elements from start along axis (a view).
Tensor narrow(const Tensor &tensor, int64_t axis, int64_t start, int64_t length);

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
// Sets it on this thread (torch.set_grad_enabled); prefer the guard below for a scope.
void set_grad_enabled(bool on);
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

// ---- Autocast (mixed precision) ------------------------------------------------------

// While alive, this thread's ops follow autocast's table (core/autocast.cpp, docs/numerics.md):
// - low precision (matmul, linear, conv2d and its gradients, scaled_dot_product_attention): the
//   float operands are cast to `dtype` and the op runs in it, when the operands' backend claims
//   the op in that dtype (its supports()); otherwise they stay as they are (f32).
// - f32 (softmax, log_softmax, layer_norm, rms_norm, sum, mean, var, cross_entropy, exp, log):
//   f16/bf16 operands are cast to f32 and the op runs in f32.
// - widest (add, sub, mul, div, where): operands of different float dtypes are cast to f32, so
//   an f16/bf16 activation meets an f32 residual or bias without a DTypeError.
// The casts are ordinary recorded ops: a parameter stays f32 (the master weight) and its
// gradient comes back f32 through the cast's backward. backward() runs with autocast off (the
// gradients follow the dtypes the forward pass recorded). Guards nest: the innermost decides;
// AutocastGuard(DType::f32) or AutocastGuard(false) turns autocast off inside its scope.
// dtype must be f16, bf16 or f32 (DTypeError otherwise).
class AutocastGuard {
public:
    explicit AutocastGuard(DType dtype);
    explicit AutocastGuard(bool enabled, DType dtype = DType::bf16);
    ~AutocastGuard();
    AutocastGuard(const AutocastGuard &) = delete;
    AutocastGuard &operator=(const AutocastGuard &) = delete;

private:
    int32_t previous_;
};
// The low-precision dtype of this thread's innermost autocast scope; nullopt when autocast is off.
std::optional<DType> autocast_dtype();
// An op's row of the autocast table: "lower", "f32", "widest" or "none" (for tests and docs).
std::string autocast_policy(std::string_view op);

// Broadcast shape of two shapes; throws ShapeError naming op when they do not broadcast.
Shape broadcast_shapes(const Shape &a, const Shape &b, std::string_view op = "broadcast");

// ---- Backends --------------------------------------------------------------------

// Chooses backends like TINYFIN_BACKEND ("auto" or a list such as "vulkan,blas").
// Returns false (and logs why) when no listed backend is usable; cpu remains.
bool set_backend(std::string_view list);
// Chooses the backend as set_backend(preference) does, but only among backends whose device 0
// reports at least required_bytes of free memory (tinyfin-info's "free"; a device that reports
// none counts as fitting): with "auto" the best-priority one that fits, cpu last; with a list
// the first listed one that fits. preference "" means the current list (the last set_backend's,
// else TINYFIN_BACKEND, else auto). Returns the chosen backend's name; throws OutOfMemoryError
// naming every device, its free memory and the requirement when none fits, leaving the
// selection as it was.
std::string select_backend_for_memory(uint64_t required_bytes, std::string_view preference = {});
// What an op does with operands on different devices. move (the C++ default): runs on the
// device of the operand whose backend has the highest priority, copying the others there
// (counted in stats()). strict (Python's default, as PyTorch): DeviceError naming the op and
// both devices. Either way a rank-0 tensor on cpu (a scalar) joins the other operands' device.
// Process-wide.
enum class MixedDevices { move, strict };
void set_mixed_devices(MixedDevices policy);
MixedDevices mixed_devices();
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
        uint64_t ops = 0;  // ops run by this backend
        uint64_t bytes_to_device = 0;  // host -> this backend's devices
        uint64_t bytes_to_host = 0;  // this backend's devices -> host
        uint64_t allocations = 0;  // buffers allocated
        uint64_t bytes_allocated = 0;
        uint64_t bytes_in_use = 0;  // bytes of tensor storage alive now
        uint64_t peak_bytes_in_use = 0;  // the most alive at once since reset_stats()
    };
    std::vector<Backend> backends;
    // (op name, count) for every op that fell back to cpu at least once.
    std::vector<std::pair<std::string, uint64_t>> fallbacks;
    uint64_t total_fallbacks = 0;

    const Backend *backend(std::string_view name) const;  // into this Stats: keep it, not just the pointer
    uint64_t fallbacks_of(std::string_view op) const;
};
Stats stats();
void reset_stats();

// ---- Introspection (tinyfin-info) --------------------------------------------------

struct DeviceReport {
    std::string name;
    std::string kind;  // "cpu", "gpu", "integrated-gpu", "software-gpu", "other"
    uint64_t memory_total = 0;
    uint64_t memory_free = 0;
    std::string uuid;
    bool host_addressable = false;
};

struct PluginReport {
    std::string path;  // as found on the search path
    std::string resolved_path;  // realpath
    std::string name;  // backend name ("" when the plugin never said)
    std::string outcome;  // "loaded", "dlopen-failed", "no-entry-symbol", "entry-refused",
        // "abi-mismatch", "invalid-table", "probe-refused",
        // "init-failed", "shadowed", "insecure", "not-a-file"; with
        // tinyfin-info --isolate also "crashed", "timed-out"
    std::string message;  // why, for every outcome but "loaded"
    std::string version;
    uint32_t abi_version = 0;  // the plugin's, packed (major << 16) | minor
    int priority = 0;
    bool initialised = false;
    std::vector<DeviceReport> devices;
    std::vector<std::pair<std::string, std::string>> features;
    std::vector<std::string> supported_ops;  // ops whose sample descriptor supports() accepts
};

struct SearchDir {
    std::string path;
    std::string origin;  // "TINYFIN_PLUGIN_PATH", "install", "build-tree"
};

struct Report {
    std::vector<SearchDir> search_path;
    std::vector<PluginReport> plugins;
    std::string requested;  // TINYFIN_BACKEND or set_backend text
    std::string selected;  // backend factories use
    std::vector<std::string> selection_notes;  // why: one line per decision
    uint32_t core_abi_version = 0;
    std::string core_version;
};
// Initialises every loaded plugin (to list devices) and describes the whole registry.
Report report();
// The report as the JSON document `tinyfin-info --json` prints (schema "tinyfin-info/1").
std::string report_json(const Report &report);
// The report as the text `tinyfin-info` and `python -m tinyfin` print.
std::string report_text(const Report &report);
// The report of one loaded backend, initialising only that one: its devices (with free memory
// now), features (live counters) and sample op support. Throws BackendError when no loaded
// backend has that name.
PluginReport backend_report(std::string_view name);
// Names of all ops in ops.def order.
std::vector<std::string> op_names();

// ---- Plugin isolation (tinyfin-info --isolate) ----------------------------------

// An outcome decided outside the loader, e.g. "crashed" by a child process that probed the file.
struct PluginVerdict {
    std::string path;  // as plugin_candidates() lists it
    std::string outcome;
    std::string message;
};
// The files the loader would try, in search order, without opening any of them.
std::vector<std::string> plugin_candidates();
// Before any other tinyfin call: load only the files in `only` (the whole search path when
// empty), and give each verdict's file its outcome without opening it. Throws BackendError once
// plugins are loaded.
void configure_plugin_loading(const std::vector<std::string> &only, const std::vector<PluginVerdict> &verdicts);

// ---- Template definitions -------------------------------------------------------

template <typename T>
std::vector<T> Tensor::to_vector() const {
    static_assert(std::is_arithmetic_v<T>);
    // Another dtype is cast on the tensor's device first (like item()), so to_vector<float>() of
    // an i64 tensor reads its values as floats.
    if (dtype() != dtype_of<T>()) return to(dtype_of<T>()).template to_vector<T>();
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

template <typename T>
T Tensor::item() const {
    if (numel() != 1)
        throw ShapeError("ShapeError: item: tensor of shape " + shape_str(shape()) + " has " + std::to_string(numel()) +
                         " elements, expected 1");
    Tensor t = dtype() == dtype_of<T>() ? *this : to(dtype_of<T>());
    return t.to_vector<T>()[0];
}

template <typename T>
Tensor from_vector(const std::vector<T> &values, const Shape &shape, std::optional<Device> device) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    if (n != static_cast<int64_t>(values.size()))
        throw ShapeError("ShapeError: from_vector: " + std::to_string(values.size()) + " values do not fill shape " +
                         shape_str(shape));
    if constexpr (std::is_same_v<T, bool>) {
        // std::vector<bool> is packed: one byte per element for the bool dtype.
        std::vector<uint8_t> bytes(values.begin(), values.end());
        return from_host(bytes.data(), shape, DType::boolean, std::move(device));
    } else {
        return from_host(values.data(), shape, dtype_of<T>(), std::move(device));
    }
}

}  // namespace tinyfin
