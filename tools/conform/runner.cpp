#include "runner.hpp"

#include <tinyfin/plugin_kit/rules.hpp>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>

namespace conform {

namespace {

uint32_t float_bits(float f) {
    uint32_t x;
    std::memcpy(&x, &f, sizeof x);
    return x;
}

float bits_float(uint32_t x) {
    float f;
    std::memcpy(&f, &x, sizeof f);
    return f;
}

// Round to nearest even; inputs need no more than that: both sides read the same bytes.
uint16_t to_f16(double v) {
    if (std::isnan(v)) return 0x7E00;
    const uint32_t x = float_bits(static_cast<float>(v));
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
    const int e = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
    uint32_t mant = x & 0x7fffff;
    if (((x >> 23) & 0xff) == 0xff || e >= 31) return sign | 0x7C00;
    if (e <= 0) {
        if (e < -10) return sign;
        mant |= 0x800000;
        const int shift = 14 - e;
        uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) ++h;
        return static_cast<uint16_t>(sign | h);
    }
    uint32_t h = (static_cast<uint32_t>(e) << 10) | (mant >> 13), rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
}

double from_f16(uint16_t h) {
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0x1f) return m ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
    if (e == 0) return sign * std::ldexp(m, -24);
    return sign * std::ldexp(1024 + m, e - 25);
}

uint16_t to_bf16(double v) {
    if (std::isnan(v)) return 0x7FC0;
    const uint32_t x = float_bits(static_cast<float>(v));
    return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

double from_bf16(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

void encode(double v, int32_t dtype, uint8_t *dst) {
    switch (dtype) {
    case TF_DTYPE_F32: {
        float f = static_cast<float>(v);
        std::memcpy(dst, &f, 4);
        return;
    }
    case TF_DTYPE_F16: {
        uint16_t h = to_f16(v);
        std::memcpy(dst, &h, 2);
        return;
    }
    case TF_DTYPE_BF16: {
        uint16_t h = to_bf16(v);
        std::memcpy(dst, &h, 2);
        return;
    }
    case TF_DTYPE_I32: {
        int32_t i = static_cast<int32_t>(v);
        std::memcpy(dst, &i, 4);
        return;
    }
    case TF_DTYPE_I64: {
        int64_t i = static_cast<int64_t>(v);
        std::memcpy(dst, &i, 8);
        return;
    }
    case TF_DTYPE_BOOL: *dst = v != 0 ? 1 : 0; return;
    default: throw std::logic_error("encode: unknown dtype");
    }
}

double decode(int32_t dtype, const uint8_t *src) {
    switch (dtype) {
    case TF_DTYPE_F32: {
        float f;
        std::memcpy(&f, src, 4);
        return f;
    }
    case TF_DTYPE_F16: {
        uint16_t h;
        std::memcpy(&h, src, 2);
        return from_f16(h);
    }
    case TF_DTYPE_BF16: {
        uint16_t h;
        std::memcpy(&h, src, 2);
        return from_bf16(h);
    }
    case TF_DTYPE_I32: {
        int32_t i;
        std::memcpy(&i, src, 4);
        return i;
    }
    case TF_DTYPE_I64: {
        int64_t i;
        std::memcpy(&i, src, 8);
        return static_cast<double>(i);
    }
    case TF_DTYPE_BOOL: return *src;
    default: throw std::logic_error("decode: unknown dtype");
    }
}

// splitmix64: the same values on every run and machine.
class Random {
public:
    explicit Random(uint64_t seed) : state_(seed * 0x9e3779b97f4a7c15ull + 12345) {}
    uint64_t next() {
        uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    double uniform(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53; }
    int64_t integer(int64_t lo, int64_t hi) {
        return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo));
    }

private:
    uint64_t state_;
};

double draw(Random &rng, const TensorSpec &t) {
    const bool fl = is_float(t.dtype);
    switch (t.domain) {
    case Domain::uniform: return fl ? rng.uniform(-2, 2) : static_cast<double>(rng.integer(-9, 10));
    case Domain::positive: return fl ? rng.uniform(0.1, 4) : static_cast<double>(rng.integer(1, 10));
    case Domain::exponent: return fl ? rng.uniform(-2, 2) : static_cast<double>(rng.integer(0, 4));
    case Domain::nonzero: {
        double m = fl ? rng.uniform(0.5, 3) : static_cast<double>(rng.integer(1, 4));
        return rng.next() & 1 ? -m : m;
    }
    case Domain::ties: return static_cast<double>(rng.integer(-2, 3));
    case Domain::specials: {
        static const double table[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0};
        uint64_t r = rng.next() % 10;
        return r < 5 ? table[r] : rng.uniform(-2, 2);
    }
    case Domain::wide: return fl ? rng.uniform(-60, 60) : static_cast<double>(rng.integer(-60, 61));
    case Domain::boolean: return static_cast<double>(rng.next() & 1);
    case Domain::index: return static_cast<double>(rng.integer(0, t.limit));
    case Domain::labels:
        if (t.limit == 0 || rng.next() % 4 == 0) return static_cast<double>(t.ignore);
        return static_cast<double>(rng.integer(0, t.limit));
    case Domain::unit: return fl ? rng.uniform(-1, 1) : static_cast<double>(rng.integer(-1, 1));
    case Domain::above_one: return fl ? rng.uniform(1, 6) : static_cast<double>(rng.integer(1, 6));
    case Domain::blocks: return rng.uniform(-2, 2);  // draw_blocks knows the element's place
    }
    return 0;
}

// Domain::blocks: the element at storage index `at` drawn by its group of 32 (a quantization block,
// a k-quant's sub-block) and of 256 (a k-quant's super-block), so that blocks of every kind
// meet the encoders: zeros, a constant, one sign, tiny and large magnitudes, an outlier.
double draw_blocks(Random &rng, int64_t at) {
    if (at / 256 % 5 == 3) return 0;  // a whole zero super-block
    const double u = rng.uniform(-1, 1);
    switch (at / 32 % 8) {
    case 0: return 0;
    case 1: return 1e-3 * u;
    case 2: return 1000 * u;
    case 3: return 1 + 2 * std::fabs(u);
    case 4: return -1 - 2 * std::fabs(u);
    case 5: return at % 32 == 7 ? -50 : 0.1 * u;  // one outlier
    case 6: return -1.5;  // constant
    default: return 2 * u;
    }
}

// Calls f(storage element index) for every logical element in row-major order.
template <typename F>
void for_each_element(const TensorSpec &t, F f) {
    const int64_t n = t.numel();
    if (n == 0) return;
    std::vector<int64_t> coord(t.shape.size(), 0);
    for (int64_t i = 0; i < n; ++i) {
        int64_t at = t.offset;
        for (std::size_t k = 0; k < coord.size(); ++k) at += coord[k] * t.strides[k];
        f(at);
        for (std::size_t k = coord.size(); k-- > 0;) {
            if (++coord[k] < t.shape[k]) break;
            coord[k] = 0;
        }
    }
}

// The bytes before and after a tensor's storage: k_pad, or for a quantized tensor the whole
// blocks that cover it (its offset must be a multiple of the block's bytes).
std::size_t pad_of(const TensorSpec &t) {
    const std::size_t b = block_bytes(t.dtype);
    return b ? (k_pad + b - 1) / b * b : k_pad;
}

// Bytes of the elements [0, elements) of a tensor's storage.
std::size_t storage_bytes(const TensorSpec &t, int64_t elements) {
    if (is_quantized(t.dtype))
        return static_cast<std::size_t>(elements / (t.dtype >= TF_DTYPE_Q4_K ? 256 : 32)) * block_bytes(t.dtype);
    return static_cast<std::size_t>(elements) * dtype_size(t.dtype);
}

std::size_t image_size(const TensorSpec &t) { return 2 * pad_of(t) + storage_bytes(t, t.storage_elems); }

// A quantized tensor's storage: random quants, and scales (f16 d, dmin, m; q8_k's f32 d) of
// either sign in [2^-8, 2^-2), so every format's arithmetic is exercised without overflow.
void fill_blocks(Random &rng, const TensorSpec &t, uint8_t *dst) {
    const std::size_t bytes = storage_bytes(t, t.storage_elems), size = block_bytes(t.dtype);
    for (std::size_t i = 0; i < bytes; ++i) dst[i] = static_cast<uint8_t>(rng.next());
    auto f16 = [&](uint8_t *at) {
        // sign, exponent 7..12 (2^-8 .. 2^-3 times 1.m), random mantissa.
        const auto bits =
            static_cast<uint16_t>((rng.next() & 1) << 15 | rng.integer(7, 13) << 10 | rng.integer(0, 1024));
        at[0] = static_cast<uint8_t>(bits & 0xff);
        at[1] = static_cast<uint8_t>(bits >> 8);
    };
    for (std::size_t b = 0; b + size <= bytes; b += size) {
        uint8_t *block = dst + b;
        switch (t.dtype) {
        case TF_DTYPE_Q4_1:
        case TF_DTYPE_Q5_1:
        case TF_DTYPE_Q4_K:
        case TF_DTYPE_Q5_K: f16(block + 2); [[fallthrough]];
        case TF_DTYPE_Q8_0:
        case TF_DTYPE_Q4_0:
        case TF_DTYPE_Q5_0: f16(block); break;
        case TF_DTYPE_Q6_K: f16(block + 208); break;
        case TF_DTYPE_Q8_K: encode(rng.uniform(-0.25, 0.25), TF_DTYPE_F32, block); break;
        default: break;
        }
    }
}

// Owns one plugin buffer.
class Buffer {
public:
    Buffer(const Target &target, std::size_t size) : table_(target.table) {
        tf_error err{sizeof(tf_error), {}};
        if (table_->buffer_alloc(target.device, size, &buffer_, &err) != TF_STATUS_OK || !buffer_)
            throw std::runtime_error("buffer_alloc(" + std::to_string(size) + ") failed: " + message(err));
        if (target.host_addressable && table_->buffer_host_ptr) data_ = table_->buffer_host_ptr(buffer_);
    }
    ~Buffer() {
        if (buffer_) table_->buffer_free(buffer_);
    }
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;

    tf_buffer *get() const { return buffer_; }
    void *data() const { return data_; }

    static std::string message(tf_error &err) {
        err.message[sizeof err.message - 1] = 0;
        return err.message[0] ? err.message : "no message";
    }

private:
    const tf_plugin *table_;
    tf_buffer *buffer_ = nullptr;
    void *data_ = nullptr;
};

// An absent spec is all zero for a plugin of ABI 1.1 or later (TF_TENSOR_ABSENT), else the
// zeros it stands for, as the core's dispatch does.
tf_tensor_desc describe(const Target &target, const TensorSpec &t, const Buffer *buffer) {
    tf_tensor_desc d;
    std::memset(&d, 0, sizeof d);
    if (t.absent && TF_ABI_MINOR(target.table->abi_version) >= 1) return d;
    d.struct_size = sizeof d;
    d.dtype = t.dtype;
    d.rank = static_cast<int32_t>(t.shape.size());
    for (std::size_t k = 0; k < t.shape.size(); ++k) {
        d.shape[k] = t.shape[k];
        d.strides[k] = t.strides[k];
    }
    d.offset = pad_of(t) + storage_bytes(t, t.offset);
    d.buffer = buffer ? buffer->get() : nullptr;
    d.data = buffer ? buffer->data() : nullptr;
    return d;
}

tf_op_desc op_desc(const Case &c, const std::vector<tf_tensor_desc> &in, const std::vector<tf_tensor_desc> &out) {
    tf_op_desc d;
    std::memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.op = static_cast<uint32_t>(c.op);
    d.n_inputs = static_cast<uint32_t>(in.size());
    d.n_outputs = static_cast<uint32_t>(out.size());
    d.inputs = in.data();
    d.outputs = out.data();
    d.params = c.has_params ? c.params.data() : nullptr;
    return d;
}

// A byte of output image `image` that lies outside the tensor's elements, or -1.
int64_t first_stray_write(const TensorSpec &t, const std::vector<uint8_t> &image) {
    std::vector<bool> element(image.size(), false);
    if (is_quantized(t.dtype)) {
        // The whole blocks that hold the tensor's elements.
        const auto blk = tf_kit::dtype_block_length(t.dtype);
        const std::size_t bb = block_bytes(t.dtype);
        for_each_element(t, [&](int64_t at) {
            const std::size_t from = pad_of(t) + static_cast<std::size_t>(at / blk) * bb;
            for (std::size_t b = 0; b < bb; ++b) element[from + b] = true;
        });
        for (std::size_t i = 0; i < image.size(); ++i)
            if (!element[i] && image[i] != k_output_sentinel) return static_cast<int64_t>(i);
        return -1;
    }
    const std::size_t es = dtype_size(t.dtype);
    for_each_element(t, [&](int64_t at) {
        for (std::size_t b = 0; b < es; ++b) element[k_pad + static_cast<std::size_t>(at) * es + b] = true;
    });
    for (std::size_t i = 0; i < image.size(); ++i)
        if (!element[i] && image[i] != k_output_sentinel) return static_cast<int64_t>(i);
    return -1;
}

}  // namespace

std::size_t quant_pad(const TensorSpec &t) { return pad_of(t); }

Images make_images(const Case &c) {
    Images images;
    Random rng(c.seed);
    for (const TensorSpec &t : c.inputs) {
        std::vector<uint8_t> image(image_size(t), k_input_sentinel);
        if (is_quantized(t.dtype)) {
            // Every block valid, the ones the view skips too (a plugin that reads them is caught
            // by its results, not by poison).
            fill_blocks(rng, t, &image[pad_of(t)]);
            images.inputs.push_back(std::move(image));
            continue;
        }
        const std::size_t es = dtype_size(t.dtype);
        // Storage the view never reaches holds poison: a plugin that reads it shows.
        const double poison =
            is_float(t.dtype) ? std::numeric_limits<double>::quiet_NaN() : (t.dtype == TF_DTYPE_BOOL ? 1 : 77777);
        for (int64_t i = 0; i < t.storage_elems; ++i)
            encode(poison, t.dtype, &image[k_pad + static_cast<std::size_t>(i) * es]);
        std::vector<bool> set(static_cast<std::size_t>(t.storage_elems), false);
        for_each_element(t, [&](int64_t at) {
            if (set[static_cast<std::size_t>(at)]) return;  // a broadcast element already written
            set[static_cast<std::size_t>(at)] = true;
            encode(t.domain == Domain::blocks ? draw_blocks(rng, at) : draw(rng, t), t.dtype,
                   &image[k_pad + static_cast<std::size_t>(at) * es]);
        });
        images.inputs.push_back(std::move(image));
    }
    for (const TensorSpec &t : c.outputs) {
        std::vector<uint8_t> image(image_size(t), k_output_sentinel);
        if (t.in_out) {
            const std::size_t es = dtype_size(t.dtype);
            for_each_element(t, [&](int64_t at) {
                encode(draw(rng, t), t.dtype, &image[k_pad + static_cast<std::size_t>(at) * es]);
            });
        }
        images.outputs.push_back(std::move(image));
    }
    return images;
}

bool claims(const Target &target, const Case &c) {
    std::vector<tf_tensor_desc> in, out;
    for (const TensorSpec &t : c.inputs) in.push_back(describe(target, t, nullptr));
    for (const TensorSpec &t : c.outputs) out.push_back(describe(target, t, nullptr));
    tf_op_desc d = op_desc(c, in, out);
    return target.table->supports(target.device, &d) != 0;
}

RunResult run_case(const Target &target, const Case &c, const Images &before, int repeat) {
    RunResult result;
    const tf_plugin &p = *target.table;
    try {
        std::vector<std::unique_ptr<Buffer>> in_buffers, out_buffers;
        std::vector<tf_tensor_desc> in, out;
        tf_error err{sizeof(tf_error), {}};
        auto write = [&](Buffer &b, const std::vector<uint8_t> &image) {
            if (p.buffer_write(b.get(), 0, image.data(), image.size(), &err) != TF_STATUS_OK)
                throw std::runtime_error("buffer_write failed: " + Buffer::message(err));
        };
        for (std::size_t i = 0; i < c.inputs.size(); ++i) {
            in_buffers.push_back(std::make_unique<Buffer>(target, before.inputs[i].size()));
            write(*in_buffers.back(), before.inputs[i]);
            in.push_back(describe(target, c.inputs[i], in_buffers.back().get()));
        }
        for (std::size_t i = 0; i < c.outputs.size(); ++i) {
            out_buffers.push_back(std::make_unique<Buffer>(target, before.outputs[i].size()));
            write(*out_buffers.back(), before.outputs[i]);
            out.push_back(describe(target, c.outputs[i], out_buffers.back().get()));
        }
        tf_op_desc d = op_desc(c, in, out);
        // Every case is a descriptor tinyfin defines: the kit's rule of the op (the one every
        // plugin's supports() starts from) must take it, or the case or the rule is wrong.
        if (tf_error rule_err{sizeof(tf_error), {}}; tf_kit::check_op(&d, false, &rule_err) != TF_STATUS_OK) {
            result.error = "the case breaks the op's rule in the plugin kit (tinyfin/plugin_kit/rules.hpp): " +
                           Buffer::message(rule_err);
            return result;
        }
        if (!p.supports(target.device, &d)) {
            result.error =
                "supports() says no once the descriptor has memory (it must decide from the descriptor alone)";
            return result;
        }
        if (p.synchronize(target.device, &err) != TF_STATUS_OK)
            throw std::runtime_error("synchronize failed: " + Buffer::message(err));
        const auto start = std::chrono::steady_clock::now();
        for (int r = 0; r < repeat; ++r) {
            tf_error run_err{sizeof(tf_error), {}};
            tf_status s = p.run(target.device, &d, &run_err);
            if (s != TF_STATUS_OK)
                throw std::runtime_error("run failed with status " + std::to_string(s) + ": " +
                                         Buffer::message(run_err));
        }
        if (p.synchronize(target.device, &err) != TF_STATUS_OK)
            throw std::runtime_error("synchronize failed: " + Buffer::message(err));
        result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / repeat;
        auto read = [&](Buffer &b, std::size_t size) {
            std::vector<uint8_t> image(size);
            if (p.buffer_read(b.get(), 0, image.data(), size, &err) != TF_STATUS_OK)
                throw std::runtime_error("buffer_read failed: " + Buffer::message(err));
            return image;
        };
        for (std::size_t i = 0; i < c.inputs.size(); ++i)
            result.after.inputs.push_back(read(*in_buffers[i], before.inputs[i].size()));
        for (std::size_t i = 0; i < c.outputs.size(); ++i)
            result.after.outputs.push_back(read(*out_buffers[i], before.outputs[i].size()));
    } catch (const std::exception &e) {
        result.error = e.what();
        return result;
    }
    for (std::size_t i = 0; i < c.inputs.size(); ++i)
        if (result.after.inputs[i] != before.inputs[i]) {
            std::size_t at = 0;
            while (result.after.inputs[i][at] == before.inputs[i][at]) ++at;
            result.error =
                "input " + std::to_string(i) + " was written (byte " + std::to_string(at) + " of its buffer)";
            return result;
        }
    for (std::size_t i = 0; i < c.outputs.size(); ++i) {
        int64_t stray = first_stray_write(c.outputs[i], result.after.outputs[i]);
        if (stray >= 0) {
            result.error = "output " + std::to_string(i) + ": write outside its elements at byte " +
                           std::to_string(stray - static_cast<int64_t>(k_pad)) + " from element [0,...] region start";
            return result;
        }
    }
    result.ok = true;
    return result;
}

std::vector<double> output_values(const Case &c, std::size_t index, const std::vector<uint8_t> &image) {
    return tensor_values(c.outputs[index], image);
}

double round_to(double v, int32_t dtype) {
    uint8_t bytes[8];
    encode(v, dtype, bytes);
    return decode(dtype, bytes);
}

std::vector<double> tensor_values(const TensorSpec &t, const std::vector<uint8_t> &image) {
    std::vector<double> values;
    values.reserve(static_cast<std::size_t>(t.numel()));
    const std::size_t es = dtype_size(t.dtype);
    for_each_element(
        t, [&](int64_t at) { values.push_back(decode(t.dtype, &image[k_pad + static_cast<std::size_t>(at) * es])); });
    return values;
}

}  // namespace conform
