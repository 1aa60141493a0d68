// A program built against an installed tinyfin (pkg-config tinyfin, or CMake's
// find_package(tinyfin)) by test_debs.py: a product checked against hand-computed values on
// every backend the installed plugins provide, then the backends listed on stdout.
#include <cstdio>
#include <vector>

#include <tinyfin/tinyfin.hpp>

namespace tf = tinyfin;

int main() {
    int failures = 0;
    // [[1, 2, 3], [4, 5, 6]] @ [[1, 0], [0, 1], [1, 1]] = [[4, 5], [10, 11]]
    const std::vector<float> expected = {4, 5, 10, 11};
    for (const std::string &backend : tf::available_backends()) {
        tf::set_backend(backend);
        tf::Tensor a = tf::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
        tf::Tensor b = tf::from_vector<float>({1, 0, 0, 1, 1, 1}, {3, 2});
        const std::vector<float> got = tf::matmul(a, b).to_vector<float>();
        const bool ok = got == expected;
        std::printf("%s %s\n", ok ? "ok" : "FAIL", backend.c_str());
        failures += !ok;
    }
    return failures == 0 ? 0 : 1;
}
