// libonnx's shape inference, run in a child process: Debian's libonnx 1.12 trusts what it reads
// (convPoolShapeInference indexes attribute lists by the input's rank and divides by strides
// unchecked), so a hostile file can crash it. The child infers and sends the value_info back
// through a pipe; a crash, a hang or an oversized answer is a ModelError in the caller.
#include <fcntl.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "internal.hpp"

namespace tinyfin::onnx::detail {

namespace {

// Status byte of the child's answer, then a little-endian uint64 length, then the payload.
constexpr unsigned char answer_ok = 0;  // payload: a GraphProto holding only value_info
constexpr unsigned char answer_error = 1;  // payload: libonnx's message

bool write_all(int fd, const void *data, std::size_t size) {
    const auto *p = static_cast<const char *>(data);
    while (size > 0) {
        const ssize_t n = ::write(fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        size -= static_cast<std::size_t>(n);
    }
    return true;
}

[[noreturn]] void child(::onnx::ModelProto &model, int fd) {
    // The caller's handlers (Python's, a sanitizer's, a fuzzer's) must not run here: a fault in
    // libonnx kills this process and the parent reports it.
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS, SIGPIPE}) ::signal(sig, SIG_DFL);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    unsigned char status = answer_ok;
    std::string payload;
    try {
        ::onnx::ShapeInferenceOptions options{true, 1, false};  // strict, errors thrown, no data propagation
        // This process's copy of the model: changing it leaves the caller's untouched.
        ::onnx::shape_inference::InferShapes(model, ::onnx::OpSchemaRegistry::Instance(), options);
        ::onnx::GraphProto answer;
        answer.mutable_value_info()->Swap(model.mutable_graph()->mutable_value_info());
        if (!answer.SerializeToString(&payload)) throw std::runtime_error("the inferred shapes do not serialize");
    } catch (const std::exception &e) {
        status = answer_error;
        payload = e.what();
    } catch (...) {
        status = answer_error;
        payload = "unknown exception";
    }
    unsigned char header[9] = {status};
    const uint64_t length = payload.size();
    for (int i = 0; i < 8; ++i) header[1 + i] = static_cast<unsigned char>(length >> (8 * i));
    const bool ok = write_all(fd, header, sizeof header) && write_all(fd, payload.data(), payload.size());
    ::_exit(ok ? 0 : 3);  // no atexit handlers, no static destructors, no stdio flush of the parent's buffers
}

std::string signal_name(int sig) {
    const char *name = ::sigabbrev_np(sig);
    return name != nullptr ? std::string("SIG") + name : "signal " + std::to_string(sig);
}

struct Pipe {
    int fd[2] = {-1, -1};
    Pipe() {
        if (::pipe2(fd, O_CLOEXEC) != 0)
            throw ModelError(std::string("ModelError: shape inference: pipe failed: ") + std::strerror(errno) +
                             " (SessionOptions.shape_inference = false skips it)");
    }
    void close(int i) {
        if (fd[i] >= 0) ::close(fd[i]);
        fd[i] = -1;
    }
    ~Pipe() {
        close(0);
        close(1);
    }
};

}  // namespace

::onnx::GraphProto infer_shapes_isolated(::onnx::ModelProto &model, const InferenceLimits &limits) {
    Pipe pipe;
    const pid_t pid = ::fork();
    if (pid < 0)
        throw ModelError(std::string("ModelError: shape inference: fork failed: ") + std::strerror(errno) +
                         " (SessionOptions.shape_inference = false skips it)");
    if (pid == 0) {
        ::close(pipe.fd[0]);
        child(model, pipe.fd[1]);
    }
    pipe.close(1);

    // Read the answer until end of file, the size limit or the deadline.
    std::string answer;
    const auto deadline = std::chrono::steady_clock::now() + limits.timeout;
    bool timed_out = false, too_big = false;
    char buffer[65536];
    for (;;) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        pollfd p{pipe.fd[0], POLLIN, 0};
        const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
        if (r < 0 && errno != EINTR) break;
        if (r <= 0) continue;
        const ssize_t n = ::read(pipe.fd[0], buffer, sizeof buffer);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) break;
        answer.append(buffer, static_cast<std::size_t>(n));
        if (answer.size() > limits.max_answer_bytes + 9) {
            too_big = true;
            break;
        }
    }
    if (timed_out || too_big) ::kill(pid, SIGKILL);
    int status = 0;
    pid_t waited;
    do {
        waited = ::waitpid(pid, &status, 0);
    } while (waited < 0 && errno == EINTR);
    // waited < 0 (ECHILD) when the process ignores SIGCHLD: the answer's own length tells
    // whether it is complete.

    if (timed_out)
        throw ModelError("ModelError: shape inference took over " + std::to_string(limits.timeout.count()) +
                         " s and was stopped (a malformed model?)");
    if (too_big)
        throw ModelError("ModelError: shape inference answered over " + std::to_string(limits.max_answer_bytes) +
                         " bytes of shapes (a malformed model?)");
    uint64_t length = 0;
    bool complete = answer.size() >= 9;
    if (complete) {
        for (int i = 0; i < 8; ++i) length |= uint64_t{static_cast<unsigned char>(answer[1 + i])} << (8 * i);
        complete = answer.size() - 9 == length;
    }
    if (!complete) {
        if (waited == pid && WIFSIGNALED(status))
            throw ModelError("ModelError: libonnx's shape inference crashed (" + signal_name(WTERMSIG(status)) +
                             ") on this model: it is malformed (a node's attributes do not fit its inputs?)");
        throw ModelError("ModelError: shape inference ended without an answer" +
                         (waited == pid && WIFEXITED(status)
                              ? " (exit status " + std::to_string(WEXITSTATUS(status)) + ")"
                              : std::string()));
    }
    if (static_cast<unsigned char>(answer[0]) == answer_error)
        throw ModelError("ModelError: shape inference failed: " + answer.substr(9));
    ::onnx::GraphProto graph;
    if (static_cast<unsigned char>(answer[0]) != answer_ok ||
        !graph.ParseFromArray(answer.data() + 9, static_cast<int>(length)))
        throw ModelError("ModelError: shape inference answered something unreadable");
    return graph;
}

}  // namespace tinyfin::onnx::detail
