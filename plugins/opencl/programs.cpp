// Programs: one per kernel and selector values, built on first use from the embedded OpenCL C
// (shaders/opencl/common.cl + the kernel's file) with each TF_SPEC selector as a -D option, and
// kept for the device's life. Built programs go to a binary cache on disk
// ($XDG_CACHE_HOME/tinyfin/opencl/, or ~/.cache/tinyfin/opencl/): one file per program, named by
// a hash of the device, driver, source and options; regular files only, each at most
// max_binary_bytes, written atomically, and no new file once the directory holds
// max_cache_bytes. Reading or writing the cache may fail: the plugin then builds from source.
#include "device.hpp"

#include "atomic_file.hpp"
#include "regular_file.hpp"
#include "selectors.hpp"

#include <tinyfin/plugin_kit/gpu/cache_directory.hpp>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string_view>

namespace tf_cl {

namespace {

constexpr std::size_t max_binary_bytes = 16u << 20;
constexpr uint64_t max_cache_bytes = 256ull << 20;

uint64_t fnv1a(uint64_t hash, std::string_view text) {
    for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ull;
    return hash;
}

// Bytes in the regular files of dir.
uint64_t directory_bytes(const std::string &dir) {
    uint64_t total = 0;
    DIR *d = opendir(dir.c_str());
    if (!d) return 0;
    while (const dirent *entry = readdir(d)) {
        struct stat st;
        if (fstatat(dirfd(d), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            total += static_cast<uint64_t>(st.st_size);
    }
    closedir(d);
    return total;
}

std::string build_log(const ClApi &api, cl_program program, cl_device_id id) {
    size_t size = 0;
    api.clGetProgramBuildInfo(program, id, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
    std::string log(size, '\0');
    if (size) api.clGetProgramBuildInfo(program, id, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
    log.resize(std::strlen(log.c_str()));
    if (log.size() > 800) log.resize(800);
    return log;
}

}  // namespace

cl_kernel Device::kernel_for(const PipelineKey &key) {
    auto found = kernels_.find(key);
    if (found != kernels_.end()) return found->second.second.get();
    const auto begin = std::chrono::steady_clock::now();
    const tf_shaders::ShaderCode &code = tf_shaders::shader_code_of(key.kernel);
    const std::string_view text(code.data, code.size);
    if (text.empty()) raise(TF_STATUS_UNSUPPORTED, "%s: kernel %s is not ported to OpenCL", label(), code.name);
    // -w: the selectors make some conditions constant, and pocl prints the count of such warnings
    // on the application's stderr.
    std::string options = "-cl-std=CL1.2 -cl-single-precision-constant -w";
    for (const tf_gpu::KernelSelector &s : tf_gpu::selectors_of(text)) {
        char define[128];
        if (s.id < key.count)
            std::snprintf(define, sizeof define, " -D%s=%uu", s.name.c_str(), key.spec[s.id]);
        else
            std::snprintf(define, sizeof define, " -D%s=%s", s.name.c_str(), s.value.c_str());
        options += define;
    }
    if (cache_dir_.empty() && !environment("TINYFIN_OPENCL_NO_CACHE"))
        cache_dir_ = tf_kit::gpu::cache_directory("opencl");
    uint64_t hash = 0xcbf29ce484222325ull;
    for (const std::string *part : {&platform_, &name_, &driver_, &version_, &options})
        hash = fnv1a(fnv1a(hash, *part), "\n");
    hash = fnv1a(hash, text);
    char file[64];
    std::snprintf(file, sizeof file, "/%016llx.bin", static_cast<unsigned long long>(hash));
    const std::string path = cache_dir_.empty() ? "" : cache_dir_ + file;

    cl_int result = CL_SUCCESS;
    ProgramHandle program(nullptr, {&api_});
    const cl_device_id id = target_id_;
    // A cached binary of this exact program, when there is one the driver accepts.
    std::vector<unsigned char> binary;
    std::string refused;
    if (!path.empty() && access(path.c_str(), F_OK) == 0) {
        if (tf_common::read_regular_file(path, max_binary_bytes, binary, refused) && !binary.empty()) {
            const unsigned char *data = binary.data();
            const size_t size = binary.size();
            cl_int status = CL_SUCCESS;
            program.reset(api_.clCreateProgramWithBinary(context_.get(), 1, &id, &size, &data, &status, &result));
            if (result != CL_SUCCESS || status != CL_SUCCESS ||
                api_.clBuildProgram(program.get(), 1, &id, options.c_str(), nullptr, nullptr) != CL_SUCCESS)
                program.reset();
        } else {
            log_message(TF_LOG_INFO, "%s: program cache file %s ignored: %s", label(), path.c_str(), refused.c_str());
        }
    }
    const bool from_cache = static_cast<bool>(program);
    if (!program) {
        const char *source = text.data();
        const size_t length = text.size();
        program.reset(api_.clCreateProgramWithSource(context_.get(), 1, &source, &length, &result));
        check(result, "clCreateProgramWithSource", label());
        result = api_.clBuildProgram(program.get(), 1, &id, options.c_str(), nullptr, nullptr);
        if (result != CL_SUCCESS)
            raise(TF_STATUS_INTERNAL, "%s: building kernel %s (%s) failed: %s: %s", label(), code.name, options.c_str(),
                  error_name(result), build_log(api_, program.get(), id).c_str());
        if (!path.empty()) save_binary(program.get(), path);
    }
    const std::string entry = std::string("tf_") + code.name;
    KernelHandle kernel(api_.clCreateKernel(program.get(), entry.c_str(), &result), {&api_});
    check(result, "clCreateKernel", label());
    const cl_kernel out = kernel.get();
    kernels_.emplace(key, std::make_pair(std::move(program), std::move(kernel)));
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
    if (from_cache) {
        ++counters_.cached;
    } else {
        ++counters_.built;
        counters_.build_ms += ms;
    }
    log_message(TF_LOG_DEBUG, "%s: kernel %s (%s) %s in %.1f ms", label(), code.name, options.c_str(),
                from_cache ? "loaded from the cache" : "built", ms);
    return out;
}

void Device::save_binary(cl_program program, const std::string &path) noexcept {
    try {
        size_t size = 0;
        if (api_.clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) != CL_SUCCESS ||
            size == 0 || size > max_binary_bytes)
            return;
        std::vector<unsigned char> binary(size);
        unsigned char *data = binary.data();
        if (api_.clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof data, &data, nullptr) != CL_SUCCESS) return;
        const std::string parent = cache_dir_.substr(0, cache_dir_.rfind('/'));
        mkdir(parent.substr(0, parent.rfind('/')).c_str(), 0700);
        mkdir(parent.c_str(), 0700);
        mkdir(cache_dir_.c_str(), 0700);
        if (directory_bytes(cache_dir_) + size > max_cache_bytes) {
            log_message(TF_LOG_INFO, "%s: program cache %s is full (%llu bytes); not adding to it", label(),
                        cache_dir_.c_str(), static_cast<unsigned long long>(max_cache_bytes));
            return;
        }
        // A fresh temp file renamed over the target (common/atomic_file.hpp): concurrent
        // processes never read a half-written file, and a planted file is never written to.
        const std::string why = tf_common::write_file_atomically(path, binary.data(), size, 0600);
        if (!why.empty())
            log_message(TF_LOG_INFO, "%s: could not write the program cache (not fatal): %s", label(), why.c_str());
    } catch (...) {
        // The cache is an optimisation: a failure to write it is not the op's failure.
    }
}

}  // namespace tf_cl
