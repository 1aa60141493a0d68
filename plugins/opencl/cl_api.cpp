// Loading the ICD loader (see cl_api.hpp).
#include "cl_api.hpp"

#include <dlfcn.h>

namespace tf_cl {

std::unique_ptr<ClApi> load_cl_api(const char *loader_override, std::string &why) {
    auto api = std::make_unique<ClApi>();
    api->path = loader_override && loader_override[0] ? loader_override : "libOpenCL.so.1";
    void *handle = dlopen(api->path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *error = dlerror();
        why = "no OpenCL ICD loader: " + std::string(error ? error : api->path) +
              " (install ocl-icd-libopencl1 and a driver such as pocl-opencl-icd)";
        return nullptr;
    }
    api->library.reset(handle);
#define TF_CL_LOAD(name)                                                                                               \
    api->name = reinterpret_cast<decltype(&::name)>(dlsym(handle, #name));                                             \
    if (!api->name) {                                                                                                  \
        why = api->path + " lacks " #name " (an OpenCL 1.2 loader is needed)";                                         \
        return nullptr;                                                                                                \
    }
    TF_CL_FUNCTIONS(TF_CL_LOAD)
#undef TF_CL_LOAD
    return api;
}

const char *error_name(cl_int code) noexcept {
    switch (code) {
// clang-format off
#define TF_CL_CASE(c) case c: return #c;
        TF_CL_CASE(CL_SUCCESS) TF_CL_CASE(CL_DEVICE_NOT_FOUND) TF_CL_CASE(CL_DEVICE_NOT_AVAILABLE)
        TF_CL_CASE(CL_COMPILER_NOT_AVAILABLE) TF_CL_CASE(CL_MEM_OBJECT_ALLOCATION_FAILURE)
        TF_CL_CASE(CL_OUT_OF_RESOURCES) TF_CL_CASE(CL_OUT_OF_HOST_MEMORY) TF_CL_CASE(CL_BUILD_PROGRAM_FAILURE)
        TF_CL_CASE(CL_INVALID_VALUE) TF_CL_CASE(CL_INVALID_DEVICE) TF_CL_CASE(CL_INVALID_CONTEXT)
        TF_CL_CASE(CL_INVALID_COMMAND_QUEUE) TF_CL_CASE(CL_INVALID_MEM_OBJECT) TF_CL_CASE(CL_INVALID_BINARY)
        TF_CL_CASE(CL_INVALID_BUILD_OPTIONS) TF_CL_CASE(CL_INVALID_PROGRAM) TF_CL_CASE(CL_INVALID_KERNEL_NAME)
        TF_CL_CASE(CL_INVALID_KERNEL) TF_CL_CASE(CL_INVALID_ARG_INDEX) TF_CL_CASE(CL_INVALID_ARG_VALUE)
        TF_CL_CASE(CL_INVALID_ARG_SIZE) TF_CL_CASE(CL_INVALID_KERNEL_ARGS) TF_CL_CASE(CL_INVALID_WORK_DIMENSION)
        TF_CL_CASE(CL_INVALID_WORK_GROUP_SIZE) TF_CL_CASE(CL_INVALID_GLOBAL_WORK_SIZE)
        TF_CL_CASE(CL_INVALID_BUFFER_SIZE)
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
// clang-format on
#undef TF_CL_CASE
    default: return "an OpenCL error";
    }
}

}  // namespace tf_cl
