// select_backend_for_memory: a requirement every device meets, one none meets (the error names
// each device, its free memory and the requirement), and the peak counter of stats().
#include <doctest/doctest.h>

#include <string>

#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;

TEST_CASE("select_backend_for_memory: a small requirement keeps the preferred backend") {
    CHECK(select_backend_for_memory(1024, "cpu") == "cpu");
    CHECK(backend_name() == "cpu");
    // auto: whatever auto picks without a requirement also has 1 KiB free.
    set_backend("auto");
    std::string plain = backend_name();
    CHECK(select_backend_for_memory(1024, "auto") == plain);
}

TEST_CASE("select_backend_for_memory: nothing fits -> OutOfMemoryError naming every device") {
    const uint64_t huge = uint64_t(1) << 60;  // 1 EiB
    std::string message;
    try {
        select_backend_for_memory(huge, "auto");
    } catch (const OutOfMemoryError &e) {
        message = e.what();
    }
    INFO(message);
    CHECK(message.find("OutOfMemoryError") == 0);
    CHECK(message.find("1099511627776.0 MiB") != std::string::npos);  // the requirement
    CHECK(message.find("cpu:0 (") != std::string::npos);  // each device...
    CHECK(message.find("MiB free") != std::string::npos);  // ...with its free memory
    // A list is filtered the same way.
    CHECK_THROWS_AS(select_backend_for_memory(huge, "cpu"), OutOfMemoryError);
    // The selection notes say why a backend was skipped.
    Report r = report();
    bool noted = false;
    for (const std::string &note : r.selection_notes) noted |= note.find("required") != std::string::npos;
    CHECK(noted);
    set_backend("auto");
}

TEST_CASE("stats: bytes in use and the peak since reset_stats") {
    set_backend("cpu");
    synchronize();
    uint64_t base = stats().backend("cpu")->bytes_in_use;
    reset_stats();
    CHECK(stats().backend("cpu")->peak_bytes_in_use == base);
    {
        Tensor a = zeros({1024});  // 4 KiB
        Tensor b = zeros({2048});  // 8 KiB
        CHECK(stats().backend("cpu")->bytes_in_use == base + 12288);
    }
    Tensor c = zeros({256});
    const Stats now = stats();  // backend() points into this snapshot
    const Stats::Backend *s = now.backend("cpu");
    CHECK(s->bytes_in_use == base + 1024);
    CHECK(s->peak_bytes_in_use == base + 12288);
    reset_stats();
    CHECK(stats().backend("cpu")->peak_bytes_in_use == base + 1024);
}

TEST_CASE("select_backend_for_memory keeps choosing among the backends set_backend named") {
    // Software devices (lavapipe's vulkan) and blas are skipped by "auto": with them named in
    // set_backend, the choice must stay among them, as TINYFIN_BACKEND=<name> would.
    for (const std::string &name : available_backends()) {
        CAPTURE(name);
        REQUIRE(set_backend(name));
        CHECK(select_backend_for_memory(1 << 20) == name);
        CHECK(backend_name() == name);
        // 4 EiB: an OutOfMemoryError, or the backend when its device reports no free memory (opengl)
        std::string got;
        try {
            got = select_backend_for_memory(uint64_t{1} << 62);
        } catch (const OutOfMemoryError &) {
            got = "OutOfMemoryError";
        }
        CHECK((got == name || got == "OutOfMemoryError"));
        CHECK(backend_name() == name);  // a failed call leaves the selection as it was
    }
    set_backend("cpu");
}
