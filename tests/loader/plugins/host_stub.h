/*
 * A minimal, complete plugin body for the loader's test-only plugins: one
 * device whose buffers are malloc'd host memory, no ops. A plugin source
 * defines STUB_NAME, STUB_DEVICE_NAME and STUB_DEVICE_KIND, includes this
 * header, then writes its own probe, init and table (so each test plugin shows
 * in one screen what it does differently).
 *
 * Everything here is static: the test plugin exports only tf_plugin_entry.
 */
#ifndef TINYFIN_TEST_HOST_STUB_H
#define TINYFIN_TEST_HOST_STUB_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tinyfin/plugin.h"

struct tf_buffer {
    uint64_t size;
    unsigned char *bytes;
};

static inline void stub_set_error(tf_error *err, const char *message) {
    if (err && err->struct_size >= sizeof(tf_error)) snprintf(err->message, sizeof err->message, "%s", message);
}

static inline void stub_shutdown(void) {}

static inline int32_t stub_device_count(void) { return 1; }

static inline tf_status stub_device_info(int32_t device, tf_device_info *info, tf_error *err) {
    if (device != 0 || !info || info->struct_size < sizeof(tf_device_info)) {
        stub_set_error(err, STUB_NAME ": device_info: bad device or info struct");
        return TF_STATUS_INVALID_ARGUMENT;
    }
    info->kind = STUB_DEVICE_KIND;
    info->memory_total = 0;
    info->memory_free = 0;
    info->host_addressable = 1;
    snprintf(info->name, sizeof info->name, "%s", STUB_DEVICE_NAME);
    info->uuid[0] = '\0';
    return TF_STATUS_OK;
}

static inline tf_status stub_buffer_alloc(int32_t device, uint64_t size, tf_buffer **out, tf_error *err) {
    tf_buffer *buffer;
    if (device != 0 || size == 0 || !out) {
        stub_set_error(err, STUB_NAME ": buffer_alloc: bad device or size");
        return TF_STATUS_INVALID_ARGUMENT;
    }
    buffer = (tf_buffer *)malloc(sizeof *buffer);
    if (buffer) buffer->bytes = (unsigned char *)calloc(1, (size_t)size);
    if (!buffer || !buffer->bytes) {
        free(buffer);
        stub_set_error(err, STUB_NAME ": buffer_alloc: out of host memory");
        return TF_STATUS_OUT_OF_MEMORY;
    }
    buffer->size = size;
    *out = buffer;
    return TF_STATUS_OK;
}

static inline void stub_buffer_free(tf_buffer *buffer) {
    if (!buffer) return;
    free(buffer->bytes);
    free(buffer);
}

static inline void *stub_buffer_host_ptr(tf_buffer *buffer) { return buffer ? buffer->bytes : NULL; }

static inline int stub_in_bounds(const tf_buffer *buffer, uint64_t offset, uint64_t size) {
    return buffer && offset <= buffer->size && size <= buffer->size - offset;
}

static inline tf_status stub_buffer_write(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size,
                                          tf_error *err) {
    if (!stub_in_bounds(buffer, offset, size)) {
        stub_set_error(err, STUB_NAME ": buffer_write: out of bounds");
        return TF_STATUS_INVALID_ARGUMENT;
    }
    if (size) memcpy(buffer->bytes + offset, src, (size_t)size);
    return TF_STATUS_OK;
}

static inline tf_status stub_buffer_read(tf_buffer *buffer, uint64_t offset, void *dst, uint64_t size, tf_error *err) {
    if (!stub_in_bounds(buffer, offset, size)) {
        stub_set_error(err, STUB_NAME ": buffer_read: out of bounds");
        return TF_STATUS_INVALID_ARGUMENT;
    }
    if (size) memcpy(dst, buffer->bytes + offset, (size_t)size);
    return TF_STATUS_OK;
}

static inline tf_status stub_buffer_copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset,
                                         uint64_t size, tf_error *err) {
    if (!stub_in_bounds(dst, dst_offset, size) || !stub_in_bounds(src, src_offset, size)) {
        stub_set_error(err, STUB_NAME ": buffer_copy: out of bounds");
        return TF_STATUS_INVALID_ARGUMENT;
    }
    if (size) memmove(dst->bytes + dst_offset, src->bytes + src_offset, (size_t)size);
    return TF_STATUS_OK;
}

/* No ops: the core must fall back to cpu for everything. */
static inline int32_t stub_supports(int32_t device, const tf_op_desc *op) {
    (void)device;
    (void)op;
    return 0;
}

static inline tf_status stub_run(int32_t device, const tf_op_desc *op, tf_error *err) {
    (void)device;
    (void)op;
    stub_set_error(err, STUB_NAME ": run: this test plugin supports no ops");
    return TF_STATUS_UNSUPPORTED;
}

static inline tf_status stub_synchronize(int32_t device, tf_error *err) {
    (void)device;
    (void)err;
    return TF_STATUS_OK;
}

#endif /* TINYFIN_TEST_HOST_STUB_H */
