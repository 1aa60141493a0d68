// The block-quantized dtypes (ggml's q8_0 .. q8_k) and their ops, against the formats' definitions:
//  - dequantize, bit for bit, of blocks packed here from each format's field layout (negative
//    scales, zero blocks, the k-quants' packed 6-bit scales with their high bits set);
//  - quantize on inputs whose encoding follows by hand from ggml's reference rules (grid values,
//    rounding ties), and the round-trip error of every type within the bound its format implies;
//  - matmul_q against a float64 product of the dequantized weight, within the error of the
//    activations' 8-bit rounding (the bound computed per block from the activations);
//  - embedding_q, zero-copy from_blob, the layouts and ops that must refuse quantized tensors;
//  - the GPU backends (vulkan, opengl, opencl, cuda) claiming dequantize, embedding_q and matmul_q
//    (quantize stays on cpu), and every other backend refusing them, with the same bits.
// ops-quant runs at the CPU's best ISA level, ops-quant-generic with TINYFIN_CPU_ISA=generic.
// ops-quant-<gpu> (TINYFIN_QUANT_DEVICE=<gpu>, TINYFIN_FALLBACK=error) run the dequantize,
// embedding_q and matmul_q cases with their operands on that device: the same references, no
// fallback (ops-quant-cuda skips, exit 77, where the cuda plugin cannot run: scripts/gpu-check
// runs it on a GPU). Those kernels dequantize the weight and multiply f32 activations, so their matmul_q
// bound is f32 accumulation's (k 2^-24 sum |x w|), not the 8-bit activations' of the cpu kernel.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "reference.hpp"

#include "../splitmix64.hpp"

using namespace tinyfin;
using ref::F;

namespace {

using Bytes = std::vector<uint8_t>;

// The f16 bits of v, which must be exactly a normal f16 or zero (the test's scales are).
uint16_t f16_bits(double v) {
    const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
    if (v == 0) return sign;
    int e = 0;
    const double m = std::frexp(std::fabs(v), &e);  // |v| = m 2^e, m in [0.5, 1)
    const int biased = e - 1 + 15;
    const double mant = (2 * m - 1) * 1024;
    REQUIRE(biased >= 1);
    REQUIRE(biased <= 30);
    REQUIRE(mant == std::floor(mant));
    return static_cast<uint16_t>(sign | biased << 10 | static_cast<int>(mant));
}

void put16(Bytes &b, uint16_t v) {
    b.push_back(static_cast<uint8_t>(v & 0xff));
    b.push_back(static_cast<uint8_t>(v >> 8));
}
void put_f32(Bytes &b, float v) {
    uint8_t raw[4];
    std::memcpy(raw, &v, 4);
    b.insert(b.end(), raw, raw + 4);
}

using test_support::next;
int level(uint64_t &state, int lo, int hi) { return lo + static_cast<int>(next(state) % uint64_t(hi - lo + 1)); }

// A block built from the format's fields, and the values the format defines for it (each an
// exact product rounded once to f32, as computed here in double).
struct Built {
    Bytes bytes;
    std::vector<float> values;
};

// q8_0: {f16 d; i8 qs[32]}, x = d q.
Built q8_0_block(double d, uint64_t seed) {
    Built b;
    put16(b.bytes, f16_bits(d));
    for (int j = 0; j < 32; ++j) {
        const int q = j == 0 ? -128 : j == 1 ? 127 : level(seed, -127, 127);
        b.bytes.push_back(static_cast<uint8_t>(static_cast<int8_t>(q)));
        b.values.push_back(static_cast<float>(d * q));
    }
    return b;
}

// The 4-bit halves and 5th bits of 32 levels: byte j holds element j (low) and j + 16 (high);
// bit j of qh is bit 4 of element j.
void pack_32(const int *q, Bytes &qs, uint32_t &qh) {
    qh = 0;
    for (int j = 0; j < 16; ++j) qs.push_back(static_cast<uint8_t>((q[j] & 15) | (q[j + 16] & 15) << 4));
    for (int j = 0; j < 32; ++j) qh |= uint32_t((q[j] >> 4) & 1) << j;
}

// q4_0 {d; qs} x = d (q - 8); q4_1 {d; m; qs} x = d q + m; q5_0 {d; qh; qs} x = d (q - 16);
// q5_1 {d; m; qh; qs} x = d q + m.
Built small_block(DType dtype, double d, double m, uint64_t seed) {
    const bool five = dtype == DType::q5_0 || dtype == DType::q5_1;
    const bool with_min = dtype == DType::q4_1 || dtype == DType::q5_1;
    const int top = five ? 31 : 15;
    int q[32];
    for (int j = 0; j < 32; ++j) q[j] = j == 0 ? 0 : j == 1 ? top : level(seed, 0, top);
    Built b;
    put16(b.bytes, f16_bits(d));
    if (with_min) put16(b.bytes, f16_bits(m));
    Bytes qs;
    uint32_t qh;
    pack_32(q, qs, qh);
    if (five)
        for (int k = 0; k < 4; ++k) b.bytes.push_back(static_cast<uint8_t>(qh >> (8 * k)));
    b.bytes.insert(b.bytes.end(), qs.begin(), qs.end());
    const int offset = with_min ? 0 : five ? 16 : 8;
    for (int j = 0; j < 32; ++j)  // (no + 0 without a minimum: -0 + 0 would be +0)
        b.values.push_back(static_cast<float>(with_min ? d * q[j] + m : d * (q[j] - offset)));
    return b;
}

// The 12 bytes of 8 six-bit scales and mins: sub-blocks 0..3 in the low 6 bits of bytes 0..3
// (scales) and 4..7 (mins); sub-blocks 4..7 with their low 4 bits in bytes 8..11 (scale low
// nibble, min high nibble) and their top 2 bits in the top bits of bytes 0..3 (scales) and 4..7.
Bytes pack_scales(const int sc[8], const int mn[8]) {
    Bytes s(12, 0);
    for (int j = 0; j < 4; ++j) {
        s[j] = static_cast<uint8_t>(sc[j] | (sc[j + 4] >> 4) << 6);
        s[j + 4] = static_cast<uint8_t>(mn[j] | (mn[j + 4] >> 4) << 6);
        s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
    }
    return s;
}

// q4_k {f16 d; f16 dmin; scales[12]; qs[128]} and q5_k (qh[32] before qs): sub-block s = e / 32
// has x = d sc_s q - dmin m_s; qs byte 32 c + l holds elements 64 c + l (low) and 64 c + 32 + l
// (high); q5_k's 5th bits: bit 2c of qh[l] for element 64 c + l, bit 2c + 1 for 64 c + 32 + l.
Built k45_block(bool five, double d, double dmin, const int sc[8], const int mn[8], uint64_t seed) {
    const int top = five ? 31 : 15;
    int q[256];
    for (int e = 0; e < 256; ++e) q[e] = e % 37 == 0 ? top : level(seed, 0, top);
    Built b;
    put16(b.bytes, f16_bits(d));
    put16(b.bytes, f16_bits(dmin));
    Bytes s = pack_scales(sc, mn);
    b.bytes.insert(b.bytes.end(), s.begin(), s.end());
    if (five) {
        Bytes qh(32, 0);
        for (int c = 0; c < 4; ++c)
            for (int l = 0; l < 32; ++l)
                qh[l] = static_cast<uint8_t>(qh[l] | ((q[64 * c + l] >> 4) & 1) << (2 * c) |
                                             ((q[64 * c + 32 + l] >> 4) & 1) << (2 * c + 1));
        b.bytes.insert(b.bytes.end(), qh.begin(), qh.end());
    }
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l)
            b.bytes.push_back(static_cast<uint8_t>((q[64 * c + l] & 15) | (q[64 * c + 32 + l] & 15) << 4));
    for (int e = 0; e < 256; ++e) b.values.push_back(static_cast<float>(d * sc[e / 32] * q[e] - dmin * mn[e / 32]));
    return b;
}

// q6_k {ql[128]; qh[64]; i8 scales[16]; f16 d}: x = d scale_{e/16} (q - 32). Per half h and
// l < 32, elements 128h + l + {0, 32, 64, 96}: low nibbles in ql[64h + l] (0 low, 64 high) and
// ql[64h + 32 + l] (32 low, 96 high); top 2 bits in qh[32h + l] at bits 0, 2, 4, 6.
Built q6_k_block(double d, const int scales[16], uint64_t seed) {
    int q[256];
    for (int e = 0; e < 256; ++e) q[e] = e % 41 == 0 ? 63 : e % 43 == 0 ? 0 : level(seed, 0, 63);
    Bytes ql(128), qh(64);
    for (int h = 0; h < 2; ++h)
        for (int l = 0; l < 32; ++l) {
            const int *e = q + 128 * h + l;
            ql[64 * h + l] = static_cast<uint8_t>((e[0] & 15) | (e[64] & 15) << 4);
            ql[64 * h + 32 + l] = static_cast<uint8_t>((e[32] & 15) | (e[96] & 15) << 4);
            qh[32 * h + l] =
                static_cast<uint8_t>(e[0] >> 4 | (e[32] >> 4) << 2 | (e[64] >> 4) << 4 | (e[96] >> 4) << 6);
        }
    Built b;
    b.bytes = ql;
    b.bytes.insert(b.bytes.end(), qh.begin(), qh.end());
    for (int s = 0; s < 16; ++s) b.bytes.push_back(static_cast<uint8_t>(static_cast<int8_t>(scales[s])));
    put16(b.bytes, f16_bits(d));
    for (int e = 0; e < 256; ++e) b.values.push_back(static_cast<float>(d * scales[e / 16] * (q[e] - 32)));
    return b;
}

// q8_k {f32 d; i8 qs[256]; i16 bsums[16]}: x = d q (bsums are for dot products only).
Built q8_k_block(float d, uint64_t seed) {
    Built b;
    put_f32(b.bytes, d);
    int q[256];
    for (int e = 0; e < 256; ++e) q[e] = level(seed, -127, 127);
    for (int e = 0; e < 256; ++e) b.bytes.push_back(static_cast<uint8_t>(static_cast<int8_t>(q[e])));
    for (int s = 0; s < 16; ++s) {
        int sum = 0;
        for (int l = 0; l < 16; ++l) sum += q[16 * s + l];
        put16(b.bytes, static_cast<uint16_t>(static_cast<int16_t>(sum)));
    }
    for (int e = 0; e < 256; ++e) b.values.push_back(static_cast<float>(static_cast<double>(d) * q[e]));
    return b;
}

// A row of blocks for dtype: varied scales (negative ones, a zero block of all-zero bytes), the
// k-quants' scales and mins across 0..63 so the packed high bits are used.
Built blocks_of(DType dtype, int count, uint64_t seed) {
    Built all;
    for (int i = 0; i < count; ++i) {
        const uint64_t s = seed * 101 + static_cast<uint64_t>(i);
        const double sign = i % 2 ? -1.0 : 1.0;
        const double d = sign * std::ldexp(1.0 + (i % 5) / 8.0, -(i % 7) - 3);
        Built b;
        if (i == 2) {  // the zero block: every byte 0; an offset level times d = 0 is -0 (q4_0, q5_0, q6_k)
            b.bytes.assign(dtype_block_bytes(dtype), 0);
            const bool offset = dtype == DType::q4_0 || dtype == DType::q5_0 || dtype == DType::q6_k;
            b.values.assign(static_cast<std::size_t>(dtype_block_length(dtype)), offset ? -0.0f : 0.0f);
            all.bytes.insert(all.bytes.end(), b.bytes.begin(), b.bytes.end());
            all.values.insert(all.values.end(), b.values.begin(), b.values.end());
            continue;
        }
        int sc[8], mn[8], s16[16];
        for (int j = 0; j < 8; ++j) {
            sc[j] = (j * 9 + i * 13) % 64;
            mn[j] = (j * 23 + i * 7 + 40) % 64;
        }
        for (int j = 0; j < 16; ++j) s16[j] = ((j * 37 + i * 11) % 256) - 128;
        switch (dtype) {
        case DType::q8_0: b = q8_0_block(d, s); break;
        case DType::q4_0:
        case DType::q5_0: b = small_block(dtype, d, 0, s); break;
        case DType::q4_1:
        case DType::q5_1: b = small_block(dtype, std::fabs(d), -sign * std::ldexp(3.0, -(i % 4) - 2), s); break;
        case DType::q4_k: b = k45_block(false, d, std::ldexp(1.25, -6 - i % 3), sc, mn, s); break;
        case DType::q5_k: b = k45_block(true, d, std::ldexp(1.5, -6 - i % 3), sc, mn, s); break;
        case DType::q6_k: b = q6_k_block(d, s16, s); break;
        case DType::q8_k: b = q8_k_block(static_cast<float>(sign * (0.001 + 0.0007 * i) / 3.0), s); break;
        default: FAIL("not a quantized dtype");
        }
        REQUIRE(b.bytes.size() == dtype_block_bytes(dtype));
        all.bytes.insert(all.bytes.end(), b.bytes.begin(), b.bytes.end());
        all.values.insert(all.values.end(), b.values.begin(), b.values.end());
    }
    return all;
}

const DType quantized[] = {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1,
                           DType::q4_k, DType::q5_k, DType::q6_k, DType::q8_k};

Device cpu() { return Device::parse("cpu"); }

// The device the dequantize, embedding_q and matmul_q cases run on (operands moved there).
Device dev() {
    const char *name = std::getenv("TINYFIN_QUANT_DEVICE");
    return Device::parse(name && *name ? name : "cpu");
}
bool on_cpu() { return dev().backend == "cpu"; }

bool same_bits(float a, float b) {
    uint32_t x, y;
    std::memcpy(&x, &a, 4);
    std::memcpy(&y, &b, 4);
    return x == y;
}

// Bytes of a quantized tensor.
Bytes bytes_of(const Tensor &t) {
    Bytes out(t.nbytes());
    t.copy_to_host(out.data(), out.size());
    return out;
}

}  // namespace

// ---- the dtype table --------------------------------------------------------------------------

TEST_CASE("the quantized dtypes: block lengths, block bytes, ggml type numbers, names") {
    struct Row {
        DType dtype;
        const char *name;
        int64_t block;
        std::size_t bytes;
        int ggml;
    };
    // GGUF's sizes: 2-byte f16 scales, 4-bit pairs, 6-bit packed scales (12 bytes).
    const Row rows[] = {{DType::q8_0, "q8_0", 32, 2 + 32, 8},
                        {DType::q4_0, "q4_0", 32, 2 + 16, 2},
                        {DType::q4_1, "q4_1", 32, 4 + 16, 3},
                        {DType::q5_0, "q5_0", 32, 2 + 4 + 16, 6},
                        {DType::q5_1, "q5_1", 32, 4 + 4 + 16, 7},
                        {DType::q4_k, "q4_k", 256, 4 + 12 + 128, 12},
                        {DType::q5_k, "q5_k", 256, 4 + 12 + 32 + 128, 13},
                        {DType::q6_k, "q6_k", 256, 128 + 64 + 16 + 2, 14},
                        {DType::q8_k, "q8_k", 256, 4 + 256 + 32, 15}};
    for (const Row &r : rows) {
        INFO(r.name);
        CHECK(is_quantized(r.dtype));
        CHECK(std::string(dtype_name(r.dtype)) == r.name);
        CHECK(dtype_named(r.name) == r.dtype);
        CHECK(dtype_block_length(r.dtype) == r.block);
        CHECK(dtype_block_bytes(r.dtype) == r.bytes);
        CHECK(ggml_type_of(r.dtype) == r.ggml);
        CHECK(dtype_from_ggml_type(r.ggml) == r.dtype);
        CHECK_THROWS_AS(dtype_size(r.dtype), DTypeError);
        CHECK(dtype_bytes(r.dtype, {3, 2 * r.block}) == 6 * r.bytes);
        CHECK_THROWS_AS(dtype_bytes(r.dtype, {3, r.block + 1}), ShapeError);
        CHECK_THROWS_AS(dtype_bytes(r.dtype, {}), ShapeError);
    }
    CHECK(!is_quantized(DType::f32));
    CHECK(ggml_type_of(DType::bf16) == 30);
    CHECK(dtype_from_ggml_type(9) == std::nullopt);  // q8_1: not a tinyfin dtype
    CHECK(dtype_from_ggml_type(-1) == std::nullopt);
}

// ---- dequantize ---------------------------------------------------------------------------------

TEST_CASE("dequantize: blocks packed from each format's fields, bit for bit") {
    for (DType dtype : quantized) {
        INFO(dtype_name(dtype));
        const int per_row = 3;
        Built b = blocks_of(dtype, 2 * per_row, 7);
        const int64_t k = per_row * dtype_block_length(dtype);
        Tensor q = from_host(b.bytes.data(), {2, k}, dtype, cpu()).to(dev());
        CHECK(q.nbytes() == b.bytes.size());
        CHECK(bytes_of(q) == b.bytes);
        std::vector<float> got = dequantize(q).to_vector<float>();
        REQUIRE(got.size() == b.values.size());
        for (std::size_t i = 0; i < got.size(); ++i) {
            if (same_bits(got[i], b.values[i])) continue;
            INFO("element " << i << ": got " << got[i] << ", want " << b.values[i]);
            CHECK(same_bits(got[i], b.values[i]));
            break;
        }
        // f16 and bf16 outputs: the same values rounded once to the half type.
        for (const ref::Half &half : ref::halves) {
            Tensor h = dequantize(q, half.dtype);
            CHECK(h.dtype() == half.dtype);
            ref::check_close(h, ref::to_double(b.values), {2, k}, half.tol / 4, half.tol / 4);
        }
        // A view of the second row (whole blocks) reads that row.
        Tensor row = q.slice(0, 1, 2);
        std::vector<float> second = dequantize(row).to_vector<float>();
        CHECK(std::equal(second.begin(), second.end(), b.values.begin() + k));
    }
}

TEST_CASE("embedding_q: rows of a packed table, and indices out of range") {
    for (DType dtype : quantized) {
        INFO(dtype_name(dtype));
        const int64_t k = dtype_block_length(dtype);
        Built b = blocks_of(dtype, 5, 11);  // 5 rows of one block
        Tensor table = from_host(b.bytes.data(), {5, k}, dtype, cpu()).to(dev());
        Tensor idx = from_vector<int64_t>({4, 0, 2, 4, 1, 3}, {2, 3}, dev());
        Tensor rows = embedding_q(table, idx);
        REQUIRE(rows.shape() == Shape{2, 3, k});
        std::vector<float> got = rows.to_vector<float>();
        const int64_t order[] = {4, 0, 2, 4, 1, 3};
        for (int e = 0; e < 6; ++e)
            for (int64_t j = 0; j < k; ++j)
                REQUIRE(same_bits(got[static_cast<std::size_t>(e * k + j)],
                                  b.values[static_cast<std::size_t>(order[e] * k + j)]));
        // embedding() with a quantized table is embedding_q in f32.
        CHECK(embedding(table, idx).to_vector<float>() == got);
        // i32 indices, a strided view of them, an f16 output.
        Tensor idx32 = from_vector<int32_t>({3, 9, 1, 9, 0}, {5}, dev()).slice(0, 0, 5, 2);  // 3, 1, 0
        std::vector<float> got32 = embedding_q(table, idx32).to_vector<float>();
        const int64_t order32[] = {3, 1, 0};
        for (int e = 0; e < 3; ++e)
            for (int64_t j = 0; j < k; ++j)
                REQUIRE(same_bits(got32[static_cast<std::size_t>(e * k + j)],
                                  b.values[static_cast<std::size_t>(order32[e] * k + j)]));
        Tensor half_rows = embedding_q(table, idx, DType::f16);
        CHECK(half_rows.dtype() == DType::f16);
        CHECK(cast(half_rows, DType::f32).to_vector<float>() ==
              cast(cast(rows, DType::f16), DType::f32).to_vector<float>());
        // A GPU kernel finds a bad index while it runs: the error comes with the result.
        CHECK_THROWS_AS(embedding_q(table, from_vector<int64_t>({5}, {1}, dev())).to_vector<float>(), ValueError);
        CHECK_THROWS_AS(embedding_q(table, from_vector<int32_t>({-1}, {1}, dev())).to_vector<float>(), ValueError);
    }
}

// ---- quantize -----------------------------------------------------------------------------------

TEST_CASE("quantize: grid values and rounding ties as ggml's reference rules give them") {
    const double s = 1.0 / 64;  // an exact f16 and power of two: x * (1 / d) is exact
    SUBCASE("q8_0: d = amax / 127, q = round half away from zero") {
        std::vector<float> x(32);
        std::vector<int> want(32);
        for (int j = 0; j < 32; ++j) want[j] = (j * 9) % 255 - 127;
        want[0] = 127;
        x[0] = static_cast<float>(127 * s);
        for (int j = 1; j < 32; ++j) x[j] = static_cast<float>(want[j] * s);
        x[5] = static_cast<float>(2.5 * s), want[5] = 3;
        x[6] = static_cast<float>(-2.5 * s), want[6] = -3;
        x[7] = static_cast<float>(-0.5 * s), want[7] = -1;
        Bytes got = bytes_of(quantize(from_vector(x, {32}, cpu()), DType::q8_0));
        CHECK(got[0] + 256 * got[1] == f16_bits(s));
        for (int j = 0; j < 32; ++j) CHECK(static_cast<int8_t>(got[2 + j]) == want[j]);
    }
    SUBCASE("q4_0 and q5_0: d = (value of largest magnitude) / -8 or -16, q = trunc(x / d + 8.5 or 16.5)") {
        for (DType dtype : {DType::q4_0, DType::q5_0}) {
            const int half = dtype == DType::q4_0 ? 8 : 16;
            std::vector<float> x(32);
            std::vector<int> want(32);
            for (int j = 0; j < 32; ++j) {
                want[j] = (j * 7 + 3) % (2 * half);
                x[j] = static_cast<float>(-(want[j] - half) * s);  // d = -s: x = d (q - half)
            }
            x[0] = static_cast<float>(half * s), want[0] = 0;  // the largest magnitude: d = -s
            x[9] = static_cast<float>(-(3 - half + 0.5) * s), want[9] = 4;  // a tie rounds up
            x[10] = static_cast<float>(-(half - 1 + 0.5) * s), want[10] = 2 * half - 1;  // clamped to the top
            Bytes got = bytes_of(quantize(from_vector(x, {32}, cpu()), dtype));
            INFO(dtype_name(dtype));
            CHECK(got[0] + 256 * got[1] == f16_bits(-s));
            uint32_t qh = 0;
            const uint8_t *qs = got.data() + 2;
            if (dtype == DType::q5_0) {
                std::memcpy(&qh, got.data() + 2, 4);
                qs += 4;
            }
            for (int j = 0; j < 32; ++j) {
                const int low = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
                CHECK(low + 16 * int((qh >> j) & 1) == want[j]);
            }
        }
    }
    SUBCASE("q4_1 and q5_1: d = (max - min) / 15 or 31, m = min, q = trunc((x - min) / d + 0.5)") {
        for (DType dtype : {DType::q4_1, DType::q5_1}) {
            const int top = dtype == DType::q4_1 ? 15 : 31;
            const double min = -0.75;
            std::vector<float> x(32);
            std::vector<int> want(32);
            for (int j = 0; j < 32; ++j) {
                want[j] = (j * 5 + 1) % (top + 1);
                x[j] = static_cast<float>(min + want[j] * s);
            }
            x[0] = static_cast<float>(min), want[0] = 0;
            x[1] = static_cast<float>(min + top * s), want[1] = top;
            x[2] = static_cast<float>(min + 4.5 * s), want[2] = 5;  // a tie rounds up
            Bytes got = bytes_of(quantize(from_vector(x, {32}, cpu()), dtype));
            INFO(dtype_name(dtype));
            CHECK(got[0] + 256 * got[1] == f16_bits(s));
            CHECK(got[2] + 256 * got[3] == f16_bits(min));
            uint32_t qh = 0;
            const uint8_t *qs = got.data() + 4;
            if (dtype == DType::q5_1) {
                std::memcpy(&qh, got.data() + 4, 4);
                qs += 4;
            }
            for (int j = 0; j < 32; ++j) {
                const int low = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
                CHECK(low + 16 * int((qh >> j) & 1) == want[j]);
            }
        }
    }
    SUBCASE("q8_k: d = max / -127 in f32, q = round half to even, bsums of 16") {
        std::vector<float> x(256);
        std::vector<int> want(256);
        for (int j = 0; j < 256; ++j) {
            want[j] = (j * 31) % 255 - 127;
            x[j] = static_cast<float>(-want[j] * s);
        }
        x[0] = static_cast<float>(127 * s), want[0] = -127;  // max positive: d = -s
        x[3] = static_cast<float>(2.5 * s), want[3] = -2;  // -2.5 to even
        x[4] = static_cast<float>(3.5 * s), want[4] = -4;  // -3.5 to even
        Bytes got = bytes_of(quantize(from_vector(x, {256}, cpu()), DType::q8_k));
        float d;
        std::memcpy(&d, got.data(), 4);
        CHECK(d == static_cast<float>(-s));
        for (int j = 0; j < 256; ++j) CHECK(static_cast<int8_t>(got[4 + j]) == want[j]);
        for (int b = 0; b < 16; ++b) {
            int sum = 0;
            for (int l = 0; l < 16; ++l) sum += want[16 * b + l];
            int16_t stored;
            std::memcpy(&stored, got.data() + 4 + 256 + 2 * b, 2);
            CHECK(stored == sum);
        }
    }
    SUBCASE("all-zero input: zero blocks") {
        for (DType dtype : quantized) {
            INFO(dtype_name(dtype));
            Tensor q = quantize(zeros({2, 256}, DType::f32, cpu()), dtype);
            CHECK(dequantize(q).to_vector<float>() == std::vector<float>(512, 0.0f));
        }
    }
}

TEST_CASE("quantize round trip: every element within the bound of its format") {
    // Per element: the 32-formats and q8_k from their definitions (half a step, a whole step where
    // the top level is clamped, plus the f16 rounding of d and m); the k-quants one step of the
    // sub-block's range (the scale search may clip an extreme value by up to a step) plus the
    // 6-bit rounding of the scale against the super-block's largest.
    for (DType dtype : quantized) {
        INFO(dtype_name(dtype));
        const int64_t k = 512;
        F x = ref::values(3 * k, 17 + static_cast<uint64_t>(dtype), -2, 2);
        for (int64_t i = k; i < 2 * k; ++i) x[static_cast<std::size_t>(i)] *= 0.01f * static_cast<float>(i % 9);
        Tensor q = quantize(from_vector(x, {3, k}, cpu()), dtype);
        CHECK(q.dtype() == dtype);
        CHECK(q.nbytes() == 3 * dtype_bytes(dtype, {k}));
        std::vector<float> y = dequantize(q).to_vector<float>();
        const int64_t block = dtype_block_length(dtype);
        const int64_t sub = dtype == DType::q6_k ? 16 : dtype == DType::q4_k || dtype == DType::q5_k ? 32 : block;
        double sum_sq = 0, sum_err = 0;
        for (int64_t b0 = 0; b0 < 3 * k; b0 += sub) {
            double amax = 0, mn = 1e300, mx = -1e300;
            for (int64_t i = b0; i < b0 + sub; ++i) {
                amax = std::max(amax, std::fabs(double(x[i])));
                mn = std::min(mn, double(x[i]));
                mx = std::max(mx, double(x[i]));
            }
            double smax = 0;  // the super-block's largest sub-block range, for the 6-bit scale rounding
            for (int64_t s0 = b0 / block * block; s0 < b0 / block * block + block; s0 += sub) {
                double a = 1e300, z = -1e300;
                for (int64_t i = s0; i < s0 + sub; ++i) a = std::min(a, double(x[i])), z = std::max(z, double(x[i]));
                smax = std::max(smax, z - std::min(a, 0.0));
            }
            double bound = 0;
            const double f16 = 0x1p-11;
            switch (dtype) {
            case DType::q8_0: bound = amax / 127 * (0.5 + 127 * f16); break;
            case DType::q4_0: bound = amax / 8 * (1 + 8 * f16); break;
            case DType::q5_0: bound = amax / 16 * (1 + 16 * f16); break;
            case DType::q4_1: bound = (mx - mn) / 15 * (0.5 + 15 * f16) + std::fabs(mn) * f16; break;
            case DType::q5_1: bound = (mx - mn) / 31 * (0.5 + 31 * f16) + std::fabs(mn) * f16; break;
            case DType::q8_k: bound = amax / 127 * 0.5 * (1 + 1e-6); break;
            case DType::q4_k: bound = (mx - std::min(mn, 0.0)) / 15 + smax / 63 * 8; break;
            case DType::q5_k: bound = (mx - std::min(mn, 0.0)) / 31 + smax / 63 * 16; break;
            case DType::q6_k: bound = amax / 32 + smax / 128 * 32; break;
            default: break;
            }
            bound += 1e-7;
            for (int64_t i = b0; i < b0 + sub; ++i) {
                const double err = std::fabs(double(y[i]) - x[i]);
                sum_sq += double(x[i]) * x[i];
                sum_err += err * err;
                if (err <= bound) continue;
                INFO("element " << i << ": x " << x[i] << " -> " << y[i] << ", error " << err << " > " << bound);
                CHECK(err <= bound);
                b0 = 3 * k;
                break;
            }
        }
        MESSAGE(dtype_name(dtype) << " relative rms error " << std::sqrt(sum_err / sum_sq));
        // f16 and bf16 inputs are read as f32 first: the same bytes as the f32 of their values.
        for (const ref::Half &half : ref::halves) {
            auto [h, values] = ref::half_input(x, {3, k}, half.dtype);
            F as_f32(values.begin(), values.end());
            CHECK(bytes_of(quantize(h, dtype)) == bytes_of(quantize(from_vector(as_f32, {3, k}, cpu()), dtype)));
        }
    }
}

// ---- matmul_q -----------------------------------------------------------------------------------

namespace {

// x [m, k] times the transpose of w [n, k] in float64, and the bound of the error that rounding
// x to 8-bit blocks of `block` (scale amax / 127) adds: per block, half a step times sum |w|;
// plus f32 accumulation.
void product_and_bound(const F &x, const std::vector<float> &w, int64_t m, int64_t n, int64_t k, int64_t block,
                       ref::D &want, ref::D &bound) {
    want.assign(static_cast<std::size_t>(m * n), 0.0);
    bound.assign(static_cast<std::size_t>(m * n), 0.0);
    for (int64_t r = 0; r < m; ++r)
        for (int64_t c = 0; c < n; ++c) {
            double sum = 0, err = 0, mag = 0;
            for (int64_t b0 = 0; b0 < k; b0 += block) {
                double amax = 0, wabs = 0;
                for (int64_t i = b0; i < b0 + block; ++i) {
                    amax = std::max(amax, std::fabs(double(x[r * k + i])));
                    wabs += std::fabs(double(w[c * k + i]));
                    sum += double(x[r * k + i]) * w[c * k + i];
                    mag += std::fabs(double(x[r * k + i]) * w[c * k + i]);
                }
                err += amax / 127 * 0.5 * wabs;
            }
            want[r * n + c] = sum;
            // The GPU kernels multiply the f32 activations: f32 accumulation's bound alone.
            bound[r * n + c] = on_cpu() ? err * 1.001 + mag * 1e-5 + 1e-6 : mag * double(k) * 0x1p-24 * 1.01 + 1e-30;
        }
}

}  // namespace

TEST_CASE("matmul_q against the float64 product of the dequantized weight") {
    struct Shape3 {
        int64_t m, n, k;
    };
    for (DType dtype : quantized) {
        INFO(dtype_name(dtype));
        const int64_t block = dtype_block_length(dtype);
        const int64_t act_block = block == 32 ? 32 : 256;
        // k = 32 .. 384: 1, 3, 5, 7, 9 and 12 blocks of 32, so that the SIMD dots' tails after their
        // 2-, 4- and 8-block passes run too (q4_0's last 1-3 blocks against zero blocks).
        // m = 70: cuda's path for many rows (dequantized tiles and cuBLAS).
        for (Shape3 s : {Shape3{1, 37, 512}, Shape3{5, 19, 256}, Shape3{1, 1, 768}, Shape3{17, 33, 1024},
                         Shape3{2, 9, 224}, Shape3{70, 21, 512}, Shape3{3, 5, 32}, Shape3{2, 7, 96}, Shape3{1, 3, 160},
                         Shape3{4, 6, 288}, Shape3{1, 17, 384}}) {
            if (s.k % block != 0) continue;
            INFO("m " << s.m << " n " << s.n << " k " << s.k);
            F wv = ref::values(s.n * s.k, 31 + static_cast<uint64_t>(s.k), -1, 1);
            F x = ref::values(s.m * s.k, 41 + static_cast<uint64_t>(s.m), -2, 2);
            Tensor w = quantize(from_vector(wv, {s.n, s.k}, cpu()), dtype);
            std::vector<float> wd = dequantize(w).to_vector<float>();
            ref::D want, bound;
            product_and_bound(x, wd, s.m, s.n, s.k, act_block, want, bound);
            Tensor y = matmul_q(from_vector(x, {s.m, s.k}, dev()), w.to(dev()));
            REQUIRE(y.shape() == Shape{s.m, s.n});
            REQUIRE(y.dtype() == DType::f32);
            std::vector<float> got = y.to_vector<float>();
            for (std::size_t i = 0; i < got.size(); ++i) {
                if (std::fabs(got[i] - want[i]) <= bound[i]) continue;
                INFO("element " << i << ": got " << got[i] << ", want " << want[i] << " within " << bound[i]);
                CHECK(std::fabs(got[i] - want[i]) <= bound[i]);
                break;
            }
        }
    }
}

TEST_CASE("matmul_q with many activation rows (prefill): f32 activations, within f32 accumulation") {
    // From 32 rows on the cpu plugin decodes the weight to f32 (panels of 2^20 elements) and runs
    // the f32 GEMM: no 8-bit rounding of x, so only f32 accumulation's bound applies (as on the
    // GPU kernels). n * k = 300 * 4096 spans two panels (256 + 44 rows).
    struct Shape3 {
        int64_t m, n, k;
    };
    for (DType dtype : quantized) {
        INFO(dtype_name(dtype));
        for (Shape3 s : {Shape3{32, 300, 4096}, Shape3{40, 33, 256}}) {
            INFO("m " << s.m << " n " << s.n << " k " << s.k);
            F wv = ref::values(s.n * s.k, 51 + static_cast<uint64_t>(s.k), -1, 1);
            F x = ref::values(s.m * s.k, 61 + static_cast<uint64_t>(s.m), -2, 2);
            Tensor w = quantize(from_vector(wv, {s.n, s.k}, cpu()), dtype);
            std::vector<float> wd = dequantize(w).to_vector<float>();
            std::vector<float> got = matmul_q(from_vector(x, {s.m, s.k}, dev()), w.to(dev())).to_vector<float>();
            REQUIRE(got.size() == static_cast<std::size_t>(s.m * s.n));
            int bad = 0;
            for (int64_t r = 0; r < s.m; ++r)
                for (int64_t c = 0; c < s.n; ++c) {
                    double want = 0, mag = 0;
                    for (int64_t i = 0; i < s.k; ++i) {
                        want += double(x[r * s.k + i]) * wd[c * s.k + i];
                        mag += std::fabs(double(x[r * s.k + i]) * wd[c * s.k + i]);
                    }
                    const double bound = mag * double(s.k) * 0x1p-24 * 1.01 + 1e-30;
                    const double e = std::fabs(got[r * s.n + c] - want);
                    if (e <= bound || bad++ > 0) continue;
                    INFO("row " << r << " column " << c << ": got " << got[r * s.n + c] << ", want " << want
                                << " within " << bound);
                    CHECK(e <= bound);
                }
            CHECK(bad == 0);
        }
    }
}

namespace {

// Whether the cpu plugin repacks q4_0/q8_0/q4_k/q6_k weights here (AVX2 with F16C, not capped to generic,
// not turned off): prepack_weight then returns the weight's bytes, else 0.
bool cpu_repacks() {
    const char *isa = std::getenv("TINYFIN_CPU_ISA");
    const char *prepack = std::getenv("TINYFIN_CPU_PREPACK");
    if ((isa && std::strcmp(isa, "generic") == 0) || (prepack && std::strcmp(prepack, "0") == 0)) return false;
#if defined(__x86_64__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

// matmul_q(x, w) against the float64 product of w's dequantized values: the 8-bit activations'
// bound below 32 rows, f32 accumulation's from 32 on (the decoded weight times f32 x).
void check_against_float64(const Tensor &w, const F &x, int64_t m) {
    const int64_t n = w.size(0), k = w.size(1);
    std::vector<float> wd = dequantize(w).to_vector<float>();
    ref::D want, bound;
    product_and_bound(x, wd, m, n, k, dtype_block_length(w.dtype()) == 32 ? 32 : 256, want, bound);
    std::vector<float> got = matmul_q(from_vector(x, {m, k}, w.device()), w).to_vector<float>();
    REQUIRE(got.size() == static_cast<std::size_t>(m * n));
    for (std::size_t i = 0; i < got.size(); ++i) {
        double mag = 0;
        const auto r = static_cast<int64_t>(i) / n, c = static_cast<int64_t>(i) % n;
        for (int64_t j = 0; j < k; ++j) mag += std::fabs(double(x[r * k + j]) * wd[c * k + j]);
        const double b = m >= 32 || !on_cpu() ? mag * double(k) * 0x1p-24 * 1.01 + 1e-30 : bound[i];
        if (std::fabs(got[i] - want[i]) <= b) continue;
        INFO("row " << r << " column " << c << ": got " << got[i] << ", want " << want[i] << " within " << b);
        CHECK(std::fabs(got[i] - want[i]) <= b);
        break;
    }
}

}  // namespace

TEST_CASE("matmul_q with prepacked q4_0/q8_0/q4_k/q6_k weights (eight rows interleaved) against float64") {
    // Rows 1, 7 (a group's worth less one: all plain), 8, 9, 17, 23 (groups and 1-7 plain rows
    // after them), 1-7 blocks (q4_0's quads of activation blocks with zero blocks after the row;
    // 1-3 super-blocks for the k-quants), 1 and 3 activation rows (the group dots) and 40
    // (prefill: rows unpacked, decoded, the GEMM).
    for (DType dtype : {DType::q4_0, DType::q8_0, DType::q4_k, DType::q6_k}) {
        INFO(dtype_name(dtype));
        const int64_t block = dtype_block_length(dtype);
        for (int64_t n : {1, 7, 8, 9, 17, 23})
            for (int64_t blocks : {1, 3, 5, 7})
                for (int64_t m : {1, 3, 40}) {
                    if (block == 256 && blocks > 3) continue;
                    const int64_t k = block * blocks;
                    INFO("m " << m << " n " << n << " k " << k);
                    F wv = ref::values(n * k, 71 + static_cast<uint64_t>(n * k), -1, 1);
                    F x = ref::values(m * k, 81 + static_cast<uint64_t>(m * k), -2, 2);
                    Tensor w = quantize(from_vector(wv, {n, k}, cpu()), dtype).to(dev());
                    const uint64_t packed = prepack_weight(w);
                    CHECK(packed == (on_cpu() && cpu_repacks() ? dtype_bytes(dtype, {n, k}) : 0));
                    CHECK(prepack_weight(w) == packed);  // a second call finds the first copy
                    check_against_float64(w, x, m);
                }
    }
}

TEST_CASE("matmul_q with prepacked weights: a freed weight's copy is dropped with its buffer; views read the "
          "blocks") {
    const int64_t n = 24;
    for (DType dtype : {DType::q4_0, DType::q8_0, DType::q4_k, DType::q6_k}) {
        INFO(dtype_name(dtype));
        const int64_t k = dtype_block_length(dtype) == 32 ? 96 : 512;
        const F x = ref::values(2 * k, 5, -2, 2);
        // The same shape again and again: the caching allocator hands the freed block (and often
        // the same buffer record address) to the next weight, whose values differ.
        for (uint64_t seed = 1; seed <= 4; ++seed) {
            Tensor w = quantize(from_vector(ref::values(n * k, seed, -1, 1), {n, k}, cpu()), dtype).to(dev());
            prepack_weight(w);
            check_against_float64(w, x, 2);
            // Rows 3..20 of the prepacked weight: another descriptor, read as the blocks are stored.
            check_against_float64(w.slice(0, 3, 21), x, 2);
        }
    }
}

TEST_CASE("matmul_q: batch axes, f16/bf16 activations, output dtypes, views of the weight") {
    const DType dtype = DType::q4_0;
    const int64_t k = 128, n = 6;
    F wv = ref::values(2 * n * k, 5, -1, 1);
    Tensor w_all = quantize(from_vector(wv, {2 * n, k}, cpu()), dtype);
    Tensor w = w_all.to(dev()).slice(0, n, 2 * n);  // rows n..2n-1: a view at a block boundary
    std::vector<float> wd = dequantize(w).to_vector<float>();
    F x = ref::values(2 * 3 * k, 6, -1, 1);
    ref::D want, bound;
    product_and_bound(x, wd, 6, n, k, 32, want, bound);
    Tensor y = matmul_q(from_vector(x, {2, 3, k}, dev()), w);
    REQUIRE(y.shape() == Shape{2, 3, n});
    std::vector<float> got = y.to_vector<float>();
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(std::fabs(got[i] - want[i]) <= bound[i]);
    for (const ref::Half &half : ref::halves) {
        auto [xh_cpu, xv] = ref::half_input(x, {2, 3, k}, half.dtype);
        const Tensor xh = xh_cpu.to(dev());
        F xf(xv.begin(), xv.end());
        product_and_bound(xf, wd, 6, n, k, 32, want, bound);
        Tensor yh = matmul_q(xh, w);
        CHECK(yh.dtype() == half.dtype);
        Tensor y32 = matmul_q(xh, w, DType::f32);
        CHECK(y32.dtype() == DType::f32);
        std::vector<float> g32 = y32.to_vector<float>(), gh = yh.to_vector<float>();
        for (std::size_t i = 0; i < g32.size(); ++i) {
            CHECK(std::fabs(g32[i] - want[i]) <= bound[i]);
            CHECK(std::fabs(gh[i] - want[i]) <= bound[i] + std::fabs(want[i]) * half.tol);
        }
        CHECK_THROWS_AS(matmul_q(xh, w, half.dtype == DType::f16 ? DType::bf16 : DType::f16), DTypeError);
    }
    CHECK_THROWS_AS(matmul_q(from_vector(x, {6, k}, dev()), from_vector(wv, {2 * n, k}, dev())), DTypeError);
    CHECK_THROWS_AS(matmul_q(from_vector(F(6 * 64), {6, 64}, dev()), w), ShapeError);
    // x a strided view (every other column of a wider matrix), and a row of x with a stride.
    F wide = ref::values(6 * 2 * k, 8, -1, 1);
    Tensor xs = from_vector(wide, {6, 2 * k}, dev()).slice(1, 0, 2 * k, 2);
    F xs_values(static_cast<std::size_t>(6 * k));
    for (int64_t r = 0; r < 6; ++r)
        for (int64_t c = 0; c < k; ++c) xs_values[r * k + c] = wide[r * 2 * k + 2 * c];
    product_and_bound(xs_values, wd, 6, n, k, 32, want, bound);
    std::vector<float> gs = matmul_q(xs, w).to_vector<float>();
    for (std::size_t i = 0; i < gs.size(); ++i) CHECK(std::fabs(gs[i] - want[i]) <= bound[i]);
    // 80 rows of x (cuda: dequantized tiles of the weight view and cuBLAS): batch axes, then the
    // first k columns of a wider matrix (rows 2k apart), then in bf16 with a bf16 result.
    F xl = ref::values(80 * 2 * k, 9, -1, 1);
    F xl_first(static_cast<std::size_t>(80 * k));
    for (int64_t r = 0; r < 80; ++r)
        for (int64_t c = 0; c < k; ++c) xl_first[r * k + c] = xl[r * 2 * k + c];
    product_and_bound(xl_first, wd, 80, n, k, 32, want, bound);
    const Tensor x_rows = from_vector(xl, {80, 2 * k}, dev()).slice(1, 0, k);
    const Tensor x_batch = from_vector(xl_first, {2, 40, k}, dev());
    for (const Tensor &xr : {x_rows, x_batch}) {
        std::vector<float> gl = matmul_q(xr, w).to_vector<float>();
        REQUIRE(gl.size() == want.size());
        for (std::size_t i = 0; i < gl.size(); ++i) CHECK(std::fabs(gl[i] - want[i]) <= bound[i]);
    }
    auto [xl_bf16, xl_values] = ref::half_input(xl_first, {80, k}, DType::bf16);
    F xlb(xl_values.begin(), xl_values.end());
    product_and_bound(xlb, wd, 80, n, k, 32, want, bound);
    std::vector<float> gb = matmul_q(xl_bf16.to(dev()), w).to_vector<float>();
    for (std::size_t i = 0; i < gb.size(); ++i)
        CHECK(std::fabs(gb[i] - want[i]) <= bound[i] + std::fabs(want[i]) * 0x1p-8);
}

// ---- layouts and refusals -------------------------------------------------------------------

TEST_CASE("quantized tensors: whole-block views only; every other op refuses them") {
    Tensor q = quantize(from_vector(ref::values(4 * 64, 3), {4, 64}, cpu()), DType::q8_0);
    CHECK(q.slice(0, 1, 3).nbytes() == 2 * 2 * 34);
    CHECK(q.slice(1, 32, 64).shape() == Shape{4, 32});  // whole blocks of each row
    CHECK(q.reshape({2, 2, 64}).shape() == Shape{2, 2, 64});
    CHECK_THROWS_AS(q.slice(1, 0, 16), ShapeError);  // part of a block
    CHECK_THROWS_AS(q.slice(1, 0, 64, 2), ShapeError);  // a stride inside blocks
    CHECK_THROWS_AS(q.transpose(0, 1), ShapeError);
    CHECK(q.reshape({8, 32}).shape() == Shape{8, 32});  // one block per row: still whole blocks
    CHECK_THROWS_AS(q.reshape({16, 16}), ShapeError);  // rows inside blocks
    CHECK_THROWS_AS(cast(q, DType::f32), DTypeError);
    CHECK_THROWS_AS(add(q, q), DTypeError);
    CHECK_THROWS_AS(matmul(q, zeros({64, 2}, DType::f32, cpu())), DTypeError);
    CHECK_THROWS_AS(zeros({2, 32}, DType::q4_0, cpu()), DTypeError);
    CHECK_THROWS_AS(quantize(from_vector(F(48), {48}, cpu()), DType::q8_0), ShapeError);
    CHECK_THROWS_AS(quantize(from_vector(F(32), {32}, cpu()), DType::f16), DTypeError);
    CHECK_THROWS_AS(dequantize(from_vector(F(32), {32}, cpu())), DTypeError);
    CHECK_THROWS_AS(dequantize(q, DType::i32), DTypeError);
    CHECK_THROWS_AS(q.to_vector<float>(), DTypeError);
}

TEST_CASE("from_blob over GGUF-layout bytes: zero-copy, released once") {
    Built b = blocks_of(DType::q4_k, 4, 23);
    int released = 0;
    {
        Tensor t = from_blob(b.bytes.data(), {2, 512}, {512, 1}, DType::q4_k, [&] { ++released; });
        CHECK(t.host_data() == b.bytes.data());
        CHECK(dequantize(t).to_vector<float>() == b.values);
        CHECK_THROWS_AS(from_blob(b.bytes.data(), {2, 512}, {1, 2}, DType::q4_k, [] {}), ShapeError);
    }
    CHECK(released == 1);
}

// ---- other backends: the GPU plugins run three of the ops, the others leave them to cpu -------

TEST_CASE("vulkan, opengl, opencl and cuda run dequantize, embedding_q, matmul_q; blas runs cpu's rows; others leave "
          "them to cpu") {
    const Report r = report();
    F wv = ref::values(40 * 256, 9, -1, 1), x = ref::values(3 * 256, 10, -1, 1);
    const Tensor xc = from_vector(x, {3, 256}, cpu());
    const Tensor idx = from_vector<int32_t>({7, 0, 39}, {3}, cpu());
    // quantize runs on cpu only: with TINYFIN_FALLBACK=error (ops-quant-<gpu>) it is not sent.
    const bool fallback_allowed = std::getenv("TINYFIN_QUANT_DEVICE") == nullptr;
    for (const PluginReport &p : r.plugins) {
        if (!p.initialised || p.name == "cpu") continue;
        if (!fallback_allowed && p.name != dev().backend) continue;
        INFO("backend " << p.name);
        const bool gpu = p.name == "vulkan" || p.name == "opengl" || p.name == "opencl" || p.name == "cuda";
        auto claims = [&](const char *op) {
            return std::find(p.supported_ops.begin(), p.supported_ops.end(), op) != p.supported_ops.end();
        };
        // blas runs cpu's rows for everything but its OpenBLAS GEMM/conv: all four, like cpu.
        const bool host = p.name == "blas";
        CHECK(claims("quantize") == host);
        for (const char *op : {"dequantize", "matmul_q", "embedding_q"}) CHECK(claims(op) == (gpu || host));
        const Device d = Device::parse(p.name);
        const Tensor xd = xc.to(d), idxd = idx.to(d);
        // Every type on the backend under test (ops-quant-<gpu>); two per backend in ops-quant,
        // which visits them all (each type is a kernel to compile on a software device).
        const std::vector<DType> types = fallback_allowed
                                             ? std::vector<DType>{DType::q8_0, DType::q4_k}
                                             : std::vector<DType>(std::begin(quantized), std::end(quantized));
        for (DType dtype : types) {
            INFO(dtype_name(dtype));
            const Tensor w = quantize(from_vector(wv, {40, 256}, cpu()), dtype);
            const std::vector<float> wd = dequantize(w).to_vector<float>();
            const Tensor w_dev = w.to(d);
            CHECK(bytes_of(w_dev) == bytes_of(w));
            const std::vector<float> got_d = dequantize(w_dev).to_vector<float>();
            REQUIRE(got_d.size() == wd.size());
            CHECK(std::memcmp(got_d.data(), wd.data(), wd.size() * sizeof(float)) == 0);
            CHECK(embedding_q(w_dev, idxd).to_vector<float>() == embedding_q(w, idx).to_vector<float>());
            // matmul_q: within the float64 product's bound of f32 accumulation (the GPU kernels),
            // or the cpu kernel's bits (the fallback).
            const std::vector<float> got_y = matmul_q(xd, w_dev).to_vector<float>();
            if (gpu) {
                for (int64_t row = 0; row < 3; ++row)
                    for (int64_t c = 0; c < 40; ++c) {
                        double sum = 0, mag = 0;
                        for (int64_t i = 0; i < 256; ++i) {
                            const double t = double(x[row * 256 + i]) * wd[c * 256 + i];
                            sum += t;
                            mag += std::fabs(t);
                        }
                        CHECK(std::fabs(got_y[row * 40 + c] - sum) <= mag * 256 * 0x1p-24 * 1.01);
                    }
            } else {
                CHECK(got_y == matmul_q(xc, w).to_vector<float>());
            }
        }
        if (fallback_allowed) CHECK(bytes_of(quantize(xd, DType::q8_0)) == bytes_of(quantize(xc, DType::q8_0)));
    }
}

TEST_CASE("the cpu plugin runs at the instruction set TINYFIN_CPU_ISA asks for") {
    // ops-quant-generic sets generic: the portable dots ran above; ops-quant runs the best level.
    const char *isa = std::getenv("TINYFIN_CPU_ISA");
    std::string kernels;
    for (const PluginReport &p : report().plugins)
        if (p.name == "cpu")
            for (const auto &[key, value] : p.features)
                if (key == "kernels") kernels = value;
    MESSAGE("cpu kernels: " << kernels);
    if (isa && std::string(isa) == "generic") CHECK(kernels == "generic");
}
