// Placement and fallback with a device-resident backend, using the test-only
// fakegpu plugin (tests/loader/plugins/fakegpu.c): buffers the core cannot
// address, and only f32 add implemented. meson registers this binary twice:
//
//   fakegpu:*         TINYFIN_PLUGIN_PATH=fakegpu.so TINYFIN_BACKEND=fakegpu
//   fallback-error:*  the same with TINYFIN_FALLBACK=error
//   report-one:*      fakegpu on the path, TINYFIN_BACKEND=cpu
#include "loader_support.hpp"

#include <tinyfin/plugin.h>

#include <dlfcn.h>

#include <algorithm>
#include <vector>

using loader_test::contains;
using loader_test::required_env;

namespace {

using AddCountFn = uint64_t (*)(void);

// One of fakegpu's own counters, read through its get_proc hatch from the very copy of
// fakegpu.so the core loaded (RTLD_NOLOAD: no second copy).
AddCountFn fakegpu_counter(const char *name) {
    (void)tinyfin::backend_name();  // the core has loaded its plugins
    const std::string path = required_env("LOADER_FAKEGPU");
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    REQUIRE_MESSAGE(handle != nullptr, "the core has not loaded " << path);
    auto entry = reinterpret_cast<tf_plugin_entry_fn>(dlsym(handle, TF_PLUGIN_ENTRY_NAME));
    REQUIRE(bool(entry));
    const tf_host_api host = {sizeof(tf_host_api), TF_ABI_VERSION, nullptr, nullptr};
    const tf_plugin *table = entry(&host);
    REQUIRE(table != nullptr);
    REQUIRE(bool(table->get_proc));
    auto fn = reinterpret_cast<AddCountFn>(table->get_proc(name));
    REQUIRE(bool(fn));
    return fn;
}

// The adds fakegpu ran.
uint64_t fakegpu_add_count() {
    static AddCountFn count = fakegpu_counter("fakegpu_add_count");
    return count();
}

// How often fakegpu's init ran.
uint64_t fakegpu_init_count() {
    static AddCountFn count = fakegpu_counter("fakegpu_init_count");
    return count();
}

const tinyfin::Device fakegpu0{"fakegpu", 0};

std::vector<float> values_of(const tinyfin::Tensor &t) { return t.to_vector<float>(); }

struct Counters {
    uint64_t ops = 0, to_device = 0, to_host = 0;
};

Counters counters_of(const std::string &backend) {
    const tinyfin::Stats stats = tinyfin::stats();
    const tinyfin::Stats::Backend *b = stats.backend(backend);
    REQUIRE_MESSAGE(b != nullptr, "stats() has no entry for " << backend);
    return {b->ops, b->bytes_to_device, b->bytes_to_host};
}

}  // namespace

// ---- fakegpu: TINYFIN_BACKEND=fakegpu ----------------------------------------------------

TEST_CASE("fakegpu: is selected and described") {
    CHECK(tinyfin::backend_name() == "fakegpu");
    CHECK(tinyfin::default_device().str() == "fakegpu:0");
    CHECK(tinyfin::Device::parse("fakegpu:0") == fakegpu0);
    const auto available = tinyfin::available_backends();
    REQUIRE(available.size() >= 2);
    CHECK(available.front() == "fakegpu");
    CHECK(available.back() == "cpu");

    const tinyfin::Report report = tinyfin::report();
    CHECK(report.selected == "fakegpu");
    const tinyfin::PluginReport *plugin = loader_test::find_plugin(report, required_env("LOADER_FAKEGPU"));
    REQUIRE(plugin != nullptr);
    CHECK(plugin->outcome == "loaded");
    CHECK(plugin->name == "fakegpu");
    CHECK(plugin->priority == 50);
    CHECK(plugin->initialised);
    REQUIRE(plugin->devices.size() == 1);
    CHECK(plugin->devices[0].name == "fake gpu");
    CHECK(plugin->devices[0].kind == "gpu");
    CHECK_FALSE(plugin->devices[0].host_addressable);
    CHECK(plugin->devices[0].uuid == "fakegpu-0000");
    CHECK(plugin->supported_ops == std::vector<std::string>{"add"});
    CHECK(std::find(plugin->features.begin(), plugin->features.end(),
                    std::pair<std::string, std::string>{
                        "fakegpu.purpose", "test stand-in for a device-resident backend"}) != plugin->features.end());
}

TEST_CASE("fakegpu: factories place tensors on fakegpu:0") {
    CHECK(tinyfin::zeros({2, 3}).device() == fakegpu0);
    CHECK(tinyfin::ones({4}).device() == fakegpu0);
    CHECK(tinyfin::full({2}, 7.0).device() == fakegpu0);
    CHECK(tinyfin::empty({5}).device() == fakegpu0);
    CHECK(tinyfin::scalar(1.0).device() == fakegpu0);
    CHECK(tinyfin::arange(0, 4).device() == fakegpu0);
    auto v = tinyfin::from_vector<float>({1, 2, 3}, {3});
    CHECK(v.device() == fakegpu0);
    CHECK(values_of(v) == std::vector<float>{1, 2, 3});
    CHECK(values_of(tinyfin::full({2}, 7.0)) == std::vector<float>{7, 7});
    CHECK(tinyfin::from_vector<float>({1}, {1}, tinyfin::Device{"cpu", 0}).device().str() == "cpu");
}

TEST_CASE("fakegpu: add runs on the device, with no fallback") {
    auto a = tinyfin::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    auto b = tinyfin::from_vector<float>({10, 20, 30, 40, 50, 60}, {2, 3});
    const uint64_t adds = fakegpu_add_count();
    const Counters before = counters_of("fakegpu");
    const uint64_t fallbacks = tinyfin::stats().total_fallbacks;

    auto c = tinyfin::add(a, b);

    CHECK(fakegpu_add_count() == adds + 1);
    CHECK(counters_of("fakegpu").ops == before.ops + 1);
    CHECK(tinyfin::stats().fallbacks_of("add") == 0);
    CHECK(tinyfin::stats().total_fallbacks == fallbacks);
    CHECK(c.device() == fakegpu0);
    CHECK(values_of(c) == std::vector<float>{11, 22, 33, 44, 55, 66});
}

TEST_CASE("fakegpu: broadcasting and strided adds run on the device") {
    auto a = tinyfin::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    auto row = tinyfin::from_vector<float>({10, 20, 30}, {3});
    uint64_t adds = fakegpu_add_count();

    SUBCASE("[2,3] + [3]") {
        auto c = tinyfin::add(a, row);
        CHECK(fakegpu_add_count() == adds + 1);
        CHECK(c.shape() == tinyfin::Shape{2, 3});
        CHECK(c.device() == fakegpu0);
        CHECK(values_of(c) == std::vector<float>{11, 22, 33, 14, 25, 36});
    }
    SUBCASE("[3] + [2,3]") {
        auto c = tinyfin::add(row, a);
        CHECK(fakegpu_add_count() == adds + 1);
        CHECK(values_of(c) == std::vector<float>{11, 22, 33, 14, 25, 36});
    }
    SUBCASE("[2,1] + [1,3]") {
        auto col = tinyfin::from_vector<float>({100, 200}, {2, 1});
        auto c = tinyfin::add(col, row.reshape({1, 3}));
        CHECK(fakegpu_add_count() == adds + 1);
        CHECK(c.shape() == tinyfin::Shape{2, 3});
        CHECK(values_of(c) == std::vector<float>{110, 120, 130, 210, 220, 230});
    }
    SUBCASE("transposed view + contiguous") {
        auto t = a.transpose(0, 1);  // [3,2], strides [1,3]
        auto b = tinyfin::from_vector<float>({0, 0, 0, 0, 0, 100}, {3, 2});
        auto c = tinyfin::add(t, b);
        CHECK(fakegpu_add_count() == adds + 1);
        CHECK(values_of(c) == std::vector<float>{1, 4, 2, 5, 3, 106});
    }
    SUBCASE("sliced view with an offset") {
        auto s = a.slice(1, 1, 3);  // [[2,3],[5,6]]
        auto c = tinyfin::add(s, s);
        CHECK(fakegpu_add_count() == adds + 1);
        CHECK(values_of(c) == std::vector<float>{4, 6, 10, 12});
    }
    CHECK(tinyfin::stats().fallbacks_of("add") == 0);
}

TEST_CASE("fakegpu: mul falls back to cpu and the result comes back to fakegpu:0") {
    auto a = tinyfin::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    auto b = tinyfin::from_vector<float>({2, 3, 4, 5, 6, 7}, {2, 3});
    const uint64_t bytes = 6 * sizeof(float);
    tinyfin::reset_stats();
    const uint64_t adds = fakegpu_add_count();

    auto c = tinyfin::mul(a, b);

    const tinyfin::Stats stats = tinyfin::stats();
    CHECK(stats.fallbacks_of("mul") == 1);
    CHECK(stats.total_fallbacks == 1);
    const Counters gpu = counters_of("fakegpu");
    CHECK(gpu.ops == 0);
    CHECK(gpu.to_host == 2 * bytes);  // both inputs down
    CHECK(gpu.to_device == bytes);  // the result up
    CHECK(counters_of("cpu").ops == 1);
    CHECK(fakegpu_add_count() == adds);
    CHECK(c.device() == fakegpu0);

    CHECK(values_of(c) == std::vector<float>{2, 6, 12, 20, 30, 42});
    CHECK(counters_of("fakegpu").to_host == 3 * bytes);  // reading the result is counted too
    CHECK(tinyfin::stats().fallbacks_of("mul") == 1);
}

TEST_CASE("fakegpu: to(cpu) copies back, to(fakegpu) copies up") {
    auto a = tinyfin::from_vector<float>({1.5f, -2.0f, 3.25f, 0.0f}, {2, 2});
    tinyfin::reset_stats();

    auto host = a.to(tinyfin::Device::parse("cpu"));
    CHECK(host.device().str() == "cpu");
    CHECK(host.shape() == tinyfin::Shape{2, 2});
    CHECK(counters_of("fakegpu").to_host == 4 * sizeof(float));
    CHECK(values_of(host) == std::vector<float>{1.5f, -2.0f, 3.25f, 0.0f});

    auto back = host.to("fakegpu:0");
    CHECK(back.device() == fakegpu0);
    CHECK(counters_of("fakegpu").to_device == 4 * sizeof(float));
    CHECK(values_of(back) == std::vector<float>{1.5f, -2.0f, 3.25f, 0.0f});
    CHECK(a.to(fakegpu0).impl() == a.impl());  // already there: the same tensor
    CHECK(tinyfin::stats().total_fallbacks == 0);
}

// ---- fallback-error: TINYFIN_FALLBACK=error ----------------------------------------------

TEST_CASE("fallback-error: mul throws FallbackError naming the op and the backend") {
    CHECK(tinyfin::backend_name() == "fakegpu");
    auto a = tinyfin::from_vector<float>({1, 2, 3}, {3});
    auto b = tinyfin::from_vector<float>({4, 5, 6}, {3});
    std::string what;
    try {
        (void)tinyfin::mul(a, b);
    } catch (const tinyfin::FallbackError &e) {
        what = e.what();
    }
    CAPTURE(what);
    REQUIRE_FALSE(what.empty());
    CHECK(contains(what, "mul"));
    CHECK(contains(what, "fakegpu"));

    // The operands' layout is named when it is not plain contiguous: strides and offsets are
    // what plugins refuse most often (the TINYFIN_LOG=fallback line uses the same text).
    auto m = tinyfin::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    std::string strided;
    try {
        (void)tinyfin::mul(m.slice(1, 0, 2).transpose(0, 1), m.slice(1, 1, 3).transpose(0, 1));
    } catch (const tinyfin::FallbackError &e) {
        strided = e.what();
    }
    CAPTURE(strided);
    CHECK(contains(strided, "f32[2,2] strides [1,3], "));
    CHECK(contains(strided, "f32[2,2] strides [1,3] offset 1"));

    const uint64_t adds = fakegpu_add_count();
    auto c = tinyfin::add(a, b);
    CHECK(fakegpu_add_count() == adds + 1);
    CHECK(c.device() == fakegpu0);
    CHECK(values_of(c) == std::vector<float>{5, 7, 9});
}

// ---- report-one: TINYFIN_BACKEND=cpu, fakegpu loaded but not needed -----------------------

TEST_CASE("report-one: backend_report initialises only the backend it describes") {
    CHECK(tinyfin::backend_name() == "cpu");
    CHECK(fakegpu_init_count() == 0);

    const tinyfin::PluginReport cpu = tinyfin::backend_report("cpu");
    CHECK(cpu.outcome == "loaded");
    CHECK(cpu.initialised);
    REQUIRE_FALSE(cpu.devices.empty());
    CHECK(cpu.devices[0].host_addressable);
    CHECK(fakegpu_init_count() == 0);  // report() would have initialised fakegpu too

    const tinyfin::PluginReport fake = tinyfin::backend_report("fakegpu");
    CHECK(fakegpu_init_count() == 1);
    CHECK(fake.initialised);
    CHECK(fake.supported_ops == std::vector<std::string>{"add"});
    CHECK(std::find(fake.features.begin(), fake.features.end(),
                    std::pair<std::string, std::string>{
                        "fakegpu.purpose", "test stand-in for a device-resident backend"}) != fake.features.end());
    (void)tinyfin::backend_report("fakegpu");
    CHECK(fakegpu_init_count() == 1);  // init runs once

    std::string what;
    try {
        (void)tinyfin::backend_report("nosuch");
    } catch (const tinyfin::BackendError &e) {
        what = e.what();
    }
    CHECK(contains(what, "no loaded backend is named 'nosuch'"));
}
