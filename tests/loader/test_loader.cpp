// The loader's fault matrix through the C++ API. meson registers this binary
// several times, each with its own environment and doctest filter, because the
// plugin registry is process-global and configured once from the environment:
//
//   matrix:*          TINYFIN_PLUGIN_PATH lists every bad plugin, TINYFIN_BACKEND=auto
//   select-list:*     TINYFIN_BACKEND=refuser,cpu
//   select-initfail:* TINYFIN_BACKEND=initfail,cpu
//   strict:*          TINYFIN_STRICT=1 TINYFIN_BACKEND=nosuch
//   strict-refused:*  TINYFIN_STRICT=1 TINYFIN_BACKEND=refuser
//   hygiene:*         TINYFIN_PLUGIN_PATH with empty and relative entries, run beside a plugin
#include "loader_support.hpp"
#include "../auto_backend.hpp"

#include <tinyfin/plugin.h>

#include <algorithm>
#include <string>
#include <vector>

using loader_test::contains;
using loader_test::find_plugin;
using loader_test::required_env;

namespace {

struct Expected {
    const char *env;  // variable holding the candidate's path
    const char *file;  // appended to a directory's path ("" for files)
    const char *outcome;
    const char *name;  // expected backend name, "" when the loader never learns it
};

const Expected expected_matrix[] = {
    {"LOADER_NOT_A_PLUGIN", "", "dlopen-failed", ""},        {"LOADER_NO_ENTRY", "", "no-entry-symbol", ""},
    {"LOADER_ABI_MAJOR", "", "abi-mismatch", "abimajor"},    {"LOADER_ENTRY_NULL", "", "entry-refused", ""},
    {"LOADER_BAD_TABLE", "", "invalid-table", ""},           {"LOADER_PROBE_REFUSES", "", "probe-refused", "refuser"},
    {"LOADER_INIT_FAILS", "", "init-failed", "initfail"},    {"LOADER_DUP_A", "/fakecpu.so", "loaded", "dupe"},
    {"LOADER_DUP_B", "/fakecpu.so", "shadowed", "dupe"},     {"LOADER_SORTED", "/a-first.so", "loaded", "sorted"},
    {"LOADER_SORTED", "/b-second.so", "shadowed", "sorted"},
};

std::string path_of(const Expected &e) { return required_env(e.env) + e.file; }

const tinyfin::PluginReport &record_of(const tinyfin::Report &report, const Expected &e) {
    const tinyfin::PluginReport *plugin = find_plugin(report, path_of(e));
    REQUIRE_MESSAGE(plugin != nullptr, "no report entry for " << path_of(e));
    return *plugin;
}

std::vector<float> values_of(const tinyfin::Tensor &t) { return t.to_vector<float>(); }

}  // namespace

// ---- matrix: every bad plugin on TINYFIN_PLUGIN_PATH, TINYFIN_BACKEND=auto ---------

TEST_CASE("matrix: search path starts with TINYFIN_PLUGIN_PATH entries in order") {
    const tinyfin::Report report = tinyfin::report();
    const std::vector<std::string> user = {
        required_env("LOADER_NOT_A_PLUGIN"), required_env("LOADER_NO_ENTRY"),  required_env("LOADER_ABI_MAJOR"),
        required_env("LOADER_ENTRY_NULL"),   required_env("LOADER_BAD_TABLE"), required_env("LOADER_PROBE_REFUSES"),
        required_env("LOADER_INIT_FAILS"),   required_env("LOADER_DUP_A"),     required_env("LOADER_DUP_B"),
        required_env("LOADER_SORTED"),
    };
    REQUIRE(report.search_path.size() > user.size());
    for (std::size_t i = 0; i < user.size(); ++i) {
        CAPTURE(i);
        CHECK(report.search_path[i].path == user[i]);
        CHECK(report.search_path[i].origin == "TINYFIN_PLUGIN_PATH");
    }
    // Running uninstalled, the build tree's plugin directories come after the user's.
    bool build_tree = std::any_of(report.search_path.begin(), report.search_path.end(),
                                  [](const auto &dir) { return dir.origin == "build-tree"; });
    CHECK(build_tree);
    CHECK(report.core_abi_version == TF_ABI_VERSION);
    CHECK_FALSE(report.core_version.empty());
}

TEST_CASE("matrix: every candidate gets its outcome and a useful message") {
    const tinyfin::Report report = tinyfin::report();
    for (const Expected &e : expected_matrix) {
        const tinyfin::PluginReport &plugin = record_of(report, e);
        CAPTURE(plugin.path);
        CAPTURE(plugin.message);
        CHECK(plugin.outcome == e.outcome);
        if (*e.name) CHECK(plugin.name == e.name);
        CHECK(plugin.path == path_of(e));
        if (plugin.outcome != "loaded") CHECK_FALSE(plugin.message.empty());
        CHECK(plugin.initialised == (plugin.outcome == "loaded"));
    }

    SUBCASE("dlopen-failed carries dlerror's text, which names the file") {
        const auto &plugin = record_of(report, expected_matrix[0]);
        CHECK(contains(plugin.message, "not-a-plugin.so"));
    }
    SUBCASE("no-entry-symbol names the missing symbol") {
        const auto &plugin = record_of(report, expected_matrix[1]);
        CHECK(contains(plugin.message, TF_PLUGIN_ENTRY_NAME));
    }
    SUBCASE("abi-mismatch names both versions") {
        const auto &plugin = record_of(report, expected_matrix[2]);
        CHECK(contains(plugin.message, "99.0"));
        CHECK(contains(plugin.message, "1.2"));
        CHECK(plugin.abi_version == (99u << 16));
    }
    SUBCASE("probe-refused carries the plugin's reason") {
        const auto &plugin = record_of(report, expected_matrix[5]);
        CHECK(contains(plugin.message, "no frobnicator attached"));
        CHECK(plugin.priority == 90);
        CHECK(plugin.devices.empty());
    }
    SUBCASE("init-failed carries the plugin's reason") {
        const auto &plugin = record_of(report, expected_matrix[6]);
        CHECK(contains(plugin.message, "device exploded"));
        CHECK(plugin.priority == 100);
        CHECK(plugin.abi_version == TF_ABI_VERSION);
    }
    SUBCASE("the first dupe loads; the second is shadowed and names the first's path") {
        const auto &first = record_of(report, expected_matrix[7]);
        const auto &second = record_of(report, expected_matrix[8]);
        CHECK(first.version == "test-a");
        REQUIRE(first.devices.size() == 1);
        CHECK(first.devices[0].kind == "software-gpu");
        CHECK(first.devices[0].name == "dupe software device");
        CHECK(first.devices[0].host_addressable);
        CHECK(contains(second.message, required_env("LOADER_DUP_A")));
        CHECK_FALSE(contains(second.message, required_env("LOADER_DUP_B")));
    }
    SUBCASE("a directory is read in sorted name order, and only its *.so files") {
        const auto &first = record_of(report, expected_matrix[9]);
        const auto &second = record_of(report, expected_matrix[10]);
        CHECK(first.version == "test-first");
        CHECK(contains(second.message, path_of(expected_matrix[9])));
        const std::string dir = required_env("LOADER_SORTED") + "/";
        std::vector<std::string> from_dir;
        for (const auto &plugin : report.plugins)
            if (plugin.path.rfind(dir, 0) == 0) from_dir.push_back(plugin.path);
        CHECK(from_dir == std::vector<std::string>{path_of(expected_matrix[9]), path_of(expected_matrix[10])});
    }
}

TEST_CASE("matrix: the real cpu plugin loads from the build tree and runs ops") {
    const tinyfin::Report report = tinyfin::report();
    auto cpu = std::find_if(report.plugins.begin(), report.plugins.end(),
                            [](const auto &p) { return p.name == "cpu" && p.outcome == "loaded"; });
    REQUIRE(cpu != report.plugins.end());
    CHECK(cpu->initialised);
    CHECK(cpu->abi_version == TF_ABI_VERSION);
    REQUIRE_FALSE(cpu->devices.empty());
    CHECK(cpu->devices[0].kind == "cpu");
    CHECK(cpu->devices[0].host_addressable);
    CHECK(std::find(cpu->supported_ops.begin(), cpu->supported_ops.end(), "add") != cpu->supported_ops.end());

    const tinyfin::Device host{"cpu", 0};
    auto a = tinyfin::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}, host);
    auto b = tinyfin::from_vector<float>({10, 20, 30, 40, 50, 60}, {2, 3}, host);
    auto c = tinyfin::add(a, b);
    CHECK(c.device().str() == "cpu");
    CHECK(c.shape() == tinyfin::Shape{2, 3});
    CHECK(values_of(c) == std::vector<float>{11, 22, 33, 44, 55, 66});
}

TEST_CASE("matrix: auto tries initfail (priority 100), fails and goes on to the real plugins") {
    // After the fault plugins, the build tree's real plugins: blas where it is built, else cpu.
    const std::string automatic = test_support::auto_backend();
    CHECK(tinyfin::backend_name() == automatic);
    CHECK(tinyfin::default_device() == tinyfin::Device{automatic, 0});
    const tinyfin::Report report = tinyfin::report();
    CHECK(report.requested == "auto");
    CHECK(report.selected == automatic);
    const std::string notes = loader_test::notes_text(report);
    CAPTURE(notes);
    CHECK(contains(notes, "initfail"));

    const auto available = tinyfin::available_backends();
    REQUIRE_FALSE(available.empty());
    CHECK(available.back() == "cpu");
    for (const char *bad : {"initfail", "refuser", "abimajor", "badtable"})
        CHECK(std::find(available.begin(), available.end(), bad) == available.end());
}

TEST_CASE("matrix: set_backend moves between usable backends and refuses unusable ones") {
    // Runs last in this registration: it changes the process-wide selection.
    // A list with nothing usable in it leaves cpu selected.
    CHECK_FALSE(tinyfin::set_backend("refuser"));
    CHECK(tinyfin::backend_name() == "cpu");
    CHECK_FALSE(tinyfin::set_backend("nosuch"));
    CHECK(tinyfin::backend_name() == "cpu");

    // dupe runs no ops: everything falls back to cpu, on host-addressable memory.
    REQUIRE(tinyfin::set_backend("dupe"));
    CHECK(tinyfin::backend_name() == "dupe");
    auto a = tinyfin::from_vector<float>({1, 2, 3}, {3});
    CHECK(a.device().str() == "dupe:0");
    CHECK(values_of(tinyfin::add(a, a)) == std::vector<float>{2, 4, 6});

    CHECK(tinyfin::set_backend("auto"));
    CHECK(tinyfin::backend_name() == test_support::auto_backend());
}

// ---- select-list: TINYFIN_BACKEND=refuser,cpu ------------------------------------------

TEST_CASE("select-list: an unavailable backend in the list warns with its reason, cpu is picked") {
    loader_test::StderrCapture capture;
    const std::string selected = tinyfin::backend_name();
    const std::string log = capture.finish();
    CHECK(selected == "cpu");
    CAPTURE(log);
    CHECK(contains(log, "refuser"));
    CHECK(contains(log, "no frobnicator attached"));

    const tinyfin::Report report = tinyfin::report();
    CHECK(report.requested == "refuser,cpu");
    CHECK(report.selected == "cpu");
    CHECK(contains(loader_test::notes_text(report), "refuser"));

    auto c = tinyfin::add(tinyfin::ones({4}), tinyfin::ones({4}));
    CHECK(values_of(c) == std::vector<float>{2, 2, 2, 2});
}

// ---- select-initfail: TINYFIN_BACKEND=initfail,cpu --------------------------------------

TEST_CASE("select-initfail: a backend whose init fails warns with its reason, cpu is picked") {
    loader_test::StderrCapture capture;
    const std::string selected = tinyfin::backend_name();
    const std::string log = capture.finish();
    CHECK(selected == "cpu");
    CAPTURE(log);
    CHECK(contains(log, "initfail"));
    CHECK(contains(log, "device exploded"));

    auto c = tinyfin::add(tinyfin::ones({2}), tinyfin::ones({2}));
    CHECK(values_of(c) == std::vector<float>{2, 2});
}

// ---- strict: TINYFIN_STRICT=1 TINYFIN_BACKEND=nosuch ------------------------------------

TEST_CASE("strict: an unknown backend makes the first tinyfin call throw BackendError") {
    std::string what;
    try {
        (void)tinyfin::zeros({2});
    } catch (const tinyfin::BackendError &e) {
        what = e.what();
    }
    CAPTURE(what);
    REQUIRE_FALSE(what.empty());
    CHECK(what.rfind("BackendError", 0) == 0);
    CHECK(contains(what, "nosuch"));
    // The reason, not only the name: more than "BackendError: nosuch".
    CHECK(what.size() > std::string("BackendError: nosuch").size() + 8);
}

// ---- strict-refused: TINYFIN_STRICT=1 TINYFIN_BACKEND=refuser ---------------------------

TEST_CASE("strict-refused: a backend whose probe refused throws BackendError with the reason") {
    std::string what;
    try {
        (void)tinyfin::backend_name();
    } catch (const tinyfin::BackendError &e) {
        what = e.what();
    }
    CAPTURE(what);
    REQUIRE_FALSE(what.empty());
    CHECK(contains(what, "refuser"));
    CHECK(contains(what, "no frobnicator attached"));
}

// ---- strict-abi-mismatch: TINYFIN_STRICT=1 TINYFIN_BACKEND=abimajor ----------------------

TEST_CASE("strict-abi-mismatch: a plugin of another ABI major is named with the reason") {
    std::string what;
    try {
        (void)tinyfin::backend_name();
    } catch (const tinyfin::BackendError &e) {
        what = e.what();
    }
    CAPTURE(what);
    CHECK(contains(what, "abimajor: abi-mismatch: plugin ABI 99.0, core ABI 1.2: rebuild the "
                         "plugin against this tinyfin"));
    CHECK_FALSE(contains(what, "no plugin named"));
}

// ---- hygiene: TINYFIN_PLUGIN_PATH=":fakecpu.so:.::<fakegpu.so>:", run inside dup-a -------

TEST_CASE("hygiene: empty and relative path entries never search the current directory") {
    const tinyfin::Report report = tinyfin::report();
    std::vector<std::string> user;
    for (const auto &dir : report.search_path)
        if (dir.origin == "TINYFIN_PLUGIN_PATH") user.push_back(dir.path);
    CHECK(user == std::vector<std::string>{required_env("LOADER_FAKEGPU")});
    for (const auto &plugin : report.plugins) {
        CAPTURE(plugin.path);
        CHECK(plugin.name != "dupe");
        CHECK(plugin.path.rfind('/', 0) == 0);
    }
    CHECK(loader_test::find_plugin(report, required_env("LOADER_FAKEGPU")) != nullptr);
}
