// The ONNX loader as a libFuzzer target: any bytes either load (and then run once on zero feeds
// of the declared static shapes; sequences of two, optionals empty) or raise a tinyfin::Error;
// anything else is a finding. Without
// libFuzzer, tests/fuzz/replay_main.cpp replays tests/onnx/fuzz-corpus through it.
#include <cstddef>
#include <cstdint>

#include "tinyfin/onnx.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    namespace tfo = tinyfin::onnx;
    try {
        tfo::SessionOptions options;
        options.backend = "cpu";
        options.max_tensor_bytes = uint64_t{1} << 24;
        auto session = tfo::InferenceSession::from_bytes(data, size, options);
        std::vector<std::pair<std::string, tfo::HostValue>> feeds;
        for (const auto &input : session.get_inputs()) {
            tfo::HostTensor host;
            host.type = input.type;
            int64_t n = 1;
            for (int64_t d : input.shape) {
                const int64_t dim = d < 0 ? 1 : d;
                if (dim > (int64_t{1} << 16) || n * dim > (int64_t{1} << 16)) return 0;  // keep runs small
                host.shape.push_back(dim);
                n *= dim;
            }
            host.data.resize(static_cast<std::size_t>(n) * tfo::element_size(input.type));
            // A sequence input gets two such tensors; an optional one is left out (none).
            if (input.kind == tfo::ValueKind::sequence)
                feeds.emplace_back(input.name, tfo::HostValue::sequence(input.type, {host, host}));
            else if (!input.optional)
                feeds.emplace_back(input.name, tfo::HostValue::of(std::move(host)));
        }
        session.run_values({}, feeds);
    } catch (const tinyfin::Error &) {
    }
    return 0;
}
