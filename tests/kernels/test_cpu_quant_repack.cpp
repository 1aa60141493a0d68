// The repacked q4_0 / q8_0 layout (plugins/cpu/quant_repack.hpp), linked in directly:
//  - repack_rows puts each byte of GGUF blocks built here (scale bits and quants distinct per row
//    and block) where the header's layout says, written out here independently (q4_0's four runs
//    of 4 nibble bytes per row, rows side by side in each 32-byte run; scales after the quants; the
//    rows % 8 last rows plain), and unpack_row / unpack_blocks give back the blocks bit for bit;
//  - the AVX2 group dots against the float64 dot of the dequantized rows (GGUF's definitions: d
//    (q - 8) for q4_0, d q for q8_0) with activations that the 8-bit encoding keeps exactly
//    (integers, each block's largest 127: scale 1), for 1 to 13 blocks (q4_0's quads of
//    activation blocks with 1-3 zero blocks after the row's end);
//  - the same for q4_k and q6_k (hand-built super-blocks: scales and minimums of either sign, zero
//    blocks, 1-8 super-blocks), whose group dots must also give the portable row dots' bits.
#include <doctest/doctest.h>

#include "quant_repack.hpp"
#include "runtime.hpp"

#include <cmath>
#include <cstring>
#include <vector>

#include "../splitmix64.hpp"

using namespace tf_cpu::quant;

namespace {

using test_support::next;

// A normal f16 of either sign with exponent in [-8, 3] and its value.
uint16_t random_f16(uint64_t &s) {
    const auto r = next(s);
    const uint16_t exponent = static_cast<uint16_t>(15 - 8 + r % 12);
    return static_cast<uint16_t>((r >> 8 & 1) << 15 | exponent << 10 | (r >> 16 & 0x3ff));
}
double f16_value(uint16_t h) {
    const int exponent = h >> 10 & 0x1f, mantissa = h & 0x3ff;
    REQUIRE(exponent > 0);
    REQUIRE(exponent < 31);
    const double v = std::ldexp(1.0 + mantissa / 1024.0, exponent - 15);
    return h >> 15 ? -v : v;
}

size_t block_bytes(int32_t dtype) { return dtype == TF_DTYPE_Q4_0 ? 18 : 34; }

// rows x blocks GGUF blocks of random bits (scale: a normal f16).
std::vector<char> random_rows(int32_t dtype, int64_t rows, int64_t blocks, uint64_t seed) {
    const size_t bb = block_bytes(dtype);
    std::vector<char> bytes(static_cast<size_t>(rows * blocks) * bb);
    for (int64_t i = 0; i < rows * blocks; ++i) {
        char *blk = bytes.data() + static_cast<size_t>(i) * bb;
        const uint16_t d = random_f16(seed);
        std::memcpy(blk, &d, 2);
        for (size_t j = 2; j < bb; ++j) blk[j] = static_cast<char>(next(seed));
    }
    return bytes;
}

// Row r's value j of block b, from GGUF's definitions.
double weight_value(int32_t dtype, const char *blk, int j) {
    uint16_t d;
    std::memcpy(&d, blk, 2);
    const auto *qs = reinterpret_cast<const uint8_t *>(blk + 2);
    if (dtype == TF_DTYPE_Q8_0) return f16_value(d) * static_cast<int8_t>(qs[j]);
    const int level = j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4;
    return f16_value(d) * (level - 8);
}

}  // namespace

TEST_CASE("repack_rows: every byte where the layout puts it; unpack_row gives the GGUF blocks back") {
    for (int32_t dtype : {TF_DTYPE_Q4_0, TF_DTYPE_Q8_0})
        for (int64_t rows : {1, 7, 8, 9, 15, 16, 17, 26})
            for (int64_t blocks : {1, 2, 3, 5}) {
                INFO("dtype " << dtype << " rows " << rows << " blocks " << blocks);
                const size_t bb = block_bytes(dtype), quants = bb - 2, column = dtype == TF_DTYPE_Q4_0 ? 128 : 256;
                const std::vector<char> src =
                    random_rows(dtype, rows, blocks, static_cast<uint64_t>(rows * 7 + blocks));
                const RepackedShape shape{dtype, rows, blocks};
                REQUIRE(shape.total_bytes() == src.size());
                std::vector<char> packed(shape.total_bytes(), 0x5a);
                repack_rows(shape, src.data(), static_cast<int64_t>(blocks * bb), packed.data());
                const int64_t groups = rows / 8;
                const size_t group_bytes = static_cast<size_t>(blocks) * (column + 16);
                for (int64_t g = 0; g < groups; ++g)
                    for (int64_t b = 0; b < blocks; ++b)
                        for (int r = 0; r < 8; ++r) {
                            const char *blk = src.data() + static_cast<size_t>((g * 8 + r) * blocks + b) * bb;
                            const char *col = packed.data() + static_cast<size_t>(g) * group_bytes + b * column;
                            if (dtype == TF_DTYPE_Q8_0)
                                CHECK(std::memcmp(col + 32 * r, blk + 2, quants) == 0);
                            else  // run c: bytes 4c .. 4c + 3 of each row, rows side by side
                                for (int c = 0; c < 4; ++c)
                                    CHECK(std::memcmp(col + 32 * c + 4 * r, blk + 2 + 4 * c, 4) == 0);
                            const char *scales = packed.data() + static_cast<size_t>(g) * group_bytes + blocks * column;
                            CHECK(std::memcmp(scales + 16 * b + 2 * r, blk, 2) == 0);
                        }
                const size_t row_bytes = static_cast<size_t>(blocks) * bb;
                CHECK(std::memcmp(packed.data() + static_cast<size_t>(groups) * group_bytes,
                                  src.data() + static_cast<size_t>(groups * 8) * row_bytes,
                                  static_cast<size_t>(rows - groups * 8) * row_bytes) == 0);
                std::vector<char> back(row_bytes);
                for (int64_t r = 0; r < rows; ++r) {
                    unpack_row(shape, packed.data(), r, back.data());
                    CHECK(std::memcmp(back.data(), src.data() + static_cast<size_t>(r) * row_bytes, row_bytes) == 0);
                    if (blocks > 2) {  // a middle run of blocks alone
                        unpack_blocks(shape, packed.data(), r, 1, blocks - 2, back.data());
                        CHECK(std::memcmp(back.data(), src.data() + static_cast<size_t>(r) * row_bytes + bb,
                                          static_cast<size_t>(blocks - 2) * bb) == 0);
                    }
                }
            }
}

TEST_CASE("the AVX2 group dots against the float64 dots of the dequantized rows") {
    if (!avx2_group_dot(TF_DTYPE_Q4_0) || tf_cpu::isa_level() < 1) {
        MESSAGE("no AVX2 here: the group dots are not used (weight_prepack prepares nothing)");
        return;
    }
    for (int32_t dtype : {TF_DTYPE_Q4_0, TF_DTYPE_Q8_0})
        for (int64_t blocks : {1, 2, 3, 4, 5, 7, 8, 13}) {
            INFO("dtype " << dtype << " blocks " << blocks);
            const int64_t k = blocks * k_qk;
            const std::vector<char> src = random_rows(dtype, 8, blocks, static_cast<uint64_t>(blocks) * 131 + 7);
            const RepackedShape shape{dtype, 8, blocks};
            std::vector<char> packed(shape.total_bytes());
            repack_rows(shape, src.data(), static_cast<int64_t>(static_cast<size_t>(blocks) * block_bytes(dtype)),
                        packed.data());
            // Integers with 127 or -127 in each block: the 8-bit encoding's scale is exactly 1.
            uint64_t s = 99 + static_cast<uint64_t>(blocks);
            std::vector<float> x(static_cast<size_t>(k));
            for (int64_t i = 0; i < k; ++i)
                x[static_cast<size_t>(i)] = static_cast<float>(static_cast<int>(next(s) % 255) - 127);
            for (int64_t b = 0; b < blocks; ++b)
                x[static_cast<size_t>(b * k_qk + (b * 5) % 32)] = b % 2 ? 127.f : -127.f;
            const ActKind kind = act_kind_of(dtype, tf_cpu::isa_level());
            std::vector<char> act(act_bytes(kind, k));
            quantize_act(kind, x.data(), act.data(), k);
            float got[8];
            avx2_group_dot(dtype)(packed.data(), act.data(), blocks, got);
            for (int r = 0; r < 8; ++r) {
                double want = 0, mag = 0;
                for (int64_t b = 0; b < blocks; ++b) {
                    const char *blk = src.data() + static_cast<size_t>(r * blocks + b) * block_bytes(dtype);
                    for (int j = 0; j < k_qk; ++j) {
                        const double t = weight_value(dtype, blk, j) * x[static_cast<size_t>(b * k_qk + j)];
                        want += t;
                        mag += std::fabs(t);
                    }
                }
                INFO("row " << r << ": got " << got[r] << ", want " << want);
                CHECK(std::fabs(got[r] - want) <= mag * 1e-6 + 1e-6);
            }
        }
}

// ---- q4_k and q6_k ------------------------------------------------------------------------------

namespace {

size_t k_block_bytes(int32_t dtype) { return dtype == TF_DTYPE_Q4_K ? 144 : 210; }

// rows x blocks super-blocks of random bits with normal f16 scales of either sign (q4_k: d and
// dmin; q6_k: d, its int8 scales random of either sign); every fifth block all zero bytes.
std::vector<char> random_k_rows(int32_t dtype, int64_t rows, int64_t blocks, uint64_t seed) {
    const size_t bb = k_block_bytes(dtype);
    std::vector<char> bytes(static_cast<size_t>(rows * blocks) * bb, 0);
    for (int64_t i = 0; i < rows * blocks; ++i) {
        char *blk = bytes.data() + static_cast<size_t>(i) * bb;
        if (i % 5 == 3) continue;
        for (size_t j = 0; j < bb; ++j) blk[j] = static_cast<char>(next(seed));
        const uint16_t d = random_f16(seed), dmin = random_f16(seed);
        if (dtype == TF_DTYPE_Q4_K) {
            std::memcpy(blk, &d, 2);
            std::memcpy(blk + 2, &dmin, 2);
        } else {
            std::memcpy(blk + 208, &d, 2);
        }
    }
    return bytes;
}

double f16_or_zero(uint16_t h) { return h == 0 ? 0.0 : f16_value(h); }

// Value e (0..255) of a super-block, from GGUF's definitions: q4_k d sc q - dmin m with the
// six-bit scale and minimum of sub-block e / 32; q6_k d scale[e / 16] (q - 32).
double k_weight_value(int32_t dtype, const char *blk, int e) {
    const auto *u = reinterpret_cast<const uint8_t *>(blk);
    if (dtype == TF_DTYPE_Q4_K) {
        uint16_t d, dmin;
        std::memcpy(&d, blk, 2);
        std::memcpy(&dmin, blk + 2, 2);
        const uint8_t *sc = u + 4, *qs = u + 16;
        const int j = e / 32;
        int scale, min;
        if (j < 4) {
            scale = sc[j] & 63;
            min = sc[j + 4] & 63;
        } else {
            scale = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
            min = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
        }
        const uint8_t byte = qs[32 * (j / 2) + e % 32];
        const int q = j % 2 ? byte >> 4 : byte & 0xF;
        return f16_or_zero(d) * scale * q - f16_or_zero(dmin) * min;
    }
    uint16_t d;
    std::memcpy(&d, blk + 208, 2);
    const uint8_t *ql = u, *qh = u + 128;
    const auto *scales = reinterpret_cast<const int8_t *>(blk + 192);
    const int h = e / 128, t = e % 128 / 32, l = e % 32;
    const uint8_t low = ql[64 * h + l + 32 * (t % 2)];
    const int q = (t < 2 ? low & 0xF : low >> 4) | (qh[32 * h + l] >> (2 * t) & 3) << 4;
    return f16_or_zero(d) * scales[e / 16] * (q - 32);
}

}  // namespace

TEST_CASE("repack_rows q4_k/q6_k: every byte where the layout puts it; unpack_row gives the blocks back") {
    for (int32_t dtype : {TF_DTYPE_Q4_K, TF_DTYPE_Q6_K})
        for (int64_t rows : {1, 7, 8, 9, 17, 26})
            for (int64_t blocks : {1, 2, 3}) {
                INFO("dtype " << dtype << " rows " << rows << " blocks " << blocks);
                const size_t bb = k_block_bytes(dtype), column = 8 * bb;
                const std::vector<char> src =
                    random_k_rows(dtype, rows, blocks, static_cast<uint64_t>(rows * 11 + blocks));
                const RepackedShape shape{dtype, rows, blocks};
                REQUIRE(shape.total_bytes() == src.size());
                std::vector<char> packed(shape.total_bytes(), 0x5a);
                repack_rows(shape, src.data(), static_cast<int64_t>(static_cast<size_t>(blocks) * bb), packed.data());
                const int64_t groups = rows / 8;
                // (block byte, bytes, column byte of row 0, step between rows, runs, step between runs)
                struct Place {
                    size_t src, n, at, row_step, runs, run_step;
                };
                const std::vector<Place> places = dtype == TF_DTYPE_Q4_K
                                                      ? std::vector<Place>{{0, 2, 0, 2, 1, 0},
                                                                           {2, 2, 16, 2, 1, 0},
                                                                           {4, 4, 32, 4, 3, 32},
                                                                           {16, 4, 128, 4, 32, 32}}
                                                      : std::vector<Place>{{192, 2, 0, 2, 8, 16},
                                                                           {208, 2, 128, 2, 1, 0},
                                                                           {0, 4, 144, 4, 32, 32},
                                                                           {128, 4, 1168, 4, 16, 32}};
                for (int64_t g = 0; g < groups; ++g)
                    for (int64_t b = 0; b < blocks; ++b)
                        for (int r = 0; r < 8; ++r) {
                            const char *blk = src.data() + static_cast<size_t>((g * 8 + r) * blocks + b) * bb;
                            const char *col = packed.data() + static_cast<size_t>(g * blocks + b) * column;
                            size_t covered = 0;
                            for (const Place &p : places)
                                for (size_t i = 0; i < p.runs; ++i, covered += p.n)
                                    CHECK(std::memcmp(col + p.at + i * p.run_step + r * p.row_step,
                                                      blk + p.src + i * p.n, p.n) == 0);
                            CHECK(covered == bb);
                        }
                const size_t row_bytes = static_cast<size_t>(blocks) * bb;
                CHECK(std::memcmp(packed.data() + static_cast<size_t>(groups) * 8 * row_bytes,
                                  src.data() + static_cast<size_t>(groups * 8) * row_bytes,
                                  static_cast<size_t>(rows - groups * 8) * row_bytes) == 0);
                std::vector<char> back(row_bytes);
                for (int64_t r = 0; r < rows; ++r) {
                    unpack_row(shape, packed.data(), r, back.data());
                    CHECK(std::memcmp(back.data(), src.data() + static_cast<size_t>(r) * row_bytes, row_bytes) == 0);
                    if (blocks > 1) {
                        unpack_blocks(shape, packed.data(), r, 1, blocks - 1, back.data());
                        CHECK(std::memcmp(back.data(), src.data() + static_cast<size_t>(r) * row_bytes + bb,
                                          static_cast<size_t>(blocks - 1) * bb) == 0);
                    }
                }
            }
}

TEST_CASE("q4_k/q6_k group dots: float64 of the dequantized rows; the portable row dots' bits") {
    const int isa = tf_cpu::isa_level();
    for (int32_t dtype : {TF_DTYPE_Q4_K, TF_DTYPE_Q6_K})
        for (int64_t blocks : {1, 2, 3, 5, 8}) {
            INFO("dtype " << dtype << " blocks " << blocks);
            const int64_t k = blocks * k_qk_k;
            const size_t bb = k_block_bytes(dtype);
            const std::vector<char> src = random_k_rows(dtype, 8, blocks, static_cast<uint64_t>(blocks) * 977 + 3);
            const RepackedShape shape{dtype, 8, blocks};
            std::vector<char> packed(shape.total_bytes());
            repack_rows(shape, src.data(), static_cast<int64_t>(static_cast<size_t>(blocks) * bb), packed.data());
            uint64_t s = 5 + static_cast<uint64_t>(blocks);
            // Exact activations: integers with 127 or -127 in each super-block (q8_k's scale is
            // then exactly -1 or 1); and real ones for the comparisons of bits.
            std::vector<float> exact(static_cast<size_t>(k)), real(static_cast<size_t>(k));
            for (int64_t i = 0; i < k; ++i) {
                exact[static_cast<size_t>(i)] = static_cast<float>(static_cast<int>(next(s) % 255) - 127);
                real[static_cast<size_t>(i)] = static_cast<float>(static_cast<double>(next(s) % 20001) / 5000.0 - 2.0);
            }
            for (int64_t b = 0; b < blocks; ++b)
                exact[static_cast<size_t>(b * k_qk_k + (b * 37) % 256)] = b % 2 ? 127.f : -127.f;
            std::vector<char> act(act_bytes(ActKind::q8_k, k));
            const GroupDotFn best = group_dot_of(dtype, isa);
            const bool has_best = best != nullptr, has_portable = portable_group_dot(dtype) != nullptr;
            REQUIRE(has_best);
            REQUIRE(has_portable);
            const bool avx2_chosen = best == avx2_group_dot(dtype);
            if (isa >= 1) CHECK(avx2_chosen);

            quantize_act(ActKind::q8_k, exact.data(), act.data(), k);
            float got[8];
            best(packed.data(), act.data(), blocks, got);
            for (int r = 0; r < 8; ++r) {
                double want = 0, mag = 0;
                for (int64_t b = 0; b < blocks; ++b) {
                    const char *blk = src.data() + static_cast<size_t>(r * blocks + b) * bb;
                    for (int e = 0; e < k_qk_k; ++e) {
                        const double t = k_weight_value(dtype, blk, e) * exact[static_cast<size_t>(b * k_qk_k + e)];
                        want += t;
                        mag += std::fabs(t);
                    }
                }
                INFO("row " << r << ": got " << got[r] << ", want " << want);
                // f32 rounding of each super-block's two products, their difference and the sum.
                CHECK(std::fabs(got[r] - want) <= mag * 4e-7 * static_cast<double>(blocks + 2) + 1e-30);
            }

            for (const std::vector<float> *x : {&exact, &real}) {
                quantize_act(ActKind::q8_k, x->data(), act.data(), k);
                float fast[8], portable[8];
                best(packed.data(), act.data(), blocks, fast);
                portable_group_dot(dtype)(packed.data(), act.data(), blocks, portable);
                for (int r = 0; r < 8; ++r) {
                    const char *row = src.data() + static_cast<size_t>(r * blocks) * bb;
                    const float plain = portable_dot(dtype)(row, act.data(), k);
                    INFO("row " << r << ": group " << fast[r] << ", portable group " << portable[r] << ", row dot "
                                << plain);
                    CHECK(std::memcmp(&fast[r], &plain, sizeof plain) == 0);
                    CHECK(std::memcmp(&portable[r], &plain, sizeof plain) == 0);
                    // The AVX2 row dot adds its f32 lanes in another order: close, not equal bits.
                    double mag = 0;
                    for (int64_t b = 0; b < blocks; ++b)
                        for (int e = 0; e < k_qk_k; ++e)
                            mag += std::fabs(k_weight_value(dtype, row + static_cast<size_t>(b) * bb, e) *
                                             (*x)[static_cast<size_t>(b * k_qk_k + e)]);
                    const float row_best = dot_of(dtype, isa)(row, act.data(), k);
                    CHECK(std::fabs(row_best - plain) <= mag * 1e-6 * static_cast<double>(blocks + 2));
                }
            }
        }
}
