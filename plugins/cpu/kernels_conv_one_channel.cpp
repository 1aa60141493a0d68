// The one-input-channel 3 x 3 forward of kernels_conv_one_channel.hpp. A task takes one image's
// group and a band of its output rows: it copies the band's input rows, padded with zeros, then
// runs the group's output channels one after another over them (band_3x3).
#include "kernels_conv_one_channel.hpp"

#include "runtime.hpp"

#include <algorithm>

#if defined(__x86_64__)
#include "conv_epilogue_avx2.hpp"
#endif

namespace tf_cpu {
namespace {

// Tasks per thread at least (bands of rows split an image only where images are too few).
constexpr int64_t k_tasks_per_thread = 4;

inline int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

#if defined(__x86_64__)
// R output rows (1 to 4) of one vector of `count` positions of one output channel (out: the first
// row's, the next ow floats on; epilogue: the channel's), from the R + 2 input rows at in (ld apart) and the channel's 9
// weights wv: each input vector loaded once serves every output row that reads it (18 loads for
// 36 FMAs at R = 4), R independent chains of 9 FMAs, each in (kh, kw) order.
template <int R>
[[gnu::target("avx2,fma")]] inline void rows_3x3(const float *in, int64_t ld, const __m256 wv[9], float *out,
                                                 int64_t ow, int64_t count, const ConvVectorEpilogue &epilogue) {
    __m256 acc[R];
#pragma GCC unroll 4
    for (int k = 0; k < R; ++k) acc[k] = _mm256_setzero_ps();
#pragma GCC unroll 6
    for (int r = 0; r < R + 2; ++r) {
#pragma GCC unroll 3
        for (int kw = 0; kw < 3; ++kw) {
            const __m256 v = _mm256_loadu_ps(in + kw);
#pragma GCC unroll 4
            for (int k = 0; k < R; ++k)
                if (r - k >= 0 && r - k <= 2) acc[k] = _mm256_fmadd_ps(v, wv[(r - k) * 3 + kw], acc[k]);
        }
        in += ld;
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; ++k) epilogue.store(acc[k], out + k * ow, count);
}

// Output rows [oy0, oy1) of one image's group: pad holds input rows oy0 - ph .. oy1 + 1 - ph, each
// ld floats, column j = input column j - pw (zeros outside the image and past it). y: the output
// plane of the group's first channel (channel0 in y); w: that channel's 9 weights. Per channel,
// its 9 weights stay in registers while rows_3x3 passes the band 4 rows at a time.
[[gnu::target("avx2,fma")]] void band_3x3(const float *pad, int64_t ld, int64_t oy0, int64_t oy1, int64_t ow,
                                          const float *w, int64_t og, int64_t channel0, float *y, int64_t plane,
                                          const ConvEpilogue &e) {
    for (int64_t o = 0; o < og; ++o) {
        const ConvVectorEpilogue epilogue(e, channel0 + o);
        __m256 wv[9];
        for (int t = 0; t < 9; ++t) wv[t] = _mm256_broadcast_ss(w + o * 9 + t);
        for (int64_t oy = oy0; oy < oy1; oy += 4) {
            const int64_t rows = std::min<int64_t>(4, oy1 - oy);
            const float *in = pad + (oy - oy0) * ld;
            float *out = y + o * plane + oy * ow;
            for (int64_t x = 0; x < ow; x += 8) {
                const int64_t count = std::min<int64_t>(8, ow - x);
                switch (rows) {
                case 4: rows_3x3<4>(in + x, ld, wv, out + x, ow, count, epilogue); break;
                case 3: rows_3x3<3>(in + x, ld, wv, out + x, ow, count, epilogue); break;
                case 2: rows_3x3<2>(in + x, ld, wv, out + x, ow, count, epilogue); break;
                default: rows_3x3<1>(in + x, ld, wv, out + x, ow, count, epilogue); break;
                }
            }
        }
    }
}
#endif

}  // namespace

bool conv_one_channel_available() {
#if defined(__x86_64__)
    return isa_level() == 1;
#else
    return false;
#endif
}

void conv_one_channel_3x3_f32(const OneChannelShape &s, const float *x, const float *w, float *y,
                              const ConvEpilogue &e) {
#if defined(__x86_64__)
    const int64_t oh = s.oh(), ow = s.ow(), plane = oh * ow, units = s.n * s.groups;
    if (units <= 0 || s.og <= 0 || oh <= 0 || ow <= 0) return;
    const int64_t want = thread_count() > 1 ? k_tasks_per_thread * thread_count() : 1;
    const int64_t bands = std::clamp<int64_t>((want + units - 1) / units, 1, oh);
    // Row length: the last vector's loads reach 8 + 2 columns past a multiple of 8.
    const int64_t ld = round_up(ow, 8) + 8;
    parallel_for(units * bands, [&](int64_t task) {
        const int64_t unit = task / bands, band = task % bands;
        const int64_t oy0 = oh * band / bands, oy1 = oh * (band + 1) / bands;
        if (oy0 >= oy1) return;
        const int64_t gi = unit % s.groups;
        const float *src = x + unit * s.h * s.w;
        float *pad = scratch_floats(k_slot_col, static_cast<size_t>((oy1 - oy0 + 2) * ld));
        for (int64_t r = 0; r < oy1 - oy0 + 2; ++r) {
            float *row = pad + r * ld;
            const int64_t iy = oy0 + r - s.ph;
            std::fill(row, row + ld, 0.0f);
            if (iy < 0 || iy >= s.h) continue;
            // The image's row from column pw: pw + w = ow + 2 - pw, within ld.
            std::copy(src + iy * s.w, src + iy * s.w + s.w, row + s.pw);
        }
        const int64_t channel0 = gi * s.og;
        band_3x3(pad, ld, oy0, oy1, ow, w + channel0 * 9, s.og, channel0,
                 y + (unit / s.groups * s.groups * s.og + channel0) * plane, plane, e);
    });
#else
    (void)s, (void)x, (void)w, (void)y, (void)e;
#endif
}

}  // namespace tf_cpu
