// tinyfin-bench --onnx MODEL: latency and throughput of one ONNX model run by libtinyfin-onnx on
// each chosen backend and, with --compare ort, by ONNX Runtime's CPU provider in the same run
// (the onnxruntime-node package driven by bench_onnx_ort.js, a child process), with the ratio and
// how far the two outputs differ.
//
//   tinyfin-bench --onnx MODEL [--dims NAME=N,...] [--backend LIST] [--threads N] [--repeat N]
//                 [--warmup N] [--compare ort] [--node PATH]
//
// Open dimensions take their value from --dims by symbol (batch=32,seq=128) and are 1 otherwise.
// Feeds: float inputs standard normals, integer and bool inputs 0 or 1 (valid token ids, masks
// and type ids for every model of tests/onnx/models). Each engine runs --warmup calls, then
// --repeat timed calls, tinyfin's in two halves around ONNX Runtime's so that both see the same
// load on a shared machine; reported are the median and quartiles of the wall time and the median
// process CPU time per run (all threads; the steadier measure on a loaded machine, and the work
// done when one thread runs). Both sides use --threads
// threads (tinyfin: TINYFIN_THREADS; ONNX Runtime: intra-op threads, one inter-op thread).
#include "bench_onnx.hpp"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tinyfin/onnx.hpp"

namespace tfbench {

namespace {

namespace tox = tinyfin::onnx;
using Clock = std::chrono::steady_clock;

struct OnnxOptions {
    std::string model;
    std::map<std::string, int64_t> dims;
    std::vector<std::string> backends;
    int threads = 0;
    int repeat = 20;
    int warmup = 3;
    bool ort = false;
    std::string node = "node";
};

void usage(FILE *out) {
    std::fprintf(out, "usage: tinyfin-bench --onnx MODEL [--dims NAME=N,...] [--backend LIST] [--threads N]\n"
                      "                     [--repeat N] [--warmup N] [--compare ort] [--node PATH]\n"
                      "  --dims      values of the model's open dimensions by symbol (others: 1)\n"
                      "  --backend   tinyfin backends to time (default: cpu)\n"
                      "  --threads   threads for tinyfin and ONNX Runtime (default: the usable cores)\n"
                      "  --compare ort  also ONNX Runtime's CPU provider: onnxruntime-node found through\n"
                      "              NODE_PATH (npm install --ignore-scripts onnxruntime-node)\n");
}

std::vector<std::string> split(const std::string &text, char sep) {
    std::vector<std::string> out;
    std::stringstream in(text);
    for (std::string item; std::getline(in, item, sep);)
        if (!item.empty()) out.push_back(item);
    return out;
}

bool parse(int argc, char **argv, OnnxOptions &o, int &status) {
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto value = [&]() -> const char * {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "tinyfin-bench: %s needs a value\n", arg.c_str());
                return nullptr;
            }
            return argv[++i];
        };
        const bool takes_value = arg == "--onnx" || arg == "--dims" || arg == "--backend" || arg == "--threads" ||
                                 arg == "--repeat" || arg == "--warmup" || arg == "--compare" || arg == "--node";
        if (arg == "--help" || arg == "-h") {
            usage(stdout);
            status = 0;
            return false;
        }
        if (!takes_value) {
            std::fprintf(stderr, "tinyfin-bench: --onnx does not take %s\n", arg.c_str());
            usage(stderr);
            status = 2;
            return false;
        }
        const char *v = value();
        if (v == nullptr) {
            status = 2;
            return false;
        }
        if (arg == "--onnx") {
            o.model = v;
        } else if (arg == "--dims") {
            for (const std::string &item : split(v, ',')) {
                const auto eq = item.find('=');
                if (eq == std::string::npos) {
                    std::fprintf(stderr, "tinyfin-bench: --dims wants NAME=N, got '%s'\n", item.c_str());
                    status = 2;
                    return false;
                }
                o.dims[item.substr(0, eq)] = std::atoll(item.c_str() + eq + 1);
            }
        } else if (arg == "--backend") {
            o.backends = split(v, ',');
        } else if (arg == "--compare") {
            if (std::string(v) != "ort") {
                std::fprintf(stderr, "tinyfin-bench: --onnx compares with 'ort' (ONNX Runtime) only\n");
                status = 2;
                return false;
            }
            o.ort = true;
        } else if (arg == "--node") {
            o.node = v;
        } else {
            const int n = std::atoi(v);
            if (n < (arg == "--warmup" ? 0 : 1)) {
                std::fprintf(stderr, "tinyfin-bench: %s wants a positive number\n", arg.c_str());
                status = 2;
                return false;
            }
            (arg == "--threads" ? o.threads : arg == "--repeat" ? o.repeat : o.warmup) = n;
        }
    }
    if (o.backends.empty()) o.backends = {"cpu"};
    return true;
}

std::string exe_dir() {
    char buf[4096];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return ".";
    std::string path(buf, static_cast<size_t>(n));
    return path.substr(0, path.find_last_of('/'));
}

std::string helper(const char *name) {
    const std::string beside = exe_dir() + "/" + name;
    if (access(beside.c_str(), R_OK) == 0) return beside;
    return exe_dir() + "/" TF_BENCH_LIBEXEC "/" + name;
}

std::string load_average() {
    std::ifstream in("/proc/loadavg");
    std::string one, five;
    in >> one >> five;
    return one.empty() ? "unknown" : one + " (1 min), " + five + " (5 min)";
}

// Feeds for the declared inputs: open dimensions from --dims.
std::vector<std::pair<std::string, tox::HostTensor>> make_feeds(const std::vector<tox::TensorInfo> &inputs,
                                                                const std::map<std::string, int64_t> &dims) {
    std::vector<std::pair<std::string, tox::HostTensor>> feeds;
    uint64_t state = 0x243F6A8885A308D3ull;
    auto next = [&] {
        state += 0x9E3779B97F4A7C15ull;
        uint64_t z = state;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    };
    for (const auto &info : inputs) {
        tox::HostTensor t;
        t.type = info.type;
        for (std::size_t d = 0; d < info.shape.size(); ++d) {
            if (info.shape[d] >= 0) {
                t.shape.push_back(info.shape[d]);
                continue;
            }
            auto it = dims.find(info.dim_names[d]);
            t.shape.push_back(it != dims.end() ? it->second : 1);
        }
        const auto n = static_cast<std::size_t>(t.numel());
        t.data.resize(n * tox::element_size(t.type));
        for (std::size_t i = 0; i < n; ++i) {
            switch (t.type) {
            case tox::ElementType::float32: {
                // Box-Muller from two uniforms.
                const double u1 = ((next() >> 11) + 1) * 0x1.0p-53, u2 = (next() >> 11) * 0x1.0p-53;
                const float v = static_cast<float>(std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2));
                std::memcpy(t.data.data() + i * 4, &v, 4);
                break;
            }
            case tox::ElementType::int64: {
                const int64_t v = static_cast<int64_t>(next() & 1);
                std::memcpy(t.data.data() + i * 8, &v, 8);
                break;
            }
            case tox::ElementType::int32: {
                const int32_t v = static_cast<int32_t>(next() & 1);
                std::memcpy(t.data.data() + i * 4, &v, 4);
                break;
            }
            case tox::ElementType::boolean: t.data[i] = std::byte(next() & 1); break;
            default:
                throw std::runtime_error("input '" + info.name + "' is " + tox::element_type_name(t.type) +
                                         "; the benchmark feeds float32, int64, int32 and bool inputs");
            }
        }
        feeds.emplace_back(info.name, std::move(t));
    }
    return feeds;
}

struct Stats {
    double median = 0, p25 = 0, p75 = 0;
};

Stats stats_of(std::vector<double> ms) {
    Stats s;
    if (ms.empty()) return s;
    std::sort(ms.begin(), ms.end());
    auto at = [&](double q) { return ms[static_cast<std::size_t>(q * static_cast<double>(ms.size() - 1) + 0.5)]; };
    s.median = at(0.5);
    s.p25 = at(0.25);
    s.p75 = at(0.75);
    return s;
}

double process_cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

// Wall and process CPU milliseconds of each timed run.
void time_tinyfin(tox::InferenceSession &session, const std::vector<std::pair<std::string, tox::HostTensor>> &feeds,
                  int warmup, int repeat, std::vector<tox::HostTensor> *outputs, std::vector<double> &ms,
                  std::vector<double> &cpu_ms) {
    for (int i = 0; i < warmup; ++i) *outputs = session.run({}, feeds);
    for (int i = 0; i < repeat; ++i) {
        const double cpu = process_cpu_ms();
        const auto start = Clock::now();
        *outputs = session.run({}, feeds);
        ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
        cpu_ms.push_back(process_cpu_ms() - cpu);
    }
}

struct OrtResult {
    std::string version, error;
    std::vector<double> ms, cpu_ms;
    std::vector<std::pair<std::string, std::vector<float>>> outputs;  // float32 outputs only
};

OrtResult run_ort(const OnnxOptions &o, int threads,
                  const std::vector<std::pair<std::string, tox::HostTensor>> &feeds) {
    OrtResult r;
    char dir_template[] = "/tmp/tinyfin-bench-onnx-XXXXXX";
    if (mkdtemp(dir_template) == nullptr) {
        r.error = "cannot make a temporary folder";
        return r;
    }
    const std::string dir = dir_template;
    std::ofstream manifest(dir + "/manifest");
    manifest << "model " << o.model << "\nthreads " << threads << "\nwarmup " << o.warmup << "\nrepeat " << o.repeat
             << "\nout " << dir << "\n";
    std::vector<std::string> files;
    for (std::size_t i = 0; i < feeds.size(); ++i) {
        const auto &[name, t] = feeds[i];
        const std::string file = dir + "/feed" + std::to_string(i) + ".bin";
        std::ofstream(file, std::ios::binary)
            .write(reinterpret_cast<const char *>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
        files.push_back(file);
        manifest << "feed " << name << " " << tox::element_type_name(t.type) << " " << file;
        for (int64_t d : t.shape) manifest << " " << d;
        manifest << "\n";
    }
    manifest.close();
    const std::string command = o.node + " " + helper("bench_onnx_ort.js") + " " + dir + "/manifest 2>&1";
    std::fflush(nullptr);
    FILE *pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) {
        r.error = "cannot run " + o.node;
        return r;
    }
    char buf[8192];
    std::vector<std::string> created;
    while (std::fgets(buf, sizeof buf, pipe)) {
        std::istringstream line(buf);
        std::string key;
        line >> key;
        if (key == "version") {
            line >> r.version;
        } else if (key == "time_ms") {
            double wall = 0, cpu = 0;
            line >> wall >> cpu;
            r.ms.push_back(wall);
            r.cpu_ms.push_back(cpu);
        } else if (key == "output") {
            std::string name, type, file;
            line >> name >> type >> file;
            created.push_back(file);
            if (type != "float32") continue;
            std::ifstream in(file, std::ios::binary | std::ios::ate);
            const auto bytes = static_cast<std::size_t>(in.tellg());
            std::vector<float> values(bytes / 4);
            in.seekg(0);
            in.read(reinterpret_cast<char *>(values.data()), static_cast<std::streamsize>(values.size() * 4));
            r.outputs.emplace_back(name, std::move(values));
        } else if (key == "error") {
            std::string rest;
            std::getline(line, rest);
            r.error = rest;
        } else if (r.error.empty() && !key.empty()) {
            r.error = buf;  // node's own complaint (no such file...)
        }
    }
    const int status = pclose(pipe);
    if (r.error.empty() && status != 0)
        r.error = "the ONNX Runtime helper failed (status " + std::to_string(status) + ")";
    for (const auto &f : files) std::remove(f.c_str());
    for (const auto &f : created) std::remove(f.c_str());
    std::remove((dir + "/manifest").c_str());
    rmdir(dir.c_str());
    return r;
}

// max |a - b| / max |b| over the float32 outputs both have.
double relative_difference(const std::vector<tox::HostTensor> &ours, const std::vector<tox::TensorInfo> &infos,
                           const OrtResult &ort) {
    double worst = 0;
    for (const auto &[name, theirs] : ort.outputs) {
        for (std::size_t i = 0; i < infos.size() && i < ours.size(); ++i) {
            if (infos[i].name != name || ours[i].type != tox::ElementType::float32) continue;
            const auto n = std::min<std::size_t>(theirs.size(), ours[i].data.size() / 4);
            double diff = 0, scale = 0;
            for (std::size_t k = 0; k < n; ++k) {
                float v;
                std::memcpy(&v, ours[i].data.data() + k * 4, 4);
                diff = std::max(diff, std::fabs(static_cast<double>(v) - theirs[k]));
                scale = std::max(scale, std::fabs(static_cast<double>(theirs[k])));
            }
            worst = std::max(worst, scale > 0 ? diff / scale : diff);
        }
    }
    return worst;
}

std::string shape_text(const tinyfin::Shape &shape) {
    std::string out = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i) out += ',';
        out += std::to_string(shape[i]);
    }
    out += ']';
    return out;
}

}  // namespace

int run_onnx(int argc, char **argv) {
    OnnxOptions o;
    int status = 0;
    if (!parse(argc, argv, o, status)) return status;
    if (o.model.empty()) {
        usage(stderr);
        return 2;
    }
    // One thread count for both engines, set before tinyfin loads its plugins.
    if (o.threads > 0) setenv("TINYFIN_THREADS", std::to_string(o.threads).c_str(), 1);
    const char *env_threads = std::getenv("TINYFIN_THREADS");
    const int threads = o.threads > 0                               ? o.threads
                        : env_threads && std::atoi(env_threads) > 0 ? std::atoi(env_threads)
                                                                    : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    try {
        std::printf("tinyfin-bench --onnx %s: %d threads, load average %s\n", o.model.c_str(), threads,
                    load_average().c_str());
        bool first = true;
        for (const std::string &backend : o.backends) {
            tox::InferenceSession session(o.model, {.backend = backend});
            const auto feeds = make_feeds(session.get_inputs(), o.dims);
            if (first) {
                std::printf("feeds:");
                for (const auto &[name, t] : feeds)
                    std::printf(" %s %s %s", name.c_str(), tox::element_type_name(t.type).c_str(),
                                shape_text(t.shape).c_str());
                std::printf("\n");
                first = false;
            }
            const int64_t batch = feeds.empty() || feeds[0].second.shape.empty() ? 1 : feeds[0].second.shape[0];
            std::vector<tox::HostTensor> outputs;
            const int half = o.repeat / 2;
            std::vector<double> ms, cpu_ms;
            time_tinyfin(session, feeds, o.warmup, half, &outputs, ms, cpu_ms);
            OrtResult ort;
            if (o.ort) ort = run_ort(o, threads, feeds);
            time_tinyfin(session, feeds, 0, o.repeat - half, &outputs, ms, cpu_ms);
            const Stats ours = stats_of(ms), ours_cpu = stats_of(cpu_ms);
            std::printf("%-22s latency median %9.3f ms (quartiles %.3f..%.3f), throughput %9.1f /s, cpu %9.3f ms/run, "
                        "fallbacks %llu\n",
                        ("tinyfin " + backend).c_str(), ours.median, ours.p25, ours.p75, 1000.0 * batch / ours.median,
                        ours_cpu.median, static_cast<unsigned long long>(session.last_run().fallbacks));
            if (!o.ort) continue;
            if (!ort.error.empty() || ort.ms.empty()) {
                std::printf("onnxruntime: not run: %s\n", ort.error.empty() ? "no timings" : ort.error.c_str());
                continue;
            }
            const Stats theirs = stats_of(ort.ms), theirs_cpu = stats_of(ort.cpu_ms);
            std::printf("%-22s latency median %9.3f ms (quartiles %.3f..%.3f), throughput %9.1f /s, cpu %9.3f ms/run\n",
                        ("onnxruntime " + ort.version + " cpu").c_str(), theirs.median, theirs.p25, theirs.p75,
                        1000.0 * batch / theirs.median, theirs_cpu.median);
            std::printf(
                "ratio onnxruntime / tinyfin %s: latency %.2f, cpu time %.2f (above 1: tinyfin faster); outputs "
                "differ by %.2g of their largest magnitude\n",
                backend.c_str(), theirs.median / ours.median, theirs_cpu.median / ours_cpu.median,
                relative_difference(outputs, session.get_outputs(), ort));
        }
        std::printf("load average after: %s\n", load_average().c_str());
    } catch (const std::exception &e) {
        std::fprintf(stderr, "tinyfin-bench: %s\n", e.what());
        return 1;
    }
    return 0;
}

}  // namespace tfbench
