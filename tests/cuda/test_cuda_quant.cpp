// The cuda plugin's block decoders (plugins/cuda/quant_decode.hpp, the code quant.cu's dequantize,
// embedding_q and matmul_q kernels run) on the host, without a GPU: every chunk of 32 elements of
// random blocks of each of the nine formats, bit for bit against the cpu plugin's reference codec
// (through tinyfin's dequantize on cpu; tests/ops/test_quant.cpp checks that codec against blocks
// packed by hand from each format's definition). Random bytes set every bit of every field: the
// k-quants' packed 6-bit scales with their high bits, q5's high-bit words, q6_k's signed scales.
// The f16 and f32 scales are drawn finite (any sign, zero included), so the values are too.
// The GPU runs of the same kernels are ops-quant-cuda (tests/ops) in scripts/gpu-check.
#include <doctest/doctest.h>

#include <tinyfin/tinyfin.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "quant_decode.hpp"

#include "../splitmix64.hpp"

using namespace tinyfin;
namespace q = tf_cuda::quant;

namespace {

using test_support::next;

// A finite f16 of either sign between 2^-10 and 2^6 (or zero, one draw in 16), as bits.
uint16_t random_f16(uint64_t &state) {
    const uint64_t r = next(state);
    if ((r & 15) == 0) return static_cast<uint16_t>((r >> 4 & 1) << 15);
    const auto exponent = static_cast<uint16_t>(5 + (r >> 8) % 17);  // biased 5..21
    return static_cast<uint16_t>((r >> 4 & 1) << 15 | exponent << 10 | (r >> 16 & 0x3ff));
}

// Byte offsets of the f16 scale fields of one block (dtypes.def's layouts).
std::vector<int> f16_fields(DType dtype) {
    switch (dtype) {
    case DType::q8_0:
    case DType::q4_0:
    case DType::q5_0: return {0};
    case DType::q4_1:
    case DType::q5_1:
    case DType::q4_k:
    case DType::q5_k: return {0, 2};
    case DType::q6_k: return {208};
    default: return {};
    }
}

// rows x blocks_per_row random blocks of dtype, in 16-bit words (as the device reads them).
std::vector<uint16_t> random_blocks(DType dtype, int64_t rows, int64_t blocks_per_row, uint64_t seed) {
    const auto bytes = static_cast<int64_t>(dtype_block_bytes(dtype));
    std::vector<uint16_t> words(static_cast<size_t>(rows * blocks_per_row * bytes / 2));
    for (uint16_t &w : words) w = static_cast<uint16_t>(next(seed));
    auto *raw = reinterpret_cast<uint8_t *>(words.data());
    for (int64_t b = 0; b < rows * blocks_per_row; ++b) {
        uint8_t *block = raw + b * bytes;
        for (int at : f16_fields(dtype)) {
            const uint16_t h = random_f16(seed);
            std::memcpy(block + at, &h, 2);
        }
        if (dtype == DType::q8_k) {  // f32 d: finite, any sign, sometimes zero
            const uint64_t r = next(seed);
            const float d = (r & 15) == 0 ? 0.f
                                          : std::ldexp(static_cast<float>(r >> 40) / 16777216.f, -12 + int(r % 8)) *
                                                ((r >> 4 & 1) ? -1.f : 1.f);
            std::memcpy(block, &d, 4);
        }
    }
    return words;
}

template <int32_t QT>
std::vector<float> decode_on_host(const std::vector<uint16_t> &words, int64_t rows, int64_t k) {
    std::vector<float> out(static_cast<size_t>(rows * k));
    const q::Blocks blocks{words.data()};
    const int64_t row_bytes = k / q::block_length(QT) * q::block_bytes(QT);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < k / q::chunk; ++c) {
            float v[q::chunk];
            q::decode32<QT>(blocks, r * row_bytes, c, v);
            std::memcpy(out.data() + r * k + c * q::chunk, v, sizeof v);
        }
    return out;
}

bool same_bits(float a, float b) {
    uint32_t x, y;
    std::memcpy(&x, &a, 4);
    std::memcpy(&y, &b, 4);
    return x == y;
}

}  // namespace

TEST_CASE("quant_decode.hpp's block table is dtypes.def's") {
    for (int32_t id = TF_DTYPE_Q8_0; id <= TF_DTYPE_Q8_K; ++id) {
        const auto dtype = static_cast<DType>(id);
        INFO(dtype_name(dtype));
        CHECK(q::block_length(id) == dtype_block_length(dtype));
        CHECK(q::block_bytes(id) == static_cast<int64_t>(dtype_block_bytes(dtype)));
        CHECK(q::block_bytes(id) % 2 == 0);  // the 16-bit reads
        CHECK(q::with_quantized(id, [](auto) {}));
    }
    CHECK(!q::with_quantized(TF_DTYPE_F32, [](auto) {}));
    CHECK(q::block_length(TF_DTYPE_F16) == 0);
}

TEST_CASE("decode32 on the host: every chunk of random blocks bit for bit as the cpu reference codec") {
    const Device cpu = Device::parse("cpu");
    for (int32_t id = TF_DTYPE_Q8_0; id <= TF_DTYPE_Q8_K; ++id) {
        const auto dtype = static_cast<DType>(id);
        INFO(dtype_name(dtype));
        const int64_t rows = 3, per_row = id >= TF_DTYPE_Q4_K ? 3 : 24;
        const int64_t k = per_row * dtype_block_length(dtype);
        int mismatches = 0;
        for (uint64_t seed = 1; seed <= 8; ++seed) {
            const std::vector<uint16_t> words = random_blocks(dtype, rows, per_row, seed * 1000 + id);
            const Tensor t = from_host(words.data(), {rows, k}, dtype, cpu);
            REQUIRE(t.nbytes() == words.size() * 2);
            const std::vector<float> want = dequantize(t).to_vector<float>();
            std::vector<float> got;
            q::with_quantized(id, [&](auto qt) { got = decode_on_host<decltype(qt)::value>(words, rows, k); });
            REQUIRE(got.size() == want.size());
            for (size_t i = 0; i < got.size() && mismatches < 4; ++i)
                if (!same_bits(got[i], want[i])) {
                    ++mismatches;
                    INFO("seed " << seed << " element " << i << " (row " << i / k << ", chunk " << i % k / 32
                                 << "): decode32 " << got[i] << ", cpu " << want[i]);
                    CHECK(same_bits(got[i], want[i]));
                }
            // The f16 and bf16 outputs round those values once: as the cpu's dequantize to them.
            const std::vector<float> want_f16 = cast(dequantize(t, DType::f16), DType::f32).to_vector<float>();
            const std::vector<float> want_bf16 = cast(dequantize(t, DType::bf16), DType::f32).to_vector<float>();
            for (size_t i = 0; i < got.size() && mismatches < 4; ++i) {
                const float h = __half2float(__float2half_rn(got[i]));
                const float b = __bfloat162float(__float2bfloat16_rn(got[i]));
                if (!same_bits(h, want_f16[i]) || !same_bits(b, want_bf16[i])) {
                    ++mismatches;
                    INFO("seed " << seed << " element " << i << ": f16 " << h << " vs " << want_f16[i] << ", bf16 " << b
                                 << " vs " << want_bf16[i]);
                    CHECK(false);
                }
            }
        }
        CHECK(mismatches == 0);
    }
}

TEST_CASE("decode32 reads a row from its own byte offset (the row strides of views)") {
    // The second half of a q4_k table's rows read from their byte offset give the second half
    // of the decoded values: row_bytes arithmetic for the kernels' per-row offsets.
    const Device cpu = Device::parse("cpu");
    const std::vector<uint16_t> words = random_blocks(DType::q4_k, 4, 2, 77);
    const Tensor t = from_host(words.data(), {4, 512}, DType::q4_k, cpu);
    const std::vector<float> want = dequantize(t.slice(0, 2, 4)).to_vector<float>();
    const q::Blocks blocks{words.data()};
    for (int64_t r = 0; r < 2; ++r)
        for (int64_t c = 0; c < 16; ++c) {
            float v[q::chunk];
            q::decode32<TF_DTYPE_Q4_K>(blocks, (r + 2) * 2 * 144, c, v);
            for (int i = 0; i < q::chunk; ++i)
                REQUIRE(same_bits(v[i], want[static_cast<size_t>(r * 512 + c * 32 + i)]));
        }
}
