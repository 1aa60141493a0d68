"""Text in, text out: a GGUF model whose file carries a byte-level BPE vocabulary
(tokenizer.ggml.model "gpt2", built here), generation with stop strings, and tinyfin-generate."""
import os
import subprocess

import numpy as np
import pytest

import tinyfin as tf
import tinyfin.llm as llm
import llm_models as lm
from llm_models import GGUF_ARRAY, GGUF_BOOL, GGUF_I32, GGUF_STRING, GGUF_U32


def byte_symbols():
    """GPT-2's bytes_to_unicode: printable bytes stand for themselves, the rest for 256 + n."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return out


def gpt2_vocab():
    sym = byte_symbols()
    tokens = ["<s>", "</s>"] + [sym[b] for b in range(256)]
    merges = [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), ("Ġ", "w"), ("o", "r"), ("Ġw", "or"),
              ("l", "d"), ("Ġwor", "ld")]
    for a, b in merges:
        tokens.append(a + b)
    types = [3, 3] + [1] * (len(tokens) - 2)
    md = [("tokenizer.ggml.model", GGUF_STRING, "gpt2"), ("tokenizer.ggml.pre", GGUF_STRING, "gpt-2"),
          ("tokenizer.ggml.tokens", GGUF_ARRAY, (GGUF_STRING, tokens)),
          ("tokenizer.ggml.token_type", GGUF_ARRAY, (GGUF_I32, types)),
          ("tokenizer.ggml.merges", GGUF_ARRAY, (GGUF_STRING, [f"{a} {b}" for a, b in merges])),
          ("tokenizer.ggml.add_bos_token", GGUF_BOOL, True)]
    return tokens, md


@pytest.fixture
def text_model(tmp_path):
    tokens, vocab = gpt2_vocab()
    cfg = dict(lm.ARCHS["llama"], num_key_value_heads=2, vocab_size=len(tokens), bos_token_id=0, eos_token_id=1)
    w = lm.random_weights(cfg, seed=3)
    path = lm.write_gguf(str(tmp_path / "text.gguf"), cfg, w, vocab=vocab)
    return cfg, w, path, tokens


def test_gguf_vocabulary_encodes_and_decodes(text_model):
    cfg, w, path, tokens = text_model
    model = llm.load(path)
    tok = model.tokenizer
    assert tok is not None and tok.vocab_size == len(tokens) and tok.bos_id == 0 and tok.eos_id == 1
    ids = tok.encode("hello world")
    # BOS, then the merged "hello" and "Ġworld" tokens.
    assert ids == [0, tokens.index("hello"), tokens.index("Ġworld")]
    assert tok.decode(ids) == "hello world"
    text = "héllo, wörld! 123 \U0001F600"
    assert tok.decode(tok.encode(text)) == text


def test_generate_text_is_the_decoded_greedy_reference(text_model):
    cfg, w, path, tokens = text_model
    model = llm.load(path)
    ids = model.tokenizer.encode("hello world")
    seq = list(ids)
    for _ in range(5):
        nxt = int(np.argmax(lm.reference_logits(cfg, w, seq)[-1]))
        if nxt == 1:
            break
        seq.append(nxt)
    want = model.tokenizer.decode(seq[len(ids):])
    assert model.generate("hello world", max_new_tokens=len(seq) - len(ids)) == want
    assert model.generate(["hello world", "hello"], max_new_tokens=len(seq) - len(ids))[0] == want


def test_stop_strings_end_generation_and_are_cut(text_model):
    cfg, w, path, tokens = text_model
    model = llm.load(path)
    sample = dict(temperature=1.0, seed=11)  # a seeded draw: varied tokens, the same on each call
    ids = model.generate(model.tokenizer.encode("hello"), max_new_tokens=8, ignore_eos=True, **sample)
    pieces = [model.tokenizer.decode([t]) for t in ids]
    full = model.tokenizer.decode(ids)
    # A stop string made of the first later token whose text is new: generation ends with that
    # token and the text before it stays.
    at = next((i for i in range(1, len(pieces)) if pieces[i].strip() and pieces[i] not in "".join(pieces[:i])), None)
    assert at is not None, pieces
    stop = pieces[at]
    tokens_out, reasons = model._m.generate_ids([model.tokenizer.encode("hello")], 8, 1.0, 0, 1.0, 0.0, 1.0, 11,
                                                [stop], True, 0, None)
    assert reasons == ["stop"] and tokens_out[0] == ids[:at + 1]
    assert model.generate("hello", max_new_tokens=8, ignore_eos=True, stop=[stop], **sample) == full[:full.index(stop)]


def tool():
    path = os.environ.get("TINYFIN_GENERATE")
    if not path:
        pytest.skip("TINYFIN_GENERATE is not set (meson test sets it)")
    return path


def test_tinyfin_generate_streams_and_reports(text_model):
    cfg, w, path, tokens = text_model
    model = llm.load(path)
    want = model.generate("hello world", max_new_tokens=6, ignore_eos=True)
    r = subprocess.run([tool(), "-m", path, "-p", "hello world", "-n", "6", "--temp", "0", "--ignore-eos",
                        "--backend", "cpu"], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    # Streamed pieces are bytes (a token may end inside a UTF-8 sequence); joined, they are the text.
    assert r.stdout.decode("utf-8", "replace") == "hello world" + want + "\n"
    r.stderr = r.stderr.decode()
    assert "memory estimate" in r.stderr and "tokens/s" in r.stderr and "backend cpu" in r.stderr
    assert "peak resident memory" in r.stderr
    bad = subprocess.run([tool(), "-m", os.path.dirname(path), "-p", "x"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "FileError" in bad.stderr


@pytest.mark.parametrize("change, match", [
    (("tokenizer.ggml.tokens", GGUF_ARRAY, (GGUF_U32, [1, 2, 3])), "tokenizer.ggml.tokens must be an array of string"),
    (("tokenizer.ggml.token_type", GGUF_ARRAY, (GGUF_I32, [1, 1])), "token_type has 2 entries"),
    (("tokenizer.ggml.scores", GGUF_ARRAY, (GGUF_STRING, ["x"])), "scores must be an array of f32"),
    (("eos", None, 100000), "outside the vocabulary"),
    (("tokenizer.ggml.model", GGUF_U32, 7), "expected a string"),
])
def test_hostile_gguf_vocabulary(tmp_path, change, match):
    tokens, vocab = gpt2_vocab()
    vocab = [kv for kv in vocab if kv[0] != change[0]] + ([change] if change[1] is not None else [])
    cfg = dict(lm.ARCHS["llama"], vocab_size=len(tokens), bos_token_id=0,
               eos_token_id=change[2] if change[0] == "eos" else 1)
    path = lm.write_gguf(str(tmp_path / "v.gguf"), cfg, lm.random_weights(cfg), vocab=vocab)
    with pytest.raises((llm.FormatError, llm.ConfigError), match=match):
        llm.load(path)


def test_tinyfin_generate_chat_uses_the_models_template(tmp_path):
    tokens, vocab = gpt2_vocab()
    tokens = tokens + ["<|im_start|>", "<|im_end|>"]
    template = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    vocab = [kv for kv in vocab if kv[0] not in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type")]
    vocab += [("tokenizer.ggml.tokens", GGUF_ARRAY, (GGUF_STRING, tokens)),
              ("tokenizer.ggml.token_type", GGUF_ARRAY, (GGUF_I32, [3, 3] + [1] * (len(tokens) - 4) + [3, 3])),
              ("tokenizer.chat_template", GGUF_STRING, template)]
    cfg = dict(lm.ARCHS["llama"], num_key_value_heads=2, vocab_size=len(tokens), bos_token_id=0, eos_token_id=1)
    path = lm.write_gguf(str(tmp_path / "chat.gguf"), cfg, lm.random_weights(cfg, seed=4), vocab=vocab)
    model = llm.load(path)
    text = llm.apply_chat_template([("user", "hello")], "auto", model.tokenizer.chat_template)
    assert text == "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
    ids = model.tokenizer.encode(text, parse_special=True)
    assert ids.count(len(tokens) - 2) == 2 and ids.count(len(tokens) - 1) == 1
    want = model.tokenizer.decode(model.generate(ids, max_new_tokens=5, ignore_eos=True))
    r = subprocess.run([tool(), "-m", path, "-p", "hello", "--chat", "-n", "5", "--temp", "0", "--ignore-eos"],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode("utf-8", "replace") == "hello" + want + "\n"
