// tinyfin._llm: libtinyfin-llm (include/tinyfin/llm.hpp) for tinyfin.llm. A module of its own so
// that `import tinyfin` never loads the model formats; python/tinyfin/llm.py is the Python half.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "tinyfin/llm.hpp"

namespace py = pybind11;
using namespace tinyfin;
using namespace tinyfin::llm;

namespace {

DType kv_dtype(const std::string &name) {
    const auto dt = dtype_named(name);
    if (!dt || (*dt != DType::f32 && *dt != DType::f16 && *dt != DType::bf16))
        throw ValueError("ValueError: kv_cache must be 'f32', 'f16' or 'bf16', got '" + name + "'");
    return *dt;
}

py::array_t<float> to_numpy(const Tensor &t) {
    std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
    py::array_t<float> out(shape);
    t.contiguous().copy_to_host(out.mutable_data(), static_cast<std::size_t>(t.numel()) * sizeof(float));
    return out;
}

}  // namespace

PYBIND11_MODULE(_llm, m) {
    m.doc() = "libtinyfin-llm's bindings; import tinyfin.llm, not this module";
    py::object base = py::module_::import("tinyfin._C").attr("Error");
    static py::exception<FileError> file_error(m, "FileError", base.ptr());
    static py::exception<FormatError> format_error(m, "FormatError", base.ptr());
    static py::exception<ConfigError> config_error(m, "ConfigError", base.ptr());
    static py::exception<TokenizerError> tokenizer_error(m, "TokenizerError", base.ptr());
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const FileError &e) {
            PyErr_SetString(file_error.ptr(), e.what());
        } catch (const FormatError &e) {
            PyErr_SetString(format_error.ptr(), e.what());
        } catch (const ConfigError &e) {
            PyErr_SetString(config_error.ptr(), e.what());
        } catch (const TokenizerError &e) {
            PyErr_SetString(tokenizer_error.ptr(), e.what());
        }
    });

    py::class_<ModelConfig>(m, "ModelConfig")
        .def_property_readonly("architecture", [](const ModelConfig &c) { return architecture_name(c.architecture); })
        .def_readonly("vocab_size", &ModelConfig::vocab_size)
        .def_readonly("hidden_size", &ModelConfig::hidden_size)
        .def_readonly("intermediate_size", &ModelConfig::intermediate_size)
        .def_readonly("num_layers", &ModelConfig::num_layers)
        .def_readonly("num_heads", &ModelConfig::num_heads)
        .def_readonly("num_kv_heads", &ModelConfig::num_kv_heads)
        .def_readonly("head_dim", &ModelConfig::head_dim)
        .def_readonly("max_position", &ModelConfig::max_position)
        .def_readonly("rms_norm_eps", &ModelConfig::rms_norm_eps)
        .def_readonly("rope_theta", &ModelConfig::rope_theta)
        .def_readonly("tie_word_embeddings", &ModelConfig::tie_word_embeddings)
        .def_readonly("attention_bias", &ModelConfig::attention_bias)
        .def_readonly("sliding_window", &ModelConfig::sliding_window)
        .def_readonly("eos_token_ids", &ModelConfig::eos_token_ids)
        .def_readonly("rope_interleaved", &ModelConfig::rope_interleaved);

    py::class_<Tokenizer>(m, "Tokenizer")
        .def(
            "encode",
            [](const Tokenizer &t, const std::string &text, bool add_bos, bool parse_special) {
                EncodeOptions o;
                o.add_bos = add_bos;
                o.parse_special = parse_special;
                return t.encode(text, o);
            },
            py::arg("text"), py::arg("add_bos") = true, py::arg("parse_special") = false)
        .def(
            "decode",
            [](const Tokenizer &t, const std::vector<int32_t> &ids, bool skip_special) {
                return py::bytes(t.decode(ids, skip_special)).attr("decode")("utf-8", "replace");
            },
            py::arg("ids"), py::arg("skip_special") = true)
        .def_property_readonly("vocab_size", &Tokenizer::vocab_size)
        .def_property_readonly("bos_id", &Tokenizer::bos_id)
        .def_property_readonly("eos_id", &Tokenizer::eos_id)
        .def_property_readonly("eos_ids", &Tokenizer::eos_ids)
        .def_property_readonly("chat_template", &Tokenizer::chat_template);

    py::class_<Model>(m, "Model")
        .def_static(
            "load",
            [](const std::string &path, const std::string &backend, int64_t context, int64_t batch,
               int64_t prefill_chunk, bool weights_f32, bool verbose, const std::string &quantize,
               const std::string &kv_cache, bool map_weights, bool fuse_products, bool prepack_weights) {
                LoadOptions o;
                o.fuse_products = fuse_products;
                o.quantize = quantize;
                o.kv_cache_dtype = kv_dtype(kv_cache);
                o.map_weights = map_weights;
                o.prepack_weights = prepack_weights;
                o.backend = backend;
                o.context = context;
                o.batch = batch;
                o.prefill_chunk = prefill_chunk;
                o.weights_f32 = weights_f32;
                o.verbose = verbose;
                py::gil_scoped_release release;
                return Model::load(path, o);
            },
            py::arg("path"), py::arg("backend") = "", py::arg("context") = 0, py::arg("batch") = 1,
            py::arg("prefill_chunk") = 512, py::arg("weights_f32") = false, py::arg("verbose") = false,
            py::arg("quantize") = "", py::arg("kv_cache") = "f32", py::arg("map_weights") = true,
            py::arg("fuse_products") = true, py::arg("prepack_weights") = true)
        .def_static(
            "estimate",
            [](const std::string &path, int64_t context, int64_t batch, int64_t prefill_chunk,
               const std::string &quantize, const std::string &kv_cache) {
                LoadOptions o;
                o.quantize = quantize;
                o.kv_cache_dtype = kv_dtype(kv_cache);
                o.context = context;
                o.batch = batch;
                o.prefill_chunk = prefill_chunk;
                const MemoryEstimate e = Model::estimate(path, o);
                return py::dict(py::arg("weights") = e.weights, py::arg("kv_cache") = e.kv_cache,
                                py::arg("activations") = e.activations,
                                py::arg("attention_scores") = e.attention_scores, py::arg("total") = e.total());
            },
            py::arg("path"), py::arg("context") = 0, py::arg("batch") = 1, py::arg("prefill_chunk") = 512,
            py::arg("quantize") = "", py::arg("kv_cache") = "f32")
        .def_property_readonly("config", &Model::config, py::return_value_policy::reference_internal)
        .def_property_readonly("device", [](const Model &m) { return m.device().str(); })
        .def_property_readonly("tokenizer", &Model::tokenizer, py::return_value_policy::reference_internal)
        .def_property_readonly("bytes_in_place", &Model::bytes_in_place)
        .def_property_readonly("bytes_copied", &Model::bytes_copied)
        .def_property_readonly("bytes_prepacked", &Model::bytes_prepacked)
        .def_property_readonly("fused_matrices", &Model::fused_matrices)
        .def("logits",
             [](const Model &m, const std::vector<int32_t> &ids) {
                 Tensor t;
                 {
                     py::gil_scoped_release release;
                     t = m.logits(ids);
                 }
                 return to_numpy(t);
             })
        .def(
            "generate_ids",
            [](const Model &m, const std::vector<std::vector<int32_t>> &prompts, int64_t max_new_tokens,
               double temperature, int64_t top_k, double top_p, double min_p, double repetition_penalty, uint64_t seed,
               const std::vector<std::string> &stop, bool ignore_eos, int64_t context,
               std::function<bool(std::size_t, int32_t)> on_token) {
                GenerationOptions o;
                o.max_new_tokens = max_new_tokens;
                o.sampling = {temperature, top_k, top_p, min_p, repetition_penalty, seed};
                o.stop = stop;
                o.ignore_eos = ignore_eos;
                o.on_token = std::move(on_token);
                const GenerationResult r = m.generate(prompts, o, context);
                return py::make_tuple(r.tokens, r.finish_reason);
            },
            py::arg("prompts"), py::arg("max_new_tokens") = 128, py::arg("temperature") = 0.0, py::arg("top_k") = 0,
            py::arg("top_p") = 1.0, py::arg("min_p") = 0.0, py::arg("repetition_penalty") = 1.0, py::arg("seed") = 0,
            py::arg("stop") = std::vector<std::string>{}, py::arg("ignore_eos") = false, py::arg("context") = 0,
            py::arg("on_token") = nullptr)
        .def("session_logits",
             // Prefill then decode one token at a time in a Session: the logits of every step,
             // [batch, steps, vocab] (for tests of the KV cache against logits()).
             [](const Model &m, const std::vector<std::vector<int32_t>> &prompts,
                const std::vector<std::vector<int32_t>> &steps, int64_t context) {
                 Session s(m, static_cast<int64_t>(prompts.size()), context);
                 std::vector<Tensor> out = {s.prefill(prompts)};
                 for (const auto &tokens : steps) out.push_back(s.decode(tokens));
                 return to_numpy(stack(out, 1));
             });

    m.def(
        "apply_chat_template",
        [](const std::vector<std::pair<std::string, std::string>> &messages, const std::string &family,
           const std::string &model_template, bool add_generation_prompt) {
            std::vector<ChatMessage> chat;
            for (const auto &[role, content] : messages) chat.push_back({role, content});
            return apply_chat_template(chat, family, model_template, add_generation_prompt);
        },
        py::arg("messages"), py::arg("family") = "auto", py::arg("model_template") = "",
        py::arg("add_generation_prompt") = true);
    m.def("read_safetensors", [](const std::string &path) {
        SafetensorsFile f(path);
        py::dict d;
        for (const auto &t : f.tensors())
            d[py::str(t.name)] = py::make_tuple(tensor_type_info(t.type).name, t.shape, t.bytes.size());
        return d;
    });
    m.def(
        "quantize_file",
        [](const std::string &src, const std::string &dst, const std::string &type, bool allow_requantize,
           bool verbose) {
            QuantizeFileOptions o;
            o.scheme = type;
            o.allow_requantize = allow_requantize;
            o.verbose = verbose;
            QuantizeFileResult r;
            {
                py::gil_scoped_release release;
                r = quantize_model_file(src, dst, o);
            }
            return r.types;
        },
        py::arg("src"), py::arg("dst"), py::arg("type") = "q8_0", py::arg("allow_requantize") = false,
        py::arg("verbose") = false);
    m.def("read_gguf", [](const std::string &path) {
        GgufFile f(path);
        py::dict meta, tensors;
        for (const auto &[k, v] : f.metadata()) {
            if (v.type == GgufType::array)
                meta[py::str(k)] = py::int_(v.array.size());
            else if (v.type == GgufType::string)
                meta[py::str(k)] = py::bytes(v.s);
            else if (v.is_float())
                meta[py::str(k)] = v.f;
            else if (v.type == GgufType::boolean)
                meta[py::str(k)] = v.u != 0;
            else
                meta[py::str(k)] = v.to_int(k);
        }
        for (const auto &t : f.tensors())
            tensors[py::str(t.name)] = py::make_tuple(tensor_type_info(t.type).name, t.shape, t.bytes.size());
        return py::make_tuple(f.version(), meta, tensors);
    });
}
