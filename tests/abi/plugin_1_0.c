/*
 * abi10: a plugin built against the frozen ABI 1.0 header (1.0/tinyfin/plugin.h), never the
 * current one. The current core must keep loading it and running its ops: add, and attention, on
 * f32 tensors of any shape and strides in host memory. Everything else falls back to cpu.
 * ABI 1.0 has no absent inputs (ABI 1.1 made attention's mask optional): this plugin refuses, and
 * run() fails on, a mask descriptor that is not a whole 1.0 tensor descriptor with memory, so a
 * core that sent it one would fail test-abi10-attention.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tinyfin/plugin.h>

/* The 1.0 layout this file was written for; a changed copy of the header fails the build. */
typedef char abi10_table_is_160_bytes[sizeof(tf_plugin) == 160 ? 1 : -1];
typedef char abi10_is_1_0[TF_ABI_VERSION == 0x00010000u ? 1 : -1];

struct tf_buffer {
    uint64_t size;
    unsigned char *bytes;
};

static tf_status abi10_fail(tf_error *err, tf_status status, const char *message) {
    if (err && err->struct_size >= sizeof(tf_error)) snprintf(err->message, sizeof err->message, "abi10: %s", message);
    return status;
}

static float *abi10_element(const tf_tensor_desc *t, int64_t index) {
    unsigned char *at = (unsigned char *)t->data + t->offset;
    int32_t k;
    for (k = t->rank - 1; k >= 0; --k) {
        at += (index % t->shape[k]) * t->strides[k] * (int64_t)sizeof(float);
        index /= t->shape[k];
    }
    return (float *)at;
}

static int abi10_is_f32(const tf_tensor_desc *t) {
    return t->dtype == TF_DTYPE_F32 && t->rank >= 0 && t->rank <= TF_MAX_RANK;
}

/* The element at a multi-index of the tensor's rank. */
static float *abi10_at(const tf_tensor_desc *t, const int64_t *index) {
    unsigned char *at = (unsigned char *)t->data + t->offset;
    int32_t k;
    for (k = 0; k < t->rank; ++k) at += index[k] * t->strides[k] * (int64_t)sizeof(float);
    return (float *)at;
}

/* Keys per query row the attention kernel's scores buffer holds. */
#define ABI10_MAX_KEYS 64

/* attention: q [..., Tq, D], k [..., Tk, D], v [..., Tk, Dv], mask [..., Tq, Tk] -> [..., Tq, Dv],
 * one batch shape (the core expands them to it). The mask must be a whole descriptor. */
static int abi10_attention_fits(const tf_op_desc *d) {
    const tf_tensor_desc *all[5];
    int32_t r, a, i;
    if (d->n_inputs != 4 || d->n_outputs != 1 || !d->params) return 0;
    all[0] = &d->inputs[0], all[1] = &d->inputs[1], all[2] = &d->inputs[2], all[3] = &d->inputs[3];
    all[4] = &d->outputs[0];
    if (all[3]->struct_size < sizeof(tf_tensor_desc)) return 0;
    r = all[0]->rank;
    if (r < 2) return 0;
    for (a = 0; a < 5; ++a) {
        if (!abi10_is_f32(all[a]) || all[a]->rank != r) return 0;
        for (i = 0; i < r - 2; ++i)
            if (all[a]->shape[i] != all[0]->shape[i]) return 0;
    }
    return all[1]->shape[r - 1] == all[0]->shape[r - 1] && all[2]->shape[r - 2] == all[1]->shape[r - 2] &&
           all[3]->shape[r - 2] == all[0]->shape[r - 2] && all[3]->shape[r - 1] == all[1]->shape[r - 2] &&
           all[4]->shape[r - 2] == all[0]->shape[r - 2] && all[4]->shape[r - 1] == all[2]->shape[r - 1] &&
           all[1]->shape[r - 2] <= ABI10_MAX_KEYS;
}

/* softmax(q k^T * scale + mask [+ causal]) v in double, one query row at a time. */
static tf_status abi10_attention(const tf_op_desc *d, tf_error *err) {
    const tf_tensor_desc *q = &d->inputs[0], *k = &d->inputs[1], *v = &d->inputs[2], *m = &d->inputs[3];
    const tf_tensor_desc *o = &d->outputs[0];
    const tf_params_attention *p = (const tf_params_attention *)d->params;
    const int32_t r = q->rank;
    const int64_t tq = q->shape[r - 2], dd = q->shape[r - 1], tk = k->shape[r - 2], dv = v->shape[r - 1];
    int64_t batches = 1, b, i, j, c, e, rest;
    int64_t at[TF_MAX_RANK] = {0};
    double scores[ABI10_MAX_KEYS];
    int32_t a;
    if (!m->data && tq * tk > 0)
        return abi10_fail(err, TF_STATUS_INVALID_ARGUMENT, "attention: the mask has no memory");
    for (a = 0; a < r - 2; ++a) batches *= q->shape[a];
    for (b = 0; b < batches; ++b) {
        for (rest = b, a = r - 3; a >= 0; --a) {
            at[a] = rest % q->shape[a];
            rest /= q->shape[a];
        }
        for (i = 0; i < tq; ++i) {
            double peak = -INFINITY, total = 0;
            for (j = 0; j < tk; ++j) {
                double dot = 0;
                for (e = 0; e < dd; ++e) {
                    double qe;
                    at[r - 2] = i, at[r - 1] = e;
                    qe = *abi10_at(q, at);
                    at[r - 2] = j;
                    dot += qe * *abi10_at(k, at);
                }
                at[r - 2] = i, at[r - 1] = j;
                scores[j] = dot * p->scale + *abi10_at(m, at);
                if (p->causal && j > i + tk - tq) scores[j] = -INFINITY;
                if (scores[j] > peak) peak = scores[j];
            }
            for (j = 0; j < tk; ++j) {
                scores[j] = exp(scores[j] - peak);
                total += scores[j];
            }
            for (c = 0; c < dv; ++c) {
                double sum = 0;
                for (j = 0; j < tk; ++j) {
                    at[r - 2] = j, at[r - 1] = c;
                    sum += scores[j] * *abi10_at(v, at);
                }
                at[r - 2] = i, at[r - 1] = c;
                *abi10_at(o, at) = (float)(sum / total);
            }
        }
    }
    return TF_STATUS_OK;
}

static int32_t abi10_supports(int32_t device, const tf_op_desc *d) {
    (void)device;
    switch (d->op) {
    case TF_OP_ADD:
        return d->n_inputs == 2 && d->n_outputs == 1 && abi10_is_f32(&d->inputs[0]) && abi10_is_f32(&d->inputs[1]) &&
               abi10_is_f32(&d->outputs[0]);
    case TF_OP_ATTENTION: return abi10_attention_fits(d);
    default: return 0;
    }
}

static tf_status abi10_run(int32_t device, const tf_op_desc *d, tf_error *err) {
    int64_t n = 1, i;
    int32_t k;
    if (d->op == TF_OP_ATTENTION && d->n_inputs == 4 && d->inputs[3].struct_size < sizeof(tf_tensor_desc))
        return abi10_fail(err, TF_STATUS_INVALID_ARGUMENT,
                          "attention: the mask descriptor is absent, which ABI 1.0 never sends");
    if (!abi10_supports(device, d)) return abi10_fail(err, TF_STATUS_UNSUPPORTED, "run: not supported");
    if (d->op == TF_OP_ATTENTION) return abi10_attention(d, err);
    for (k = 0; k < d->outputs[0].rank; ++k) n *= d->outputs[0].shape[k];
    for (i = 0; i < n; ++i)
        *abi10_element(&d->outputs[0], i) = *abi10_element(&d->inputs[0], i) + *abi10_element(&d->inputs[1], i);
    return TF_STATUS_OK;
}

static tf_status abi10_ok(tf_error *err) {
    (void)err;
    return TF_STATUS_OK;
}
static void abi10_shutdown(void) {}
static int32_t abi10_device_count(void) { return 1; }

static tf_status abi10_device_info(int32_t device, tf_device_info *info, tf_error *err) {
    if (device != 0) return abi10_fail(err, TF_STATUS_INVALID_ARGUMENT, "device_info: no such device");
    info->kind = TF_DEVICE_KIND_CPU;
    info->host_addressable = 1;
    snprintf(info->name, sizeof info->name, "abi 1.0 host memory");
    return TF_STATUS_OK;
}

static tf_status abi10_alloc(int32_t device, uint64_t size, tf_buffer **out, tf_error *err) {
    tf_buffer *b = malloc(sizeof *b);
    (void)device;
    if (!b || !(b->bytes = malloc(size))) {
        free(b);
        return abi10_fail(err, TF_STATUS_OUT_OF_MEMORY, "buffer_alloc: out of memory");
    }
    b->size = size;
    *out = b;
    return TF_STATUS_OK;
}

static void abi10_free(tf_buffer *b) {
    free(b->bytes);
    free(b);
}

static void *abi10_host_ptr(tf_buffer *b) { return b->bytes; }

static tf_status abi10_write(tf_buffer *b, uint64_t offset, const void *src, uint64_t size, tf_error *err) {
    if (offset > b->size || size > b->size - offset)
        return abi10_fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_write: out of range");
    memcpy(b->bytes + offset, src, size);
    return TF_STATUS_OK;
}

static tf_status abi10_read(tf_buffer *b, uint64_t offset, void *dst, uint64_t size, tf_error *err) {
    if (offset > b->size || size > b->size - offset)
        return abi10_fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_read: out of range");
    memcpy(dst, b->bytes + offset, size);
    return TF_STATUS_OK;
}

static tf_status abi10_copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset, uint64_t size,
                            tf_error *err) {
    if (dst_offset > dst->size || size > dst->size - dst_offset || src_offset > src->size ||
        size > src->size - src_offset)
        return abi10_fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_copy: out of range");
    memmove(dst->bytes + dst_offset, src->bytes + src_offset, size);
    return TF_STATUS_OK;
}

static tf_status abi10_synchronize(int32_t device, tf_error *err) {
    (void)device;
    (void)err;
    return TF_STATUS_OK;
}

static const tf_plugin abi10_table = {
    sizeof(tf_plugin),
    TF_ABI_VERSION,
    "abi10",
    "1.0",
    1,
    0,
    abi10_ok,
    abi10_ok,
    abi10_shutdown,
    abi10_device_count,
    abi10_device_info,
    abi10_alloc,
    abi10_free,
    abi10_host_ptr,
    abi10_write,
    abi10_read,
    abi10_copy,
    abi10_supports,
    abi10_run,
    abi10_synchronize,
    NULL, /* list_features */
    NULL, /* get_proc */
};

TF_PLUGIN_EXPORT const tf_plugin *tf_plugin_entry(const tf_host_api *host) {
    if (!host || TF_ABI_MAJOR(host->abi_version) != 1) return NULL;
    return &abi10_table;
}
