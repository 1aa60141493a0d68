// The DLPack exchange structs (DLPack 0.8, the version numpy 1.24 and PyTorch 1.13 speak),
// written from the specification at https://dmlc.github.io/dlpack/latest/c_api.html: a stable
// C ABI, declared here because Debian 12 packages no dlpack header.
#pragma once

#include <cstdint>

namespace tinyfin::python::dlpack {

enum DeviceType : int32_t { kCPU = 1, kCUDA = 2, kCUDAHost = 3, kVulkan = 7, kExtDev = 12 };
enum TypeCode : uint8_t { kInt = 0, kUInt = 1, kFloat = 2, kBfloat = 4, kBool = 6 };

struct Device {
    int32_t device_type;
    int32_t device_id;
};

struct DataType {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
};

struct Tensor {
    void *data;
    Device device;
    int32_t ndim;
    DataType dtype;
    int64_t *shape;
    int64_t *strides;  // in elements; NULL means compact row-major
    uint64_t byte_offset;
};

struct ManagedTensor {
    Tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(ManagedTensor *self);
};

}  // namespace tinyfin::python::dlpack
