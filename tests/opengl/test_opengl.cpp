// What is the opengl plugin's own: what tinyfin-info shows about the GL device, calls from two
// threads at once (the plugin hands every call to the device's GL thread), and the EGL path in
// use (opengl-surfaceless runs this binary with TINYFIN_OPENGL_EGL=surfaceless).
#include "device_parity.hpp"

#include <atomic>
#include <cstdlib>
#include <map>
#include <thread>

using namespace vt;
namespace tf = tinyfin;

namespace {

std::map<std::string, std::string> features() {
    std::map<std::string, std::string> out;
    for (const tf::PluginReport &plugin : tf::report().plugins)
        if (plugin.name == "opengl")
            for (const auto &[key, value] : plugin.features) out[key] = value;
    return out;
}

}  // namespace

TEST_CASE("opengl: tinyfin-info shows the GL version, renderer, limits and kind") {
    const auto f = features();
    for (const char *key : {"device0.gl_version", "device0.gl_renderer", "device0.max_work_group_size",
                            "device0.max_work_group_count", "device0.max_ssbo_size", "device0.kind", "device0.egl"}) {
        INFO(key);
        CHECK(f.count(key) == 1);
    }
    const std::string version = f.count("device0.gl_version") ? f.at("device0.gl_version") : "";
    MESSAGE("GL_VERSION " << version << "; GL_RENDERER " << f.at("device0.gl_renderer") << "; via "
                          << f.at("device0.egl") << "; programs " << f.at("device0.programs_compiled"));
    CHECK(version.size() >= 3);
    CHECK((version[0] > '4' || (version[0] == '4' && version[2] >= '3')));
    if (f.at("device0.gl_renderer").find("llvmpipe") != std::string::npos)
        CHECK(f.at("device0.kind").rfind("software", 0) == 0);
    const char *egl = std::getenv("TINYFIN_OPENGL_EGL");
    if (egl && std::string(egl) == "surfaceless")
        CHECK(f.at("device0.egl") == "surfaceless platform");
    else
        CHECK(f.at("device0.egl").rfind("EGL device", 0) == 0);
}

TEST_CASE("opengl: calls from two threads at once give the cpu's results") {
    CHECK(threads_disagreeing_with_cpu(12) == 0);
    CHECK(tf::stats().total_fallbacks == 0);
}

TEST_CASE("opengl: a tensor made on one thread and used on another") {
    Tensor x = tf::from_vector(values(1000, 7), {1000}, gpu_device);
    Tensor y;
    std::thread([&] { y = tf::exp(x); }).join();
    check(y, tf::exp(tf::from_vector(values(1000, 7), {1000}, cpu_device)), 1e-6, 1e-5, "exp across threads");
}

TEST_CASE("opengl: host copies lap the stream ring and exceed a quarter of it") {
    // 40 uploads of 1 MiB go around the 16 MiB ring more than twice before anything is read;
    // 6 MiB uploads and reads take a mapped buffer of their own.
    std::vector<Tensor> tensors;
    for (int i = 0; i < 40; ++i)
        tensors.push_back(
            tf::from_vector(values(256 * 1024, 1000 + static_cast<uint64_t>(i)), {256 * 1024}, gpu_device));
    for (int i = 0; i < 40; ++i) {
        INFO("tensor " << i);
        CHECK(tensors[static_cast<std::size_t>(i)].to_vector<float>() ==
              values(256 * 1024, 1000 + static_cast<uint64_t>(i)));
    }
    const std::vector<float> big = values(6 * 256 * 1024, 77);
    Tensor b = tf::from_vector(big, {6 * 256 * 1024}, gpu_device);
    Tensor twice = tf::add(b, b);
    const std::vector<float> got = twice.to_vector<float>();
    REQUIRE(got.size() == big.size());
    bool same = true;
    for (std::size_t i = 0; i < big.size(); ++i) same = same && got[i] == big[i] + big[i];
    CHECK(same);
}
