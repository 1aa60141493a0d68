// The plugin kit (include/tinyfin/plugin_kit.hpp) and the drift it removed, against every real
// plugin of this build:
//   - hostile pooling and convolution descriptors (int32 and int64 extremes in kernel, stride,
//     padding, dilation, groups and sizes) are refused by every plugin's supports() without
//     undefined behaviour: scripts/sanitize asan runs this binary under UBSan, where the old
//     `padding * 2 > kernel` on int32 aborted;
//   - the one extent bound (tf_kit::max_extent): a tensor whose last byte lies beyond it is
//     refused by every plugin, one just inside it is accepted by cpu (blas takes the same
//     descriptor frame; the GPU plugins refuse it for their own binding limit);
//   - the kit's geometry and extent arithmetic against hand-computed values;
//   - the pieces the plugins share through the kit: the tf_plugin table (plugin_table), the dtype
//     switch, IEEE maximum/minimum, the attention shape rule, adamw's f32 constants, the buffer
//     range check.
// Plugin paths come from meson (TF_KIT_PLUGINS, ':'-separated); a plugin whose probe or init
// refuses on this machine (cuda without a GPU) still has supports() called before and after.
#include <doctest/doctest.h>

#include <tinyfin/plugin_kit.hpp>

#include <dlfcn.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

const char *host_get_env(const char *name) { return std::getenv(name); }
void host_log(int32_t, const char *, const char *) {}
const tf_host_api k_host = {sizeof(tf_host_api), TF_ABI_VERSION, host_log, host_get_env};

struct Plugin {
    std::string path;
    void *handle = nullptr;
    const tf_plugin *table = nullptr;
    bool ready = false;  // probe and init succeeded
};

// The core's TINYFIN_KEEP_PLUGINS_MAPPED and TINYFIN_PIN_LIBRARIES, which scripts/sanitize sets:
// drivers a probe loads and unloads again stay mapped, so LeakSanitizer can name what they keep.
bool keep_mapped() {
    const char *keep = std::getenv("TINYFIN_KEEP_PLUGINS_MAPPED");
    return keep && std::string(keep) == "1";
}

void pin_libraries() {
    const char *pins = std::getenv("TINYFIN_PIN_LIBRARIES");
    if (!keep_mapped() || !pins) return;
    std::stringstream list(pins);
    std::string name;
    while (std::getline(list, name, ':'))
        if (!name.empty()) dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);  // best effort
}

// Shut down and unloaded at exit, the way the core does (LeakSanitizer sees nothing left).
struct Registry {
    std::vector<Plugin> all;
    ~Registry() {
        for (Plugin &p : all) {
            if (p.ready) p.table->shutdown();
            if (!keep_mapped()) dlclose(p.handle);
        }
    }
};

std::vector<Plugin> &plugins() {
    static Registry loaded{[] {
        pin_libraries();
        std::vector<Plugin> out;
        std::stringstream paths(TF_KIT_PLUGINS);
        std::string path;
        while (std::getline(paths, path, ':')) {
            if (path.empty()) continue;
            Plugin p;
            p.path = path;
            p.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
            const std::string why = p.handle ? std::string() : std::string(dlerror());
            INFO(path, ": ", why);
            REQUIRE(p.handle != nullptr);
            auto entry = reinterpret_cast<tf_plugin_entry_fn>(dlsym(p.handle, TF_PLUGIN_ENTRY_NAME));
            REQUIRE((entry != nullptr));
            p.table = entry(&k_host);
            REQUIRE(p.table != nullptr);
            tf_error err{};
            err.struct_size = sizeof err;
            p.ready = p.table->probe(&err) == TF_STATUS_OK && p.table->init(&err) == TF_STATUS_OK;
            const std::string line = std::string(p.table->name) +
                                     (p.ready ? ": initialised" : std::string(": refused here: ") + err.message);
            MESSAGE(line);
            out.push_back(p);
        }
        return out;
    }()};
    return loaded.all;
}

tf_tensor_desc tensor(int32_t dtype, std::vector<int64_t> shape, std::vector<int64_t> strides = {},
                      uint64_t offset = 0) {
    tf_tensor_desc t{};
    t.struct_size = sizeof t;
    t.dtype = dtype;
    t.rank = static_cast<int32_t>(shape.size());
    int64_t stride = 1;
    for (int i = t.rank - 1; i >= 0; --i) {
        t.shape[i] = shape[static_cast<size_t>(i)];
        if (!strides.empty()) {
            t.strides[i] = strides[static_cast<size_t>(i)];
            continue;
        }
        t.strides[i] = stride;
        // Hostile shapes have no dense strides: saturate rather than overflow.
        const int64_t extent = shape[static_cast<size_t>(i)] > 0 ? shape[static_cast<size_t>(i)] : 1;
        if (__builtin_mul_overflow(stride, extent, &stride)) stride = INT64_MAX;
    }
    t.offset = offset;
    return t;
}

// supports() of every plugin on device 0 for op; names the plugins that said yes.
std::vector<std::string> accepting(const tf_op_desc &op) {
    std::vector<std::string> yes;
    for (const Plugin &p : plugins())
        if (p.table->supports(0, &op)) yes.push_back(p.table->name);
    return yes;
}

const int32_t k_extremes[] = {INT32_MIN, -1, 0, 1, 2, 3, INT32_MAX / 2, INT32_MAX / 2 + 1, INT32_MAX - 1, INT32_MAX};
const int64_t k_sizes[] = {0, 1, 7, INT32_MAX, int64_t{1} << 40, INT64_MAX / 2, INT64_MAX};

}  // namespace

TEST_CASE("kit: feature_list keys a device's features and prints their values") {
    std::vector<std::pair<std::string, std::string>> got;
    auto emit = [](void *user, const char *key, const char *value) {
        static_cast<std::vector<std::pair<std::string, std::string>> *>(user)->emplace_back(key, value);
    };
    const tf_kit::FeatureList device(emit, &got, 3), plugin(emit, &got);
    device.put("kind", "software");
    device.putf("groups", "%d x %u", 64, 2u);
    plugin.putf("kernels", "%zu (%s)", size_t{8}, "embedded");
    plugin.putf("long", "%s", std::string(400, 'x').c_str());
    REQUIRE(got.size() == 4);
    CHECK(got[0] == std::pair<std::string, std::string>("device3.kind", "software"));
    CHECK(got[1] == std::pair<std::string, std::string>("device3.groups", "64 x 2"));
    CHECK(got[2] == std::pair<std::string, std::string>("kernels", "8 (embedded)"));
    CHECK(got[3].second == std::string(255, 'x'));  // cut, NUL-terminated
}

TEST_CASE("kit: window_count and parameter checks at the int32 and int64 extremes") {
    CHECK(tf_kit::window_count(28, 2, 2, 0, 1) == 14);
    CHECK(tf_kit::window_count(5, 3, 1, 1, 1) == 5);
    CHECK(tf_kit::window_count(5, 3, 2, 0, 2) == 1);  // span 5
    CHECK(tf_kit::window_count(2, 3, 1, 0, 1) == 0);  // the window does not fit
    CHECK(tf_kit::window_count(4, 0, 1, 0, 1) == -1);
    CHECK(tf_kit::window_count(4, 1, 0, 0, 1) == -1);
    CHECK(tf_kit::window_count(4, 1, 1, -1, 1) == -1);
    CHECK(tf_kit::window_count(-1, 1, 1, 0, 1) == -1);
    // No overflow: the span INT32_MAX * (2^40 - 1) + 1 does not fit 64 bits (and exceeds the
    // padded size, so no window fits); the old int64 rule overflowed here.
    CHECK(tf_kit::window_count(INT64_MAX, int64_t{1} << 40, 1, INT32_MAX, INT32_MAX) == 0);
    CHECK(tf_kit::window_count(INT64_MAX, 2, 1, INT32_MAX, INT32_MAX) == -1);  // > INT64_MAX windows
    CHECK(tf_kit::window_count(INT64_MAX / 2, 2, 1, INT32_MAX, INT32_MAX) == INT64_MAX / 2 + INT32_MAX);
    CHECK(tf_kit::window_count(INT64_MAX, 1, 1, INT32_MAX, 1) == -1);  // more than INT64_MAX windows
    CHECK(tf_kit::window_count(INT64_MAX - 1, 1, 1, 0, 1) == INT64_MAX - 1);

    tf_params_pool2d pool{sizeof pool, {INT32_MAX, 2}, {1, 1}, {INT32_MAX / 2 + 1, 0}, 0};
    CHECK_FALSE(tf_kit::pool_params_valid(pool));  // padding * 2 overflows int32 here
    pool.padding[0] = INT32_MAX / 2;
    CHECK(tf_kit::pool_params_valid(pool));
    pool.kernel[1] = INT32_MIN;
    CHECK_FALSE(tf_kit::pool_params_valid(pool));
    tf_params_conv2d conv{sizeof conv, {1, 1}, {0, 0}, {1, 1}, 1};
    CHECK(tf_kit::conv_params_valid(conv));
    conv.groups = 0;
    CHECK_FALSE(tf_kit::conv_params_valid(conv));
    tf_error err{};
    err.struct_size = sizeof err;
    CHECK(tf_kit::check_conv_params("conv2d", conv, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(err.message).find("groups 0") != std::string::npos);  // R11: the values
}

TEST_CASE("kit: extent_of and check_tensor apply one bound, max_extent = INT64_MAX") {
    static_assert(tf_kit::max_extent == static_cast<uint64_t>(INT64_MAX));
    // Two f32 elements, the second at byte (INT64_MAX / 4) * 4 = INT64_MAX - 3: inside.
    tf_tensor_desc inside = tensor(TF_DTYPE_F32, {2}, {INT64_MAX / 4});
    tf_kit::Extent e = tf_kit::extent_of(inside);
    CHECK_FALSE(e.overflow);
    CHECK(e.last_byte == static_cast<uint64_t>(INT64_MAX) - 3);
    CHECK(tf_kit::check_tensor("t", "input", 0, inside, false, nullptr) == TF_STATUS_OK);
    // Four bytes further (offset 4): the last byte is INT64_MAX + 1.
    tf_tensor_desc beyond = tensor(TF_DTYPE_F32, {2}, {INT64_MAX / 4}, 4);
    CHECK(tf_kit::extent_of(beyond).overflow);
    CHECK(tf_kit::check_tensor("t", "input", 0, beyond, false, nullptr) == TF_STATUS_INVALID_ARGUMENT);
    // An empty tensor addresses nothing whatever its strides, but its sizes' product must fit.
    CHECK(tf_kit::check_tensor("t", "input", 0, tensor(TF_DTYPE_F32, {0, 3}, {INT64_MAX, INT64_MAX}), false, nullptr) ==
          TF_STATUS_OK);
    CHECK(tf_kit::check_tensor("t", "input", 0, tensor(TF_DTYPE_F32, {0, INT64_MAX, 4}, {1, 1, 1}), false, nullptr) ==
          TF_STATUS_INVALID_ARGUMENT);
}

TEST_CASE("every plugin: hostile pooling descriptors are refused by supports() without UB") {
    REQUIRE_FALSE(plugins().empty());
    const uint32_t ops[] = {TF_OP_MAX_POOL2D, TF_OP_AVG_POOL2D, TF_OP_AVG_POOL2D_BACKWARD, TF_OP_MAX_POOL2D_BACKWARD};
    int checked = 0;
    for (uint32_t id : ops) {
        for (int32_t kernel : k_extremes)
            for (int32_t padding : k_extremes)
                for (int32_t stride : {INT32_MIN, 0, 1, INT32_MAX})
                    for (int64_t size : {int64_t{4}, int64_t{INT32_MAX}, INT64_MAX}) {
                        tf_params_pool2d p{sizeof p, {kernel, 2}, {stride, 1}, {padding, 0}, 1};
                        tf_tensor_desc x = tensor(TF_DTYPE_F32, {1, 1, size, 4});
                        tf_tensor_desc y = tensor(TF_DTYPE_F32, {1, 1, 1, 3});
                        const bool forward = id == TF_OP_MAX_POOL2D || id == TF_OP_AVG_POOL2D;
                        tf_tensor_desc in[2] = {forward ? x : y, x};
                        tf_tensor_desc out = forward ? y : x;
                        tf_op_desc op{sizeof op, id, id == TF_OP_MAX_POOL2D_BACKWARD ? 2u : 1u, 1, in, &out, &p};
                        // Only a valid window geometry may be accepted, never an extreme one.
                        const bool valid = tf_kit::pool_params_valid(p) && tf_kit::pool_shapes_fit(op, p);
                        const std::vector<std::string> yes = accepting(op);
                        INFO("op ", tf_kit::op_name(id), " kernel ", kernel, " padding ", padding, " stride ", stride,
                             " H ", size);
                        if (!valid) CHECK(yes.empty());
                        ++checked;
                    }
    }
    CHECK(checked > 1000);
}

TEST_CASE("every plugin: hostile convolution descriptors are refused by supports() without UB") {
    int checked = 0;
    const uint32_t ops[] = {TF_OP_CONV2D, TF_OP_CONV2D_GRAD_INPUT, TF_OP_CONV2D_GRAD_WEIGHT};
    for (uint32_t id : ops)
        for (int32_t v : k_extremes)
            for (int64_t size : k_sizes)
                for (int field = 0; field < 4; ++field) {
                    tf_params_conv2d p{sizeof p, {1, 1}, {0, 0}, {1, 1}, 1};
                    if (field == 0) p.stride[0] = v;
                    if (field == 1) p.padding[0] = v;
                    if (field == 2) p.dilation[0] = v;
                    if (field == 3) p.groups = v;
                    // Kernel height `size`: dilation * (size - 1) overflowed int64 in the old rule.
                    tf_tensor_desc x = tensor(TF_DTYPE_F32, {1, 2, 5, 5});
                    tf_tensor_desc w = tensor(TF_DTYPE_F32, {2, 2, size, 1});
                    tf_tensor_desc y = tensor(TF_DTYPE_F32, {1, 2, 3, 5});
                    tf_tensor_desc in[2];
                    tf_tensor_desc out;
                    if (id == TF_OP_CONV2D) in[0] = x, in[1] = w, out = y;
                    if (id == TF_OP_CONV2D_GRAD_INPUT) in[0] = y, in[1] = w, out = x;
                    if (id == TF_OP_CONV2D_GRAD_WEIGHT) in[0] = y, in[1] = x, out = w;
                    tf_op_desc op{sizeof op, id, 2, 1, in, &out, &p};
                    const bool valid = tf_kit::conv_params_valid(p) && tf_kit::conv_shapes_fit(op, p);
                    INFO("op ", tf_kit::op_name(id), " field ", field, " value ", v, " KH ", size);
                    if (!valid) CHECK(accepting(op).empty());
                    ++checked;
                }
    CHECK(checked > 500);
}

TEST_CASE("every plugin: one extent bound, a tensor beyond INT64_MAX is refused everywhere") {
    // contiguous: f32 [2] with the stride above -> f32 [2]; no memory (supports() decides from
    // the descriptor alone).
    tf_tensor_desc out = tensor(TF_DTYPE_F32, {2});
    tf_tensor_desc inside = tensor(TF_DTYPE_F32, {2}, {INT64_MAX / 4});
    tf_tensor_desc beyond = tensor(TF_DTYPE_F32, {2}, {INT64_MAX / 4}, 4);
    tf_op_desc op{sizeof op, TF_OP_CONTIGUOUS, 1, 1, &beyond, &out, nullptr};
    CHECK(accepting(op).empty());
    op.inputs = &inside;
    const std::vector<std::string> yes = accepting(op);
    bool cpu_accepts = false;
    for (const std::string &name : yes) cpu_accepts = cpu_accepts || name == "cpu";
    CHECK(cpu_accepts);
    // matmul, which blas claims: a beyond-the-bound operand is refused by every plugin too.
    tf_tensor_desc a = tensor(TF_DTYPE_F32, {2, 2}, {INT64_MAX / 4, 1}, 4);
    tf_tensor_desc b = tensor(TF_DTYPE_F32, {2, 2});
    tf_tensor_desc mm_in[2] = {a, b};
    tf_tensor_desc c = tensor(TF_DTYPE_F32, {2, 2});
    tf_op_desc mm{sizeof mm, TF_OP_MATMUL, 2, 1, mm_in, &c, nullptr};
    CHECK(accepting(mm).empty());
}

TEST_CASE("kit: the dtypes column of ops.def, against the table's text") {
    CHECK(std::string(tf_kit::op_dtypes(TF_OP_EMBEDDING)) == "AI>A");
    CHECK(std::string(tf_kit::op_dtypes(TF_OP_ADAMW_STEP)) == "F>FFF");
    CHECK(std::string(tf_kit::op_dtypes(TF_OP_COUNT_)).empty());
    CHECK(tf_kit::operand_class(TF_OP_WHERE, 0) == 'B');
    CHECK(tf_kit::operand_class(TF_OP_WHERE, 3) == 'A');
    CHECK(tf_kit::operand_class(TF_OP_ARGMAX, 1) == 'I');
    CHECK(tf_kit::operand_class(TF_OP_ARGMAX, 2) == 0);
    CHECK(tf_kit::class_admits('N', TF_DTYPE_I64));
    CHECK_FALSE(tf_kit::class_admits('N', TF_DTYPE_BOOL));
    CHECK_FALSE(tf_kit::class_admits('F', TF_DTYPE_I32));
    CHECK(tf_kit::class_admits('A', TF_DTYPE_BOOL));
    CHECK_FALSE(tf_kit::class_admits('A', 99));
    CHECK_FALSE(tf_kit::class_admits('?', TF_DTYPE_F32));
}

TEST_CASE("kit: optional inputs, a '?' after the letter in ops.def's dtypes column") {
    CHECK(std::string(tf_kit::op_dtypes(TF_OP_ATTENTION)) == "FFFF?>F");
    CHECK(tf_kit::input_optional(TF_OP_ATTENTION, 3));
    for (uint32_t i : {0u, 1u, 2u, 4u}) CHECK_FALSE(tf_kit::input_optional(TF_OP_ATTENTION, i));
    CHECK_FALSE(tf_kit::input_optional(TF_OP_ADD, 1));
    CHECK_FALSE(tf_kit::input_optional(TF_OP_COUNT_, 0));
    // The marker is no operand: the output's class is still operand 4.
    CHECK(tf_kit::operand_class(TF_OP_ATTENTION, 3) == 'F');
    CHECK(tf_kit::operand_class(TF_OP_ATTENTION, 4) == 'F');
    CHECK(tf_kit::operand_class(TF_OP_ATTENTION, 5) == 0);
    tf_tensor_desc absent{};
    CHECK(tf_kit::is_absent(absent));
    CHECK_FALSE(tf_kit::is_absent(tensor(TF_DTYPE_F32, {})));
}

TEST_CASE("every plugin: attention with an absent mask is claimed, an absent required input refused") {
    // q [2, 3, 4], k [2, 5, 4], v [2, 5, 6] -> [2, 3, 6]; the mask (input 3) absent (ABI 1.1).
    tf_params_attention params{sizeof params, 1, 0, 0.5};
    for (int32_t d : {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16}) {
        tf_tensor_desc in[4] = {tensor(d, {2, 3, 4}), tensor(d, {2, 5, 4}), tensor(d, {2, 5, 6}), tf_tensor_desc{}};
        tf_tensor_desc out = tensor(d, {2, 3, 6});
        tf_op_desc op{sizeof op, TF_OP_ATTENTION, 4, 1, in, &out, &params};
        tf_kit::OpRule rule{};
        CHECK(tf_kit::check_call(&op, &rule, nullptr) == TF_STATUS_OK);
        CHECK(tf_kit::dtypes_defined(op, rule.kind));
        CHECK(tf_kit::check_tensors("attention", op, false, nullptr) == TF_STATUS_OK);
        // Every plugin of this build that claims attention with a zero mask claims it absent too:
        // an absent mask is never a reason to refuse (and never read).
        tf_tensor_desc zero = tensor(d, {2, 3, 5}, {0, 0, 0});
        tf_tensor_desc with_zero[4] = {in[0], in[1], in[2], zero};
        tf_op_desc masked{sizeof masked, TF_OP_ATTENTION, 4, 1, with_zero, &out, &params};
        for (const Plugin &p : plugins()) {
            INFO(p.table->name, " ", tf_kit::dtype_name(d));
            CHECK(p.table->supports(0, &op) == p.table->supports(0, &masked));
            if (std::string(p.table->name) == "cpu") CHECK(p.table->supports(0, &op));
        }
        // The same descriptor with q absent: no plugin takes it, and the kit says why.
        tf_tensor_desc no_q[4] = {tf_tensor_desc{}, in[1], in[2], zero};
        tf_op_desc bad{sizeof bad, TF_OP_ATTENTION, 4, 1, no_q, &out, &params};
        tf_error err{};
        err.struct_size = sizeof err;
        CHECK(tf_kit::check_call(&bad, &rule, &err) == TF_STATUS_INVALID_ARGUMENT);
        CHECK(std::string(err.message).find("input 0 is absent") != std::string::npos);
        CHECK(accepting(bad).empty());
    }
    // add with an absent input: refused everywhere.
    tf_tensor_desc add_in[2] = {tensor(TF_DTYPE_F32, {4}), tf_tensor_desc{}};
    tf_tensor_desc add_out = tensor(TF_DTYPE_F32, {4});
    tf_op_desc add{sizeof add, TF_OP_ADD, 2, 1, add_in, &add_out, nullptr};
    CHECK(accepting(add).empty());
}

TEST_CASE("every plugin: supports() stays inside ops.def's dtypes column, cpu takes all of it") {
    // Every op of a built-in kind, with small shapes, in every dtype (and for cast every pair):
    // a plugin may claim less than the column (its own limits), never more; cpu, the fallback,
    // claims every descriptor the column and the kind's rule allow. Zeroed params are valid for
    // these ops (no reduced axes, axis 0, clamp [0, 0], fill 0).
    alignas(8) unsigned char params[256] = {};
    const uint32_t params_size = sizeof params;
    std::memcpy(params, &params_size, sizeof params_size);
    const int32_t dtypes[] = {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16, TF_DTYPE_I32, TF_DTYPE_I64, TF_DTYPE_BOOL};
    int checked = 0;
    for (uint32_t id = 0; id < TF_OP_COUNT_; ++id) {
        tf_kit::OpRule rule{};
        REQUIRE(tf_kit::find_op_rule(id, &rule));
        if (rule.kind == tf_kit::OpKind::OWN) continue;
        const std::vector<int64_t> shape =
            rule.kind == tf_kit::OpKind::MATMUL ? std::vector<int64_t>{2, 2} : std::vector<int64_t>{4};
        for (int32_t d : dtypes)
            for (int32_t to : dtypes) {
                if (id != TF_OP_CAST && to != d) continue;
                tf_tensor_desc in[3];
                for (uint32_t i = 0; i < rule.n_inputs; ++i)
                    in[i] = tensor(rule.kind == tf_kit::OpKind::WHERE && i == 0 ? TF_DTYPE_BOOL : d, shape);
                int32_t out_dtype = to;
                std::vector<int64_t> out_shape = shape;
                if (rule.kind == tf_kit::OpKind::COMPARE) out_dtype = TF_DTYPE_BOOL;
                if (rule.kind == tf_kit::OpKind::ARG) out_dtype = TF_DTYPE_I64, out_shape = {1};
                tf_tensor_desc out = tensor(out_dtype, out_shape);
                tf_op_desc op{sizeof op,
                              id,
                              rule.n_inputs,
                              1,
                              rule.n_inputs ? in : nullptr,
                              &out,
                              rule.params_size ? params : nullptr};
                const bool defined = tf_kit::dtypes_defined(op, rule.kind);
                for (const Plugin &p : plugins()) {
                    const bool claims = p.table->supports(0, &op) != 0;
                    INFO(p.table->name, ": ", rule.name, " ", tf_kit::dtype_name(d), " -> ",
                         tf_kit::dtype_name(out_dtype), " (column ", tf_kit::op_dtypes(id), ")");
                    if (!defined) CHECK_FALSE(claims);
                    if (std::string(p.table->name) == "cpu") CHECK(claims == defined);
                }
                ++checked;
            }
    }
    CHECK(checked > 200);
}

// ---- The pieces every plugin took from the kit in the second pass (issue 19) -------------------

namespace table_check {
struct Bare {
    static tf_status probe(tf_error *) { return TF_STATUS_OK; }
    static tf_status init(tf_error *) { return TF_STATUS_OK; }
    static void shutdown() {}
    static int32_t device_count() { return 1; }
    static tf_status device_info(int32_t, tf_device_info *, tf_error *) { return TF_STATUS_OK; }
    static tf_status buffer_alloc(int32_t, uint64_t, tf_buffer **, tf_error *) { return TF_STATUS_OK; }
    static void buffer_free(tf_buffer *) {}
    static tf_status buffer_write(tf_buffer *, uint64_t, const void *, uint64_t, tf_error *) { return TF_STATUS_OK; }
    static tf_status buffer_read(tf_buffer *, uint64_t, void *, uint64_t, tf_error *) { return TF_STATUS_OK; }
    static tf_status buffer_copy(tf_buffer *, uint64_t, tf_buffer *, uint64_t, uint64_t, tf_error *) {
        return TF_STATUS_OK;
    }
    static int32_t supports(int32_t, const tf_op_desc *) { return 1; }
    static tf_status run(int32_t, const tf_op_desc *, tf_error *) { return TF_STATUS_OK; }
    static tf_status synchronize(int32_t, tf_error *) { return TF_STATUS_OK; }
    static void list_features(tf_feature_fn, void *) {}
};
struct WithExtensions : Bare {
    static void *buffer_host_ptr(tf_buffer *) { return nullptr; }
    static void *get_proc(const char *) { return nullptr; }
};
constexpr tf_plugin bare = tf_kit::plugin_table<Bare>("bare", "1.2.3", 7);
constexpr tf_plugin full = tf_kit::plugin_table<WithExtensions>("full", "0", 0);
}  // namespace table_check

TEST_CASE("kit: plugin_table fills the frame and every member, the optional ones only where present") {
    using namespace table_check;
    CHECK((bare.struct_size == sizeof(tf_plugin)));
    CHECK((bare.abi_version == TF_ABI_VERSION));
    CHECK(std::string(bare.name) == "bare");
    CHECK(std::string(bare.version) == "1.2.3");
    CHECK((bare.priority == 7));
    CHECK((bare.reserved_ == 0));
    CHECK((bare.probe == &Bare::probe));
    CHECK((bare.device_info == &Bare::device_info));
    CHECK((bare.buffer_copy == &Bare::buffer_copy));
    CHECK((bare.run == &Bare::run));
    CHECK((bare.list_features == &Bare::list_features));
    CHECK((bare.buffer_host_ptr == nullptr));
    CHECK((bare.get_proc == nullptr));
    CHECK((full.buffer_host_ptr == &WithExtensions::buffer_host_ptr));
    CHECK((full.get_proc == &WithExtensions::get_proc));
    // Every real plugin's table comes from it: the frame and the members the ABI requires.
    for (const Plugin &p : plugins()) {
        INFO(p.table->name);
        CHECK(p.table->struct_size == sizeof(tf_plugin));
        CHECK(p.table->reserved_ == 0);
        CHECK((p.table->probe && p.table->init && p.table->shutdown && p.table->device_count && p.table->device_info &&
               p.table->buffer_alloc && p.table->buffer_free && p.table->buffer_write && p.table->buffer_read &&
               p.table->buffer_copy && p.table->supports && p.table->run && p.table->synchronize &&
               p.table->list_features));
        const std::string name = p.table->name;
        CHECK(((p.table->buffer_host_ptr != nullptr) == (name == "cpu" || name == "blas")));
        CHECK(((p.table->get_proc != nullptr) == (name == "cpu" || name == "blas")));  // buffer_wrap
    }
}

TEST_CASE("kit: the dtype switch passes each dtype's storage type, and refuses the rest") {
    struct F16 {};
    struct BF16 {};
    struct Bool {};
    using Switch = tf_kit::DtypeSwitch<F16, BF16, Bool>;
    auto size_of = [](auto switch_fn, int32_t dtype) {
        size_t size = 0;
        const bool known = switch_fn(dtype, [&](auto tag) {
            using T = decltype(tag);
            size = std::is_empty_v<T> ? 100 : sizeof(T);  // the plugin's tag types are empty here
        });
        return known ? size : 0;
    };
    auto floats = [](int32_t d, auto &&fn) { return Switch::with_float(d, fn); };
    auto numeric = [](int32_t d, auto &&fn) { return Switch::with_numeric(d, fn); };
    auto any = [](int32_t d, auto &&fn) { return Switch::with_any(d, fn); };
    auto index = [](int32_t d, auto &&fn) { return Switch::with_index(d, fn); };
    auto bits = [](int32_t d, auto &&fn) { return Switch::with_bits(d, fn); };
    CHECK(size_of(floats, TF_DTYPE_F32) == 4);
    CHECK(size_of(floats, TF_DTYPE_F16) == 100);
    CHECK(size_of(floats, TF_DTYPE_BF16) == 100);
    CHECK(size_of(floats, TF_DTYPE_I32) == 0);
    CHECK(size_of(index, TF_DTYPE_I64) == 8);
    CHECK(size_of(index, TF_DTYPE_F32) == 0);
    CHECK(size_of(numeric, TF_DTYPE_I32) == 4);
    CHECK(size_of(numeric, TF_DTYPE_BF16) == 100);
    CHECK(size_of(numeric, TF_DTYPE_BOOL) == 0);
    CHECK(size_of(any, TF_DTYPE_BOOL) == 100);
    CHECK(size_of(any, TF_DTYPE_I64) == 8);
    CHECK(size_of(any, 99) == 0);
    for (int32_t d : {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16, TF_DTYPE_I32, TF_DTYPE_I64, TF_DTYPE_BOOL}) {
        INFO(tf_kit::dtype_name(d));
        CHECK(size_of(bits, d) == static_cast<size_t>(tf_kit::dtype_size(d)));
    }
    CHECK(size_of(bits, -1) == 0);
}

TEST_CASE("kit: maximum_of and minimum_of are IEEE 754-2019's: NaN wins, -0 < +0, any order") {
    const float nan = std::nanf(""), inf = INFINITY;
    CHECK(tf_kit::maximum_of(1.0f, 2.0f) == 2.0f);
    CHECK(tf_kit::minimum_of(1.0f, 2.0f) == 1.0f);
    CHECK(std::isnan(tf_kit::maximum_of(nan, 1.0f)));
    CHECK(std::isnan(tf_kit::maximum_of(1.0f, nan)));
    CHECK(std::isnan(tf_kit::minimum_of(-inf, nan)));
    CHECK_FALSE(std::signbit(tf_kit::maximum_of(-0.0f, 0.0f)));
    CHECK_FALSE(std::signbit(tf_kit::maximum_of(0.0f, -0.0f)));
    CHECK(std::signbit(tf_kit::minimum_of(-0.0f, 0.0f)));
    CHECK(std::signbit(tf_kit::minimum_of(0.0f, -0.0f)));
    CHECK(tf_kit::sign_bit(-0.0) == true);
    CHECK(tf_kit::sign_bit(0.0) == false);
    CHECK(tf_kit::maximum_of<int64_t>(INT64_MIN, -1) == -1);
    CHECK(tf_kit::minimum_of<int32_t>(INT32_MAX, -5) == -5);
}

TEST_CASE("kit: attention_shapes_fit, with and without the mask") {
    tf_tensor_desc in[4] = {tensor(TF_DTYPE_F32, {2, 3, 4}), tensor(TF_DTYPE_F32, {2, 5, 4}),
                            tensor(TF_DTYPE_F32, {2, 5, 6}), tensor(TF_DTYPE_F32, {2, 3, 5})};
    tf_tensor_desc out = tensor(TF_DTYPE_F32, {2, 3, 6});
    const tf_params_attention params{};
    const tf_op_desc op{sizeof(tf_op_desc), TF_OP_ATTENTION, 4, 1, in, &out, &params};
    CHECK(tf_kit::attention_shapes_fit(op));
    in[3] = tf_tensor_desc{};  // absent: TF_TENSOR_ABSENT (struct_size 0)
    CHECK(tf_kit::attention_shapes_fit(op));
    in[3] = tensor(TF_DTYPE_F32, {2, 3, 4});  // mask [Tq, D] instead of [Tq, Tk]
    CHECK_FALSE(tf_kit::attention_shapes_fit(op));
    in[3] = tensor(TF_DTYPE_F32, {2, 3, 5});
    out = tensor(TF_DTYPE_F32, {1, 3, 6});  // another batch
    CHECK_FALSE(tf_kit::attention_shapes_fit(op));
    out = tensor(TF_DTYPE_F32, {2, 3, 6});
    in[2] = tensor(TF_DTYPE_F32, {2, 4, 6});  // v's Tk differs from k's
    CHECK_FALSE(tf_kit::attention_shapes_fit(op));
    in[0] = tensor(TF_DTYPE_F32, {3});  // rank 1
    CHECK_FALSE(tf_kit::attention_shapes_fit(op));
}

TEST_CASE("kit: adamw_f32 rounds each constant once, in the params' order") {
    tf_params_adamw_step p{};
    p.decay = 1 - 1e-9;  // rounds to 1.0f
    p.beta1 = 0.9;
    p.one_minus_beta1 = 0.1;
    p.beta2 = 0.999;
    p.one_minus_beta2 = 1e-3;
    p.root_bias_correction2 = 0.5;
    p.eps = 1e-8;
    p.step_size = 3e-4;
    const tf_kit::AdamwF32 c = tf_kit::adamw_f32(p);
    const float *k = &c.decay;
    const double want[8] = {p.decay, p.beta1,    p.one_minus_beta1, p.beta2, p.one_minus_beta2, p.root_bias_correction2,
                            p.eps,   p.step_size};
    static_assert(sizeof c == 8 * sizeof(float));
    for (int i = 0; i < 8; ++i) CHECK(k[i] == static_cast<float>(want[i]));
}

TEST_CASE("kit: check_buffer_range, for any plugin's tf_buffer") {
    struct Buffer {
        uint64_t size;
    };
    const Buffer b{16};
    tf_error err{};
    err.struct_size = sizeof err;
    const char *host = "";
    CHECK(tf_kit::check_buffer_range("w", &b, 8, 8, host, &err) == TF_STATUS_OK);
    CHECK(tf_kit::check_buffer_range("w", &b, 0, 0, nullptr, &err) == TF_STATUS_OK);  // nothing moves
    CHECK(tf_kit::check_buffer_range("w", &b, 9, 8, host, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(err.message).find("8 bytes at offset 9") != std::string::npos);
    CHECK(tf_kit::check_buffer_range("w", &b, UINT64_MAX, 2, host, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(tf_kit::check_buffer_range("w", &b, 0, 1, nullptr, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(err.message) == "w: host pointer is NULL");
    CHECK(tf_kit::check_buffer_range<Buffer>("w", nullptr, 0, 0, host, &err) == TF_STATUS_INVALID_ARGUMENT);
}
