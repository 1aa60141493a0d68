"""tinyfin-quantize from a Hugging Face directory whose tokenizer is a byte-level BPE tokenizer.json
(GPT-2, Llama 3 and Qwen2 styles, trained here on the fortunes text with the reference BPE of
tokenizer/test_tokenizer_bpe.py): the GGUF file carries GGUF's "gpt2" vocabulary, read back by an
independent GGUF reader (gguf_quant.read_gguf) and checked key by key against the names and types
of ggml's docs/gguf.md and llama.cpp's converter (tokenizer.ggml.model, .pre, .tokens, .token_type,
.merges, .bos/eos/padding/eot_token_id, .add_bos_token, tokenizer.chat_template); then the GGUF
file's tokenizer encodes and decodes as the directory's on hand-checked strings (multi-byte UTF-8,
emoji, numbers, whitespace runs, added and special tokens, a decomposed accent for Qwen2's NFC),
and as the reference BPE (or hand-computed byte ids) says."""
import json
import os
import subprocess
import sys
import unicodedata

import pytest

import gguf_quant as gq
import llm_models as lm
import tinyfin as tf
import tinyfin.llm as llm

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "tokenizer"))
import corpus  # noqa: E402
import test_tokenizer_bpe as bpe  # noqa: E402

QWEN2_ASCII = bpe.LLAMA3_ASCII.replace("[0-9]{1,3}", "[0-9]")
QWEN2_PATTERN = bpe.LLAMA3_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")


def split_pre(pattern):
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}


# Added tokens after the 256 byte tokens and the merges: (content, special). "<sep>" is an
# ordinary added token (matched in any text), the others special (matched only when asked).
STYLES = {
    "gpt2": dict(ascii=bpe.GPT2_ASCII, pre=bpe.GPT2_PRE, ignore_merges=False, normalizer=None, arch="llama",
                 gguf_pre="gpt-2", added=[("<|endoftext|>", True), ("<sep>", False)],
                 config={"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "add_bos_token": False}),
    "llama3": dict(ascii=bpe.LLAMA3_ASCII, pre=split_pre(bpe.LLAMA3_PATTERN), ignore_merges=True, normalizer=None,
                   arch="llama", gguf_pre="llama-bpe",
                   added=[("<|begin_of_text|>", True), ("<|end_of_text|>", True), ("<|eot_id|>", True),
                          ("<|stop_here|>", True), ("<sep>", False)],
                   config={"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>", "add_bos_token": True,
                           "pad_token": "<|end_of_text|>"},
                   # <|stop_here|> is no end-of-turn name GGUF readers know: it goes in eot_token_id.
                   generation_eos=["<|end_of_text|>", "<|eot_id|>", "<|stop_here|>"]),
    "qwen2": dict(ascii=QWEN2_ASCII, pre=split_pre(QWEN2_PATTERN), ignore_merges=False, normalizer={"type": "NFC"},
                  arch="qwen2", gguf_pre="qwen2",
                  added=[("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True), ("<sep>", False)],
                  config={"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                          "add_bos_token": False,
                          "chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                                           "<|im_end|>\n{% endfor %}"}),
}
PAD = 3  # model vocabulary beyond the tokenizer's ids: "[PAD<id>]" entries of type unused (5)

TEXTS = [
    "Hello world", "The cat sat on the mat, and then 12345 cats left.", "  two leading spaces",
    "tabs\tand\nnewlines\n\n\nruns", "   ", "a    b", "trailing   ", "3.14159 and 2,718 and 1000000",
    "naïve café déjà vu", "Ünïcödé ßtraße", "日本語のテキスト", "Привет, мир", "emoji 🙂 and 👍🏽 and 🇫🇷",
    "mixed 中文 and English 123 !!!", "line one\r\nline two\r\n", "I'm you're he'll DON'T",
    "<sep> splits here<sep>and here", "special <|endoftext|> and <|im_end|> and <|eot_id|> as text",
    "Cafe\u0301 decomposed", "x" * 200,
] + [t for t in corpus.EDGE_CASES if t]


def build(work, name):
    """A tiny random-weight model directory with a trained tokenizer.json; returns (directory,
    reference BPE, [(content, id, special)], model vocab size)."""
    s = STYLES[name]
    training = corpus.printable_ascii(corpus.fortunes(["fortunes", "wisdom"]))
    reference = bpe.Reference(s["ascii"], bpe.train(s["ascii"], training, 200), s["ignore_merges"])
    n = len(reference.tokens)
    added = [(content, n + k, special) for k, (content, special) in enumerate(s["added"])]
    doc = bpe.tokenizer_json(reference, s["pre"], s["ignore_merges"])
    doc["normalizer"] = s["normalizer"]
    doc["added_tokens"] = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                            "normalized": False, "special": sp} for c, i, sp in added]
    vocab_size = n + len(added) + PAD
    cfg = dict(lm.ARCHS[s["arch"]], vocab_size=vocab_size)
    ids = {c: i for c, i, _ in added}
    cfg["bos_token_id"] = ids.get(s["config"]["bos_token"], 0)
    cfg["eos_token_id"] = ids[s["config"]["eos_token"]]
    path = lm.write_hf_dir(str(work / name), cfg, lm.random_weights(cfg, 3))
    with open(os.path.join(path, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False)
    with open(os.path.join(path, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(s["config"], f)
    if "generation_eos" in s:
        with open(os.path.join(path, "generation_config.json"), "w") as f:
            json.dump({"eos_token_id": [ids[t] for t in s["generation_eos"]]}, f)
    return path, reference, added, vocab_size


def quantize(src, dst):
    tool = os.environ.get("TINYFIN_QUANTIZE")
    if not tool:
        pytest.skip("TINYFIN_QUANTIZE is not set (meson test sets it)")
    return subprocess.run([tool, str(src), str(dst), "--type", "q8_0", "--quiet"], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, TINYFIN_BACKEND="cpu"))


@pytest.fixture(autouse=True)
def _cpu_default():
    tf.backend_set("cpu")
    yield


@pytest.fixture(scope="module", params=sorted(STYLES))
def converted(request, tmp_path_factory):
    work = tmp_path_factory.mktemp("quantize-vocab")
    path, reference, added, vocab_size = build(work, request.param)
    out = work / (request.param + ".gguf")
    r = quantize(path, out)
    assert r.returncode == 0, r.stderr
    return request.param, path, str(out), reference, added, vocab_size


def test_gguf_metadata_is_the_gpt2_vocabulary(converted):
    name, path, out, reference, added, vocab_size = converted
    s = STYLES[name]
    meta, _, info = gq.read_gguf(out)
    types = info["meta_types"]
    STRING, ARRAY, U32, BOOL = 8, 9, 4, 7
    assert (meta["tokenizer.ggml.model"], types["tokenizer.ggml.model"]) == ("gpt2", STRING)
    assert (meta["tokenizer.ggml.pre"], types["tokenizer.ggml.pre"]) == (s["gguf_pre"], STRING)
    n = len(reference.tokens)
    want_tokens = reference.tokens + [c for c, _, _ in added] + [f"[PAD{i}]" for i in range(n + len(added),
                                                                                              vocab_size)]
    assert types["tokenizer.ggml.tokens"] == ARRAY and meta["tokenizer.ggml.tokens"] == want_tokens
    # llama.cpp's token types: 1 normal, 3 control (special), 4 user defined, 5 unused.
    want_types = [1] * n + [3 if sp else 4 for _, _, sp in added] + [5] * PAD
    assert types["tokenizer.ggml.token_type"] == ARRAY and meta["tokenizer.ggml.token_type"] == want_types
    assert meta["tokenizer.ggml.merges"] == [f"{a} {b}" for a, b in reference.rules]
    ids = {c: i for c, i, _ in added}
    config = s["config"]
    if config["bos_token"]:
        assert (meta["tokenizer.ggml.bos_token_id"], types["tokenizer.ggml.bos_token_id"]) == \
            (ids[config["bos_token"]], U32)
    assert (meta["tokenizer.ggml.eos_token_id"], types["tokenizer.ggml.eos_token_id"]) == \
        (ids[config["eos_token"]], U32)
    if "pad_token" in config:
        assert meta["tokenizer.ggml.padding_token_id"] == ids[config["pad_token"]]
    else:
        assert "tokenizer.ggml.padding_token_id" not in meta
    if name == "llama3":
        assert (meta["tokenizer.ggml.eot_token_id"], types["tokenizer.ggml.eot_token_id"]) == \
            (ids["<|stop_here|>"], U32)
    else:
        assert "tokenizer.ggml.eot_token_id" not in meta
    assert (meta["tokenizer.ggml.add_bos_token"], types["tokenizer.ggml.add_bos_token"]) == \
        (bool(config.get("add_bos_token")), BOOL)
    assert meta["tokenizer.ggml.add_eos_token"] is False
    if "chat_template" in config:
        assert meta["tokenizer.chat_template"] == config["chat_template"]
    assert meta["general.architecture"] == s["arch"]


def test_gguf_encodes_and_decodes_as_the_directory(converted):
    name, path, out, reference, added, vocab_size = converted
    d, g = llm.load(path).tokenizer, llm.load(out).tokenizer
    assert g.vocab_size == vocab_size and d.vocab_size == vocab_size - PAD
    assert g.eos_id == d.eos_id and sorted(g.eos_ids) == sorted(d.eos_ids)
    if d.bos_id >= 0:  # else the GGUF file has config.json's bos_token_id (llama.cpp's choice)
        assert g.bos_id == d.bos_id
    assert g.chat_template == d.chat_template
    for text in TEXTS:
        for add_bos in (True, False):
            for parse_special in (False, True):
                got = g.encode(text, add_bos=add_bos, parse_special=parse_special)
                want = d.encode(text, add_bos=add_bos, parse_special=parse_special)
                assert got == want, (name, text, add_bos, parse_special)
        ids = d.encode(text, add_bos=True, parse_special=True)
        for skip in (True, False):
            assert g.decode(ids, skip) == d.decode(ids, skip), (name, text)
        plain = d.encode(text, add_bos=False)
        assert g.decode(plain, True) == (unicodedata.normalize("NFC", text) if name == "qwen2" else text)


def test_ids_are_the_reference_bpe(converted):
    """Independent of both loaders: ASCII text through the reference BPE; non-ASCII letters and
    emoji, which no merge (trained on ASCII) touches, as their UTF-8 bytes (byte b is id b)."""
    name, path, out, reference, added, _ = converted
    g = llm.load(out).tokenizer
    bos = [g.bos_id] if STYLES[name]["config"].get("add_bos_token") else []
    for text in ["Hello world", "The cat sat on the mat, and then 12345 cats left.", "a    b\n\n\nc",
                 "3.14159 and 2,718", "I'm you're he'll DON'T", "  two leading spaces"]:
        assert g.encode(text) == bos + reference.encode(text), (name, text)
    # "é" is a letter (its own pre-token with the letters around it: none here), "🙂" punctuation.
    assert g.encode("é🙂", add_bos=False) == [0xC3, 0xA9, 0xF0, 0x9F, 0x99, 0x82]
    assert g.encode("日本", add_bos=False) == list("日本".encode())
    ids = {c: i for c, i, _ in added}
    special = [c for c, _, sp in added if sp][0]
    assert g.encode("ab" + special, add_bos=False, parse_special=True) == reference.encode("ab") + [ids[special]]
    assert g.encode("ab" + special, add_bos=False) == reference.encode("ab" + special)
    assert g.encode("ab<sep>cd", add_bos=False) == reference.encode("ab") + [ids["<sep>"]] + reference.encode("cd")
    assert g.decode([ids[special]], True) == "" and g.decode([ids[special]], False) == special
    if name == "qwen2":
        # NFC: the decomposed e + U+0301 is encoded as the composed U+00E9.
        assert g.encode("Cafe\u0301", add_bos=False) == g.encode("Café", add_bos=False) == \
            reference.encode("Caf") + [0xC3, 0xA9]


def test_generation_from_the_gguf_matches_quantize_on_load(converted):
    name, path, out, *_ = converted
    gguf = llm.load(out)
    on_load = llm.load(path, quantize="q8_0")
    prompt = "The cat sat"
    assert gguf.generate(prompt, max_new_tokens=6, ignore_eos=True) == \
        on_load.generate(prompt, max_new_tokens=6, ignore_eos=True)


@pytest.mark.parametrize("change, says", [
    (lambda doc: doc.__setitem__("pre_tokenizer", {"type": "Metaspace", "replacement": "\u2581",
                                                   "prepend_scheme": "always", "split": True}),
     "pre-tokenizer is not one GGUF names"),
    (lambda doc: doc["pre_tokenizer"].__setitem__("add_prefix_space", True), "pre-tokenizer is not one GGUF names"),
    (lambda doc: doc.__setitem__("normalizer", {"type": "NFC"}), "normalizer is not empty"),
    (lambda doc: doc["model"].__setitem__("ignore_merges", True), "model.ignore_merges is true"),
    (lambda doc: doc["added_tokens"][0].__setitem__("lstrip", True), "strips whitespace"),
])
def test_a_tokenizer_gguf_cannot_carry_is_refused(tmp_path, change, says):
    """Without a tokenizer.model beside it, a tokenizer.json GGUF cannot express is an error that
    says why, not a GGUF file that would encode otherwise."""
    path, *_ = build(tmp_path, "gpt2")
    with open(os.path.join(path, "tokenizer.json"), encoding="utf-8") as f:
        doc = json.load(f)
    change(doc)
    with open(os.path.join(path, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f)
    r = quantize(path, tmp_path / "out.gguf")
    assert r.returncode == 1, r.stderr
    assert says in r.stderr and "GGUF" in r.stderr, r.stderr
