// set_mixed_devices: under strict (Python's default) an op on tensors of two devices is a
// DeviceError naming the op and both devices, rank-0 cpu tensors still join the others' device;
// under move (the C++ default) the op runs on the best backend's device.
#include <doctest/doctest.h>

#include <string>

#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;
using doctest::Contains;

namespace {
struct StrictScope {
    StrictScope() { set_mixed_devices(MixedDevices::strict); }
    ~StrictScope() { set_mixed_devices(MixedDevices::move); }
};
}  // namespace

TEST_CASE("strict: two devices are a DeviceError naming both; cpu scalars join; move still moves") {
    CHECK(mixed_devices() == MixedDevices::move);
    int others = 0;
    for (const std::string &name : available_backends()) {
        if (name == "cpu") continue;
        ++others;
        CAPTURE(name);
        Tensor a = ones({2});
        Tensor b = full({2}, 2.0, DType::f32, Device::parse(name));
        const std::string pair = "got cpu and " + b.device().str();
        {
            StrictScope strict;
            CHECK(mixed_devices() == MixedDevices::strict);
            CHECK_THROWS_WITH_AS(add(a, b), Contains(("add: expected all tensors on one device, " + pair).c_str()),
                                 DeviceError);
            CHECK_THROWS_WITH_AS(matmul(a.reshape({1, 2}), b.reshape({2, 1})), Contains("matmul: expected"),
                                 DeviceError);
            CHECK_THROWS_WITH_AS(
                concat({a, b}), Contains(("concat: expected all tensors on one device, " + pair).c_str()), DeviceError);
            CHECK_THROWS_AS(where(gt(a, zeros({2})), a, b), DeviceError);
            Tensor s = mul(b, scalar(3.0));  // a rank-0 cpu tensor is a scalar
            CHECK(s.device() == b.device());
            CHECK(s.to(Device{}).to_vector<float>() == std::vector<float>{6, 6});
            Tensor c = zeros({2});
            c.assign_(b);  // copying between devices is explicit and allowed
            CHECK(c.to_vector<float>() == std::vector<float>{2, 2});
        }
        Tensor moved = add(a, b);
        CHECK(moved.to(Device{}).to_vector<float>() == std::vector<float>{3, 3});
    }
    MESSAGE(others << " non-cpu backend(s) checked");
}
