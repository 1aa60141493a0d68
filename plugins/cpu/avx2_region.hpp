// A region of a source file compiled for AVX2 + FMA, functions and lambdas alike, with GCC and
// clang (GCC's target pragma is GCC's only; clang applies the attribute to each function):
//
//     TF_CPU_AVX2_BEGIN
//     ... functions called only when isa_level() says the CPU has AVX2 and FMA ...
//     TF_CPU_AVX2_END
#pragma once

#if defined(__clang__)
#define TF_CPU_AVX2_BEGIN _Pragma("clang attribute push(__attribute__((target(\"avx2,fma\"))), apply_to = function)")
#define TF_CPU_AVX2_END _Pragma("clang attribute pop")
#else
#define TF_CPU_AVX2_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma\")")
#define TF_CPU_AVX2_END _Pragma("GCC pop_options")
#endif
