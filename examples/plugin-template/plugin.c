/*
 * example: a tinyfin backend plugin written outside the tinyfin tree, from the installed ABI
 * header alone (docs/writing-a-plugin.md walks through it). It runs three ops, add, mul and
 * relu, on f32 tensors of any shape and strides in host memory; tinyfin runs every other op on
 * its cpu plugin. Copy this directory, rename the plugin, and grow it.
 *
 * In the order of a small backend: context, kernels, buffers, ops, the table, the entry point.
 *
 * C11 on purpose: the ABI needs nothing else, and every member's contract shows here without a
 * helper in between. Writing the plugin in C++20 instead? The installed plugin kit
 * (<tinyfin/plugin_kit.hpp>, docs/plugin-kit.md) has what this file writes by hand: the entry
 * point's version check (tf_kit::enter), messages into tf_error (fail), the descriptor checks
 * (check_call, check_tensors), the op table, and host buffers with a caching allocator
 * (<tinyfin/plugin_kit/host_buffer.hpp>); tinyfin's own cpu and blas plugins use it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tinyfin/plugin.h>

#define EXAMPLE_NAME "example"

/* ---- Context ------------------------------------------------------------------------------ */

/* The core's services, kept from the entry point (valid until the plugin is unloaded). */
static const tf_host_api *example_host;

/* A buffer is plain host memory; the core only ever sees the pointer. */
struct tf_buffer {
    uint64_t size;
    unsigned char *bytes;
};

/* Writes a lower-case message that names the op and the values (rule R11). */
static tf_status example_fail(tf_error *err, tf_status status, const char *message) {
    if (err && err->struct_size >= sizeof(tf_error))
        snprintf(err->message, sizeof err->message, EXAMPLE_NAME ": %s", message);
    return status;
}

/* ---- Kernels -------------------------------------------------------------------------------- */

/* Address of element `index` (row-major over t's shape) of an f32 tensor in host memory. */
static float *example_element(const tf_tensor_desc *t, int64_t index) {
    unsigned char *at = (unsigned char *)t->data + t->offset;
    for (int32_t k = t->rank - 1; k >= 0; --k) {
        int64_t coord = index % t->shape[k];
        index /= t->shape[k];
        at += coord * t->strides[k] * (int64_t)sizeof(float);
    }
    return (float *)at;
}

static int64_t example_numel(const tf_tensor_desc *t) {
    int64_t n = 1;
    for (int32_t k = 0; k < t->rank; ++k) n *= t->shape[k];
    return n;
}

/* One loop for the three ops: inputs arrive already broadcast to the output's shape. */
static void example_elementwise(uint32_t op, const tf_op_desc *d) {
    const tf_tensor_desc *out = &d->outputs[0];
    const int64_t n = example_numel(out);
    for (int64_t i = 0; i < n; ++i) {
        float a = *example_element(&d->inputs[0], i);
        float r;
        switch (op) {
        case TF_OP_ADD: r = a + *example_element(&d->inputs[1], i); break;
        case TF_OP_MUL: r = a * *example_element(&d->inputs[1], i); break;
        default: r = a > 0.0f ? a : (a != a ? a : 0.0f); break; /* relu keeps NaN */
        }
        *example_element(out, i) = r;
    }
}

/* ---- Buffers ---------------------------------------------------------------------------------- */

static tf_status example_buffer_alloc(int32_t device, uint64_t size, tf_buffer **out, tf_error *err) {
    (void)device;
    tf_buffer *b = malloc(sizeof *b);
    unsigned char *bytes = malloc(size);
    if (!b || !bytes) {
        free(b);
        free(bytes);
        return example_fail(err, TF_STATUS_OUT_OF_MEMORY, "buffer_alloc: out of host memory");
    }
    b->size = size;
    b->bytes = bytes;
    *out = b;
    return TF_STATUS_OK;
}

static void example_buffer_free(tf_buffer *buffer) {
    free(buffer->bytes);
    free(buffer);
}

static void *example_buffer_host_ptr(tf_buffer *buffer) { return buffer->bytes; }

static tf_status example_buffer_write(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size,
                                      tf_error *err) {
    if (offset > buffer->size || size > buffer->size - offset)
        return example_fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_write: range past the end of the buffer");
    memcpy(buffer->bytes + offset, src, size);
    return TF_STATUS_OK;
}

static tf_status example_buffer_read(tf_buffer *buffer, uint64_t offset, void *dst, uint64_t size, tf_error *err) {
    if (offset > buffer->size || size > buffer->size - offset)
        return example_fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_read: range past the end of the buffer");
    memcpy(dst, buffer->bytes + offset, size);
    return TF_STATUS_OK;
}

static tf_status example_buffer_copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset,
                                     uint64_t size, tf_error *err) {
    if (dst_offset > dst->size || size > dst->size - dst_offset || src_offset > src->size ||
        size > src->size - src_offset)
        return example_fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_copy: range past the end of a buffer");
    memmove(dst->bytes + dst_offset, src->bytes + src_offset, size);
    return TF_STATUS_OK;
}

/* ---- Ops ------------------------------------------------------------------------------------ */

static int example_is_f32(const tf_tensor_desc *t) {
    return t->struct_size >= sizeof(tf_tensor_desc) && t->dtype == TF_DTYPE_F32 && t->rank >= 0 &&
           t->rank <= TF_MAX_RANK;
}

/* Decides from the descriptor alone: never from buffer or data (rule R8). */
static int32_t example_supports(int32_t device, const tf_op_desc *d) {
    (void)device;
    if (d->struct_size < sizeof(tf_op_desc) || d->n_outputs != 1 || !example_is_f32(&d->outputs[0])) return 0;
    switch (d->op) {
    case TF_OP_ADD:
    case TF_OP_MUL: return d->n_inputs == 2 && example_is_f32(&d->inputs[0]) && example_is_f32(&d->inputs[1]);
    case TF_OP_RELU: return d->n_inputs == 1 && example_is_f32(&d->inputs[0]);
    default: return 0;
    }
}

static tf_status example_run(int32_t device, const tf_op_desc *d, tf_error *err) {
    if (!example_supports(device, d)) return example_fail(err, TF_STATUS_UNSUPPORTED, "run: descriptor not supported");
    for (uint32_t i = 0; i < d->n_inputs; ++i)
        if (!d->inputs[i].data)
            return example_fail(err, TF_STATUS_INVALID_ARGUMENT, "run: an input is not in host memory");
    if (!d->outputs[0].data)
        return example_fail(err, TF_STATUS_INVALID_ARGUMENT, "run: the output is not in host memory");
    example_elementwise(d->op, d);
    return TF_STATUS_OK;
}

static tf_status example_synchronize(int32_t device, tf_error *err) {
    (void)device;
    (void)err;
    return TF_STATUS_OK; /* run() finishes its work before returning */
}

/* ---- Lifetime and devices -------------------------------------------------------------------- */

static tf_status example_probe(tf_error *err) {
    (void)err;
    return TF_STATUS_OK; /* host memory is always there; a GPU plugin checks for its driver here */
}

static tf_status example_init(tf_error *err) {
    (void)err;
    if (example_host && example_host->log) example_host->log(TF_LOG_DEBUG, EXAMPLE_NAME, "init");
    return TF_STATUS_OK;
}

static void example_shutdown(void) {}

static int32_t example_device_count(void) { return 1; }

static tf_status example_device_info(int32_t device, tf_device_info *info, tf_error *err) {
    if (device != 0) return example_fail(err, TF_STATUS_INVALID_ARGUMENT, "device_info: no such device");
    if (info->struct_size < sizeof(tf_device_info))
        return example_fail(err, TF_STATUS_INVALID_ARGUMENT, "device_info: info too small");
    info->kind = TF_DEVICE_KIND_CPU;
    info->host_addressable = 1;
    snprintf(info->name, sizeof info->name, "example host memory");
    return TF_STATUS_OK;
}

static void example_list_features(tf_feature_fn emit, void *user) { emit(user, "example.ops", "add mul relu"); }

/* ---- The table and the entry point --------------------------------------------------------- */

/* Constant-initialised: nothing runs at dlopen time (rule R2). Every slot is named. */
static const tf_plugin example_table = {
    .struct_size = sizeof(tf_plugin),
    .abi_version = TF_ABI_VERSION,
    .name = EXAMPLE_NAME,
    .version = "0.1.0",
    /* 0: a peer of cpu, used only when named (TINYFIN_BACKEND=example). Declare more only
     * when this backend should run every program's ops by default: docs/plugin-abi.md. */
    .priority = 0,
    .reserved_ = 0,
    .probe = example_probe,
    .init = example_init,
    .shutdown = example_shutdown,
    .device_count = example_device_count,
    .device_info = example_device_info,
    .buffer_alloc = example_buffer_alloc,
    .buffer_free = example_buffer_free,
    .buffer_host_ptr = example_buffer_host_ptr,
    .buffer_write = example_buffer_write,
    .buffer_read = example_buffer_read,
    .buffer_copy = example_buffer_copy,
    .supports = example_supports,
    .run = example_run,
    .synchronize = example_synchronize,
    .list_features = example_list_features,
    .get_proc = NULL,
};

/* The one exported symbol (rule R1). Refuses a core of another major version (rule R3). */
TF_PLUGIN_EXPORT const tf_plugin *tf_plugin_entry(const tf_host_api *host) {
    if (!host || host->struct_size < offsetof(tf_host_api, get_env) + sizeof host->get_env) return NULL;
    if (TF_ABI_MAJOR(host->abi_version) != TF_ABI_VERSION_MAJOR) return NULL;
    example_host = host;
    return &example_table;
}
