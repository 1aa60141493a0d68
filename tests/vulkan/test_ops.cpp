// Parity of every op the vulkan plugin runs against the cpu plugin: odd sizes, broadcasting,
// non-contiguous views, rank 0, empty tensors, every dtype the kernels take, special values.
#include "vulkan_test.hpp"

#include <limits>
#include <tuple>

using namespace vt;
namespace tf = tinyfin;

namespace {

constexpr float inf = std::numeric_limits<float>::infinity();
constexpr float qnan = std::numeric_limits<float>::quiet_NaN();

// Values with the edge cases of float math mixed in.
Pair specials(const Shape &shape) {
    std::vector<float> v = values(numel(shape), 5, -4, 4);
    const float edge[] = {0.0f, -0.0f, inf, -inf, qnan, 1.0f, -1.0f, 1e-30f, -1e-30f, 88.0f, -88.0f, 0.5f};
    for (std::size_t i = 0; i < v.size(); i += 3) v[i] = edge[(i / 3) % (sizeof edge / sizeof edge[0])];
    return both(v, shape);
}

using UnaryFn = Tensor (*)(const Tensor &);

}  // namespace

TEST_CASE("elementwise: unary float ops on views and special values") {
    struct Op {
        const char *name;
        UnaryFn fn;
        double lo, hi;
        Tolerance tol;
    };
    const Op ops[] = {
        {"neg", tf::neg, -3, 3, {}},
        {"exp", tf::exp, -10, 10, {1e-6, 2e-6}},
        {"relu", tf::relu, -3, 3, {}},
        {"abs", tf::abs, -3, 3, {}},
        {"log", tf::log, 1e-3, 50, {1e-6, 2e-6}},
        {"sqrt", tf::sqrt, 0, 50, {}},
        {"rsqrt", tf::rsqrt, 1e-3, 50, {1e-6, 2e-6}},
        {"sin", tf::sin, -6, 6, {2e-6, 1e-5}},
        {"cos", tf::cos, -6, 6, {2e-6, 1e-5}},
        {"tanh", tf::tanh, -6, 6, {1e-6, 2e-6}},
        {"sigmoid", tf::sigmoid, -20, 20, {1e-6, 2e-6}},
        {"silu", tf::silu, -20, 20, {1e-6, 2e-6}},
        {"square", tf::square, -30, 30, {}},
        {"erf", tf::erf, -4, 4, {1e-6, 2e-6}},
        {"gelu", [](const Tensor &x) { return tf::gelu(x, false); }, -8, 8, {2e-6, 2e-6}},
        {"gelu_tanh", [](const Tensor &x) { return tf::gelu(x, true); }, -8, 8, {2e-6, 2e-6}},
    };
    for (const Op &o : ops) {
        Pair x = random({13, 29}, 11, o.lo, o.hi);
        parity(
            std::string(o.name) + " contiguous", {x}, [&](auto &t) { return o.fn(t[0]); }, o.tol);
        parity(
            std::string(o.name) + " transposed", {x}, [&](auto &t) { return o.fn(t[0].transpose(0, 1)); }, o.tol);
        parity(
            std::string(o.name) + " stepped slice", {x}, [&](auto &t) { return o.fn(t[0].slice(1, 1, 29, 3)); }, o.tol);
        parity(
            std::string(o.name) + " special values", {specials({7, 12})}, [&](auto &t) { return o.fn(t[0]); }, o.tol);
        parity(
            std::string(o.name) + " rank 0", {random({}, 3, o.lo, o.hi)}, [&](auto &t) { return o.fn(t[0]); }, o.tol);
        parity(
            std::string(o.name) + " empty", {random({0, 5}, 3)}, [&](auto &t) { return o.fn(t[0]); }, o.tol);
    }
    Pair x = specials({9, 11});
    parity("clamp", {x}, [](auto &t) { return tf::clamp(t[0], -0.75, 2.1); });
    parity("clamp open below", {x}, [](auto &t) { return tf::clamp(t[0], -INFINITY, 0.3); });
    parity("clamp min > max", {x}, [](auto &t) { return tf::clamp(t[0].transpose(0, 1), 1.0, 1.0); });
}

TEST_CASE("elementwise: binary float ops with broadcasting") {
    using BinaryFn = Tensor (*)(const Tensor &, const Tensor &);
    const std::pair<const char *, BinaryFn> ops[] = {
        {"add", tf::add}, {"sub", tf::sub},         {"mul", tf::mul},
        {"div", tf::div}, {"maximum", tf::maximum}, {"minimum", tf::minimum},
    };
    Pair a = random({5, 1, 7}, 21, -3, 3), b = random({3, 1}, 22, -3, 3), c = random({7, 5}, 23, 0.5, 3);
    Pair s = random({}, 24, 1, 2);
    for (auto [name, fn] : ops) {
        parity(std::string(name) + " [5,1,7] x [3,1]", {a, b}, [&](auto &t) { return fn(t[0], t[1]); });
        parity(std::string(name) + " transposed x scalar", {c, s},
               [&](auto &t) { return fn(t[0].transpose(0, 1), t[1]); });
        parity(std::string(name) + " special values", {specials({6, 8}), random({8}, 9, -2, 2)},
               [&](auto &t) { return fn(t[0], t[1]); });
        parity(std::string(name) + " both special", {specials({12, 12}), both(values(144, 3, -4, 4), {12, 12})},
               [&](auto &t) { return fn(t[1], t[0].transpose(0, 1)); });
    }
    // pow: positive bases anywhere; negative bases with integral exponents; C's special cases.
    parity("pow", {random({6, 9}, 31, 0.1, 4), random({9}, 32, -3, 3)}, [](auto &t) { return tf::pow(t[0], t[1]); },
           {1e-6, 1e-5});
    std::vector<float> base = {-2, -2, -0.5f, 0, -0.0f, 0, inf, -inf, qnan, 1, -1, -1, 2, 3, -3, 0.5f};
    std::vector<float> expo = {2, 3, -3, -1, -1, 0, 0.5f, 3, 0, qnan, inf, 2.5f, -inf, 2, 1, 1};
    parity("pow special cases", {both(base, {16}), both(expo, {16})}, [](auto &t) { return tf::pow(t[0], t[1]); });
    // 1 / x tells -0 (-inf) from +0 (inf).
    const Pair zeros_a = both(std::vector<float>{-0.0f, 0.0f, -0.0f}, {3}),
               zeros_b = both(std::vector<float>{0.0f, -0.0f, -0.0f}, {3});
    parity("maximum(-0, +0) is +0", {zeros_a, zeros_b},
           [](auto &t) { return tf::div(tf::scalar_like(t[0], 1), tf::maximum(t[0], t[1])); });
    parity("minimum(-0, +0) is -0", {zeros_a, zeros_b},
           [](auto &t) { return tf::div(tf::scalar_like(t[0], 1), tf::minimum(t[0], t[1])); });
}

TEST_CASE("elementwise: integer arithmetic wraps like the cpu plugin") {
    Pair a32 = integers<int32_t>({4, 9}, 41, -2000000000, 2000000000), b32 = integers<int32_t>({9}, 42, -70000, 70000);
    Pair a64 = integers<int64_t>({4, 9}, 43, -4000000000000ll, 4000000000000ll),
         b64 = integers<int64_t>({9}, 44, -7000000, 7000000);
    for (const auto &[a, b, name] : {std::tuple{a32, b32, "i32"}, std::tuple{a64, b64, "i64"}}) {
        const std::string n = name;
        parity(n + " add", {a, b}, [](auto &t) { return tf::add(t[0], t[1]); });
        parity(n + " sub", {a, b}, [](auto &t) { return tf::sub(t[1], t[0].transpose(0, 1).transpose(0, 1)); });
        parity(n + " mul", {a, b}, [](auto &t) { return tf::mul(t[0], t[1]); });
        parity(n + " maximum", {a, b}, [](auto &t) { return tf::maximum(t[0], t[1]); });
        parity(n + " minimum", {a, b}, [](auto &t) { return tf::minimum(t[0], t[1]); });
        parity(n + " neg", {a}, [](auto &t) { return tf::neg(t[0]); });
        parity(n + " abs", {a}, [](auto &t) { return tf::abs(t[0]); });
        parity(n + " relu", {a}, [](auto &t) { return tf::relu(t[0].transpose(0, 1)); });
        parity(n + " square", {a}, [](auto &t) { return tf::square(t[0]); });
    }
    std::vector<int64_t> edge = {INT64_MIN, INT64_MAX, -1, 0, 1, 4294967296ll, -4294967296ll, 4294967295ll};
    Pair e = both(edge, {8});
    parity("i64 add carries", {e, both(std::vector<int64_t>{-1, 1, 1, -1, 4294967295ll, -1, 1, 1}, {8})},
           [](auto &t) { return tf::add(t[0], t[1]); });
    parity("i64 mul low bits", {e, e}, [](auto &t) { return tf::mul(t[0], t[1]); });
    parity("i64 neg, abs of MIN", {e}, [](auto &t) { return tf::add(tf::neg(t[0]), tf::abs(t[0])); });
}

TEST_CASE("elementwise: comparisons and where on every dtype") {
    using CompareFn = Tensor (*)(const Tensor &, const Tensor &);
    const std::pair<const char *, CompareFn> ops[] = {
        {"eq", tf::eq}, {"ne", tf::ne}, {"lt", tf::lt}, {"le", tf::le}, {"gt", tf::gt}, {"ge", tf::ge},
    };
    // Small integer ranges make ties common.
    Pair f = integers<int32_t>({7, 11}, 51, -3, 3), g = integers<int32_t>({11}, 52, -3, 3);
    std::vector<std::tuple<std::string, Pair, Pair>> inputs = {
        {"f32",
         {tf::cast(f.cpu, DType::f32), tf::cast(f.vk, DType::f32)},
         {tf::cast(g.cpu, DType::f32), tf::cast(g.vk, DType::f32)}},
        {"i32", f, g},
        {"i64", integers<int64_t>({7, 11}, 53, -3000000000ll, 3000000000ll),
         integers<int64_t>({11}, 54, -3000000000ll, 3000000000ll)},
        {"bool", booleans({7, 11}, 55), booleans({11}, 56)},
        {"f32 special", specials({7, 11}), random({11}, 57, -4, 4)},
    };
    for (const auto &[dtype, a, b] : inputs) {
        for (auto [name, fn] : ops) {
            parity(std::string(name) + " " + dtype, {a, b}, [&](auto &t) { return fn(t[0], t[1]); });
            parity(std::string(name) + " " + dtype + " transposed", {a, b}, [&](auto &t) {
                return fn(t[0].transpose(0, 1), t[1].view({11, 1}));
            });
        }
    }
    // Odd sizes, so the last word of the bool output is partial, and an odd-offset bool output.
    parity("gt bool output of 13 elements", {random({13}, 58), random({13}, 59)},
           [](auto &t) { return tf::gt(t[0], t[1]); });
    Pair cond = booleans({5, 1, 9}, 60);
    parity("where f32 broadcast", {cond, random({3, 9}, 61), random({5, 3, 1}, 62)},
           [](auto &t) { return tf::where(t[0], t[1], t[2]); });
    parity("where i64",
           {cond, integers<int64_t>({9}, 63, -9, 9), integers<int64_t>({5, 1, 9}, 64, INT32_MIN, INT32_MAX)},
           [](auto &t) { return tf::where(t[0], t[1], t[2]); });
    parity("where i32 on a sliced condition",
           {booleans({6, 18}, 65), integers<int32_t>({6, 9}, 66, -9, 9), integers<int32_t>({9}, 67, -9, 9)},
           [](auto &t) { return tf::where(t[0].slice(1, 1, 18, 2), t[1], t[2]); });
    parity("where bool", {cond, booleans({9}, 68), booleans({5, 3, 9}, 69)},
           [](auto &t) { return tf::where(t[0], t[1], t[2]); });
}

TEST_CASE("elementwise: cast between every pair, contiguous copies, fill") {
    const DType dtypes[] = {DType::f32, DType::i32, DType::i64, DType::boolean};
    std::vector<float> f = values(60, 71, -3e9, 3e9);
    const float edge[] = {qnan,     inf,  -inf,  2147483648.0f, -2147483648.0f, 9.3e18f,
                          -9.3e18f, 0.5f, -0.5f, -0.0f,         16777217.0f,    1.5f};
    for (std::size_t i = 0; i < sizeof edge / sizeof edge[0]; ++i) f[i * 5] = edge[i];
    std::vector<int64_t> i64 = {INT64_MIN,
                                INT64_MAX,
                                (1ll << 53) + 1,
                                -((1ll << 40) + 3),
                                16777217,
                                -16777219,
                                0,
                                1,
                                -1,
                                (1ll << 62) + (1ll << 38) + 1,
                                3000000000ll,
                                -3000000000ll};
    const std::vector<Pair> sources = {
        both(f, {6, 10}),
        integers<int32_t>({6, 10}, 72, INT32_MIN, INT32_MAX),
        both(i64, {3, 4}),
        booleans({6, 10}, 73),
    };
    for (const Pair &src : sources) {
        for (DType to : dtypes) {
            if (to == src.cpu.dtype()) continue;
            const std::string name =
                std::string("cast ") + tf::dtype_name(src.cpu.dtype()) + " -> " + tf::dtype_name(to);
            parity(name, {src}, [&](auto &t) { return tf::cast(t[0], to); });
            parity(name + " transposed", {src}, [&](auto &t) { return tf::cast(t[0].transpose(0, 1), to); });
        }
        const std::string dt = tf::dtype_name(src.cpu.dtype());
        parity("contiguous " + dt + " transposed", {src}, [](auto &t) { return t[0].transpose(0, 1).contiguous(); });
        parity("contiguous " + dt + " stepped", {src},
               [](auto &t) { return t[0].slice(1, 1, t[0].size(1), 2).contiguous(); });
        parity("contiguous " + dt + " broadcast", {src}, [](auto &t) {
            return t[0].slice(0, 1, 2).expand({5, 1, t[0].size(1)}).contiguous();
        });
    }
    for (DType d : dtypes) {
        for (double v :
             {0.0, 1.0, -2.75, 3e9, -1e20, 7.0e-46, static_cast<double>(NAN), static_cast<double>(INFINITY)}) {
            const std::string name = std::string("fill ") + tf::dtype_name(d) + " " + std::to_string(v);
            Tensor want = tf::full({3, 5}, v, d, cpu_device);
            Tensor got = tf::full({3, 5}, v, d, gpu_device);
            check(got, want, 0, 0, name);
        }
        check(tf::full({}, 2.5, d, gpu_device), tf::full({}, 2.5, d, cpu_device), 0, 0, "fill rank 0");
        check(tf::full({17}, 1, d, gpu_device), tf::full({17}, 1, d, cpu_device), 0, 0, "fill 17");
    }
}

TEST_CASE("elementwise: writes into strided views leave the other elements alone") {
    const DType dtypes[] = {DType::f32, DType::i32, DType::i64, DType::boolean};
    for (DType d : dtypes) {
        INFO(tf::dtype_name(d));
        // Sentinels everywhere, then a strided view of it overwritten: the gaps must survive.
        Tensor base_cpu = tf::full({7, 9}, 3, d, cpu_device), base_vk = tf::full({7, 9}, 3, d, gpu_device);
        Pair src = booleans({3, 4}, 81);
        Tensor src_cpu = tf::cast(src.cpu, d), src_vk = tf::cast(src.vk, d);
        base_cpu.slice(0, 1, 7, 2).slice(1, 2, 9, 2).assign_(src_cpu);
        base_vk.slice(0, 1, 7, 2).slice(1, 2, 9, 2).assign_(src_vk);
        check(base_vk, base_cpu, 0, 0, "assign_ into a stepped view");
        // A transposed destination and a broadcast source.
        Tensor row_cpu = tf::cast(random({1, 7}, 82, -5, 5).cpu, d);
        Tensor row_vk = tf::cast(tf::from_vector(values(7, 82, -5, 5), {1, 7}, gpu_device), d);
        base_cpu.transpose(0, 1).slice(0, 0, 5).assign_(row_cpu);
        base_vk.transpose(0, 1).slice(0, 0, 5).assign_(row_vk);
        check(base_vk, base_cpu, 0, 0, "assign_ into a transposed view");
        // Single bool bytes at odd offsets, inside words shared with their neighbours.
        base_cpu.slice(1, 3, 4).assign_(tf::full({7, 1}, 0, d, cpu_device));
        base_vk.slice(1, 3, 4).assign_(tf::full({7, 1}, 0, d, gpu_device));
        check(base_vk, base_cpu, 0, 0, "assign_ one column");
    }
}

TEST_CASE("reduce: sum, mean, max, min, var over axes, in both kernel modes") {
    struct ShapeCase {
        Shape shape;
        std::vector<std::vector<int>> axes;
    };
    const ShapeCase cases[] = {
        {{13, 7}, {{0}, {1}, {}}},  {{3, 5, 7, 2}, {{1, 3}, {0, 2}, {0, 1, 2, 3}, {2}}},
        {{600, 3}, {{0}, {1}}},  // long reductions: a workgroup per output
        {{4, 1000}, {{1}, {0, 1}}}, {{1}, {{0}}},
    };
    using ReduceFn = Tensor (*)(const Tensor &, const tf::Axes &, bool);
    const std::pair<const char *, ReduceFn> ops[] = {
        {"sum", tf::sum}, {"mean", tf::mean}, {"max", tf::max}, {"min", tf::min}};
    for (const ShapeCase &c : cases) {
        Pair x = random(c.shape, 91, -2, 2);
        for (const auto &axes : c.axes) {
            std::string where = tf::shape_str(c.shape) + " axes " + std::to_string(axes.size());
            for (auto [name, fn] : ops) {
                parity(std::string(name) + " " + where, {x}, [&](auto &t) { return fn(t[0], axes, false); },
                       {1e-5, 1e-5});
                parity(std::string(name) + " keepdim " + where, {x}, [&](auto &t) { return fn(t[0], axes, true); },
                       {1e-5, 1e-5});
            }
            parity("var " + where, {x}, [&](auto &t) { return tf::var(t[0], axes, 1, false); }, {1e-5, 1e-4});
            parity("var population " + where, {x}, [&](auto &t) { return tf::var(t[0], axes, 0, true); }, {1e-5, 1e-4});
        }
    }
    Pair y = random({6, 40, 11}, 92);
    parity("sum of a permuted view", {y},
           [](auto &t) {
               return tf::sum(t[0].permute({2, 0, 1}), {1, 2});
           },
           {1e-5, 1e-5});
    parity("max of a stepped view", {y}, [](auto &t) { return tf::max(t[0].slice(1, 3, 40, 5), {0, 1}); });
    parity("sum of a broadcast view", {random({1, 9}, 93)},
           [](auto &t) {
               return tf::sum(t[0].expand({300, 9}), {0});
           },
           {1e-4, 1e-5});
    parity("sum over nothing (rank 0)", {random({}, 94)}, [](auto &t) { return tf::sum(t[0]); });
    parity("sum of an empty axis", {random({0, 4}, 95)}, [](auto &t) { return tf::sum(t[0], {0}); });
    parity("mean of an empty axis is NaN", {random({0, 4}, 95)}, [](auto &t) { return tf::mean(t[0], {0}); });
    parity("max with NaN and -0", {specials({12, 30})}, [](auto &t) { return tf::max(t[0], {1}); });
    parity("min with NaN, long rows", {specials({3, 900})}, [](auto &t) { return tf::min(t[0], {1}); });
}

TEST_CASE("reduce: argmax and argmin pick the first extreme; NaN wins") {
    // Few distinct values: ties everywhere.
    Pair x = integers<int32_t>({9, 31}, 101, -2, 2);
    Pair f = {tf::cast(x.cpu, DType::f32), tf::cast(x.vk, DType::f32)};
    for (int axis : {0, 1, -1}) {
        parity("argmax axis " + std::to_string(axis), {f}, [&](auto &t) { return tf::argmax(t[0], axis); });
        parity("argmin axis " + std::to_string(axis), {f}, [&](auto &t) { return tf::argmin(t[0], axis, true); });
    }
    Pair li = integers<int32_t>({3, 700}, 102, -3, 3);
    Pair longer = {tf::cast(li.cpu, DType::f32), tf::cast(li.vk, DType::f32)};
    parity("argmax of long rows", {longer}, [](auto &t) { return tf::argmax(t[0], 1); });
    parity("argmin of long rows", {longer}, [](auto &t) { return tf::argmin(t[0], 1); });
    parity("argmax with NaN", {specials({8, 600})}, [](auto &t) { return tf::argmax(t[0], 1); });
    parity("argmin with NaN", {specials({40, 7})}, [](auto &t) { return tf::argmin(t[0].transpose(0, 1), 1); });
}

TEST_CASE("gemm: matmul of odd sizes, views and batches") {
    const Tolerance tol{1e-5, 1e-5};
    parity(
        "matmul 67x45 @ 45x93", {random({67, 45}, 111), random({45, 93}, 112)},
        [](auto &t) { return tf::matmul(t[0], t[1]); }, tol);
    parity(
        "matmul a^T b^T", {random({45, 67}, 113), random({93, 45}, 114)},
        [](auto &t) { return tf::matmul(t[0].transpose(0, 1), t[1].transpose(0, 1)); }, tol);
    parity(
        "matmul 1x1", {random({1, 1}, 115), random({1, 1}, 116)}, [](auto &t) { return tf::matmul(t[0], t[1]); }, tol);
    parity(
        "matmul vector @ matrix", {random({17}, 117), random({17, 5}, 118)},
        [](auto &t) { return tf::matmul(t[0], t[1]); }, tol);
    parity(
        "matmul matrix @ vector", {random({5, 17}, 119), random({17}, 120)},
        [](auto &t) { return tf::matmul(t[0], t[1]); }, tol);
    parity(
        "batched, broadcast batch", {random({3, 1, 19, 23}, 121), random({4, 23, 7}, 122)},
        [](auto &t) { return tf::matmul(t[0], t[1]); }, tol);
    parity(
        "batched, stepped views", {random({5, 40, 30}, 123), random({30, 5, 33}, 124)},
        [](auto &t) {
            return tf::matmul(t[0].slice(1, 0, 40, 2), t[1].permute({1, 0, 2}).slice(2, 1, 33, 3));
        },
        tol);
    parity("inner dimension 0", {random({4, 0}, 125), random({0, 6}, 126)},
           [](auto &t) { return tf::matmul(t[0], t[1]); });
    parity("long inner dimension", {random({9, 1500}, 127), random({1500, 11}, 128)},
           [](auto &t) { return tf::matmul(t[0], t[1]); }, {1e-4, 1e-4});
    // More 64-column tiles than a dispatch may have workgroups along x: the kernel loops.
    const int64_t wide = 65535 * 64 + 100;
    parity(
        "matmul wider than the grid", {random({2, 3}, 131), random({3, wide}, 132)},
        [](auto &t) { return tf::matmul(t[0], t[1]); }, tol);
    grad_parity(
        "matmul gradients", {random({6, 9}, 129), random({9, 4}, 130)}, [](auto &t) { return tf::matmul(t[0], t[1]); },
        tol);
}

TEST_CASE("gemm: conv2d forward and both gradients") {
    struct ConvCase {
        const char *name;
        Shape x, w;
        tf::Conv2dOptions o;
    };
    const ConvCase cases[] = {
        {"3x3", {2, 3, 11, 9}, {5, 3, 3, 3}, {}},
        {"stride 2, padding 1", {2, 4, 12, 13}, {6, 4, 3, 3}, {2, 2, 1, 1, 1, 1, 1}},
        {"stride (1,3), padding (2,0), dilation (2,1)", {1, 2, 10, 15}, {3, 2, 3, 2}, {1, 3, 2, 0, 2, 1, 1}},
        {"groups 2", {2, 6, 8, 8}, {4, 3, 3, 3}, {1, 1, 1, 1, 1, 1, 2}},
        {"depthwise 5x5", {1, 4, 9, 9}, {4, 1, 5, 5}, {1, 1, 2, 2, 1, 1, 4}},
        {"1x1 on many channels", {3, 70, 5, 5}, {66, 70, 1, 1}, {}},
        {"the CNN's first layer", {8, 1, 28, 28}, {32, 1, 3, 3}, {}},
    };
    for (const ConvCase &c : cases) {
        Pair x = random(c.x, 141), w = random(c.w, 142);
        // Gradients add hundreds of products of O(1) values in f32: absolute error ~1e-5.
        grad_parity(std::string("conv2d ") + c.name, {x, w},
                    [&](auto &t) { return tf::conv2d(t[0], t[1], Tensor(), c.o); }, {1e-4, 1e-4});
    }
    Pair x = random({2, 3, 9, 9}, 143), w = random({4, 3, 3, 3}, 144), b = random({4}, 145);
    grad_parity("conv2d with bias on a permuted input", {x, w, b},
                [](auto &t) {
                    return tf::conv2d(t[0].permute({0, 1, 3, 2}), t[1], t[2]);
                },
                {1e-4, 1e-4});
}

TEST_CASE("nn: pooling forward and backward") {
    struct PoolCase {
        const char *name;
        Shape x;
        tf::Pool2dOptions o;
    };
    const PoolCase cases[] = {
        {"2x2", {2, 3, 10, 11}, {}},
        {"3x3 stride 2 padding 1", {1, 2, 9, 12}, {3, 3, 2, 2, 1, 1, true}},
        {"3x2 stride 1 (overlapping)", {2, 2, 7, 6}, {3, 2, 1, 1, 1, 0, false}},
    };
    for (const PoolCase &c : cases) {
        // Few distinct values: windows with tied maxima.
        Pair xi = integers<int32_t>(c.x, 151, -3, 3);
        Pair x = {tf::cast(xi.cpu, DType::f32), tf::cast(xi.vk, DType::f32)};
        grad_parity(std::string("max_pool2d ") + c.name, {x}, [&](auto &t) { return tf::max_pool2d(t[0], c.o); });
        grad_parity(std::string("avg_pool2d ") + c.name, {random(c.x, 152)},
                    [&](auto &t) { return tf::avg_pool2d(t[0], c.o); });
        tf::Pool2dOptions exclude = c.o;
        exclude.count_include_pad = false;
        grad_parity(std::string("avg_pool2d without padding ") + c.name, {random(c.x, 153)},
                    [&](auto &t) { return tf::avg_pool2d(t[0].transpose(2, 3).transpose(2, 3), exclude); });
    }
    parity("max_pool2d with NaN and inf", {specials({1, 2, 8, 8})}, [](auto &t) { return tf::max_pool2d(t[0]); });
}

TEST_CASE("nn: softmax, log_softmax, layer_norm, rms_norm") {
    Pair x = random({4, 7, 10}, 161, -5, 5);
    for (int axis : {0, 1, 2}) {
        grad_parity("softmax axis " + std::to_string(axis), {x}, [&](auto &t) { return tf::softmax(t[0], axis); });
        grad_parity("log_softmax axis " + std::to_string(axis), {x},
                    [&](auto &t) { return tf::log_softmax(t[0], axis); });
    }
    parity("softmax of a view", {x}, [](auto &t) { return tf::softmax(t[0].transpose(0, 2), -1); });
    parity("log_softmax with -inf", {both(std::vector<float>{-inf, 0, 1, -inf, -inf, 2}, {2, 3})},
           [](auto &t) { return tf::log_softmax(t[0], 1); });
    Pair w = random({7, 10}, 162), b = random({7, 10}, 163), w1 = random({10}, 164);
    grad_parity("layer_norm over 2 axes", {x, w, b}, [](auto &t) { return tf::layer_norm(t[0], 2, t[1], t[2]); },
                {1e-5, 1e-4});
    grad_parity("layer_norm over 1 axis", {x, w1}, [](auto &t) { return tf::layer_norm(t[0], 1, t[1]); }, {1e-5, 1e-4});
    parity("layer_norm of a view", {x, w1}, [](auto &t) { return tf::layer_norm(t[0].transpose(0, 1), 1, t[1]); },
           {1e-5, 1e-4});
    grad_parity("rms_norm", {x, w1}, [](auto &t) { return tf::rms_norm(t[0], 1, t[1]); }, {1e-5, 1e-4});
    parity("rms_norm without weight, 3 axes", {x}, [](auto &t) { return tf::rms_norm(t[0], 3); }, {1e-5, 1e-4});
}

TEST_CASE("nn: cross_entropy, one_hot, embedding, rope, attention") {
    Pair logits = random({37, 10}, 171, -4, 4);
    Pair labels64 = integers<int64_t>({37}, 172, 0, 10), labels32 = integers<int32_t>({37}, 173, 0, 10);
    std::vector<int64_t> some_ignored(37);
    for (int i = 0; i < 37; ++i) some_ignored[static_cast<std::size_t>(i)] = i % 4 == 0 ? -100 : i % 10;
    for (auto reduction : {tf::Reduction::mean, tf::Reduction::sum, tf::Reduction::none}) {
        const std::string r = std::to_string(static_cast<int>(reduction));
        grad_parity("cross_entropy i64, reduction " + r, {logits, labels64},
                    [&](auto &t) { return tf::cross_entropy(t[0], t[1], reduction); }, {1e-5, 1e-5});
        grad_parity("cross_entropy i32 on a view, reduction " + r, {random({10, 37}, 174), labels32},
                    [&](auto &t) { return tf::cross_entropy(t[0].transpose(0, 1), t[1], reduction); }, {1e-5, 1e-5});
        grad_parity("cross_entropy with ignored labels, reduction " + r, {logits, both(some_ignored, {37})},
                    [&](auto &t) { return tf::cross_entropy(t[0], t[1], reduction); }, {1e-5, 1e-5});
    }
    for (DType d : {DType::f32, DType::i32, DType::i64, DType::boolean}) {
        parity(std::string("one_hot -> ") + tf::dtype_name(d), {integers<int64_t>({3, 5}, 175, 0, 7)},
               [&](auto &t) { return tf::one_hot(t[0], 7, d); });
        parity(std::string("one_hot i32 view -> ") + tf::dtype_name(d), {integers<int32_t>({5, 3}, 176, 0, 4)},
               [&](auto &t) { return tf::one_hot(t[0].transpose(0, 1), 4, d); });
    }
    Pair table = random({11, 6}, 177);
    grad_parity("embedding i64 with repeated rows", {table, integers<int64_t>({4, 5}, 178, 0, 11)},
                [](auto &t) { return tf::embedding(t[0], t[1]); });
    grad_parity("embedding i32 of a transposed table", {random({6, 11}, 179), integers<int32_t>({7}, 180, 0, 11)},
                [](auto &t) { return tf::embedding(t[0].transpose(0, 1), t[1]); });
    Pair seq = random({2, 3, 9, 8}, 181);
    for (bool interleaved : {false, true}) {
        const std::string name = interleaved ? "rope interleaved" : "rope halves";
        grad_parity(name, {seq}, [&](auto &t) { return tf::rope(t[0], 10000.0, interleaved); }, {2e-6, 1e-5});
        parity(name + " offset 17 on a view", {seq},
               [&](auto &t) { return tf::rope(t[0].transpose(0, 1), 500.0, interleaved, 17); }, {2e-6, 1e-5});
    }
    Pair q = random({2, 3, 5, 8}, 182), k = random({2, 3, 7, 8}, 183), v = random({2, 3, 7, 6}, 184);
    Pair mask = random({5, 7}, 185, -1, 0);
    grad_parity("attention", {q, k, v}, [](auto &t) { return tf::scaled_dot_product_attention(t[0], t[1], t[2]); },
                {1e-5, 1e-4});
    grad_parity("attention causal with a mask", {q, k, v, mask},
                [](auto &t) { return tf::scaled_dot_product_attention(t[0], t[1], t[2], t[3], true, 0.3); },
                {1e-5, 1e-4});
    parity("attention of views, broadcast batch",
           {random({1, 5, 8}, 186), random({3, 8, 7}, 187), random({7, 1, 6}, 188)},
           [](auto &t) {
               return tf::scaled_dot_product_attention(t[0], t[1].transpose(1, 2),
                                                       t[2].expand({7, 3, 6}).permute({1, 0, 2}), Tensor(), true);
           },
           {1e-5, 1e-4});
}

// Without a mask the op's mask operand is absent (plugin.h, TF_TENSOR_ABSENT): the kernel adds
// nothing and reads nothing, and no mask tensor is made on the device.
TEST_CASE("nn: attention without a mask equals a zero mask and makes no mask tensor") {
    Pair q = random({2, 3, 5, 8}, 201), k = random({2, 3, 7, 8}, 202), v = random({2, 3, 7, 6}, 203);
    Pair zero = both(std::vector<float>(5 * 7, 0.0f), {5, 7});
    for (bool causal : {false, true}) {
        const std::string name = std::string("attention without a mask") + (causal ? ", causal" : "");
        grad_parity(name, {q, k, v},
                    [&](auto &t) { return tf::scaled_dot_product_attention(t[0], t[1], t[2], Tensor(), causal); },
                    {1e-5, 1e-4});
        // x * scale + 0 is x * scale: an explicit zero mask gives the same bits on the device.
        const Tensor none = tf::scaled_dot_product_attention(q.vk, k.vk, v.vk, Tensor(), causal);
        const Tensor zeros = tf::scaled_dot_product_attention(q.vk, k.vk, v.vk, zero.vk, causal);
        CHECK(host(none) == host(zeros));
    }
    // A fresh thread (the core's per-thread constants are empty): the output is the one buffer.
    uint64_t allocations = 0;
    Tensor out;
    std::thread([&] {
        tf::reset_stats();
        out = tf::scaled_dot_product_attention(q.vk, k.vk, v.vk);
        const tf::Stats st = tf::stats();
        allocations = st.backend(TF_TEST_BACKEND)->allocations;
    }).join();
    CHECK(allocations == 1);
    check(out, tf::scaled_dot_product_attention(q.cpu, k.cpu, v.cpu), 1e-5, 1e-4, "attention on a fresh thread");
}

// Long contexts: the angle position * theta^(-2i/D) reaches 10^6 radians and more, where an f32
// angle (or an f32 frequency times the position) is off by whole radians. The kernel reduces the
// angle to turns from exact partial products; the result must follow cpu's double angles.
TEST_CASE("nn: rope at large position offsets follows cpu") {
    Pair seq = random({2, 4, 16}, 191);
    for (int64_t offset :
         {int64_t{100000}, int64_t{1000000}, int64_t{1} << 24, (int64_t{1} << 31) + 12345, int64_t{-3000017}}) {
        for (bool interleaved : {false, true}) {
            const std::string name =
                "rope offset " + std::to_string(offset) + (interleaved ? " interleaved" : " halves");
            parity(name, {seq}, [&](auto &t) { return tf::rope(t[0], 10000.0, interleaved, offset); }, {2e-5, 1e-5});
        }
    }
    // The backward rule is the inverse rotation.
    grad_parity("rope offset 10^6, gradient", {seq}, [](auto &t) { return tf::rope(t[0], 10000.0, false, 1000000); },
                {2e-5, 1e-5});
    parity("rope theta 500 offset 2^24 + 3", {seq},
           [](auto &t) { return tf::rope(t[0], 500.0, false, (int64_t{1} << 24) + 3); }, {2e-5, 1e-5});
}

// Squares of |x| > ~1.8e19 overflow f32: the kernels scale the row before squaring, as the cpu
// plugin's double statistics need not.
TEST_CASE("nn: layer_norm and rms_norm of huge and tiny magnitudes follow cpu") {
    for (double magnitude : {1e19, 1e25, 3e37, 1e-20}) {
        std::vector<float> v = values(3 * 40, 192, -1, 1);
        for (float &x : v) x = static_cast<float>(x * magnitude);
        Pair x = both(v, {3, 40});
        Pair w = random({40}, 193), b = random({40}, 194);
        const std::string m = std::to_string(magnitude);
        parity("layer_norm at " + m, {x, w, b}, [](auto &t) { return tf::layer_norm(t[0], 1, t[1], t[2]); },
               {1e-5, 1e-4});
        parity("rms_norm at " + m, {x, w}, [](auto &t) { return tf::rms_norm(t[0], 1, t[1]); }, {1e-5, 1e-4});
    }
}
