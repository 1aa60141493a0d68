// CLBlast (Debian libclblast1), loaded at run time: matmul runs as its SGEMM when it is there,
// and on the plugin's own gemm kernel when it is not. TINYFIN_OPENCL_CLBLAST names the library
// file to load instead of libclblast.so.1, or is "off" to run without it (the tests use that to
// cover the fallback).
#pragma once

#include "cl_api.hpp"

#include <clblast_c.h>

#include <memory>
#include <string>

namespace tf_cl {

class ClBlastLibrary {
public:
    // nullptr, and why, when the library or an entry point is missing or it is switched off.
    static std::unique_ptr<ClBlastLibrary> load(const char *setting, std::string &why);

    decltype(&::CLBlastSgemm) sgemm = nullptr;
    decltype(&::CLBlastSgemmStridedBatched) sgemm_strided_batched = nullptr;
    std::string path;

private:
    tf_kit::LibraryHandle library_;
};

// "CLBlastInvalidLeadDimA" and the like, for messages.
std::string clblast_status_text(int status);

}  // namespace tf_cl
