// tinyfin-info: what was searched, what loaded (and why anything did not),
// which backend is selected, and which ops each backend supports.
//
//   tinyfin-info [--json] [--isolate [--timeout SECONDS]]
//
// --isolate first loads, probes and initialises each candidate plugin alone in a child process
// (this program again, with --isolate-child FILE), so a plugin that crashes or hangs there is
// reported as "crashed" or "timed-out" and left unopened while the others are listed.
//
// The JSON schema is documented in docs/tinyfin-info.md. Exit status 0 when
// the cpu plugin is usable, 1 otherwise.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tinyfin/plugin.h"
#include "tinyfin/tinyfin.hpp"

namespace {

bool cpu_usable(const tinyfin::Report &r) {
    for (const auto &p : r.plugins)
        if (p.name == "cpu" && p.outcome == "loaded") return true;
    return false;
}

// The JSON lives in the core (report_json) so tinyfin.info() in Python reads the same document.
void print_json(const tinyfin::Report &r) { std::fputs(tinyfin::report_json(r).c_str(), stdout); }

// The text lives in the core (report_text) so `python -m tinyfin` prints the same report.
void print_human(const tinyfin::Report &r) { std::fputs(tinyfin::report_text(r).c_str(), stdout); }

// ---- --isolate ---------------------------------------------------------------

// The line a child prints once load, probe and init of its plugin returned.
constexpr const char *child_done = "tinyfin-isolate: done\n";

// --isolate-child FILE: load, probe and init FILE alone, then say so on stdout.
int isolate_child(const char *file) {
    tinyfin::configure_plugin_loading({file}, {});
    tinyfin::report();
    std::fputs(child_done, stdout);
    std::fflush(stdout);
    return 0;
}

std::string self_path() {
    char buffer[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
    if (n <= 0) return {};
    return std::string(buffer, static_cast<std::size_t>(n));
}

// Runs the child for one file; a verdict when it did not finish cleanly in time.
std::optional<tinyfin::PluginVerdict> probe_in_child(const std::string &self, const std::string &file,
                                                     double timeout_s) {
    using Clock = std::chrono::steady_clock;
    const char *where = "in an isolated child process while loading, probing or initialising";
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0)
        return tinyfin::PluginVerdict{file, "crashed", std::string("cannot create a pipe: ") + std::strerror(errno)};
    pid_t pid = fork();
    if (pid == 0) {
        // Own process group, so a timeout also kills anything the plugin started.
        setpgid(0, 0);
        dup2(out[1], STDOUT_FILENO);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, STDERR_FILENO);
        execl(self.c_str(), self.c_str(), "--isolate-child", file.c_str(), (char *)nullptr);
        _exit(127);
    }
    close(out[1]);
    if (pid < 0) {
        close(out[0]);
        return tinyfin::PluginVerdict{file, "crashed", std::string("cannot fork: ") + std::strerror(errno)};
    }
    setpgid(pid, pid);  // also here: whichever runs first

    auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
    auto left_ms = [&] {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        return static_cast<int>(std::max<long long>(0, left.count()));
    };
    std::string output;
    bool timed_out = false;
    for (;;) {
        pollfd p{out[0], POLLIN, 0};
        int ready = poll(&p, 1, left_ms());
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) {
            timed_out = ready == 0;
            break;
        }
        char buffer[512];
        ssize_t n = read(out[0], buffer, sizeof buffer);
        if (n <= 0) break;  // end of file: the child exited or closed stdout
        if (output.size() < 4096) output.append(buffer, static_cast<std::size_t>(n));
    }
    close(out[0]);
    int status = 0;
    while (!timed_out) {
        pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid) break;
        if (left_ms() == 0)
            timed_out = true;
        else
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (timed_out) {
        kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%g", timeout_s);
        return tinyfin::PluginVerdict{file, "timed-out",
                                      std::string("did not finish within ") + seconds + " s " + where +
                                          " (killed); not loaded"};
    }
    const bool reported = output.find(child_done) != std::string::npos;
    // A failure after the child's report (a thread the plugin left running, its shutdown, an
    // exit handler) would happen in this process too: the plugin is not loaded either way.
    const std::string when = reported ? std::string("in an isolated child process after it reported that "
                                                    "loading, probing and initialising had finished (at "
                                                    "shutdown or exit)")
                                      : std::string(where);
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        const char *name = strsignal(sig);
        return tinyfin::PluginVerdict{file, "crashed",
                                      "killed by signal " + std::to_string(sig) + " (" + (name ? name : "unknown") +
                                          ") " + when + "; not loaded"};
    }
    if (!reported || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        // A crash handler in the child (a sanitizer's, for one) turns a signal into an exit status.
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        return tinyfin::PluginVerdict{file, "crashed",
                                      "exited with status " + std::to_string(code) + " " + when + "; not loaded"};
    }
    return std::nullopt;
}

// Screens every candidate in a child; the parent then loads only the ones that finished.
void isolate_plugins(double timeout_s) {
    std::string self = self_path();
    if (self.empty()) throw std::runtime_error("--isolate: cannot find this program (/proc/self/exe)");
    std::vector<tinyfin::PluginVerdict> verdicts;
    for (const std::string &file : tinyfin::plugin_candidates())
        if (auto verdict = probe_in_child(self, file, timeout_s)) verdicts.push_back(*verdict);
    tinyfin::configure_plugin_loading({}, verdicts);
}

}  // namespace

int main(int argc, char **argv) {
    bool json = false;
    bool isolate = false;
    double timeout_s = 30;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (std::strcmp(argv[i], "--isolate") == 0) {
            isolate = true;
        } else if (std::strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
            char *end = nullptr;
            timeout_s = std::strtod(argv[++i], &end);
            if (!end || *end || !(timeout_s > 0) || timeout_s > 86400) {
                std::fprintf(stderr, "tinyfin-info: --timeout wants seconds in (0, 86400], got '%s'\n", argv[i]);
                return 2;
            }
        } else if (std::strcmp(argv[i], "--isolate-child") == 0 && i + 1 < argc) {
            try {
                return isolate_child(argv[i + 1]);
            } catch (const std::exception &e) {
                std::fprintf(stderr, "tinyfin-info: %s\n", e.what());
                return 1;
            }
        } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
            std::printf("usage: tinyfin-info [--json] [--isolate [--timeout SECONDS]]\n"
                        "Lists the plugin search path, every candidate plugin and what happened to\n"
                        "it, the devices and features of loaded backends, the backend that\n"
                        "TINYFIN_BACKEND selects, and the op support matrix.\n"
                        "  --isolate  load, probe and init each plugin first in a child process;\n"
                        "             one that crashes or hangs there is reported, not loaded\n"
                        "  --timeout  seconds each child may take (default 30)\n");
            return 0;
        } else {
            std::fprintf(stderr, "tinyfin-info: unknown argument '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    try {
        if (isolate) isolate_plugins(timeout_s);
        tinyfin::Report r = tinyfin::report();
        if (json)
            print_json(r);
        else
            print_human(r);
        if (!cpu_usable(r)) {
            std::fprintf(stderr, "tinyfin-info: the cpu plugin is not usable, so no op can run; check the "
                                 "search path above or set TINYFIN_PLUGIN_PATH to the directory holding "
                                 "tinyfin-cpu.so\n");
            return 1;
        }
        return 0;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "tinyfin-info: %s\n", e.what());
        return 1;
    }
}
