#include "output.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

namespace conform {

const char *status_name(Status s) {
    switch (s) {
    case Status::pass: return "pass";
    case Status::fail: return "fail";
    case Status::unsupported: return "unsupported";
    case Status::skipped: return "skipped";
    case Status::known: return "known-failure";
    }
    return "?";
}

Result start_result(const Backend &b, const Case &c) {
    Result r;
    r.backend = b.target.name;
    r.op = c.op_name;
    r.case_id = c.id();
    r.dtype = c.dtype();
    return r;
}

void report_result(const Options &o, const Result &r) {
    if (r.status == Status::known) {
        std::printf("KNOWN %-8s %s: %s\n", r.backend.c_str(), r.case_id.c_str(), r.detail.c_str());
        return;
    }
    if (r.status == Status::fail) {
        std::printf("FAIL  %-8s %s: %s\n", r.backend.c_str(), r.case_id.c_str(), r.detail.c_str());
        std::fflush(stdout);
        return;
    }
    if (!o.verbose) return;
    if (o.mode == "perf" && r.status == Status::pass)
        std::printf("%-5s %-8s %s: %.2f us\n", "time", r.backend.c_str(), r.case_id.c_str(), r.seconds * 1e6);
    else
        std::printf("%-5s %-8s %s%s%s\n", r.status == Status::pass ? "ok" : status_name(r.status), r.backend.c_str(),
                    r.case_id.c_str(), r.detail.empty() ? "" : ": ", r.detail.c_str());
}

std::string json_string(const std::string &text) {
    std::string out = "\"";
    for (unsigned char c : text) {
        if (c == '"' || c == '\\')
            out += '\\', out += static_cast<char>(c);
        else if (c == '\n')
            out += "\\n";
        else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else
            out += static_cast<char>(c);
    }
    return out + "\"";
}

namespace {

std::string number(double v) {
    if (!std::isfinite(v)) return "null";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return buf;
}

struct Tally {
    int pass = 0, fail = 0, unsupported = 0, skipped = 0, known = 0;
    double seconds = 0, wall = 0;
    void add(const Result &r) {
        (r.status == Status::pass          ? pass
         : r.status == Status::fail        ? fail
         : r.status == Status::unsupported ? unsupported
         : r.status == Status::known       ? known
                                           : skipped)++;
        seconds += r.seconds;
        wall += r.wall;
    }
};

void write_json(const Options &o, const std::vector<Backend> &backends, const Results &results, double seconds) {
    std::ostringstream j;
    j << "{\n  \"mode\": " << json_string(o.mode) << ",\n  \"seconds\": " << number(seconds) << ",\n  \"backends\": [";
    for (std::size_t i = 0; i < backends.size(); ++i)
        j << (i ? ", " : "") << "{\"name\": " << json_string(backends[i].target.name)
          << ", \"version\": " << json_string(backends[i].version)
          << ", \"device\": " << json_string(backends[i].device) << ", \"path\": " << json_string(backends[i].path)
          << "}";
    j << "],\n  \"results\": [\n";
    for (std::size_t i = 0; i < results.size(); ++i) {
        const Result &r = results[i];
        j << "    {\"backend\": " << json_string(r.backend) << ", \"op\": " << json_string(r.op)
          << ", \"case\": " << json_string(r.case_id) << ", \"dtype\": " << json_string(dtype_name(r.dtype))
          << ", \"status\": " << json_string(status_name(r.status));
        if (r.status == Status::pass || r.status == Status::fail || r.status == Status::known) {
            if (o.mode == "test") j << ", \"nmse\": " << number(r.nmse) << ", \"tolerance\": " << number(r.tolerance);
            j << ", \"seconds\": " << number(r.seconds);
        }
        if (!r.detail.empty()) j << ", \"detail\": " << json_string(r.detail);
        j << "}" << (i + 1 < results.size() ? "," : "") << "\n";
    }
    j << "  ],\n  \"summary\": {";
    std::map<std::string, Tally> per_backend;
    for (const Result &r : results) per_backend[r.backend].add(r);
    bool first = true;
    for (const auto &[name, t] : per_backend) {
        j << (first ? "" : ", ") << json_string(name) << ": {\"pass\": " << t.pass << ", \"fail\": " << t.fail
          << ", \"unsupported\": " << t.unsupported << ", \"skipped\": " << t.skipped
          << ", \"known_failures\": " << t.known << "}";
        first = false;
    }
    j << "}\n}\n";
    if (o.json == "-") {
        std::fputs(j.str().c_str(), stdout);
        return;
    }
    std::ofstream file(o.json);
    file << j.str();
    if (!file) throw std::runtime_error("cannot write " + o.json);
}

}  // namespace

std::vector<KnownFailure> read_known_failures(const std::string &path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("--known-failures: cannot read " + path);
    std::vector<KnownFailure> out;
    std::string line;
    while (std::getline(in, line)) {
        std::string body = line.substr(0, line.find('#'));
        std::size_t a = body.find_first_not_of(" \t"), b = body.find_last_not_of(" \t");
        if (a == std::string::npos) continue;
        body = body.substr(a, b - a + 1);
        std::size_t space = body.find_first_of(" \t");
        if (space == std::string::npos)
            throw std::runtime_error(path + ": '" + line + "' is not '<backend> <case text>'");
        KnownFailure k;
        k.backend = body.substr(0, space);
        k.text = body.substr(body.find_first_not_of(" \t", space));
        k.line = line;
        out.push_back(std::move(k));
    }
    return out;
}

void apply_known_failures(std::vector<KnownFailure> &known, Result &r) {
    for (KnownFailure &k : known) {
        if (k.backend != r.backend || r.case_id.find(k.text) == std::string::npos) continue;
        if (r.status == Status::fail) {
            r.status = Status::known;
            ++k.failed;
        } else if (r.status == Status::pass) {
            ++k.passed;
        }
    }
}

int finish(const Options &o, const std::vector<Backend> &backends, const Results &results, double seconds) {
    // One row per op, one column per backend: passed/claimed (and failures).
    std::map<std::string, std::map<std::string, Tally>> table;
    std::vector<std::string> op_order;
    for (const Result &r : results) {
        if (!table.count(r.op)) op_order.push_back(r.op);
        table[r.op][r.backend].add(r);
    }
    FILE *out = o.json == "-" ? stderr : stdout;
    std::fprintf(out, "\n%-20s", o.mode == "perf" ? "op (total us)" : "op (passed/claimed)");
    for (const Backend &b : backends) std::fprintf(out, " %16s", b.target.name.c_str());
    std::fprintf(out, "\n");
    for (const std::string &op : op_order) {
        std::fprintf(out, "%-20s", op.c_str());
        for (const Backend &b : backends) {
            const Tally &t = table[op][b.target.name];
            char cell[64];
            if (o.mode == "perf")
                std::snprintf(cell, sizeof cell, "%.1f", t.seconds * 1e6);
            else if (t.fail)
                std::snprintf(cell, sizeof cell, "%d/%d %dF", t.pass, t.pass + t.fail, t.fail);
            else if (t.pass + t.fail == 0)
                std::snprintf(cell, sizeof cell, "-");
            else
                std::snprintf(cell, sizeof cell, "%d/%d", t.pass, t.pass + t.fail);
            std::fprintf(out, " %16s", cell);
        }
        std::fprintf(out, "\n");
    }
    int failures = 0;
    std::fprintf(out, "\n");
    for (const Backend &b : backends) {
        Tally t;
        for (const Result &r : results)
            if (r.backend == b.target.name) t.add(r);
        failures += t.fail;
        std::fprintf(out,
                     "%s (%s): %d cases: %d passed, %d failed, %d known failures, %d unsupported, %d skipped; %.1f s\n",
                     b.target.name.c_str(), b.device.c_str(), t.pass + t.fail + t.unsupported + t.skipped + t.known,
                     t.pass, t.fail, t.known, t.unsupported, t.skipped, t.wall);
    }
    if (!o.plugin.empty() && o.mode != "support") {
        int passed = 0;
        for (const Result &r : results) passed += r.status == Status::pass;
        if (passed == 0) {
            std::fprintf(out, "--plugin %s: the plugin passed no case (does it claim any?)\n", o.plugin.c_str());
            ++failures;
        }
    }
    std::fprintf(out, "%s: %.1f s, %s\n", o.mode.c_str(), seconds, failures ? "FAILED" : "ok");
    if (!o.json.empty()) write_json(o, backends, results, seconds);
    return failures ? 1 : 0;
}

}  // namespace conform
