// The OpenCL entry points the plugin calls, loaded at run time from the ICD loader
// (libOpenCL.so.1, or the file TINYFIN_OPENCL_LOADER names), so the plugin loads on machines
// without OpenCL and its probe says why. One table per process, owned by the plugin's state.
#pragma once

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <tinyfin/plugin_kit/library.hpp>

#include <memory>
#include <string>

namespace tf_cl {

// clang-format off
#define TF_CL_FUNCTIONS(X)                                                                            \
    X(clGetPlatformIDs) X(clGetPlatformInfo) X(clGetDeviceIDs) X(clGetDeviceInfo) X(clCreateContext)  \
    X(clReleaseContext) X(clCreateCommandQueue) X(clReleaseCommandQueue) X(clCreateBuffer)           \
    X(clReleaseMemObject) X(clCreateProgramWithSource) X(clCreateProgramWithBinary)                  \
    X(clBuildProgram) X(clGetProgramBuildInfo) X(clGetProgramInfo) X(clReleaseProgram)               \
    X(clCreateKernel) X(clReleaseKernel) X(clSetKernelArg) X(clEnqueueNDRangeKernel)                 \
    X(clEnqueueReadBuffer) X(clEnqueueWriteBuffer) X(clEnqueueCopyBuffer) X(clEnqueueFillBuffer)     \
    X(clFlush) X(clFinish)
// clang-format on

// The loaded entry points; the library stays loaded while the table lives.
struct ClApi {
#define TF_CL_MEMBER(name) decltype(&::name) name = nullptr;
    TF_CL_FUNCTIONS(TF_CL_MEMBER)
#undef TF_CL_MEMBER
    std::string path;  // the file loaded
    tf_kit::LibraryHandle library;
};

// Loads the ICD loader named by $TINYFIN_OPENCL_LOADER (read through environment()) or
// libOpenCL.so.1. nullptr and why in `why` when the library or an entry point is missing.
std::unique_ptr<ClApi> load_cl_api(const char *loader_override, std::string &why);

// "CL_OUT_OF_RESOURCES" for an OpenCL error code.
const char *error_name(cl_int code) noexcept;

}  // namespace tf_cl
