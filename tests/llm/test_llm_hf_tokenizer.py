"""A Hugging Face model directory with its tokenizer files, end to end: a SentencePiece BPE
model trained here on the fortunes text (Debian's python3-sentencepiece), a tiny random-weight
Llama written beside it (config.json, model.safetensors, tokenizer.model,
tokenizer_config.json), then text in and text out through tinyfin.llm and tinyfin-generate,
checked against libsentencepiece's own encoding and decoding and the numpy reference's greedy
chain."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tinyfin as tf
import tinyfin.llm as llm
import llm_models as lm

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "tokenizer"))
import corpus  # noqa: E402

spm = pytest.importorskip("sentencepiece")

TEXT = "The cat sat on the mat, and then"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    work = tmp_path_factory.mktemp("hf-spm")
    text = work / "train.txt"
    text.write_text("\n".join(corpus.fortunes(["fortunes", "wisdom"])), encoding="utf-8")
    prefix = work / "spm"
    spm.SentencePieceTrainer.train(
        input=str(text), model_prefix=str(prefix), vocab_size=400, model_type="bpe", byte_fallback=True,
        normalization_rule_name="identity", remove_extra_whitespaces=False, add_dummy_prefix=True,
        split_digits=True, character_coverage=0.9995, unk_id=0, bos_id=1, eos_id=2, pad_id=-1, num_threads=2,
        minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=str(prefix) + ".model")
    cfg = dict(lm.ARCHS["llama_gqa_tied"], vocab_size=sp.get_piece_size(), bos_token_id=1, eos_token_id=2)
    path = lm.write_hf_dir(str(work / "model"), cfg, lm.random_weights(cfg, 5))
    shutil.copy(str(prefix) + ".model", os.path.join(path, "tokenizer.model"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
                   "tokenizer_class": "LlamaTokenizer"}, f)
    return cfg, lm.random_weights(cfg, 5), path, sp


@pytest.fixture(autouse=True)
def _cpu_default():
    tf.backend_set("cpu")
    yield


def greedy_reference(cfg, w, ids, n):
    seq = list(ids)
    for _ in range(n):
        seq.append(int(np.argmax(lm.reference_logits(cfg, w, seq)[-1])))
    return seq[len(ids):]


def test_directory_tokenizer_matches_sentencepiece(model_dir):
    cfg, w, path, sp = model_dir
    model = llm.load(path)
    tok = model.tokenizer
    assert tok is not None and tok.vocab_size == sp.get_piece_size()
    assert tok.bos_id == 1 and tok.eos_id == 2
    for text in [TEXT] + corpus.fortunes(["people"])[:50]:
        assert tok.encode(text) == [1] + sp.encode(text), text
        assert tok.decode(sp.encode(text)) == sp.decode(sp.encode(text))


@pytest.mark.parametrize("quantize", ["", "q8_0"])
def test_text_in_text_out(model_dir, quantize):
    cfg, w, path, sp = model_dir
    model = llm.load(path, quantize=quantize)
    out = model.generate(TEXT, max_new_tokens=8, ignore_eos=True)
    ids = [1] + sp.encode(TEXT)
    if not quantize:
        want = greedy_reference(cfg, w, ids, 8)
        assert out == sp.decode(want)
    else:  # quantized weights: their own argmax chain, decoded by libsentencepiece
        got_ids = model.generate(ids, max_new_tokens=8, ignore_eos=True)
        assert out == sp.decode(got_ids)


def test_generate_tool_on_the_directory(model_dir):
    gen = os.environ.get("TINYFIN_GENERATE")
    if not gen:
        pytest.skip("TINYFIN_GENERATE is not set (meson test sets it)")
    cfg, w, path, sp = model_dir
    r = subprocess.run([gen, "-m", path, "-p", TEXT, "-n", "8", "--temp", "0", "--ignore-eos"], capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, TINYFIN_BACKEND="cpu"))
    assert r.returncode == 0, r.stderr
    want = TEXT + sp.decode(greedy_reference(cfg, w, [1] + sp.encode(TEXT), 8))
    # The tool streams pieces (SentencePiece's spaces as they come): the same text up to spacing.
    assert "".join(r.stdout.split()) == "".join(want.split())
    assert "generated 8 tokens" in r.stderr


def test_quantized_gguf_carries_the_vocabulary(model_dir, tmp_path):
    """tinyfin-quantize converts tokenizer.model to GGUF's "llama" vocabulary
    (tokenizer.ggml.tokens/scores/token_type), which tinyfin's own merging then encodes."""
    cfg, w, path, sp = model_dir
    out = str(tmp_path / "q8.gguf")
    llm.quantize_file(path, out, "q8_0")
    meta = llm.read_gguf(out)[1]
    assert meta["tokenizer.ggml.model"] == b"llama" and meta["tokenizer.ggml.tokens"] == sp.get_piece_size()
    gguf = llm.load(out)
    for text in [TEXT] + corpus.fortunes(["people"])[:50]:
        assert gguf.tokenizer.encode(text) == [1] + sp.encode(text), text
    on_load = llm.load(path, quantize="q8_0")
    assert gguf.generate(TEXT, max_new_tokens=8, ignore_eos=True) == \
        on_load.generate(TEXT, max_new_tokens=8, ignore_eos=True)
