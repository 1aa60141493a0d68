// Trains the small Fashion-MNIST CNN of shared/peers/torch_fmnist.py with tinyfin and reports
// test accuracy, throughput and which backends ran the ops.
//
//   fashion_mnist [--epochs N] [--batch B] [--seed S] [--limit N] [--save FILE] [--eval FILE]
//                 [--data DIR] [--profile] [--distributed] [--autocast bf16|f16]
//
// Same recipe as the PyTorch reference: conv 32 3x3 p1, relu, maxpool 2, conv 64 3x3 p1, relu,
// maxpool 2, flatten, linear 128, relu, linear 10; AdamW lr 1e-3 (wd 0.01, betas .9/.999,
// eps 1e-8); batch 64; inputs (x/255 - 0.2860)/0.3530; a seeded shuffle each epoch with the last
// partial batch kept. It runs on the backend TINYFIN_BACKEND selects: every tensor is created on
// default_device().
//
// With --distributed (built when MPI is found) it trains data-parallel under mpirun or srun: each
// global batch of --batch is split over the ranks (dist::ShardedSampler, the same shuffle as one
// process), gradients are averaged by dist::DistributedDataParallel, rank 0 prints the report and
// every rank prints "weights checksum <hex>" of its final parameters (docs/distributed.md).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include "idx.hpp"
#include "report.hpp"
#include "tinyfin/nn.hpp"
#include "tinyfin/tinyfin.hpp"
#ifdef TINYFIN_HAVE_DIST
#include "tinyfin/dist.hpp"
#endif

namespace {

using namespace tinyfin;
using example::print_backend_report;
using example::quiet;
using example::say;
using Clock = std::chrono::steady_clock;

struct Options {
    int epochs = 1;
    int64_t batch = 64;
    uint64_t seed = 0;
    int64_t limit = 0;  // 0: all training images
    std::string save_path;
    std::string eval_path;
    std::string data_dir = fmnist::default_data_dir();
    bool profile = false;
    bool distributed = false;
    // --autocast: conv2d and linear in this dtype (docs/numerics.md); f16 adds loss scaling.
    std::optional<DType> autocast;
};

[[noreturn]] void usage(const char *argv0, const std::string &problem) {
    std::fprintf(stderr,
                 "%s: %s\n"
                 "usage: %s [--epochs N] [--batch B] [--seed S] [--limit N] [--save FILE]\n"
                 "          [--eval FILE] [--data DIR] [--profile] [--distributed] [--autocast bf16|f16]\n"
                 "  --epochs N   training epochs (default 1)\n"
                 "  --batch B    batch size (default 64)\n"
                 "  --seed S     seed of the initialisation and the shuffles (default 0)\n"
                 "  --limit N    train on the first N training images only\n"
                 "  --save FILE  save the trained parameters (TFNN format, docs/nn.md)\n"
                 "  --eval FILE  evaluate saved parameters on the test set and exit\n"
                 "  --data DIR   directory of the IDX .gz files (default %s)\n"
                 "  --profile    time the forward, backward and optimizer phases (synchronises)\n"
                 "  --distributed  data-parallel over the ranks of mpirun/srun (docs/distributed.md)\n"
                 "  --autocast D  conv2d and linear in D (bf16 or f16, f16 with loss scaling), the\n"
                 "               rest and the parameters in f32 (docs/numerics.md)\n",
                 argv0, problem.c_str(), argv0, fmnist::default_data_dir());
    std::exit(2);
}

int64_t parse_int(const char *argv0, const std::string &flag, const char *text, int64_t min) {
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < min)
        usage(argv0, flag + " needs an integer >= " + std::to_string(min) + ", got '" + text + "'");
    return v;
}

Options parse_args(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string flag = argv[i];
        if (flag == "--profile") {
            o.profile = true;
            continue;
        }
        if (flag == "--distributed") {
#ifndef TINYFIN_HAVE_DIST
            usage(argv[0], "--distributed needs tinyfin built with MPI (libopenmpi-dev)");
#endif
            o.distributed = true;
            continue;
        }
        if (flag == "-h" || flag == "--help") usage(argv[0], "help");
        if (i + 1 >= argc) usage(argv[0], "unknown option or missing value: " + flag);
        const char *value = argv[++i];
        if (flag == "--epochs")
            o.epochs = static_cast<int>(parse_int(argv[0], flag, value, 0));
        else if (flag == "--batch")
            o.batch = parse_int(argv[0], flag, value, 1);
        else if (flag == "--seed")
            o.seed = static_cast<uint64_t>(parse_int(argv[0], flag, value, 0));
        else if (flag == "--limit")
            o.limit = parse_int(argv[0], flag, value, 1);
        else if (flag == "--save")
            o.save_path = value;
        else if (flag == "--eval")
            o.eval_path = value;
        else if (flag == "--data")
            o.data_dir = value;
        else if (flag == "--autocast") {
            const std::string d = value;
            if (d == "bf16" || d == "bfloat16")
                o.autocast = DType::bf16;
            else if (d == "f16" || d == "float16")
                o.autocast = DType::f16;
            else if (d != "f32" && d != "float32")
                usage(argv[0], "--autocast needs bf16, f16 or f32, got '" + d + "'");
        } else
            usage(argv[0], "unknown option " + flag);
    }
    return o;
}

// ---- Data ------------------------------------------------------------------------------------

// A split as normalised f32 images [N, 1, 28, 28] on the host and i64 labels.
struct HostData {
    int64_t count = 0, rows = 0, cols = 0;
    std::vector<float> images;
    std::vector<int64_t> labels;
};

HostData prepare(const fmnist::Split &split, int64_t limit) {
    HostData d;
    d.count = limit > 0 ? std::min(limit, split.count) : split.count;
    d.rows = split.rows;
    d.cols = split.cols;
    // Computed in f32 like the reference: x / 255, then (x - 0.2860) / 0.3530.
    float table[256];
    for (int v = 0; v < 256; ++v) table[v] = (static_cast<float>(v) / 255.0f - 0.2860f) / 0.3530f;
    std::size_t pixels = static_cast<std::size_t>(d.count * d.rows * d.cols);
    d.images.resize(pixels);
    for (std::size_t i = 0; i < pixels; ++i) d.images[i] = table[split.images[i]];
    d.labels.assign(split.labels.begin(), split.labels.begin() + d.count);
    return d;
}

// A batch of the given image indices, uploaded to the default device.
struct Batch {
    Tensor x, y;
};

Batch make_batch(const HostData &d, const int64_t *indices, int64_t n, std::vector<float> &xbuf,
                 std::vector<int64_t> &ybuf) {
    const std::size_t image = static_cast<std::size_t>(d.rows * d.cols);
    xbuf.resize(static_cast<std::size_t>(n) * image);
    ybuf.resize(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        std::memcpy(&xbuf[i * image], &d.images[indices[i] * image], image * sizeof(float));
        ybuf[i] = d.labels[indices[i]];
    }
    return {from_host(xbuf.data(), {n, 1, d.rows, d.cols}, DType::f32), from_host(ybuf.data(), {n}, DType::i64)};
}

// ---- Model -----------------------------------------------------------------------------------

std::shared_ptr<nn::Sequential> make_model(uint64_t seed) {
    Conv2dOptions pad1;
    pad1.pad_h = pad1.pad_w = 1;
    // Each layer draws from its own stream of the seed.
    return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Conv2d>(1, 32, 3, pad1, true, nn::mix_seed(seed, 1)),
        std::make_shared<nn::ReLU>(),
        std::make_shared<nn::MaxPool2d>(2),
        std::make_shared<nn::Conv2d>(32, 64, 3, pad1, true, nn::mix_seed(seed, 2)),
        std::make_shared<nn::ReLU>(),
        std::make_shared<nn::MaxPool2d>(2),
        std::make_shared<nn::Flatten>(),
        std::make_shared<nn::Linear>(64 * 7 * 7, 128, true, nn::mix_seed(seed, 3)),
        std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(128, 10, true, nn::mix_seed(seed, 4)),
    });
}

struct EvalResult {
    double accuracy = 0, loss = 0;
    double seconds = 0;
};

EvalResult evaluate(nn::Module &model, const HostData &test, std::optional<DType> autocast) {
    auto t0 = Clock::now();
    model.eval();
    NoGradGuard no_grad;
    AutocastGuard scope(autocast.has_value(), autocast.value_or(DType::bf16));
    std::vector<float> xbuf;
    std::vector<int64_t> ybuf;
    std::vector<int64_t> order(static_cast<std::size_t>(test.count));
    std::iota(order.begin(), order.end(), 0);
    // Sums stay on the device until the end: one read-back per evaluation.
    Tensor loss_sum = zeros({});
    Tensor correct = zeros({});
    for (int64_t i = 0; i < test.count; i += 1000) {
        int64_t n = std::min<int64_t>(1000, test.count - i);
        Batch b = make_batch(test, &order[i], n, xbuf, ybuf);
        Tensor logits = model(b.x);
        loss_sum = loss_sum + cross_entropy(logits, b.y, Reduction::sum);
        correct = correct + sum(cast(eq(argmax(logits, 1), b.y), DType::f32));
    }
    model.train();
    EvalResult r;
    r.accuracy = correct.item<float>() / static_cast<double>(test.count);
    r.loss = loss_sum.item<float>() / static_cast<double>(test.count);
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return r;
}

// ---- Progress --------------------------------------------------------------------------------

class Progress {
public:
    Progress(int epoch, int64_t total) : epoch_(epoch), total_(total), tty_(isatty(STDOUT_FILENO)) {}

    // Redraws at most ~5 times a second on a terminal, every 10% otherwise, and always at the end.
    bool due(int64_t done) const {
        if (done >= total_) return true;
        if (tty_) return std::chrono::duration<double>(Clock::now() - last_).count() > 0.2;
        return done * 10 / total_ != last_decile_;
    }

    void draw(int64_t done, double loss, double seconds) {
        last_ = Clock::now();
        last_decile_ = done * 10 / total_;
        constexpr int width = 30;
        int filled = static_cast<int>(width * done / total_);
        std::string bar(static_cast<std::size_t>(filled), '#');
        bar.append(static_cast<std::size_t>(width - filled), '.');
        double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
        say("%sepoch %d [%s] %6lld/%lld  loss %.4f  %6.0f img/s  %5.1fs%s", tty_ ? "\r" : "", epoch_, bar.c_str(),
            static_cast<long long>(done), static_cast<long long>(total_), loss, rate, seconds,
            tty_ && done < total_ ? "" : "\n");
        std::fflush(stdout);
    }

private:
    int epoch_;
    int64_t total_;
    bool tty_;
    Clock::time_point last_{};
    int64_t last_decile_ = -1;
};

// ---- Report ----------------------------------------------------------------------------------

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

#ifdef TINYFIN_HAVE_DIST
using DistContext = dist::Context;
#else
struct DistContext {};
#endif

int run(const Options &o, DistContext *context) {
    auto t_start = Clock::now();
    fmnist::Split test_split = fmnist::read_split(o.data_dir, "t10k");
    HostData test = prepare(test_split, 0);
    std::shared_ptr<nn::Sequential> model = make_model(o.seed);

    if (!o.eval_path.empty()) {
        nn::load(o.eval_path, *model);
        EvalResult r = evaluate(*model, test, o.autocast);
        say("evaluated %s on %lld test images in %.2fs\n", o.eval_path.c_str(), static_cast<long long>(test.count),
            r.seconds);
        say("test accuracy %.4f  test loss %.4f\n", r.accuracy, r.loss);
        print_backend_report();
        return 0;
    }

    fmnist::Split train_split = fmnist::read_split(o.data_dir, "train");
    HostData train = prepare(train_split, o.limit);
    say("# tinyfin on %s: train %lld x %lldx%lld, test %lld, batch %lld, seed %llu, %lld params "
        "(data %.2fs)\n",
        default_device().str().c_str(), static_cast<long long>(train.count), static_cast<long long>(train.rows),
        static_cast<long long>(train.cols), static_cast<long long>(test.count), static_cast<long long>(o.batch),
        static_cast<unsigned long long>(o.seed), static_cast<long long>(model->parameter_count()), since(t_start));

#ifdef TINYFIN_HAVE_DIST
    // Wraps the model before the optimizer sees its parameters (rank 0's are broadcast).
    std::unique_ptr<dist::DistributedDataParallel> ddp;
    std::unique_ptr<dist::ShardedSampler> sampler;
    if (context) {
        ddp = std::make_unique<dist::DistributedDataParallel>(*context, model);
        sampler = std::make_unique<dist::ShardedSampler>(*context, train.count, o.batch, o.seed);
        say("# distributed: %d ranks (%s), %.1f images per rank and step\n", context->world_size(),
            context->launcher().c_str(), static_cast<double>(o.batch) / context->world_size());
    }
#else
    (void)context;
#endif
    optim::AdamW optimizer(model->parameters(), 1e-3);
    // f16's range needs the loss scaled; bf16 has f32's range (the scaler then passes through).
    nn::GradScaler scaler(nn::GradScaler::Options{.enabled = o.autocast == DType::f16});
    if (o.autocast) say("# autocast %s%s\n", dtype_name(*o.autocast), scaler.enabled() ? " with loss scaling" : "");
    std::vector<float> xbuf;
    std::vector<int64_t> ybuf;
    double t_forward = 0, t_backward = 0, t_step = 0, t_data = 0;
    EvalResult last;
    say("%5s %8s %8s %7s %7s %8s %9s\n", "epoch", "train_s", "img/s", "eval_s", "loss", "test_acc", "test_loss");
    for (int epoch = 1; epoch <= o.epochs; ++epoch) {
        std::vector<int64_t> perm = nn::permutation(train.count, o.seed, epoch);
        Progress progress(epoch, train.count);
        auto t0 = Clock::now();
        Tensor loss_sum = zeros({});
        int64_t batches = 0;
#ifdef TINYFIN_HAVE_DIST
        if (sampler) sampler->set_epoch(epoch);
#endif
        for (int64_t i = 0, step = 0; i < train.count; i += o.batch, ++step) {
            int64_t n = std::min<int64_t>(o.batch, train.count - i);
            // This process's samples: the whole batch, or this rank's slice of it.
            const int64_t *indices = &perm[i];
            int64_t local = n;
#ifdef TINYFIN_HAVE_DIST
            std::vector<int64_t> slice;
            if (sampler) {
                slice = sampler->batch(step);
                indices = slice.data();
                local = static_cast<int64_t>(slice.size());
                ddp->set_batch_size(local);
            }
#endif
            auto tp = Clock::now();
            optimizer.zero_grad();
            if (local > 0) {
                Batch b = make_batch(train, indices, local, xbuf, ybuf);
                if (o.profile) {
                    t_data += since(tp);
                    tp = Clock::now();
                }
                Tensor loss;
                {
                    AutocastGuard scope(o.autocast.has_value(), o.autocast.value_or(DType::bf16));
                    loss = cross_entropy((*model)(b.x), b.y);
                }
                if (o.profile) {
                    synchronize();
                    t_forward += since(tp);
                    tp = Clock::now();
                }
                scaler.scale(loss).backward();
                if (o.profile) {
                    synchronize();
                    t_backward += since(tp);
                    tp = Clock::now();
                }
                loss_sum = loss_sum + loss.detach();
                ++batches;
            }
#ifdef TINYFIN_HAVE_DIST
            if (ddp) ddp->synchronize_gradients();
#endif
            scaler.step(optimizer);
            scaler.update();
            if (o.profile) {
                synchronize();
                t_step += since(tp);
            }
            if (progress.due(i + n))
                progress.draw(i + n, loss_sum.item<float>() / static_cast<double>(batches), since(t0));
        }
        double train_s = since(t0);
        double mean_loss = loss_sum.item<float>() / static_cast<double>(std::max<int64_t>(batches, 1));
        // In a distributed run only rank 0 reports, so only it evaluates.
        EvalResult r = last = quiet ? EvalResult{} : evaluate(*model, test, o.autocast);
        say("%5d %8.2f %8.0f %7.2f %7.4f %8.4f %9.4f\n", epoch, train_s, static_cast<double>(train.count) / train_s,
            r.seconds, mean_loss, r.accuracy, r.loss);
        std::fflush(stdout);
    }
    if (o.epochs == 0 && !quiet) last = evaluate(*model, test, o.autocast);
    say("test accuracy %.4f  test loss %.4f\n", last.accuracy, last.loss);
    if (o.profile)
        say("# profile: data %.2fs, forward %.2fs, backward %.2fs, optimizer %.2fs\n", t_data, t_forward, t_backward,
            t_step);
    if (!o.save_path.empty()) {
        nn::save(o.save_path, *model);
        say("saved %s\n", o.save_path.c_str());
    }
    say("total time %.2fs\n", since(t_start));
    print_backend_report();
#ifdef TINYFIN_HAVE_DIST
    if (context) {
        // Every rank, rank 0 last (after its report): identical when the ranks stayed in step.
        std::fflush(stdout);
        context->barrier();
        std::printf("rank %d weights checksum %016llx\n", context->rank(),
                    static_cast<unsigned long long>(dist::checksum(model->parameters())));
        std::fflush(stdout);
    }
#endif
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    Options options = parse_args(argc, argv);
#ifdef TINYFIN_HAVE_DIST
    std::unique_ptr<dist::Context> context;
    if (options.distributed) {
        context = std::make_unique<dist::Context>(&argc, &argv);
        quiet = context->rank() != 0;
    }
    // A rank that fails stops the others (they would wait for it in the next allreduce).
    auto fail = [&context](const std::exception &e) {
        if (context) context->abort(1, std::string("fashion_mnist: ") + e.what());
        std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
        return 1;
    };
    try {
        return run(options, context.get());
    } catch (const std::exception &e) {
        return fail(e);
    }
#else
    try {
        return run(options, nullptr);
    } catch (const fmnist::DataError &e) {
        std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
        return 1;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
        return 1;
    }
#endif
}
