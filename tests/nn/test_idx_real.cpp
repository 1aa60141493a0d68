// The IDX reader on Debian's dataset-fashion-mnist files. Exits 77 (meson's skip) with the
// reason when the package is not installed; CI installs it, so there these run.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include <sys/stat.h>

#include "idx.hpp"

namespace {

const std::string dir = fmnist::default_data_dir();

bool dataset_installed() {
    struct stat st {};
    return ::stat((dir + "/train-images-idx3-ubyte.gz").c_str(), &st) == 0;
}

}  // namespace

TEST_CASE("the real training split: 60000 images of 28x28, labels in 0..9, train[0] is 9") {
    fmnist::Split train = fmnist::read_split(dir, "train");
    CHECK(train.count == 60000);
    CHECK(train.rows == 28);
    CHECK(train.cols == 28);
    CHECK(train.images.size() == 60000u * 28 * 28);
    REQUIRE(train.labels.size() == 60000u);
    CHECK(train.labels[0] == 9);  // an ankle boot
    int per_class[10] = {};
    for (uint8_t l : train.labels) {
        REQUIRE(l <= 9);
        ++per_class[l];
    }
    for (int c = 0; c < 10; ++c) CHECK(per_class[c] == 6000);  // Fashion-MNIST is balanced
    // Mean pixel / 255 is the 0.2860 the normalisation uses.
    double total = 0;
    for (uint8_t p : train.images) total += p;
    CHECK(total / static_cast<double>(train.images.size()) / 255.0 == doctest::Approx(0.2860).epsilon(1e-3));
}

TEST_CASE("the real test split: 10000 images and labels in 0..9") {
    fmnist::Split test = fmnist::read_split(dir, "t10k");
    CHECK(test.count == 10000);
    CHECK(test.rows == 28);
    CHECK(test.cols == 28);
    CHECK(test.labels.size() == 10000u);
    for (uint8_t l : test.labels) REQUIRE(l <= 9);
}

int main(int argc, char **argv) {
    if (!dataset_installed()) {
        std::printf("SKIP: %s/train-images-idx3-ubyte.gz not found; install Debian's "
                    "dataset-fashion-mnist package to run the real-data tests\n",
                    dir.c_str());
        return 77;
    }
    doctest::Context context(argc, argv);
    return context.run();
}
