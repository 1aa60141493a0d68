// The plugin kit's dtype switch: runs a generic lambda with a value of the storage type of a
// tensor's dtype, so a kernel is written once as a template and instantiated per dtype. The 16-bit
// float and bool storage types are the plugin's own (cpu: bit containers; cuda: __half and
// __nv_bfloat16), so the switch is a template over them. Host code only; nvcc compiles it too.
// See docs/plugin-kit.md.
#pragma once

#include <tinyfin/plugin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

// Functions both host and CUDA device code call (nvcc compiles this header into the cuda plugin's
// kernels).
#ifdef __CUDACC__
#define TF_KIT_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define TF_KIT_HOST_DEVICE inline
#endif

// As errors.hpp defines it (the same tokens): every kit symbol is hidden.
#define TF_KIT_HIDDEN __attribute__((visibility("hidden")))

namespace tf_kit TF_KIT_HIDDEN {

// The unsigned integer of a Size-byte element: raw copies (contiguous, where, fill) move bits.
template <int64_t Size>
using UnsignedOf =
    std::conditional_t<Size == 1, uint8_t,
                       std::conditional_t<Size == 2, uint16_t, std::conditional_t<Size == 4, uint32_t, uint64_t>>>;

// Each member calls fn(T{}) with T the storage type of dtype and returns true; false (fn not
// called) for a dtype outside its set. F16, BF16 and Bool are the plugin's storage types of
// f16, bf16 and bool; f32, i32 and i64 are float, int32_t and int64_t.
template <class F16, class BF16, class Bool>
struct DtypeSwitch {
    // f32, f16, bf16.
    template <class Fn>
    static bool with_float(int32_t dtype, Fn &&fn) {
        switch (dtype) {
        case TF_DTYPE_F32: fn(float{}); return true;
        case TF_DTYPE_F16: fn(F16{}); return true;
        case TF_DTYPE_BF16: fn(BF16{}); return true;
        default: return false;
        }
    }
    // i32, i64.
    template <class Fn>
    static bool with_index(int32_t dtype, Fn &&fn) {
        switch (dtype) {
        case TF_DTYPE_I32: fn(int32_t{}); return true;
        case TF_DTYPE_I64: fn(int64_t{}); return true;
        default: return false;
        }
    }
    // The floats and the integers.
    template <class Fn>
    static bool with_numeric(int32_t dtype, Fn &&fn) {
        return with_index(dtype, fn) || with_float(dtype, fn);
    }
    // Every dtype: the numeric ones and bool.
    template <class Fn>
    static bool with_any(int32_t dtype, Fn &&fn) {
        if (dtype != TF_DTYPE_BOOL) return with_numeric(dtype, fn);
        fn(Bool{});
        return true;
    }
    // fn(U{}) with U the UnsignedOf dtype's element size, for code that moves bits only.
    template <class Fn>
    static bool with_bits(int32_t dtype, Fn &&fn) {
        switch (dtype) {
        case TF_DTYPE_BOOL: fn(UnsignedOf<1>{}); return true;
        case TF_DTYPE_F16:
        case TF_DTYPE_BF16: fn(UnsignedOf<2>{}); return true;
        case TF_DTYPE_F32:
        case TF_DTYPE_I32: fn(UnsignedOf<4>{}); return true;
        case TF_DTYPE_I64: fn(UnsignedOf<8>{}); return true;
        default: return false;
        }
    }
};

// The sign bit of a float or double (-0 and negative NaNs too), from its bits.
template <class F>
TF_KIT_HOST_DEVICE bool sign_bit(F x) {
    static_assert(sizeof(F) == 4 || sizeof(F) == 8, "float or double");
    UnsignedOf<sizeof(F)> bits;
    std::memcpy(&bits, &x, sizeof bits);
    return bits >> (8 * sizeof(F) - 1);
}

// IEEE 754-2019 maximum (Max) or minimum of a plugin's compute values: a NaN operand wins (a's
// when both are NaN) and -0 < +0, so apart from which NaN comes out the result does not depend on
// the operands' order (block reductions rely on that). The maximum/minimum ops and the max/min
// reductions (a fold of these) share them.
template <bool Max, class C>
TF_KIT_HOST_DEVICE C extremum_of(C a, C b) {
    if constexpr (std::is_floating_point<C>::value) {
        if (a != a) return a;
        if (b != b) return b;
        if (a == b) return sign_bit(a) == Max ? b : a;
    }
    return (Max ? a < b : b < a) ? b : a;
}
template <class C>
TF_KIT_HOST_DEVICE C maximum_of(C a, C b) {
    return extremum_of<true>(a, b);
}
template <class C>
TF_KIT_HOST_DEVICE C minimum_of(C a, C b) {
    return extremum_of<false>(a, b);
}

}  // namespace TF_KIT_HIDDEN
