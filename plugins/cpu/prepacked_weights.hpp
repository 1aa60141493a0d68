// Weights the caller has promised not to change, kept a second time in a layout built for the
// cpu kernels (today: q4_0, q8_0, q4_k and q6_k rows repacked eight at a time, quant_repack.hpp), keyed by the
// buffer and the descriptor they were prepared from: get_proc("weight_prepack") (plugin.h) builds
// one, matmul_q finds it, buffer_free forgets the buffer's. TINYFIN_CPU_PREPACK=0 turns it off
// (weight_prepack then prepares nothing). Private to each plugin that links cpu's kernels.
#pragma once

#include "quant_repack.hpp"

#include <memory>

namespace tf_cpu {

// A weight's repacked copy: what it was built from and where it lives (host memory, 2 MiB
// aligned, freed with the record).
struct Prepacked {
    const tf_buffer *buffer;
    const void *data;  // the buffer's host address when prepared
    uint64_t offset;
    int64_t row_stride;  // elements between rows (k for one row)
    quant::RepackedShape shape;
    char *bytes;
    uint64_t capacity;  // bytes allocated

    Prepacked(const Prepacked &) = delete;
    Prepacked &operator=(const Prepacked &) = delete;
    Prepacked(const tf_buffer *b, const void *d, uint64_t off, int64_t stride, quant::RepackedShape s);
    ~Prepacked();
};

// get_proc("weight_prepack") (plugin.h's tf_weight_prepack_fn).
tf_status weight_prepack(int32_t device, const tf_tensor_desc *weight, uint64_t *bytes, tf_error *err);

// The repacked copy of exactly this weight descriptor (same buffer, host address, offset, dtype,
// shape and row stride), or null.
std::shared_ptr<const Prepacked> find_prepacked(const tf_tensor_desc &weight);

// Drops the copies prepared from buffer (buffer_free calls it before freeing; buffer_write,
// buffer_copy and run for a written buffer, so a broken promise costs speed, not results).
void forget_prepacked(const tf_buffer *buffer) noexcept;
// Drops every copy (shutdown).
void forget_all_prepacked() noexcept;

}  // namespace tf_cpu
