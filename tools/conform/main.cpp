// tinyfin-conform: every op of ops.def on every loaded backend, against a float64 reference.
//
//   tinyfin-conform [test|grad|perf|support] [options]
//
// test     runs each case on each backend through plugin.h (cpu included) and compares the outputs
//          with a float64 evaluation of the op from its definition (reference.cpp; every element
//          within its bound, check.hpp; NaN/Inf must match), checks that nothing outside the
//          outputs' elements was written (sentinel bytes) and that the inputs are unchanged;
//          a case outside the op's dtypes column of ops.def must be refused by every backend
// grad     forward and backward through the C++ API (autograd) on each backend, in f32, f16 and
//          bf16, against the float64 reference and its central differences
// perf     time per case and backend
// support  which cases each backend claims (supports()), per op and dtype; --markdown,
//          --update FILE and --check FILE maintain docs/ops.md
//
// Exit status: 0 all good, 1 a case failed (or docs/ops.md is stale), 2 bad usage or setup.
// docs/writing-a-plugin.md explains the output; docs/ops.md shows the support matrix.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <climits>
#include <unistd.h>

#include "cases.hpp"
#include "check.hpp"
#include "grad.hpp"
#include "output.hpp"
#include "quant_check.hpp"
#include "reference.hpp"
#include "runner.hpp"
#include "support.hpp"
#include "tinyfin/plugin.h"
#include "tinyfin/tinyfin.hpp"

namespace conform {
namespace {

const char *k_usage =
    "usage: tinyfin-conform [test|grad|perf|support] [options]\n"
    "  --backend A,B          backends to check (default: every loaded one)\n"
    "  --op A,B               ops to check (names from ops.def)\n"
    "  --dtype A,B            case dtypes (f32,f16,bf16,i32,i64,bool)\n"
    "  --case TEXT            cases whose id contains TEXT (repeatable: any of them)\n"
    "  --plugin PATH          load this plugin first and check it (default backend: its name)\n"
    "  --max-elements N       skip cases with more than N elements in all\n"
    "  --software-max-elements N   the same, only on software-emulated GPUs (lavapipe, llvmpipe)\n"
    "  --json FILE            write the results as JSON ('-' for stdout)\n"
    "  --known-failures FILE  failing cases listed there ('<backend> <case text>  # why') do not fail the run\n"
    "  --list                 print the selected cases and exit\n"
    "  --verbose              print every case, not only failures\n"
    "  --repeat N             perf: runs per case (default: about 20 ms worth, at most 100)\n"
    "  --markdown             support: print the docs/ops.md table\n"
    "  --update FILE          support: rewrite the table in FILE for the backends present\n"
    "  --check FILE           support: exit 1 when FILE's table differs for the backends present\n";

std::vector<std::string> split_list(const std::string &text) {
    std::vector<std::string> out;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ','))
        if (!item.empty()) out.push_back(item);
    return out;
}

struct Usage : std::runtime_error {
    using std::runtime_error::runtime_error;
};

Options parse(int argc, char **argv) {
    Options o;
    int i = 1;
    if (argc > 1 && argv[1][0] != '-') o.mode = argv[i++];
    if (o.mode != "test" && o.mode != "grad" && o.mode != "perf" && o.mode != "support")
        throw Usage("unknown mode '" + o.mode + "' (test, grad, perf or support)");
    for (; i < argc; ++i) {
        std::string arg = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) throw Usage(arg + " needs a value");
            return argv[++i];
        };
        auto number = [&]() -> long long {
            std::string v = value();
            char *end = nullptr;
            long long n = std::strtoll(v.c_str(), &end, 10);
            if (v.empty() || *end || n < 0) throw Usage(arg + ": '" + v + "' is not a non-negative integer");
            return n;
        };
        if (arg == "--backend")
            o.backends = split_list(value());
        else if (arg == "--op")
            o.ops = split_list(value());
        else if (arg == "--dtype")
            o.dtypes = split_list(value());
        else if (arg == "--case")
            o.case_filters.push_back(value());
        else if (arg == "--plugin")
            o.plugin = value();
        else if (arg == "--max-elements")
            o.max_elements = number();
        else if (arg == "--software-max-elements")
            o.software_max_elements = number();
        else if (arg == "--json")
            o.json = value();
        else if (arg == "--known-failures")
            o.known_failures = value();
        else if (arg == "--list")
            o.list = true;
        else if (arg == "--verbose" || arg == "-v")
            o.verbose = true;
        else if (arg == "--repeat")
            o.repeat = static_cast<int>(number());
        else if (arg == "--markdown")
            o.markdown = true;
        else if (arg == "--update")
            o.update = value();
        else if (arg == "--check")
            o.check = value();
        else if (arg == "--help" || arg == "-h")
            throw Usage("");
        else
            throw Usage("unknown option '" + arg + "'");
    }
    for (const std::string &op : o.ops) {
        bool known = false;
        for (const OpRow &row : op_rows()) known |= op == row.name;
        if (!known) throw Usage("--op: no op named '" + op + "' in ops.def");
    }
    for (const std::string &d : o.dtypes) {
        bool known = false;
        for (int32_t dt : all_dtypes()) known |= d == dtype_name(dt);
        if (!known) throw Usage("--dtype: unknown dtype '" + d + "'");
    }
    return o;
}

bool selected(const Options &o, const Case &c) {
    if (!o.ops.empty() && std::find(o.ops.begin(), o.ops.end(), c.op_name) == o.ops.end()) return false;
    if (!o.dtypes.empty() && std::find(o.dtypes.begin(), o.dtypes.end(), dtype_name(c.dtype())) == o.dtypes.end())
        return false;
    if (!o.case_filters.empty()) {
        const std::string id = c.id();
        bool any = false;
        for (const std::string &f : o.case_filters) any |= id.find(f) != std::string::npos;
        if (!any) return false;
    }
    return o.max_elements < 0 || c.elements() <= o.max_elements;
}

// --plugin: put the file first on TINYFIN_PLUGIN_PATH before the registry is built.
void add_plugin_path(const std::string &path) {
    char resolved[PATH_MAX];
    if (!realpath(path.c_str(), resolved)) throw Usage("--plugin: cannot find '" + path + "'");
    std::string value = resolved;
    if (const char *old = std::getenv("TINYFIN_PLUGIN_PATH"); old && *old) value += std::string(":") + old;
    setenv("TINYFIN_PLUGIN_PATH", value.c_str(), 1);
}

// The loaded backends to check, cpu (the reference) always resolved as well.
std::vector<Backend> resolve(Options &o, Backend &cpu) {
    tinyfin::Report report = tinyfin::report();
    if (!o.plugin.empty()) {
        char resolved[PATH_MAX];
        if (!realpath(o.plugin.c_str(), resolved)) throw Usage("--plugin: cannot find '" + o.plugin + "'");
        const tinyfin::PluginReport *found = nullptr;
        for (const auto &p : report.plugins)
            if (p.resolved_path == resolved && !found) found = &p;
        if (!found) throw std::runtime_error("--plugin " + o.plugin + ": not among the candidates the core saw");
        if (found->outcome != "loaded")
            throw std::runtime_error("--plugin " + o.plugin + ": " + found->outcome + ": " + found->message);
        if (o.backends.empty()) o.backends = {found->name};
    }
    std::vector<Backend> out;
    auto make = [&](const tinyfin::PluginReport &p) {
        Backend b;
        b.target.name = p.name;
        b.target.table = tinyfin::plugin_table(p.name);
        b.version = p.version;
        b.path = p.path;
        if (!p.devices.empty()) {
            b.target.host_addressable = p.devices[0].host_addressable;
            b.device = p.devices[0].name;
            b.software = p.devices[0].kind == "software-gpu";
        }
        return b;
    };
    std::vector<std::string> usable;
    for (const auto &p : report.plugins)
        if (p.outcome == "loaded" && p.initialised && tinyfin::plugin_table(p.name)) {
            usable.push_back(p.name);
            if (p.name == "cpu") cpu = make(p);
        }
    if (!cpu.target.table)
        throw std::runtime_error(
            "the cpu plugin (which decides which cases are valid) is not usable: see tinyfin-info");
    for (const std::string &name : o.backends)
        if (std::find(usable.begin(), usable.end(), name) == usable.end()) {
            std::string why = "not loaded";
            for (const auto &p : report.plugins)
                if (p.name == name) why = p.outcome + (p.message.empty() ? "" : ": " + p.message);
            throw std::runtime_error("backend '" + name + "' is not usable (" + why + "); see tinyfin-info");
        }
    // cpu first, then the order the core loaded them in.
    std::vector<std::string> order;
    if (std::find(usable.begin(), usable.end(), "cpu") != usable.end()) order.push_back("cpu");
    for (const std::string &name : usable)
        if (name != "cpu") order.push_back(name);
    for (const std::string &name : order) {
        if (!o.backends.empty() && std::find(o.backends.begin(), o.backends.end(), name) == o.backends.end()) continue;
        for (const auto &p : report.plugins)
            if (p.name == name && p.outcome == "loaded") {
                out.push_back(make(p));
                break;
            }
    }
    return out;
}

// The float64 reference of a case from its input images (and the in-out outputs' first values).
std::optional<std::vector<RefOutput>> reference_of(const Case &c, const Images &images) {
    // The quantized ops are compared with the cpu plugin (its codecs are checked bit for bit
    // against the formats by ops-quant); quantize's output is checked from the formats'
    // definitions as well (quant_check.hpp).
    for (const std::vector<TensorSpec> *list : {&c.inputs, &c.outputs})
        for (const TensorSpec &t : *list)
            if (is_quantized(t.dtype)) return std::nullopt;
    std::vector<Host> inputs, before;
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
        Host h;
        h.shape = c.inputs[i].shape;
        h.v = tensor_values(c.inputs[i], images.inputs[i]);
        inputs.push_back(std::move(h));
    }
    for (std::size_t i = 0; i < c.outputs.size(); ++i) {
        Host h(c.outputs[i].shape);
        if (c.outputs[i].in_out) h.v = tensor_values(c.outputs[i], images.outputs[i]);
        before.push_back(std::move(h));
    }
    return reference(c, inputs, before);
}

bool capped(const Options &o, const Backend &b, const Case &c) {
    return b.software && o.software_max_elements >= 0 && c.elements() > o.software_max_elements;
}

// ---- test ------------------------------------------------------------------------------------

int run_test(const Options &o, const std::vector<Case> &cases, const Backend &cpu, const std::vector<Backend> &backends,
             Results &results) {
    std::vector<KnownFailure> known =
        o.known_failures.empty() ? std::vector<KnownFailure>{} : read_known_failures(o.known_failures);
    int refused_outside = 0, unclaimed = 0, unreferenced = 0;
    for (const Case &c : cases) {
        if (!c.in_column()) {
            // Not a case of this op (ops.def's dtypes column excludes an operand's dtype): the core
            // never sends it, and a plugin that claims it states more than the op is.
            for (const Backend &b : backends) {
                if (!claims(b.target, c)) continue;
                Result r = start_result(b, c);
                r.status = Status::fail;
                r.detail = std::string("supports() claims a dtype outside ops.def's dtypes column \"") +
                           op_row(c.op).dtypes + "\" (" + dtypes_text(op_row(c.op)) + ")";
                apply_known_failures(known, r);
                report_result(o, r);
                results.push_back(std::move(r));
            }
            ++refused_outside;
            continue;
        }
        if (!claims(cpu.target, c)) {
            // A case the op takes that the cpu plugin leaves to the core's own path (the optimizer
            // ops in f16/bf16 or on strided tensors) or refuses as invalid: not run.
            ++unclaimed;
            continue;
        }
        const Images images = make_images(c);
        const std::optional<std::vector<RefOutput>> exact = reference_of(c, images);
        if (!exact) ++unreferenced;
        const RunResult ref = run_case(cpu.target, c, images);
        for (const Backend &b : backends) {
            Result r = start_result(b, c);
            const auto t0 = std::chrono::steady_clock::now();
            if (capped(o, b, c)) {
                r.status = Status::skipped;
                r.detail = "over --software-max-elements";
            } else if (!claims(b.target, c)) {
                r.status = Status::unsupported;
            } else if (!ref.ok) {
                // The reference refused the case (an error the op is meant to raise) or broke a
                // rule itself: only the cpu backend is judged on it.
                const bool cpu_rule =
                    ref.error.find("written") != std::string::npos || ref.error.find("outside") != std::string::npos;
                r.status = b.target.name == "cpu" && cpu_rule ? Status::fail : Status::skipped;
                r.detail = "reference: " + ref.error;
            } else {
                const RunResult got = b.target.name == "cpu" ? ref : run_case(b.target, c, images);
                r.seconds = got.seconds;
                if (!got.ok) {
                    r.status = Status::fail;
                    r.detail = got.error;
                } else {
                    r.status = Status::pass;
                    for (std::size_t i = 0; i < c.outputs.size(); ++i) {
                        // The float64 reference where the op has one, else the cpu plugin's result;
                        // a quantized output (quantize) against the format's definition and, off
                        // the cpu plugin, against the cpu plugin's blocks bit for bit.
                        Verdict v;
                        if (is_quantized(c.outputs[i].dtype)) {
                            v = check_quantized(c.outputs[i], got.after.outputs[i],
                                                tensor_values(c.inputs[0], images.inputs[0]));
                            if (v.pass && b.target.name != "cpu") {
                                Verdict bits = compare_blocks(c.outputs[i], got.after.outputs[i], ref.after.outputs[i]);
                                bits.nmse = v.nmse, bits.tolerance = v.tolerance;
                                v = bits;
                            }
                        } else {
                            const std::vector<double> values = output_values(c, i, got.after.outputs[i]);
                            v = exact ? compare_reference(c.outputs[i].dtype, values, (*exact)[i])
                                      : compare(c, i, values, output_values(c, i, ref.after.outputs[i]));
                        }
                        r.nmse = std::max(r.nmse, v.nmse);
                        r.tolerance = v.tolerance;
                        if (!v.pass) {
                            r.status = Status::fail;
                            r.detail = (c.outputs.size() > 1 ? "output " + std::to_string(i) + ": " : "") + v.detail;
                            break;
                        }
                    }
                }
            }
            r.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            apply_known_failures(known, r);
            report_result(o, r);
            results.push_back(std::move(r));
        }
    }
    if (o.verbose)
        std::printf("%d case(s) outside ops.def's dtypes column (refused by every backend unless a FAIL above says "
                    "otherwise), %d the cpu plugin does not claim (not run), %d without a float64 reference "
                    "(compared with the cpu plugin)\n",
                    refused_outside, unclaimed, unreferenced);
    int stale = 0;
    for (const KnownFailure &k : known)
        if (k.failed == 0 && k.passed > 0) {
            std::printf("FAIL  known failure now passes (%d case(s)); remove it from %s: %s\n", k.passed,
                        o.known_failures.c_str(), k.line.c_str());
            ++stale;
        }
    return stale;
}

// ---- perf ------------------------------------------------------------------------------------

int run_perf(const Options &o, const std::vector<Case> &cases, const Backend &cpu, const std::vector<Backend> &backends,
             Results &results) {
    for (const Case &c : cases) {
        if (!c.in_column() || !claims(cpu.target, c)) continue;
        const Images images = make_images(c);
        for (const Backend &b : backends) {
            Result r = start_result(b, c);
            if (capped(o, b, c)) {
                r.status = Status::skipped;
            } else if (!claims(b.target, c)) {
                r.status = Status::unsupported;
            } else {
                RunResult warm = run_case(b.target, c, images);  // pipelines, caches, first-touch
                int repeat = o.repeat;
                if (repeat <= 0)
                    repeat = warm.seconds > 0 ? static_cast<int>(std::clamp(0.02 / warm.seconds, 1.0, 100.0)) : 100;
                RunResult timed = warm.ok ? run_case(b.target, c, images, repeat) : warm;
                r.status = timed.ok ? Status::pass : Status::skipped;
                r.detail = timed.error;
                r.seconds = timed.seconds;
            }
            report_result(o, r);
            results.push_back(std::move(r));
        }
    }
    return 0;
}

int main_checked(int argc, char **argv) {
    Options o = parse(argc, argv);
    if (!o.plugin.empty()) add_plugin_path(o.plugin);
    std::vector<Case> cases;
    for (Case &c : all_cases())
        if (selected(o, c)) cases.push_back(std::move(c));
    if (o.list) {
        for (const Case &c : cases) std::printf("%s\n", c.id().c_str());
        std::printf("%zu cases\n", cases.size());
        return 0;
    }
    Backend cpu;
    std::vector<Backend> backends = resolve(o, cpu);
    if (backends.empty()) throw std::runtime_error("no backend selected");
    if (o.mode == "support") return run_support(o, cases, cpu, backends);
    Results results;
    const auto t0 = std::chrono::steady_clock::now();
    int extra_failures = 0;
    if (o.mode == "grad")
        extra_failures = run_grad(o, backends, results);
    else if (o.mode == "perf")
        run_perf(o, cases, cpu, backends, results);
    else
        extra_failures = run_test(o, cases, cpu, backends, results);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const int status = finish(o, backends, results, seconds);
    return status ? status : (extra_failures ? 1 : 0);
}

}  // namespace
}  // namespace conform

int main(int argc, char **argv) {
    try {
        return conform::main_checked(argc, argv);
    } catch (const conform::Usage &e) {
        if (*e.what()) std::fprintf(stderr, "tinyfin-conform: %s\n", e.what());
        std::fputs(conform::k_usage, stderr);
        return 2;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "tinyfin-conform: %s\n", e.what());
        return 2;
    }
}
