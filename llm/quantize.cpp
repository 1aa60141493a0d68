// Quantization schemes and the GGUF quantizer (quantize.hpp).
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include <sentencepiece_processor.h>

#include <tinyfin/llm/errors.hpp>
#include <tinyfin/llm/mapped_file.hpp>
#include <tinyfin/llm/quantize.hpp>
#include <tinyfin/llm/tokenizer.hpp>

#include "tokenizer/gguf_vocabulary.hpp"
#include "weights.hpp"

namespace tinyfin::llm {

namespace {

// llama.cpp's enum llama_ftype numbers (general.file_type).
const QuantScheme kSchemes[] = {
    {"q8_0", DType::q8_0, 7},    {"q4_0", DType::q4_0, 2},    {"q4_1", DType::q4_1, 3},    {"q5_0", DType::q5_0, 8},
    {"q5_1", DType::q5_1, 9},    {"q4_k_s", DType::q4_k, 14}, {"q4_k_m", DType::q4_k, 15}, {"q5_k_s", DType::q5_k, 16},
    {"q5_k_m", DType::q5_k, 17}, {"q6_k", DType::q6_k, 18},
};

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third between.
bool use_more_bits(int64_t layer, int64_t n) { return layer < n / 8 || layer >= 7 * n / 8 || (layer - n / 8) % 3 == 2; }

// The type a k-quant row length that is not whole 256-blocks falls back to (llama.cpp's choice).
DType fallback(DType t) {
    switch (t) {
    case DType::q4_k: return DType::q5_0;
    case DType::q5_k: return DType::q5_1;
    case DType::q6_k: return DType::q8_0;
    default: return t;
    }
}

[[noreturn]] void write_failed(const std::string &path) {
    throw FileError("FileError: cannot write '" + path + "': " + std::strerror(errno));
}

// A GGUF file written front to back.
class GgufWriter {
public:
    explicit GgufWriter(const std::string &path) : path_(path), f_(std::fopen(path.c_str(), "wb"), &std::fclose) {
        if (!f_) write_failed(path);
    }
    void bytes(const void *p, std::size_t n) {
        if (n && std::fwrite(p, 1, n, f_.get()) != n) write_failed(path_);
        pos_ += n;
    }
    template <typename T>
    void pod(T v) {
        bytes(&v, sizeof v);
    }
    void string(const std::string &s) {
        pod<uint64_t>(s.size());
        bytes(s.data(), s.size());
    }
    void pad(uint64_t alignment) {
        static const char zeros[64] = {};
        const uint64_t n = (alignment - pos_ % alignment) % alignment;
        bytes(zeros, n);
    }
    void value(const GgufValue &v) {
        switch (v.type) {
        case GgufType::u8: pod<uint8_t>(static_cast<uint8_t>(v.u)); break;
        case GgufType::i8: pod<int8_t>(static_cast<int8_t>(v.i)); break;
        case GgufType::u16: pod<uint16_t>(static_cast<uint16_t>(v.u)); break;
        case GgufType::i16: pod<int16_t>(static_cast<int16_t>(v.i)); break;
        case GgufType::u32: pod<uint32_t>(static_cast<uint32_t>(v.u)); break;
        case GgufType::i32: pod<int32_t>(static_cast<int32_t>(v.i)); break;
        case GgufType::u64: pod<uint64_t>(v.u); break;
        case GgufType::i64: pod<int64_t>(v.i); break;
        case GgufType::f32: pod<float>(static_cast<float>(v.f)); break;
        case GgufType::f64: pod<double>(v.f); break;
        case GgufType::boolean: pod<uint8_t>(v.u ? 1 : 0); break;
        case GgufType::string: string(v.s); break;
        case GgufType::array:
            pod<uint32_t>(static_cast<uint32_t>(v.element_type));
            pod<uint64_t>(v.array.size());
            for (const auto &e : v.array) value(e);
            break;
        }
    }
    void key_value(const std::string &key, const GgufValue &v) {
        string(key);
        pod<uint32_t>(static_cast<uint32_t>(v.type));
        value(v);
    }
    void close() {
        if (std::fflush(f_.get()) != 0) write_failed(path_);
        if (std::fclose(f_.release()) != 0) write_failed(path_);
    }

private:
    std::string path_;
    std::unique_ptr<FILE, int (*)(FILE *)> f_;
    uint64_t pos_ = 0;
};

GgufValue u32(uint64_t x) {
    GgufValue v;
    v.type = GgufType::u32;
    v.u = x;
    return v;
}
GgufValue f32(double x) {
    GgufValue v;
    v.type = GgufType::f32;
    v.f = x;
    return v;
}
GgufValue str(std::string s) {
    GgufValue v;
    v.type = GgufType::string;
    v.s = std::move(s);
    return v;
}

// A Hugging Face directory's tokenizer.model as GGUF's "llama" vocabulary (tokens, scores, token
// types: 1 normal, 2 unknown, 3 control, 5 unused, 6 byte), as llama.cpp's converter writes it.
void add_sentencepiece_vocabulary(const std::string &dir, std::vector<std::pair<std::string, GgufValue>> &md) {
    const std::filesystem::path model = std::filesystem::path(dir) / "tokenizer.model";
    std::error_code ec;
    if (!std::filesystem::is_regular_file(model, ec)) return;
    const MappedFile file(model.string());
    const auto bytes = file.bytes();
    sentencepiece::SentencePieceProcessor sp;
    if (!sp.LoadFromSerializedProto(std::string_view(reinterpret_cast<const char *>(bytes.data()), bytes.size())).ok())
        throw FormatError("FormatError: '" + model.string() + "' is not a SentencePiece model");
    // BOS/EOS handling from tokenizer_config.json beside it, as the loader reads it.
    const auto tok = Tokenizer::from_sentencepiece(model.string());
    const int n = sp.GetPieceSize();
    GgufValue tokens, scores, types;
    tokens.type = scores.type = types.type = GgufType::array;
    tokens.element_type = GgufType::string;
    scores.element_type = GgufType::f32;
    types.element_type = GgufType::i32;
    for (int i = 0; i < n; ++i) {
        tokens.array.push_back(str(sp.IdToPiece(i)));
        scores.array.push_back(f32(sp.GetScore(i)));
        GgufValue t;
        t.type = GgufType::i32;
        t.i = sp.IsUnknown(i) ? 2 : sp.IsControl(i) ? 3 : sp.IsUnused(i) ? 5 : sp.IsByte(i) ? 6 : 1;
        types.array.push_back(t);
    }
    GgufValue yes, no;
    yes.type = no.type = GgufType::boolean;
    yes.u = tok->adds_bos() ? 1 : 0;
    no.u = tok->adds_eos() ? 1 : 0;
    md.emplace_back("tokenizer.ggml.model", str("llama"));
    md.emplace_back("tokenizer.ggml.tokens", std::move(tokens));
    md.emplace_back("tokenizer.ggml.scores", std::move(scores));
    md.emplace_back("tokenizer.ggml.token_type", std::move(types));
    if (sp.unk_id() >= 0) md.emplace_back("tokenizer.ggml.unknown_token_id", u32(static_cast<uint64_t>(sp.unk_id())));
    md.emplace_back("tokenizer.ggml.add_bos_token", yes);
    md.emplace_back("tokenizer.ggml.add_eos_token", no);
}

// key = value, replacing the key's earlier value (a GGUF file holds each key once).
void set_key(std::vector<std::pair<std::string, GgufValue>> &md, const std::string &key, GgufValue value) {
    for (auto &[k, v] : md)
        if (k == key) {
            v = std::move(value);
            return;
        }
    md.emplace_back(key, std::move(value));
}

GgufValue array_of(GgufType element) {
    GgufValue v;
    v.type = GgufType::array;
    v.element_type = element;
    return v;
}

GgufValue boolean(bool b) {
    GgufValue v;
    v.type = GgufType::boolean;
    v.u = b ? 1 : 0;
    return v;
}

// A byte-level BPE vocabulary (tokenizer/gguf_vocabulary.hpp) as GGUF's "gpt2" keys, as
// llama.cpp's converter writes them. Its BOS/EOS ids replace config.json's; where it has none,
// config.json's stay (llama.cpp's choice).
void add_gpt2_vocabulary(const Vocabulary &v, std::vector<std::pair<std::string, GgufValue>> &md) {
    GgufValue tokens = array_of(GgufType::string), types = array_of(GgufType::i32), merges = array_of(GgufType::string);
    for (const std::string &t : v.tokens) tokens.array.push_back(str(t));
    for (const int32_t t : v.token_types) {
        GgufValue e;
        e.type = GgufType::i32;
        e.i = t;
        types.array.push_back(e);
    }
    for (const std::string &m : v.merges) merges.array.push_back(str(m));
    md.emplace_back("tokenizer.ggml.model", str(v.model));
    md.emplace_back("tokenizer.ggml.pre", str(v.pre));
    md.emplace_back("tokenizer.ggml.tokens", std::move(tokens));
    md.emplace_back("tokenizer.ggml.token_type", std::move(types));
    md.emplace_back("tokenizer.ggml.merges", std::move(merges));
    const auto id = [&](const char *key, int32_t value) {
        if (value >= 0) set_key(md, key, u32(static_cast<uint64_t>(value)));
    };
    id("tokenizer.ggml.bos_token_id", v.bos_id);
    id("tokenizer.ggml.eos_token_id", v.eos_id);
    id("tokenizer.ggml.unknown_token_id", v.unk_id);
    id("tokenizer.ggml.padding_token_id", v.pad_id);
    id("tokenizer.ggml.eot_token_id", v.eot_id);
    md.emplace_back("tokenizer.ggml.add_bos_token", boolean(v.add_bos));
    md.emplace_back("tokenizer.ggml.add_eos_token", boolean(v.add_eos));
    if (!v.chat_template.empty()) md.emplace_back("tokenizer.chat_template", str(v.chat_template));
}

// A Hugging Face directory's tokenizer as the loader reads it (Tokenizer::from_directory:
// tokenizer.json before tokenizer.model): a byte-level BPE tokenizer.json as GGUF's "gpt2"
// vocabulary; a tokenizer.json GGUF cannot carry is an error unless a tokenizer.model beside it
// (a SentencePiece model converted to tokenizer.json: Llama 2, Mistral) is the same tokenizer,
// which becomes the "llama" vocabulary.
void add_directory_vocabulary(const std::string &dir, int64_t vocab_size,
                              std::vector<std::pair<std::string, GgufValue>> &md) {
    const std::filesystem::path json = std::filesystem::path(dir) / "tokenizer.json";
    std::error_code ec;
    if (std::filesystem::exists(json, ec)) {
        try {
            add_gpt2_vocabulary(detail::gpt2_vocabulary_from_tokenizer_json(json.string(), vocab_size), md);
            return;
        } catch (const TokenizerError &) {
            if (!std::filesystem::is_regular_file(std::filesystem::path(dir) / "tokenizer.model", ec)) throw;
        }
    }
    add_sentencepiece_vocabulary(dir, md);
}

// One tensor of the output file.
struct OutTensor {
    std::string name, role;
    int64_t layer = 0;
    const TensorData *src = nullptr;
    std::vector<std::byte> own;  // bytes of a tensor made here (rope_freqs), F32
    Shape shape;
    DType out = DType::f32;
    int64_t permute_heads = 0;  // llama.cpp's Q/K row permutation for n heads (0: none)
    uint64_t offset = 0, nbytes = 0;
};

uint64_t storage_bytes(const Shape &shape, DType t) {
    uint64_t n = 1;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    return n / static_cast<uint64_t>(dtype_block_length(t)) * dtype_block_bytes(t);
}

// Rows of each head reordered so that rotary pairs (i, i + D/2) become adjacent (llama.cpp's
// convert_hf_to_gguf.py permute): new row h*D + 2i + j is old row h*D + j*D/2 + i.
std::vector<std::byte> permute_rows(std::span<const std::byte> bytes, int64_t rows, int64_t heads) {
    const std::size_t row = bytes.size() / static_cast<std::size_t>(rows);
    const int64_t d = rows / heads;
    std::vector<std::byte> out(bytes.size());
    for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < d / 2; ++i)
            for (int64_t j = 0; j < 2; ++j) {
                const auto to = static_cast<std::size_t>(h * d + 2 * i + j),
                           from = static_cast<std::size_t>(h * d + j * d / 2 + i);
                std::memcpy(out.data() + to * row, bytes.data() + from * row, row);
            }
    return out;
}

}  // namespace

QuantScheme quant_scheme(std::string_view name) {
    std::string n(name);
    for (char &ch : n) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (n == "q4_k") n = "q4_k_m";
    if (n == "q5_k") n = "q5_k_m";
    for (const auto &s : kSchemes)
        if (s.name == n) return s;
    std::string names;
    for (const auto &s : quant_scheme_names()) names += (names.empty() ? "" : ", ") + s;
    throw ConfigError("ConfigError: unknown quantization type '" + std::string(name) + "' (use one of " + names + ")");
}

std::vector<std::string> quant_scheme_names() {
    std::vector<std::string> names;
    for (const auto &s : kSchemes) names.push_back(s.name);
    names.insert(names.begin() + 6, "q4_k");
    names.insert(names.begin() + 9, "q5_k");
    return names;
}

std::optional<DType> quant_type_for(const QuantScheme &scheme, std::string_view role, int64_t layer, int64_t num_layers,
                                    const Shape &shape) {
    if (shape.size() < 2) return std::nullopt;
    DType t = scheme.base;
    const bool k_mix = scheme.file_type >= 14 && scheme.file_type <= 17;
    if (role == "lm_head") {
        // llama.cpp: the output matrix in Q6_K unless the file is Q8_0.
        if (t != DType::q8_0) t = DType::q6_k;
    } else if (role == "wv" && k_mix) {
        if ((scheme.file_type == 15 || scheme.file_type == 17) && use_more_bits(layer, num_layers))
            t = DType::q6_k;
        else if (scheme.file_type == 14 && layer < 4)
            t = DType::q5_k;
    } else if (role == "w_down" && k_mix) {
        if ((scheme.file_type == 15 || scheme.file_type == 17) && use_more_bits(layer, num_layers))
            t = DType::q6_k;
        else if (scheme.file_type == 14 && layer < num_layers / 8)
            t = DType::q5_k;
    }
    const int64_t row = shape.back();
    if (row % dtype_block_length(t) != 0) t = fallback(t);
    if (row % dtype_block_length(t) != 0) return std::nullopt;
    return t;
}

QuantizeFileResult quantize_model_file(const std::string &input, const std::string &output,
                                       const QuantizeFileOptions &options) {
    const QuantScheme scheme = quant_scheme(options.scheme);
    const Opened o = open_model(input);
    const ModelConfig &c = o.config;
    const Device cpu = Device::parse("cpu");
    std::vector<OutTensor> tensors;
    auto add = [&](const std::string &role, int64_t layer, bool required) {
        const std::string name = o.name(role, layer);
        const TensorData *t = o.source.find(name);
        if (!t) {
            if (required) throw ConfigError("ConfigError: model '" + input + "' has no tensor '" + name + "'");
            return;
        }
        const Shape want = expected_shape(c, role);
        if (t->shape != want)
            throw ConfigError("ConfigError: tensor '" + name + "' has shape " + shape_str(t->shape) +
                              ", the config needs " + shape_str(want));
        const TensorTypeInfo &info = tensor_type_info(t->type);
        if (!info.dtype || *info.dtype == DType::i32 || *info.dtype == DType::i64)
            throw ConfigError("ConfigError: tensor '" + name + "' has type " + info.name +
                              ", which tinyfin cannot read");
        OutTensor ot;
        ot.name = gguf_name(role, layer);
        ot.role = role;
        ot.layer = layer;
        ot.src = t;
        ot.shape = t->shape;
        const std::string policy_role = role == "embed" && c.tie_word_embeddings ? "lm_head" : role;
        const std::optional<DType> q = quant_type_for(scheme, policy_role, layer, c.num_layers, t->shape);
        const DType src = *info.dtype;
        if (q)
            ot.out = *q;
        else
            ot.out = t->shape.size() < 2 || is_quantized(src) ? DType::f32 : src;
        if (is_quantized(src) && ot.out != src && !options.allow_requantize)
            throw ConfigError("ConfigError: tensor '" + name + "' is already " + info.name +
                              "; quantizing it again adds the errors of both (allow it with --allow-requantize)");
        // llama.cpp's converter permutes llama and mistral, not qwen2 (read_gguf_config's rule).
        if (!o.source.gguf && c.architecture != Architecture::qwen2 && (role == "wq" || role == "wk"))
            ot.permute_heads = role == "wq" ? c.num_heads : c.num_kv_heads;
        tensors.push_back(std::move(ot));
    };
    add("embed", 0, true);
    add("norm", 0, true);
    if (!c.tie_word_embeddings) add("lm_head", 0, true);
    // llama3's rope scaling travels as per-frequency divisors, as llama.cpp's converter writes it.
    if (const TensorData *rf = o.source.gguf ? o.source.find("rope_freqs.weight") : nullptr) {
        OutTensor ot;
        ot.name = "rope_freqs.weight";
        ot.src = rf;
        ot.shape = rf->shape;
        ot.out = DType::f32;
        if (rf->type != TensorType::f32) throw ConfigError("ConfigError: GGUF rope_freqs.weight must be F32");
        tensors.push_back(std::move(ot));
    } else if (!o.source.gguf && c.rope_scaling.kind == RopeScaling::Kind::llama3) {
        ModelConfig plain = c;
        plain.rope_scaling = {};
        const std::vector<double> base = config_frequencies(plain), scaled = config_frequencies(c);
        OutTensor ot;
        ot.name = "rope_freqs.weight";
        ot.shape = {static_cast<int64_t>(base.size())};
        ot.out = DType::f32;
        ot.own.resize(base.size() * 4);
        for (std::size_t i = 0; i < base.size(); ++i) {
            const auto f = static_cast<float>(base[i] / scaled[i]);
            std::memcpy(ot.own.data() + 4 * i, &f, 4);
        }
        tensors.push_back(std::move(ot));
    }
    for (int64_t l = 0; l < c.num_layers; ++l)
        for (const auto &w : layer_weights(c)) add(w, l, true);

    // Metadata: a GGUF input's keys are kept (tokenizer.ggml.* included); a Hugging Face one's
    // come from config.json.
    std::vector<std::pair<std::string, GgufValue>> md;
    const std::string arch = architecture_name(c.architecture);
    if (o.gguf) {
        for (const auto &[k, v] : o.gguf->metadata())
            if (k != "general.file_type" && k != "general.quantization_version" && k != "general.alignment")
                md.emplace_back(k, v);
    } else {
        auto key = [&](const char *s) { return arch + "." + s; };
        md.emplace_back("general.architecture", str(arch));
        md.emplace_back("general.name", str(std::filesystem::path(input).filename().string()));
        md.emplace_back(key("vocab_size"), u32(static_cast<uint64_t>(c.vocab_size)));
        md.emplace_back(key("context_length"), u32(static_cast<uint64_t>(c.max_position)));
        md.emplace_back(key("embedding_length"), u32(static_cast<uint64_t>(c.hidden_size)));
        md.emplace_back(key("block_count"), u32(static_cast<uint64_t>(c.num_layers)));
        md.emplace_back(key("feed_forward_length"), u32(static_cast<uint64_t>(c.intermediate_size)));
        md.emplace_back(key("attention.head_count"), u32(static_cast<uint64_t>(c.num_heads)));
        md.emplace_back(key("attention.head_count_kv"), u32(static_cast<uint64_t>(c.num_kv_heads)));
        md.emplace_back(key("rope.dimension_count"), u32(static_cast<uint64_t>(c.head_dim)));
        if (c.head_dim != c.hidden_size / c.num_heads) {
            md.emplace_back(key("attention.key_length"), u32(static_cast<uint64_t>(c.head_dim)));
            md.emplace_back(key("attention.value_length"), u32(static_cast<uint64_t>(c.head_dim)));
        }
        md.emplace_back(key("rope.freq_base"), f32(c.rope_theta));
        md.emplace_back(key("attention.layer_norm_rms_epsilon"), f32(c.rms_norm_eps));
        if (c.sliding_window > 0)
            md.emplace_back(key("attention.sliding_window"), u32(static_cast<uint64_t>(c.sliding_window)));
        if (c.rope_scaling.kind == RopeScaling::Kind::linear) {
            md.emplace_back(key("rope.scaling.type"), str("linear"));
            md.emplace_back(key("rope.scaling.factor"), f32(c.rope_scaling.factor));
        }
        if (c.bos_token_id >= 0)
            md.emplace_back("tokenizer.ggml.bos_token_id", u32(static_cast<uint64_t>(c.bos_token_id)));
        if (!c.eos_token_ids.empty())
            md.emplace_back("tokenizer.ggml.eos_token_id", u32(static_cast<uint64_t>(c.eos_token_ids[0])));
        add_directory_vocabulary(input, c.vocab_size, md);
    }
    md.emplace_back("general.file_type", u32(scheme.file_type));
    md.emplace_back("general.quantization_version", u32(2));
    md.emplace_back("general.alignment", u32(32));

    constexpr uint64_t kAlign = 32;
    uint64_t offset = 0;
    for (auto &t : tensors) {
        t.nbytes = storage_bytes(t.shape, t.out);
        t.offset = offset;
        offset += (t.nbytes + kAlign - 1) / kAlign * kAlign;
    }

    QuantizeFileResult result;
    GgufWriter w(output);
    w.bytes("GGUF", 4);
    w.pod<uint32_t>(3);
    w.pod<uint64_t>(tensors.size());
    w.pod<uint64_t>(md.size());
    for (const auto &[k, v] : md) w.key_value(k, v);
    for (const auto &t : tensors) {
        w.string(t.name);
        w.pod<uint32_t>(static_cast<uint32_t>(t.shape.size()));
        for (std::size_t d = t.shape.size(); d-- > 0;) w.pod<uint64_t>(static_cast<uint64_t>(t.shape[d]));
        w.pod<uint32_t>(static_cast<uint32_t>(ggml_type_of(t.out)));
        w.pod<uint64_t>(t.offset);
    }
    w.pad(kAlign);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const OutTensor &t = tensors[i];
        std::span<const std::byte> bytes = t.src ? t.src->bytes : std::span<const std::byte>(t.own);
        result.bytes_in += bytes.size();
        std::vector<std::byte> permuted;
        if (t.permute_heads > 0) {
            permuted = permute_rows(bytes, t.shape[0], t.permute_heads);
            bytes = permuted;
        }
        const DType src = t.src ? *tensor_type_info(t.src->type).dtype : DType::f32;
        if (src == t.out) {
            w.bytes(bytes.data(), bytes.size());
        } else {
            Tensor x = from_host(bytes.data(), t.shape, src, cpu);
            if (is_quantized(src)) x = dequantize(x, DType::f32);
            const Tensor y = is_quantized(t.out) ? quantize(x, t.out) : x.to(t.out);
            std::vector<std::byte> out(static_cast<std::size_t>(y.nbytes()));
            y.copy_to_host(out.data(), out.size());
            w.bytes(out.data(), out.size());
        }
        w.pad(kAlign);
        result.bytes_out += t.nbytes;
        result.types.emplace_back(t.name, tensor_type_info(static_cast<uint32_t>(ggml_type_of(t.out)))->name);
        if (options.verbose) {
            const int width = 30, done = static_cast<int>(width * (i + 1) / tensors.size());
            std::fprintf(stderr, "\rtinyfin-quantize: %s [%.*s%*s] %zu/%zu", scheme.name.c_str(), done,
                         "##############################", width - done, "", i + 1, tensors.size());
        }
    }
    w.close();
    if (options.verbose) std::fprintf(stderr, "\n");
    result.tensors = tensors.size();
    return result;
}

}  // namespace tinyfin::llm
