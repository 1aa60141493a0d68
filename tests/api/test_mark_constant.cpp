// tinyfin::mark_constant (extend.hpp): the cpu plugin keeps a marked matmul weight packed, and
// every write through tinyfin (copy_from_host, assign_, an op's output) must reach the product;
// a marked tensor's storage is never pooled for reuse (a reused buffer written through its host
// address would otherwise still be marked). References in double from the host values.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tinyfin/extend.hpp"
#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;

namespace {

std::vector<float> random_values(std::size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> pick(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float &x : v) x = pick(rng);
    return v;
}

// y = x w in double against the f32 result, k roundings of the absolute products.
void check_product(const std::vector<float> &x, const std::vector<float> &w, const Tensor &y, int64_t m, int64_t k,
                   int64_t n) {
    const std::vector<float> got = y.to_vector<float>();
    int bad = 0;
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            double sum = 0, mag = 0;
            for (int64_t p = 0; p < k; ++p) {
                const double prod = static_cast<double>(x[static_cast<std::size_t>(i * k + p)]) *
                                    w[static_cast<std::size_t>(p * n + j)];
                sum += prod;
                mag += std::fabs(prod);
            }
            const double g = got[static_cast<std::size_t>(i * n + j)];
            if (!(std::fabs(g - sum) <= 1.2e-7 * static_cast<double>(k + 2) * mag + 1e-30) && bad++ < 5)
                FAIL_CHECK("[", i, ", ", j, "]: got ", g, ", expected ", sum);
        }
    CHECK(bad == 0);
}

bool same_bits(const Tensor &a, const Tensor &b) {
    const auto va = a.to_vector<float>(), vb = b.to_vector<float>();
    return va.size() == vb.size() && std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("mark_constant: a marked weight follows copy_from_host, assign_ and op outputs") {
    set_backend("cpu");
    NoGradGuard no_grad;
    const int64_t m = 37, k = 600, n = 70;
    const auto xv = random_values(static_cast<std::size_t>(m * k), 1);
    auto wv = random_values(static_cast<std::size_t>(k * n), 2);
    const Tensor x = from_vector(xv, {m, k});
    Tensor w = from_vector(wv, {k, n});
    mark_constant(w);
    for (int round = 0; round < 2; ++round) {  // packed, then the kept packing
        const Tensor y = matmul(x, w);
        check_product(xv, wv, y, m, k, n);
        CHECK(same_bits(y, matmul(x, from_vector(w.to_vector<float>(), {k, n}))));
    }
    wv = random_values(wv.size(), 3);
    copy_from_host(w, wv.data(), wv.size() * sizeof(float));
    check_product(xv, wv, matmul(x, w), m, k, n);
    w.assign_(neg(w));
    for (float &v : wv) v = -v;
    check_product(xv, wv, matmul(x, w), m, k, n);
    // A 3-D input folds the batch into the product's rows: the same kept packing.
    const Tensor y3 = matmul(x.reshape({1, m, k}), w);
    CHECK(same_bits(y3.reshape({m, n}), matmul(x, from_vector(w.to_vector<float>(), {k, n}))));
}

TEST_CASE("mark_constant: a marked tensor's storage is not reused, so host writes to new tensors count") {
    set_backend("cpu");
    NoGradGuard no_grad;
    const int64_t m = 37, k = 16, n = 16;  // m above the few-row path (kernels_matvec.hpp)
    const auto xv = random_values(static_cast<std::size_t>(m * k), 4);
    const Tensor x = from_vector(xv, {m, k});
    const Tensor a = from_vector(random_values(static_cast<std::size_t>(k * n), 5), {k, n});
    const void *marked_memory = nullptr;
    {
        Tensor w = add(a, a);  // a pooled size
        mark_constant(w);
        marked_memory = w.host_data();
        (void)matmul(x, w);  // packed and kept
    }
    for (int i = 0; i < 8; ++i) {
        Tensor z = add(a, full({k, n}, 1.0));
        INFO("reused memory: ", z.host_data() == marked_memory);
        for (int round = 0; round < 2; ++round) {
            auto zv = random_values(static_cast<std::size_t>(k * n), static_cast<uint32_t>(10 + 2 * i + round));
            std::memcpy(z.host_data(), zv.data(), zv.size() * sizeof(float));  // z was never marked
            check_product(xv, zv, matmul(x, z), m, k, n);
        }
    }
}

TEST_CASE("mark_constant: other backends may ignore the hint") {
    for (const char *backend : {"cpu", "blas"}) {
        CAPTURE(backend);
        set_backend(backend);
        const Tensor w = from_vector(random_values(64, 6), {8, 8});
        mark_constant(w);
        check_product(random_values(64, 7), w.to_vector<float>(), matmul(from_vector(random_values(64, 7), {8, 8}), w),
                      8, 8, 8);
    }
    set_backend("cpu");
}
