// The C++ side of the TFNN round trip in test_nn.py:
//   tfnn_tool write PATH   writes a fixed set of tensors with nn::save
//   tfnn_tool read PATH    loads every tensor with nn::load_all, prints "name dtype shape values"
#include <cstdio>
#include <cstring>
#include <string>

#include "tinyfin/nn.hpp"

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: tfnn_tool write|read PATH\n");
        return 2;
    }
    try {
        using namespace tinyfin;
        if (std::strcmp(argv[1], "write") == 0) {
            Tensor w = arange(0.0, 6.0).reshape({2, 3});  // f32: double bounds
            Tensor b = from_vector<int64_t>({7, -8, 9, 10}, {4});
            Tensor h = full({2}, 0.5, DType::f16);
            nn::save(argv[2], {{"layer.weight", w}, {"layer.index", b}, {"half", h}});
            return 0;
        }
        for (const auto &[name, t] : nn::load_all(argv[2])) {
            std::printf("%s %s %s", name.c_str(), dtype_name(t.dtype()), shape_str(t.shape()).c_str());
            for (float v : t.to(DType::f32).to_vector<float>()) std::printf(" %g", v);
            std::printf("\n");
        }
        return 0;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
