// Opening cuBLAS and cuDNN at run time (see libraries.hpp).
#include "libraries.hpp"

#include <cstdio>

#include <dlfcn.h>

namespace tf_cuda {

namespace {

// RTLD_LOCAL: the libraries' symbols stay out of the process's global namespace, like the
// plugin's own. RTLD_NOW: a broken installation fails here, with the loader's reason.
LibraryPtr open_library(const char *label, const char *soname, char *message, size_t size) {
    dlerror();
    LibraryPtr handle(dlopen(soname, RTLD_NOW | RTLD_LOCAL));
    if (!handle) {
        const char *why = dlerror();
        std::snprintf(message, size, "%s not found: %s", label, why ? why : soname);
    }
    return handle;
}

template <class Fn>
bool resolve(void *library, const char *label, const char *soname, const char *name, Fn *fn, char *message,
             size_t size) {
    dlerror();
    void *symbol = dlsym(library, name);
    if (!symbol) {
        std::snprintf(message, size, "%s (%s) lacks %s: too old or not the library the plugin was built for", label,
                      soname, name);
        return false;
    }
    *fn = reinterpret_cast<Fn>(symbol);
    return true;
}

}  // namespace

bool load_libraries(Libraries &libs, char *message, size_t size) {
    Libraries loaded;
    loaded.cublas_handle = open_library("cuBLAS", cublas_soname, message, size);
    if (!loaded.cublas_handle) return false;
    loaded.cudnn_handle = open_library("cuDNN", cudnn_soname, message, size);
    if (!loaded.cudnn_handle) return false;
#define TF_CUDA_RESOLVE(name)                                                                                          \
    if (!resolve(loaded.cublas_handle.get(), "cuBLAS", cublas_soname, #name, &loaded.cublas.name, message, size))      \
        return false;
    TF_CUDA_CUBLAS_FUNCTIONS(TF_CUDA_RESOLVE)
    TF_CUDA_RESOLVE(cublasGemmStridedBatchedEx)
#undef TF_CUDA_RESOLVE
#define TF_CUDA_RESOLVE(name)                                                                                          \
    if (!resolve(loaded.cudnn_handle.get(), "cuDNN", cudnn_soname, #name, &loaded.cudnn.name, message, size))          \
        return false;
    TF_CUDA_CUDNN_FUNCTIONS(TF_CUDA_RESOLVE)
#undef TF_CUDA_RESOLVE
    libs = std::move(loaded);
    return true;
}

const char *cublas_status_name(const Cublas &api, cublasStatus_t status) {
    const char *name = api.cublasGetStatusName ? api.cublasGetStatusName(status) : nullptr;
    return name ? name : "CUBLAS_STATUS_?";
}

}  // namespace tf_cuda
