// DistributedDataParallel and ShardedSampler against a single-process reference: every rank also
// trains an unwrapped copy of the model on the whole global batch, and the parameters after each
// step must agree within f32 tolerance; the ranks' parameters must agree bitwise.
#include <cmath>
#include <cstring>

#include "mpi_main.hpp"

using namespace tinyfin;
using dist_test::ctx;

namespace {

constexpr int64_t features = 6, classes = 3;

std::shared_ptr<nn::Sequential> make_mlp(uint64_t seed) {
    return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(features, 8, true, nn::mix_seed(seed, 1)),
        std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(8, classes, true, nn::mix_seed(seed, 2)),
    });
}

std::shared_ptr<nn::Sequential> make_cnn(uint64_t seed) {
    Conv2dOptions pad;
    pad.pad_h = pad.pad_w = 1;
    return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Conv2d>(1, 4, 3, pad, true, nn::mix_seed(seed, 1)),
        std::make_shared<nn::ReLU>(),
        std::make_shared<nn::MaxPool2d>(2),
        std::make_shared<nn::Flatten>(),
        std::make_shared<nn::Linear>(4 * 3 * 3, classes, true, nn::mix_seed(seed, 2)),
    });
}

// A dataset every rank builds identically: sample i is features_of(i), its label i % classes.
struct Data {
    Shape sample;
    std::vector<float> x;
    int64_t size() const { return static_cast<int64_t>(x.size()) / sample_numel(); }
    int64_t sample_numel() const {
        int64_t n = 1;
        for (int64_t s : sample) n *= s;
        return n;
    }
    // The samples of indices as one batch on the default device.
    std::pair<Tensor, Tensor> batch(const std::vector<int64_t> &indices) const {
        int64_t m = sample_numel();
        std::vector<float> xs;
        std::vector<int64_t> ys;
        for (int64_t i : indices) {
            xs.insert(xs.end(), x.begin() + i * m, x.begin() + (i + 1) * m);
            ys.push_back(i % classes);
        }
        Shape shape{static_cast<int64_t>(indices.size())};
        shape.insert(shape.end(), sample.begin(), sample.end());
        return {from_vector(xs, shape), from_vector(ys, {static_cast<int64_t>(ys.size())})};
    }
};

Data make_data(int64_t n, Shape sample) {
    Data d{std::move(sample), {}};
    d.x = rand({n * d.sample_numel()}, 99).to_vector<float>();
    return d;
}

void check_close(const std::vector<Tensor> &a, const std::vector<Tensor> &b, double tol) {
    REQUIRE(a.size() == b.size());
    for (std::size_t k = 0; k < a.size(); ++k) {
        std::vector<float> x = a[k].to_vector<float>(), y = b[k].to_vector<float>();
        REQUIRE(x.size() == y.size());
        double worst = 0;
        for (std::size_t i = 0; i < x.size(); ++i)
            worst = std::max(worst, std::abs(double(x[i]) - y[i]) / (1e-3 + std::abs(double(y[i]))));
        INFO("parameter " << k << " " << shape_str(a[k].shape()));
        CHECK(worst <= tol);
    }
}

// The ranks hold bitwise identical parameters.
void check_identical_across_ranks(const std::vector<Tensor> &params) {
    auto mine = static_cast<int64_t>(dist::checksum(params));
    std::vector<int64_t> all =
        ctx().all_gather(from_vector<int64_t>({mine}, {1}, Device{"cpu", 0})).to_vector<int64_t>();
    for (int64_t c : all) CHECK(c == all[0]);
}

// steps of SGD through DDP on this rank's slices, and of the reference on whole global batches.
void train_and_compare(std::shared_ptr<nn::Sequential> (*make)(uint64_t), const Data &data, int64_t global_batch,
                       int epochs, dist::DDPOptions options = {}) {
    // Rank-dependent seeds: the broadcast from rank 0 must make them equal.
    auto model = make(1000 + static_cast<uint64_t>(ctx().rank()));
    auto reference = make(1000);
    dist::DistributedDataParallel ddp(ctx(), model, options);
    check_close(model->parameters(), reference->parameters(), 0);
    optim::SGD opt(ddp.parameters(), 0.5, 0.9);
    optim::SGD opt_ref(reference->parameters(), 0.5, 0.9);
    dist::ShardedSampler sampler(ctx(), data.size(), global_batch, 7);
    for (int epoch = 1; epoch <= epochs; ++epoch) {
        sampler.set_epoch(epoch);
        for (int64_t step = 0; step < sampler.steps(); ++step) {
            opt.zero_grad();
            std::vector<int64_t> mine = sampler.batch(step);
            ddp.set_batch_size(static_cast<int64_t>(mine.size()));
            if (!mine.empty()) {
                auto [x, y] = data.batch(mine);
                cross_entropy(ddp(x), y).backward();
            }
            ddp.synchronize_gradients();
            opt.step();

            // The whole global batch: the union of every rank's slice.
            std::vector<int64_t> all;
            for (int r = 0; r < ctx().world_size(); ++r) {
                dist::ShardedSampler other(data.size(), global_batch, ctx().world_size(), r, 7);
                other.set_epoch(epoch);
                for (int64_t i : other.batch(step)) all.push_back(i);
            }
            CHECK(static_cast<int64_t>(all.size()) == sampler.global_batch_size(step));
            opt_ref.zero_grad();
            auto [x, y] = data.batch(all);
            cross_entropy((*reference)(x), y).backward();
            opt_ref.step();
        }
    }
    check_close(model->parameters(), reference->parameters(), 2e-4);
    check_identical_across_ranks(model->parameters());
}

// An MLP whose parameters are f16 or bf16 (nn::Linear makes f32 ones); logits in that dtype.
class HalfMLP : public nn::Module {
public:
    HalfMLP(uint64_t seed, DType dtype) : dtype_(dtype) {
        NoGradGuard no_grad;
        w1 = ((rand({8, features}, nn::mix_seed(seed, 1)) - 0.5) * 0.8).to(dtype);
        b1 = ((rand({8}, nn::mix_seed(seed, 2)) - 0.5) * 0.2).to(dtype);
        w2 = ((rand({classes, 8}, nn::mix_seed(seed, 3)) - 0.5) * 0.8).to(dtype);
        register_parameter("w1", w1);
        register_parameter("b1", b1);
        register_parameter("w2", w2);
    }
    Tensor forward(const Tensor &x) override {
        Tensor h = relu(matmul(x.to(dtype_), w1.transpose(0, 1)) + b1);
        return matmul(h, w2.transpose(0, 1));
    }
    std::string describe() const override { return "HalfMLP"; }
    Tensor w1, b1, w2;

private:
    DType dtype_;
};

// Close relative to each tensor's largest magnitude: low-precision gradients of mixed signs
// lose relative accuracy in their small elements, not against the scale of the tensor.
void check_close_to_scale(const std::vector<Tensor> &a, const std::vector<Tensor> &b, double tol) {
    REQUIRE(a.size() == b.size());
    for (std::size_t k = 0; k < a.size(); ++k) {
        std::vector<float> x = a[k].to(DType::f32).to_vector<float>();
        std::vector<float> y = b[k].to(DType::f32).to_vector<float>();
        REQUIRE(x.size() == y.size());
        double worst = 0, scale = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
            worst = std::max(worst, std::abs(double(x[i]) - y[i]));
            scale = std::max(scale, std::abs(double(y[i])));
        }
        INFO("parameter " << k << " " << shape_str(a[k].shape()) << ": " << worst << " of " << scale);
        CHECK(scale > 0);
        CHECK(worst <= tol * scale);
    }
}

}  // namespace

TEST_CASE("f16 and bf16 models: one DDP step equals the single-process step") {
    int w = ctx().world_size();
    int r = ctx().rank();
    // Rank r has 3 samples, the reference all 3w: DDP sums in f32 and rounds the average once,
    // the reference reduces over the batch in the model's dtype, so they agree to its precision.
    for (auto [dtype, tol] : {std::pair{DType::f16, 2e-3}, std::pair{DType::bf16, 1.5e-2}}) {
        INFO(dtype_name(dtype));
        Data data = make_data(3 * w, {features});
        auto model = std::make_shared<HalfMLP>(1000 + static_cast<uint64_t>(r), dtype);
        auto reference = std::make_shared<HalfMLP>(1000, dtype);
        dist::DistributedDataParallel ddp(ctx(), model);
        optim::SGD opt(ddp.parameters(), 0.5);
        optim::SGD opt_ref(reference->parameters(), 0.5);
        auto [x, y] = data.batch({3 * r, 3 * r + 1, 3 * r + 2});
        ddp.set_batch_size(3);
        ddp.backward(cross_entropy(ddp(x), y));
        std::vector<int64_t> all(static_cast<std::size_t>(3 * w));
        for (int64_t i = 0; i < 3 * w; ++i) all[i] = i;
        auto [xa, ya] = data.batch(all);
        cross_entropy((*reference)(xa), ya).backward();

        std::vector<Tensor> got, expected;
        for (const Tensor &p : model->parameters()) {
            CHECK(p.grad().dtype() == dtype);
            got.push_back(p.grad());
        }
        for (const Tensor &p : reference->parameters()) expected.push_back(p.grad());
        check_close_to_scale(got, expected, tol);
        check_identical_across_ranks(got);
        opt.step();
        opt_ref.step();
        check_close_to_scale(model->parameters(), reference->parameters(), tol);
        check_identical_across_ranks(model->parameters());
    }
}

TEST_CASE("ShardedSampler: slices partition each global batch, reshuffled per epoch") {
    int w = ctx().world_size();
    for (int64_t n : {0, 1, 10, 23}) {
        for (int64_t batch : {1, 4, 7}) {
            std::vector<int> seen(static_cast<std::size_t>(n), 0);
            for (int r = 0; r < w; ++r) {
                dist::ShardedSampler s(n, batch, w, r, 3);
                s.set_epoch(2);
                CHECK(s.steps() == (n + batch - 1) / batch);
                int64_t total = 0;
                for (int64_t step = 0; step < s.steps(); ++step) {
                    auto b = s.batch(step);
                    int64_t size = s.global_batch_size(step);
                    CHECK(static_cast<int64_t>(b.size()) >= size / w);
                    CHECK(static_cast<int64_t>(b.size()) <= (size + w - 1) / w);
                    for (int64_t i : b) ++seen[static_cast<std::size_t>(i)];
                    total += static_cast<int64_t>(b.size());
                }
                CHECK(total == s.shard_size());
            }
            for (int c : seen) CHECK(c == 1);
        }
    }
    dist::ShardedSampler a(50, 50, 1, 0, 3);
    a.set_epoch(1);
    auto first = a.batch(0);
    a.set_epoch(2);
    CHECK(a.batch(0) != first);
    a.set_epoch(1);
    CHECK(a.batch(0) == first);
    CHECK_THROWS_AS(dist::ShardedSampler(10, 0, 1, 0, 0), ValueError);
    CHECK_THROWS_AS(dist::ShardedSampler(10, 2, 2, 2, 0), ValueError);
}

TEST_CASE("a DDP step equals the single-process step on the concatenated batch") {
    Data data = make_data(4 * ctx().world_size(), {features});
    train_and_compare(make_mlp, data, 4 * ctx().world_size(), 1);
}

TEST_CASE("uneven batches: uneven slices, a short last batch, ranks with no samples") {
    // 11 samples in global batches of 5: 5, 5, 1 -> with 2 or 3 ranks slices of 2/3, 1/2/2 and,
    // in the last step, ranks with nothing.
    Data data = make_data(11, {features});
    train_and_compare(make_mlp, data, 5, 2);
}

TEST_CASE("CNN, several small buckets: the same training, buckets start inside backward") {
    Data data = make_data(10, {1, 6, 6});
    dist::DDPOptions options;
    options.bucket_bytes = 1;  // one bucket per parameter
    train_and_compare(make_cnn, data, 4, 2, options);

    auto model = make_cnn(5);
    dist::DistributedDataParallel ddp(ctx(), model, options);
    CHECK(ddp.bucket_layout().size() == model->parameters().size());
    // Reverse registration order: the last layer's bias first.
    CHECK(ddp.bucket_layout().front() == std::vector<std::size_t>{model->parameters().size() - 1});
    auto [x, y] = data.batch({0, 1});
    cross_entropy(ddp(x), y).backward();
    ddp.synchronize_gradients();
    // Every bucket's gradients were final before backward returned: all started by the hooks.
    CHECK(ddp.buckets_started_in_backward() == ddp.bucket_layout().size());
}

TEST_CASE("no_sync accumulates locally; the next synchronised backward averages the sum") {
    int w = ctx().world_size();
    Data data = make_data(4 * w, {features});
    auto model = make_mlp(11);
    auto reference = make_mlp(11);
    dist::DistributedDataParallel ddp(ctx(), model);
    // Two micro-batches of 2 per rank; gradients of sum losses so accumulation is a plain sum.
    int r = ctx().rank();
    {
        auto guard = ddp.no_sync();
        auto [x, y] = data.batch({2 * r, 2 * r + 1});
        cross_entropy(ddp(x), y, Reduction::sum).backward();
        ddp.synchronize_gradients();  // a no-op inside no_sync
    }
    // Local only so far: differs between ranks (checked against a local reference).
    auto [x1, y1] = data.batch({2 * r, 2 * r + 1});
    cross_entropy((*reference)(x1), y1, Reduction::sum).backward();
    check_close({model->parameters()[0].grad()}, {reference->parameters()[0].grad()}, 1e-6);

    auto [x, y] = data.batch({2 * w + 2 * r, 2 * w + 2 * r + 1});
    ddp.backward(cross_entropy(ddp(x), y, Reduction::sum));

    // Reference: the sum over all 4w samples, averaged over the w ranks.
    reference->zero_grad();
    std::vector<int64_t> all(static_cast<std::size_t>(4 * w));
    for (int64_t i = 0; i < 4 * w; ++i) all[i] = i;
    auto [xa, ya] = data.batch(all);
    cross_entropy((*reference)(xa), ya, Reduction::sum).backward();
    std::vector<Tensor> expected, got;
    for (const Tensor &p : reference->parameters()) expected.push_back(p.grad() / static_cast<double>(w));
    for (const Tensor &p : model->parameters()) got.push_back(p.grad());
    check_close(got, expected, 2e-5);
    check_identical_across_ranks(got);
}

TEST_CASE("a second backward before synchronize_gradients is an error, not a wrong average") {
    auto model = make_mlp(3);
    dist::DistributedDataParallel ddp(ctx(), model);
    Data data = make_data(2, {features});
    auto [x, y] = data.batch({0, 1});
    cross_entropy(ddp(x), y).backward();
    CHECK_THROWS_AS(cross_entropy(ddp(x), y).backward(), dist::DistError);
    ddp.synchronize_gradients();
}

TEST_CASE("models of different layouts on different ranks are a MismatchError on every rank") {
    if (ctx().world_size() < 2) return;
    std::shared_ptr<nn::Module> model;
    if (ctx().rank() == 0)
        model = make_mlp(1);
    else
        model = std::make_shared<nn::Linear>(features, classes, true, 1);
    CHECK_THROWS_AS(dist::DistributedDataParallel(ctx(), model), dist::MismatchError);
}
