// Element types, TensorProto decoding (inline and external data) and host conversions.
#include <unistd.h>

#include <cstring>
#include <limits>
#include <map>
#include <memory>

#include "internal.hpp"
#include "mapped_file.hpp"

namespace tinyfin::onnx {

std::string element_type_name(ElementType type) {
    switch (type) {
    case ElementType::undefined: return "undefined";
    case ElementType::float32: return "float32";
    case ElementType::uint8: return "uint8";
    case ElementType::int8: return "int8";
    case ElementType::uint16: return "uint16";
    case ElementType::int16: return "int16";
    case ElementType::int32: return "int32";
    case ElementType::int64: return "int64";
    case ElementType::string: return "string";
    case ElementType::boolean: return "bool";
    case ElementType::float16: return "float16";
    case ElementType::float64: return "float64";
    case ElementType::uint32: return "uint32";
    case ElementType::uint64: return "uint64";
    case ElementType::complex64: return "complex64";
    case ElementType::complex128: return "complex128";
    case ElementType::bfloat16: return "bfloat16";
    }
    return "unknown(" + std::to_string(static_cast<int32_t>(type)) + ")";
}

std::size_t element_size(ElementType type) {
    switch (type) {
    case ElementType::uint8:
    case ElementType::int8:
    case ElementType::boolean: return 1;
    case ElementType::uint16:
    case ElementType::int16:
    case ElementType::float16:
    case ElementType::bfloat16: return 2;
    case ElementType::float32:
    case ElementType::int32:
    case ElementType::uint32: return 4;
    case ElementType::int64:
    case ElementType::float64:
    case ElementType::uint64:
    case ElementType::complex64: return 8;
    case ElementType::complex128: return 16;
    default: return 0;
    }
}

DType compute_dtype(ElementType type) {
    switch (type) {
    case ElementType::float32:
    case ElementType::float64: return DType::f32;
    case ElementType::float16: return DType::f16;
    case ElementType::bfloat16: return DType::bf16;
    case ElementType::int8:
    case ElementType::uint8:
    case ElementType::int16:
    case ElementType::uint16:
    case ElementType::int32: return DType::i32;
    case ElementType::int64:
    case ElementType::uint32:
    case ElementType::uint64: return DType::i64;
    case ElementType::boolean: return DType::boolean;
    default: break;
    }
    throw UnsupportedError("UnsupportedError: element type " + element_type_name(type) +
                           " is not supported (supported: float32, float16, bfloat16, float64 computed in float32, "
                           "int8/uint8/int16/uint16/int32 computed in int32, int64/uint32/uint64 in int64, bool)");
}

int64_t HostTensor::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

namespace detail {

namespace {

// Elements of shape, or an error when a dimension is negative or the product overflows.
int64_t checked_numel(const Shape &shape, const std::string &what) {
    int64_t n = 1;
    for (int64_t d : shape) {
        if (d < 0) throw ModelError("ModelError: " + what + ": negative dimension in " + shape_str(shape));
        if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
            throw ModelError("ModelError: " + what + ": the element count of " + shape_str(shape) + " overflows");
        n *= d;
    }
    return n;
}

// Element-wise widening or narrowing between host buffers.
template <typename From, typename To>
void convert(const std::byte *src, std::byte *dst, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        From v;
        std::memcpy(&v, src + i * sizeof(From), sizeof(From));
        To w = static_cast<To>(v);
        std::memcpy(dst + i * sizeof(To), &w, sizeof(To));
    }
}

Value upload(ElementType type, const Shape &shape, const std::byte *data, const Device &device) {
    const DType dtype = compute_dtype(type);
    const std::size_t n = static_cast<std::size_t>(checked_numel(shape, "tensor"));
    std::vector<std::byte> wide;
    const std::byte *src = data;
    switch (type) {
    case ElementType::float64:
        wide.resize(n * 4);
        convert<double, float>(data, wide.data(), n);
        src = wide.data();
        break;
    case ElementType::int8:
        wide.resize(n * 4);
        convert<int8_t, int32_t>(data, wide.data(), n);
        src = wide.data();
        break;
    case ElementType::uint8:
        wide.resize(n * 4);
        convert<uint8_t, int32_t>(data, wide.data(), n);
        src = wide.data();
        break;
    case ElementType::int16:
        wide.resize(n * 4);
        convert<int16_t, int32_t>(data, wide.data(), n);
        src = wide.data();
        break;
    case ElementType::uint16:
        wide.resize(n * 4);
        convert<uint16_t, int32_t>(data, wide.data(), n);
        src = wide.data();
        break;
    case ElementType::uint32:
        wide.resize(n * 8);
        convert<uint32_t, int64_t>(data, wide.data(), n);
        src = wide.data();
        break;
    case ElementType::boolean:
        wide.resize(n);
        for (std::size_t i = 0; i < n; ++i) wide[i] = std::byte{data[i] != std::byte{0}};
        src = wide.data();
        break;
    default: break;  // float32, float16, bfloat16, int32, int64, uint64 (bits as int64)
    }
    return Value{from_host(src, shape, dtype, device), type};
}

// The bytes of a TensorProto's typed repeated field, as its element type lays them out.
std::vector<std::byte> typed_field_bytes(const ::onnx::TensorProto &proto, ElementType type, std::size_t n,
                                         const std::string &what) {
    std::vector<std::byte> out(n * element_size(type));
    auto need = [&](int have) {
        if (static_cast<std::size_t>(have) != n)
            throw ModelError("ModelError: " + what + ": " + std::to_string(have) + " values for " + std::to_string(n) +
                             " elements");
    };
    switch (type) {
    case ElementType::float32:
        need(proto.float_data_size());
        if (n) std::memcpy(out.data(), proto.float_data().data(), n * 4);
        break;
    case ElementType::float64:
        need(proto.double_data_size());
        if (n) std::memcpy(out.data(), proto.double_data().data(), n * 8);
        break;
    case ElementType::int64:
        need(proto.int64_data_size());
        if (n) std::memcpy(out.data(), proto.int64_data().data(), n * 8);
        break;
    case ElementType::uint64:
        need(proto.uint64_data_size());
        if (n) std::memcpy(out.data(), proto.uint64_data().data(), n * 8);
        break;
    case ElementType::uint32:
        need(proto.uint64_data_size());
        for (std::size_t i = 0; i < n; ++i) {
            const uint32_t v = static_cast<uint32_t>(proto.uint64_data(static_cast<int>(i)));
            std::memcpy(out.data() + i * 4, &v, 4);
        }
        break;
    case ElementType::int32:
        need(proto.int32_data_size());
        if (n) std::memcpy(out.data(), proto.int32_data().data(), n * 4);
        break;
    case ElementType::int8:
    case ElementType::uint8:
    case ElementType::boolean:
    case ElementType::int16:
    case ElementType::uint16:
    case ElementType::float16:
    case ElementType::bfloat16: {
        // Stored in int32_data, one element per entry (the low bits).
        need(proto.int32_data_size());
        const std::size_t size = element_size(type);
        for (std::size_t i = 0; i < n; ++i) {
            const uint32_t v = static_cast<uint32_t>(proto.int32_data(static_cast<int>(i)));
            std::memcpy(out.data() + i * size, &v, size);  // little-endian: the low bytes
        }
        break;
    }
    default:
        throw UnsupportedError("UnsupportedError: " + what + ": element type " + element_type_name(type) +
                               " is not supported");
    }
    return out;
}

bool safe_relative_path(const std::string &location) {
    if (location.empty() || location[0] == '/' || location.find('\0') != std::string::npos) return false;
    std::size_t start = 0;
    while (start <= location.size()) {
        std::size_t end = location.find('/', start);
        if (end == std::string::npos) end = location.size();
        if (location.compare(start, end - start, "..") == 0 && end - start == 2) return false;
        start = end + 1;
    }
    return true;
}

std::string resolved_dir(const std::string &dir) {
    char *real = ::realpath(dir.c_str(), nullptr);
    if (real == nullptr) throw ModelError("ModelError: cannot resolve the model's folder '" + dir + "'");
    std::string out(real);
    std::free(real);
    return out;
}

}  // namespace

Value tensor_from_proto(const ::onnx::TensorProto &proto, const std::string &base_dir, const Device &device,
                        const std::string &what) {
    const auto type = static_cast<ElementType>(proto.data_type());
    const std::size_t size = element_size(type);
    if (size == 0 || type == ElementType::complex64 || type == ElementType::complex128)
        throw UnsupportedError("UnsupportedError: " + what + ": element type " + element_type_name(type) +
                               " is not supported");
    Shape shape(proto.dims().begin(), proto.dims().end());
    const int64_t numel = checked_numel(shape, what);
    if (static_cast<uint64_t>(numel) > std::numeric_limits<uint64_t>::max() / size)
        throw ModelError("ModelError: " + what + ": the byte size of " + shape_str(shape) + " overflows");
    const uint64_t bytes = static_cast<uint64_t>(numel) * size;

    if (proto.data_location() == ::onnx::TensorProto::EXTERNAL) {
        std::string location;
        uint64_t offset = 0;
        bool has_length = false;
        uint64_t length = 0;
        for (const auto &entry : proto.external_data()) {
            auto number = [&](const std::string &text) {
                std::size_t used = 0;
                unsigned long long v = 0;
                try {
                    v = std::stoull(text, &used);
                } catch (const std::exception &) {
                    used = 0;
                }
                if (used == 0 || used != text.size() || text[0] == '-')
                    throw ModelError("ModelError: " + what + ": external data " + entry.key() + " '" + text +
                                     "' is not a number");
                return static_cast<uint64_t>(v);
            };
            if (entry.key() == "location")
                location = entry.value();
            else if (entry.key() == "offset")
                offset = number(entry.value());
            else if (entry.key() == "length") {
                length = number(entry.value());
                has_length = true;
            }
        }
        if (base_dir.empty())
            throw ModelError("ModelError: " + what +
                             ": external data needs the model's folder (load the model from its file)");
        if (!safe_relative_path(location))
            throw ModelError("ModelError: " + what + ": external data location '" + location +
                             "' must be a relative path inside the model's folder (no '..', not absolute)");
        const std::string dir = resolved_dir(base_dir);
        MappedFile file(dir + "/" + location);
        if (file.real_path().compare(0, dir.size() + 1, dir + "/") != 0)
            throw ModelError("ModelError: " + what + ": external data location '" + location + "' leads to '" +
                             file.real_path() + "', outside the model's folder " + dir);
        if (!has_length) length = offset <= file.size() ? file.size() - offset : 0;
        if (offset > file.size() || length > file.size() - offset)
            throw ModelError("ModelError: " + what + ": external data [" + std::to_string(offset) + ", +" +
                             std::to_string(length) + ") lies past the end of '" + location + "' (" +
                             std::to_string(file.size()) + " bytes)");
        if (length != bytes)
            throw ModelError("ModelError: " + what + ": external data has " + std::to_string(length) +
                             " bytes, the tensor " + shape_str(shape) + " of " + element_type_name(type) + " needs " +
                             std::to_string(bytes));
        return upload(type, shape, file.data() + offset, device);
    }
    if (proto.has_raw_data()) {
        if (proto.raw_data().size() != bytes)
            throw ModelError("ModelError: " + what + ": raw_data has " + std::to_string(proto.raw_data().size()) +
                             " bytes, the tensor " + shape_str(shape) + " of " + element_type_name(type) + " needs " +
                             std::to_string(bytes));
        return upload(type, shape, reinterpret_cast<const std::byte *>(proto.raw_data().data()), device);
    }
    const std::vector<std::byte> data = typed_field_bytes(proto, type, static_cast<std::size_t>(numel), what);
    return upload(type, shape, data.data(), device);
}

Value value_from_host(const HostTensor &host, const Device &device) {
    const std::size_t size = element_size(host.type);
    if (size == 0) compute_dtype(host.type);  // throws for string, undefined
    const int64_t n = checked_numel(host.shape, "feed");
    if (host.data.size() != static_cast<std::size_t>(n) * size)
        throw InputError("InputError: a " + element_type_name(host.type) + " tensor of shape " + shape_str(host.shape) +
                         " needs " + std::to_string(n * static_cast<int64_t>(size)) + " bytes, got " +
                         std::to_string(host.data.size()));
    return upload(host.type, host.shape, host.data.data(), device);
}

HostTensor value_to_host(const Value &value) {
    HostTensor out;
    out.type = value.type;
    out.shape = value.tensor.shape();
    const std::size_t n = static_cast<std::size_t>(value.tensor.numel());
    const DType dtype = compute_dtype(value.type);
    const Tensor t = value.tensor.dtype() == dtype ? value.tensor : value.tensor.to(dtype);
    std::vector<std::byte> raw(n * dtype_size(dtype));
    if (n) t.contiguous().copy_to_host(raw.data(), raw.size());
    out.data.resize(n * element_size(value.type));
    switch (value.type) {
    case ElementType::float64: convert<float, double>(raw.data(), out.data.data(), n); break;
    case ElementType::int8: convert<int32_t, int8_t>(raw.data(), out.data.data(), n); break;
    case ElementType::uint8: convert<int32_t, uint8_t>(raw.data(), out.data.data(), n); break;
    case ElementType::int16: convert<int32_t, int16_t>(raw.data(), out.data.data(), n); break;
    case ElementType::uint16: convert<int32_t, uint16_t>(raw.data(), out.data.data(), n); break;
    case ElementType::uint32: convert<int64_t, uint32_t>(raw.data(), out.data.data(), n); break;
    default: out.data = std::move(raw); break;
    }
    return out;
}

Value make(Tensor tensor, ElementType type) { return Value{std::move(tensor), type}; }

ElementType element_type_of(DType dtype) {
    switch (dtype) {
    case DType::f32: return ElementType::float32;
    case DType::f16: return ElementType::float16;
    case DType::bf16: return ElementType::bfloat16;
    case DType::i32: return ElementType::int32;
    case DType::i64: return ElementType::int64;
    case DType::boolean: return ElementType::boolean;
    default: return ElementType::undefined;  // the block-quantized dtypes have no ONNX element type
    }
}

bool is_float(ElementType type) {
    return type == ElementType::float32 || type == ElementType::float16 || type == ElementType::bfloat16 ||
           type == ElementType::float64;
}

}  // namespace detail
}  // namespace tinyfin::onnx
