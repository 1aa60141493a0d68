// The 'clblast' reference of tinyfin-bench (see bench_clblast.hpp). Linked against libOpenCL and
// libclblast directly: the bench is a tool, and the reference should be CLBlast as an
// application would call it.
#include "bench_clblast.hpp"

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <clblast_c.h>

#include <memory>
#include <stdexcept>
#include <vector>

namespace tf_bench {

namespace {

struct OpenClSession {
    cl_platform_id platform = nullptr;
    cl_device_id device = nullptr;
    cl_context context = nullptr;
    cl_command_queue queue = nullptr;
    std::string name;

    OpenClSession() {
        cl_uint n = 0;
        if (clGetPlatformIDs(1, &platform, &n) != CL_SUCCESS || n == 0) throw std::runtime_error("no OpenCL platform");
        if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, &n) != CL_SUCCESS || n == 0)
            throw std::runtime_error("no OpenCL device");
        char text[256] = {}, platform_name[256] = {};
        clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof text - 1, text, nullptr);
        clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof platform_name - 1, platform_name, nullptr);
        name = std::string(text) + " (" + platform_name + ")";
        cl_int code = CL_SUCCESS;
        context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &code);
        if (code != CL_SUCCESS) throw std::runtime_error("clCreateContext failed");
        queue = clCreateCommandQueue(context, device, 0, &code);
        if (code != CL_SUCCESS) throw std::runtime_error("clCreateCommandQueue failed");
    }
    ~OpenClSession() {
        if (queue) clReleaseCommandQueue(queue);
        if (context) clReleaseContext(context);
    }
};

OpenClSession &session() {
    static OpenClSession s;
    return s;
}

struct DeviceFloats {
    cl_mem memory = nullptr;
    explicit DeviceFloats(size_t n) {
        std::vector<float> host(n);
        for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
        cl_int code = CL_SUCCESS;
        memory = clCreateBuffer(session().context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof(float),
                                host.data(), &code);
        if (code != CL_SUCCESS) throw std::runtime_error("clCreateBuffer failed");
    }
    ~DeviceFloats() { clReleaseMemObject(memory); }
};

}  // namespace

std::string clblast_device() {
    try {
        return session().name;
    } catch (const std::exception &e) {
        return e.what();
    }
}

std::function<void()> clblast_matmul(long batch, long m, long k, long n) {
    OpenClSession &s = session();
    auto a = std::make_shared<DeviceFloats>(batch * m * k), b = std::make_shared<DeviceFloats>(batch * k * n);
    auto c = std::make_shared<DeviceFloats>(batch * m * n);
    return [=, &s] {
        cl_command_queue queue = s.queue;
        CLBlastStatusCode status;
        if (batch == 1)
            status = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, m, n, k, 1.0f,
                                  a->memory, 0, k, b->memory, 0, n, 0.0f, c->memory, 0, n, &queue, nullptr);
        else
            status = CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, m, n, k,
                                                1.0f, a->memory, 0, k, m * k, b->memory, 0, n, k * n, 0.0f, c->memory,
                                                0, n, m * n, batch, &queue, nullptr);
        if (status != CLBlastSuccess) throw std::runtime_error("CLBlastSgemm failed: " + std::to_string(status));
        clFinish(queue);
    };
}

}  // namespace tf_bench
