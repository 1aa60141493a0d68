// Fuzz target: random op descriptors through the core. The input bytes pick a dtype, a shape
// (sometimes an absurd one), a chain of views (transpose, permute, slice, expand, reshape, so
// strides and offsets vary) and an op with parameters. The core must either reject the call
// with a tinyfin::Error or run it with results equal to a reference computed here from the
// host copy of the data, read through the strides and offset the core reports.
//
// Values are small integers, so f32 and i32 sums and products are exact and results are
// compared exactly. Built as a libFuzzer target with -Dfuzz=enabled (clang); otherwise
// replay_main.cpp runs the files of tests/fuzz/corpus through the same function.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;

namespace {

class Bytes {
public:
    Bytes(const uint8_t *data, size_t size) : data_(data), size_(size) {}
    uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
    bool empty() const { return pos_ >= size_; }
    int64_t i64() {
        uint64_t v = 0;
        for (int i = 0; i < 8; ++i) v = (v << 8) | u8();
        return static_cast<int64_t>(v);
    }
    // Mostly small values (valid arguments), sometimes anything.
    int64_t arg() {
        uint8_t b = u8();
        if (b == 0xff) return i64();
        return static_cast<int64_t>(b % 9) - 3;
    }

private:
    const uint8_t *data_;
    size_t size_, pos_ = 0;
};

[[noreturn]] void finding(const char *what) {
    std::fprintf(stderr, "fuzz-ops: %s\n", what);
    std::abort();
}

// The tensor's elements in row-major order, read from the base's host values through the
// strides and offset the core reports; aborts when the view reaches outside the base.
std::vector<double> gather(const Tensor &view, const std::vector<double> &base) {
    std::vector<double> out;
    const Shape &shape = view.shape();
    const Shape &strides = view.strides();
    int64_t n = view.numel();
    std::vector<int64_t> index(shape.size(), 0);
    for (int64_t e = 0; e < n; ++e) {
        int64_t at = view.offset();
        for (size_t d = 0; d < shape.size(); ++d) at += index[d] * strides[d];
        if (at < 0 || at >= static_cast<int64_t>(base.size())) finding("view reaches outside its storage");
        out.push_back(base[static_cast<size_t>(at)]);
        for (size_t d = shape.size(); d-- > 0;) {
            if (++index[d] < shape[d]) break;
            index[d] = 0;
        }
    }
    return out;
}

std::vector<double> values_of(const Tensor &t) {
    std::vector<double> out;
    if (t.dtype() == DType::f32)
        for (float v : t.to_vector<float>()) out.push_back(v);
    else
        for (int32_t v : t.to_vector<int32_t>()) out.push_back(v);
    return out;
}

void expect_equal(const std::vector<double> &got, const std::vector<double> &want, const char *op) {
    if (got.size() != want.size()) finding(op);
    for (size_t i = 0; i < got.size(); ++i)
        if (got[i] != want[i]) {
            std::fprintf(stderr, "fuzz-ops: %s: element %zu is %g, reference %g\n", op, i, got[i], want[i]);
            std::abort();
        }
}

Shape random_shape(Bytes &in) {
    Shape shape(in.u8() % 5);
    for (int64_t &d : shape) {
        uint8_t b = in.u8();
        d = b == 0xff ? in.i64() : b % 6;
    }
    return shape;
}

// One view step on t, chosen by the input; may throw tinyfin::Error.
Tensor view_step(Bytes &in, const Tensor &t) {
    switch (in.u8() % 6) {
    case 0: return t.transpose(static_cast<int>(in.arg()), static_cast<int>(in.arg()));
    case 1: {
        std::vector<int> axes(static_cast<size_t>(t.rank()));
        std::iota(axes.begin(), axes.end(), 0);
        if (!axes.empty()) std::swap(axes[in.u8() % axes.size()], axes[in.u8() % axes.size()]);
        if (in.u8() % 8 == 0 && !axes.empty()) axes[0] = static_cast<int>(in.arg());
        return t.permute(axes);
    }
    case 2: return t.slice(static_cast<int>(in.arg()), in.arg(), in.arg(), in.arg());
    case 3: {
        Shape shape = t.shape();
        shape.insert(shape.begin(), in.u8() % 3 + 1);
        for (int64_t &d : shape)
            if (d == 1 && in.u8() % 2) d = in.u8() % 4 + 1;
        return t.expand(shape);
    }
    case 4: return t.reshape(random_shape(in));
    default: return narrow(t, static_cast<int>(in.arg()), in.arg(), in.arg());
    }
}

// A valid shape with more elements than is worth filling: skipped, so the fuzzer spends its
// time on descriptors rather than on memset (invalid shapes still go to the core).
bool too_big(const Shape &shape) {
    if (shape.size() > 8) return false;
    int64_t n = 1;
    for (int64_t d : shape)
        if (d < 0 || __builtin_mul_overflow(n, d, &n)) return false;
    return n > (int64_t(1) << 16);
}

// The product of the sizes with every zero counted as one, above 2^24 (or overflowing): a bound
// on the elements an op on them may legitimately allocate. A zero-size input with huge other
// axes is valid, and so is its 4 GB result (a sum over the zero axis, a pooling with a huge
// padding): such cases are skipped, as libFuzzer's memory limit would count them as findings.
template <class Sizes>
bool huge(const Sizes &sizes) {
    int64_t n = 1;
    for (int64_t v : sizes)
        if (v < 0 || __builtin_mul_overflow(n, std::max<int64_t>(v, 1), &n)) return true;
    return n > (int64_t(1) << 24);
}

bool huge(std::initializer_list<int64_t> sizes) { return huge<std::initializer_list<int64_t>>(sizes); }

// Output rows or columns of a window op, bounded from the raw parameters before the core checks
// them; INT64_MAX (huge) where the bound itself overflows (a view of size 2^63 - 1).
int64_t window_extent(int64_t in, int pad, int stride) {
    int64_t padded = 0;
    if (__builtin_add_overflow(in, 2 * std::abs(static_cast<int64_t>(pad)), &padded)) return INT64_MAX;
    const int64_t q = padded / std::max(stride, 1);
    return q == INT64_MAX ? q : q + 1;
}

// A convolution of more than 2^24 multiply-adds (output elements times taps): a padding of 2^26
// on a zero-width input asks, legitimately, for a 3 GB output and a column matrix four times that.
bool conv_too_big(const Tensor &x, const Shape &w, const Conv2dOptions &o) {
    if (x.rank() != 4 || w.size() != 4) return false;
    return huge({x.size(0), w[0], window_extent(x.size(2), o.pad_h, o.stride_h),
                 window_extent(x.size(3), o.pad_w, o.stride_w), w[1], w[2], w[3]});
}

void run_one(Bytes &in) {
    DType dtype = in.u8() % 4 == 0 ? DType::i32 : DType::f32;
    Shape shape = random_shape(in);
    if (too_big(shape)) return;
    Tensor base = zeros(shape, dtype);  // rejects bad shapes before any host vector is sized
    std::vector<double> host(static_cast<size_t>(base.numel()));
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<double>(i % 7) - 3;
    if (dtype == DType::f32) {
        std::vector<float> v(host.begin(), host.end());
        base = from_vector(v, shape);
    } else {
        std::vector<int32_t> v(host.begin(), host.end());
        base = from_vector(v, shape);
    }

    // view_base and view_host: the storage the view reads and its values. A reshape that cannot
    // be a view copies: the copy holds the previous view's elements in row-major order.
    Tensor view = base, view_base = base;
    std::vector<double> view_host = host;
    for (int steps = in.u8() % 4; steps > 0; --steps) {
        Tensor next = view_step(in, view);
        if (!next.shares_storage(view_base)) {
            view_host = gather(view, view_host);
            view_base = next;
        }
        view = next;
    }
    std::vector<double> ref = gather(view, view_host);
    expect_equal(values_of(view), ref, "view read-back");
    expect_equal(values_of(view.contiguous()), ref, "contiguous");

    switch (in.u8() % 8) {
    case 0: {
        std::vector<double> want;
        for (double v : ref) want.push_back(-v);
        expect_equal(values_of(neg(view)), want, "neg");
        break;
    }
    case 1: {
        if (dtype != DType::f32) {
            relu(view);  // integers: rejected or run, both fine
            break;
        }
        std::vector<double> want;
        for (double v : ref) want.push_back(v > 0 ? v : 0);
        expect_equal(values_of(relu(view)), want, "relu");
        break;
    }
    case 2: {
        // Elementwise with itself through a second view chain: same shape or a broadcast error.
        Tensor other = view;
        if (in.u8() % 2) other = view_step(in, base);
        Tensor sum_ = add(view, other);
        if (other.shape() == view.shape()) {
            std::vector<double> b = gather(other, other.shares_storage(base) ? host : view_host), want;
            for (size_t i = 0; i < ref.size(); ++i) want.push_back(ref[i] + b[i]);
            expect_equal(values_of(sum_), want, "add");
        }
        break;
    }
    case 3: {
        Tensor m = mul(view, view);
        std::vector<double> want;
        for (double v : ref) want.push_back(v * v);
        expect_equal(values_of(m), want, "mul");
        break;
    }
    case 4: {
        if (dtype != DType::f32) break;
        double total = 0;
        for (double v : ref) total += v;
        expect_equal(values_of(sum(view)), {total}, "sum");
        std::vector<int> axes;
        for (int k = in.u8() % 3; k > 0; --k) axes.push_back(static_cast<int>(in.arg()));
        const bool keepdim = in.u8() % 2;
        if (!huge(view.shape())) sum(view, axes, keepdim);  // shape checked by the core; values by the full sum above
        break;
    }
    case 5: {
        if (view.rank() != 2 || dtype != DType::f32) {
            matmul(view, view);
            break;
        }
        int64_t m = view.size(0), k = view.size(1);
        Tensor product = matmul(view, view.transpose(0, 1));
        std::vector<double> want(static_cast<size_t>(m * m), 0);
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < m; ++j)
                for (int64_t p = 0; p < k; ++p) want[i * m + j] += ref[i * k + p] * ref[j * k + p];
        expect_equal(values_of(product), want, "matmul");
        break;
    }
    case 6: {
        Conv2dOptions options;
        options.stride_h = static_cast<int>(in.arg());
        options.stride_w = static_cast<int>(in.arg());
        options.pad_h = static_cast<int>(in.arg());
        options.pad_w = static_cast<int>(in.arg());
        options.dilation_h = static_cast<int>(in.arg());
        options.groups = static_cast<int>(in.arg());
        Shape weight_shape = random_shape(in);
        if (too_big(weight_shape)) break;
        if (conv_too_big(view, weight_shape, options)) break;
        Tensor weight = ones(weight_shape, dtype);
        Tensor out = conv2d(view, weight, Tensor(), options);
        if (out.rank() != 4) finding("conv2d result is not 4-D");
        break;
    }
    default: {
        Pool2dOptions options;
        options.kernel_h = static_cast<int>(in.arg());
        options.kernel_w = static_cast<int>(in.arg());
        options.stride_h = static_cast<int>(in.arg());
        options.pad_h = static_cast<int>(in.arg());
        const bool max = in.u8() % 2;
        if (view.rank() == 4 &&
            huge({view.size(0), view.size(1), window_extent(view.size(2), options.pad_h, options.stride_h),
                  window_extent(view.size(3), options.pad_w, options.stride_w)}))
            break;
        Tensor out = max ? max_pool2d(view, options) : avg_pool2d(view, options);
        if (out.rank() != 4) finding("pool result is not 4-D");
        break;
    }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Bytes in(data, size);
    try {
        run_one(in);
    } catch (const Error &) {
        // Rejected with a typed exception: what the core must do with a bad descriptor.
    }
    return 0;
}
