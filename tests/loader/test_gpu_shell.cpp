// The plugin kit's GPU shell (tinyfin/plugin_kit/gpu/plugin_shell.hpp) as an out-of-tree plugin
// uses it: a device whose "memory" is host memory, one kernel row (add on f32 with an accepts that
// refuses one size), and the tf_plugin table the shell builds, called through its members as the
// core would. Checked against hand-computed values: devices and their info, the buffer members'
// range checks and copies, supports() from the op's rule, the rows' dtypes and accepts and the
// Api's fits(), run() with the same answers and messages naming the op, after_op once per op, and
// exceptions turned into statuses.
#include <doctest/doctest.h>

#include <tinyfin/plugin_kit/gpu/plugin_shell.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace fake {
class Device;
}

struct tf_buffer {
    fake::Device *owner;
    uint64_t size;
    std::vector<unsigned char> bytes;
};

namespace fake {

int g_ops_finished = 0;

class Device {
public:
    explicit Device(int index) : index_(index) {}
    void info(tf_device_info &out) {
        std::snprintf(out.name, sizeof out.name, "fake %d", index_);
        out.kind = TF_DEVICE_KIND_GPU_SOFTWARE;
        out.memory_total = 1 << 20;
    }
    tf_buffer *allocate(uint64_t size) {
        if (size > (1 << 20)) tf_kit::raise(TF_STATUS_OUT_OF_MEMORY, "fake: %llu bytes", (unsigned long long)size);
        return new tf_buffer{this, size, std::vector<unsigned char>(size)};
    }
    void free(tf_buffer *buffer) noexcept { delete buffer; }
    void write(tf_buffer *b, uint64_t offset, const void *src, uint64_t size) {
        std::memcpy(b->bytes.data() + offset, src, size);
    }
    void read(tf_buffer *b, uint64_t offset, void *dst, uint64_t size) {
        std::memcpy(dst, b->bytes.data() + offset, size);
    }
    void copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset, uint64_t size) {
        std::memcpy(dst->bytes.data() + dst_offset, src->bytes.data() + src_offset, size);
    }
    void synchronize() {}
    const char *label() const { return "fake:0"; }
    std::mutex mutex;

private:
    int index_;
};

float *at(const tf_tensor_desc &t) { return reinterpret_cast<float *>(t.buffer->bytes.data() + t.offset); }

// Contiguous f32 add (the rule has made the shapes equal); throws like a failed launch for a
// 7-element output, so run()'s guard is seen.
void add_f32(Device &, const tf_op_desc &op) {
    const int64_t n = tf_kit::numel(op.outputs[0]);
    if (n == 7) tf_kit::raise(TF_STATUS_INTERNAL, "add: the fake launch failed");
    for (int64_t i = 0; i < n; ++i) at(op.outputs[0])[i] = at(op.inputs[0])[i] + at(op.inputs[1])[i];
}
// The kernel takes contiguous operands only.
bool contiguous(const Device &, const tf_op_desc &op) {
    for (uint32_t i = 0; i < op.n_inputs; ++i)
        if (!tf_kit::is_contiguous(op.inputs[i])) return false;
    return tf_kit::is_contiguous(op.outputs[0]);
}

using Row = tf_kit::KernelRow<void (*)(Device &, const tf_op_desc &), bool (*)(const Device &, const tf_op_desc &)>;
constexpr Row k_rows[] = {{TF_OP_ADD, tf_kit::k_f32, add_f32, contiguous}};

struct Api {
    static constexpr const char *name = "fake";
    using Device = fake::Device;
    struct State {
        std::vector<std::unique_ptr<Device>> devices;
    };
    static tf_status probe(tf_error *) { return TF_STATUS_OK; }
    static tf_status open(State &s, tf_error *) {
        s.devices.push_back(std::make_unique<Device>(0));
        return TF_STATUS_OK;
    }
    static void close() noexcept {}
    template <class F>
    static void call(Device &d, F &&f) {
        std::lock_guard lock(d.mutex);
        f();
    }
    static void list_features(const State &, tf_feature_fn emit, void *user) { emit(user, "fake", "yes"); }
    static std::span<const Row> kernels(const Device &) { return k_rows; }
    // Every kernel of this device takes at most 1000 elements per tensor.
    static bool fits(const Device &, const tf_op_desc &op) { return tf_kit::numel(op.outputs[0]) <= 1000; }
    static void after_op(Device &) { ++g_ops_finished; }
};

}  // namespace fake

namespace {

constexpr tf_plugin k_table = tf_kit::gpu::GpuPlugin<fake::Api>::table("fake", "0.1.0", 5);

const char *host_get_env(const char *name) { return std::getenv(name); }
void host_log(int32_t, const char *, const char *) {}
const tf_host_api k_host = {sizeof(tf_host_api), TF_ABI_VERSION, host_log, host_get_env};

tf_tensor_desc vector(tf_buffer *buffer, int32_t dtype, int64_t n, int64_t stride = 1) {
    tf_tensor_desc t{};
    t.struct_size = sizeof t;
    t.dtype = dtype;
    t.rank = 1;
    t.shape[0] = n;
    t.strides[0] = stride;
    t.buffer = buffer;
    return t;
}

tf_op_desc add_desc(tf_tensor_desc *in, tf_tensor_desc *out) {
    tf_op_desc op{};
    op.struct_size = sizeof op;
    op.op = TF_OP_ADD;
    op.n_inputs = 2;
    op.n_outputs = 1;
    op.inputs = in;
    op.outputs = out;
    return op;
}

}  // namespace

TEST_CASE("gpu shell: devices, buffers, supports and run from the rows") {
    // What the entry point does (TF_KIT_PLUGIN_ENTRY): the plugin's name goes into messages.
    REQUIRE(tf_kit::enter(&k_host, k_table) == &k_table);
    tf_error err{};
    err.struct_size = sizeof err;
    REQUIRE(k_table.probe(&err) == TF_STATUS_OK);
    REQUIRE(k_table.init(&err) == TF_STATUS_OK);
    CHECK(k_table.device_count() == 1);
    CHECK(k_table.priority == 5);
    const bool host_ptr = k_table.buffer_host_ptr != nullptr;
    CHECK_FALSE(host_ptr);  // device-resident memory
    tf_device_info info{};
    info.struct_size = sizeof info;
    CHECK(k_table.device_info(0, &info, &err) == TF_STATUS_OK);
    CHECK(std::string(info.name) == "fake 0");
    CHECK(k_table.device_info(1, &info, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(err.message).find("no fake device 1") != std::string::npos);

    // Buffers: 0 bytes refused, an allocation failure is the device's status, ranges checked.
    tf_buffer *a = nullptr, *b = nullptr, *c = nullptr, *none = nullptr;
    CHECK(k_table.buffer_alloc(0, 0, &none, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(k_table.buffer_alloc(0, 2 << 20, &none, &err) == TF_STATUS_OUT_OF_MEMORY);
    CHECK(none == nullptr);
    REQUIRE(k_table.buffer_alloc(0, 16, &a, &err) == TF_STATUS_OK);
    REQUIRE(k_table.buffer_alloc(0, 16, &b, &err) == TF_STATUS_OK);
    REQUIRE(k_table.buffer_alloc(0, 16, &c, &err) == TF_STATUS_OK);
    const float x[4] = {1, 2, 3, 4}, y[4] = {10, 20, 30, 40};
    CHECK(k_table.buffer_write(a, 0, x, 16, &err) == TF_STATUS_OK);
    CHECK(k_table.buffer_write(b, 0, y, 16, &err) == TF_STATUS_OK);
    CHECK(k_table.buffer_write(a, 4, x, 16, &err) == TF_STATUS_INVALID_ARGUMENT);  // past the end
    float back[4] = {};
    CHECK(k_table.buffer_copy(c, 8, a, 0, 8, &err) == TF_STATUS_OK);
    CHECK(k_table.buffer_read(c, 8, back, 8, &err) == TF_STATUS_OK);
    CHECK(back[0] == 1.0f);
    CHECK(back[1] == 2.0f);

    // supports: the row (f32, contiguous), the rule (shapes), fits (at most 1000 elements).
    tf_tensor_desc in[2] = {vector(a, TF_DTYPE_F32, 4), vector(b, TF_DTYPE_F32, 4)};
    tf_tensor_desc out[1] = {vector(c, TF_DTYPE_F32, 4)};
    tf_op_desc op = add_desc(in, out);
    CHECK(k_table.supports(0, &op) == 1);
    CHECK(k_table.supports(1, &op) == 0);  // no such device
    CHECK(k_table.supports(0, nullptr) == 0);
    tf_tensor_desc in32[2] = {vector(a, TF_DTYPE_I32, 4), vector(b, TF_DTYPE_I32, 4)};
    tf_tensor_desc out32[1] = {vector(c, TF_DTYPE_I32, 4)};
    tf_op_desc op32 = add_desc(in32, out32);
    CHECK(k_table.supports(0, &op32) == 0);  // no i32 row
    tf_tensor_desc strided[2] = {vector(a, TF_DTYPE_F32, 2, 2), vector(b, TF_DTYPE_F32, 2)};
    tf_tensor_desc out2[1] = {vector(c, TF_DTYPE_F32, 2)};
    tf_op_desc op_strided = add_desc(strided, out2);
    CHECK(k_table.supports(0, &op_strided) == 0);  // the row's accepts
    tf_tensor_desc short_in[2] = {vector(a, TF_DTYPE_F32, 3), vector(b, TF_DTYPE_F32, 4)};
    tf_op_desc bad_shapes = add_desc(short_in, out);
    CHECK(k_table.supports(0, &bad_shapes) == 0);  // the op's rule
    tf_buffer *large[3] = {};
    for (tf_buffer *&buffer : large) REQUIRE(k_table.buffer_alloc(0, 4 * 1001, &buffer, &err) == TF_STATUS_OK);
    tf_tensor_desc big_in[2] = {vector(large[0], TF_DTYPE_F32, 1001), vector(large[1], TF_DTYPE_F32, 1001)};
    tf_tensor_desc big_out[1] = {vector(large[2], TF_DTYPE_F32, 1001)};
    tf_op_desc big = add_desc(big_in, big_out);
    CHECK(k_table.supports(0, &big) == 0);  // fits
    big_in[0].shape[0] = big_in[1].shape[0] = big_out[0].shape[0] = 1000;
    CHECK(k_table.supports(0, &big) == 1);
    big_in[0].shape[0] = big_in[1].shape[0] = big_out[0].shape[0] = 1001;
    op.op = TF_OP_MUL;
    CHECK(k_table.supports(0, &op) == 0);  // no row for the op
    op.op = TF_OP_ADD;

    // run: the row's kernel under call(), after_op once; refusals with the op's name.
    const int finished = fake::g_ops_finished;
    REQUIRE(k_table.run(0, &op, &err) == TF_STATUS_OK);
    CHECK(fake::g_ops_finished == finished + 1);
    CHECK(k_table.synchronize(0, &err) == TF_STATUS_OK);
    CHECK(k_table.buffer_read(c, 0, back, 16, &err) == TF_STATUS_OK);
    CHECK(back[0] == 11.0f);
    CHECK(back[1] == 22.0f);
    CHECK(back[2] == 33.0f);
    CHECK(back[3] == 44.0f);
    CHECK(k_table.run(0, &op32, &err) == TF_STATUS_UNSUPPORTED);
    CHECK(std::string(err.message).find("add: no fake kernel for i32") != std::string::npos);
    CHECK(k_table.run(0, &bad_shapes, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(err.message).find("add:") == 0);
    CHECK(k_table.run(0, &big, &err) == TF_STATUS_UNSUPPORTED);
    CHECK(std::string(err.message).find("beyond what one fake kernel can address") != std::string::npos);
    CHECK(fake::g_ops_finished == finished + 1);

    // A kernel's exception is a status and a message, not a crash.
    tf_tensor_desc in7[2] = {vector(large[0], TF_DTYPE_F32, 7), vector(large[1], TF_DTYPE_F32, 7)};
    tf_tensor_desc out7[1] = {vector(large[2], TF_DTYPE_F32, 7)};
    tf_op_desc op7 = add_desc(in7, out7);
    CHECK(k_table.run(0, &op7, &err) == TF_STATUS_INTERNAL);
    CHECK(std::string(err.message).find("the fake launch failed") != std::string::npos);

    for (tf_buffer *buffer : {a, b, c, large[0], large[1], large[2]}) k_table.buffer_free(buffer);
    k_table.shutdown();
    CHECK(k_table.device_count() == 0);
}
