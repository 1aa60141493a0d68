// Loading CLBlast (see clblast.hpp) and running matmul through it (Device::run_matmul_library).
#include "clblast.hpp"

#include "device.hpp"

#include <dlfcn.h>

#include <algorithm>

#include <cstring>

namespace tf_cl {

std::unique_ptr<ClBlastLibrary> ClBlastLibrary::load(const char *setting, std::string &why) {
    if (setting && std::strcmp(setting, "off") == 0) {
        why = "switched off by TINYFIN_OPENCL_CLBLAST=off";
        return nullptr;
    }
    auto lib = std::unique_ptr<ClBlastLibrary>(new ClBlastLibrary());
    lib->path = setting && setting[0] ? setting : "libclblast.so.1";
    void *handle = dlopen(lib->path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *error = dlerror();
        why = std::string(error ? error : lib->path.c_str()) + " (install libclblast1)";
        return nullptr;
    }
    lib->library_.reset(handle);
    lib->sgemm = reinterpret_cast<decltype(&::CLBlastSgemm)>(dlsym(handle, "CLBlastSgemm"));
    lib->sgemm_strided_batched =
        reinterpret_cast<decltype(&::CLBlastSgemmStridedBatched)>(dlsym(handle, "CLBlastSgemmStridedBatched"));
    if (!lib->sgemm || !lib->sgemm_strided_batched) {
        why = lib->path + " lacks CLBlastSgemm or CLBlastSgemmStridedBatched";
        return nullptr;
    }
    return lib;
}

std::string clblast_status_text(int status) { return "CLBlast status " + std::to_string(status); }

namespace {

// One operand of a row-major GEMM as CLBlast takes it: transposed or not, leading dimension.
struct Operand {
    CLBlastTranspose transpose;
    size_t ld;
};

// A rows x cols view with row stride rs and column stride cs as a row-major CLBlast operand;
// false when neither stride is 1 (the own kernel takes any strides).
bool as_operand(int64_t rows, int64_t cols, int64_t rs, int64_t cs, Operand &out) {
    if (cols == 1) cs = 1;
    if (rows == 1) rs = std::max<int64_t>(cols, 1);
    if (cs == 1 && rs >= cols) {
        out = {CLBlastTransposeNo, static_cast<size_t>(rs)};
        return true;
    }
    if (rs == 1 && cs >= rows) {
        out = {CLBlastTransposeYes, static_cast<size_t>(cs)};
        return true;
    }
    if (rows == 1 && cols >= 1 && cs >= 1) {
        // A single row with a column stride: its transpose is one column of a matrix with ld cs.
        out = {CLBlastTransposeYes, static_cast<size_t>(cs)};
        return cs >= rows;
    }
    return false;
}

}  // namespace

bool Device::run_matmul_library(const tf_op_desc &op) {
    const tf_tensor_desc &a = op.inputs[0], &b = op.inputs[1], &c = op.outputs[0];
    const int r = c.rank;
    const int64_t M = c.shape[r - 2], N = c.shape[r - 1], K = a.shape[r - 1];
    if (M == 0 || N == 0 || K == 0) return false;
    Operand oa, ob, oc;
    if (!as_operand(M, K, a.strides[r - 2], a.strides[r - 1], oa) ||
        !as_operand(K, N, b.strides[r - 2], b.strides[r - 1], ob) ||
        !as_operand(M, N, c.strides[r - 2], c.strides[r - 1], oc) || oc.transpose != CLBlastTransposeNo)
        return false;
    const int64_t *strides[3] = {c.strides, a.strides, b.strides};
    const tf_gpu::MergedAxes batch = tf_gpu::merge_axes(r - 2, c.shape, strides, 3);
    if (batch.rank > 1) return false;
    // Offsets in elements; each view is checked against its buffer as the kernels' are.
    bind(c, "matmul", "output", 0);
    bind(a, "matmul", "input", 0);
    bind(b, "matmul", "input", 1);
    cl_command_queue queue = queue_.get();
    CLBlastStatusCode status;
    if (batch.rank == 0) {
        status = blas_->sgemm(CLBlastLayoutRowMajor, oa.transpose, ob.transpose, M, N, K, 1.0f, a.buffer->memory,
                              a.offset / 4, oa.ld, b.buffer->memory, b.offset / 4, ob.ld, 0.0f, c.buffer->memory,
                              c.offset / 4, oc.ld, &queue, nullptr);
    } else {
        status = blas_->sgemm_strided_batched(
            CLBlastLayoutRowMajor, oa.transpose, ob.transpose, M, N, K, 1.0f, a.buffer->memory, a.offset / 4, oa.ld,
            batch.strides[1][0], b.buffer->memory, b.offset / 4, ob.ld, batch.strides[2][0], 0.0f, c.buffer->memory,
            c.offset / 4, oc.ld, batch.strides[0][0], batch.shape[0], &queue, nullptr);
    }
    if (status != CLBlastSuccess) {
        // Shapes CLBlast refuses go to the own kernel; its other failures are the op's.
        if (status <= -1000 && status > -2000) {
            log_message(TF_LOG_DEBUG, "%s: CLBlast refused a matmul (%d); using the own kernel", label(), status);
            return false;
        }
        check(status, "CLBlastSgemm", label());
    }
    ++counters_.gemm_library;
    return true;
}

namespace {

// The own kernel's matmul row: it runs what CLBlast refuses, so the library's row takes only what
// it takes.
const tf_gpu::KernelRow *own_matmul(const tf_gpu::KernelDevice &dev, const tf_op_desc &op) {
    return tf_kit::find_kernel(tf_gpu::gemm_kernels(), op, dev);
}

}  // namespace

tf_gpu::KernelRow Device::matmul_library_row() {
    // f16 and bf16 run on the own kernel (f32 accumulation): CLBlast's HGEMM needs cl_khr_fp16
    // and has no bf16 (docs/performance.md has the comparison with converting around SGEMM).
    return tf_gpu::kernel_row(
        TF_OP_MATMUL, tf_shaders::Shader::gemm, tf_kit::k_f32,
        [](tf_gpu::KernelDevice &dev, const tf_op_desc &op) {
            if (!static_cast<Device &>(dev).run_matmul_library(op)) own_matmul(dev, op)->run(dev, op);
        },
        [](const tf_gpu::KernelDevice &dev, const tf_op_desc &op) { return own_matmul(dev, op) != nullptr; });
}

}  // namespace tf_cl
