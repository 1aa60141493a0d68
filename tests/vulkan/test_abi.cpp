// The vulkan plugin through its C ABI alone (dlopen, no core): probe's reasons, buffer rules,
// queue order of host writes against recorded work, overlapping copies, what supports() refuses,
// the pipeline cache file. The plugin's path comes from TF_VULKAN_PLUGIN.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tinyfin/plugin.h"

namespace {

std::vector<std::string> g_log;

void host_log(int32_t level, const char *plugin, const char *message) {
    g_log.push_back(message ? message : "");
    if (std::getenv("TF_TEST_VERBOSE")) std::fprintf(stderr, "[%d] %s: %s\n", level, plugin, message);
}
const char *host_env(const char *name) { return name ? std::getenv(name) : nullptr; }

const tf_host_api k_host = {sizeof(tf_host_api), TF_ABI_VERSION, host_log, host_env};

struct Plugin {
    void *so = nullptr;
    const tf_plugin *t = nullptr;
    bool ready = false;
};

// scripts/sanitize lists Mesa's drivers in TINYFIN_PIN_LIBRARIES so that LeakSanitizer still
// sees them after a probe unloaded them. The core pins them for programs; this test loads the
// plugin without the core, so it pins them itself.
void pin_listed_libraries() {
    const char *list = std::getenv("TINYFIN_PIN_LIBRARIES");
    for (std::string rest = list ? list : ""; !rest.empty();) {
        const std::size_t colon = rest.find(':');
        const std::string name = rest.substr(0, colon);
        rest = colon == std::string::npos ? "" : rest.substr(colon + 1);
        if (void *h = name.empty() ? nullptr : dlopen(name.c_str(), RTLD_LAZY | RTLD_NODELETE)) dlclose(h);
    }
}

// The plugin, loaded once; exits the process when the file is not a loadable plugin.
Plugin &vk() {
    static Plugin p;
    if (p.so) return p;
    pin_listed_libraries();
    const char *path = std::getenv("TF_VULKAN_PLUGIN");
    if (!path) {
        std::fprintf(stderr, "TF_VULKAN_PLUGIN is not set\n");
        std::exit(1);
    }
    p.so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    auto entry = p.so ? reinterpret_cast<tf_plugin_entry_fn>(dlsym(p.so, TF_PLUGIN_ENTRY_NAME)) : nullptr;
    p.t = entry ? entry(&k_host) : nullptr;
    if (!p.t) {
        std::fprintf(stderr, "%s: not a loadable plugin: %s\n", path, p.so ? "no table" : dlerror());
        std::exit(1);
    }
    return p;
}

tf_error make_error() {
    tf_error err;
    std::memset(&err, 0, sizeof err);
    err.struct_size = sizeof err;
    return err;
}

// probe + init once; the device is ready afterwards.
const tf_plugin &ready() {
    Plugin &p = vk();
    if (!p.ready) {
        tf_error err = make_error();
        REQUIRE_MESSAGE(p.t->probe(&err) == TF_STATUS_OK, err.message);
        REQUIRE_MESSAGE(p.t->init(&err) == TF_STATUS_OK, err.message);
        p.ready = true;
    }
    return *p.t;
}

void shutdown() {
    Plugin &p = vk();
    if (p.ready) p.t->shutdown();
    p.ready = false;
}

tf_tensor_desc f32_vector(tf_buffer *buffer, int64_t n, uint64_t offset = 0) {
    tf_tensor_desc d;
    std::memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.dtype = TF_DTYPE_F32;
    d.rank = 1;
    d.shape[0] = n;
    d.strides[0] = 1;
    d.offset = offset;
    d.buffer = buffer;
    return d;
}

tf_op_desc unary(uint32_t op, const tf_tensor_desc &in, const tf_tensor_desc &out) {
    tf_op_desc d;
    std::memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.op = op;
    d.n_inputs = 1;
    d.n_outputs = 1;
    d.inputs = &in;
    d.outputs = &out;
    return d;
}

tf_buffer *alloc(uint64_t bytes) {
    tf_error err = make_error();
    tf_buffer *b = nullptr;
    REQUIRE_MESSAGE(ready().buffer_alloc(0, bytes, &b, &err) == TF_STATUS_OK, err.message);
    return b;
}

void write_floats(tf_buffer *b, const std::vector<float> &v, uint64_t offset = 0) {
    tf_error err = make_error();
    REQUIRE_MESSAGE(ready().buffer_write(b, offset, v.data(), v.size() * 4, &err) == TF_STATUS_OK, err.message);
}

std::vector<float> read_floats(tf_buffer *b, size_t n, uint64_t offset = 0) {
    std::vector<float> v(n);
    tf_error err = make_error();
    REQUIRE_MESSAGE(ready().buffer_read(b, offset, v.data(), n * 4, &err) == TF_STATUS_OK, err.message);
    return v;
}

// Sets an environment variable for one scope.
struct ScopedEnv {
    std::string name;
    std::string old;
    bool had;
    ScopedEnv(const char *n, const char *value) : name(n), had(std::getenv(n) != nullptr) {
        if (had) old = std::getenv(n);
        setenv(n, value, 1);
    }
    ~ScopedEnv() {
        if (had)
            setenv(name.c_str(), old.c_str(), 1);
        else
            unsetenv(name.c_str());
    }
};

}  // namespace

// Probe first, before anything initialised Vulkan in this process.
TEST_CASE("abi: probe names a missing loader") {
    ScopedEnv loader("TINYFIN_VULKAN_LOADER", "/nonexistent/libvulkan.so.1");
    tf_error err = make_error();
    CHECK(vk().t->probe(&err) == TF_STATUS_UNAVAILABLE);
    CHECK(std::string(err.message) == "no Vulkan loader (/nonexistent/libvulkan.so.1 not found)");
}

TEST_CASE("abi: probe names a missing device") {
    // The loader finds no driver at all.
    ScopedEnv icd("VK_ICD_FILENAMES", "/nonexistent/icd.json");
    ScopedEnv drivers("VK_DRIVER_FILES", "/nonexistent/icd.json");
    tf_error err = make_error();
    CHECK(vk().t->probe(&err) == TF_STATUS_UNAVAILABLE);
    CHECK(std::string(err.message).rfind("no Vulkan device with a compute queue", 0) == 0);
    MESSAGE(err.message);
}

TEST_CASE("abi: buffers check their ranges") {
    const tf_plugin &t = ready();
    tf_error err = make_error();
    tf_buffer *b = nullptr;
    CHECK(t.buffer_alloc(0, 0, &b, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(t.buffer_alloc(7, 16, &b, &err) == TF_STATUS_INVALID_ARGUMENT);
    b = alloc(10);
    char bytes[16] = {};
    err = make_error();
    CHECK(t.buffer_write(b, 4, bytes, 7, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(err.message).find("do not fit a buffer of 10 bytes") != std::string::npos);
    CHECK(t.buffer_read(b, 11, bytes, 0, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(t.buffer_write(b, 0, bytes, 10, &err) == TF_STATUS_OK);
    CHECK(t.buffer_read(b, 3, bytes, 7, &err) == TF_STATUS_OK);
    t.buffer_free(b);
}

TEST_CASE("abi: host writes and copies keep queue order with recorded work") {
    const tf_plugin &t = ready();
    const int64_t n = 1000;
    tf_buffer *a = alloc(n * 4), *b = alloc(n * 4), *c = alloc(n * 4);
    write_floats(a, std::vector<float>(n, 1.0f));
    tf_tensor_desc da = f32_vector(a, n), db = f32_vector(b, n), dc = f32_vector(c, n);
    tf_error err = make_error();
    tf_op_desc neg_b = unary(TF_OP_NEG, da, db);
    REQUIRE(t.supports(0, &neg_b));
    REQUIRE(t.run(0, &neg_b, &err) == TF_STATUS_OK);
    // a is busy (the neg above may not have run): this write must land after it.
    write_floats(a, std::vector<float>(n, 7.0f));
    tf_op_desc neg_c = unary(TF_OP_NEG, da, dc);
    REQUIRE(t.run(0, &neg_c, &err) == TF_STATUS_OK);
    CHECK(read_floats(b, n) == std::vector<float>(n, -1.0f));
    CHECK(read_floats(c, n) == std::vector<float>(n, -7.0f));

    // Overlapping copies within one buffer behave like memmove, in queue order after the negs.
    std::vector<float> ramp(n);
    for (int64_t i = 0; i < n; ++i) ramp[static_cast<size_t>(i)] = static_cast<float>(i);
    write_floats(a, ramp);
    REQUIRE(t.buffer_copy(a, 40, a, 0, 400, &err) == TF_STATUS_OK);  // forward overlap
    REQUIRE(t.buffer_copy(b, 0, a, 0, n * 4, &err) == TF_STATUS_OK);  // another buffer
    std::vector<float> want = ramp;
    std::memmove(want.data() + 10, want.data(), 400);
    CHECK(read_floats(a, n) == want);
    CHECK(read_floats(b, n) == want);
    REQUIRE(t.buffer_copy(a, 0, a, 40, 400, &err) == TF_STATUS_OK);  // backward overlap
    std::memmove(want.data(), want.data() + 10, 400);
    CHECK(read_floats(a, n) == want);
    CHECK(t.synchronize(0, &err) == TF_STATUS_OK);
    // Freed while busy, then reused by the next allocations: results stay right.
    tf_op_desc neg_again = unary(TF_OP_NEG, da, dc);
    REQUIRE(t.run(0, &neg_again, &err) == TF_STATUS_OK);
    t.buffer_free(a);
    tf_buffer *d = alloc(n * 4);
    write_floats(d, std::vector<float>(n, 3.0f));
    std::vector<float> negated(want.size());
    for (size_t i = 0; i < want.size(); ++i) negated[i] = -want[i];
    CHECK(read_floats(c, n) == negated);
    for (tf_buffer *x : {b, c, d}) t.buffer_free(x);
}

TEST_CASE("abi: supports() refuses what the kernels cannot do") {
    const tf_plugin &t = ready();
    tf_buffer *a = alloc(4096), *b = alloc(4096);
    tf_tensor_desc in = f32_vector(a, 100), out = f32_vector(b, 100);
    tf_op_desc op = unary(TF_OP_EXP, in, out);
    CHECK(t.supports(0, &op));
    CHECK_FALSE(t.supports(1, &op));  // no second device on lavapipe-only machines
    tf_tensor_desc half = in;
    half.dtype = TF_DTYPE_F16;
    tf_op_desc f16 = unary(TF_OP_EXP, half, out);
    CHECK_FALSE(t.supports(0, &f16));
    tf_tensor_desc repeated = out;  // an output with a broadcast axis: invocations would race
    repeated.rank = 2;
    repeated.shape[0] = 4, repeated.shape[1] = 25;
    repeated.strides[0] = 0, repeated.strides[1] = 1;
    tf_tensor_desc in2 = in;
    in2.rank = 2, in2.shape[0] = 4, in2.shape[1] = 25, in2.strides[0] = 25, in2.strides[1] = 1;
    tf_op_desc racy = unary(TF_OP_EXP, in2, repeated);
    CHECK_FALSE(t.supports(0, &racy));
    tf_tensor_desc overlapping = repeated;  // strides [1, 1]: elements alias each other
    overlapping.strides[0] = 1;
    tf_op_desc aliased = unary(TF_OP_EXP, in2, overlapping);
    CHECK_FALSE(t.supports(0, &aliased));
    tf_tensor_desc huge = in;  // one binding cannot span 200 MiB
    huge.shape[0] = 50 * 1024 * 1024;
    tf_tensor_desc huge_out = huge;
    tf_op_desc big = unary(TF_OP_EXP, huge, huge_out);
    CHECK_FALSE(t.supports(0, &big));
    tf_op_desc unknown = op;
    unknown.op = 4000;
    CHECK_FALSE(t.supports(0, &unknown));
    tf_op_desc wrong_arity = op;
    wrong_arity.n_inputs = 2;
    CHECK_FALSE(t.supports(0, &wrong_arity));
    tf_op_desc sum_no_params = unary(TF_OP_SUM, in, out);  // params required
    CHECK_FALSE(t.supports(0, &sum_no_params));
    // An empty tensor runs (and writes nothing).
    tf_tensor_desc empty_in = in, empty_out = out;
    empty_in.shape[0] = empty_out.shape[0] = 0;
    tf_op_desc empty = unary(TF_OP_EXP, empty_in, empty_out);
    tf_error err = make_error();
    CHECK(t.supports(0, &empty));
    CHECK(t.run(0, &empty, &err) == TF_STATUS_OK);
    // run() refuses what supports() refuses, with a message instead of a crash.
    CHECK(t.run(0, &f16, &err) == TF_STATUS_UNSUPPORTED);
    // A view that does not lie inside its buffer.
    tf_tensor_desc outside = f32_vector(a, 100, 4096 - 8);
    tf_op_desc beyond = unary(TF_OP_EXP, outside, out);
    err = make_error();
    CHECK(t.run(0, &beyond, &err) == TF_STATUS_INVALID_ARGUMENT);
    MESSAGE(err.message);
    t.buffer_free(a);
    t.buffer_free(b);
}

TEST_CASE("abi: the pipeline cache is written at shutdown and read at the next init") {
    char dir[] = "/tmp/tinyfin-vk-cache-XXXXXX";
    REQUIRE(mkdtemp(dir));
    {
        ScopedEnv cache("XDG_CACHE_HOME", dir);
        shutdown();  // the next init reads XDG_CACHE_HOME afresh
        const tf_plugin &t = ready();
        tf_buffer *a = alloc(64), *b = alloc(64);
        tf_tensor_desc in = f32_vector(a, 16), out = f32_vector(b, 16);
        tf_op_desc op = unary(TF_OP_SQRT, in, out);
        tf_error err = make_error();
        REQUIRE(t.run(0, &op, &err) == TF_STATUS_OK);
        // Buffers still allocated at shutdown are the plugin's to free.
        shutdown();
        const std::string file = std::string(dir) + "/tinyfin/vulkan-pipelines.bin";
        struct stat st;
        REQUIRE_MESSAGE(stat(file.c_str(), &st) == 0, file);
        CHECK(st.st_size > 0);
        g_log.clear();
        ready();
        bool loaded = false;
        for (const std::string &line : g_log)
            if (line.find("pipeline cache " + file) != std::string::npos &&
                line.find(" 0 bytes loaded") == std::string::npos)
                loaded = true;
        CHECK_MESSAGE(loaded, "no log line says the cache file was loaded");
        shutdown();
        std::remove(file.c_str());
        rmdir((std::string(dir) + "/tinyfin").c_str());
        rmdir(dir);
    }
    {
        // A cache directory that cannot be created is not an error.
        ScopedEnv cache("XDG_CACHE_HOME", "/proc/self/no-such-dir");
        const tf_plugin &t = ready();
        tf_buffer *a = alloc(64), *b = alloc(64);
        tf_tensor_desc in = f32_vector(a, 16), out = f32_vector(b, 16);
        tf_op_desc op = unary(TF_OP_SQRT, in, out);
        tf_error err = make_error();
        CHECK(t.run(0, &op, &err) == TF_STATUS_OK);
        CHECK(t.synchronize(0, &err) == TF_STATUS_OK);
        shutdown();
    }
}

namespace {

bool log_mentions(const std::string &a, const std::string &b) {
    for (const std::string &line : g_log)
        if (line.find(a) != std::string::npos && line.find(b) != std::string::npos) return true;
    return false;
}

// One sqrt on the device: creates a pipeline, so shutdown writes the cache.
void run_one_op() {
    const tf_plugin &t = ready();
    tf_buffer *a = alloc(64), *b = alloc(64);
    tf_tensor_desc in = f32_vector(a, 16), out = f32_vector(b, 16);
    tf_op_desc op = unary(TF_OP_SQRT, in, out);
    tf_error err = make_error();
    REQUIRE(t.run(0, &op, &err) == TF_STATUS_OK);
    REQUIRE(t.synchronize(0, &err) == TF_STATUS_OK);
}

bool is_regular(const std::string &path) {
    struct stat st;
    return lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

TEST_CASE("abi: the pipeline cache reads only bounded regular files and writes through no link") {
    char dir[] = "/tmp/tinyfin-vk-cache-XXXXXX";
    REQUIRE(mkdtemp(dir));
    const std::string sub = std::string(dir) + "/tinyfin";
    const std::string file = sub + "/vulkan-pipelines.bin";
    REQUIRE(mkdir(sub.c_str(), 0700) == 0);
    ScopedEnv cache("XDG_CACHE_HOME", dir);

    // A FIFO: opening it for reading would block every vulkan user forever.
    REQUIRE(mkfifo(file.c_str(), 0600) == 0);
    shutdown();
    g_log.clear();
    run_one_op();
    CHECK_MESSAGE(log_mentions(file, "a FIFO, not a regular file"), "no log line refuses the FIFO");
    shutdown();
    CHECK_MESSAGE(is_regular(file), "the cache written at shutdown replaces the FIFO");

    // A link to /dev/zero: would read without end. And a link at the old fixed temp name.
    const std::string victim = std::string(dir) + "/victim";
    {
        FILE *f = std::fopen(victim.c_str(), "w");
        REQUIRE(f);
        std::fputs("keep", f);
        std::fclose(f);
    }
    REQUIRE(std::remove(file.c_str()) == 0);
    REQUIRE(symlink("/dev/zero", file.c_str()) == 0);
    const std::string old_temp = file + ".tmp." + std::to_string(getpid());
    REQUIRE(symlink(victim.c_str(), old_temp.c_str()) == 0);
    g_log.clear();
    run_one_op();
    CHECK_MESSAGE(log_mentions(file, "a character device"), "no log line refuses /dev/zero");
    shutdown();
    CHECK(is_regular(file));
    struct stat st;
    REQUIRE(stat(victim.c_str(), &st) == 0);
    CHECK(st.st_size == 4);

    // A file larger than the bound is not read.
    REQUIRE(truncate(file.c_str(), off_t{65} << 20) == 0);
    g_log.clear();
    run_one_op();
    CHECK_MESSAGE(log_mentions(file, "more than the limit"), "no log line refuses the oversized file");
    shutdown();
    CHECK(stat(file.c_str(), &st) == 0);
    CHECK(st.st_size < (off_t{65} << 20));

    std::remove(file.c_str());
    std::remove(old_temp.c_str());
    std::remove(victim.c_str());
    rmdir(sub.c_str());
    rmdir(dir);
}

TEST_CASE("abi: TINYFIN_VULKAN_LOADER follows the plugin trust rules") {
    // The real loader, to name it through an untrusted directory.
    void *real = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    REQUIRE(real);
    Dl_info info{};
    REQUIRE(dladdr(dlsym(real, "vkGetInstanceProcAddr"), &info) != 0);
    char resolved[PATH_MAX];
    REQUIRE(realpath(info.dli_fname, resolved));
    char dir[] = "/tmp/tinyfin-vk-loader-XXXXXX";
    REQUIRE(mkdtemp(dir));
    const std::string open_dir = std::string(dir) + "/open";
    REQUIRE(mkdir(open_dir.c_str(), 0777) == 0);
    REQUIRE(chmod(open_dir.c_str(), 0777) == 0);
    const std::string link = open_dir + "/libvulkan.so.1";
    REQUIRE(symlink(resolved, link.c_str()) == 0);
    const std::string fifo = std::string(dir) + "/fifo.so";
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    shutdown();
    struct Expectation {
        std::string value, fragment;
    };
    for (const Expectation &e :
         {Expectation{"./libvulkan.so.1", "is not an absolute path"}, Expectation{link, "writable by others"},
          Expectation{fifo, "a FIFO"}, Expectation{"/proc/self/cwd/libvulkan.so.1", "under /proc"}}) {
        ScopedEnv loader("TINYFIN_VULKAN_LOADER", e.value.c_str());
        tf_error err = make_error();
        CHECK(vk().t->probe(&err) == TF_STATUS_UNAVAILABLE);
        INFO(err.message);
        CHECK(std::string(err.message).find("TINYFIN_VULKAN_LOADER refused") != std::string::npos);
        CHECK(std::string(err.message).find(e.fragment) != std::string::npos);
    }
    {
        // The same file through a trusted path loads.
        ScopedEnv loader("TINYFIN_VULKAN_LOADER", resolved);
        tf_error err = make_error();
        CHECK_MESSAGE(vk().t->probe(&err) == TF_STATUS_OK, err.message);
    }
    dlclose(real);
    std::remove(link.c_str());
    std::remove(fifo.c_str());
    rmdir(open_dir.c_str());
    rmdir(dir);
}

int main(int argc, char **argv) {
    // Without Vulkan the suite fails, unless TINYFIN_ALLOW_NO_VULKAN=1 (exit 77: skipped).
    {
        tf_error err = make_error();
        if (vk().t->probe(&err) != TF_STATUS_OK) {
            const char *allow = std::getenv("TINYFIN_ALLOW_NO_VULKAN");
            std::fprintf(stderr, "vulkan plugin unavailable: %s\n", err.message);
            return allow && std::strcmp(allow, "1") == 0 ? 77 : 1;
        }
    }
    doctest::Context context(argc, argv);
    const int result = context.run();
    shutdown();
    return result;
}
