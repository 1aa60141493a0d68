// The cuda plugin through its ABI alone (no core): it loads with dlopen, its entry returns a
// valid table, and probe either refuses with the CUDA error by name (no driver or no device: CI)
// or succeeds, in which case a short device round trip runs too. TF_CUDA_PLUGIN names the file.
#include <doctest/doctest.h>

#include <tinyfin/plugin.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <dlfcn.h>

namespace {

void host_log(int32_t, const char *plugin, const char *message) {
    MESSAGE((std::string(plugin ? plugin : "?") + ": " + (message ? message : "")));
}
const char *host_env(const char *name) { return name ? std::getenv(name) : nullptr; }

const tf_host_api k_host = {sizeof(tf_host_api), TF_ABI_VERSION, host_log, host_env};

tf_error make_error() {
    tf_error err;
    std::memset(&err, 0, sizeof err);
    err.struct_size = sizeof err;
    return err;
}

struct Plugin {
    void *handle = nullptr;
    tf_plugin_entry_fn entry = nullptr;

    Plugin() {
        const char *path = std::getenv("TF_CUDA_PLUGIN");
        REQUIRE_MESSAGE(path, "TF_CUDA_PLUGIN is not set");
        handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        const char *why = handle ? "" : dlerror();
        REQUIRE_MESSAGE(handle, why);
        entry = reinterpret_cast<tf_plugin_entry_fn>(dlsym(handle, TF_PLUGIN_ENTRY_NAME));
        REQUIRE(bool(entry));
    }
    ~Plugin() {
        if (handle) dlclose(handle);
    }
};

bool starts_with(const std::string &s, const char *prefix) { return s.rfind(prefix, 0) == 0; }

tf_tensor_desc vector_desc(tf_buffer *buffer, int64_t n) {
    tf_tensor_desc d;
    std::memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.dtype = TF_DTYPE_F32;
    d.rank = 1;
    d.shape[0] = n;
    d.strides[0] = 1;
    d.buffer = buffer;
    return d;
}

}  // namespace

TEST_CASE("cuda plugin: dlopen and the table") {
    Plugin plugin;
    const tf_plugin *table = plugin.entry(&k_host);
    REQUIRE(table);
    CHECK(table->struct_size == sizeof(tf_plugin));
    CHECK(table->abi_version == TF_ABI_VERSION);
    CHECK(std::string(table->name) == "cuda");
    CHECK(bool(table->version));
    CHECK(table->priority > 10);  // above blas
    CHECK(bool(table->probe));
    CHECK(bool(table->init));
    CHECK(bool(table->shutdown));
    CHECK(bool(table->device_count));
    CHECK(bool(table->device_info));
    CHECK(bool(table->buffer_alloc));
    CHECK(bool(table->buffer_free));
    CHECK_FALSE(bool(table->buffer_host_ptr));  // device memory
    CHECK(bool(table->buffer_write));
    CHECK(bool(table->buffer_read));
    CHECK(bool(table->buffer_copy));
    CHECK(bool(table->supports));
    CHECK(bool(table->run));
    CHECK(bool(table->synchronize));
    CHECK(bool(table->list_features));
}

TEST_CASE("cuda plugin: refuses a core of another major") {
    Plugin plugin;
    tf_host_api future = k_host;
    future.abi_version = (TF_ABI_VERSION_MAJOR + 1u) << 16;
    CHECK(plugin.entry(&future) == nullptr);
    CHECK(plugin.entry(nullptr) == nullptr);
}

TEST_CASE("cuda plugin: probe refuses cleanly or the device works") {
    Plugin plugin;
    const tf_plugin *table = plugin.entry(&k_host);
    REQUIRE(table);
    tf_error err = make_error();
    const tf_status status = table->probe(&err);
    const std::string message = err.message;
    if (status != TF_STATUS_OK) {
        MESSAGE("probe refused: " << message);
        CHECK(status == TF_STATUS_UNAVAILABLE);
        // No driver or device: the CUDA error by name, number and text. Libraries missing: the
        // loader's reason.
        const bool driver =
            starts_with(message, "CUDA driver not usable: cudaError") || starts_with(message, "no CUDA device");
        const bool library = starts_with(message, "cuBLAS not found: ") || starts_with(message, "cuDNN not found: ");
        CHECK_MESSAGE((driver || library), message);
        if (starts_with(message, "CUDA driver not usable")) CHECK(message.find(" (") != std::string::npos);
        return;
    }

    MESSAGE("probe accepted: a CUDA device is present");
    err = make_error();
    REQUIRE_MESSAGE(table->init(&err) == TF_STATUS_OK, err.message);
    const int32_t count = table->device_count();
    REQUIRE(count >= 1);
    tf_device_info info;
    std::memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    err = make_error();
    REQUIRE(table->device_info(0, &info, &err) == TF_STATUS_OK);
    CHECK((info.kind == TF_DEVICE_KIND_GPU_DISCRETE || info.kind == TF_DEVICE_KIND_GPU_INTEGRATED));
    CHECK(info.memory_total > 0);
    CHECK(info.host_addressable == 0);
    CHECK(std::strlen(info.uuid) == 32);
    for (const char *c = info.uuid; *c; ++c) CHECK(std::isxdigit(static_cast<unsigned char>(*c)));

    // fill, add, read back.
    constexpr int64_t n = 1000;
    tf_buffer *a = nullptr, *b = nullptr;
    err = make_error();
    REQUIRE(table->buffer_alloc(0, n * 4, &a, &err) == TF_STATUS_OK);
    REQUIRE(table->buffer_alloc(0, n * 4, &b, &err) == TF_STATUS_OK);
    std::vector<float> host(n);
    for (int64_t i = 0; i < n; ++i) host[i] = static_cast<float>(i);
    REQUIRE(table->buffer_write(a, 0, host.data(), n * 4, &err) == TF_STATUS_OK);
    tf_tensor_desc da = vector_desc(a, n), db = vector_desc(b, n);
    tf_params_fill fill{sizeof(tf_params_fill), 0.5};
    tf_op_desc op{sizeof(tf_op_desc), TF_OP_FILL, 0, 1, &da, &db, &fill};
    REQUIRE(table->supports(0, &op));
    REQUIRE(table->run(0, &op, &err) == TF_STATUS_OK);
    tf_tensor_desc inputs[2] = {da, db};
    op = tf_op_desc{sizeof(tf_op_desc), TF_OP_ADD, 2, 1, inputs, &db, nullptr};
    // The output aliases an input here, which the ABI rules out: use a third buffer.
    tf_buffer *c = nullptr;
    REQUIRE(table->buffer_alloc(0, n * 4, &c, &err) == TF_STATUS_OK);
    tf_tensor_desc dc = vector_desc(c, n);
    op.outputs = &dc;
    REQUIRE(table->supports(0, &op));
    REQUIRE(table->run(0, &op, &err) == TF_STATUS_OK);
    REQUIRE(table->buffer_read(c, 0, host.data(), n * 4, &err) == TF_STATUS_OK);
    for (int64_t i = 0; i < n; ++i) REQUIRE(host[i] == static_cast<float>(i) + 0.5f);
    REQUIRE(table->synchronize(0, &err) == TF_STATUS_OK);
    table->buffer_free(a);
    table->buffer_free(b);
    table->buffer_free(c);
    table->shutdown();
}
