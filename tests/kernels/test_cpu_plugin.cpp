// The cpu plugin's table through the ABI: the entry point and its ABI check, the device, the
// features, the buffers.
// Through the plugin ABI with no core; the harness: cpu_kernel_harness.hpp.
#include "cpu_kernel_harness.hpp"

using namespace cpu_kernel_test;

// ---- Plugin table, device, buffers ------------------------------------------------------------

TEST_CASE("entry point returns the cpu table and refuses another ABI major") {
    const tf_plugin &p = P();
    CHECK(p.struct_size == sizeof(tf_plugin));
    CHECK(p.abi_version == TF_ABI_VERSION);
    CHECK(std::string(p.name) == "cpu");
    CHECK(p.priority == 0);
    REQUIRE(p.version != nullptr);
    CHECK(std::strlen(p.version) > 0);
    CHECK((p.probe != nullptr));
    CHECK((p.init != nullptr));
    CHECK((p.shutdown != nullptr));
    CHECK((p.device_count != nullptr));
    CHECK((p.device_info != nullptr));
    CHECK((p.buffer_alloc != nullptr));
    CHECK((p.buffer_free != nullptr));
    CHECK((p.buffer_host_ptr != nullptr));
    CHECK((p.buffer_write != nullptr));
    CHECK((p.buffer_read != nullptr));
    CHECK((p.buffer_copy != nullptr));
    CHECK((p.supports != nullptr));
    CHECK((p.run != nullptr));
    CHECK((p.synchronize != nullptr));
    CHECK((p.list_features != nullptr));

    const tf_plugin_entry_fn entry = cpu_plugin_entry();
    CHECK(entry(nullptr) == nullptr);
    tf_host_api other = k_quiet_host;
    other.abi_version = (2u << 16) | 0;
    CHECK(entry(&other) == nullptr);
    other.abi_version = (0u << 16) | 9;
    CHECK(entry(&other) == nullptr);
    // A newer minor of the same major is fine.
    other.abi_version = (uint32_t{TF_ABI_VERSION_MAJOR} << 16) | 7;
    CHECK(entry(&other) == &p);
    CHECK(entry(&k_quiet_host) == &p);  // back to the test's host table
}

TEST_CASE("one cpu device") {
    tf_error err = make_error();
    CHECK(P().probe(&err) == TF_STATUS_OK);
    CHECK(P().init(&err) == TF_STATUS_OK);
    REQUIRE(P().device_count() == 1);

    tf_device_info info{};
    info.struct_size = sizeof info;
    REQUIRE(P().device_info(0, &info, &err) == TF_STATUS_OK);
    CHECK(info.struct_size == sizeof info);
    CHECK(info.kind == TF_DEVICE_KIND_CPU);
    CHECK(info.host_addressable == 1);
    CHECK(std::strlen(info.name) > 0);
    CHECK(std::strlen(info.name) < sizeof info.name);
    CHECK(info.memory_total > 0);
    CHECK(info.memory_free <= info.memory_total);
    CHECK(std::string(info.uuid).empty());
    MESSAGE("cpu device: ", info.name);

    CHECK(P().device_info(1, &info, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(err.message).find("1") != std::string::npos);
    CHECK(P().synchronize(0, &err) == TF_STATUS_OK);
}

TEST_CASE("list_features reports simd and threads") {
    std::map<std::string, std::string> features;
    P().list_features(
        [](void *user, const char *key, const char *value) {
            (*static_cast<std::map<std::string, std::string> *>(user))[key] = value;
        },
        &features);
    REQUIRE(features.count("simd") == 1);
    const std::string simd = features["simd"];
    CHECK((simd == "avx2" || simd == "sse2" || simd == "none"));
    // The thread pool's size (TINYFIN_THREADS, else the cores) and the GEMM's instruction set.
    CHECK(std::atoi(features["threads"].c_str()) >= 1);
    const std::string kernels = features["kernels"];
    CHECK((kernels == "generic" || kernels == "avx2" || kernels == "avx512"));
}

TEST_CASE("buffers: aligned, bounds-checked, and a huge request fails cleanly") {
    tf_error err = make_error();
    tf_buffer *a = nullptr, *b = nullptr;
    REQUIRE(P().buffer_alloc(0, 100, &a, &err) == TF_STATUS_OK);
    REQUIRE(P().buffer_alloc(0, 100, &b, &err) == TF_STATUS_OK);
    CHECK(reinterpret_cast<uintptr_t>(P().buffer_host_ptr(a)) % 64 == 0);

    unsigned char src[100], dst[100];
    for (int i = 0; i < 100; ++i) src[i] = static_cast<unsigned char>(i * 7);
    CHECK(P().buffer_write(a, 0, src, 100, &err) == TF_STATUS_OK);
    CHECK(P().buffer_copy(b, 10, a, 20, 50, &err) == TF_STATUS_OK);
    std::memset(dst, 0, sizeof dst);
    CHECK(P().buffer_read(b, 10, dst, 50, &err) == TF_STATUS_OK);
    CHECK(std::memcmp(dst, src + 20, 50) == 0);
    CHECK(std::memcmp(P().buffer_host_ptr(a), src, 100) == 0);

    err = make_error();
    CHECK(P().buffer_write(a, 90, src, 20, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(err.message).find("100") != std::string::npos);
    CHECK(P().buffer_read(a, 101, dst, 0, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(P().buffer_read(a, 1, dst, UINT64_MAX, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(P().buffer_copy(a, 0, b, 60, 41, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(P().buffer_read(a, 100, dst, 0, &err) == TF_STATUS_OK);
    P().buffer_free(a);
    P().buffer_free(b);

    tf_buffer *huge = reinterpret_cast<tf_buffer *>(&err);  // must be reset to NULL
    err = make_error();
    CHECK(P().buffer_alloc(0, uint64_t{1} << 50, &huge, &err) == TF_STATUS_OUT_OF_MEMORY);
    CHECK(huge == nullptr);
    CHECK(std::string(err.message).find("1125899906842624") != std::string::npos);
    CHECK(P().buffer_alloc(0, UINT64_MAX, &huge, &err) == TF_STATUS_OUT_OF_MEMORY);
    CHECK(P().buffer_alloc(0, 0, &huge, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(P().buffer_alloc(1, 8, &huge, &err) == TF_STATUS_INVALID_ARGUMENT);
}
