// Built against an installed tinyfin (pkg-config tinyfin) by check_template.py: the example
// plugin runs add, mul and relu itself and everything else falls back to cpu.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <tinyfin/tinyfin.hpp>

namespace tf = tinyfin;

static int failures = 0;

static void expect(bool ok, const std::string &what) {
    std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
    if (!ok) ++failures;
}

int main() {
    if (!tf::set_backend("example") || tf::backend_name() != "example") {
        std::printf("FAIL: backend 'example' is not usable\n");
        return 1;
    }
    tf::Tensor a = tf::from_vector<float>({1, -2, 3, -4, 5, -6}, {2, 3});
    tf::Tensor b = tf::from_vector<float>({10, 20, 30}, {3});
    expect(a.device().backend == "example", "tensors are created on the example device");
    tf::reset_stats();
    std::vector<float> sum = tf::add(a, b).to_vector<float>();  // broadcast add
    std::vector<float> prod = tf::mul(a.transpose(0, 1), a.transpose(0, 1)).to_vector<float>();
    std::vector<float> rectified = tf::relu(a).to_vector<float>();
    expect(sum == std::vector<float>({11, 18, 33, 6, 25, 24}), "add(a, b) is right");
    expect(prod == std::vector<float>({1, 16, 4, 25, 9, 36}), "mul of transposed views is right");
    expect(rectified == std::vector<float>({1, 0, 3, 0, 5, 0}), "relu(a) is right");
    tf::Stats s = tf::stats();
    const tf::Stats::Backend *example = s.backend("example");
    expect(example && example->ops == 3, "the three ops ran on the example plugin");
    expect(s.total_fallbacks == 0, "no fallback so far");

    float e = tf::exp(tf::scalar(1.0)).item<float>();  // not an op of the plugin
    expect(std::abs(e - std::exp(1.0f)) < 1e-6f, "exp falls back to cpu and is right");
    s = tf::stats();
    expect(s.fallbacks_of("exp") == 1, "exp was counted as one fallback");
    expect(tf::exp(a).device().backend == "example", "the fallback's result stays on the example device");
    return failures ? 1 : 0;
}
