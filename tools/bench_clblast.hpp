// tinyfin-bench's 'clblast' reference: CLBlast's SGEMM called directly on the first OpenCL
// device (its own context, queue and buffers, no tinyfin), the bar for the opencl plugin's matmul.
#pragma once

#include <functional>
#include <string>

namespace tf_bench {

// batch x ([m, k] @ [k, n]) as one CLBlastSgemm (or CLBlastSgemmStridedBatched) and clFinish
// per call; throws std::runtime_error when there is no OpenCL device or CLBlast fails.
std::function<void()> clblast_matmul(long batch, long m, long k, long n);
// "pthread-haswell-AMD EPYC (Portable Computing Language)", or why there is none.
std::string clblast_device();

}  // namespace tf_bench
