"""tools/tinyfin_llm_random_model.py --gguf: the GGUF file holds the same model as the Hugging Face
directory written with the same seed (tinyfin's logits of both agree: names, Q/K row order, norms),
and its metadata is what llama.cpp's loader wants (checked here from GGUF's specification: the
vocabulary's arrays of the types llama.cpp insists on, ids, sizes), so that
tinyfin-bench --llm FILE.gguf --compare llamacpp can run both engines on it."""
import os
import struct
import subprocess

import numpy as np
import pytest

import tinyfin.llm as llm

TOOL = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "tinyfin_llm_random_model.py")
PROMPT = [5, 300, 17, 2, 511, 42, 7]


def write(tmp_path, *args):
    subprocess.run(["/usr/bin/python3", TOOL, "--shape", "tiny", "--seed", "3", *args], check=True, capture_output=True)


def read_gguf_metadata(path):
    """{key: (type, value)} and the tensors' (name, dims, type) of a GGUF v3 file."""
    with open(path, "rb") as f:
        data = f.read(4 << 20)
    assert data[:4] == b"GGUF"
    version, n_tensors, n_kv = struct.unpack_from("<IQQ", data, 4)
    assert version == 3
    at = 24

    def take(fmt):
        nonlocal at
        v = struct.unpack_from(fmt, data, at)
        at += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def string():
        nonlocal at
        n = take("<Q")
        s = data[at:at + n].decode()
        at += n
        return s

    scalar = {4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q"}

    def value(t):
        return string() if t == 8 else take(scalar[t])

    meta = {}
    for _ in range(n_kv):
        key, t = string(), take("<I")
        if t == 9:
            et, n = take("<I"), take("<Q")
            meta[key] = (("array", et), [value(et) for _ in range(n)])
        else:
            meta[key] = (t, value(t))
    tensors = []
    for _ in range(n_tensors):
        name, nd = string(), take("<I")
        dims = [take("<Q") for _ in range(nd)]
        tensors.append((name, dims, take("<I"), take("<Q")))
    return meta, tensors


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_gguf_is_the_directory_model(tmp_path, dtype):
    write(tmp_path, "--dtype", dtype, "--out", str(tmp_path / "hf"))
    write(tmp_path, "--dtype", dtype, "--gguf", "--out", str(tmp_path / "m.gguf"))
    want = llm.load(str(tmp_path / "hf"), backend="cpu").logits(PROMPT)
    got = llm.load(str(tmp_path / "m.gguf"), backend="cpu").logits(PROMPT)
    assert got.shape == (len(PROMPT), 512)
    # Same weights; only the order of the head dimension's sums differs (Q/K rows permuted).
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4 * np.abs(want).max())


def test_gguf_metadata_is_what_llama_cpp_reads(tmp_path):
    path = tmp_path / "m.gguf"
    write(tmp_path, "--gguf", "--out", str(path))
    meta, tensors = read_gguf_metadata(path)
    assert meta["general.architecture"] == (8, "llama")
    assert meta["llama.vocab_size"] == (4, 512) and meta["llama.block_count"] == (4, 2)
    assert meta["llama.attention.head_count"] == (4, 4) and meta["llama.attention.head_count_kv"] == (4, 2)
    assert meta["llama.rope.dimension_count"] == (4, 32) and meta["llama.feed_forward_length"] == (4, 352)
    assert meta["tokenizer.ggml.model"] == (8, "llama")
    (kind, tokens), (skind, scores), (tkind, types) = (meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.scores"],
                                                        meta["tokenizer.ggml.token_type"])
    # llama.cpp refuses token types that are not INT32 and scores that are not FLOAT32.
    assert kind == ("array", 8) and skind == ("array", 6) and tkind == ("array", 5)
    assert len(tokens) == len(scores) == len(types) == 512 and len(set(tokens)) == 512
    assert tokens[:3] == ["<unk>", "<s>", "</s>"] and types[:3] == [2, 3, 3]
    assert tokens[3 + 0x0A] == "<0x0A>" and set(types[3:259]) == {6} and set(types[259:]) == {1}
    assert meta["tokenizer.ggml.bos_token_id"] == (4, 1) and meta["tokenizer.ggml.eos_token_id"] == (4, 2)
    by_name = {name: (dims, t, off) for name, dims, t, off in tensors}
    assert by_name["token_embd.weight"][:2] == ([128, 512], 30)  # ne[0] is the row length; 30: BF16
    assert by_name["blk.1.attn_k.weight"][:2] == ([128, 64], 30)
    assert by_name["blk.0.ffn_down.weight"][:2] == ([352, 128], 30)
    assert by_name["blk.0.attn_norm.weight"][:2] == ([128], 0)  # norms in F32
    assert all(off % 32 == 0 for _, _, off in by_name.values())
    assert len(tensors) == 3 + 2 * 9


def test_gguf_refuses_shapes_it_does_not_write(tmp_path):
    out = subprocess.run(["/usr/bin/python3", TOOL, "--shape", "qwen2-0.5b", "--gguf", "--out",
                          str(tmp_path / "q.gguf")], capture_output=True, text=True)
    assert out.returncode == 2 and "llama shapes" in out.stderr
    assert not (tmp_path / "q.gguf").exists()
