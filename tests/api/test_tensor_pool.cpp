// The per-thread pool of freed small tensors behind make_tensor (core/tensor_pool.cpp): a reused
// tensor has its new op's shape, strides, dtype and values; storage that a view, an autograd
// record or another thread still holds is never handed out again; stats() count a reuse as an
// allocation and a pooled buffer as not in use; tensors freed on other threads and at thread exit;
// memory wrapped by from_blob is never in bytes_in_use.
#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;

namespace {

std::vector<float> iota_values(int n, float from) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = from + static_cast<float>(i);
    return v;
}

}  // namespace

TEST_CASE("tensor pool: a reused tensor takes the new op's shape, strides, dtype and values") {
    set_backend("cpu");
    const Tensor x = from_vector(iota_values(16, 0), {16});
    const Tensor y = from_vector(iota_values(16, 100), {16});
    for (int round = 0; round < 40; ++round) {
        Tensor sum = add(x, full({16}, round));
        auto got = sum.to_vector<float>();
        for (int i = 0; i < 16; ++i) CHECK(got[static_cast<std::size_t>(i)] == float(i + round));
    }
    // 64 bytes each: the freed [16] f32 results come back as [4, 4] f32, [8] i64 and [2, 2, 4].
    { Tensor gone = add(x, y); }
    Tensor square = add(x.reshape({4, 4}), y.reshape({4, 4}));
    CHECK(square.shape() == Shape{4, 4});
    CHECK(square.strides() == Shape{4, 1});
    CHECK(square.offset() == 0);
    CHECK(square.dtype() == DType::f32);
    CHECK(square.to_vector<float>() == add(x, y).to_vector<float>());
    square = Tensor();
    const Tensor ia = arange(0, 8, 1), ib = arange(10, 18, 1);
    Tensor longs = add(ia, ib);
    CHECK(longs.dtype() == DType::i64);
    CHECK(longs.shape() == Shape{8});
    CHECK(longs.strides() == Shape{1});
    std::vector<int64_t> expect;
    for (int64_t i = 0; i < 8; ++i) expect.push_back(10 + 2 * i);
    CHECK(longs.to_vector<int64_t>() == expect);
    longs = Tensor();
    Tensor cube = mul(x.reshape({2, 2, 4}), full({2, 2, 4}, 2.0));
    CHECK(cube.shape() == Shape{2, 2, 4});
    CHECK(cube.strides() == Shape{8, 4, 1});
    auto doubled = cube.to_vector<float>();
    for (int i = 0; i < 16; ++i) CHECK(doubled[static_cast<std::size_t>(i)] == 2.0f * float(i));
    // A rank-0 result after them.
    cube = Tensor();
    Tensor scalar = add(full({}, 1.5), full({}, 2.0));
    CHECK(scalar.rank() == 0);
    CHECK(scalar.item<float>() == 3.5f);
}

TEST_CASE("tensor pool: storage a view still holds is not reused") {
    set_backend("cpu");
    const Tensor x = from_vector(iota_values(16, 0), {16});
    Tensor base = add(x, x);
    Tensor view = base.reshape({4, 4}).transpose(0, 1);
    const void *memory = view.host_data();
    base = Tensor();
    std::vector<Tensor> others;
    for (int i = 0; i < 20; ++i) others.push_back(add(x, full({16}, 1000.0)));
    for (const Tensor &t : others) CHECK(t.host_data() != memory);
    auto got = view.contiguous().to_vector<float>();
    for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 4; ++c) CHECK(got[static_cast<std::size_t>(r * 4 + c)] == 2.0f * float(c * 4 + r));
}

TEST_CASE("tensor pool: stats count a reuse as an allocation and a pooled buffer as free") {
    set_backend("cpu");
    const Tensor x = from_vector(iota_values(16, 0), {16});
    synchronize();
    { Tensor warm = add(x, x); }  // one pooled [16] f32 at least
    const uint64_t in_use = stats().backend("cpu")->bytes_in_use;
    const uint64_t allocations = stats().backend("cpu")->allocations;
    const uint64_t allocated = stats().backend("cpu")->bytes_allocated;
    {
        Tensor a = add(x, x);
        CHECK(stats().backend("cpu")->bytes_in_use == in_use + 64);
        CHECK(stats().backend("cpu")->allocations == allocations + 1);
        CHECK(stats().backend("cpu")->bytes_allocated == allocated + 64);
    }
    CHECK(stats().backend("cpu")->bytes_in_use == in_use);
    for (int i = 0; i < 10; ++i) Tensor t = add(x, x);
    CHECK(stats().backend("cpu")->bytes_in_use == in_use);
    CHECK(stats().backend("cpu")->allocations == allocations + 11);
}

TEST_CASE("tensor pool: autograd records keep their tensors; gradients stay right across reuse") {
    set_backend("cpu");
    Tensor w = from_vector(iota_values(16, 1), {16}).requires_grad_();
    for (int step = 0; step < 3; ++step) {
        w.zero_grad();
        Tensor y = mul(w, w);
        Tensor z = add(y, y);  // y is held by the record of z
        sum(z).backward();
        auto g = w.grad().to_vector<float>();
        for (int i = 0; i < 16; ++i) CHECK(g[static_cast<std::size_t>(i)] == 4.0f * float(i + 1));
    }
}

TEST_CASE("tensor pool: tensors made, freed and reused on several threads") {
    set_backend("cpu");
    const Tensor x = from_vector(iota_values(16, 0), {16});
    std::vector<Tensor> handed(8);
    // Made on worker threads, freed on this one (into this thread's pool) after they exit.
    std::vector<std::thread> workers;
    for (std::size_t k = 0; k < handed.size(); ++k)
        workers.emplace_back([&, k] {
            for (int i = 0; i < 50; ++i) Tensor scratch = add(x, full({16}, double(i)));
            handed[k] = add(x, full({16}, double(k)));
        });
    for (std::thread &t : workers) t.join();
    for (std::size_t k = 0; k < handed.size(); ++k) {
        auto got = handed[k].to_vector<float>();
        for (int i = 0; i < 16; ++i) CHECK(got[static_cast<std::size_t>(i)] == float(i) + float(k));
    }
    handed.clear();
    // Made here, freed on a thread that then exits (its pool is emptied then).
    Tensor moved = add(x, x);
    std::thread([t = std::move(moved)]() mutable { t = Tensor(); }).join();
    Tensor after = add(x, x);
    CHECK(after.to_vector<float>() == mul(x, full({16}, 2.0)).to_vector<float>());
}

TEST_CASE("tensor pool: bytes in use stay exact across reset_stats and a thread's exit") {
    set_backend("cpu");
    const Tensor x = from_vector(iota_values(16, 0), {16});
    synchronize();
    auto in_use = [] { return stats().backend("cpu")->bytes_in_use; };
    const uint64_t base = in_use();
    Tensor live = add(x, x);  // 64 bytes alive across the reset
    reset_stats();
    CHECK(in_use() == base + 64);
    CHECK(stats().backend("cpu")->peak_bytes_in_use == base + 64);
    live = Tensor();
    CHECK(in_use() == base);
    // Small tensors freed on a worker go to its pool; the pool is emptied when the worker exits.
    // Pooled buffers are already out of bytes_in_use: emptying must not subtract them again
    // (which wrapped the unsigned count to about 1.8e19).
    std::thread([&] {
        for (int i = 0; i < 40; ++i) Tensor t = add(x, full({16}, double(i)));
    }).join();
    CHECK(in_use() == base);
    reset_stats();
    CHECK(stats().backend("cpu")->peak_bytes_in_use == base);
    Tensor again = add(x, x);
    CHECK(in_use() == base + 64);
    CHECK(stats().backend("cpu")->peak_bytes_in_use == base + 64);
}

TEST_CASE("bytes in use: memory wrapped by from_blob is neither counted nor subtracted") {
    set_backend("cpu");
    synchronize();
    auto in_use = [] { return stats().backend("cpu")->bytes_in_use; };
    const uint64_t base = in_use();
    std::vector<float> host(1024, 1.0f);
    bool released = false;
    {
        Tensor wrapped = from_blob(host.data(), {1024}, {1}, DType::f32, [&] { released = true; });
        CHECK(in_use() == base);
        Tensor doubled = add(wrapped, wrapped);  // a counted result beside it
        CHECK(in_use() == base + 4096);
    }
    CHECK(released);
    // Freeing the wrapped tensor used to subtract its 4 KiB, which wraps the unsigned count.
    CHECK(in_use() == base);
}
