// The per-element arithmetic of the pooling kernels (nn.cu), as __host__ __device__ functions so
// tests/cuda/test_cuda_pool.cpp runs exactly this code on the host against scatter-style
// references. Tensors are [N, C, H, W] with any strides (PoolArgs, kernels.hpp).
//
// Rules, as the cpu plugin's: padding counts as -inf for max and is left out of the sum for avg;
// the max backward sends each window's gradient to its first maximum (row-major within the
// window; a NaN is the maximum); the avg divisor is the whole window with count_include_pad,
// else the window's elements inside the input. The backward ops gather: each input element sums
// the windows that cover it, so the kernels need no atomics.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "kernels.hpp"

namespace tf_cuda {

TF_CUDA_HD float pool_load(float v) { return v; }
TF_CUDA_HD float pool_load(__half v) { return __half2float(v); }
TF_CUDA_HD float pool_load(__nv_bfloat16 v) { return __bfloat162float(v); }

// Splits a row-major linear index over [n, c, h, w] into its coordinates.
TF_CUDA_HD void split4(int64_t i, int64_t h, int64_t w, int64_t c, int64_t (&at)[4]) {
    at[3] = i % w;
    i /= w;
    at[2] = i % h;
    i /= h;
    at[1] = i % c;
    at[0] = i / c;
}

TF_CUDA_HD int64_t offset4(const int64_t (&s)[4], int64_t n, int64_t c, int64_t y, int64_t x) {
    return n * s[0] + c * s[1] + y * s[2] + x * s[3];
}

// The window (oy, ox)'s first maximum: its input position and value.
template <class T>
TF_CUDA_HD void window_argmax(const PoolArgs &a, const T *x, int64_t n, int64_t c, int64_t oy, int64_t ox,
                              int64_t *best_y, int64_t *best_x, float *best_value) {
    float best = -INFINITY;
    int64_t by = -1, bx = -1;
    const int64_t y0 = oy * a.stride[0] - a.padding[0], x0 = ox * a.stride[1] - a.padding[1];
    for (int ky = 0; ky < a.kernel[0]; ++ky) {
        const int64_t y = y0 + ky;
        if (y < 0 || y >= a.h) continue;
        for (int kx = 0; kx < a.kernel[1]; ++kx) {
            const int64_t xx = x0 + kx;
            if (xx < 0 || xx >= a.w) continue;
            const float v = pool_load(x[offset4(a.x_strides, n, c, y, xx)]);
            if (by < 0 || v > best || (v != v && best == best)) {
                best = v;
                by = y;
                bx = xx;
            }
        }
    }
    *best_y = by;
    *best_x = bx;
    *best_value = best;
}

// The windows [*lo, *hi] along one axis that cover input position p (empty when *lo > *hi).
TF_CUDA_HD void covering(int64_t p, int pad, int kernel, int stride, int64_t out, int64_t *lo, int64_t *hi) {
    const int64_t q = p + pad;  // position in the padded input
    const int64_t first = q - kernel + 1;
    *lo = first <= 0 ? 0 : (first + stride - 1) / stride;
    *hi = q / stride;
    if (*hi > out - 1) *hi = out - 1;
}

// The divisor of window (oy, ox).
TF_CUDA_HD float window_divisor(const PoolArgs &a, int64_t oy, int64_t ox) {
    if (a.count_include_pad) return static_cast<float>(a.kernel[0] * a.kernel[1]);
    const int64_t y0 = oy * a.stride[0] - a.padding[0], x0 = ox * a.stride[1] - a.padding[1];
    const int64_t y1 = y0 + a.kernel[0] < a.h ? y0 + a.kernel[0] : a.h;
    const int64_t x1 = x0 + a.kernel[1] < a.w ? x0 + a.kernel[1] : a.w;
    return static_cast<float>((y1 - (y0 > 0 ? y0 : 0)) * (x1 - (x0 > 0 ? x0 : 0)));
}

// max_pool2d's output element (n, c, oy, ox).
template <class T>
TF_CUDA_HD float max_pool_at(const PoolArgs &a, const T *x, int64_t n, int64_t c, int64_t oy, int64_t ox) {
    int64_t by, bx;
    float best;
    window_argmax(a, x, n, c, oy, ox, &by, &bx, &best);
    return best;
}

// max_pool2d_backward's dx element (n, c, iy, ix): dy of the windows whose first maximum it is.
template <class T>
TF_CUDA_HD float max_pool_grad_at(const PoolArgs &a, const T *dy, const T *x, int64_t n, int64_t c, int64_t iy,
                                  int64_t ix) {
    int64_t oy0, oy1, ox0, ox1;
    covering(iy, a.padding[0], a.kernel[0], a.stride[0], a.oh, &oy0, &oy1);
    covering(ix, a.padding[1], a.kernel[1], a.stride[1], a.ow, &ox0, &ox1);
    float total = 0.f;
    for (int64_t oy = oy0; oy <= oy1; ++oy)
        for (int64_t ox = ox0; ox <= ox1; ++ox) {
            int64_t by, bx;
            float best;
            window_argmax(a, x, n, c, oy, ox, &by, &bx, &best);
            if (by == iy && bx == ix) total += pool_load(dy[offset4(a.y_strides, n, c, oy, ox)]);
        }
    return total;
}

// avg_pool2d's output element (n, c, oy, ox).
template <class T>
TF_CUDA_HD float avg_pool_at(const PoolArgs &a, const T *x, int64_t n, int64_t c, int64_t oy, int64_t ox) {
    const int64_t y0 = oy * a.stride[0] - a.padding[0], x0 = ox * a.stride[1] - a.padding[1];
    float total = 0.f;
    for (int ky = 0; ky < a.kernel[0]; ++ky) {
        const int64_t y = y0 + ky;
        if (y < 0 || y >= a.h) continue;
        for (int kx = 0; kx < a.kernel[1]; ++kx) {
            const int64_t xx = x0 + kx;
            if (xx >= 0 && xx < a.w) total += pool_load(x[offset4(a.x_strides, n, c, y, xx)]);
        }
    }
    return total / window_divisor(a, oy, ox);
}

// avg_pool2d_backward's dx element (n, c, iy, ix).
template <class T>
TF_CUDA_HD float avg_pool_grad_at(const PoolArgs &a, const T *dy, int64_t n, int64_t c, int64_t iy, int64_t ix) {
    int64_t oy0, oy1, ox0, ox1;
    covering(iy, a.padding[0], a.kernel[0], a.stride[0], a.oh, &oy0, &oy1);
    covering(ix, a.padding[1], a.kernel[1], a.stride[1], a.ow, &ox0, &ox1);
    float total = 0.f;
    for (int64_t oy = oy0; oy <= oy1; ++oy)
        for (int64_t ox = ox0; ox <= ox1; ++ox)
            total += pool_load(dy[offset4(a.y_strides, n, c, oy, ox)]) / window_divisor(a, oy, ox);
    return total;
}

}  // namespace tf_cuda
