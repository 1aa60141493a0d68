// Plugins and plugin files the loader must not trust, and plugins that return garbage.
// meson registers this binary once per filter, each in a fresh process (the registry is
// built once per process, so each case sets TINYFIN_PLUGIN_PATH itself before any API call):
//
//   trust:*          a group-writable file, a group-writable directory, a world-writable file,
//                    a symlink, a file in a private /tmp directory and one directly in /tmp
//                    (sticky), a file owned by another user (when run as root)
//   trust-allowed:*  the same with TINYFIN_ALLOW_INSECURE_PLUGINS=1 (meson sets it)
//   garbage:*        impossible device counts and kinds, an op failing without a message
//   not-a-file:*     FIFOs (a file, one named *.so in a directory) and /dev/zero on the path
//   abi-boundary:*   C++ exceptions out of entry, probe and run
//   recurse:*        a probe that calls the tinyfin API
//   thread-refuses:* a probe that leaves a thread running the plugin's code, then refuses
//   proc-paths:*     /proc/self/cwd and /proc/self/fd entries on TINYFIN_PLUGIN_PATH
//   pin-libraries:*  relative and world-writable-directory TINYFIN_PIN_LIBRARIES entries
#include "loader_support.hpp"

#include <dlfcn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

using loader_test::contains;
using loader_test::required_env;
namespace fs = std::filesystem;

namespace {

// Copies of the fakegpu plugin in directories of chosen modes, removed afterwards.
struct Scratch {
    fs::path root;  // private directory in the build tree
    fs::path private_tmp;  // private directory in /tmp
    fs::path in_tmp;  // a plugin file directly in /tmp (a sticky directory)
    fs::path secure, group_file, other_file, group_dir, link, tmp_file, foreign;

    Scratch() {
        std::string base = required_env("LOADER_SCRATCH") + "/trust-XXXXXX";
        REQUIRE(mkdtemp(base.data()) != nullptr);
        root = base;
        std::string tmp = "/tmp/tinyfin-trust-XXXXXX";
        REQUIRE(mkdtemp(tmp.data()) != nullptr);
        private_tmp = tmp;
        std::string loose = "/tmp/tinyfin-trust-XXXXXX.so";
        int fd = mkstemps(loose.data(), 3);
        REQUIRE(fd >= 0);
        close(fd);
        in_tmp = loose;

        fs::path plugin = required_env("LOADER_FAKEGPU");
        secure = place(root / "secure", "fake.so", 0755, 0644, plugin);
        group_file = place(root / "group-file", "fake.so", 0755, 0664, plugin);
        other_file = place(root / "other-file", "fake.so", 0755, 0646, plugin);
        group_dir = place(root / "group-dir", "fake.so", 0775, 0644, plugin);
        tmp_file = place(private_tmp, "fake.so", 0700, 0644, plugin);
        fs::copy_file(plugin, in_tmp, fs::copy_options::overwrite_existing);
        fs::create_directory(root / "links");
        link = root / "links" / "fake.so";
        fs::create_symlink(secure, link);
        if (geteuid() == 0) {
            foreign = place(root / "foreign", "fake.so", 0755, 0644, plugin);
            REQUIRE(chown(foreign.c_str(), 65534, 65534) == 0);
        }
    }
    ~Scratch() {
        std::error_code ec;
        fs::remove_all(root, ec);
        fs::remove_all(private_tmp, ec);
        fs::remove(in_tmp, ec);
    }

    static fs::path place(const fs::path &dir, const char *name, unsigned dir_mode, unsigned file_mode,
                          const fs::path &plugin) {
        fs::create_directories(dir);
        fs::path file = dir / name;
        fs::copy_file(plugin, file, fs::copy_options::overwrite_existing);
        REQUIRE(chmod(file.c_str(), file_mode) == 0);
        REQUIRE(chmod(dir.c_str(), dir_mode) == 0);
        return file;
    }

    // The symlink first, so it is the one that loads; the others would be shadowed by it.
    std::string search_path() const {
        std::string path = link.string() + ":" + group_file.string() + ":" + other_file.string() + ":" +
                           group_dir.parent_path().string() + ":" + tmp_file.string() + ":" + in_tmp.string() + ":" +
                           secure.string();
        if (!foreign.empty()) path += ":" + foreign.string();
        return path;
    }
};

const tinyfin::PluginReport &record_of(const tinyfin::Report &report, const fs::path &file) {
    for (const auto &plugin : report.plugins)
        if (plugin.path == file.string()) return plugin;
    FAIL("no record for " << file);
    throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("trust: files and directories others can write are refused with the reason") {
    Scratch scratch;
    REQUIRE(setenv("TINYFIN_PLUGIN_PATH", scratch.search_path().c_str(), 1) == 0);
    tinyfin::Report report = tinyfin::report();

    const auto &link = record_of(report, scratch.link);
    CHECK(link.outcome == "loaded");
    CHECK(link.resolved_path == fs::canonical(scratch.secure).string());

    const auto &group_file = record_of(report, scratch.group_file);
    CHECK(group_file.outcome == "insecure");
    CHECK(contains(group_file.message,
                   "plugin file " + scratch.group_file.string() + " is writable by its group (mode 0664)"));
    CHECK(contains(group_file.message, "TINYFIN_ALLOW_INSECURE_PLUGINS=1"));

    const auto &other_file = record_of(report, scratch.other_file);
    CHECK(other_file.outcome == "insecure");
    CHECK(contains(other_file.message, "writable by others (mode 0646)"));

    const auto &group_dir = record_of(report, scratch.group_dir);
    CHECK(group_dir.outcome == "insecure");
    CHECK(contains(group_dir.message,
                   "directory " + scratch.group_dir.parent_path().string() + " is writable by its group (mode 0775)"));

    // Private and sticky temporary directories are fine: shadowed by the symlink's plugin.
    CHECK(record_of(report, scratch.tmp_file).outcome == "shadowed");
    CHECK(record_of(report, scratch.in_tmp).outcome == "shadowed");
    CHECK(record_of(report, scratch.secure).outcome == "shadowed");

    if (!scratch.foreign.empty()) {
        const auto &foreign = record_of(report, scratch.foreign);
        CHECK(foreign.outcome == "insecure");
        CHECK(contains(foreign.message, "is owned by uid 65534, not by root or the current user"));
    }
    // The rest of the process is unaffected.
    CHECK(tinyfin::sum(tinyfin::ones({4})).item<float>() == 4);
}

TEST_CASE("trust-allowed: TINYFIN_ALLOW_INSECURE_PLUGINS=1 loads them anyway") {
    Scratch scratch;
    // Only the insecure ones, so the first of them loads instead of being shadowed.
    std::string path = scratch.group_dir.string() + ":" + scratch.group_file.string();
    REQUIRE(setenv("TINYFIN_PLUGIN_PATH", path.c_str(), 1) == 0);
    loader_test::StderrCapture capture;
    tinyfin::Report report = tinyfin::report();
    CHECK(record_of(report, scratch.group_dir).outcome == "loaded");
    CHECK(record_of(report, scratch.group_file).outcome == "shadowed");
}

TEST_CASE("trust-typo: a TINYFIN_ALLOW_INSECURE_PLUGINS that is not 0 or 1 warns and keeps the rules") {
    Scratch scratch;
    std::string path = scratch.group_dir.string() + ":" + scratch.group_file.string();
    REQUIRE(setenv("TINYFIN_PLUGIN_PATH", path.c_str(), 1) == 0);
    REQUIRE(setenv("TINYFIN_ALLOW_INSECURE_PLUGINS", "yes", 1) == 0);
    loader_test::StderrCapture capture;
    tinyfin::Report report = tinyfin::report();
    CHECK(record_of(report, scratch.group_dir).outcome == "insecure");
    CHECK(record_of(report, scratch.group_file).outcome == "insecure");
    std::string text = capture.finish();
    CHECK(contains(text, "TINYFIN_ALLOW_INSECURE_PLUGINS='yes'"));
    CHECK(contains(text, "0 (the trust rules apply)"));
}

TEST_CASE("garbage: impossible devices and silent failures are caught") {
    std::string path = required_env("LOADER_BADCOUNT") + ":" + required_env("LOADER_BADKIND") + ":" +
                       required_env("LOADER_SILENTFAIL");
    REQUIRE(setenv("TINYFIN_PLUGIN_PATH", path.c_str(), 1) == 0);
    tinyfin::Report report = tinyfin::report();

    const auto *badcount = loader_test::find_plugin(report, required_env("LOADER_BADCOUNT"));
    REQUIRE(badcount);
    CHECK(badcount->outcome == "init-failed");
    CHECK(contains(badcount->message, "plugin reported 1073741824 devices"));

    const auto *badkind = loader_test::find_plugin(report, required_env("LOADER_BADKIND"));
    REQUIRE(badkind);
    CHECK(badkind->outcome == "init-failed");
    CHECK(contains(badkind->message, "device_info(0) reported kind 77"));

    tinyfin::Device silent{"silentfail", 0};
    tinyfin::Tensor a = tinyfin::ones({3}, tinyfin::DType::f32, silent);
    CHECK_THROWS_WITH_AS(tinyfin::add(a, a), "PluginError: add on silentfail: failed without a message",
                         tinyfin::PluginError);
    // Still working, on cpu and on the plugin's memory.
    CHECK(tinyfin::sum(tinyfin::ones({4})).item<float>() == 4);
    CHECK(a.to(tinyfin::Device{"cpu", 0}).to_vector<float>() == std::vector<float>{1, 1, 1});
}

// ---- Only regular files are opened ----------------------------------------------------------

TEST_CASE("not-a-file: FIFOs and devices on the plugin path are refused without blocking") {
    std::string base = required_env("LOADER_SCRATCH") + "/fifo-XXXXXX";
    REQUIRE(mkdtemp(base.data()) != nullptr);
    const fs::path dir = base;
    const fs::path fifo = dir / "lone.so";
    const fs::path plugins = dir / "plugins";
    fs::create_directory(plugins);
    const fs::path listed = plugins / "named.so";
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    REQUIRE(mkfifo(listed.c_str(), 0600) == 0);
    std::string path = fifo.string() + ":" + plugins.string() + ":/dev/zero";
    REQUIRE(setenv("TINYFIN_PLUGIN_PATH", path.c_str(), 1) == 0);
    // Even with the trust checks off: a FIFO is never handed to dlopen.
    REQUIRE(setenv("TINYFIN_ALLOW_INSECURE_PLUGINS", "1", 1) == 0);
    tinyfin::Report report = tinyfin::report();
    CHECK(record_of(report, fifo).outcome == "not-a-file");
    CHECK(contains(record_of(report, fifo).message, "a FIFO, not a regular file"));
    CHECK(record_of(report, listed).outcome == "not-a-file");
    CHECK(record_of(report, "/dev/zero").outcome == "not-a-file");
    CHECK(contains(record_of(report, "/dev/zero").message, "a character device"));
    CHECK(tinyfin::sum(tinyfin::ones({4})).item<float>() == 4);
    std::error_code ec;
    fs::remove_all(dir, ec);
}

// ---- C++ plugins that throw, call back, or leave a thread behind ----------------------------

TEST_CASE("abi-boundary: C++ exceptions from entry, probe and run are contained") {
    std::string path = required_env("LOADER_THROW_ENTRY") + ":" + required_env("LOADER_THROW_PROBE") + ":" +
                       required_env("LOADER_THROW_RUN");
    REQUIRE(setenv("TINYFIN_PLUGIN_PATH", path.c_str(), 1) == 0);
    tinyfin::Report report = tinyfin::report();
    const auto &entry = record_of(report, required_env("LOADER_THROW_ENTRY"));
    CHECK(entry.outcome == "entry-refused");
    CHECK(contains(entry.message, "tf_plugin_entry threw a C++ exception (entry exploded in C++)"));
    const auto &probe = record_of(report, required_env("LOADER_THROW_PROBE"));
    CHECK(probe.outcome == "probe-refused");
    CHECK(contains(probe.message, "probe threw a C++ exception (probe exploded in C++)"));
    CHECK(record_of(report, required_env("LOADER_THROW_RUN")).outcome == "loaded");

    tinyfin::Device throwing{"throwrun", 0};
    tinyfin::Tensor a = tinyfin::ones({3}, tinyfin::DType::f32, throwing);
    CHECK_THROWS_WITH_AS(tinyfin::add(a, a),
                         doctest::Contains("add on throwrun: run threw a C++ exception (run exploded in C++)"),
                         tinyfin::PluginError);
    // Everything else keeps working, and a second report is the same.
    CHECK(tinyfin::sum(tinyfin::ones({4})).item<float>() == 4);
    CHECK(a.to(tinyfin::Device{"cpu", 0}).to_vector<float>() == std::vector<float>{1, 1, 1});
    CHECK(record_of(tinyfin::report(), required_env("LOADER_THROW_PROBE")).outcome == "probe-refused");
}

TEST_CASE("recurse: a probe or init that calls back into tinyfin is refused, not an abort") {
    std::string path = required_env("LOADER_RECURSE") + ":" + required_env("LOADER_RECURSE_INIT");
    REQUIRE(setenv("TINYFIN_PLUGIN_PATH", path.c_str(), 1) == 0);
    tinyfin::Report report = tinyfin::report();
    const auto &recurse = record_of(report, required_env("LOADER_RECURSE"));
    CHECK(recurse.outcome == "probe-refused");
    CHECK(contains(recurse.message, "called back into tinyfin while plugins were being loaded"));
    // Priority 5: auto selection initialises it while the registry is being built.
    const auto &init = record_of(report, required_env("LOADER_RECURSE_INIT"));
    CHECK(init.outcome == "init-failed");
    CHECK(contains(init.message, "init threw a C++ exception"));
    CHECK(contains(init.message, "called back into tinyfin"));
    CHECK(tinyfin::backend_name() == "cpu");
    CHECK(tinyfin::sum(tinyfin::ones({4})).item<float>() == 4);
}

TEST_CASE("thread-refuses: a refused plugin whose thread still runs stays mapped") {
    const std::string plugin = required_env("LOADER_THREAD_REFUSES");
    REQUIRE(setenv("TINYFIN_PLUGIN_PATH", plugin.c_str(), 1) == 0);
    tinyfin::Report report = tinyfin::report();
    const auto &refused = record_of(report, plugin);
    CHECK(refused.outcome == "probe-refused");
    CHECK(contains(refused.message, "started a thread, then refused"));
    // The plugin's thread runs its code every millisecond: unmapped, it would crash the process.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream maps("/proc/self/maps");
    std::string line;
    bool mapped = false;
    while (std::getline(maps, line)) mapped = mapped || contains(line, fs::canonical(plugin).string());
    CHECK(mapped);
    CHECK(tinyfin::sum(tinyfin::ones({4})).item<float>() == 4);
}

// ---- Every path that leads to dlopen follows the trust rules --------------------------------

TEST_CASE("proc-paths: /proc/self/cwd on TINYFIN_PLUGIN_PATH is not the current directory") {
    std::string base = required_env("LOADER_SCRATCH") + "/cwd-XXXXXX";
    REQUIRE(mkdtemp(base.data()) != nullptr);
    REQUIRE(chmod(base.c_str(), 0755) == 0);
    const fs::path copy = fs::path(base) / "fake.so";
    fs::copy_file(required_env("LOADER_FAKEGPU"), copy);
    REQUIRE(chmod(copy.c_str(), 0644) == 0);
    REQUIRE(chdir(base.c_str()) == 0);
    REQUIRE(setenv("TINYFIN_PLUGIN_PATH", "/proc/self/cwd:/proc/self/cwd/fake.so:/proc/self/fd", 1) == 0);
    loader_test::StderrCapture capture;
    tinyfin::Report report = tinyfin::report();
    for (const auto &plugin : report.plugins) {
        INFO(plugin.path);
        CHECK(plugin.name != "fakegpu");
        CHECK(plugin.path.rfind("/proc/", 0) != 0);
    }
    CHECK(contains(capture.finish(), "plugin paths must not be under /proc"));
    std::error_code ec;
    fs::remove_all(base, ec);
}

TEST_CASE("pin-libraries: TINYFIN_PIN_LIBRARIES paths follow the trust rules") {
    std::string base = required_env("LOADER_SCRATCH") + "/pin-XXXXXX";
    REQUIRE(mkdtemp(base.data()) != nullptr);
    REQUIRE(chmod(base.c_str(), 0755) == 0);
    const fs::path relative = fs::path(base) / "relative.so";
    fs::copy_file(required_env("LOADER_FAKEGPU"), relative);
    REQUIRE(chmod(relative.c_str(), 0644) == 0);
    const fs::path open_dir = fs::path(base) / "open";
    fs::create_directory(open_dir);
    const fs::path loose = open_dir / "loose.so";
    fs::copy_file(required_env("LOADER_FAKEGPU"), loose);
    REQUIRE(chmod(loose.c_str(), 0644) == 0);
    REQUIRE(chmod(open_dir.c_str(), 0777) == 0);
    REQUIRE(chdir(base.c_str()) == 0);
    std::string pins = "./relative.so:" + loose.string();
    // Keep what the environment pins (scripts/sanitize pins the GPU drivers the probes load).
    if (const char *outer = getenv("TINYFIN_PIN_LIBRARIES"); outer && *outer) pins = std::string(outer) + ":" + pins;
    REQUIRE(setenv("TINYFIN_KEEP_PLUGINS_MAPPED", "1", 1) == 0);
    REQUIRE(setenv("TINYFIN_PIN_LIBRARIES", pins.c_str(), 1) == 0);
    loader_test::StderrCapture capture;
    tinyfin::report();
    CHECK(dlopen(relative.c_str(), RTLD_NOW | RTLD_NOLOAD) == nullptr);
    CHECK(dlopen(loose.c_str(), RTLD_NOW | RTLD_NOLOAD) == nullptr);
    const std::string text = capture.finish();
    CHECK(contains(text, "./relative.so not loaded"));
    CHECK(contains(text, "is not an absolute path"));
    CHECK(contains(text, "writable by others"));
    std::error_code ec;
    fs::remove_all(base, ec);
}
