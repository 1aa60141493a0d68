/*
 * fakegpu: a stand-in for a GPU plugin, for the core's placement and fallback
 * tests. One discrete "GPU" whose buffers are plugin-owned malloc'd memory that
 * the core may not address (no buffer_host_ptr), so every byte between host
 * and device goes through buffer_write/buffer_read and is counted in stats().
 * It runs exactly one op, add on f32 tensors of any strides, and counts the
 * adds it ran and how often init ran; tests read the counts through get_proc
 * ("fakegpu_add_count", "fakegpu_init_count").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tinyfin/plugin.h"

/* ---- Context ----------------------------------------------------------------- */

struct tf_buffer {
    uint64_t size;
    unsigned char *bytes;
};

static const tf_host_api *fakegpu_host;
static uint64_t fakegpu_adds;
static uint64_t fakegpu_inits;

static void fakegpu_set_error(tf_error *err, const char *message) {
    if (err && err->struct_size >= sizeof(tf_error))
        snprintf(err->message, sizeof err->message, "fakegpu: %s", message);
}

/* ---- Kernels ------------------------------------------------------------------- */

static int fakegpu_is_f32_tensor(const tf_tensor_desc *t) {
    return t->struct_size >= sizeof(tf_tensor_desc) && t->dtype == TF_DTYPE_F32 && t->rank >= 0 &&
           t->rank <= TF_MAX_RANK;
}

/* Non-zero when every element the descriptor can address lies inside its buffer. */
static int fakegpu_in_bounds(const tf_tensor_desc *t) {
    uint64_t last = 0;
    int32_t i;
    if (!t->buffer) return 0;
    for (i = 0; i < t->rank; ++i) {
        if (t->shape[i] < 0 || t->strides[i] < 0) return 0;
        if (t->shape[i] == 0) return 1; /* no elements */
        last += (uint64_t)(t->shape[i] - 1) * (uint64_t)t->strides[i];
    }
    return t->offset <= t->buffer->size && (last + 1) * sizeof(float) <= t->buffer->size - t->offset;
}

static float *fakegpu_element(const tf_tensor_desc *t, const int64_t *index, int32_t rank) {
    uint64_t element = 0;
    int32_t i;
    for (i = 0; i < rank; ++i) element += (uint64_t)index[i] * (uint64_t)t->strides[i];
    return (float *)(void *)(t->buffer->bytes + t->offset + element * sizeof(float));
}

/* out = a + b over out's shape; a and b arrive broadcast to it (stride 0). */
static void fakegpu_add_f32(const tf_tensor_desc *a, const tf_tensor_desc *b, const tf_tensor_desc *out) {
    int64_t index[TF_MAX_RANK] = {0};
    int32_t rank = out->rank;
    int32_t axis;
    for (axis = 0; axis < rank; ++axis)
        if (out->shape[axis] == 0) return;
    for (;;) {
        float value;
        value = *fakegpu_element(a, index, rank) + *fakegpu_element(b, index, rank);
        *fakegpu_element(out, index, rank) = value;
        for (axis = rank - 1; axis >= 0; --axis) {
            if (++index[axis] < out->shape[axis]) break;
            index[axis] = 0;
        }
        if (axis < 0) return;
    }
}

/* ---- Backend functions ------------------------------------------------------------ */

static tf_status fakegpu_probe(tf_error *err) {
    (void)err;
    return TF_STATUS_OK;
}

static tf_status fakegpu_init(tf_error *err) {
    (void)err;
    __atomic_fetch_add(&fakegpu_inits, 1, __ATOMIC_RELAXED);
    return TF_STATUS_OK;
}

static void fakegpu_shutdown(void) {}

static int32_t fakegpu_supports(int32_t device, const tf_op_desc *op) {
    int32_t i;
    if (device != 0 || !op || op->struct_size < sizeof(tf_op_desc)) return 0;
    switch (op->op) {
    case TF_OP_ADD:
        if (op->n_inputs != 2 || op->n_outputs != 1) return 0;
        for (i = 0; i < 2; ++i)
            if (!fakegpu_is_f32_tensor(&op->inputs[i]) || op->inputs[i].rank != op->outputs[0].rank) return 0;
        return fakegpu_is_f32_tensor(&op->outputs[0]);
    default: return 0;
    }
}

static tf_status fakegpu_run(int32_t device, const tf_op_desc *op, tf_error *err) {
    const tf_tensor_desc *a, *b, *out;
    int32_t axis;
    if (!fakegpu_supports(device, op)) {
        fakegpu_set_error(err, "run: descriptor not supported (only add on f32)");
        return TF_STATUS_UNSUPPORTED;
    }
    a = &op->inputs[0];
    b = &op->inputs[1];
    out = &op->outputs[0];
    for (axis = 0; axis < out->rank; ++axis) {
        if (a->shape[axis] != out->shape[axis] || b->shape[axis] != out->shape[axis]) {
            fakegpu_set_error(err, "add: input shapes differ from the output's");
            return TF_STATUS_INVALID_ARGUMENT;
        }
    }
    if (!fakegpu_in_bounds(a) || !fakegpu_in_bounds(b) || !fakegpu_in_bounds(out)) {
        fakegpu_set_error(err, "add: a tensor reaches past the end of its buffer");
        return TF_STATUS_INVALID_ARGUMENT;
    }
    fakegpu_add_f32(a, b, out);
    __atomic_fetch_add(&fakegpu_adds, 1, __ATOMIC_RELAXED);
    return TF_STATUS_OK;
}

static tf_status fakegpu_synchronize(int32_t device, tf_error *err) {
    (void)device;
    (void)err;
    return TF_STATUS_OK;
}

/* ---- Device functions --------------------------------------------------------------- */

/* FAKEGPU_SOFTWARE_DEVICE_1=1 adds a software-emulated device 1 behind the real device 0 (a GPU
 * machine where Mesa's lavapipe is listed too): TINYFIN_BACKEND=auto must still pick fakegpu. It
 * only shows in the device list; buffers and ops stay on device 0. */
static int fakegpu_has_software_device_1(void) {
    const char *value = getenv("FAKEGPU_SOFTWARE_DEVICE_1");
    return value && strcmp(value, "1") == 0;
}

static int32_t fakegpu_device_count(void) { return fakegpu_has_software_device_1() ? 2 : 1; }

static tf_status fakegpu_device_info(int32_t device, tf_device_info *info, tf_error *err) {
    if (device < 0 || device >= fakegpu_device_count() || !info || info->struct_size < sizeof(tf_device_info)) {
        fakegpu_set_error(err, "device_info: no such device or info struct too small");
        return TF_STATUS_INVALID_ARGUMENT;
    }
    if (device == 1) {
        info->kind = TF_DEVICE_KIND_GPU_SOFTWARE;
        info->memory_total = (uint64_t)1 << 30;
        info->memory_free = (uint64_t)1 << 30;
        info->host_addressable = 0;
        snprintf(info->name, sizeof info->name, "%s", "fake software gpu");
        snprintf(info->uuid, sizeof info->uuid, "%s", "fakegpu-0001");
        return TF_STATUS_OK;
    }
    info->kind = TF_DEVICE_KIND_GPU_DISCRETE;
    info->memory_total = (uint64_t)1 << 30;
    info->memory_free = (uint64_t)1 << 30;
    info->host_addressable = 0;
    snprintf(info->name, sizeof info->name, "%s", "fake gpu");
    snprintf(info->uuid, sizeof info->uuid, "%s", "fakegpu-0000");
    return TF_STATUS_OK;
}

static int fakegpu_range_ok(const tf_buffer *buffer, uint64_t offset, uint64_t size) {
    return buffer && offset <= buffer->size && size <= buffer->size - offset;
}

static tf_status fakegpu_buffer_alloc(int32_t device, uint64_t size, tf_buffer **out, tf_error *err) {
    tf_buffer *buffer;
    if (device != 0 || size == 0 || !out) {
        fakegpu_set_error(err, "buffer_alloc: bad device or zero size");
        return TF_STATUS_INVALID_ARGUMENT;
    }
    buffer = (tf_buffer *)malloc(sizeof *buffer);
    if (buffer) buffer->bytes = (unsigned char *)calloc(1, (size_t)size);
    if (!buffer || !buffer->bytes) {
        free(buffer);
        fakegpu_set_error(err, "buffer_alloc: out of memory");
        return TF_STATUS_OUT_OF_MEMORY;
    }
    buffer->size = size;
    *out = buffer;
    return TF_STATUS_OK;
}

static void fakegpu_buffer_free(tf_buffer *buffer) {
    if (!buffer) return;
    free(buffer->bytes);
    free(buffer);
}

static tf_status fakegpu_buffer_write(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size,
                                      tf_error *err) {
    if (!fakegpu_range_ok(buffer, offset, size) || (size && !src)) {
        fakegpu_set_error(err, "buffer_write: range outside the buffer");
        return TF_STATUS_INVALID_ARGUMENT;
    }
    if (size) memcpy(buffer->bytes + offset, src, (size_t)size);
    return TF_STATUS_OK;
}

static tf_status fakegpu_buffer_read(tf_buffer *buffer, uint64_t offset, void *dst, uint64_t size, tf_error *err) {
    if (!fakegpu_range_ok(buffer, offset, size) || (size && !dst)) {
        fakegpu_set_error(err, "buffer_read: range outside the buffer");
        return TF_STATUS_INVALID_ARGUMENT;
    }
    if (size) memcpy(dst, buffer->bytes + offset, (size_t)size);
    return TF_STATUS_OK;
}

static tf_status fakegpu_buffer_copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset,
                                     uint64_t size, tf_error *err) {
    if (!fakegpu_range_ok(dst, dst_offset, size) || !fakegpu_range_ok(src, src_offset, size)) {
        fakegpu_set_error(err, "buffer_copy: range outside a buffer");
        return TF_STATUS_INVALID_ARGUMENT;
    }
    if (size) memmove(dst->bytes + dst_offset, src->bytes + src_offset, (size_t)size);
    return TF_STATUS_OK;
}

/* ---- Registration --------------------------------------------------------------------- */

static void fakegpu_list_features(tf_feature_fn emit, void *user) {
    emit(user, "fakegpu.purpose", "test stand-in for a device-resident backend");
}

static uint64_t fakegpu_add_count(void) { return __atomic_load_n(&fakegpu_adds, __ATOMIC_RELAXED); }
static uint64_t fakegpu_init_count(void) { return __atomic_load_n(&fakegpu_inits, __ATOMIC_RELAXED); }

static void *fakegpu_get_proc(const char *name) {
    /* ISO C has no function-to-object pointer cast; a union carries the address. */
    union {
        uint64_t (*function)(void);
        void *object;
    } proc;
    if (!name) return NULL;
    if (strcmp(name, "fakegpu_add_count") == 0)
        proc.function = fakegpu_add_count;
    else if (strcmp(name, "fakegpu_init_count") == 0)
        proc.function = fakegpu_init_count;
    else
        return NULL;
    return proc.object;
}

static const tf_plugin fakegpu_plugin = {
    .struct_size = sizeof(tf_plugin),
    .abi_version = TF_ABI_VERSION,
    .name = "fakegpu",
    .version = "test",
    .priority = 50,
    .probe = fakegpu_probe,
    .init = fakegpu_init,
    .shutdown = fakegpu_shutdown,
    .device_count = fakegpu_device_count,
    .device_info = fakegpu_device_info,
    .buffer_alloc = fakegpu_buffer_alloc,
    .buffer_free = fakegpu_buffer_free,
    .buffer_host_ptr = NULL,
    .buffer_write = fakegpu_buffer_write,
    .buffer_read = fakegpu_buffer_read,
    .buffer_copy = fakegpu_buffer_copy,
    .supports = fakegpu_supports,
    .run = fakegpu_run,
    .synchronize = fakegpu_synchronize,
    .list_features = fakegpu_list_features,
    .get_proc = fakegpu_get_proc,
};

/* ---- Entry point ------------------------------------------------------------------------ */

TF_PLUGIN_EXPORT const tf_plugin *tf_plugin_entry(const tf_host_api *host);
const tf_plugin *tf_plugin_entry(const tf_host_api *host) {
    /* Keep the core's host table; a test calling the entry again must not replace it. */
    if (!fakegpu_host) fakegpu_host = host;
    return &fakegpu_plugin;
}
