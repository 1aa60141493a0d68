// example: the plugin of examples/plugin-template written in C++20 with the installed plugin kit
// (<tinyfin/plugin_kit.hpp>, docs/plugin-kit.md) instead of the ABI header alone. It runs add,
// mul and relu on f32 tensors of any shape and strides in host memory; tinyfin runs every other op
// on its cpu plugin. Copy this directory, rename the plugin, and grow it.
//
// What the kit does here that plugin.c writes by hand: the entry point's version check
// (tf_kit::enter), messages into tf_error (fail) and exceptions turned into a status at the ABI
// boundary (guarded: nothing C++ ever crosses it), the descriptor checks against ops.def
// (check_call, check_tensors), and the buffers: host memory from the kit's caching allocator,
// shared with tinyfin's cpu and blas plugins (<tinyfin/plugin_kit/host_buffer.hpp>), so tensors
// move between them without copies.
//
// In the order of a small backend: kernels, ops, lifetime and devices, the table, the entry point.
#include <tinyfin/plugin.h>
#include <tinyfin/plugin_kit.hpp>
#include <tinyfin/plugin_kit/host_buffer.hpp>

#include <cstdio>

namespace {

using namespace tf_kit;

// ---- Kernels ---------------------------------------------------------------------------------

// Element `index` (row-major over t's shape) of an f32 tensor in host memory.
float &element(const tf_tensor_desc &t, int64_t index) {
    char *at = static_cast<char *>(t.data) + t.offset;
    for (int32_t k = t.rank - 1; k >= 0; --k) {
        at += index % t.shape[k] * t.strides[k] * static_cast<int64_t>(sizeof(float));
        index /= t.shape[k];
    }
    return *reinterpret_cast<float *>(at);
}

// One loop for the three ops: inputs arrive already broadcast to the output's shape.
void elementwise(const tf_op_desc &d) {
    const tf_tensor_desc &out = d.outputs[0];
    const int64_t n = numel(out);
    for (int64_t i = 0; i < n; ++i) {
        const float a = element(d.inputs[0], i);
        switch (d.op) {
        case TF_OP_ADD: element(out, i) = a + element(d.inputs[1], i); break;
        case TF_OP_MUL: element(out, i) = a * element(d.inputs[1], i); break;
        default: element(out, i) = a > 0.0f || a != a ? a : 0.0f; break;  // relu keeps NaN
        }
    }
}

// ---- Ops -------------------------------------------------------------------------------------

// Decides from the descriptor alone, never from buffer or data (rule R8). err may be NULL: run()
// calls it again with an err to say why.
tf_status check(const tf_op_desc *op, bool need_data, tf_error *err) {
    OpRule rule{};
    if (tf_status s = check_call(op, &rule, err); s != TF_STATUS_OK) return s;
    if (op->op != TF_OP_ADD && op->op != TF_OP_MUL && op->op != TF_OP_RELU)
        return fail(err, TF_STATUS_UNSUPPORTED, "%s: not an op of this plugin (add, mul, relu)", rule.name);
    if (tf_status s = check_tensors(rule.name, *op, need_data, err); s != TF_STATUS_OK) return s;
    for (uint32_t i = 0; i < op->n_inputs; ++i)
        if (op->inputs[i].dtype != TF_DTYPE_F32)
            return fail(err, TF_STATUS_UNSUPPORTED, "%s: input %u is not f32", rule.name, i);
    if (op->outputs[0].dtype != TF_DTYPE_F32)
        return fail(err, TF_STATUS_UNSUPPORTED, "%s: output is not f32", rule.name);
    return TF_STATUS_OK;
}

int32_t example_supports(int32_t device, const tf_op_desc *op) {
    return guarded_answer([&] { return device == 0 && check(op, false, nullptr) == TF_STATUS_OK; });
}

tf_status example_run(int32_t device, const tf_op_desc *op, tf_error *err) {
    return guarded(err, "run", [&]() -> tf_status {
        if (tf_status s = check_host_device("run", device, err); s != TF_STATUS_OK) return s;
        if (tf_status s = check(op, true, err); s != TF_STATUS_OK) return s;
        elementwise(*op);
        return TF_STATUS_OK;
    });
}

// ---- Lifetime and devices ----------------------------------------------------------------------

// Host memory is always there; a GPU plugin checks for its driver here.
tf_status example_probe(tf_error *) { return TF_STATUS_OK; }

tf_status example_init(tf_error *) {
    log_line(TF_LOG_DEBUG, "init");
    return TF_STATUS_OK;
}

// The kit's host cache holds freed blocks for reuse: give them back.
void example_shutdown() { host_cache_release(); }

int32_t example_device_count() { return 1; }

tf_status example_device_info(int32_t device, tf_device_info *info, tf_error *err) {
    if (tf_status s = check_host_device("device_info", device, err); s != TF_STATUS_OK) return s;
    if (!info) return fail(err, TF_STATUS_INVALID_ARGUMENT, "device_info: info is NULL");
    tf_device_info full = host_device_info();
    std::snprintf(full.name, sizeof full.name, "example host memory");
    copy_device_info(full, info);
    return TF_STATUS_OK;
}

void example_list_features(tf_feature_fn emit, void *user) {
    FeatureList(emit, user).put("example.ops", "add mul relu");
}

// ---- The table -------------------------------------------------------------------------------

// Constant-initialised: nothing runs at dlopen time (rule R2). Every slot is named.
constexpr tf_plugin example_table = {
    .struct_size = sizeof(tf_plugin),
    .abi_version = TF_ABI_VERSION,
    .name = "example",
    .version = "0.1.0",
    // 0: a peer of cpu, used only when named (TINYFIN_BACKEND=example). Declare more only when
    // this backend should run every program's ops by default: docs/plugin-abi.md.
    .priority = 0,
    .reserved_ = 0,
    .probe = example_probe,
    .init = example_init,
    .shutdown = example_shutdown,
    .device_count = example_device_count,
    .device_info = example_device_info,
    .buffer_alloc = host_buffer_alloc,
    .buffer_free = host_buffer_free,
    .buffer_host_ptr = host_buffer_host_ptr,
    .buffer_write = host_buffer_write,
    .buffer_read = host_buffer_read,
    .buffer_copy = host_buffer_copy,
    .supports = example_supports,
    .run = example_run,
    .synchronize = host_synchronize,
    .list_features = example_list_features,
    .get_proc = nullptr,
};

}  // namespace

// ---- Entry point -------------------------------------------------------------------------------

// The one exported symbol (rule R1); enter() refuses a core of another major version (rule R3).
extern "C" TF_PLUGIN_EXPORT const tf_plugin *tf_plugin_entry(const tf_host_api *host) {
    return tf_kit::enter(host, example_table);
}
