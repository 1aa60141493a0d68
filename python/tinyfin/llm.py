"""tinyfin.llm: Llama-family language models from Hugging Face safetensors directories and GGUF
files, on tinyfin's backends (libtinyfin-llm, include/tinyfin/llm.hpp, docs/llm.md).

    import tinyfin.llm
    model = tinyfin.llm.load("TinyLlama-1.1B-Chat-v1.0", backend="cpu", ctx=2048)
    print(model.generate("The capital of France is", max_new_tokens=32, temperature=0.7, seed=1))
    logits = model.logits([1, 450, 7483])          # numpy [T, vocab]
    ids = model.tokenizer.encode("Hello")

Built when tinyfin is built with nlohmann-json; importing it otherwise raises ImportError.
"""
try:
    from . import _llm
except ImportError as e:  # pragma: no cover - depends on the build
    raise ImportError("tinyfin.llm is not built (libtinyfin-llm needs nlohmann-json3-dev)") from e

FileError = _llm.FileError
FormatError = _llm.FormatError
ConfigError = _llm.ConfigError
TokenizerError = _llm.TokenizerError
read_safetensors = _llm.read_safetensors
read_gguf = _llm.read_gguf


def apply_chat_template(messages, family="auto", model_template="", add_generation_prompt=True):
    """messages: [(role, content), ...] or [{"role": ..., "content": ...}, ...] -> the prompt text
    in the chat format of family ("llama2", "llama3", "mistral", "chatml", or "auto": detected
    from model_template, e.g. model.tokenizer's chat template)."""
    pairs = [(m["role"], m["content"]) if isinstance(m, dict) else tuple(m) for m in messages]
    return _llm.apply_chat_template(pairs, family, model_template, add_generation_prompt)


def estimate(path, ctx=0, batch=1, prefill_chunk=512, quantize="", kv_cache="f32"):
    """Bytes the model needs (weights, kv_cache, activations, total) without loading it."""
    return _llm.Model.estimate(path, ctx, batch, prefill_chunk, quantize, kv_cache)


def quantize_file(src, dst, type="q8_0", allow_requantize=False, verbose=False):
    """Writes a quantized GGUF file from a Hugging Face directory or a GGUF file (as the
    tinyfin-quantize tool does). type: "q8_0", "q4_0", "q4_k" (llama.cpp's Q4_K_M mix), ...
    Returns {tensor name: GGUF type name}."""
    return dict(_llm.quantize_file(str(src), str(dst), type, allow_requantize, verbose))


class Model:
    """A loaded model: config, tokenizer (None when its files have none), logits, generate."""

    def __init__(self, native):
        self._m = native

    @property
    def config(self):
        return self._m.config

    @property
    def tokenizer(self):
        return self._m.tokenizer

    @property
    def device(self):
        return self._m.device

    def logits(self, token_ids):
        """Logits [T, vocab] (numpy float32) of every position of one sequence of token ids."""
        return self._m.logits([int(t) for t in token_ids])

    def generate(self, prompt, max_new_tokens=128, temperature=0.0, top_k=0, top_p=1.0, min_p=0.0,
                 repetition_penalty=1.0, seed=0, stop=(), ignore_eos=False, ctx=0, stream=None):
        """Continues prompt: a string, a list of strings (one batch), a list of token ids or a
        list of such lists. Returns the new text (strings in) or token ids (ids in), a list
        when a list of prompts was given. stream(index, token_id) is called for each new token;
        returning False stops that sequence."""
        # A batch: a sequence of texts or of id sequences (not of ids: numpy integers included).
        batch = not isinstance(prompt, str) and len(prompt) > 0 and (
            isinstance(prompt[0], str) or hasattr(prompt[0], "__len__"))
        prompts = list(prompt) if batch else [prompt]
        text = isinstance(prompts[0], str)
        if text:
            if self.tokenizer is None:
                raise ValueError("this model has no tokenizer: pass token ids")
            ids = [self.tokenizer.encode(p) for p in prompts]
        else:
            ids = [[int(t) for t in p] for p in prompts]
        callback = None
        if stream is not None:
            def callback(i, tok):
                r = stream(i, tok)
                return True if r is None else bool(r)
        tokens, _ = self._m.generate_ids(ids, max_new_tokens, temperature, top_k, top_p, min_p,
                                         repetition_penalty, seed, list(stop), ignore_eos, ctx, callback)
        if text:
            out = []
            for t in tokens:
                s = self.tokenizer.decode(t)
                for st in stop:
                    if st and st in s:
                        s = s[:s.index(st)]
                out.append(s)
        else:
            out = tokens
        return out if batch else out[0]

    def session_logits(self, prompts, steps, ctx):
        """Logits [batch, 1 + len(steps), vocab] of a prefill then one decode per step (KV cache)."""
        return self._m.session_logits(prompts, steps, ctx)


def load(path, backend="", ctx=0, batch=1, prefill_chunk=512, weights_f32=False, verbose=False, quantize="",
         kv_cache="f32", map_weights=True, fuse_products=True, prepack_weights=True):
    """Loads a Hugging Face model directory or a .gguf file. backend: "" (the current one),
    "auto" (the best whose device has room), or a name such as "cpu" or "vulkan". quantize:
    "" (the file's types) or a type ("q8_0", "q4_0", "q4_k", ...) the f32/f16/bf16 matrices are
    quantized to on load, as tinyfin-quantize would write them. kv_cache: "f32", "f16" or "bf16",
    the dtype of the KV caches. map_weights: True (default) keeps every tensor over the mapped
    file on cpu (zero-copy); False copies the matrices of 2 MiB or more into huge pages (faster
    generation where the kernel has them; tinyfin-generate --no-mmap). fuse_products: True (default)
    runs a layer's q/k/v and its gate/up as one product each where the file stores them back to
    back or the loader copies them anyway (Model.fused_matrices counts them); False: one product
    per matrix. prepack_weights: True (default) lets the cpu plugin keep q4_0/q8_0/q4_k/q6_k matrices
    repacked for its dots (False: --no-prepack)."""
    return Model(_llm.Model.load(str(path), backend, ctx, batch, prefill_chunk, weights_f32, verbose, quantize,
                                 kv_cache, map_weights, fuse_products, prepack_weights))
