// example: the plugin of examples/plugin-template written in C++20 with the installed plugin kit
// (<tinyfin/plugin_kit.hpp>, docs/plugin-kit.md) instead of the ABI header alone. It runs add,
// mul and relu on f32 tensors of any shape and strides in host memory; tinyfin runs every other op
// on its cpu plugin. Copy this directory, rename the plugin, and grow it.
//
// What the kit does here that plugin.c writes by hand: the entry point's version check
// (tf_kit::enter), messages into tf_error (fail) and exceptions turned into a status at the ABI
// boundary (guarded: nothing C++ ever crosses it), every op's rule from ops.def (check_op), the
// table's frame (plugin_table), supports() and run() from the kernel rows, and the buffers: host
// memory from the kit's caching allocator, shared with tinyfin's cpu and blas plugins
// (<tinyfin/plugin_kit/host_buffer.hpp>), so tensors move between them without copies.
//
// In the order of a small backend: kernels, their rows, the plugin's members, the entry point.
#include <tinyfin/plugin.h>
#include <tinyfin/plugin_kit.hpp>
#include <tinyfin/plugin_kit/host_buffer.hpp>

#include <cstdio>
#include <functional>
#include <span>

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

// The three ops, one loop each: inputs arrive already broadcast to the output's shape.
template <class Fn>
tf_status binary(const tf_op_desc &d, tf_error *) {
    const tf_tensor_desc &out = d.outputs[0];
    for (int64_t i = 0, n = numel(out); i < n; ++i)
        element(out, i) = Fn{}(element(d.inputs[0], i), element(d.inputs[1], i));
    return TF_STATUS_OK;
}

tf_status relu(const tf_op_desc &d, tf_error *) {
    const tf_tensor_desc &out = d.outputs[0];
    for (int64_t i = 0, n = numel(out); i < n; ++i) {
        const float a = element(d.inputs[0], i);
        element(out, i) = a > 0.0f || a != a ? a : 0.0f;  // relu keeps NaN
    }
    return TF_STATUS_OK;
}

// ---- Ops -------------------------------------------------------------------------------------

// The kernels as rows {op, dtypes, kernel}: the kit derives supports() and run() from them (each
// op's rule from ops.def first: tinyfin/plugin_kit/rules.hpp). Another dtype or a layout limit is
// another row, or an accepts predicate as the row's fourth member (docs/writing-a-plugin.md).
constexpr HostRow k_kernels[] = {
    {TF_OP_ADD, k_f32, binary<std::plus<float>>},
    {TF_OP_MUL, k_f32, binary<std::multiplies<float>>},
    {TF_OP_RELU, k_f32, relu},
};

// ---- The plugin's members ------------------------------------------------------------------

// The table's members as static functions (tf_kit::plugin_table fills the table by name); the
// buffers are the kit's host buffers; supports and run come from k_kernels.
struct Example : HostBuffers {
    static constexpr std::span<const HostRow> kernels{k_kernels};

    // Host memory is always there; a GPU plugin checks for its driver here.
    static tf_status probe(tf_error *) { return TF_STATUS_OK; }

    static tf_status init(tf_error *) {
        log_line(TF_LOG_DEBUG, "init");
        return TF_STATUS_OK;
    }

    // The kit's host cache holds freed blocks for reuse: give them back.
    static void shutdown() { host_cache_release(); }

    static int32_t device_count() { return 1; }

    static tf_status device_info(int32_t device, tf_device_info *info, tf_error *err) {
        if (tf_status s = check_host_device("device_info", device, err); s != TF_STATUS_OK) return s;
        if (!info) return fail(err, TF_STATUS_INVALID_ARGUMENT, "device_info: info is NULL");
        tf_device_info full = host_device_info();
        std::snprintf(full.name, sizeof full.name, "example host memory");
        copy_device_info(full, info);
        return TF_STATUS_OK;
    }

    static void list_features(tf_feature_fn emit, void *user) {
        FeatureList(emit, user).put("example.ops", "add mul relu");
    }
};

// Constant-initialised: nothing runs at dlopen time (rule R2). Priority 0: a peer of cpu, used only
// when named (TINYFIN_BACKEND=example); declare more only when this backend should run every
// program's ops by default (docs/plugin-abi.md).
constexpr tf_plugin example_table = plugin_table<Example>("example", "0.1.0", 0);

}  // namespace

// ---- Entry point -------------------------------------------------------------------------------

// The one exported symbol (rule R1); enter() refuses a core of another major version (rule R3).
TF_KIT_PLUGIN_ENTRY(example_table);
