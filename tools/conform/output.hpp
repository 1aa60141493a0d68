// Options, per-case results and how they are shown: console lines and table, JSON.
#pragma once

#include <string>
#include <vector>

#include "cases.hpp"
#include "runner.hpp"

namespace conform {

struct Options {
    std::string mode = "test";
    std::vector<std::string> backends, ops, dtypes, case_filters;
    std::string plugin, json, update, check, known_failures;
    long long max_elements = -1;
    long long software_max_elements = -1;
    int repeat = 0;
    bool list = false, verbose = false, markdown = false;
};

struct Backend {
    Target target;
    std::string version, path, device;
    bool software = false;  // a software-emulated GPU (lavapipe, llvmpipe)
};

// known: failed, and listed in --known-failures (a tracked bug, not a regression).
enum class Status { pass, fail, unsupported, skipped, known };
const char *status_name(Status s);

struct Result {
    std::string backend, op, case_id;
    int32_t dtype = 0;
    Status status = Status::skipped;
    double nmse = 0, tolerance = 0;
    double seconds = 0;  // the op call (perf: per run)
    double wall = 0;  // the whole case, transfers included
    std::string detail;
};
using Results = std::vector<Result>;

Result start_result(const Backend &b, const Case &c);
// Prints failures at once (everything with --verbose).
void report_result(const Options &o, const Result &r);
// Summary table, JSON; returns the exit status (1 when anything failed).
int finish(const Options &o, const std::vector<Backend> &backends, const Results &results, double seconds);

std::string json_string(const std::string &text);

// --known-failures FILE: lines "<backend> <text>  # why"; a failing case of that backend whose id
// contains the text becomes `known`. An entry whose cases all pass is stale and fails the run.
struct KnownFailure {
    std::string backend, text, line;
    int failed = 0, passed = 0;
};
std::vector<KnownFailure> read_known_failures(const std::string &path);
// Applies the list to r (fail -> known) and counts what each entry matched.
void apply_known_failures(std::vector<KnownFailure> &known, Result &r);

}  // namespace conform
