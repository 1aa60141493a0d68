// Winograd F(2 x 2, 3 x 3) for the cpu plugin (kernels_conv_winograd.hpp). With
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1],
//   A^T = [1 1 1 0; 0 1 -1 -1],
// a tile's outputs are Y = A^T [sum over c of (G g[o, c] G^T) .* (B^T d[c] B)] A, d[c] the 4 x 4
// input patch of channel c at (2 ty - ph, 2 tx - pw). Plane xi = 4 r + k of the elementwise
// product is one GEMM over channels: M[xi] [O x tiles] = U[xi] [O x C] V[xi] [C x tiles].
// A task takes a range of tile rows (counted image after image) and a block of output channels:
// it transforms the range's patches (8 tiles a vector), runs the 16 GEMMs and transforms the
// products back into y. Which task computes a tile never changes its operations.
#include "kernels_conv_winograd.hpp"

#include "kernels_gemm.hpp"
#include "runtime.hpp"

#include <tinyfin/plugin_kit.hpp>

#include <algorithm>
#include <numeric>
#include <vector>

#if defined(__x86_64__)
#include "conv_epilogue_avx2.hpp"
#endif

namespace tf_cpu {
namespace {

constexpr int64_t k_planes = 16;
// Tiles per task (about): V (16 planes x C x tiles) and M (16 x channels x tiles) stay within L2
// and L3 for resnet's channel counts while the tiles fill the GEMM's 16-column tiles.
constexpr int64_t k_task_tiles = 112;
// Output channels per task at most (the patches are transformed once per block).
constexpr int64_t k_task_channels = 64;
// Tasks per thread at least: each further channel block transforms the same patches again, so
// more tasks than this cost more than the balance they buy (docs/performance.md).
constexpr int64_t k_tasks_per_thread = 2;

inline int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Copies an input row inline (a call into memmove costs more than the 7 to 56 floats here).
inline void copy_floats(float *dst, const float *src, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) __builtin_memcpy(dst + i, src + i, 8 * sizeof(float));
    for (; i < n; ++i) dst[i] = src[i];
}

#if defined(__x86_64__)
// even = lo[0, 2, 4, 6] hi[0, 2, 4, 6], odd = lo[1, 3, 5, 7] hi[1, 3, 5, 7].
[[gnu::target("avx2,fma")]] inline void deinterleave(__m256 lo, __m256 hi, __m256 &even, __m256 &odd) {
    const __m256 e = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    const __m256 o = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
    even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
    odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), _MM_SHUFFLE(3, 1, 2, 0)));
}

// V[xi][c][base + tx] for the tw tiles of one tile row from its four padded input rows (element
// j at input column j - pw, zeros outside the image); 8 tiles a vector, the last vector's extra
// lanes written past the row (the next row overwrites them).
[[gnu::target("avx2,fma")]] void transform_patches(float *const rows[4], int64_t tw, float *v, int64_t plane_stride) {
    for (int64_t tx = 0; tx < tw; tx += 8) {
        __m256 t[4][4];
        for (int r = 0; r < 4; ++r) {
            const float *row = rows[r] + 2 * tx;
            __m256 d[4];
            deinterleave(_mm256_loadu_ps(row), _mm256_loadu_ps(row + 8), d[0], d[1]);
            deinterleave(_mm256_loadu_ps(row + 2), _mm256_loadu_ps(row + 10), d[2], d[3]);
            // Along the row: B^T applied to (d0, d1, d2, d3).
            t[r][0] = _mm256_sub_ps(d[0], d[2]);
            t[r][1] = _mm256_add_ps(d[1], d[2]);
            t[r][2] = _mm256_sub_ps(d[2], d[1]);
            t[r][3] = _mm256_sub_ps(d[1], d[3]);
        }
        for (int k = 0; k < 4; ++k) {  // across the rows
            _mm256_storeu_ps(v + (0 * 4 + k) * plane_stride + tx, _mm256_sub_ps(t[0][k], t[2][k]));
            _mm256_storeu_ps(v + (1 * 4 + k) * plane_stride + tx, _mm256_add_ps(t[1][k], t[2][k]));
            _mm256_storeu_ps(v + (2 * 4 + k) * plane_stride + tx, _mm256_sub_ps(t[2][k], t[1][k]));
            _mm256_storeu_ps(v + (3 * 4 + k) * plane_stride + tx, _mm256_sub_ps(t[1][k], t[3][k]));
        }
    }
}

// The outputs of one tile row of output channel o: m[xi * plane_stride + tx] for the tw tiles
// into out0 (output row 2 ty) and out1 (2 ty + 1, null past the output), ow columns each, with
// e's epilogue.
[[gnu::target("avx2,fma")]] void transform_products(const float *m, int64_t plane_stride, int64_t tw, float *out0,
                                                    float *out1, int64_t ow, const ConvEpilogue &e, int64_t o) {
    const ConvVectorEpilogue epilogue(e, o);
    for (int64_t tx = 0; tx < tw; tx += 8) {
        __m256 s[4][2];
        for (int r = 0; r < 4; ++r) {
            const float *p = m + r * 4 * plane_stride + tx;
            const __m256 m0 = _mm256_loadu_ps(p), m1 = _mm256_loadu_ps(p + plane_stride),
                         m2 = _mm256_loadu_ps(p + 2 * plane_stride), m3 = _mm256_loadu_ps(p + 3 * plane_stride);
            s[r][0] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
            s[r][1] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
        }
        const int64_t count = std::min<int64_t>(16, ow - 2 * tx);
        for (int a = 0; a < 2; ++a) {
            float *out = a == 0 ? out0 : out1;
            if (!out) continue;
            __m256 y[2];
            for (int j = 0; j < 2; ++j)
                y[j] = a == 0 ? _mm256_add_ps(_mm256_add_ps(s[0][j], s[1][j]), s[2][j])
                              : _mm256_sub_ps(_mm256_sub_ps(s[1][j], s[2][j]), s[3][j]);
            // Tiles' two columns side by side: [t0 t0 t1 t1 t2 t2 t3 t3], [t4 t4 ... t7 t7].
            const __m256 lo = _mm256_unpacklo_ps(y[0], y[1]), hi = _mm256_unpackhi_ps(y[0], y[1]);
            const __m256 first = _mm256_permute2f128_ps(lo, hi, 0x20), second = _mm256_permute2f128_ps(lo, hi, 0x31);
            float *dst = out + 2 * tx;
            epilogue.store(first, dst, std::min<int64_t>(8, count));
            if (count > 8) epilogue.store(second, dst + 8, count - 8);
        }
    }
}

#endif

}  // namespace

bool winograd_available() {
#if defined(__x86_64__)
    return isa_level() == 1;
#else
    return false;
#endif
}

int64_t winograd_weight_floats(int64_t o, int64_t c) { return k_planes * gemm_f32_packed_a_floats(o, c); }

void winograd_transform_weights(int64_t o, int64_t c, const float *w, float *u) {
    static constexpr double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
    std::vector<float> planes(static_cast<size_t>(k_planes * o * c));
    for (int64_t oc = 0; oc < o * c; ++oc) {
        const float *g = w + oc * 9;
        double gg[4][3];  // G g
        for (int a = 0; a < 4; ++a)
            for (int j = 0; j < 3; ++j) gg[a][j] = G[a][0] * g[j] + G[a][1] * g[3 + j] + G[a][2] * g[6 + j];
        for (int a = 0; a < 4; ++a)
            for (int b = 0; b < 4; ++b)
                planes[static_cast<size_t>((a * 4 + b) * o * c + oc)] =
                    static_cast<float>(gg[a][0] * G[b][0] + gg[a][1] * G[b][1] + gg[a][2] * G[b][2]);
    }
    const int64_t packed = gemm_f32_packed_a_floats(o, c);
    for (int64_t xi = 0; xi < k_planes; ++xi)
        gemm_f32_pack_a(o, c, {planes.data() + xi * o * c, c, 1}, u + xi * packed);
}

void winograd_conv_f32(const WinogradShape &s, const float *x, const float *u, float *y, const ConvEpilogue &e) {
#if defined(__x86_64__)
    const int64_t oh = s.oh(), ow = s.ow();
    if (s.n <= 0 || s.o <= 0 || oh <= 0 || ow <= 0) return;
    const int64_t th = (oh + 1) / 2, tw = (ow + 1) / 2, tile_rows = s.n * th;
    const int64_t mr = gemm_f32_tile().mr, packed = gemm_f32_packed_a_floats(s.o, s.c);
    const int64_t threads = thread_count(), want = threads > 1 ? k_tasks_per_thread * threads : 1;
    // Tile rows per task and output channels per block (a multiple of the GEMM's mr).
    // Whole 16-column tiles of the GEMM where the rows allow it: 4 rows of 28 tiles, not 3.
    const int64_t step = 16 / std::gcd<int64_t>(tw, 16);
    int64_t rows_per = std::clamp<int64_t>(std::max(step, k_task_tiles / tw / step * step), 1, tile_rows);
    // Channel blocks of whole mr-row panels, spread evenly (256 channels in 8 blocks: 30 to 36
    // each, not seven of 36 and one of 4, which left a thread idle at the join).
    const int64_t units = (s.o + mr - 1) / mr;
    int64_t blocks = std::min(units, (s.o + k_task_channels - 1) / k_task_channels);
    const auto tasks = [&] { return (tile_rows + rows_per - 1) / rows_per * blocks; };
    while (tasks() < want && units / blocks > 2) blocks = std::min(units, 2 * blocks);
    while (tasks() < want && rows_per > 1) rows_per = (rows_per + 1) / 2;
    // Chunks of rows_per tile rows; where the threads do not divide the task count, more chunks
    // of nearly equal rows (layer1 of resnet18 at batch 1: 28 tile rows in 8 chunks of 3-4, not 7
    // of 4, which left one thread a whole chunk behind).
    int64_t chunks = (tile_rows + rows_per - 1) / rows_per;
    const bool even_rows = threads > 1 && chunks * blocks % threads != 0;
    while (even_rows && chunks * blocks % threads != 0 && chunks < tile_rows) ++chunks;
    const auto chunk_start = [&](int64_t i) {
        return std::min(tile_rows, even_rows ? tile_rows * i / chunks : i * rows_per);
    };
    const auto block_start = [&](int64_t b) { return std::min(s.o, b * units / blocks * mr); };
    const int64_t tw8 = round_up(tw, 8), row_len = 2 * tw8 + 16;
    parallel_for(chunks * blocks, [&](int64_t task) {
        const int64_t o0 = block_start(task % blocks), ob = block_start(task % blocks + 1) - o0;
        const int64_t r0 = chunk_start(task / blocks), r1 = chunk_start(task / blocks + 1);
        const int64_t tiles = (r1 - r0) * tw, ldv = round_up(tiles + 8, 16), obp = round_up(ob, mr);
        float *v = scratch_floats(k_slot_col, static_cast<size_t>(k_planes * s.c * ldv));
        float *m = scratch_floats(k_slot_temp, static_cast<size_t>(k_planes * obp * ldv));
        float *buffer = scratch_floats(k_slot_temp2, static_cast<size_t>(4 * row_len));
        // Padded input row iy of image n, channel c: column j holds input column j - pw. Columns
        // outside [pw, pw + w) are zeros from here on: only rows outside the image write there.
        std::fill(buffer, buffer + 4 * row_len, 0.0f);
        const auto fill = [&](float *row, int64_t n, int64_t c, int64_t iy) {
            if (iy < 0 || iy >= s.h)
                std::fill(row, row + row_len, 0.0f);
            else
                copy_floats(row + s.pw, x + ((n * s.c + c) * s.h + iy) * s.w, s.w);
        };
        for (int64_t c = 0; c < s.c; ++c) {
            float *rows[4] = {buffer, buffer + row_len, buffer + 2 * row_len, buffer + 3 * row_len};
            for (int64_t r = r0; r < r1; ++r) {
                const int64_t n = r / th, ty = r % th;
                // Tile rows overlap by two input rows: after the first of an image, two new ones.
                const int64_t first = r > r0 && ty > 0 ? 2 : 0;
                if (first == 2) {
                    std::swap(rows[0], rows[2]);
                    std::swap(rows[1], rows[3]);
                }
                for (int64_t i = first; i < 4; ++i) fill(rows[i], n, c, 2 * ty - s.ph + i);
                transform_patches(rows, tw, v + c * ldv + (r - r0) * tw, s.c * ldv);
            }
        }
        std::vector<int64_t> b_rows(static_cast<size_t>(s.c));
        for (int64_t c = 0; c < s.c; ++c) b_rows[static_cast<size_t>(c)] = c * ldv;
        for (int64_t xi = 0; xi < k_planes; ++xi)
            gemm_f32_rows_b(ob, tiles, s.c, u + xi * packed + o0 * s.c, 0, v + xi * s.c * ldv, b_rows.data(),
                            m + xi * obp * ldv, ldv);
        for (int64_t ol = 0; ol < ob; ++ol) {
            const int64_t o = o0 + ol;
            for (int64_t r = r0; r < r1; ++r) {
                const int64_t n = r / th, ty = r % th, oy = 2 * ty;
                float *out0 = y + ((n * s.o + o) * oh + oy) * ow;
                float *out1 = oy + 1 < oh ? out0 + ow : nullptr;
                transform_products(m + ol * ldv + (r - r0) * tw, obp * ldv, tw, out0, out1, ow, e, o);
            }
        }
    });
#else
    (void)s, (void)x, (void)u, (void)y, (void)e;
#endif
}

}  // namespace tf_cpu
