// The prepacked-weight cache (prepacked_weights.hpp): a list of records under a reader-writer
// lock (a model has a few hundred weights; matmul_q looks one up per call).
#include "prepacked_weights.hpp"

#include "runtime.hpp"

#include <tinyfin/env.h>
#include <tinyfin/plugin_kit.hpp>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>
#include <shared_mutex>
#include <vector>

#include <sys/mman.h>

namespace tf_cpu {

namespace quant {
bool avx2_usable(int isa);  // quant_dot.cpp
}

namespace {

std::shared_mutex g_mutex;
// Heap-allocated on first use: the plugin has no static constructors or destructors.
std::vector<std::shared_ptr<const Prepacked>> *g_records = nullptr;
// How many records there are: buffer_free, called for every tensor, skips the lock while none.
std::atomic<size_t> g_count{0};

// TINYFIN_CPU_PREPACK: "0" turns preparing off, "1" or unset leaves it on.
bool prepack_enabled() {
    static const bool on = tf_kit::env_flag("TINYFIN_CPU_PREPACK", true, "weights prepacked");
    return on;
}

bool same_weight(const Prepacked &p, const tf_tensor_desc &w) {
    const int64_t stride = w.shape[0] > 1 ? w.strides[0] : w.shape[1];
    return p.buffer == w.buffer && p.data == w.data && p.offset == w.offset && p.shape.dtype == w.dtype &&
           p.shape.rows == w.shape[0] && p.shape.blocks * p.shape.block_length() == w.shape[1] &&
           p.row_stride == stride;
}

}  // namespace

// Not the kit's caching allocator: its size classes and 2 MiB rounding, all advised as huge pages,
// would make a few MiB more resident per matrix (a fifth more for TinyLlama's). Here the whole
// 2 MiB pages are advised and the tail keeps 4 KiB pages, so the copy costs its own size.
Prepacked::Prepacked(const tf_buffer *b, const void *d, uint64_t off, int64_t stride, quant::RepackedShape s)
    : buffer(b), data(d), offset(off), row_stride(stride), shape(s), bytes(nullptr), capacity(0) {
    constexpr uint64_t huge = uint64_t{2} << 20;
    const uint64_t size = shape.total_bytes();
    capacity = (size + huge - 1) / huge * huge;
    bytes = static_cast<char *>(std::aligned_alloc(huge, capacity));
    if (!bytes) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
    if (size >= huge) ::madvise(bytes, size / huge * huge, MADV_HUGEPAGE);
#endif
}

Prepacked::~Prepacked() { std::free(bytes); }

tf_status weight_prepack(int32_t device, const tf_tensor_desc *w, uint64_t *bytes, tf_error *err) {
    return tf_kit::guarded(err, "weight_prepack", [&]() -> tf_status {
        if (device != 0) return tf_kit::fail(err, TF_STATUS_INVALID_ARGUMENT, "weight_prepack: no device %d", device);
        if (!w || !bytes) return tf_kit::fail(err, TF_STATUS_INVALID_ARGUMENT, "weight_prepack: NULL argument");
        *bytes = 0;
        // Only what matmul_q's repacked path reads: a rank-2 q4_0/q8_0/q4_k/q6_k weight with dense rows, on
        // AVX2; anything else is left as it is (not an error: the hint is optional).
        if (!prepack_enabled() || !quant::avx2_usable(isa_level()) || !quant::avx2_group_dot(w->dtype))
            return TF_STATUS_OK;
        const int64_t block = tf_kit::dtype_block_length(w->dtype);
        if (w->rank != 2 || !w->data || !w->buffer || w->shape[0] < 1 || w->shape[1] < block ||
            w->shape[1] % block != 0 || w->strides[1] != 1)
            return TF_STATUS_OK;
        const quant::RepackedShape shape{w->dtype, w->shape[0], w->shape[1] / block};
        if (find_prepacked(*w)) {
            *bytes = shape.total_bytes();
            return TF_STATUS_OK;
        }
        const int64_t stride = w->shape[0] > 1 ? w->strides[0] : w->shape[1];
        auto record = std::make_shared<Prepacked>(w->buffer, w->data, w->offset, stride, shape);
        const char *src = static_cast<const char *>(w->data) + w->offset;
        const auto src_row_bytes = static_cast<int64_t>(static_cast<size_t>(stride / block) * shape.block_bytes());
        quant::repack_rows(shape, src, src_row_bytes, record->bytes);
        std::unique_lock lock(g_mutex);
        if (!g_records) g_records = new std::vector<std::shared_ptr<const Prepacked>>;
        g_records->push_back(std::move(record));
        g_count.store(g_records->size(), std::memory_order_release);
        *bytes = shape.total_bytes();
        return TF_STATUS_OK;
    });
}

std::shared_ptr<const Prepacked> find_prepacked(const tf_tensor_desc &w) {
    if (w.rank != 2 || !quant::repackable(w.dtype) || g_count.load(std::memory_order_acquire) == 0) return nullptr;
    std::shared_lock lock(g_mutex);
    if (!g_records) return nullptr;
    for (const auto &p : *g_records)
        if (same_weight(*p, w)) return p;
    return nullptr;
}

void forget_prepacked(const tf_buffer *buffer) noexcept {
    if (g_count.load(std::memory_order_acquire) == 0) return;
    std::unique_lock lock(g_mutex);
    if (!g_records) return;
    std::erase_if(*g_records, [buffer](const auto &p) { return p->buffer == buffer; });
    g_count.store(g_records->size(), std::memory_order_release);
}

void forget_all_prepacked() noexcept {
    std::unique_lock lock(g_mutex);
    delete g_records;
    g_records = nullptr;
    g_count.store(0, std::memory_order_release);
}

}  // namespace tf_cpu
