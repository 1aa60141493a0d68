// conv2d and its two gradients around cblas_sgemm, one image and group at a time:
//   forward      y[n, g]  = W[g] . im2col(x[n, g])            (og x P = og x kdim . kdim x P)
//   grad_input   dx[n, g] = col2im(W[g]^T . dy[n, g])         (kdim x P = kdim x og . og x P)
//   grad_weight  dW[g]    = sum_n dy[n, g] . im2col(x[n, g])^T (og x kdim = og x P . P x kdim)
// with P = OH * OW and kdim = C/groups * KH * KW. A 1x1 convolution with stride 1 and no padding
// skips im2col/col2im; operands sgemm can read in place are not copied, the others go through
// scratch memory. One sgemm per image: several images side by side in one wider sgemm cost more
// in gather/scatter than the calls they save (docs/performance.md).
#include "blas.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <optional>

namespace tf_blas {
namespace {

// Below this many multiply-adds per call, im2col and the BLAS call cost more than they save.
constexpr int64_t k_min_work = 32 * 32 * 32;

// From this many taps per output (C/groups * KH * KW), a stride-1 convolution that is not
// pointwise is cpu's: its kernels read the column matrix in place from a padded image, faster
// than im2col + sgemm (docs/performance.md, cnn2 and resnet3x3).
constexpr int64_t k_cpu_shifted_taps = 32;

// Scratch slots (see blas.hpp): one per operand that may need packing.
enum : size_t { k_slot_col = 0, k_slot_weight = 1, k_slot_plane = 2 };

struct ConvGeom {
    int64_t n, c, h, w;  // input x [N, C, H, W]
    int64_t o, kh, kw;  // weight [O, C/groups, KH, KW]
    int64_t oh, ow;  // output y [N, O, OH, OW]
    int64_t groups, cg, og;
    int64_t sh, sw, ph, pw, dh, dw;

    int64_t kdim() const { return cg * kh * kw; }
    int64_t plane() const { return oh * ow; }
    bool pointwise() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
};

// A rank-4 f32 tensor in host memory: element [i, j, k, l] at base + i s[0] + j s[1] + k s[2] + l s[3].
struct Tensor4 {
    float *base;
    int64_t shape[4], s[4];

    float *at(int64_t i, int64_t j) const { return base + i * s[0] + j * s[1]; }
};

Tensor4 view4(const tf_tensor_desc &t) {
    return {f32_data(t),
            {t.shape[0], t.shape[1], t.shape[2], t.shape[3]},
            {t.strides[0], t.strides[1], t.strides[2], t.strides[3]}};
}

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

// Axes first..3 of t form one contiguous block (size-1 axes take any stride).
bool contiguous_tail(const tf_tensor_desc &t, int first) {
    int64_t expected = 1;
    for (int i = 3; i >= first; --i) {
        if (t.shape[i] != 1 && t.strides[i] != expected) return false;
        expected *= t.shape[i];
    }
    return true;
}

// Rows r .. r+rows-1 along axis first-1 of t, each a contiguous block of axes first..3, as an
// sgemm operand: its leading dimension, or 0 when it must be packed first.
int64_t direct_ld(const tf_tensor_desc &t, int first, int64_t rows) {
    int64_t block = 1;
    for (int i = first; i < 4; ++i) block *= t.shape[i];
    if (!contiguous_tail(t, first)) return 0;
    const int64_t ld = rows == 1 ? std::max<int64_t>(block, 1) : t.strides[first - 1];
    return ld >= block && fits_int(ld) ? ld : 0;
}

// The geometry of a conv op from its descriptors; none when the operands do not fit one another
// or the params, a size does not fit BLAS's int, or the work is too small to win.
std::optional<ConvGeom> conv_geometry(const tf_op_desc &op) {
    if (op.n_inputs != 2 || op.n_outputs != 1 || !op.inputs || !op.outputs || !op.params) return std::nullopt;
    const auto *p = static_cast<const tf_params_conv2d *>(op.params);
    if (p->struct_size < sizeof(tf_params_conv2d)) return std::nullopt;
    if (op.op != TF_OP_CONV2D && op.op != TF_OP_CONV2D_GRAD_INPUT && op.op != TF_OP_CONV2D_GRAD_WEIGHT)
        return std::nullopt;
    const auto [x, w, y] = conv_operands_of(op);
    if (!is_plain_f32(*x, 4) || !is_plain_f32(*w, 4) || !is_plain_f32(*y, 4)) return std::nullopt;
    if (!conv_params_valid(*p) || !conv_shapes_fit(op, *p)) return std::nullopt;
    ConvGeom c{};
    c.n = x->shape[0], c.c = x->shape[1], c.h = x->shape[2], c.w = x->shape[3];
    c.o = w->shape[0], c.kh = w->shape[2], c.kw = w->shape[3];
    c.groups = p->groups;
    c.sh = p->stride[0], c.sw = p->stride[1], c.ph = p->padding[0], c.pw = p->padding[1];
    c.dh = p->dilation[0], c.dw = p->dilation[1];
    c.cg = c.c / c.groups, c.og = c.o / c.groups;
    c.oh = y->shape[2], c.ow = y->shape[3];
    // Empty tensors are cpu's; every count below is then positive.
    for (int64_t v : {c.n, c.cg, c.h, c.w, c.og, c.kh, c.kw, c.oh, c.ow})
        if (v <= 0) return std::nullopt;
    int64_t plane = 0, kdim = 0, work = 0;
    if (__builtin_mul_overflow(c.oh, c.ow, &plane) || __builtin_mul_overflow(c.cg, c.kh, &kdim) ||
        __builtin_mul_overflow(kdim, c.kw, &kdim) || !fits_int(plane) || !fits_int(kdim) || !fits_int(c.og) ||
        __builtin_mul_overflow(c.n, c.o, &work) || __builtin_mul_overflow(work, plane, &work) ||
        __builtin_mul_overflow(work, kdim, &work) || work < k_min_work)
        return std::nullopt;
    const bool pointwise = c.kh == 1 && c.kw == 1 && c.ph == 0 && c.pw == 0;
    if (c.sh == 1 && c.sw == 1 && !pointwise && kdim >= k_cpu_shifted_taps) return std::nullopt;
    return c;
}

// Valid output columns [lo, hi) of one kernel column: those whose input column ow*sw + off lies
// in [0, W).
void valid_columns(const ConvGeom &g, int64_t off, int64_t *lo, int64_t *hi) {
    const int64_t first = off >= 0 ? 0 : (-off + g.sw - 1) / g.sw;
    const int64_t last = g.w - 1 - off < 0 ? -1 : (g.w - 1 - off) / g.sw;
    *lo = std::min(first, g.ow);
    *hi = std::clamp(last + 1, *lo, g.ow);
}

// col[(c KH + i) KW + j][oh OW + ow] = x[n, c0 + c, oh sh - ph + i dh, ow sw - pw + j dw], 0 in
// the padding; rows of col are ld floats apart.
void im2col(const Tensor4 &x, const ConvGeom &g, int64_t n, int64_t c0, float *col, int64_t ld) {
    for (int64_t c = 0; c < g.cg; ++c) {
        const float *xc = x.at(n, c0 + c);
        for (int64_t i = 0; i < g.kh; ++i) {
            for (int64_t j = 0; j < g.kw; ++j) {
                float *row = col + ((c * g.kh + i) * g.kw + j) * ld;
                const int64_t off = j * g.dw - g.pw;
                int64_t lo = 0, hi = 0;
                valid_columns(g, off, &lo, &hi);
                for (int64_t oh = 0; oh < g.oh; ++oh) {
                    float *dst = row + oh * g.ow;
                    const int64_t ih = oh * g.sh - g.ph + i * g.dh;
                    if (ih < 0 || ih >= g.h) {
                        std::fill(dst, dst + g.ow, 0.0f);
                        continue;
                    }
                    const float *src = xc + ih * x.s[2];
                    std::fill(dst, dst + lo, 0.0f);
                    if (g.sw == 1 && x.s[3] == 1)
                        std::memcpy(dst + lo, src + lo + off, static_cast<size_t>(hi - lo) * sizeof(float));
                    else
                        for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = src[(ow * g.sw + off) * x.s[3]];
                    std::fill(dst + hi, dst + g.ow, 0.0f);
                }
            }
        }
    }
}

// The adjoint of im2col: dx[n, c0 + c, ...] += every col entry im2col would have read from there.
void col2im_add(const float *col, int64_t ld, const ConvGeom &g, const Tensor4 &dx, int64_t n, int64_t c0) {
    for (int64_t c = 0; c < g.cg; ++c) {
        float *xc = dx.at(n, c0 + c);
        for (int64_t i = 0; i < g.kh; ++i) {
            for (int64_t j = 0; j < g.kw; ++j) {
                const float *row = col + ((c * g.kh + i) * g.kw + j) * ld;
                const int64_t off = j * g.dw - g.pw;
                int64_t lo = 0, hi = 0;
                valid_columns(g, off, &lo, &hi);
                for (int64_t oh = 0; oh < g.oh; ++oh) {
                    const int64_t ih = oh * g.sh - g.ph + i * g.dh;
                    if (ih < 0 || ih >= g.h) continue;
                    const float *src = row + oh * g.ow;
                    float *dst = xc + ih * dx.s[2];
                    if (g.sw == 1 && dx.s[3] == 1) {
                        float *shifted = dst + off;  // unit strides: a loop the compiler vectorises
                        for (int64_t ow = lo; ow < hi; ++ow) shifted[ow] += src[ow];
                    } else {
                        for (int64_t ow = lo; ow < hi; ++ow) dst[(ow * g.sw + off) * dx.s[3]] += src[ow];
                    }
                }
            }
        }
    }
}

// Channels c0 .. c0+rows-1 of image n (axes 2 and 3 flattened) to or from a dense rows x H*W block.
void gather_planes(const Tensor4 &t, int64_t n, int64_t c0, int64_t rows, float *dst) {
    for (int64_t r = 0; r < rows; ++r) {
        const float *src = t.at(n, c0 + r);
        for (int64_t h = 0; h < t.shape[2]; ++h)
            for (int64_t w = 0; w < t.shape[3]; ++w) *dst++ = src[h * t.s[2] + w * t.s[3]];
    }
}

void scatter_planes(const float *src, const Tensor4 &t, int64_t n, int64_t c0, int64_t rows) {
    for (int64_t r = 0; r < rows; ++r) {
        float *dst = t.at(n, c0 + r);
        for (int64_t h = 0; h < t.shape[2]; ++h)
            for (int64_t w = 0; w < t.shape[3]; ++w) dst[h * t.s[2] + w * t.s[3]] = *src++;
    }
}

blasint as_int(int64_t v) { return static_cast<blasint>(v); }

// w[o, c, i, j] <-> packed[o kdim + (c KH + i) KW + j].
void pack_weight(const Tensor4 &w, const ConvGeom &g, float *dst) {
    for (int64_t o = 0; o < g.o; ++o)
        for (int64_t c = 0; c < g.cg; ++c)
            for (int64_t i = 0; i < g.kh; ++i)
                for (int64_t j = 0; j < g.kw; ++j) *dst++ = w.at(o, c)[i * w.s[2] + j * w.s[3]];
}

void unpack_weight(const float *src, const Tensor4 &w, const ConvGeom &g) {
    for (int64_t o = 0; o < g.o; ++o)
        for (int64_t c = 0; c < g.cg; ++c)
            for (int64_t i = 0; i < g.kh; ++i)
                for (int64_t j = 0; j < g.kw; ++j) w.at(o, c)[i * w.s[2] + j * w.s[3]] = *src++;
}

// The weight [O, Cg, KH, KW] as an O x kdim matrix: in place when its layout allows, else
// packed into scratch (read: with the weight's values, for the ops that read it).
struct WeightMatrix {
    float *data;
    int64_t ld;
    bool packed;

    // The og rows of group grp.
    float *group(int64_t grp, const ConvGeom &g) const { return data + grp * g.og * ld; }
};

WeightMatrix weight_of(const tf_tensor_desc &desc, const ConvGeom &g, bool read) {
    const Tensor4 w = view4(desc);
    if (const int64_t ld = direct_ld(desc, 1, g.o)) return {w.base, ld, false};
    float *packed = scratch(static_cast<size_t>(g.o * g.kdim()), k_slot_weight);
    if (read) pack_weight(w, g, packed);
    return {packed, g.kdim(), true};
}

// The per-(image, group) blocks of one tensor as sgemm operands: x or dx as the kdim x P columns
// (the tensor itself only for a pointwise conv), y or dy as og x P planes. A block sgemm can use
// in place is the tensor's own memory (direct_ld > 0); any other goes through scratch, filled
// before the call by read() (im2col, gather) or written back after it by store() (col2im, scatter).
class Blocks {
public:
    enum Side { columns, planes };

    Blocks(const tf_tensor_desc &desc, const ConvGeom &g, Side side)
        : t_(view4(desc)), g_(g), side_(side), rows_(side == columns ? g.cg : g.og),
          direct_ld_(side == columns && !g.pointwise() ? 0 : direct_ld(desc, 2, rows_)),
          scratch_(direct_ld_ ? nullptr
                              : scratch(static_cast<size_t>(height() * g.plane()),
                                        side == columns ? k_slot_col : k_slot_plane)) {}

    // Rows of one block: kdim columns or og planes; each row is P floats.
    int64_t height() const { return side_ == columns ? g_.kdim() : g_.og; }
    int64_t ld() const { return direct_ld_ ? direct_ld_ : g_.plane(); }

    // Block (n, grp) with the tensor's values, for an operand sgemm reads.
    const float *read(int64_t n, int64_t grp) const {
        if (direct_ld_) return at(n, grp);
        if (side_ == columns)
            im2col(t_, g_, n, grp * rows_, scratch_, g_.plane());
        else
            gather_planes(t_, n, grp * rows_, rows_, scratch_);
        return scratch_;
    }

    // Where sgemm writes block (n, grp); store() then moves it into the tensor.
    float *target(int64_t n, int64_t grp) const { return direct_ld_ ? at(n, grp) : scratch_; }

    void store(int64_t n, int64_t grp) const {
        if (direct_ld_) return;
        if (side_ == columns)
            col2im_add(scratch_, g_.plane(), g_, t_, n, grp * rows_);
        else
            scatter_planes(scratch_, t_, n, grp * rows_, rows_);
    }

    // Zeroes image n where store() adds into it (col2im: windows overlap); a no-op elsewhere.
    void clear(int64_t n) const {
        if (direct_ld_ || side_ != columns) return;
        for (int64_t c = 0; c < g_.c; ++c)
            for (int64_t i = 0; i < g_.h; ++i)
                for (int64_t j = 0; j < g_.w; ++j) t_.at(n, c)[i * t_.s[2] + j * t_.s[3]] = 0.0f;
    }

private:
    float *at(int64_t n, int64_t grp) const { return t_.at(n, grp * rows_); }

    Tensor4 t_;
    const ConvGeom &g_;
    Side side_;
    int64_t rows_;  // channels per group
    int64_t direct_ld_;
    float *scratch_;
};

// c = op(a) . op(b) + beta c for row-major blocks of one image and group.
void sgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
           const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    openblas().sgemm(CblasRowMajor, ta, tb, as_int(m), as_int(n), as_int(k), 1.0f, a, as_int(lda), b, as_int(ldb), beta,
                     c, as_int(ldc));
}

// forward    y = W . columns(x), one og x P block per image and group;
// grad_input columns(dx) = W^T . dy, added into dx by col2im.
tf_status weight_times(const tf_op_desc &op, const ConvGeom &g) {
    const bool forward = op.op == TF_OP_CONV2D;
    const WeightMatrix w = weight_of(op.inputs[1], g, true);
    const Blocks in(op.inputs[0], g, forward ? Blocks::columns : Blocks::planes);
    const Blocks out(op.outputs[0], g, forward ? Blocks::planes : Blocks::columns);
    for (int64_t n = 0; n < g.n; ++n) {
        out.clear(n);
        for (int64_t grp = 0; grp < g.groups; ++grp) {
            sgemm(forward ? CblasNoTrans : CblasTrans, CblasNoTrans, out.height(), g.plane(), in.height(),
                  w.group(grp, g), w.ld, in.read(n, grp), in.ld(), 0.0f, out.target(n, grp), out.ld());
            out.store(n, grp);
        }
    }
    return TF_STATUS_OK;
}

tf_status conv2d_grad_weight(const tf_op_desc &op, const ConvGeom &g) {
    const WeightMatrix w = weight_of(op.outputs[0], g, false);
    const Blocks dy(op.inputs[0], g, Blocks::planes), x(op.inputs[1], g, Blocks::columns);
    for (int64_t n = 0; n < g.n; ++n)
        for (int64_t grp = 0; grp < g.groups; ++grp)
            sgemm(CblasNoTrans, CblasTrans, g.og, g.kdim(), g.plane(), dy.read(n, grp), dy.ld(), x.read(n, grp), x.ld(),
                  n == 0 ? 0.0f : 1.0f, w.group(grp, g), w.ld);
    if (w.packed) unpack_weight(w.data, view4(op.outputs[0]), g);
    return TF_STATUS_OK;
}

}  // namespace

bool conv2d_supported(const tf_op_desc &op) noexcept { return conv_geometry(op).has_value(); }

namespace {

// The descriptor's geometry, for a run: blas's kernels take what conv2d_supported accepted, with
// host addresses.
tf_status run_geometry(const tf_op_desc &op, ConvGeom *g, tf_error *err) {
    const std::optional<ConvGeom> geometry = conv_geometry(op);
    const char *name = op_name(op.op);
    if (!geometry) return fail(err, TF_STATUS_UNSUPPORTED, "%s: blas does not support this descriptor", name);
    if (!op.inputs[0].data || !op.inputs[1].data || !op.outputs[0].data)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: a tensor has no host address", name);
    *g = *geometry;
    return TF_STATUS_OK;
}

}  // namespace

tf_status conv2d_weight_times_run(const tf_op_desc &op, tf_error *err) {
    ConvGeom g{};
    if (tf_status s = run_geometry(op, &g, err); s != TF_STATUS_OK) return s;
    return weight_times(op, g);
}

tf_status conv2d_grad_weight_run(const tf_op_desc &op, tf_error *err) {
    ConvGeom g{};
    if (tf_status s = run_geometry(op, &g, err); s != TF_STATUS_OK) return s;
    return conv2d_grad_weight(op, g);
}

}  // namespace tf_blas
