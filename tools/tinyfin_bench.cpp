// tinyfin-bench: timings of ops per backend and size, beside raw OpenBLAS and, on request,
// numpy and PyTorch measured in the same run.
//
//   tinyfin-bench [--op LIST] [--backend LIST] [--size LIST] [--repeat N] [--warmup N]
//                 [--budget SECONDS] [--settle SECONDS] [--stat median|min] [--clock wall|cpu]
//                 [--threads N] [--compare numpy,torch] [--python PATH] [--json | --csv] [--list]
//   tinyfin-bench --train N | --train-gpt N [--compare torch [--rounds R] | --autocast bf16|f16]
//                 [--threads N]
//   tinyfin-bench --llm PATH [--backend NAME] [--prompt N] [--generate N] [--repeat N] [--threads N] [--no-mmap]
//                 [--no-fuse] [--no-prepack] [--compare torch|llamacpp] [--node PATH]
//   tinyfin-bench --onnx MODEL [--compare ort] ... (bench_onnx.cpp; --onnx --help)
//
// Each case runs warm-up calls, then --repeat samples, the backends' samples interleaved; a
// sample times enough back-to-back calls to last about 10 ms, on the wall clock or (--clock cpu)
// on the process's CPU time. Reported: the median time per call (or, with --stat min, the best
// sample), the spread (min, max, quartiles) and a rate: GFLOP/s for matmul and conv, GB/s of
// compulsory traffic for memory-bound ops, ns per call for the dispatch overhead. "openblas" is
// cblas_sgemm called directly on preallocated buffers (built only when OpenBLAS was found).
// numpy and torch run in Debian's /usr/bin/python3 through bench_peers.py (beside this tool in
// the build tree, in libexec/tinyfin when installed), as a co-process that times each case right after tinyfin, with the same thread count.
// docs/performance.md has the numbers of the development machine and how they were taken.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <cerrno>
#include <csignal>

#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef TF_BENCH_HAVE_CLBLAST
#include "bench_clblast.hpp"
#endif
#include "bench_autocast.hpp"
#include "bench_gpt.hpp"
#ifdef TF_BENCH_HAVE_LLM
#include "bench_llm.hpp"
#endif
#ifdef TF_BENCH_HAVE_ONNX
#include "bench_onnx.hpp"  // wants_onnx only: the benchmark is tinyfin-bench-onnx
#endif
#include "bench_train.hpp"
#include "tinyfin/tinyfin.hpp"

#ifdef TF_BENCH_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace {

using tinyfin::Device;
using tinyfin::DType;
using tinyfin::Shape;
using tinyfin::Tensor;
using Clock = std::chrono::steady_clock;

// ---- Options ------------------------------------------------------------------------------------

struct Options {
    std::set<std::string> ops, backends, sizes, peers;
    int repeat = 10;
    int warmup = 2;
    double budget_s = 4.0;  // per case and backend, beyond the first sample
    double sample_s = 0.010;  // target length of one sample
    // Idle time after OpenBLAS work before something else is timed: its pthread workers keep
    // spinning for about 2^28 cycles after a call and would steal a core from the next one.
    double settle_s = 0.15;
    int threads = 0;  // 0: TINYFIN_THREADS, else the usable cores
    int train_steps = 0;  // --train: training steps instead of the op cases
    int gpt_steps = 0;  // --train-gpt: char_gpt training steps and sampling instead
    // --rounds: with --train/--train-gpt and --compare torch, tinyfin and tuned PyTorch this many
    // times in turn, the ratio per round and their median (a shared host's speed drifts).
    int rounds = 1;
    // --autocast: with --train or --train-gpt, the f32 step against the step under autocast.
    std::optional<tinyfin::DType> autocast;
    std::string python = "/usr/bin/python3";
    std::string node = "node";  // --node: runs bench_llm_llamacpp.js (--llm --compare llamacpp)
    // The statistic rates and ratios use: the median, or the best sample (steadier on a shared machine).
    bool use_min = false;
    // Time on the process CPU clock instead of the wall clock (see now_s).
    bool cpu_clock = false;
    enum class Format { table, json, csv } format = Format::table;
    bool list = false;
    // --llm: a language model's prompt and generation tokens/s against the bandwidth ceiling.
    std::string llm_path;
    int llm_prompt = 512, llm_generate = 16;
    bool llm_map_weights = true;  // --no-mmap: false
    bool llm_fuse_products = true;  // --no-fuse: false
    bool llm_prepack_weights = true;  // --no-prepack: false
    bool repeat_given = false;
};

std::set<std::string> split_list(const std::string &text) {
    std::set<std::string> items;
    std::stringstream in(text);
    for (std::string item; std::getline(in, item, ',');)
        if (!item.empty()) items.insert(item);
    return items;
}

void usage(FILE *out) {
    std::fprintf(
        out,
        "usage: tinyfin-bench [--op LIST] [--backend LIST] [--size LIST] [--repeat N] [--warmup N]\n"
        "                     [--budget SECONDS] [--settle SECONDS] [--stat median|min] [--clock wall|cpu]\n"
        "                     [--threads N] [--compare numpy,torch] [--python PATH] [--json | --csv]\n"
        "                     [--list]\n"
        "  --op        ops to run (see --list), comma-separated\n"
        "  --backend   tinyfin backends, 'openblas' (raw cblas_sgemm) and 'clblast' (raw\n"
        "              CLBlastSgemm on the first OpenCL device), comma-separated\n"
        "  --size      size labels to run (see --list), comma-separated\n"
        "  --repeat    timed samples per case (default 10; fewer when --budget runs out, never below 3)\n"
        "  --warmup    untimed calls first (default 2)\n"
        "  --budget    seconds per case and backend before --repeat is cut (default 4)\n"
        "  --settle    idle seconds after OpenBLAS work before timing anything else (default 0.15)\n"
        "  --stat      median (default) or min: the statistic rates and ratios use\n"
        "  --clock     wall (default) or cpu: CPU time of the whole process, steady under other\n"
        "              load; equal to wall time only when one thread does the work (--threads 1)\n"
        "  --threads   threads for tinyfin (TINYFIN_THREADS), raw OpenBLAS and the peers\n"
        "              (default: TINYFIN_THREADS, else the cores this process may use)\n"
        "  --compare   also time numpy and/or torch in python (Debian's /usr/bin/python3)\n"
        "  --json, --csv  machine-readable output instead of the table\n"
        "  --list      print the cases and exit\n"
        "  --train N   time N Fashion-MNIST training steps (batch 64, TINYFIN_BACKEND's choice)\n"
        "              instead: median step, images/s, page faults per step; with --compare torch\n"
        "              also PyTorch's step, as shipped and hand-tuned (bench_train_torch.py)\n"
        "  --train-gpt N  time N steps of examples/char_gpt's default config on the fortunes corpus\n"
        "              and 200 KV-cached sampled tokens; with --compare torch also PyTorch's, as\n"
        "              shipped and hand-tuned (bench_gpt_torch.py)\n"
        "  --rounds R  with --train or --train-gpt and --compare torch: R rounds of tinyfin then\n"
        "              tuned PyTorch, a ratio per round and their median (default 1)\n"
        "  --autocast D  with --train or --train-gpt: N steps in f32 and N under autocast D (bf16\n"
        "              or f16) on twin models, alternating; median cpu time per step and the ratio\n"
        "  --llm PATH  a language model (Hugging Face directory or .gguf) on cpu (or the one --backend\n"
        "              names, e.g. cuda: the device's read bandwidth then sets the ceiling): prompt and generation\n"
        "              tokens/s at 1 and 2 threads (or --threads), the memory read bandwidth measured in\n"
        "              the same run and the ceiling it sets on generation; medians of --repeat runs\n"
        "              (default 3); --prompt N tokens (default 512), --generate N (default 16);\n"
        "              with --compare torch also PyTorch's (bench_llm_torch.py, same weights);\n"
        "              with --compare llamacpp (a .gguf file) also llama.cpp's on the same file and\n"
        "              prompt, its runs alternated with tinyfin's (bench_llm_llamacpp.js in Node, or\n"
        "              --node PATH; node-llama-cpp found through NODE_PATH: npm install --ignore-scripts\n"
        "              --omit=optional --prefix DIR node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1);\n"
        "              --no-mmap copies the large matrices into huge pages (LoadOptions::map_weights);\n"
        "              --no-fuse runs q/k/v and gate/up as separate products (LoadOptions::fuse_products);\n"
        "              --no-prepack reads q4_0/q8_0/q4_k/q6_k matrices as the file stores them "
        "(LoadOptions::prepack_weights)\n");
}

bool parse_int(const char *text, int lo, int hi, int *out) {
    char *end = nullptr;
    const long v = std::strtol(text, &end, 10);
    if (!*text || *end || v < lo || v > hi) return false;
    *out = static_cast<int>(v);
    return true;
}

// Returns an exit status when the program should stop (2: bad usage, 0: --help).
std::optional<int> parse_options(int argc, char **argv, Options &o) {
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto value = [&](const char *name) -> const char * {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "tinyfin-bench: %s needs a value\n", name);
                return nullptr;
            }
            return argv[++i];
        };
        const char *v = nullptr;
        if (arg == "--help" || arg == "-h") {
            usage(stdout);
            return 0;
        } else if (arg == "--json") {
            o.format = Options::Format::json;
        } else if (arg == "--csv") {
            o.format = Options::Format::csv;
        } else if (arg == "--list") {
            o.list = true;
        } else if (arg == "--op" || arg == "--backend" || arg == "--size" || arg == "--compare") {
            if (!(v = value(arg.c_str()))) return 2;
            (arg == "--op"        ? o.ops
             : arg == "--backend" ? o.backends
             : arg == "--size"    ? o.sizes
                                  : o.peers) = split_list(v);
        } else if (arg == "--llm") {
            if (!(v = value("--llm"))) return 2;
            o.llm_path = v;
        } else if (arg == "--no-mmap") {
            o.llm_map_weights = false;
        } else if (arg == "--no-fuse") {
            o.llm_fuse_products = false;
        } else if (arg == "--no-prepack") {
            o.llm_prepack_weights = false;
        } else if (arg == "--repeat" || arg == "--warmup" || arg == "--threads" || arg == "--train" ||
                   arg == "--train-gpt" || arg == "--rounds" || arg == "--prompt" || arg == "--generate") {
            if (!(v = value(arg.c_str()))) return 2;
            o.repeat_given = o.repeat_given || arg == "--repeat";
            int *target = arg == "--prompt"      ? &o.llm_prompt
                          : arg == "--generate"  ? &o.llm_generate
                          : arg == "--repeat"    ? &o.repeat
                          : arg == "--warmup"    ? &o.warmup
                          : arg == "--train"     ? &o.train_steps
                          : arg == "--train-gpt" ? &o.gpt_steps
                          : arg == "--rounds"    ? &o.rounds
                                                 : &o.threads;
            if (!parse_int(v, arg == "--warmup" ? 0 : 1, 100000, target)) {
                std::fprintf(stderr, "tinyfin-bench: %s wants a positive integer, got '%s'\n", arg.c_str(), v);
                return 2;
            }
        } else if (arg == "--budget" || arg == "--settle") {
            if (!(v = value(arg.c_str()))) return 2;
            char *end = nullptr;
            const double seconds = std::strtod(v, &end);
            if (!*v || *end || !(seconds >= 0) || (arg == "--budget" && seconds == 0)) {
                std::fprintf(stderr, "tinyfin-bench: %s wants seconds (%s), got '%s'\n", arg.c_str(),
                             arg == "--budget" ? "> 0" : ">= 0", v);
                return 2;
            }
            (arg == "--budget" ? o.budget_s : o.settle_s) = seconds;
        } else if (arg == "--stat") {
            if (!(v = value("--stat"))) return 2;
            if (std::strcmp(v, "median") != 0 && std::strcmp(v, "min") != 0) {
                std::fprintf(stderr, "tinyfin-bench: --stat wants median or min, got '%s'\n", v);
                return 2;
            }
            o.use_min = std::strcmp(v, "min") == 0;
        } else if (arg == "--clock") {
            if (!(v = value("--clock"))) return 2;
            if (std::strcmp(v, "wall") != 0 && std::strcmp(v, "cpu") != 0) {
                std::fprintf(stderr, "tinyfin-bench: --clock wants wall or cpu, got '%s'\n", v);
                return 2;
            }
            o.cpu_clock = std::strcmp(v, "cpu") == 0;
        } else if (arg == "--autocast") {
            if (!(v = value("--autocast"))) return 2;
            if (std::strcmp(v, "bf16") != 0 && std::strcmp(v, "f16") != 0) {
                std::fprintf(stderr, "tinyfin-bench: --autocast wants bf16 or f16, got '%s'\n", v);
                return 2;
            }
            o.autocast = std::strcmp(v, "bf16") == 0 ? tinyfin::DType::bf16 : tinyfin::DType::f16;
        } else if (arg == "--python") {
            if (!(v = value("--python"))) return 2;
            o.python = v;
        } else if (arg == "--node") {
            if (!(v = value("--node"))) return 2;
            o.node = v;
        } else {
            std::fprintf(stderr, "tinyfin-bench: unknown argument '%s'\n", arg.c_str());
            usage(stderr);
            return 2;
        }
    }
    if (o.autocast && o.train_steps == 0 && o.gpt_steps == 0) {
        std::fprintf(stderr, "tinyfin-bench: --autocast compares training steps; add --train N or --train-gpt N\n");
        return 2;
    }
    if (o.rounds > 1 && (!o.peers.count("torch") || (o.train_steps == 0 && o.gpt_steps == 0))) {
        std::fprintf(stderr, "tinyfin-bench: --rounds repeats a training comparison; add --train N or --train-gpt N "
                             "and --compare torch\n");
        return 2;
    }
    if (o.autocast && !o.peers.empty()) {
        std::fprintf(stderr, "tinyfin-bench: --autocast and --compare do not combine; run them separately\n");
        return 2;
    }
    for (const std::string &peer : o.peers)
        if (peer != "numpy" && peer != "torch" && peer != "llamacpp") {
            std::fprintf(stderr, "tinyfin-bench: --compare knows numpy, torch and llamacpp (with --llm), not '%s'\n",
                         peer.c_str());
            return 2;
        }
    if (o.peers.count("llamacpp")) {
        const std::string &p = o.llm_path;
        if (p.size() < 5 || p.compare(p.size() - 5, 5, ".gguf") != 0) {
            std::fprintf(stderr,
                         "tinyfin-bench: --compare llamacpp runs llama.cpp on the same file: it wants --llm "
                         "FILE.gguf%s\n",
                         p.empty() ? "" : (", not '" + p + "'").c_str());
            return 2;
        }
    }
    return std::nullopt;
}

// ---- Cases --------------------------------------------------------------------------------------

enum class Unit { gflops, gbps, ns };

const char *unit_name(Unit u) { return u == Unit::gflops ? "GFLOP/s" : u == Unit::gbps ? "GB/s" : "ns/call"; }

using Call = std::function<void()>;

struct Case {
    std::string op, size;
    // What the size label stands for, when the label alone does not say (--list).
    std::string description;
    Unit unit;
    // FLOPs or bytes of one call (unused for ns).
    double work;
    // The case for bench_peers.py: a JSON object with "op" and its shapes.
    std::string spec;
    // Inputs on device, then the call to time.
    std::function<Call(const Device &)> prepare;
    // The same work through cblas_sgemm on preallocated buffers; empty where there is none.
    std::function<Call()> prepare_openblas;
    // The same work through CLBlast's SGEMM on its own OpenCL context; empty where there is none.
    std::function<Call()> prepare_clblast;
};

std::string shape_json(const Shape &s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) {
        if (i) out += ",";
        out += std::to_string(s[i]);
    }
    return out + "]";
}

std::string label(std::initializer_list<int64_t> dims, const char *sep = "x") {
    std::string out;
    for (int64_t d : dims) {
        if (!out.empty()) out += sep;
        out += std::to_string(d);
    }
    return out;
}

// Floats with a binary suffix: 1K, 256K, 16M.
std::string count_label(int64_t n) {
    if (n % (1 << 20) == 0) return std::to_string(n >> 20) + "M";
    if (n % (1 << 10) == 0) return std::to_string(n >> 10) + "K";
    return std::to_string(n);
}

#ifdef TF_BENCH_HAVE_OPENBLAS
// 64-byte aligned floats filled with something finite.
struct HostFloats {
    std::unique_ptr<float, decltype(&std::free)> data{nullptr, &std::free};

    explicit HostFloats(size_t n) {
        data.reset(static_cast<float *>(std::aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64)));
        if (!data) throw std::bad_alloc();
        for (size_t i = 0; i < n; ++i) data.get()[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
    }
};

// batch x ([m, k] @ [k, n]) through cblas_sgemm, one call per batch element.
Call openblas_matmul(int64_t batch, int64_t m, int64_t k, int64_t n) {
    auto a = std::make_shared<HostFloats>(batch * m * k), b = std::make_shared<HostFloats>(batch * k * n);
    auto c = std::make_shared<HostFloats>(batch * m * n);
    return [=] {
        for (int64_t t = 0; t < batch; ++t)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), 1.0f,
                        a->data.get() + t * m * k, int(k), b->data.get() + t * k * n, int(n), 0.0f,
                        c->data.get() + t * m * n, int(n));
    };
}
#endif

Case matmul_case(const std::string &op, int64_t batch, int64_t m, int64_t k, int64_t n, DType dtype = DType::f32) {
    const Shape sa = batch > 1 ? Shape{batch, m, k} : Shape{m, k};
    const Shape sb = batch > 1 ? Shape{batch, k, n} : Shape{k, n};
    Case c;
    c.op = op;
    c.size = batch > 1 ? std::to_string(batch) + "x" + label({m, k, n})
                       : (m == k && k == n ? std::to_string(m) : label({m, k, n}));
    c.unit = Unit::gflops;
    c.work = 2.0 * batch * m * k * n;
    c.description = batch > 1          ? "[B,M,K] @ [B,K,N] labelled BxMxKxN"
                    : m == k && k == n ? "[N,N] @ [N,N]"
                                       : "[M,K] @ [K,N] labelled MxKxN";
    if (dtype != DType::f32) c.description += std::string(", ") + tinyfin::dtype_name(dtype) + " in and out";
    // The peers get the dtype by its torch name (numpy has neither f16 matmul of note nor bf16).
    const std::string peer_dtype = dtype == DType::bf16  ? ",\"dtype\":\"bfloat16\""
                                   : dtype == DType::f16 ? ",\"dtype\":\"float16\""
                                                         : "";
    c.spec = "{\"op\":\"matmul\",\"a\":" + shape_json(sa) + ",\"b\":" + shape_json(sb) + peer_dtype + "}";
    c.prepare = [sa, sb, dtype](const Device &d) -> Call {
        Tensor a = tinyfin::randn(sa, 1, d).to(dtype), b = tinyfin::randn(sb, 2, d).to(dtype);
        return [a, b] { (void)tinyfin::matmul(a, b); };
    };
#ifdef TF_BENCH_HAVE_OPENBLAS
    if (dtype == DType::f32) c.prepare_openblas = [=] { return openblas_matmul(batch, m, k, n); };
#endif
#ifdef TF_BENCH_HAVE_CLBLAST
    c.prepare_clblast = [=] { return Call(tf_bench::clblast_matmul(batch, m, k, n)); };
#endif
    return c;
}

struct ConvShape {
    // The size label (no commas: --size splits on them) and what it stands for.
    const char *name, *description;
    int64_t n, c, h, w, o, k;
    int stride, pad;
};

Case conv_case(const ConvShape &s, bool backward) {
    const int64_t oh = (s.h + 2 * s.pad - s.k) / s.stride + 1, ow = (s.w + 2 * s.pad - s.k) / s.stride + 1;
    const Shape sx{s.n, s.c, s.h, s.w}, sw{s.o, s.c, s.k, s.k}, sy{s.n, s.o, oh, ow};
    tinyfin::Conv2dOptions opt;
    opt.stride_h = opt.stride_w = s.stride;
    opt.pad_h = opt.pad_w = s.pad;
    Case c;
    c.op = backward ? "conv2d_bwd" : "conv2d";
    c.size = s.name;
    c.description = s.description;
    c.unit = Unit::gflops;
    // Forward: one multiply-add per tap; backward: grad_input and grad_weight, as many each.
    c.work = (backward ? 4.0 : 2.0) * s.n * s.o * oh * ow * s.c * s.k * s.k;
    c.spec = "{\"op\":\"" + c.op + "\",\"x\":" + shape_json(sx) + ",\"w\":" + shape_json(sw) +
             ",\"stride\":" + std::to_string(s.stride) + ",\"padding\":" + std::to_string(s.pad) + "}";
    c.prepare = [=](const Device &d) -> Call {
        Tensor x = tinyfin::randn(sx, 3, d), w = tinyfin::randn(sw, 4, d);
        if (!backward) return [=] { (void)tinyfin::conv2d(x, w, Tensor(), opt); };
        x.requires_grad_();
        w.requires_grad_();
        Tensor y = tinyfin::conv2d(x, w, Tensor(), opt), dy = tinyfin::randn(sy, 5, d);
        return [=]() mutable {
            x.zero_grad();
            w.zero_grad();
            y.backward(dy, true);
        };
    };
    return c;
}

Case elementwise_case(const std::string &op, int64_t n) {
    Case c;
    c.op = op;
    c.size = count_label(n);
    c.unit = Unit::gbps;
    c.work = 3.0 * n * sizeof(float);  // two reads, one write
    c.description = "[N] " + std::string(op == "add" ? "+" : "*") + " [N], N floats";
    c.spec = "{\"op\":\"" + op + "\",\"n\":" + std::to_string(n) + "}";
    c.prepare = [op, n](const Device &d) -> Call {
        Tensor a = tinyfin::randn({n}, 6, d), b = tinyfin::randn({n}, 7, d);
        if (op == "add") return [a, b] { (void)tinyfin::add(a, b); };
        return [a, b] { (void)tinyfin::mul(a, b); };
    };
    return c;
}

// A float function of one operand (tanh, sigmoid: a recurrent layer's gates), GB/s of one read
// and one write.
Case unary_case(const std::string &op, int64_t n) {
    Case c;
    c.op = op;
    c.size = count_label(n);
    c.unit = Unit::gbps;
    c.work = 2.0 * n * sizeof(float);
    c.description = op + "([N]), N floats";
    c.spec = "{\"op\":\"" + op + "\",\"n\":" + std::to_string(n) + "}";
    c.prepare = [op, n](const Device &d) -> Call {
        Tensor a = tinyfin::randn({n}, 6, d);
        if (op == "tanh") return [a] { (void)tinyfin::tanh(a); };
        return [a] { (void)tinyfin::sigmoid(a); };
    };
    return c;
}

Case rows_case(const std::string &op, int64_t rows, int64_t cols) {
    Case c;
    c.op = op;
    c.size = label({rows, cols});
    c.unit = Unit::gbps;
    c.work = 2.0 * rows * cols * sizeof(float);  // read x, write y
    c.description =
        op == "softmax" ? "[rows, cols] along the last axis" : "[rows, cols] over the last axis, with weight and bias";
    c.spec = "{\"op\":\"" + op + "\",\"x\":" + shape_json({rows, cols}) + "}";
    c.prepare = [op, rows, cols](const Device &d) -> Call {
        Tensor x = tinyfin::randn({rows, cols}, 8, d);
        if (op == "softmax") return [x] { (void)tinyfin::softmax(x, -1); };
        Tensor w = tinyfin::randn({cols}, 9, d), b = tinyfin::randn({cols}, 10, d);
        return [x, w, b] { (void)tinyfin::layer_norm(x, 1, w, b); };
    };
    return c;
}

Case sum_case(int64_t n) {
    Case c;
    c.op = "sum";
    c.size = count_label(n);
    c.unit = Unit::gbps;
    c.work = 1.0 * n * sizeof(float);
    c.description = "[N] to one value";
    c.spec = "{\"op\":\"sum\",\"n\":" + std::to_string(n) + "}";
    c.prepare = [n](const Device &d) -> Call {
        Tensor x = tinyfin::randn({n}, 11, d);
        return [x] { (void)tinyfin::sum(x); };
    };
    return c;
}

// The machine's memory read bandwidth in the same run: a plain read of a buffer far larger than
// the caches by as many threads as the cpu plugin uses (TINYFIN_THREADS, else the cores), no
// tinyfin op involved: the ceiling the memory-bound cases below are read against. mem_read reads
// each thread's part front to back; mem_read_pf (streams) reads it as four quarters in lockstep,
// each with a software prefetch 512 bytes ahead, as a matvec reads four weight rows: on this
// project's AMD EPYC guests one sequential stream reaches only 55-70% of what four do
// (docs/performance.md), so the ceiling takes the better of the two.
Case memory_read_case(int64_t bytes, bool prefetch = false) {
    Case c;
    c.op = prefetch ? "mem_read_pf" : "mem_read";
    c.size = count_label(bytes / 4);
    c.unit = Unit::gbps;
    c.work = static_cast<double>(bytes);
    c.description = prefetch ? "read of a host buffer (N floats' bytes), each thread's part as four streams with a "
                               "software prefetch 512 bytes ahead, by the cpu plugin's thread count: the bandwidth "
                               "ceiling"
                             : "plain read of a host buffer (N floats' bytes) by the cpu plugin's thread count: the "
                               "bandwidth ceiling";
    c.spec = "{\"op\":\"" + c.op + "\",\"bytes\":" + std::to_string(bytes) + "}";
    c.prepare = [bytes, prefetch](const Device &) -> Call {
        const auto words = static_cast<size_t>(bytes / 8);
        auto data = std::make_shared<std::vector<uint64_t>>(words);
        for (size_t i = 0; i < words; ++i) (*data)[i] = i * 0x9e3779b97f4a7c15ull;
        const char *env = std::getenv("TINYFIN_THREADS");
        const int threads =
            std::max(1, env && std::atoi(env) > 0 ? std::atoi(env) : int(std::thread::hardware_concurrency()));
        return [data, threads, prefetch] {
            std::vector<uint64_t> partial(static_cast<size_t>(threads) * 8);
            std::vector<std::thread> pool;
            const size_t n = data->size(), per = n / static_cast<size_t>(threads);
            for (int t = 0; t < threads; ++t)
                pool.emplace_back([&, t] {
                    // 16-byte vector loads into four independent sums: no dependency or
                    // instruction limit below the memory's.
                    using V = uint64_t __attribute__((vector_size(16)));
                    const uint64_t *p = data->data() + static_cast<size_t>(t) * per;
                    const size_t len = t + 1 == threads ? n - static_cast<size_t>(t) * per : per;
                    V a{}, b{}, c{}, d{};
                    const auto read64 = [&](const uint64_t *q) {
                        V x0, x1, x2, x3;
                        std::memcpy(&x0, q, 16);
                        std::memcpy(&x1, q + 2, 16);
                        std::memcpy(&x2, q + 4, 16);
                        std::memcpy(&x3, q + 6, 16);
                        a += x0, b += x1, c += x2, d += x3;
                    };
                    size_t i = 0;
                    if (prefetch) {
                        const size_t quarter = len / 32 * 8;  // words, a multiple of 8
                        for (; i < quarter; i += 8)
                            for (int s = 0; s < 4; ++s) {
                                const uint64_t *q = p + static_cast<size_t>(s) * quarter + i;
                                __builtin_prefetch(q + 64);  // 512 bytes ahead
                                read64(q);
                            }
                        i = 4 * quarter;
                    }
                    for (; i + 8 <= len; i += 8) read64(p + i);
                    uint64_t rest = 0;
                    for (; i < len; ++i) rest += p[i];
                    const V sum = a + b + c + d;
                    partial[static_cast<size_t>(t) * 8] = sum[0] + sum[1] + rest;
                });
            for (std::thread &th : pool) th.join();
            uint64_t total = 0;
            for (uint64_t v : partial) total += v;
            asm volatile("" : : "r"(total));
        };
    };
    return c;
}

// A quantized weight [N, K] times one activation row (generation's matrix-vector product):
// GB/s of weight bytes read, comparable with mem_read. matvec_f32/f16/bf16 are the same product
// with a float weight (and activations of its dtype) through matmul.
Case matvec_case(DType dtype, int64_t n, int64_t k) {
    Case c;
    c.op = std::string("matvec_") + tinyfin::dtype_name(dtype);
    c.size = label({n, k});
    c.unit = Unit::gbps;
    c.work = static_cast<double>(tinyfin::dtype_bytes(dtype, {n, k}));
    c.description = "x [1, K] times the transpose of a " + std::string(tinyfin::dtype_name(dtype)) +
                    (!tinyfin::is_quantized(dtype) ? " weight [N, K] (matmul)" : " weight [N, K] (matmul_q)") +
                    ", labelled NxK; GB/s of weight read";
    c.spec = "{\"op\":\"matmul_q\",\"w\":" + shape_json({n, k}) + ",\"dtype\":\"" + tinyfin::dtype_name(dtype) + "\"}";
    c.prepare = [dtype, n, k](const Device &d) -> Call {
        Tensor x = tinyfin::randn({1, k}, 14, d);
        Tensor w32 = tinyfin::randn({n, k}, 15, d);
        if (dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16) {
            Tensor wt = w32.to(dtype).transpose(0, 1), xd = x.to(dtype);
            return [xd, wt] { (void)tinyfin::matmul(xd, wt); };
        }
        Tensor w = tinyfin::quantize(w32, dtype);
        tinyfin::prepack_weight(w);  // as the LLM loader does (TINYFIN_CPU_PREPACK=0: nothing)
        return [x, w] { (void)tinyfin::matmul_q(x, w); };
    };
    return c;
}

// The same with M activation rows (prompt processing), in GFLOP/s; matmul_f32 is the same
// product with the f32 weight through matmul (x times W^T): the rate prefill is read against.
Case matmul_q_case(DType dtype, int64_t m, int64_t n, int64_t k) {
    Case c;
    c.op = std::string("matmul_") + tinyfin::dtype_name(dtype);
    c.size = label({m, n, k});
    c.unit = Unit::gflops;
    c.work = 2.0 * m * n * k;
    c.description = "x [M, K] times the transpose of a " + std::string(tinyfin::dtype_name(dtype)) +
                    (dtype == DType::f32 ? " weight [N, K] (matmul)" : " weight [N, K] (matmul_q)") +
                    ", labelled MxNxK";
    c.spec = "{\"op\":\"matmul_q\",\"x\":" + shape_json({m, k}) + ",\"w\":" + shape_json({n, k}) + "}";
    c.prepare = [dtype, m, n, k](const Device &d) -> Call {
        Tensor x = tinyfin::randn({m, k}, 16, d);
        if (dtype == DType::f32) {
            Tensor wt = tinyfin::randn({n, k}, 17, d).transpose(0, 1);
            return [x, wt] { (void)tinyfin::matmul(x, wt); };
        }
        Tensor w = tinyfin::quantize(tinyfin::randn({n, k}, 17, d), dtype);
        tinyfin::prepack_weight(w);  // as the LLM loader does (TINYFIN_CPU_PREPACK=0: nothing)
        return [x, w] { (void)tinyfin::matmul_q(x, w); };
    };
    return c;
}

// The whole cost of one small op through the C++ API: shape checks, output allocation,
// dispatch, the plugin call and the 16 additions; with out, into a preallocated tensor (the
// peers then call np.add(a, b, out=c) and torch.add(a, b, out=c)).
Case overhead_case(bool out) {
    Case c;
    c.op = "overhead";
    c.size = out ? "add16_out" : "add16";
    c.description =
        out ? "add of two [16] tensors into a preallocated [16] (add(a, b, out)): the per-op cost without allocation"
            : "add of two [16] tensors through the C++ API: the whole per-op cost";
    c.unit = Unit::ns;
    c.work = 0;
    c.spec = out ? "{\"op\":\"add\",\"n\":16,\"out\":true}" : "{\"op\":\"add\",\"n\":16}";
    c.prepare = [out](const Device &d) -> Call {
        Tensor a = tinyfin::randn({16}, 12, d), b = tinyfin::randn({16}, 13, d);
        if (!out) return [a, b] { (void)tinyfin::add(a, b); };
        Tensor result = tinyfin::empty({16}, tinyfin::DType::f32, d);
        return [a, b, result] { tinyfin::add(a, b, result); };
    };
    return c;
}

// The same add with inputs that require grad: recorded (a graph node per call, released with the
// result), and under NoGradGuard (what autograd costs when it is off: one thread-local check).
Case grad_overhead_case(bool recording) {
    Case c;
    c.op = "overhead";
    c.size = recording ? "add16_grad" : "add16_nograd";
    c.description = recording ? "add of two [16] tensors that require grad, recorded for backward"
                              : "add of two [16] tensors that require grad, under NoGradGuard";
    c.unit = Unit::ns;
    c.work = 0;
    c.spec = recording ? "{\"op\":\"add\",\"n\":16,\"grad\":\"record\"}" : "{\"op\":\"add\",\"n\":16,\"grad\":\"off\"}";
    c.prepare = [recording](const Device &d) -> Call {
        Tensor a = tinyfin::randn({16}, 12, d), b = tinyfin::randn({16}, 13, d);
        a.requires_grad_();
        b.requires_grad_();
        if (recording) return [a, b] { (void)tinyfin::add(a, b); };
        return [a, b] {
            tinyfin::NoGradGuard off;
            (void)tinyfin::add(a, b);
        };
    };
    return c;
}

std::vector<Case> all_cases() {
    std::vector<Case> cases;
    cases.push_back(overhead_case(false));
    cases.push_back(overhead_case(true));
    cases.push_back(grad_overhead_case(true));
    cases.push_back(grad_overhead_case(false));
    for (int64_t n : {64, 128, 256, 512, 1024, 2048}) cases.push_back(matmul_case("matmul", 1, n, n, n));
    // Low precision (the cpu plugin: converted to f32 for the f32 GEMM, or AVX512-BF16).
    for (int64_t n : {256, 512, 1024}) cases.push_back(matmul_case("matmul_bf16", 1, n, n, n, DType::bf16));
    for (int64_t n : {512, 1024}) cases.push_back(matmul_case("matmul_f16", 1, n, n, n, DType::f16));
    // Few rows of A (a recurrent layer's step h R^T: [1, 128] x [128, 512], [16, 256] x [256, 1024]).
    cases.push_back(matmul_case("matmul", 1, 1, 128, 512));
    cases.push_back(matmul_case("matmul", 1, 16, 256, 1024));
    // Batched: many small products (attention-like) and a few mid-sized ones.
    cases.push_back(matmul_case("matmul_batched", 64, 64, 64, 64));
    cases.push_back(matmul_case("matmul_batched", 32, 128, 128, 128));
    cases.push_back(matmul_case("matmul_batched", 8, 256, 256, 256));
    const ConvShape convs[] = {
        {"cnn1", "batch 64, 1->32 channels, 3x3 pad 1, 28x28 (the example CNN's first layer)", 64, 1, 28, 28, 32, 3, 1,
         1},
        {"cnn2", "batch 64, 32->64 channels, 3x3 pad 1, 14x14 (its second layer)", 64, 32, 14, 14, 64, 3, 1, 1},
        {"resnet3x3", "batch 8, 64->64 channels, 3x3 pad 1, 56x56 (a ResNet stage-1 conv)", 8, 64, 56, 56, 64, 3, 1, 1},
        {"resnet1x1", "batch 8, 256->64 channels, 1x1, 56x56 (a ResNet bottleneck reduction)", 8, 256, 56, 56, 64, 1, 1,
         0},
    };
    for (const ConvShape &s : convs) cases.push_back(conv_case(s, false));
    for (const ConvShape &s : convs) cases.push_back(conv_case(s, true));
    for (const char *op : {"add", "mul"})
        for (int64_t n : {int64_t(1) << 10, int64_t(1) << 14, int64_t(1) << 18, int64_t(1) << 20, int64_t(1) << 22,
                          int64_t(1) << 24})
            cases.push_back(elementwise_case(op, n));
    for (const char *op : {"tanh", "sigmoid"})
        for (int64_t n : {int64_t(512), int64_t(1) << 14, int64_t(1) << 20}) cases.push_back(unary_case(op, n));
    for (const char *op : {"softmax", "layer_norm"}) {
        cases.push_back(rows_case(op, 256, 1024));
        cases.push_back(rows_case(op, 4096, 1024));
    }
    for (int64_t n : {int64_t(1) << 10, int64_t(1) << 20, int64_t(1) << 24}) cases.push_back(sum_case(n));
    cases.push_back(memory_read_case(int64_t(256) << 20));
    cases.push_back(memory_read_case(int64_t(256) << 20, true));
    for (DType f : {DType::f32, DType::f16, DType::bf16}) cases.push_back(matvec_case(f, 4096, 4096));
    // TinyLlama-1.1B's gate/up ([5632, 2048]: 4 KiB rows) and down ([2048, 5632]) in bf16.
    cases.push_back(matvec_case(DType::bf16, 5632, 2048));
    cases.push_back(matvec_case(DType::bf16, 2048, 5632));
    for (DType q : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::q4_k, DType::q5_k,
                    DType::q6_k, DType::q8_k})
        cases.push_back(matvec_case(q, 8192, 8192));
    for (DType q : {DType::q8_0, DType::q4_0, DType::q4_k}) cases.push_back(matmul_q_case(q, 64, 4096, 4096));
    // Prefill at TinyLlama's shapes (512 prompt rows; [2048, 2048] attention, [5632, 2048] gate/up,
    // [2048, 5632] down) and fewer rows, beside the f32 product of the same shapes.
    for (DType q : {DType::f32, DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::q4_k,
                    DType::q5_k, DType::q6_k}) {
        for (int64_t m : {8, 16, 32, 64, 512}) cases.push_back(matmul_q_case(q, m, 2048, 2048));
        cases.push_back(matmul_q_case(q, 512, 5632, 2048));
        cases.push_back(matmul_q_case(q, 512, 2048, 5632));
    }
    return cases;
}

// ---- Timing -------------------------------------------------------------------------------------

struct Timing {
    std::string op, size, backend;
    // "tinyfin" (a tinyfin backend), "reference" (raw OpenBLAS) or "peer" (numpy, torch).
    std::string kind;
    // Which backends ran the op's calls ("blas", "cpu (fallback)", ...), for tinyfin rows.
    std::string ran_on;
    Unit unit = Unit::ns;
    double work = 0;
    double median_ns = 0, min_ns = 0, max_ns = 0, p25_ns = 0, p75_ns = 0;
    int samples = 0;
    long inner = 0;
    // Non-empty when the case could not run on this backend.
    std::string error;

    // The time rates and ratios use: the median, or the best sample under --stat min.
    static inline bool use_min = false;
    double time_ns() const { return use_min ? min_ns : median_ns; }
    double rate() const {
        if (unit == Unit::ns || time_ns() <= 0) return time_ns();
        return work / time_ns();  // FLOP/ns = GFLOP/s, byte/ns = GB/s
    }
};

// Seconds on the chosen clock: wall time, or the CPU time of the whole process (every thread),
// which other load on a shared machine does not inflate. With one thread doing the work the
// two agree on an idle machine.
bool g_cpu_clock = false;

double now_s() {
    if (g_cpu_clock) {
        timespec ts{};
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
    }
    return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

double seconds_since(double t0) { return now_s() - t0; }

// Quantile of sorted values, linear between neighbours.
double quantile(const std::vector<double> &v, double q) {
    const double pos = q * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(pos);
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// One contender of a case: a tinyfin backend or the raw reference, and its call.
struct Contender {
    Timing timing;
    Call call;
    std::vector<double> ns;

    bool uses_openblas() const { return timing.kind == "reference" || timing.ran_on.find("blas") != std::string::npos; }
};

void settle(const Options &o) {
    if (o.settle_s > 0) usleep(static_cast<useconds_t>(o.settle_s * 1e6));
}

// Times every contender of one case with their samples interleaved (a sample of each in turn),
// so that load changes on a shared machine hit all of them alike and their ratios hold.
void measure(std::vector<Contender> &contenders, const Options &o) {
    double round_s = 0;
    for (Contender &c : contenders) {
        for (int i = 0; i < o.warmup; ++i) c.call();
        tinyfin::synchronize();
        // Size the samples from a batch of calls lasting a tenth of a sample, not from one call:
        // synchronize() visits every initialised backend, which made one call of a tiny op look
        // far slower than it is (docs/performance.md, "Measurements behind code choices").
        double one = 0;
        for (long batch = 1;; batch *= 10) {
            const double t0 = now_s();
            for (long i = 0; i < batch; ++i) c.call();
            tinyfin::synchronize();
            const double elapsed = seconds_since(t0);
            one = std::max(elapsed / static_cast<double>(batch), 1e-9);
            if (elapsed >= o.sample_s / 10 || batch >= 100000000) break;
        }
        c.timing.inner = std::max(1L, std::lround(o.sample_s / one));
        round_s += one * static_cast<double>(c.timing.inner);
        if (c.uses_openblas()) settle(o);
    }
    const double budget = o.budget_s * static_cast<double>(contenders.size());
    const int samples = std::max(3, std::min(o.repeat, static_cast<int>(budget / std::max(round_s, 1e-9))));
    for (int s = 0; s < samples; ++s)
        for (size_t k = 0; k < contenders.size(); ++k) {
            Contender &c = contenders[k];
            const double t0 = now_s();
            for (long i = 0; i < c.timing.inner; ++i) c.call();
            tinyfin::synchronize();
            c.ns.push_back(seconds_since(t0) * 1e9 / static_cast<double>(c.timing.inner));
            const Contender &next = contenders[(k + 1) % contenders.size()];
            if (c.uses_openblas() && !next.uses_openblas()) settle(o);
        }
    for (Contender &c : contenders) {
        std::vector<double> &ns = c.ns;
        std::sort(ns.begin(), ns.end());
        Timing &t = c.timing;
        t.samples = samples;
        t.median_ns = quantile(ns, 0.5);
        t.p25_ns = quantile(ns, 0.25);
        t.p75_ns = quantile(ns, 0.75);
        t.min_ns = ns.front();
        t.max_ns = ns.back();
    }
}

// "blas", "cpu", "cpu (fallback)" or a mix, from the op counters around one call.
std::string ran_on(const Call &call) {
    tinyfin::reset_stats();
    call();
    tinyfin::synchronize();
    const tinyfin::Stats s = tinyfin::stats();
    std::string out;
    for (const auto &b : s.backends)
        if (b.ops > 0) {
            if (!out.empty()) out += "+";
            out += b.name;
        }
    if (s.total_fallbacks > 0) out += " (fallback)";
    return out.empty() ? "-" : out;
}

Timing base_timing(const Case &c, const std::string &backend, const std::string &kind) {
    Timing t;
    t.op = c.op;
    t.size = c.size;
    t.backend = backend;
    t.kind = kind;
    t.unit = c.unit;
    t.work = c.work;
    return t;
}

// ---- Peers (bench_peers.py) ---------------------------------------------------------------------

std::string json_string(const std::string &text) {
    std::string out = "\"";
    for (unsigned char ch : text) {
        if (ch == '"' || ch == '\\') {
            out += '\\';
            out += static_cast<char>(ch);
        } else if (ch < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", ch);
            out += buf;
        } else {
            out += static_cast<char>(ch);
        }
    }
    return out + "\"";
}

// The directory of this executable.
std::string exe_dir() {
    char path[4096];
    const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) return ".";
    path[n] = '\0';
    std::string p(path);
    const size_t slash = p.rfind('/');
    return slash == std::string::npos ? "." : p.substr(0, slash);
}

// A Python helper of this tool: beside the executable in the build tree, in
// <libexecdir>/tinyfin when installed (TF_BENCH_LIBEXEC is that directory relative to bindir).
std::string helper_script(const char *name) {
    const std::string beside = exe_dir() + "/" + name;
    if (access(beside.c_str(), R_OK) == 0) return beside;
    return exe_dir() + "/" TF_BENCH_LIBEXEC "/" + name;
}

// A tiny reader for the flat JSON bench_peers.py prints: one object per line,
//   {"peer": "torch", "median_ns": ..., ...}, {"peer": "torch", "error": "..."},
//   {"peer": "torch", "note": "..."} or {"status": "ready"} / {"status": "done"}
struct PeerLine {
    std::map<std::string, std::string> text;
    std::map<std::string, double> number;
};

PeerLine parse_peer_line(const std::string &line) {
    PeerLine out;
    size_t i = 0;
    auto skip = [&] {
        while (i < line.size() &&
               (line[i] == ' ' || line[i] == ',' || line[i] == '{' || line[i] == '}' || line[i] == ':'))
            ++i;
    };
    auto read_string = [&] {
        std::string s;
        ++i;  // opening quote
        while (i < line.size() && line[i] != '"') {
            if (line[i] == '\\' && i + 1 < line.size()) ++i;
            s += line[i++];
        }
        ++i;
        return s;
    };
    while (true) {
        skip();
        if (i >= line.size() || line[i] != '"') break;
        const std::string key = read_string();
        skip();
        if (i < line.size() && line[i] == '"') {
            out.text[key] = read_string();
        } else {
            char *end = nullptr;
            out.number[key] = std::strtod(line.c_str() + i, &end);
            i = static_cast<size_t>(end - line.c_str());
            if (end == line.c_str()) break;
        }
    }
    return out;
}

// Runs a peer script (beside this tool) as a child process and parses the JSON line it prints.
// tuned: glibc's malloc tunables go into the child's environment (glibc reads them at start).
// status receives the child's exit status.
PeerLine run_peer_script(const Options &o, std::vector<std::string> args, bool tuned, int &status) {
    args.insert(args.begin(), o.python);
    int from_child[2];
    status = -1;
    if (pipe2(from_child, O_CLOEXEC) != 0) return {};
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(from_child[1], STDOUT_FILENO);
        if (tuned)
            setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824", 1);
        std::vector<char *> argv;
        for (std::string &a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        execv(o.python.c_str(), argv.data());
        std::fprintf(stderr, "tinyfin-bench: cannot run %s: %s\n", o.python.c_str(), std::strerror(errno));
        _exit(127);
    }
    close(from_child[1]);
    std::string text;
    char buf[4096];
    for (ssize_t n; pid > 0 && (n = read(from_child[0], buf, sizeof buf)) > 0;)
        text.append(buf, static_cast<size_t>(n));
    close(from_child[0]);
    int raw = 0;
    if (pid > 0) waitpid(pid, &raw, 0);
    status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    return parse_peer_line(text);
}

// Says why a peer gave no result.
void print_no_result(const char *what, const PeerLine &line, int status) {
    const auto error = line.text.find("error");
    std::printf("%s: no result (%s)\n", what,
                error != line.text.end() ? error->second.c_str() : ("exit status " + std::to_string(status)).c_str());
}

// PyTorch's training step (bench_train_torch.py beside this tool), as shipped or hand-tuned
// (OpenBLAS on 1 thread, channels_last, malloc tunables). Prints its result; returns its
// images/s, or NaN when it did not run.
double run_torch_train(const Options &o, int threads, int steps, bool tuned) {
    const char *config = tuned ? "tuned" : "default";
    std::vector<std::string> args = {helper_script("bench_train_torch.py"),
                                     "--steps",
                                     std::to_string(steps),
                                     "--threads",
                                     std::to_string(threads),
                                     "--config",
                                     config};
    if (tuned) args.insert(args.end(), {"--blas-threads", "1", "--channels-last"});
    int status = 0;
    const PeerLine line = run_peer_script(o, args, tuned, status);
    const auto number = [&](const char *key) { return line.number.count(key) ? line.number.at(key) : NAN; };
    const double rate = number("images_per_s");
    if (std::isnan(rate)) {
        print_no_result((std::string("torch ") + config).c_str(), line, status);
        return NAN;
    }
    std::printf(
        "torch %-7s step median %.2f ms (min %.2f, max %.2f), %.0f img/s, page faults per step: %.1f minor (%s)\n",
        config, number("median_ms"), number("min_ms"), number("max_ms"), rate, number("minor_faults_per_step"),
        tuned ? "OpenBLAS 1 thread, channels_last, malloc tunables" : "as shipped");
    return rate;
}

// The per-round ratios of --rounds and their median: "<what>: median 1.52 over 5 rounds (1.31 ...
// 1.88)"; rounds whose peer gave no result (NaN) are left out and counted.
void print_rounds(const char *what, const std::vector<double> &all) {
    std::vector<double> ratios;
    for (double r : all)
        if (!std::isnan(r)) ratios.push_back(r);
    const size_t n = ratios.size(), missing = all.size() - n;
    if (n == 0) {
        std::printf("%s: no result in %zu rounds\n", what, all.size());
        return;
    }
    std::sort(ratios.begin(), ratios.end());
    std::printf("%s: median %.2f over %zu rounds (", what, quantile(ratios, 0.5), n);
    for (size_t i = 0; i < n; ++i) std::printf("%s%.2f", i ? " " : "", ratios[i]);
    std::printf(")");
    if (missing) std::printf(", %zu more without a result", missing);
    std::printf("\n");
}

// PyTorch's char_gpt (bench_gpt_torch.py): training tokens/s of `steps` timed steps and its
// KV-cached sampling under no_grad, as shipped or hand-tuned (OpenBLAS on 1 thread, malloc
// tunables). Returns {train tokens/s, sample tokens/s}, NaN when it did not run.
std::pair<double, double> run_torch_gpt(const Options &o, int threads, int steps, bool tuned) {
    const char *config = tuned ? "tuned" : "default";
    std::vector<std::string> args = {helper_script("bench_gpt_torch.py"),
                                     "--time-steps",
                                     std::to_string(steps),
                                     "--threads",
                                     std::to_string(threads),
                                     "--name",
                                     config};
    if (tuned) args.insert(args.end(), {"--blas-threads", "1"});
    int status = 0;
    const PeerLine line = run_peer_script(o, args, tuned, status);
    const auto number = [&](const char *key) { return line.number.count(key) ? line.number.at(key) : NAN; };
    const double train = number("tokens_per_s"), sample = number("sample_tokens_per_s");
    if (std::isnan(train)) {
        print_no_result((std::string("torch gpt ") + config).c_str(), line, status);
        return {NAN, NAN};
    }
    std::printf("torch %-7s gpt step median %.1f ms, %.0f tokens/s, cpu time per step %.1f ms; KV-cached sampling "
                "%.0f tokens/s, cpu time per token %.2f ms (%s)\n",
                config, number("median_ms"), train, number("cpu_ms_per_step"), sample,
                number("sample_cpu_ms_per_token"), tuned ? "OpenBLAS 1 thread, malloc tunables" : "as shipped");
    return {train, sample};
}

// bench_peers.py as a co-process: started once, then asked for one case at a time right after
// tinyfin measured it, so both see the same load on a shared machine.
class PeerProcess {
public:
    PeerProcess(const Options &o, int threads, std::vector<std::string> &notes) : notes_(notes) {
        const std::string script = helper_script("bench_peers.py");
        if (access(script.c_str(), R_OK) != 0) {
            notes_.push_back("peers skipped: " + script + " not found");
            return;
        }
        int to_child[2], from_child[2];
        if (pipe2(to_child, O_CLOEXEC) != 0) return;
        if (pipe2(from_child, O_CLOEXEC) != 0) {
            close(to_child[0]);
            close(to_child[1]);
            return;
        }
        std::fflush(nullptr);
        pid_ = fork();
        if (pid_ == 0) {
            dup2(to_child[0], STDIN_FILENO);
            dup2(from_child[1], STDOUT_FILENO);
            execl(o.python.c_str(), o.python.c_str(), script.c_str(), "--serve", static_cast<char *>(nullptr));
            std::fprintf(stderr, "tinyfin-bench: cannot run %s: %s\n", o.python.c_str(), std::strerror(errno));
            _exit(127);
        }
        close(to_child[0]);
        close(from_child[1]);
        if (pid_ < 0) {
            close(to_child[1]);
            close(from_child[0]);
            notes_.push_back("peers skipped: cannot start " + o.python);
            return;
        }
        in_.reset(fdopen(to_child[1], "w"));
        out_.reset(fdopen(from_child[0], "r"));
        std::string config = "{\"threads\":" + std::to_string(threads) + ",\"repeat\":" + std::to_string(o.repeat) +
                             ",\"warmup\":" + std::to_string(o.warmup) + ",\"budget_s\":" + std::to_string(o.budget_s) +
                             ",\"sample_s\":" + std::to_string(o.sample_s) +
                             ",\"settle_s\":" + std::to_string(o.settle_s) + ",\"clock\":\"" +
                             (o.cpu_clock ? "cpu" : "wall") + "\",\"peers\":[";
        bool first = true;
        for (const std::string &p : o.peers) {
            config += (first ? "" : ",") + json_string(p);
            first = false;
        }
        // The co-process answers the configuration with its notes and a "ready" line.
        if (!send(config + "]}") || !receive(nullptr, nullptr)) stop();
    }

    ~PeerProcess() { stop(); }
    PeerProcess(const PeerProcess &) = delete;
    PeerProcess &operator=(const PeerProcess &) = delete;

    bool running() const { return out_ != nullptr; }

    // Times one case in every peer; appends a Timing per peer that has the op.
    void run(const Case &c, std::vector<Timing> &results) {
        if (!running()) return;
        if (!send(c.spec) || !receive(&c, &results)) stop();
    }

private:
    struct FileCloser {
        void operator()(FILE *f) const noexcept { std::fclose(f); }
    };

    bool send(const std::string &line) {
        return std::fputs((line + "\n").c_str(), in_.get()) >= 0 && std::fflush(in_.get()) == 0;
    }

    // Reads lines up to the "done" (or "ready") line; false when the co-process went away.
    bool receive(const Case *c, std::vector<Timing> *results) {
        std::string line;
        char buf[4096];
        while (std::fgets(buf, sizeof buf, out_.get())) {
            line += buf;
            if (line.back() != '\n') continue;
            const PeerLine r = parse_peer_line(line);
            line.clear();
            if (r.text.count("status")) return true;  // "ready" or "done"
            const auto peer = r.text.find("peer");
            if (peer == r.text.end()) continue;
            if (r.text.count("note")) {
                notes_.push_back(peer->second + ": " + r.text.at("note"));
                continue;
            }
            if (!c || !results) continue;
            Timing t = base_timing(*c, peer->second, "peer");
            if (r.text.count("error")) {
                t.error = r.text.at("error");
            } else {
                auto num = [&](const char *key) { return r.number.count(key) ? r.number.at(key) : 0.0; };
                t.median_ns = num("median_ns");
                t.min_ns = num("min_ns");
                t.max_ns = num("max_ns");
                t.p25_ns = num("p25_ns");
                t.p75_ns = num("p75_ns");
                t.samples = static_cast<int>(num("samples"));
                t.inner = static_cast<long>(num("inner"));
            }
            results->push_back(t);
        }
        return false;
    }

    void stop() {
        in_.reset();  // EOF: the co-process exits
        out_.reset();
        if (pid_ <= 0) return;
        int status = 0;
        waitpid(pid_, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            notes_.push_back("bench_peers.py ended with status " +
                             std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1));
        pid_ = -1;
    }

    std::vector<std::string> &notes_;
    pid_t pid_ = -1;
    std::unique_ptr<FILE, FileCloser> in_, out_;
};

// ---- Output -------------------------------------------------------------------------------------

std::string format_time(double ns) {
    char buf[32];
    if (ns < 1e3)
        std::snprintf(buf, sizeof buf, "%.0f ns", ns);
    else if (ns < 1e6)
        std::snprintf(buf, sizeof buf, "%.2f us", ns / 1e3);
    else if (ns < 1e9)
        std::snprintf(buf, sizeof buf, "%.2f ms", ns / 1e6);
    else
        std::snprintf(buf, sizeof buf, "%.2f s", ns / 1e9);
    return buf;
}

std::string format_rate(const Timing &t) {
    char buf[32];
    if (t.unit == Unit::ns)
        std::snprintf(buf, sizeof buf, "%.0f ns/call", t.time_ns());
    else
        std::snprintf(buf, sizeof buf, "%.1f %s", t.rate(), unit_name(t.unit));
    return buf;
}

struct Machine {
    std::string cpu;
    int cores = 0;
    int threads = 0;
    std::vector<std::pair<std::string, std::string>> facts;  // backend features worth printing
};

// The fastest tinyfin backend's row for each case, and the matching reference and peer rows.
struct Ratio {
    std::string op, size, backend;
    std::map<std::string, double> vs;  // peer -> tinyfin time / peer time
};

std::vector<Ratio> ratios_of(const std::vector<Timing> &results) {
    std::vector<Ratio> out;
    std::map<std::pair<std::string, std::string>, std::vector<const Timing *>> by_case;
    std::vector<std::pair<std::string, std::string>> order;
    for (const Timing &t : results) {
        const auto key = std::make_pair(t.op, t.size);
        if (!by_case.count(key)) order.push_back(key);
        by_case[key].push_back(&t);
    }
    for (const auto &key : order) {
        const auto &rows = by_case[key];
        for (const Timing *t : rows) {
            if (t->kind != "tinyfin" || !t->error.empty()) continue;
            Ratio r{t->op, t->size, t->backend, {}};
            for (const Timing *peer : rows)
                if (peer->kind != "tinyfin" && peer->error.empty() && peer->time_ns() > 0)
                    r.vs[peer->backend] = t->time_ns() / peer->time_ns();
            if (!r.vs.empty()) out.push_back(r);
        }
    }
    return out;
}

// The quantized cases against their ceilings in the same run: each matvec_* GB/s over mem_read's
// (generation's bandwidth ceiling), each matmul_<quantized type> over matmul_f32 of the same size
// (prefill against the f32 GEMM).
void print_ceilings(const std::vector<Timing> &results) {
    const Timing *mem = nullptr;
    for (const Timing &t : results)
        if (t.op == "mem_read" && t.error.empty()) mem = &t;
    bool header = false;
    auto line = [&](const Timing &t, const char *of, double ratio) {
        if (!header) std::printf("\n%-15s %-16s %-9s %12s %8s\n", "op", "size", "backend", "of", "ratio");
        header = true;
        std::printf("%-15s %-16s %-9s %12s %8.2f\n", t.op.c_str(), t.size.c_str(), t.backend.c_str(), of, ratio);
    };
    for (const Timing &t : results) {
        if (!t.error.empty() || t.kind != "tinyfin" || t.rate() <= 0) continue;
        if (mem && t.op.rfind("matvec_", 0) == 0) line(t, "mem_read", t.rate() / mem->rate());
        if (t.op.rfind("matmul_q", 0) == 0)  // matmul_q8_0, matmul_q4_k, ...
            for (const Timing &f : results)
                if (f.op == "matmul_f32" && f.size == t.size && f.backend == t.backend && f.error.empty() &&
                    f.rate() > 0)
                    line(t, "matmul_f32", t.rate() / f.rate());
    }
}

void print_table(const std::vector<Timing> &results, const Machine &m, const std::vector<std::string> &notes) {
    std::printf("tinyfin-bench: %s, %d usable cores, %d threads\n", m.cpu.c_str(), m.cores, m.threads);
    for (const auto &[key, value] : m.facts) std::printf("  %s = %s\n", key.c_str(), value.c_str());
    std::printf("statistic for rates and ratios: %s; clock: %s\n",
                Timing::use_min ? "best sample (--stat min)" : "median",
                g_cpu_clock ? "process CPU time (--clock cpu)" : "wall");
    std::printf("\n%-15s %-16s %-9s %-16s %10s %10s %16s %7s\n", "op", "size", "backend", "ran on", "median", "best",
                "rate", "IQR");
    std::string last;
    for (const Timing &t : results) {
        const std::string key = t.op + "/" + t.size;
        if (!last.empty() && key != last) std::printf("\n");
        last = key;
        if (!t.error.empty()) {
            std::printf("%-15s %-16s %-9s %s\n", t.op.c_str(), t.size.c_str(), t.backend.c_str(), t.error.c_str());
            continue;
        }
        const std::string ran = t.kind == "tinyfin" ? t.ran_on : t.kind;
        std::printf("%-15s %-16s %-9s %-16s %10s %10s %16s %6.1f%%\n", t.op.c_str(), t.size.c_str(), t.backend.c_str(),
                    ran.c_str(), format_time(t.median_ns).c_str(), format_time(t.min_ns).c_str(),
                    format_rate(t).c_str(), t.median_ns > 0 ? 100.0 * (t.p75_ns - t.p25_ns) / t.median_ns : 0.0);
    }
    const std::vector<Ratio> ratios = ratios_of(results);
    if (!ratios.empty()) {
        std::set<std::string> peers;
        for (const Ratio &r : ratios)
            for (const auto &[peer, v] : r.vs) peers.insert(peer);
        std::printf("\nTime ratios tinyfin / reference (below 1: tinyfin faster)\n%-15s %-16s %-9s", "op", "size",
                    "backend");
        for (const std::string &p : peers) std::printf(" %10s", ("vs " + p).c_str());
        std::printf("\n");
        for (const Ratio &r : ratios) {
            std::printf("%-15s %-16s %-9s", r.op.c_str(), r.size.c_str(), r.backend.c_str());
            for (const std::string &p : peers) {
                const auto it = r.vs.find(p);
                if (it == r.vs.end())
                    std::printf(" %10s", "-");
                else
                    std::printf(" %10.2f", it->second);
            }
            std::printf("\n");
        }
    }
    print_ceilings(results);
    for (const std::string &n : notes) std::printf("note: %s\n", n.c_str());
}

void print_json(const std::vector<Timing> &results, const Machine &m, const std::vector<std::string> &notes) {
    std::printf("{\n  \"schema\": \"tinyfin-bench/1\",\n  \"statistic\": \"%s\",\n  \"clock\": \"%s\",\n"
                "  \"machine\": {\"cpu\": %s, \"cores\": %d, \"threads\": %d, \"facts\": {",
                Timing::use_min ? "min" : "median", g_cpu_clock ? "cpu" : "wall", json_string(m.cpu).c_str(), m.cores,
                m.threads);
    for (size_t i = 0; i < m.facts.size(); ++i)
        std::printf("%s%s: %s", i ? ", " : "", json_string(m.facts[i].first).c_str(),
                    json_string(m.facts[i].second).c_str());
    std::printf("}},\n  \"results\": [\n");
    for (size_t i = 0; i < results.size(); ++i) {
        const Timing &t = results[i];
        std::printf("    {\"op\": %s, \"size\": %s, \"backend\": %s, \"kind\": %s, \"ran_on\": %s, \"unit\": %s",
                    json_string(t.op).c_str(), json_string(t.size).c_str(), json_string(t.backend).c_str(),
                    json_string(t.kind).c_str(), json_string(t.ran_on).c_str(), json_string(unit_name(t.unit)).c_str());
        if (!t.error.empty())
            std::printf(", \"error\": %s", json_string(t.error).c_str());
        else
            std::printf(
                ", \"median_ns\": %.1f, \"min_ns\": %.1f, \"max_ns\": %.1f, \"p25_ns\": %.1f, \"p75_ns\": %.1f, "
                "\"samples\": %d, \"inner\": %ld, \"rate\": %.4g",
                t.median_ns, t.min_ns, t.max_ns, t.p25_ns, t.p75_ns, t.samples, t.inner, t.rate());
        std::printf("}%s\n", i + 1 < results.size() ? "," : "");
    }
    std::printf("  ],\n  \"ratios\": [\n");
    const std::vector<Ratio> ratios = ratios_of(results);
    for (size_t i = 0; i < ratios.size(); ++i) {
        const Ratio &r = ratios[i];
        std::printf("    {\"op\": %s, \"size\": %s, \"backend\": %s, \"time_ratio\": {", json_string(r.op).c_str(),
                    json_string(r.size).c_str(), json_string(r.backend).c_str());
        bool first = true;
        for (const auto &[peer, v] : r.vs)
            std::printf("%s%s: %.4f", first ? "" : ", ", json_string(peer).c_str(), v), first = false;
        std::printf("}}%s\n", i + 1 < ratios.size() ? "," : "");
    }
    std::printf("  ],\n  \"notes\": [");
    for (size_t i = 0; i < notes.size(); ++i) std::printf("%s%s", i ? ", " : "", json_string(notes[i]).c_str());
    std::printf("]\n}\n");
}

std::string csv_field(const std::string &s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string out = "\"";
    for (char ch : s) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return out + "\"";
}

void print_csv(const std::vector<Timing> &results) {
    std::printf("op,size,backend,kind,ran_on,unit,median_ns,min_ns,max_ns,p25_ns,p75_ns,samples,inner,rate,error\n");
    for (const Timing &t : results) {
        std::printf("%s,%s,%s,%s,%s,%s,", csv_field(t.op).c_str(), csv_field(t.size).c_str(),
                    csv_field(t.backend).c_str(), t.kind.c_str(), csv_field(t.ran_on).c_str(), unit_name(t.unit));
        if (t.error.empty())
            std::printf("%.1f,%.1f,%.1f,%.1f,%.1f,%d,%ld,%.4g,\n", t.median_ns, t.min_ns, t.max_ns, t.p25_ns, t.p75_ns,
                        t.samples, t.inner, t.rate());
        else
            std::printf(",,,,,,,,%s\n", csv_field(t.error).c_str());
    }
}

// ---- Main ----------------------------------------------------------------------------------------

int usable_cores() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? static_cast<int>(n) : 1;
}

std::string cpu_model() {
    std::unique_ptr<FILE, decltype(&std::fclose)> f(std::fopen("/proc/cpuinfo", "re"), &std::fclose);
    char line[512];
    while (f && std::fgets(line, sizeof line, f.get())) {
        if (std::strncmp(line, "model name", 10) != 0) continue;
        const char *v = std::strchr(line, ':');
        if (!v) continue;
        std::string s(v + 1 + std::strspn(v + 1, " \t"));
        while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
        return s;
    }
    return "unknown cpu";
}

#ifdef TF_BENCH_HAVE_LLM
// --llm: one child process per thread count (the cpu plugin reads TINYFIN_THREADS once), each
// measuring the read bandwidth (the mem_read case's probe) between its repeats and timing the
// model; PyTorch's run of the same weights (bench_llm_torch.py) right after each, with the same
// thread count. Prints one table of medians.
// PyTorch 1.13's bf16 matmul has no fast path on a CPU without AVX512-BF16 (a 512-token prefill of
// a 1.1B model takes an hour there): its prompt is at most this long; its generation is what is
// compared.
constexpr int k_torch_prompt = 32;

double process_cpu_s() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The read bandwidth of a GPU backend's memory: a sum along the rows of a 1 GiB f32 matrix on the
// device (one row per block of the reduction kernel, every byte read once), timed to the
// synchronisation; five samples, the median (GB/s, and GB per CPU second, which means little here).
std::function<tfbench::ReadSample()> device_read_sample(const Device &device) {
    const int64_t rows = 1 << 18, cols = 1 << 10;
    Tensor m = tinyfin::full({rows, cols}, 1.0, DType::f32, device);
    return [m] {
        std::vector<double> wall, cpu;
        const double gb = double(rows * cols * 4) / 1e9;
        for (int i = 0; i < 5; ++i) {
            tinyfin::synchronize();
            const auto t0 = Clock::now();
            const double c0 = process_cpu_s();
            Tensor s = tinyfin::sum(m, {1});
            tinyfin::synchronize();
            cpu.push_back(gb / std::max(process_cpu_s() - c0, 1e-9));
            wall.push_back(gb / std::chrono::duration<double>(Clock::now() - t0).count());
        }
        std::sort(wall.begin(), wall.end());
        std::sort(cpu.begin(), cpu.end());
        tfbench::ReadSample r;
        r.wall = r.plain_wall = wall[2];
        r.cpu = r.plain_cpu = cpu[2];
        return r;
    };
}

// llama.cpp on the same GGUF file (bench_llm_llamacpp.js in Node, a co-process with its own copy
// of the model): started once per thread count, then asked for one run after each of tinyfin's
// repeats (the same prompt ids); its medians read at the end.
class LlamaCppPeer {
public:
    // Starts the driver and waits for its "ready" line; error() says why when it did not come.
    LlamaCppPeer(const Options &o, int threads) {
        int to_child[2], from_child[2];
        if (pipe2(to_child, O_CLOEXEC) != 0) {
            start_error_ = std::string("pipe: ") + std::strerror(errno);
            return;
        }
        if (pipe2(from_child, O_CLOEXEC) != 0) {
            start_error_ = std::string("pipe: ") + std::strerror(errno);
            close(to_child[0]);
            close(to_child[1]);
            return;
        }
        std::vector<std::string> args = {o.node,       helper_script("bench_llm_llamacpp.js"),
                                         "--model",    o.llm_path,
                                         "--threads",  std::to_string(threads),
                                         "--prompt",   std::to_string(o.llm_prompt),
                                         "--generate", std::to_string(o.llm_generate)};
        std::fflush(nullptr);
        pid_ = fork();
        if (pid_ == 0) {
            dup2(to_child[0], STDIN_FILENO);
            dup2(from_child[1], STDOUT_FILENO);
            std::vector<char *> argv;
            for (std::string &a : args) argv.push_back(a.data());
            argv.push_back(nullptr);
            execvp(o.node.c_str(), argv.data());
            std::printf("{\"peer\": \"llamacpp\", \"error\": \"cannot run %s: %s\"}\n", o.node.c_str(),
                        std::strerror(errno));
            std::fflush(stdout);
            _exit(127);
        }
        close(to_child[0]);
        close(from_child[1]);
        to_ = to_child[1];
        from_ = from_child[0];
        if (pid_ < 0) {
            start_error_ = std::string("fork: ") + std::strerror(errno);
            return;
        }
        ready_ = parse_peer_line(read_line());
    }
    ~LlamaCppPeer() {
        if (to_ >= 0) close(to_);
        if (from_ >= 0) close(from_);
        if (pid_ > 0) waitpid(pid_, nullptr, 0);
    }
    LlamaCppPeer(const LlamaCppPeer &) = delete;
    LlamaCppPeer &operator=(const LlamaCppPeer &) = delete;

    std::string error() const {
        if (!start_error_.empty()) return start_error_;
        const auto e = ready_.text.find("error");
        if (e != ready_.text.end()) return e->second;
        const auto s = ready_.text.find("status");
        return s != ready_.text.end() && s->second == "ready" ? "" : "bench_llm_llamacpp.js gave no ready line";
    }
    // What was loaded: node-llama-cpp's version, llama.cpp's release, the CPU backend variant.
    std::string describe() const {
        const auto text = [&](const char *k) {
            const auto it = ready_.text.find(k);
            return it == ready_.text.end() ? std::string("?") : it->second;
        };
        return "node-llama-cpp " + text("node_llama_cpp") + ", llama.cpp " + text("llama_cpp") + ", CPU backend " +
               text("cpu_backend") + ", flash attention " + text("flash_attention") +
               ", matrices repacked at load: " + text("repacked") + "; " + text("system_info");
    }
    // One run of the prompt (the calling process may be a fork: it only writes and reads the pipes).
    void run(int repeat, const std::vector<int32_t> &prompt) {
        std::string line = "run";
        for (int32_t id : prompt) {
            line += ' ';
            line += std::to_string(id);
        }
        line += "\n";
        if (write(to_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return;
        const PeerLine r = parse_peer_line(read_line());
        const auto n = [&](const char *k) { return r.number.count(k) ? r.number.at(k) : NAN; };
        char which[32] = "warm-up";
        if (repeat > 0) std::snprintf(which, sizeof which, "repeat %d", repeat);
        std::fprintf(stderr, "tinyfin-bench --llm: llama.cpp %s: prompt %.2f tokens/s, generation %.3f tokens/s\n",
                     which, double(prompt.size()) / n("prompt_s"), generate_ / n("generate_s"));
    }
    // The medians of the runs after the first.
    PeerLine finish() {
        const char done[] = "done\n";
        if (write(to_, done, sizeof done - 1) != static_cast<ssize_t>(sizeof done - 1)) return {};
        return parse_peer_line(read_line());
    }
    void set_generate(int g) { generate_ = g; }

private:
    std::string read_line() {
        std::string line;
        char c = 0;
        while (from_ >= 0 && read(from_, &c, 1) == 1 && c != '\n') line += c;
        return line;
    }
    pid_t pid_ = -1;
    int to_ = -1, from_ = -1;
    PeerLine ready_;
    std::string start_error_;
    int generate_ = 0;
};

int run_llm_mode(const Options &o) {
    // --backend NAME (one): the model on that backend; threads then only size the cpu plugin's pool.
    if (o.backends.size() > 1) {
        std::fprintf(stderr, "tinyfin-bench --llm: name one --backend (the model runs on one)\n");
        return 2;
    }
    const std::string backend = o.backends.empty() ? "cpu" : *o.backends.begin();
    const bool on_cpu = backend == "cpu";
    const std::vector<int> counts = o.threads > 0 ? std::vector<int>{o.threads}
                                    : on_cpu      ? std::vector<int>{1, 2}
                                                  : std::vector<int>{2};
    const int repeat = o.repeat_given ? o.repeat : 3;
    double load[3] = {NAN, NAN, NAN};
    if (FILE *f = std::fopen("/proc/loadavg", "r")) {
        if (std::fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = NAN;
        std::fclose(f);
    }
    std::printf("model %s on %s (%s); prompt %d tokens, %d generated, medians of %d repeats; cpu %s, load average "
                "%.2f %.2f %.2f at the start\n",
                o.llm_path.c_str(), backend.c_str(),
                (std::string(o.llm_map_weights ? "weights mapped in place"
                                               : "--no-mmap: large matrices copied into huge pages") +
                 (o.llm_fuse_products ? "" : ", --no-fuse") + (o.llm_prepack_weights ? "" : ", --no-prepack"))
                    .c_str(),
                o.llm_prompt, o.llm_generate, repeat, cpu_model().c_str(), load[0], load[1], load[2]);
    struct Row {
        int threads;
        tfbench::LlmRates ours;
        double torch_prompt = NAN, torch_generate = NAN, torch_generate_cpu = NAN;
        double llama_prompt = NAN, llama_generate = NAN, llama_generate_cpu = NAN;
    };
    std::vector<Row> rows;
    const bool with_llama = o.peers.count("llamacpp") != 0;
    if (with_llama) std::signal(SIGPIPE, SIG_IGN);  // a driver that died answers nothing, never kills us
    std::string llama_what;
    for (int threads : counts) {
        std::unique_ptr<LlamaCppPeer> llama;
        if (with_llama) {
            llama = std::make_unique<LlamaCppPeer>(o, threads);
            if (const std::string e = llama->error(); !e.empty()) {
                std::fprintf(stderr, "tinyfin-bench --llm --compare llamacpp: %s\n", e.c_str());
                return 1;
            }
            llama->set_generate(o.llm_generate);
            llama_what = llama->describe();
        }
        int fds[2];
        if (pipe(fds) != 0) return 1;
        std::fflush(nullptr);
        const pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            setenv("TINYFIN_THREADS", std::to_string(threads).c_str(), 1);
            int code = 0;
            try {
                const Call plain = memory_read_case(int64_t(256) << 20).prepare(Device{"cpu", 0});
                const Call ahead = memory_read_case(int64_t(256) << 20, true).prepare(Device{"cpu", 0});
                // Five reads of 256 MiB by each probe, alternating: the medians on the wall clock
                // and on the process CPU clock; the ceiling takes the better probe.
                std::function<tfbench::ReadSample()> sample = [&plain, &ahead] {
                    std::vector<double> wall[2], cpu[2];
                    for (int i = 0; i < 5; ++i)
                        for (int probe = 0; probe < 2; ++probe) {
                            const auto t0 = Clock::now();
                            const double c0 = process_cpu_s();
                            (probe == 0 ? plain : ahead)();
                            const double gb = double(int64_t(256) << 20) / 1e9;
                            cpu[probe].push_back(gb / (process_cpu_s() - c0));
                            wall[probe].push_back(gb / std::chrono::duration<double>(Clock::now() - t0).count());
                        }
                    const auto mid = [](std::vector<double> v) {
                        std::sort(v.begin(), v.end());
                        return v[2];
                    };
                    tfbench::ReadSample r;
                    r.plain_wall = mid(wall[0]);
                    r.plain_cpu = mid(cpu[0]);
                    r.wall = std::max(r.plain_wall, mid(wall[1]));
                    r.cpu = std::max(r.plain_cpu, mid(cpu[1]));
                    return r;
                };
                if (!on_cpu) sample = device_read_sample(Device::parse(backend));
                tfbench::LlmBenchOptions lo;
                lo.backend = backend;
                lo.path = o.llm_path;
                lo.prompt_tokens = o.llm_prompt;
                lo.generate_tokens = o.llm_generate;
                lo.map_weights = o.llm_map_weights;
                lo.fuse_products = o.llm_fuse_products;
                lo.prepack_weights = o.llm_prepack_weights;
                lo.repeat = repeat;
                if (llama)
                    lo.after_repeat = [&llama](int rep, const std::vector<int32_t> &prompt) {
                        llama->run(rep, prompt);
                    };
                const tfbench::LlmRates r = tfbench::run_llm_bench(lo, sample);
                if (write(fds[1], &r, sizeof r) != static_cast<ssize_t>(sizeof r)) code = 1;
            } catch (const std::exception &e) {
                std::fprintf(stderr, "tinyfin-bench --llm: %s\n", e.what());
                code = 1;
            }
            std::fflush(nullptr);
            _exit(code);
        }
        close(fds[1]);
        Row row{threads, {}, NAN, NAN, NAN, NAN, NAN, NAN};
        const bool got = pid > 0 && read(fds[0], &row.ours, sizeof row.ours) == static_cast<ssize_t>(sizeof row.ours);
        close(fds[0]);
        int status = 0;
        if (pid > 0) waitpid(pid, &status, 0);
        if (!got) {
            std::fprintf(stderr, "tinyfin-bench --llm: no result at %d threads\n", threads);
            return 1;
        }
        if (o.peers.count("torch")) {
            int peer_status = 0;
            const PeerLine line = run_peer_script(o,
                                                  {helper_script("bench_llm_torch.py"), "--model", o.llm_path,
                                                   "--threads", std::to_string(threads), "--prompt",
                                                   std::to_string(std::min(o.llm_prompt, k_torch_prompt)), "--generate",
                                                   std::to_string(o.llm_generate), "--repeat", std::to_string(repeat)},
                                                  false, peer_status);
            const auto number = [&](const char *key) { return line.number.count(key) ? line.number.at(key) : NAN; };
            row.torch_prompt = number("prompt_tokens_per_s");
            row.torch_generate = number("generate_tokens_per_s");
            row.torch_generate_cpu = number("generate_tokens_per_cpu_s");
            if (std::isnan(row.torch_generate)) print_no_result("torch llm", line, peer_status);
        }
        if (llama) {
            const PeerLine line = llama->finish();
            const auto number = [&](const char *key) { return line.number.count(key) ? line.number.at(key) : NAN; };
            row.llama_prompt = number("prompt_tokens_per_s");
            row.llama_generate = number("generate_tokens_per_s");
            row.llama_generate_cpu = number("generate_tokens_per_cpu_s");
            if (std::isnan(row.llama_generate)) print_no_result("llama.cpp llm", line, -1);
        }
        rows.push_back(row);
    }
    const tfbench::LlmRates &first = rows.front().ours;
    std::printf("bytes read per generated token: %.3f GB of weights + %.3f GB of KV cache at the mean position "
                "(load %.1f s)\n",
                first.weight_bytes_per_token / 1e9, first.kv_bytes_per_token / 1e9, first.load_seconds);
    std::printf("on the process CPU clock (all threads' time; with one thread the unloaded machine's wall "
                "clock):\n%-7s %9s %9s %9s %10s %10s %9s %11s %10s %8s %10s %9s\n",
                "threads", "plain GB/s", "read GB/s", "ceiling", "generate", "of ceiling", "prompt", "prompt GF/s",
                "GEMM GF/s", "of GEMM", "torch gen", "gen/torch");
    for (const Row &row : rows) {
        const tfbench::LlmRates &r = row.ours;
        std::printf("%-7d %10.2f %9.2f %9.3f %10.3f %10.3f %9.2f %11.1f %10.1f %8.2f %10.3f %9.2f\n", row.threads,
                    r.read_plain_gb_per_cpu_s, r.read_gb_per_cpu_s, r.ceiling_tokens_per_cpu_s,
                    r.generate_tokens_per_cpu_s, r.generate_tokens_per_cpu_s / r.ceiling_tokens_per_cpu_s,
                    r.prompt_tokens_per_cpu_s, r.prompt_gflops_cpu, r.gemm_gflops_cpu,
                    r.prompt_gflops_cpu / r.gemm_gflops_cpu, row.torch_generate_cpu,
                    r.generate_tokens_per_cpu_s / row.torch_generate_cpu);
    }
    std::printf("on the wall clock:\n");
    std::printf("%-7s %10s %9s %9s %10s %10s %9s %8s %10s %11s %10s %9s\n", "threads", "plain GB/s", "read GB/s",
                "ceiling", "generate", "of ceiling", "prompt", "of GEMM", "torch gen", "torch prompt", "gen/torch",
                "prompt/torch");
    for (const Row &row : rows) {
        const tfbench::LlmRates &r = row.ours;
        std::printf("%-7d %10.2f %9.2f %9.3f %10.3f %10.3f %9.2f %8.2f %10.3f %11.2f %10.2f %9.2f\n", row.threads,
                    r.read_plain_gbps, r.read_gbps, r.ceiling_tokens_per_s, r.generate_tokens_per_s,
                    r.generate_tokens_per_s / r.ceiling_tokens_per_s, r.prompt_tokens_per_s,
                    r.prompt_gflops / r.gemm_gflops, row.torch_generate, row.torch_prompt,
                    r.generate_tokens_per_s / row.torch_generate, r.prompt_tokens_per_s / row.torch_prompt);
    }
    std::printf("(tokens/s; read GB/s: the better of mem_read (plain GB/s) and mem_read_pf, medians of five 256 MiB "
                "reads each%s; ceiling = read GB/s / bytes per generated token; torch: bench_llm_torch.py, its "
                "prompt %d tokens)\n",
                on_cpu
                    ? ""
                    : "; on a GPU backend the device's bandwidth as a row sum over 1 GiB reads it, and its CPU-clock "
                      "table means little",
                std::min(o.llm_prompt, k_torch_prompt));
    if (with_llama) {
        std::printf("llama.cpp on the same file (%s), the same prompt ids and greedy decoding, each of its runs right "
                    "after one of tinyfin's; fractions of the same ceiling:\n",
                    llama_what.c_str());
        std::printf("%-7s %10s %10s %10s %9s %10s %10s %11s %12s\n", "threads", "llama gen", "of ceiling",
                    "tinyfin gen", "of ceil.", "tf/llama", "llama prompt", "tf prompt", "tf/llama pr.");
        for (const Row &row : rows) {
            const tfbench::LlmRates &r = row.ours;
            std::printf("%-7d %10.3f %10.3f %10.3f %9.3f %10.2f %10.2f %11.2f %12.2f\n", row.threads,
                        row.llama_generate, row.llama_generate / r.ceiling_tokens_per_s, r.generate_tokens_per_s,
                        r.generate_tokens_per_s / r.ceiling_tokens_per_s, r.generate_tokens_per_s / row.llama_generate,
                        row.llama_prompt, r.prompt_tokens_per_s, r.prompt_tokens_per_s / row.llama_prompt);
        }
        std::printf("on the process CPU clock (each engine's own process, all threads):\n%-7s %10s %10s %10s %9s\n",
                    "threads", "llama gen", "of ceiling", "tinyfin gen", "of ceil.");
        for (const Row &row : rows) {
            const tfbench::LlmRates &r = row.ours;
            std::printf("%-7d %10.3f %10.3f %10.3f %9.3f\n", row.threads, row.llama_generate_cpu,
                        row.llama_generate_cpu / r.ceiling_tokens_per_cpu_s, r.generate_tokens_per_cpu_s,
                        r.generate_tokens_per_cpu_s / r.ceiling_tokens_per_cpu_s);
        }
        std::printf("(llama.cpp's prompt: from handing it the ids to the first generated token; its generation: the "
                    "%d tokens after it, one llama_decode and a greedy pick each: bench_llm_llamacpp.js)\n",
                    o.llm_generate);
    }
    return 0;
}
#endif

bool selected(const std::set<std::string> &filter, const std::string &name) {
    return filter.empty() || filter.count(name);
}

#ifdef TF_BENCH_HAVE_ONNX
// --onnx runs tinyfin-bench-onnx beside this program with the same arguments: libtinyfin-onnx
// and libtinyfin-llm cannot share one process's protobuf (tinyfin_bench_onnx.cpp).
int exec_onnx_bench(char **argv) {
    std::string self(4096, '\0');
    const ssize_t n = readlink("/proc/self/exe", self.data(), self.size() - 1);
    if (n <= 0) {
        std::fprintf(stderr, "tinyfin-bench: cannot find its own path to run tinyfin-bench-onnx: %s\n",
                     std::strerror(errno));
        return 1;
    }
    self.resize(static_cast<std::size_t>(n));
    const std::string program = self.substr(0, self.rfind('/') + 1) + "tinyfin-bench-onnx";
    execv(program.c_str(), argv);
    std::fprintf(stderr, "tinyfin-bench: cannot run %s: %s\n", program.c_str(), std::strerror(errno));
    return 1;
}
#endif

}  // namespace

int main(int argc, char **argv) {
#ifdef TF_BENCH_HAVE_ONNX
    if (tfbench::wants_onnx(argc, argv)) return exec_onnx_bench(argv);
#endif
    Options o;
    if (std::optional<int> status = parse_options(argc, argv, o)) return *status;
    Timing::use_min = o.use_min;
    g_cpu_clock = o.cpu_clock;
    if (!o.llm_path.empty()) {
#ifdef TF_BENCH_HAVE_LLM
        return run_llm_mode(o);
#else
        std::fprintf(stderr, "tinyfin-bench: built without libtinyfin-llm: --llm is not available\n");
        return 2;
#endif
    }

    const std::vector<Case> cases = all_cases();
    if (o.list) {
        std::printf("%-15s %-16s %-8s %s\n", "op", "size", "unit", "shape");
        for (const Case &c : cases)
            std::printf("%-15s %-16s %-8s %s\n", c.op.c_str(), c.size.c_str(), unit_name(c.unit),
                        c.description.empty() ? "" : c.description.c_str());
        return 0;
    }

    // One thread count for everyone, set before tinyfin loads its plugins.
    Machine m;
    m.cpu = cpu_model();
    m.cores = usable_cores();
    if (o.threads > 0) setenv("TINYFIN_THREADS", std::to_string(o.threads).c_str(), 1);
    const char *env_threads = std::getenv("TINYFIN_THREADS");
    m.threads = o.threads > 0                               ? o.threads
                : env_threads && std::atoi(env_threads) > 0 ? std::atoi(env_threads)
                                                            : m.cores;
#ifdef TF_BENCH_HAVE_OPENBLAS
    openblas_set_num_threads(m.threads);
#endif
    if (o.autocast && (o.gpt_steps > 0 || o.train_steps > 0)) {
        try {
            if (o.gpt_steps > 0) tfbench::run_autocast_compare(tfbench::Workload::gpt, o.gpt_steps, *o.autocast);
            if (o.train_steps > 0) tfbench::run_autocast_compare(tfbench::Workload::cnn, o.train_steps, *o.autocast);
            return 0;
        } catch (const std::exception &e) {
            std::fprintf(stderr, "tinyfin-bench: %s\n", e.what());
            return 1;
        }
    }
    if (o.gpt_steps > 0) {
        try {
            tfbench::GptRates ours = tfbench::run_train_gpt(o.gpt_steps);
            if (o.peers.count("torch")) {
                const auto shipped = run_torch_gpt(o, m.threads, o.gpt_steps, false);
                auto tuned = run_torch_gpt(o, m.threads, o.gpt_steps, true);
                std::printf("tokens/s ratio tinyfin / torch (above 1: tinyfin faster): training %.2f vs as shipped, "
                            "%.2f vs tuned; KV-cached sampling %.2f vs as shipped, %.2f vs tuned\n",
                            ours.train_tokens_per_s / shipped.first, ours.train_tokens_per_s / tuned.first,
                            ours.sample_tokens_per_s / shipped.second, ours.sample_tokens_per_s / tuned.second);
                std::vector<double> train{ours.train_tokens_per_s / tuned.first},
                    sample{ours.sample_tokens_per_s / tuned.second};
                for (int r = 2; r <= o.rounds; ++r) {
                    ours = tfbench::run_train_gpt(o.gpt_steps);
                    tuned = run_torch_gpt(o, m.threads, o.gpt_steps, true);
                    train.push_back(ours.train_tokens_per_s / tuned.first);
                    sample.push_back(ours.sample_tokens_per_s / tuned.second);
                    std::printf("round %d: tokens/s ratio tinyfin / torch tuned: training %.2f; KV-cached sampling "
                                "%.2f\n",
                                r, train.back(), sample.back());
                }
                if (o.rounds > 1) {
                    print_rounds("training tokens/s ratio vs torch tuned", train);
                    print_rounds("KV-cached sampling tokens/s ratio vs torch tuned", sample);
                }
            }
            return 0;
        } catch (const std::exception &e) {
            std::fprintf(stderr, "tinyfin-bench: %s\n", e.what());
            return 1;
        }
    }
    if (o.train_steps > 0) {
        try {
            double ours = tfbench::run_train(o.train_steps, 64);
            if (o.peers.count("torch")) {
                const double shipped = run_torch_train(o, m.threads, o.train_steps, false);
                double tuned = run_torch_train(o, m.threads, o.train_steps, true);
                std::printf(
                    "images/s ratio tinyfin / torch (above 1: tinyfin faster): %.2f vs as shipped, %.2f vs tuned\n",
                    ours / shipped, ours / tuned);
                std::vector<double> ratios{ours / tuned};
                for (int r = 2; r <= o.rounds; ++r) {
                    ours = tfbench::run_train(o.train_steps, 64);
                    tuned = run_torch_train(o, m.threads, o.train_steps, true);
                    ratios.push_back(ours / tuned);
                    std::printf("round %d: images/s ratio tinyfin / torch tuned: %.2f\n", r, ratios.back());
                }
                if (o.rounds > 1) print_rounds("images/s ratio vs torch tuned", ratios);
            }
            return 0;
        } catch (const std::exception &e) {
            std::fprintf(stderr, "tinyfin-bench: %s\n", e.what());
            return 1;
        }
    }

    std::vector<std::string> notes;
    std::vector<std::string> backends;
    try {
        backends = tinyfin::available_backends();
        for (const tinyfin::PluginReport &p : tinyfin::report().plugins) {
            // Like TINYFIN_BACKEND=auto, software-emulated GPUs (lavapipe) run only when named.
            const bool software = std::any_of(p.devices.begin(), p.devices.end(),
                                              [](const tinyfin::DeviceReport &d) { return d.kind == "software-gpu"; });
            if (software && !o.backends.count(p.name)) {
                backends.erase(std::remove(backends.begin(), backends.end(), p.name), backends.end());
                if (p.outcome == "loaded")
                    notes.push_back(p.name + " skipped: software-emulated device; name it in --backend to run it");
            }
            for (const auto &[key, value] : p.features)
                if (key == "openblas.core" || key == "openblas.threads" || key == "threads" || key == "simd" ||
                    key == "kernels")
                    m.facts.emplace_back(p.name + "." + (key.rfind("openblas.", 0) == 0 ? key.substr(9) : key), value);
        }
    } catch (const tinyfin::Error &e) {
        std::fprintf(stderr, "tinyfin-bench: %s\n", e.what());
        return 1;
    }
    for (const std::string &b : o.backends) {
        const bool known =
            b == "openblas" || b == "clblast" || std::find(backends.begin(), backends.end(), b) != backends.end();
        if (!known) std::fprintf(stderr, "tinyfin-bench: warning: backend '%s' is not available\n", b.c_str());
    }
#ifndef TF_BENCH_HAVE_OPENBLAS
    if (o.backends.count("openblas"))
        std::fprintf(stderr, "tinyfin-bench: warning: built without OpenBLAS: no raw 'openblas' reference\n");
#endif

    std::vector<Timing> results;
    std::vector<const Case *> chosen;
    std::optional<PeerProcess> peers;
    if (!o.peers.empty()) peers.emplace(o, m.threads, notes);
    for (const Case &c : cases) {
        if (!selected(o.ops, c.op) || !selected(o.sizes, c.size)) continue;
        chosen.push_back(&c);
        std::vector<Contender> contenders;
        for (const std::string &backend : backends) {
            if (!selected(o.backends, backend)) continue;
            Timing t = base_timing(c, backend, "tinyfin");
            try {
                Call call = c.prepare(Device{backend, 0});
                t.ran_on = ran_on(call);
                contenders.push_back({t, std::move(call), {}});
            } catch (const tinyfin::Error &e) {
                t.error = e.what();
                results.push_back(t);
            }
        }
        if (c.prepare_openblas && selected(o.backends, "openblas"))
            contenders.push_back({base_timing(c, "openblas", "reference"), c.prepare_openblas(), {}});
        if (c.prepare_clblast && selected(o.backends, "clblast")) {
            try {
                contenders.push_back({base_timing(c, "clblast", "reference"), c.prepare_clblast(), {}});
            } catch (const std::exception &e) {
                Timing t = base_timing(c, "clblast", "reference");
                t.error = e.what();
                results.push_back(t);
            }
        }
        try {
            measure(contenders, o);
            for (const Contender &ct : contenders) results.push_back(ct.timing);
        } catch (const tinyfin::Error &e) {
            // A call that ran once and then failed: report it for every contender of the case.
            for (Contender &ct : contenders) {
                ct.timing.error = e.what();
                results.push_back(ct.timing);
            }
        }
        if (peers) {
            // Both processes share the cores: let each side's OpenBLAS workers go idle first.
            settle(o);
            peers->run(c, results);
            settle(o);
        }
        if (o.format == Options::Format::table)
            std::fprintf(stderr, "tinyfin-bench: %s %s done\n", c.op.c_str(), c.size.c_str());
    }
    peers.reset();
    // Group each case's rows together: tinyfin backends, the reference, then the peers.
    std::stable_sort(results.begin(), results.end(), [&](const Timing &a, const Timing &b) {
        auto index = [&](const Timing &t) {
            for (size_t i = 0; i < chosen.size(); ++i)
                if (chosen[i]->op == t.op && chosen[i]->size == t.size) return i;
            return chosen.size();
        };
        return index(a) < index(b);
    });

    switch (o.format) {
    case Options::Format::table: print_table(results, m, notes); break;
    case Options::Format::json: print_json(results, m, notes); break;
    case Options::Format::csv: print_csv(results); break;
    }
    return 0;
}
