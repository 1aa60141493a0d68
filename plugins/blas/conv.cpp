// conv2d and its two gradients around cblas_sgemm, one image and group at a time:
//   forward      y[n, g]  = W[g] . im2col(x[n, g])            (og x P = og x kdim . kdim x P)
//   grad_input   dx[n, g] = col2im(W[g]^T . dy[n, g])         (kdim x P = kdim x og . og x P)
//   grad_weight  dW[g]    = sum_n dy[n, g] . im2col(x[n, g])^T (og x kdim = og x P . P x kdim)
// with P = OH * OW and kdim = C/groups * KH * KW. A 1x1 convolution with stride 1 and no padding
// skips im2col/col2im; operands sgemm can read in place are not copied, the others go through
// scratch memory. (Several images side by side in one wider sgemm measured slower here, even for
// the 28x28 layers of the example CNN: the extra gather/scatter traffic costs more than the
// calls it saves.)
#include "blas.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <optional>

namespace tf_blas {
namespace {

// Below this many multiply-adds per call, im2col and the BLAS call cost more than they save.
constexpr int64_t k_min_work = 32 * 32 * 32;

// From this many taps per output (C/groups * KH * KW), a stride-1 convolution that is not
// pointwise is cpu's: its kernels read the column matrix in place from a padded image and run
// 1.2x faster than im2col + sgemm here (docs/performance.md, cnn2 and resnet3x3).
constexpr int64_t k_cpu_shifted_taps = 32;

// Scratch slots (see blas.h): one per operand that may need packing.
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
};

WeightMatrix weight_of(const tf_tensor_desc &desc, const ConvGeom &g, bool read) {
    const Tensor4 w = view4(desc);
    if (const int64_t ld = direct_ld(desc, 1, g.o)) return {w.base, ld, false};
    float *packed = scratch(static_cast<size_t>(g.o * g.kdim()), k_slot_weight);
    if (read) pack_weight(w, g, packed);
    return {packed, g.kdim(), true};
}

tf_status conv2d_forward(const tf_op_desc &op, const ConvGeom &g) {
    const Tensor4 x = view4(op.inputs[0]), y = view4(op.outputs[0]);
    const WeightMatrix w = weight_of(op.inputs[1], g, true);
    const int64_t plane = g.plane(), kdim = g.kdim();
    const int64_t x_ld = g.pointwise() ? direct_ld(op.inputs[0], 2, g.cg) : 0;
    const int64_t y_ld = direct_ld(op.outputs[0], 2, g.og);
    float *col = x_ld ? nullptr : scratch(static_cast<size_t>(kdim * plane), k_slot_col);
    float *y_block = y_ld ? nullptr : scratch(static_cast<size_t>(g.og * plane), k_slot_plane);
    const OpenBlasApi &blas = openblas();
    for (int64_t n = 0; n < g.n; ++n) {
        for (int64_t grp = 0; grp < g.groups; ++grp) {
            if (!x_ld) im2col(x, g, n, grp * g.cg, col, plane);
            const float *b = x_ld ? x.at(n, grp * g.cg) : col;
            float *c = y_ld ? y.at(n, grp * g.og) : y_block;
            blas.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, as_int(g.og), as_int(plane), as_int(kdim), 1.0f,
                       w.data + grp * g.og * w.ld, as_int(w.ld), b, as_int(x_ld ? x_ld : plane), 0.0f, c,
                       as_int(y_ld ? y_ld : plane));
            if (!y_ld) scatter_planes(y_block, y, n, grp * g.og, g.og);
        }
    }
    return TF_STATUS_OK;
}

// dy rows of image n, group grp, as an og x P operand: in place when its layout allows, else
// gathered into block.
const float *dy_rows(const Tensor4 &dy, int64_t ld, const ConvGeom &g, int64_t n, int64_t grp, float *block) {
    if (ld) return dy.at(n, grp * g.og);
    gather_planes(dy, n, grp * g.og, g.og, block);
    return block;
}

tf_status conv2d_grad_input(const tf_op_desc &op, const ConvGeom &g) {
    const Tensor4 dy = view4(op.inputs[0]), dx = view4(op.outputs[0]);
    const WeightMatrix w = weight_of(op.inputs[1], g, true);
    const int64_t plane = g.plane(), kdim = g.kdim();
    const int64_t dy_ld = direct_ld(op.inputs[0], 2, g.og);
    // A pointwise conv's col2im is the identity: sgemm writes dx itself.
    const int64_t dx_ld = g.pointwise() ? direct_ld(op.outputs[0], 2, g.cg) : 0;
    float *dcol = dx_ld ? nullptr : scratch(static_cast<size_t>(kdim * plane), k_slot_col);
    float *dy_block = dy_ld ? nullptr : scratch(static_cast<size_t>(g.og * plane), k_slot_plane);
    const OpenBlasApi &blas = openblas();
    for (int64_t n = 0; n < g.n; ++n) {
        if (!dx_ld)
            for (int64_t c = 0; c < g.c; ++c)
                for (int64_t i = 0; i < g.h; ++i)
                    for (int64_t j = 0; j < g.w; ++j) dx.at(n, c)[i * dx.s[2] + j * dx.s[3]] = 0.0f;
        for (int64_t grp = 0; grp < g.groups; ++grp) {
            const float *b = dy_rows(dy, dy_ld, g, n, grp, dy_block);
            float *c = dx_ld ? dx.at(n, grp * g.cg) : dcol;
            blas.sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, as_int(kdim), as_int(plane), as_int(g.og), 1.0f,
                       w.data + grp * g.og * w.ld, as_int(w.ld), b, as_int(dy_ld ? dy_ld : plane), 0.0f, c,
                       as_int(dx_ld ? dx_ld : plane));
            if (!dx_ld) col2im_add(dcol, plane, g, dx, n, grp * g.cg);
        }
    }
    return TF_STATUS_OK;
}

tf_status conv2d_grad_weight(const tf_op_desc &op, const ConvGeom &g) {
    const Tensor4 dy = view4(op.inputs[0]), x = view4(op.inputs[1]), dw = view4(op.outputs[0]);
    const WeightMatrix w = weight_of(op.outputs[0], g, false);
    const int64_t plane = g.plane(), kdim = g.kdim();
    const int64_t dy_ld = direct_ld(op.inputs[0], 2, g.og);
    const int64_t x_ld = g.pointwise() ? direct_ld(op.inputs[1], 2, g.cg) : 0;
    float *col = x_ld ? nullptr : scratch(static_cast<size_t>(kdim * plane), k_slot_col);
    float *dy_block = dy_ld ? nullptr : scratch(static_cast<size_t>(g.og * plane), k_slot_plane);
    const OpenBlasApi &blas = openblas();
    for (int64_t n = 0; n < g.n; ++n) {
        for (int64_t grp = 0; grp < g.groups; ++grp) {
            if (!x_ld) im2col(x, g, n, grp * g.cg, col, plane);
            const float *b = x_ld ? x.at(n, grp * g.cg) : col;
            const float *a = dy_rows(dy, dy_ld, g, n, grp, dy_block);
            blas.sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_int(g.og), as_int(kdim), as_int(plane), 1.0f, a,
                       as_int(dy_ld ? dy_ld : plane), b, as_int(x_ld ? x_ld : plane), n == 0 ? 0.0f : 1.0f,
                       w.data + grp * g.og * w.ld, as_int(w.ld));
        }
    }
    if (w.packed) unpack_weight(w.data, dw, g);
    return TF_STATUS_OK;
}

}  // namespace

bool conv2d_supported(const tf_op_desc &op) noexcept { return conv_geometry(op).has_value(); }

tf_status conv2d_run(const tf_op_desc &op, tf_error *err) {
    const std::optional<ConvGeom> g = conv_geometry(op);
    const char *name = op_name(op.op);
    if (!g) return fail(err, TF_STATUS_UNSUPPORTED, "%s: blas does not support this descriptor", name);
    if (!op.inputs[0].data || !op.inputs[1].data || !op.outputs[0].data)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: a tensor has no host address", name);
    switch (op.op) {
    case TF_OP_CONV2D: return conv2d_forward(op, *g);
    case TF_OP_CONV2D_GRAD_INPUT: return conv2d_grad_input(op, *g);
    case TF_OP_CONV2D_GRAD_WEIGHT: return conv2d_grad_weight(op, *g);
    default: return fail(err, TF_STATUS_UNSUPPORTED, "%s: not a conv op", name);
    }
}

}  // namespace tf_blas
