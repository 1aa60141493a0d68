// Trains a character-level GPT on Debian's fortunes and samples from it; see model.hpp for the
// model and docs/char_gpt.md for the recipe and the numbers.
//
//   char_gpt [--steps N] [--config tiny|small|default] [--seed S] [--batch B] [--lr LR]
//            [--dropout P] [--eval-every N] [--save FILE] [--load FILE] [--sample N]
//            [--temperature T] [--top-k K] [--prompt TEXT] [--data DIR] [--distributed]
//            [--autocast bf16|f16]
//
// Recipe (tools/bench_gpt_torch.py is the same in PyTorch): batches of B random windows of the
// training split; AdamW (betas 0.9/0.99, eps 1e-8) with weight decay 0.1 on matrices and
// embeddings only; learning rate warmup for steps/10 (at most 50) then cosine down to --min-lr
// (default: lr, so constant after the warmup, as the PyTorch anchor that reached 1.98);
// gradients clipped to global norm 1. It runs on the backend TINYFIN_BACKEND selects.
//
// With --distributed (built when MPI is found) it trains data-parallel under mpirun or srun:
// every rank draws the same global batch of --batch windows and keeps its own contiguous rows,
// dist::DistributedDataParallel averages the gradients (weighted by the rows), rank 0 prints the
// report and every rank prints "weights checksum <hex>" of its final parameters.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "corpus.hpp"
#include "model.hpp"
#include "report.hpp"
#include "tinyfin/nn.hpp"
#include "tinyfin/tinyfin.hpp"
#ifdef TINYFIN_HAVE_DIST
#include "tinyfin/dist.hpp"
#endif
#include <memory>

namespace {

using namespace tinyfin;
using example::print_backend_report;
using example::quiet;
using example::say;
using Clock = std::chrono::steady_clock;

struct Options {
    int64_t steps = 1000;
    std::string config = "default";
    uint64_t seed = 0;
    int64_t batch = 32;
    double lr = 2e-3;
    double min_lr = -1;  // < 0: lr (no decay after the warmup)
    double dropout = 0;
    int64_t eval_every = 200;
    int64_t eval_batches = 20;
    std::string save_path, load_path;
    int64_t sample = 200;
    double temperature = 0.8;
    int64_t top_k = 0;
    std::string prompt = "\n";
    std::string data_dir = chargpt::default_corpus_dir();
    bool distributed = false;
    // --autocast: matmul/linear/attention in this dtype during training (docs/numerics.md).
    std::optional<DType> autocast;
};

[[noreturn]] void usage(const char *argv0, const std::string &problem) {
    std::fprintf(stderr,
                 "%s: %s\n"
                 "usage: %s [--steps N] [--config tiny|small|default] [--seed S] [--batch B]\n"
                 "          [--lr LR] [--min-lr LR] [--dropout P] [--eval-every N] [--eval-batches N]\n"
                 "          [--save FILE] [--load FILE] [--sample N] [--temperature T] [--top-k K]\n"
                 "          [--prompt TEXT] [--data DIR] [--distributed] [--autocast bf16|f16]\n"
                 "  --steps N        training steps (default 1000; 0 with --load: sample only)\n"
                 "  --config NAME    model size: tiny (tests), small, default (4 layers, 128 dims)\n"
                 "  --seed S         seed of the initialisation, batches, dropout and sampling\n"
                 "  --batch B        sequences per step (default 32)\n"
                 "  --lr LR          peak learning rate (default 0.002)\n"
                 "  --min-lr LR      learning rate the cosine decay ends at (default LR: no decay)\n"
                 "  --dropout P      dropout probability (default 0)\n"
                 "  --eval-every N   validation loss every N steps (default 200; 0: only at the end)\n"
                 "  --eval-batches N validation batches per evaluation (default 20)\n"
                 "  --save FILE      save the parameters (TFNN format, docs/nn.md)\n"
                 "  --load FILE      start from saved parameters of the same config\n"
                 "  --sample N       characters to generate at the end (default 200)\n"
                 "  --temperature T  sampling temperature (default 0.8; 0: greedy)\n"
                 "  --top-k K        sample among the K likeliest characters (default 0: all)\n"
                 "  --prompt TEXT    text the sample continues (default a newline)\n"
                 "  --data DIR       fortunes directory (default %s)\n"
                 "  --distributed    data-parallel over the ranks of mpirun/srun (docs/distributed.md)\n"
                 "  --autocast D     train with matmuls in D (bf16, or f16 with loss scaling)\n",
                 argv0, problem.c_str(), argv0, chargpt::default_corpus_dir());
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

double parse_double(const char *argv0, const std::string &flag, const char *text, double min) {
    char *end = nullptr;
    errno = 0;
    double v = std::strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !(v >= min))
        usage(argv0, flag + " needs a number >= " + std::to_string(min) + ", got '" + text + "'");
    return v;
}

Options parse_args(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string flag = argv[i];
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
        if (flag == "--steps")
            o.steps = parse_int(argv[0], flag, value, 0);
        else if (flag == "--config")
            o.config = value;
        else if (flag == "--seed")
            o.seed = static_cast<uint64_t>(parse_int(argv[0], flag, value, 0));
        else if (flag == "--batch")
            o.batch = parse_int(argv[0], flag, value, 1);
        else if (flag == "--lr")
            o.lr = parse_double(argv[0], flag, value, 0);
        else if (flag == "--min-lr")
            o.min_lr = parse_double(argv[0], flag, value, 0);
        else if (flag == "--dropout")
            o.dropout = parse_double(argv[0], flag, value, 0);
        else if (flag == "--eval-every")
            o.eval_every = parse_int(argv[0], flag, value, 0);
        else if (flag == "--eval-batches")
            o.eval_batches = parse_int(argv[0], flag, value, 1);
        else if (flag == "--save")
            o.save_path = value;
        else if (flag == "--load")
            o.load_path = value;
        else if (flag == "--sample")
            o.sample = parse_int(argv[0], flag, value, 0);
        else if (flag == "--temperature")
            o.temperature = parse_double(argv[0], flag, value, 0);
        else if (flag == "--top-k")
            o.top_k = parse_int(argv[0], flag, value, 0);
        else if (flag == "--prompt")
            o.prompt = value;
        else if (flag == "--data")
            o.data_dir = value;
        else if (flag == "--autocast" && (std::string(value) == "bf16" || std::string(value) == "f16"))
            o.autocast = std::string(value) == "bf16" ? DType::bf16 : DType::f16;
        else
            usage(argv[0], "unknown option or value: " + flag + " " + value);
    }
    if (o.dropout >= 1) usage(argv[0], "--dropout must be below 1");
    return o;
}

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Random windows of a token stream: batch starts drawn by splitmix64 from (seed, stream).
class Batcher {
public:
    Batcher(const std::vector<int32_t> &data, int64_t batch, int64_t context, uint64_t seed)
        : data_(data), batch_(batch), context_(context), state_(seed) {
        if (static_cast<int64_t>(data.size()) < context + 2)
            throw chargpt::CorpusError("a split of " + std::to_string(data.size()) +
                                       " tokens is too short for a context of " + std::to_string(context));
    }
    // x [B, T] and y [B*T] (the next tokens), on the default device.
    std::pair<Tensor, Tensor> next() { return next(0, batch_); }
    // Rows lo..hi of the next batch (a rank's share); every row is drawn whatever the range,
    // so all ranks stay on one stream of batches.
    std::pair<Tensor, Tensor> next(int64_t lo, int64_t hi) {
        x_.resize(static_cast<std::size_t>(batch_ * context_));
        y_.resize(x_.size());
        const auto range = static_cast<uint64_t>(data_.size()) - static_cast<uint64_t>(context_) - 1;
        for (int64_t b = 0; b < batch_; ++b) {
            auto start = static_cast<std::size_t>((static_cast<unsigned __int128>(draw()) * range) >> 64);
            std::copy_n(data_.begin() + static_cast<std::ptrdiff_t>(start), context_, x_.begin() + b * context_);
            std::copy_n(data_.begin() + static_cast<std::ptrdiff_t>(start) + 1, context_, y_.begin() + b * context_);
        }
        const std::size_t first = static_cast<std::size_t>(lo * context_);
        return {from_host(x_.data() + first, {hi - lo, context_}, DType::i32),
                from_host(y_.data() + first, {(hi - lo) * context_}, DType::i32)};
    }

private:
    uint64_t draw() {
        uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    const std::vector<int32_t> &data_;
    int64_t batch_, context_;
    uint64_t state_;
    std::vector<int32_t> x_, y_;
};

// Mean loss over the same `batches` validation windows at every evaluation.
double validation_loss(chargpt::GPT &model, const chargpt::Corpus &corpus, const Options &o) {
    model.eval();
    NoGradGuard no_grad;
    Batcher val(corpus.val, o.batch, model.config().context, nn::mix_seed(o.seed, 0xe7a1));
    Tensor total = zeros({});
    for (int64_t i = 0; i < o.eval_batches; ++i) {
        auto [x, y] = val.next();
        total = total + cross_entropy(model(x), y);
    }
    model.train();
    return total.item<float>() / static_cast<double>(o.eval_batches);
}

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

#ifdef TINYFIN_HAVE_DIST
using DistContext = dist::Context;
#else
struct DistContext {};
#endif

int run(const Options &o, DistContext *context) {
    auto t_start = Clock::now();
    chargpt::Corpus corpus = chargpt::load_corpus(o.data_dir);
    chargpt::Config config = chargpt::config_named(o.config, static_cast<int64_t>(corpus.vocab.size()));
    config.dropout = o.dropout;
    const uint64_t need_train = chargpt::training_bytes(config, o.batch);
    const uint64_t need_infer = chargpt::inference_bytes(config, 1);
    // The program states its requirement: with TINYFIN_BACKEND unset or auto, the best backend
    // whose device has this much free memory is chosen (an error names each device otherwise).
    select_backend_for_memory(o.steps > 0 ? need_train : need_infer);
    reset_stats();
    auto model_ptr = std::make_shared<chargpt::GPT>(config, o.seed);
    chargpt::GPT &model = *model_ptr;
    say("# tinyfin on %s: %s config, %lld layers, %lld heads, %lld dims, context %lld, "
        "vocab %lld, %lld params; corpus %lld chars from %zu files (train %zu, val %zu), "
        "batch %lld, seed %llu\n",
        default_device().str().c_str(), o.config.c_str(), static_cast<long long>(config.layers),
        static_cast<long long>(config.heads), static_cast<long long>(config.dim),
        static_cast<long long>(config.context), static_cast<long long>(config.vocab),
        static_cast<long long>(model.parameter_count()), static_cast<long long>(corpus.size()), corpus.files.size(),
        corpus.train.size(), corpus.val.size(), static_cast<long long>(o.batch),
        static_cast<unsigned long long>(o.seed));
    say("memory estimate: training %.1f MiB (params, grads, AdamW state, one batch of "
        "activations), inference %.1f MiB (params, KV cache)\n",
        mib(need_train), mib(need_infer));
    if (!o.load_path.empty()) {
        nn::load(o.load_path, model);
        say("loaded %s\n", o.load_path.c_str());
    }

    // This rank's rows of each global batch: all of them, or a contiguous share.
    int64_t row_lo = 0, row_hi = o.batch;
#ifdef TINYFIN_HAVE_DIST
    // Wraps the model before the optimizer sees its parameters (rank 0's are broadcast).
    std::unique_ptr<dist::DistributedDataParallel> ddp;
    if (context && o.steps > 0) {
        ddp = std::make_unique<dist::DistributedDataParallel>(*context, model_ptr);
        const int64_t ranks = context->world_size(), rank = context->rank();
        row_lo = o.batch * rank / ranks;
        row_hi = o.batch * (rank + 1) / ranks;
        ddp->set_batch_size(row_hi - row_lo);
        say("# distributed: %d ranks (%s), %.1f sequences per rank and step\n", context->world_size(),
            context->launcher().c_str(), static_cast<double>(o.batch) / static_cast<double>(ranks));
    }
#else
    (void)context;
#endif

    if (o.steps > 0) {
        optim::AdamW optimizer(optim::decay_matrices_only(model.parameters(), 0.1), o.lr, {0.9, 0.99}, 1e-8);
        nn::WarmupCosine schedule(o.lr, o.min_lr < 0 ? o.lr : o.min_lr, std::min<int64_t>(50, o.steps / 10), o.steps);
        Batcher train(corpus.train, o.batch, config.context, nn::mix_seed(o.seed, 0x7a41));
        const int64_t report_every = std::max<int64_t>(1, std::min<int64_t>(50, o.steps / 10));
        const double tokens_per_step = static_cast<double>(o.batch * config.context);
        nn::GradScaler scaler(nn::GradScaler::Options{.enabled = o.autocast == DType::f16});
        auto t0 = Clock::now();
        auto t_window = t0;
        double eval_seconds = 0;
        for (int64_t step = 0; step < o.steps; ++step) {
            optimizer.set_lr(schedule(step));
            auto [x, y] = train.next(row_lo, row_hi);
            optimizer.zero_grad();
            // A rank with no rows this step (batch < ranks) only joins the gradient exchange.
            Tensor loss = zeros({});
            if (row_hi > row_lo) {
                {
                    AutocastGuard scope(o.autocast.has_value(), o.autocast.value_or(DType::bf16));
                    loss = cross_entropy(model(x), y);
                }
                scaler.scale(loss).backward();
            }
#ifdef TINYFIN_HAVE_DIST
            if (ddp) ddp->synchronize_gradients();
#endif
            // After the exchange, so every rank sees the same inf/nan and skips the same steps.
            scaler.unscale_(optimizer);  // clip the true gradients
            nn::clip_grad_norm(optimizer.params(), 1.0);
            scaler.step(optimizer);
            scaler.update();
            const int64_t done = step + 1;
            if (done % report_every == 0 || done == o.steps) {
                double value = loss.item<float>();
#ifdef TINYFIN_HAVE_DIST
                if (context) {
                    // The whole batch's loss: the row-weighted mean of the ranks' losses.
                    Tensor share = loss.detach() * static_cast<double>(row_hi - row_lo);
                    context->all_reduce(share);
                    value = share.item<float>() / static_cast<double>(o.batch);
                }
#endif
                double window = since(t_window);
                const int64_t steps_in_window = done % report_every == 0 ? report_every : done % report_every;
                say("step %5lld/%lld  loss %.4f  lr %.2e  %7.0f tokens/s  %6.1fs\n", static_cast<long long>(done),
                    static_cast<long long>(o.steps), value, schedule(step),
                    tokens_per_step * static_cast<double>(steps_in_window) / window, since(t0) - eval_seconds);
                std::fflush(stdout);
                t_window = Clock::now();
            }
            // In a distributed run only rank 0 reports, so only it evaluates.
            if (o.eval_every > 0 && done % o.eval_every == 0 && done < o.steps && !quiet) {
                auto te = Clock::now();
                say("step %5lld  val loss %.3f\n", static_cast<long long>(done), validation_loss(model, corpus, o));
                std::fflush(stdout);
                eval_seconds += since(te);
                t_window = Clock::now();
            }
        }
        double train_s = since(t0) - eval_seconds;
        say("trained %lld steps in %.1fs: %.0f tokens/s\n", static_cast<long long>(o.steps), train_s,
            tokens_per_step * static_cast<double>(o.steps) / train_s);
    }
    if (!quiet) {
        say("val loss %.3f\n", validation_loss(model, corpus, o));
        uint64_t peak = 0;
        for (const Stats::Backend &b : stats().backends) peak = std::max(peak, b.peak_bytes_in_use);
        say("memory: estimate %.1f MiB, measured peak %.1f MiB of tensors on %s\n",
            mib(o.steps > 0 ? need_train : need_infer), mib(peak), backend_name().c_str());
        if (o.sample > 0) {
            chargpt::SampleOptions so;
            so.tokens = o.sample;
            so.temperature = o.temperature;
            so.top_k = o.top_k;
            so.seed = o.seed;
            chargpt::SampleResult r = chargpt::sample(model, chargpt::encode(corpus.vocab, o.prompt), so);
            say("sample (%lld chars, KV cache, %.0f tokens/s):\n%s%s\n", static_cast<long long>(o.sample),
                static_cast<double>(r.tokens.size()) / r.seconds, o.prompt.c_str(),
                chargpt::decode(corpus.vocab, r.tokens).c_str());
        }
        if (!o.save_path.empty()) {
            nn::save(o.save_path, model);
            say("saved %s\n", o.save_path.c_str());
        }
        say("total time %.1fs\n", since(t_start));
        print_backend_report();
    }
#ifdef TINYFIN_HAVE_DIST
    if (context) {
        // Every rank, after rank 0's report: identical when the ranks stayed in step.
        std::fflush(stdout);
        context->barrier();
        std::printf("rank %d weights checksum %016llx\n", context->rank(),
                    static_cast<unsigned long long>(dist::checksum(model.parameters())));
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
    try {
        return run(options, context.get());
    } catch (const std::exception &e) {
        // A rank that fails stops the others (they would wait for it in the next allreduce).
        if (context) context->abort(1, std::string("char_gpt: ") + e.what());
        std::fprintf(stderr, "char_gpt: %s\n", e.what());
        return 1;
    }
#else
    try {
        return run(options, nullptr);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "char_gpt: %s\n", e.what());
        return 1;
    }
#endif
}
