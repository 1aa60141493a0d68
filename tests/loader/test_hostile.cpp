// Plugins and plugin files the loader must not trust, and plugins that return garbage.
// meson registers this binary once per filter, each in a fresh process (the registry is
// built once per process, so each case sets TINYFIN_PLUGIN_PATH itself before any API call):
//
//   trust:*          a group-writable file, a group-writable directory, a world-writable file,
//                    a symlink, a file in a private /tmp directory and one directly in /tmp
//                    (sticky), a file owned by another user (when run as root)
//   trust-allowed:*  the same with TINYFIN_ALLOW_INSECURE_PLUGINS=1 (meson sets it)
//   garbage:*        impossible device counts and kinds, an op failing without a message
#include "loader_support.hpp"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

using loader_test::contains;
using loader_test::required_env;
namespace fs = std::filesystem;

namespace {

// Copies of the fakegpu plugin in directories of chosen modes, removed afterwards.
struct Scratch {
    fs::path root;        // private directory in the build tree
    fs::path private_tmp; // private directory in /tmp
    fs::path in_tmp;      // a plugin file directly in /tmp (a sticky directory)
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

    static fs::path place(const fs::path &dir, const char *name, unsigned dir_mode,
                          unsigned file_mode, const fs::path &plugin) {
        fs::create_directories(dir);
        fs::path file = dir / name;
        fs::copy_file(plugin, file, fs::copy_options::overwrite_existing);
        REQUIRE(chmod(file.c_str(), file_mode) == 0);
        REQUIRE(chmod(dir.c_str(), dir_mode) == 0);
        return file;
    }

    // The symlink first, so it is the one that loads; the others would be shadowed by it.
    std::string search_path() const {
        std::string path = link.string() + ":" + group_file.string() + ":" + other_file.string() +
                           ":" + group_dir.parent_path().string() + ":" +
                           tmp_file.string() + ":" + in_tmp.string() + ":" + secure.string();
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

} // namespace

TEST_CASE("trust: files and directories others can write are refused with the reason") {
    Scratch scratch;
    REQUIRE(setenv("TINYFIN_PLUGIN_PATH", scratch.search_path().c_str(), 1) == 0);
    tinyfin::Report report = tinyfin::report();

    const auto &link = record_of(report, scratch.link);
    CHECK(link.outcome == "loaded");
    CHECK(link.resolved_path == fs::canonical(scratch.secure).string());

    const auto &group_file = record_of(report, scratch.group_file);
    CHECK(group_file.outcome == "insecure");
    CHECK(contains(group_file.message, "plugin file " + scratch.group_file.string() +
                                           " is writable by its group (mode 0664)"));
    CHECK(contains(group_file.message, "TINYFIN_ALLOW_INSECURE_PLUGINS=1"));

    const auto &other_file = record_of(report, scratch.other_file);
    CHECK(other_file.outcome == "insecure");
    CHECK(contains(other_file.message, "writable by others (mode 0646)"));

    const auto &group_dir = record_of(report, scratch.group_dir);
    CHECK(group_dir.outcome == "insecure");
    CHECK(contains(group_dir.message, "directory " + scratch.group_dir.parent_path().string() +
                                          " is writable by its group (mode 0775)"));

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

TEST_CASE("garbage: impossible devices and silent failures are caught") {
    std::string path = required_env("LOADER_BADCOUNT") + ":" + required_env("LOADER_BADKIND") +
                       ":" + required_env("LOADER_SILENTFAIL");
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
