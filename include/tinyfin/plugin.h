/*
 * tinyfin plugin ABI — the one contract between libtinyfin.so (the core) and a
 * backend plugin (a shared object loaded with dlopen).
 *
 * Plain C99. No C++ types, no exceptions, no ownership transfer of memory the
 * other side allocated. docs/plugin-abi.md is the long form of this header:
 * read it before writing a plugin.
 *
 * Compatibility rules (see docs/plugin-abi.md, "Rules for plugin authors"):
 *  - A plugin exports exactly one symbol, TF_PLUGIN_ENTRY_NAME.
 *  - The core loads a plugin only when the plugin's ABI major equals the
 *    core's. Minor versions only append members to the end of structs; every
 *    struct starts with its size so each side knows which members the other
 *    side has. Members are never reordered, retyped or given a new meaning
 *    without bumping the major version.
 *  - The core calls a member added in a later minor version only after
 *    checking both the plugin's struct_size and that the pointer is not NULL.
 *  - The core sends a plugin no descriptor form newer than the plugin's minor:
 *    absent optional inputs (TF_TENSOR_ABSENT, 1.1) reach 1.1 plugins only;
 *    block-quantized dtypes (TF_DTYPE_Q8_0 ..., 1.2) reach 1.2 plugins only.
 */
#ifndef TINYFIN_PLUGIN_H
#define TINYFIN_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TF_ABI_VERSION_MAJOR 1
#define TF_ABI_VERSION_MINOR 2
/* Packed as (major << 16) | minor. */
#define TF_ABI_VERSION ((uint32_t)((TF_ABI_VERSION_MAJOR << 16) | TF_ABI_VERSION_MINOR))
#define TF_ABI_MAJOR(v) ((uint32_t)(v) >> 16)
#define TF_ABI_MINOR(v) ((uint32_t)(v)&0xffffu)

/* Highest tensor rank that crosses the ABI. */
#define TF_MAX_RANK 8
/* Size of every fixed text field that crosses the ABI, terminating NUL included. */
#define TF_TEXT_SIZE 256

#if defined(__GNUC__) || defined(__clang__)
#define TF_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define TF_PLUGIN_EXPORT
#endif

/* ---- Status codes --------------------------------------------------------- */

typedef enum tf_status {
    TF_STATUS_OK = 0,
    /* The plugin does not implement this request (op, dtype, layout). */
    TF_STATUS_UNSUPPORTED = 1,
    /* An argument is out of range or inconsistent. */
    TF_STATUS_INVALID_ARGUMENT = 2,
    /* Host or device memory is exhausted. */
    TF_STATUS_OUT_OF_MEMORY = 3,
    /* The device, driver or runtime is missing or unusable. */
    TF_STATUS_UNAVAILABLE = 4,
    /* The device was lost; its buffers are gone. */
    TF_STATUS_DEVICE_LOST = 5,
    /* Anything else: a bug or an unexpected driver answer. */
    TF_STATUS_INTERNAL = 6
} tf_status;

/* Where a fallible call explains itself. The caller zero-fills it and sets
 * struct_size; on failure the plugin writes a NUL-terminated human message
 * (lower-case, naming the op and the values involved) into message. */
typedef struct tf_error {
    uint32_t struct_size;
    char message[TF_TEXT_SIZE * 2];
} tf_error;

/* ---- Data types ------------------------------------------------------------ */

typedef enum tf_dtype {
/* Stable numeric ids from dtypes.def (block length, bytes per block, ggml type beside each);
 * append-only. F32 .. BOOL: ABI 1.0. Q8_0 .. Q8_K, the block-quantized dtypes: ABI 1.2. */
#define TF_DTYPE(id, sym, name, block_length, block_bytes, ggml_type) TF_DTYPE_##sym = id,
#include "dtypes.def"
#undef TF_DTYPE
    TF_DTYPE_COUNT_
} tf_dtype;

/* ---- Op ids ------------------------------------------------------------------ */

/* Stable numeric ids from ops.def; append-only, never renumbered. */
typedef enum tf_op {
#define TF_OP(id, sym, name, kind, n_in, n_out, params, dtypes) TF_OP_##sym = id,
#include "ops.def"
#undef TF_OP
    TF_OP_COUNT_
} tf_op;

/* ---- Op parameters (one struct per params column of ops.def) --------------- */

/* Ops whose params column is tf_params_none receive params == NULL. */
typedef struct tf_params_none {
    uint32_t struct_size;
} tf_params_none;

/* REDUCE ops. The output has the input's rank; reduced axes have size 1. */
typedef struct tf_params_reduce {
    uint32_t struct_size;
    /* Bit i set: axis i is reduced. */
    uint32_t axes_mask;
} tf_params_reduce;

/* FILL ops: every output element becomes value converted to the output dtype. */
typedef struct tf_params_fill {
    uint32_t struct_size;
    double value;
} tf_params_fill;

/* CLAMP: min(max(x, min), max); -inf / +inf disable a bound. */
typedef struct tf_params_clamp {
    uint32_t struct_size;
    double min;
    double max;
} tf_params_clamp;

/* VAR: like tf_params_reduce; the divisor is (count - correction), never below 0. */
typedef struct tf_params_var {
    uint32_t struct_size;
    uint32_t axes_mask;
    double correction;
} tf_params_var;

/* ARG ops, SOFTMAX, LOG_SOFTMAX: one axis, 0 <= axis < rank. */
typedef struct tf_params_axis {
    uint32_t struct_size;
    int32_t axis;
} tf_params_axis;

/* CONV2D and its gradients. All values >= 1 except padding (>= 0). */
typedef struct tf_params_conv2d {
    uint32_t struct_size;
    int32_t stride[2]; /* h, w */
    int32_t padding[2]; /* h, w: zeros added on both sides */
    int32_t dilation[2]; /* h, w */
    int32_t groups;
} tf_params_conv2d;

/* MAX_POOL2D, AVG_POOL2D and their backward ops. */
typedef struct tf_params_pool2d {
    uint32_t struct_size;
    int32_t kernel[2]; /* h, w */
    int32_t stride[2]; /* h, w */
    int32_t padding[2]; /* h, w */
    /* AVG only: non-zero divides by the full window, padding included. */
    int32_t count_include_pad;
} tf_params_pool2d;

/* LAYER_NORM, RMS_NORM: normalise over the last n_axes axes. */
typedef struct tf_params_norm {
    uint32_t struct_size;
    int32_t n_axes;
    double eps;
} tf_params_norm;

/* ROPE. Pairs are (2i, 2i+1) when interleaved, else (i, i + D/2). inverse rotates back
 * (the gradient of rope is the inverse rotation). */
typedef struct tf_params_rope {
    uint32_t struct_size;
    int32_t interleaved;
    int32_t inverse;
    double theta;
    int64_t position_offset;
} tf_params_rope;

/* ATTENTION. causal masks key positions j > i + (Tk - Tq). The mask (input 3) is optional: absent
 * (ABI 1.1, see TF_TENSOR_ABSENT), it adds nothing to the scores. */
typedef struct tf_params_attention {
    uint32_t struct_size;
    int32_t causal;
    int32_t reserved_;
    double scale;
} tf_params_attention;

typedef enum tf_reduction { TF_REDUCTION_NONE = 0, TF_REDUCTION_MEAN = 1, TF_REDUCTION_SUM = 2 } tf_reduction;

/* CROSS_ENTROPY. Labels equal to ignore_index add nothing and are not counted by MEAN
 * (MEAN over zero counted labels gives NaN, like PyTorch). Any other label outside
 * [0, C) is an error. */
typedef struct tf_params_cross_entropy {
    uint32_t struct_size;
    /* A tf_reduction. */
    int32_t reduction;
    int64_t ignore_index;
} tf_params_cross_entropy;

/* ONE_HOT. A label outside [0, num_classes) is an error. */
typedef struct tf_params_one_hot {
    uint32_t struct_size;
    int32_t num_classes;
} tf_params_one_hot;

/* ADAMW_STEP (see ops.def). The constants in double as the core derives them from lr, betas,
 * eps, weight_decay and the step count t; a plugin rounds each once to the dtype. */
typedef struct tf_params_adamw_step {
    uint32_t struct_size;
    /* 0 on the first step: exp_avg and exp_avg_sq are read as zeros (their contents are undefined). */
    int32_t has_state;
    /* Non-zero: param is multiplied by decay (1 - lr * weight_decay) first. */
    int32_t decays;
    int32_t reserved_;
    double decay;
    double beta1;
    double one_minus_beta1;
    double beta2;
    double one_minus_beta2;
    /* sqrt(1 - beta2^t) */
    double root_bias_correction2;
    double eps;
    /* lr / (1 - beta1^t) */
    double step_size;
} tf_params_adamw_step;

/* SGD_STEP (see ops.def): SGD with momentum (> 0), optional Nesterov and weight decay. */
typedef struct tf_params_sgd_step {
    uint32_t struct_size;
    /* 0 on the first step: momentum_buffer is only written (its contents are undefined). */
    int32_t has_state;
    /* Non-zero: weight_decay * param is added to the gradient. */
    int32_t decays;
    int32_t nesterov;
    double lr;
    double momentum;
    double weight_decay;
} tf_params_sgd_step;

/* CUMSUM (ONNX CumSum): y[..., i, ...] = sum of x along axis up to i (exclusive: before i;
 * reverse: from the end). */
typedef struct tf_params_cumsum {
    uint32_t struct_size;
    /* 0 <= axis < rank (the core normalises negative axes). */
    int32_t axis;
    /* Non-zero: element i sums the elements before it (the first gets 0). */
    int32_t exclusive;
    /* Non-zero: sums run from the last element towards the first. */
    int32_t reverse;
} tf_params_cumsum;

/* CONV2D_ACT: conv2d's parameters (the members of tf_params_conv2d, in its order), then the
 * activation applied after the bias and the residual. */
typedef enum tf_conv_activation { TF_CONV_ACT_NONE = 0, TF_CONV_ACT_RELU = 1, TF_CONV_ACT_CLIP = 2 } tf_conv_activation;

typedef struct tf_params_conv2d_act {
    uint32_t struct_size;
    int32_t stride[2]; /* h, w */
    int32_t padding[2]; /* h, w */
    int32_t dilation[2]; /* h, w */
    int32_t groups;
    /* A tf_conv_activation. */
    int32_t activation;
    /* CLIP's bounds (not NaN; an infinite one leaves that side open). */
    double min;
    double max;
} tf_params_conv2d_act;

/* ---- Tensors across the ABI ------------------------------------------------ */

/* Opaque to the core: a plugin's device allocation. */
typedef struct tf_buffer tf_buffer;

typedef struct tf_tensor_desc {
    uint32_t struct_size;
    /* A tf_dtype. */
    int32_t dtype;
    /* 0 .. TF_MAX_RANK; rank 0 is a scalar with one element. */
    int32_t rank;
    int32_t reserved_;
    /* Sizes; shape[i] >= 0. A tensor with a zero size has no elements. */
    int64_t shape[TF_MAX_RANK];
    /* Strides in elements, never negative; 0 marks a broadcast axis. A block-quantized dtype
     * (1.2) is addressed in whole rows of blocks: the last axis is a multiple of the block length
     * with stride 1, every other stride a multiple of the block length; element e of the buffer
     * starts at byte (e / block_length) * block_bytes (dtypes.def). */
    int64_t strides[TF_MAX_RANK];
    /* Byte offset of element [0,...,0] in buffer. */
    uint64_t offset;
    /* The buffer holding the data: normally the running plugin's own; for host plugins it
     * may belong to another host-addressable plugin (then use data, never buffer). */
    tf_buffer *buffer;
    /* Host address of byte 0 of buffer when it is host-addressable, else NULL.
     * Host plugins (cpu, blas) must address memory through data only: the
     * buffer may belong to another host-addressable plugin. */
    void *data;
} tf_tensor_desc;

/* An absent input (valid for ABI 1.1): an optional input of the op, marked '?' in the dtypes
 * column of ops.def, that the caller left out. Its descriptor stays in its place in
 * tf_op_desc.inputs (n_inputs is still the count in ops.def) with every member zero: struct_size
 * 0, buffer and data NULL. It means what the op's comment in ops.def says (attention: no mask,
 * not even a zero one). The core sends absent inputs only to plugins whose abi_version is 1.1 or
 * later; a plugin built against ABI 1.0 receives zeros of the operand's shape instead. A plugin
 * tests each optional input with TF_TENSOR_ABSENT before reading it. */
#define TF_TENSOR_ABSENT(desc) ((desc)->struct_size == 0)

/* One op call. The core has already checked shapes and dtypes against the op's
 * rule in ops.def and broadcast the inputs of elementwise ops to the output's
 * rank and shape (a broadcast axis has stride 0), so plugins see canonical
 * descriptors. Outputs never alias inputs or each other. Outputs hold undefined contents
 * that the op overwrites, except for the optimizer ops (adamw_step, sgd_step), whose outputs are
 * in-out: read, then overwritten in place. */
typedef struct tf_op_desc {
    uint32_t struct_size;
    /* A tf_op. */
    uint32_t op;
    uint32_t n_inputs;
    uint32_t n_outputs;
    const tf_tensor_desc *inputs;
    const tf_tensor_desc *outputs;
    /* The op's params struct (see ops.def), or NULL for ops without params. */
    const void *params;
} tf_op_desc;

/* ---- Devices ------------------------------------------------------------------ */

typedef enum tf_device_kind {
    TF_DEVICE_KIND_CPU = 0,
    TF_DEVICE_KIND_GPU_DISCRETE = 1,
    TF_DEVICE_KIND_GPU_INTEGRATED = 2,
    /* A GPU API implemented on the CPU (lavapipe, llvmpipe, swiftshader). */
    TF_DEVICE_KIND_GPU_SOFTWARE = 3,
    TF_DEVICE_KIND_OTHER = 4
} tf_device_kind;

typedef struct tf_device_info {
    uint32_t struct_size;
    /* A tf_device_kind. */
    int32_t kind;
    /* Bytes; 0 when unknown. */
    uint64_t memory_total;
    uint64_t memory_free;
    /* Non-zero when tf_plugin.buffer_host_ptr returns host addresses for this device. */
    int32_t host_addressable;
    int32_t reserved_;
    /* Human name, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)". */
    char name[TF_TEXT_SIZE];
    /* Stable identity of the hardware across APIs (PCI bus id or UUID), "" if none. */
    char uuid[TF_TEXT_SIZE];
} tf_device_info;

/* ---- Services the core lends to plugins ------------------------------------ */

typedef enum tf_log_level { TF_LOG_DEBUG = 0, TF_LOG_INFO = 1, TF_LOG_WARN = 2, TF_LOG_ERROR = 3 } tf_log_level;

typedef struct tf_host_api {
    uint32_t struct_size;
    /* TF_ABI_VERSION of the core. */
    uint32_t abi_version;
    /* Writes one line to the core's log, filtered by TINYFIN_LOG. */
    void (*log)(int32_t level, const char *plugin, const char *message);
    /* Reads an environment variable the way the core does (secure_getenv). */
    const char *(*get_env)(const char *name);
    /* valid for ABI 1.0 */
} tf_host_api;

/* ---- The plugin's table ------------------------------------------------------ */

/* get_proc("buffer_wrap") (optional; plugins with host-addressable devices): a buffer over
 * size bytes of host memory at data that the caller owns and keeps alive until buffer_free,
 * which then frees only the plugin's record, never data. The core's from_blob uses it for
 * zero-copy numpy and DLPack tensors. */
typedef tf_status (*tf_buffer_wrap_fn)(int32_t device, void *data, uint64_t size, tf_buffer **out, tf_error *err);

/* get_proc("weight_prepack") (optional; host plugins): the caller promises that the bytes weight
 * addresses stay as they are until its buffer is freed, and lets the plugin keep a private copy in
 * a layout of its own for the ops that read exactly this descriptor (same buffer, data, offset,
 * dtype, shape and strides); buffer_free drops it. *bytes receives the copy's size, 0 when the
 * plugin prepared nothing (a dtype or shape it has no layout for, or turned off): both are
 * success. Results stay those of the plain layout up to the order of f32 additions. The cpu
 * plugin repacks q4_0, q8_0, q4_k and q6_k weights for matmul_q (docs/quantization.md). */
typedef tf_status (*tf_weight_prepack_fn)(int32_t device, const tf_tensor_desc *weight, uint64_t *bytes, tf_error *err);

/* get_proc("buffer_mark_constant") (optional; a hint): the caller promises that buffer's contents
 * change from now on only through this plugin's own calls (writes, copies, op outputs), never
 * through host pointers, so the plugin may keep derived forms of it (the cpu plugin's packed GEMM
 * weights) and drop them on its next write. Must not throw or fail: a plugin that cannot use the
 * hint ignores it. libtinyfin-onnx marks the constants a graph reads (tinyfin::mark_constant). */
typedef void (*tf_buffer_mark_constant_fn)(tf_buffer *buffer);

/* Receives one key/value feature from tf_plugin.list_features. */
typedef void (*tf_feature_fn)(void *user, const char *key, const char *value);

/*
 * Filled by the plugin as a static const object and returned from the entry
 * point. The core never writes to it. Calls come from any thread; a plugin
 * serialises internally where its API needs it. Unless stated, device is an
 * index in [0, device_count()).
 */
typedef struct tf_plugin {
    /* sizeof(tf_plugin) as the plugin was compiled. */
    uint32_t struct_size;
    /* TF_ABI_VERSION the plugin was compiled against. */
    uint32_t abi_version;
    /* Short lower-case backend name ("cpu", "vulkan"): the TINYFIN_BACKEND key. */
    const char *name;
    /* Plugin version text for tinyfin-info. */
    const char *version;
    /* Rank for TINYFIN_BACKEND=auto: higher wins; cpu is 0. */
    int32_t priority;
    int32_t reserved_;

    /* Core, once after loading: can this plugin run here? Cheap, no device contexts.
     * Returns OK, or UNAVAILABLE with the reason in err ("no Vulkan driver"). */
    tf_status (*probe)(tf_error *err);
    /* Core, once before first use (lazy): creates contexts, queues, pipelines. */
    tf_status (*init)(tf_error *err);
    /* Core, once at exit or unload after a successful init; frees everything. */
    void (*shutdown)(void);

    /* Core, after init: number of devices (>= 1 when init succeeded). */
    int32_t (*device_count)(void);
    /* Core, after init: fills info (caller sets info->struct_size). */
    tf_status (*device_info)(int32_t device, tf_device_info *info, tf_error *err);

    /* Core: allocates size bytes (size > 0) on device; *out receives the buffer. */
    tf_status (*buffer_alloc)(int32_t device, uint64_t size, tf_buffer **out, tf_error *err);
    /* Core: frees a buffer once nothing uses it; waits for pending work on it first. */
    void (*buffer_free)(tf_buffer *buffer);
    /* Core (optional): host address of byte 0, or NULL. Absent: never host-addressable. */
    void *(*buffer_host_ptr)(tf_buffer *buffer);
    /* Core: copies size bytes from host src to buffer at offset; src may be reused on return. */
    tf_status (*buffer_write)(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size, tf_error *err);
    /* Core: copies size bytes at offset into host dst; waits for pending work first. */
    tf_status (*buffer_read)(tf_buffer *buffer, uint64_t offset, void *dst, uint64_t size, tf_error *err);
    /* Core: copies size bytes between two buffers of this plugin (same device), in queue order. */
    tf_status (*buffer_copy)(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset, uint64_t size,
                             tf_error *err);

    /* Core, per op call: non-zero when run() can execute exactly this descriptor.
     * Decide from op, dtypes, shapes, strides and params only: tinyfin-info also
     * asks with buffer and data set to NULL. */
    int32_t (*supports)(int32_t device, const tf_op_desc *op);
    /* Core, only for descriptors supports() accepted: executes, possibly asynchronously. */
    tf_status (*run)(int32_t device, const tf_op_desc *op, tf_error *err);
    /* Core: waits until all work queued on device has finished. */
    tf_status (*synchronize)(int32_t device, tf_error *err);

    /* tinyfin-info (optional): reports key/value facts ("openblas.threads" = "2"). */
    void (*list_features)(tf_feature_fn emit, void *user);
    /* Anyone (optional): extension hatch, returns NULL for unknown names. */
    void *(*get_proc)(const char *name);
    /* valid for ABI 1.0 */
} tf_plugin;

/*
 * The one exported symbol. The core calls it once after dlopen with its host
 * table (valid until the plugin is unloaded). The plugin returns its table,
 * or NULL when it cannot work with this core (it may log why through host).
 * No device work happens here: that is probe and init.
 */
typedef const tf_plugin *(*tf_plugin_entry_fn)(const tf_host_api *host);
#define TF_PLUGIN_ENTRY_NAME "tf_plugin_entry"

#ifdef __cplusplus
}
#endif

#endif /* TINYFIN_PLUGIN_H */
