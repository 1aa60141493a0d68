// DFT, STFT and MelWeightMatrix (opset 17's signal ops). A DFT along one axis is one matmul of
// the (real, imaginary) interleaved samples by a [L*C, K*2] matrix of cosines and sines computed
// on the host in double (angles reduced mod L, so the matrix is exact to float rounding): O(L*K)
// per signal, fine for the frame sizes audio front ends use, and it runs on the session's device.
#include <cmath>
#include <string>
#include <vector>

#include "internal.hpp"

namespace tinyfin::onnx::detail {
namespace {

using Ctx = NodeContext;

constexpr double k_pi = 3.14159265358979323846;

// The DFT of x [..., N, C] (C = 1 real, 2 complex) over its N axis, zero-padded or truncated to
// length L, keeping K bins (L, or L / 2 + 1 when onesided): [..., K, 2].
Tensor dft_rows(const Ctx &ctx, Tensor x, int64_t length, bool inverse, bool onesided) {
    const int64_t rank = x.rank(), n = x.size(rank - 2), c = x.size(rank - 1);
    Shape lead(x.shape().begin(), x.shape().end() - 2);
    const int64_t bins = onesided ? length / 2 + 1 : length;
    // The matrix and the padded signal, checked before either is made (dft_length is an input).
    ctx.check_size({length, c, bins, 2}, 4);
    Shape padded = lead;
    padded.push_back(length);
    padded.push_back(c);
    ctx.check_size(padded, 4);
    if (n > length) x = x.slice(rank - 2, 0, length);
    if (n < length) {
        Shape pad = x.shape();
        pad[static_cast<std::size_t>(rank - 2)] = length - n;
        x = concat({x, zeros(pad, x.dtype(), ctx.device)}, rank - 2);
    }
    const double sign = inverse ? 1.0 : -1.0, scale = inverse ? 1.0 / static_cast<double>(length) : 1.0;
    std::vector<float> m(static_cast<std::size_t>(length * c * bins * 2));
    for (int64_t s = 0; s < length; ++s)
        for (int64_t k = 0; k < bins; ++k) {
            const double angle = 2 * k_pi * static_cast<double>((s * k) % length) / static_cast<double>(length);
            const double co = std::cos(angle) * scale, si = sign * std::sin(angle) * scale;
            // (re + i im)(cos + i si) = re cos - im si + i (re si + im cos)
            float *row = &m[static_cast<std::size_t>((s * c) * bins * 2 + 2 * k)];
            row[0] = static_cast<float>(co);
            row[1] = static_cast<float>(si);
            if (c == 2) {
                float *im_row = row + bins * 2;
                im_row[0] = static_cast<float>(-si);
                im_row[1] = static_cast<float>(co);
            }
        }
    const Tensor matrix = from_vector(m, {length * c, bins * 2}, ctx.device).to(x.dtype());
    int64_t rows = 1;
    for (int64_t d : lead) rows *= d;
    Tensor y = matmul(x.contiguous().reshape({rows, length * c}), matrix);
    Shape out = lead;
    out.push_back(bins);
    out.push_back(2);
    return y.reshape(out);
}

int64_t one_int(const Ctx &ctx, std::size_t i, const char *what) {
    const std::vector<int64_t> v = ctx.ints(i);
    if (v.size() != 1) ctx.invalid(std::string("input ") + what + " must be a scalar");
    return v[0];
}

std::vector<Value> dft_op(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    const int64_t rank = x.rank();
    if (rank < 3 || (x.size(rank - 1) != 1 && x.size(rank - 1) != 2))
        ctx.invalid("input must be [batch, signal dims..., 1 or 2], got " + shape_str(x.shape()));
    const bool inverse = ctx.attr_int("inverse", 0) != 0, onesided = ctx.attr_int("onesided", 0) != 0;
    int64_t axis = ctx.attr_int("axis", 1);
    if (axis < 0) axis += rank;
    if (axis < 1 || axis > rank - 2)
        ctx.invalid("attribute axis " + std::to_string(ctx.attr_int("axis", 1)) + " must name a signal axis (1.." +
                    std::to_string(rank - 2) + ")");
    if (onesided && inverse) ctx.unsupported("onesided with inverse (a Hermitian half-spectrum input)");
    int64_t length = x.size(axis);
    if (ctx.has_input(1)) length = one_int(ctx, 1, "dft_length");
    if (length <= 0) ctx.invalid("dft_length must be positive");
    // The transformed axis moves next to the complex one and back.
    Tensor t = axis == rank - 2 ? x : x.transpose(axis, rank - 2);
    Tensor y = dft_rows(ctx, t, length, inverse, onesided);
    if (axis != rank - 2) y = y.transpose(axis, rank - 2);
    return {make(y.contiguous(), ctx.input(0).type)};
}

std::vector<Value> stft_op(Ctx &ctx) {
    const Tensor &signal = ctx.tensor(0);
    if (signal.rank() != 3 || (signal.size(2) != 1 && signal.size(2) != 2))
        ctx.invalid("signal must be [batch, length, 1 or 2], got " + shape_str(signal.shape()));
    const int64_t step = one_int(ctx, 1, "frame_step");
    if (step <= 0) ctx.invalid("frame_step must be positive");
    Tensor window;
    int64_t length = -1;
    if (ctx.has_input(2)) {
        window = ctx.tensor(2);
        if (window.rank() != 1) ctx.invalid("window must be 1-D");
        length = window.size(0);
    }
    if (ctx.has_input(3)) {
        const int64_t fl = one_int(ctx, 3, "frame_length");
        if (length >= 0 && fl != length)
            ctx.invalid("frame_length " + std::to_string(fl) + " differs from the window's length " +
                        std::to_string(length));
        length = fl;
    }
    if (length < 0) ctx.invalid("needs a window or a frame_length");
    const int64_t samples = signal.size(1);
    if (length <= 0 || length > samples)
        ctx.invalid("frame length " + std::to_string(length) + " must be in 1.." + std::to_string(samples));
    const bool onesided = ctx.attr_int("onesided", 1) != 0;
    if (onesided && signal.size(2) == 2) ctx.invalid("onesided needs a real signal");
    const int64_t frames = (samples - length) / step + 1;
    ctx.check_size({signal.size(0), frames, length, 2}, 4);
    std::vector<int64_t> idx(static_cast<std::size_t>(frames * length));
    for (int64_t f = 0; f < frames; ++f)
        for (int64_t j = 0; j < length; ++j) idx[static_cast<std::size_t>(f * length + j)] = f * step + j;
    Tensor framed = take(signal, from_vector(idx, {frames, length}, ctx.device), 1);  // [B, F, L, C]
    if (window.defined()) framed = mul(framed, window.to(framed.dtype()).reshape({1, 1, length, 1}));
    return {make(dft_rows(ctx, framed, length, false, onesided).contiguous(), ctx.input(0).type)};
}

// ONNX 1.12's definition (its reference implementation): num_mel_bins + 2 edges evenly spaced on
// the mel scale 2595 log10(1 + f / 700), mapped to DFT bins floor((dft_length + 1) f /
// sample_rate), triangles between neighbouring edges.
std::vector<Value> mel_weight_matrix(Ctx &ctx) {
    const int64_t mels = one_int(ctx, 0, "num_mel_bins"), dft_length = one_int(ctx, 1, "dft_length"),
                  rate = one_int(ctx, 2, "sample_rate");
    const std::vector<double> lo = ctx.doubles(3), hi = ctx.doubles(4);
    if (lo.size() != 1 || hi.size() != 1) ctx.invalid("lower_edge_hertz and upper_edge_hertz must be scalars");
    if (mels <= 0 || dft_length <= 0 || rate <= 0)
        ctx.invalid("num_mel_bins, dft_length and sample_rate must be positive");
    if (!(lo[0] >= 0) || !(hi[0] > lo[0]) || hi[0] > static_cast<double>(rate))
        ctx.invalid("the edges must satisfy 0 <= lower_edge_hertz < upper_edge_hertz <= sample_rate");
    const int64_t spectrogram_bins = dft_length / 2 + 1;
    ctx.check_size({spectrogram_bins, mels}, 8);
    const auto to_mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
    const double low_mel = to_mel(lo[0]), high_mel = to_mel(hi[0]);
    const double mel_step = (high_mel - low_mel) / static_cast<double>(mels + 2);
    std::vector<int64_t> edge(static_cast<std::size_t>(mels + 2));
    for (int64_t i = 0; i < mels + 2; ++i) {
        const double hz = 700 * (std::pow(10.0, (static_cast<double>(i) * mel_step + low_mel) / 2595) - 1);
        edge[static_cast<std::size_t>(i)] =
            static_cast<int64_t>(std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(rate)));
    }
    std::vector<float> out(static_cast<std::size_t>(spectrogram_bins * mels), 0.0f);
    auto at = [&](int64_t j, int64_t i) -> float & {
        if (j < 0 || j >= spectrogram_bins) ctx.invalid("an edge falls outside the spectrogram's bins");
        return out[static_cast<std::size_t>(j * mels + i)];
    };
    for (int64_t i = 0; i < mels; ++i) {
        const int64_t left = edge[static_cast<std::size_t>(i)], center = edge[static_cast<std::size_t>(i + 1)],
                      right = edge[static_cast<std::size_t>(i + 2)];
        if (center == left) {
            at(center, i) = 1;
        } else {
            for (int64_t j = left; j <= center; ++j)
                at(j, i) = static_cast<float>(static_cast<double>(j - left) / static_cast<double>(center - left));
        }
        for (int64_t j = center; j < right; ++j)
            at(j, i) = static_cast<float>(static_cast<double>(right - j) / static_cast<double>(right - center));
    }
    const auto type = static_cast<ElementType>(ctx.attr_int("output_datatype", 1));
    if (!is_float(type)) ctx.unsupported("output_datatype " + std::string(element_type_name(type)));
    return {make(from_vector(out, {spectrogram_bins, mels}, ctx.device).to(compute_dtype(type)), type)};
}

constexpr OpRow k_rows[] = {
    {"DFT", 17, 17, dft_op},
    {"STFT", 17, 17, stft_op},
    {"MelWeightMatrix", 17, 17, mel_weight_matrix},
};

}  // namespace

std::span<const OpRow> spectral_ops() { return k_rows; }

}  // namespace tinyfin::onnx::detail
