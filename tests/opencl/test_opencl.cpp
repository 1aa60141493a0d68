// What is the opencl plugin's own: what tinyfin-info shows about the platform and device, calls
// from two threads at once, the program binary cache on disk, CLBlast in use (or hidden), and
// the probe's message when there is no ICD loader (through the plugin's C ABI, with the loader's
// path pointed at a file that does not exist).
#include "device_parity.hpp"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "tinyfin/plugin.h"

using namespace vt;
namespace tf = tinyfin;

namespace {

std::map<std::string, std::string> features() {
    std::map<std::string, std::string> out;
    for (const tf::PluginReport &plugin : tf::report().plugins)
        if (plugin.name == "opencl")
            for (const auto &[key, value] : plugin.features) out[key] = value;
    return out;
}

std::string plugin_path() {
    for (const tf::PluginReport &plugin : tf::report().plugins)
        if (plugin.name == "opencl") return plugin.path;
    return "";
}

// The probe's message from a fresh copy of the plugin whose host environment says name=value.
std::string probe_with(const char *name, const char *value) {
    static const char *g_name, *g_value;
    g_name = name;
    g_value = value;
    const tf_host_api host = {sizeof(tf_host_api), TF_ABI_VERSION, [](int32_t, const char *, const char *) {},
                              [](const char *key) -> const char * {
                                  if (key && std::strcmp(key, g_name) == 0) return g_value;
                                  return key ? std::getenv(key) : nullptr;
                              }};
    // A copy of the file: dlopen of the core's own path would return the core's instance, whose
    // host table this would replace.
    const std::string copy = std::string(std::getenv("XDG_CACHE_HOME")) + "/probe-copy-tinyfin-opencl.so";
    std::filesystem::copy_file(plugin_path(), copy, std::filesystem::copy_options::overwrite_existing);
    void *so = dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL);
    REQUIRE(so != nullptr);
    auto entry = reinterpret_cast<tf_plugin_entry_fn>(dlsym(so, TF_PLUGIN_ENTRY_NAME));
    REQUIRE(reinterpret_cast<void *>(entry) != nullptr);
    const tf_plugin *table = entry(&host);
    REQUIRE(table != nullptr);
    tf_error err;
    std::memset(&err, 0, sizeof err);
    err.struct_size = sizeof err;
    const tf_status status = table->probe(&err);
    CHECK(status == (std::string(err.message).empty() ? TF_STATUS_OK : TF_STATUS_UNAVAILABLE));
    dlclose(so);
    return err.message;
}

}  // namespace

TEST_CASE("opencl: tinyfin-info shows the platform, device, its limits and kind") {
    const auto f = features();
    for (const char *key : {"icd_loader", "clblast", "kernels", "device0.platform", "device0.name", "device0.vendor",
                            "device0.driver", "device0.compute_units", "device0.global_memory", "device0.kind"}) {
        INFO(key);
        CHECK(f.count(key) == 1);
    }
    MESSAGE("platform " << f.at("device0.platform") << "; device " << f.at("device0.name") << "; driver "
                        << f.at("device0.driver") << "; " << f.at("device0.kind"));
    // Every kernel family, the fused optimizer ops', the quantized ops' and the scan (cumsum) included.
    CHECK(f.at("kernels").rfind("10 of 10", 0) == 0);
    if (f.at("device0.platform").find("Portable Computing Language") != std::string::npos)
        CHECK(f.at("device0.kind").rfind("software", 0) == 0);
}

TEST_CASE("opencl: without an ICD loader the probe says so, naming the file") {
    const std::string why = probe_with("TINYFIN_OPENCL_LOADER", "/nonexistent/libOpenCL.so.1");
    INFO(why);
    CHECK(why.find("no OpenCL ICD loader") != std::string::npos);
    CHECK(why.find("/nonexistent/libOpenCL.so.1") != std::string::npos);
    // And with the real one it passes.
    CHECK(probe_with("TINYFIN_OPENCL_LOADER", "").empty());
}

TEST_CASE("opencl: calls from two threads at once give the cpu's results") {
    CHECK(threads_disagreeing_with_cpu(6) == 0);
    CHECK(tf::stats().total_fallbacks == 0);
}

TEST_CASE("opencl: built programs land in the binary cache as regular files") {
    Tensor x = tf::from_vector(values(100, 3), {100}, gpu_device);
    CHECK(tf::exp(x).to_vector<float>().size() == 100);
    const char *xdg = std::getenv("XDG_CACHE_HOME");
    REQUIRE(xdg != nullptr);
    const std::string dir = std::string(xdg) + "/tinyfin/opencl";
    DIR *d = opendir(dir.c_str());
    REQUIRE(d != nullptr);
    int binaries = 0;
    while (const dirent *entry = readdir(d)) {
        const std::string name = entry->d_name;
        if (name.size() < 4 || name.substr(name.size() - 4) != ".bin") continue;
        struct stat st;
        REQUIRE(lstat((dir + "/" + name).c_str(), &st) == 0);
        CHECK(S_ISREG(st.st_mode));
        CHECK(st.st_size > 0);
        ++binaries;
    }
    closedir(d);
    CHECK(binaries >= 1);
}

TEST_CASE("opencl: matmul runs on CLBlast unless it is hidden") {
    Tensor a = tf::from_vector(values(6 * 5, 1), {6, 5}, gpu_device);
    Tensor b = tf::from_vector(values(5 * 4, 2), {5, 4}, gpu_device);
    check(tf::matmul(a, b),
          tf::matmul(tf::from_vector(values(6 * 5, 1), {6, 5}, cpu_device),
                     tf::from_vector(values(5 * 4, 2), {5, 4}, cpu_device)),
          1e-5, 1e-4, "matmul");
    const auto f = features();
    const std::string work = f.at("device0.work");
    const char *setting = std::getenv("TINYFIN_OPENCL_CLBLAST");
    INFO(work << "; clblast " << f.at("clblast"));
    if (setting && std::string(setting) == "off") {
        CHECK(f.at("clblast").rfind("not used", 0) == 0);
        CHECK(work.find(" 0 CLBlast GEMMs") != std::string::npos);
    } else {
        CHECK(work.find(" 0 CLBlast GEMMs") == std::string::npos);
    }
}
