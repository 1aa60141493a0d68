// Constant weights packed once for the GEMM: the cpu plugin's answer to get_proc
// ("buffer_mark_constant") (plugin.h). A buffer the core marks constant changes only through this
// plugin's buffer_write, buffer_copy and op outputs, which drop what was prepared from it; so
// matmul may keep its B packed (kernels_gemm.hpp, gemm_f32_prepack_b) between calls instead of
// packing it on every call, and conv2d's tiled forward its w^T (kernels_conv.cpp). Private to the plugin; thread-safe.
#pragma once

#include <tinyfin/plugin.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace tf_cpu {

// get_proc("buffer_mark_constant") (tf_buffer_mark_constant_fn).
void mark_buffer_constant(tf_buffer *buffer);

// The buffer's bytes changed (or it is freed): forget what was prepared from it. Cheap when no
// buffer is marked.
void buffer_written(tf_buffer *buffer);
void buffer_freed(tf_buffer *buffer);

// The k x n f32 B of a matmul that starts at `start` in b's buffer (row/column strides in elements)
// packed by gemm_f32_prepack_b, packed now on the first call; null when the buffer is not
// marked constant. The caller holds the returned pointer while it reads it (a write to the buffer
// meanwhile only drops the cache's reference).
std::shared_ptr<const std::vector<float>> packed_constant_b(const tf_tensor_desc &b, const float *start, int64_t k,
                                                            int64_t n, int64_t row_stride, int64_t col_stride);

// Another prepared form of a constant weight that starts at `start` in b's buffer (k, n: its
// sizes; form: a number of the caller's, not 0): prepare() now on the first call, kept like a
// packed B; null when the buffer is not marked constant.
std::shared_ptr<const std::vector<float>> prepared_constant(const tf_tensor_desc &b, const float *start, int form,
                                                            int64_t k, int64_t n,
                                                            const std::function<std::vector<float>()> &prepare);

// Forgets every mark and packed copy (plugin shutdown).
void packed_weights_clear();

// Bytes held by packed copies now.
uint64_t packed_weight_bytes();

}  // namespace tf_cpu
