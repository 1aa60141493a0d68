"""The safetensors and GGUF readers against the formats' specifications and hostile files: every
malformed file gives a typed error (FileError, FormatError, ConfigError), never a crash, a hang
or an allocation beyond the file's size."""
import json
import os
import struct

import numpy as np
import pytest

import tinyfin as tf
import tinyfin.llm as llm
import llm_models as lm
from llm_models import (GGUF_ARRAY, GGUF_BOOL, GGUF_F32, GGUF_F64, GGUF_I8, GGUF_I16, GGUF_I32, GGUF_I64,
                        GGUF_STRING, GGUF_U8, GGUF_U16, GGUF_U32, GGUF_U64, gguf_bytes, gguf_string,
                        safetensors_bytes)

LLM_ERRORS = (llm.FileError, llm.FormatError, llm.ConfigError)


def write(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def small_tensors():
    rng = np.random.default_rng(1)
    return {"a": rng.standard_normal((3, 4)).astype(np.float32), "b": rng.standard_normal(5).astype(np.float32)}


# ---- safetensors -------------------------------------------------------------------------------

def test_safetensors_reads_names_dtypes_shapes(tmp_path):
    t = small_tensors()
    p = write(tmp_path, "m.safetensors", safetensors_bytes(t, {"a": "BF16", "b": "F16"}, {"format": "pt"}))
    got = llm.read_safetensors(p)
    assert got == {"a": ("BF16", [3, 4], 24), "b": ("F16", [5], 10)}


def st_raw(header, data=b"", pad=True):
    h = json.dumps(header).encode() if not isinstance(header, bytes) else header
    return struct.pack("<Q", len(h)) + h + data


@pytest.mark.parametrize("data, match", [
    (b"", "fewer than the 8"),
    (b"\x01\x02\x03", "fewer than the 8"),
    (struct.pack("<Q", 1 << 40) + b"{}", "past the end"),
    (struct.pack("<Q", 100) + b"{}", "past the end"),
    (st_raw(b"not json at all"), "not valid JSON"),
    (st_raw(b"[" * 100000 + b"]" * 100000), "deeper than 64|not valid JSON"),
    (st_raw(b"[1, 2]"), "not a JSON object"),
    (st_raw({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4), "outside"),
    (st_raw({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, b"\0" * 8), "needs 8"),
    (st_raw({"a": {"dtype": "F32", "shape": [1 << 31, 1 << 31, 1 << 31], "data_offsets": [0, 4]}}, b"\0" * 4),
     "overflows|out of range"),
    (st_raw({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4), "non-negative"),
    (st_raw({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
             "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12), "overlap"),
    (st_raw({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, b"\0" * 8), "outside"),
    (st_raw({"a": {"dtype": "F32", "shape": [2]}}, b"\0" * 8), "data_offsets"),
    (st_raw({"a": 5}), "not an object"),
    (st_raw(b'{"\xff\xfe": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}', b"\0" * 4),
     "not valid JSON|UTF-8"),
])
def test_hostile_safetensors(tmp_path, data, match):
    p = write(tmp_path, "bad.safetensors", data)
    with pytest.raises(llm.FormatError, match=match):
        llm.read_safetensors(p)


def test_safetensors_unsupported_dtype_is_a_config_error(tmp_path):
    p = write(tmp_path, "i8.safetensors", st_raw({"a": {"dtype": "I8", "shape": [4], "data_offsets": [0, 4]}}, b"\0" * 4))
    with pytest.raises(llm.ConfigError, match="I8"):
        llm.read_safetensors(p)


def test_every_truncation_of_a_safetensors_file_is_a_format_error(tmp_path):
    data = safetensors_bytes(small_tensors())
    for cut in list(range(0, 40)) + list(range(len(data) - 30, len(data))):
        p = write(tmp_path, "cut.safetensors", data[:cut])
        with pytest.raises(llm.FormatError):
            llm.read_safetensors(p)


def test_directory_and_fifo_are_file_errors(tmp_path):
    with pytest.raises(llm.FileError, match="directory"):
        llm.read_safetensors(str(tmp_path))
    with pytest.raises(llm.FileError, match="directory without config.json"):
        llm.load(str(tmp_path))
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    with pytest.raises(llm.FileError, match="FIFO"):
        llm.read_gguf(fifo)
    with pytest.raises(llm.FileError, match="FIFO"):
        llm.load(fifo)
    with pytest.raises(llm.FileError, match="does not exist"):
        llm.load(str(tmp_path / "missing.gguf"))


def test_shard_index_is_checked(tmp_path):
    cfg, w = lm.ARCHS["llama"], lm.random_weights(lm.ARCHS["llama"])
    d = lm.write_hf_dir(str(tmp_path / "m"), cfg, w, shards=2)
    index = json.load(open(os.path.join(d, "model.safetensors.index.json")))
    name = next(iter(index["weight_map"]))
    for bad, match in (("../escape.safetensors", "plain file name"), ("/etc/passwd", "plain file name")):
        index2 = json.loads(json.dumps(index))
        index2["weight_map"][name] = bad
        json.dump(index2, open(os.path.join(d, "model.safetensors.index.json"), "w"))
        with pytest.raises(llm.FormatError, match=match):
            llm.load(d)
    other = [f for f in set(index["weight_map"].values()) if f != index["weight_map"][name]][0]
    index["weight_map"][name] = other
    json.dump(index, open(os.path.join(d, "model.safetensors.index.json"), "w"))
    with pytest.raises(llm.FormatError, match="does not hold it"):
        llm.load(d)


# ---- config.json -------------------------------------------------------------------------------

@pytest.mark.parametrize("change, match", [
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "rope_scaling.type.*yarn"),
    ({"hidden_act": "gelu"}, "hidden_act.*gelu"),
    ({"quantization_config": {"bits": 4}}, "quantization_config"),
    ({"mlp_bias": True}, "mlp_bias"),
    ({"model_type": "gpt2"}, "model_type 'gpt2'"),
    ({"num_key_value_heads": 3}, "must divide"),
    ({"vocab_size": 7}, "shape"),
])
def test_unsupported_or_inconsistent_config_is_named(tmp_path, change, match):
    cfg = dict(lm.ARCHS["llama"], **change)
    d = lm.write_hf_dir(str(tmp_path / "m"), cfg, lm.random_weights(lm.ARCHS["llama"]))
    with pytest.raises(llm.ConfigError, match=match):
        llm.load(d)


def test_config_json_that_is_not_json(tmp_path):
    d = lm.write_hf_dir(str(tmp_path / "m"), lm.ARCHS["llama"], lm.random_weights(lm.ARCHS["llama"]))
    open(os.path.join(d, "config.json"), "w").write("{ not json")
    with pytest.raises(llm.FormatError):
        llm.load(d)


# ---- GGUF --------------------------------------------------------------------------------------

ALL_TYPES = [("u8", GGUF_U8, 200), ("i8", GGUF_I8, -5), ("u16", GGUF_U16, 60000), ("i16", GGUF_I16, -300),
             ("u32", GGUF_U32, 4000000000), ("i32", GGUF_I32, -70000), ("f32", GGUF_F32, 0.5),
             ("bool", GGUF_BOOL, True), ("str", GGUF_STRING, "héllo"), ("u64", GGUF_U64, 1 << 40),
             ("i64", GGUF_I64, -(1 << 40)), ("f64", GGUF_F64, 0.25),
             ("arr", GGUF_ARRAY, (GGUF_STRING, ["a", "bc", ""])), ("arr_i32", GGUF_ARRAY, (GGUF_I32, [1, -2, 3]))]


@pytest.mark.parametrize("version", [2, 3])
def test_gguf_reads_metadata_of_every_type_and_tensors(tmp_path, version):
    t = small_tensors()
    data = gguf_bytes(ALL_TYPES, [("a", t["a"], "F32"), ("b", t["b"], "BF16")], version=version)
    ver, meta, tensors = llm.read_gguf(write(tmp_path, "m.gguf", data))
    assert ver == version
    assert meta["u8"] == 200 and meta["i8"] == -5 and meta["u16"] == 60000 and meta["i16"] == -300
    assert meta["u32"] == 4000000000 and meta["i32"] == -70000 and meta["f32"] == 0.5 and meta["bool"] is True
    assert meta["str"] == "héllo".encode() and meta["u64"] == 1 << 40 and meta["i64"] == -(1 << 40)
    assert meta["f64"] == 0.25 and meta["arr"] == 3 and meta["arr_i32"] == 3
    assert tensors == {"a": ("F32", [3, 4], 48), "b": ("BF16", [5], 10)}


def gguf_header(n_tensors, n_kv, version=3):
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


def tensor_info(name, ne, ggml_type, offset):
    b = name if isinstance(name, bytes) else name.encode()
    return (struct.pack("<Q", len(b)) + b + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne) +
            struct.pack("<IQ", ggml_type, offset))


def with_data(head, nbytes):
    return head + b"\0" * ((32 - len(head) % 32) % 32) + b"\0" * nbytes


@pytest.mark.parametrize("data, match", [
    (b"", "needs 1 bytes"),
    (b"GGML" + b"\0" * 30, "no GGUF magic"),
    (gguf_header(0, 0, version=1), "version 1"),
    (gguf_header(0, 0, version=4), "version 4"),
    (gguf_header(1 << 60, 0), "tensor count"),
    (gguf_header(0, 1 << 60), "metadata count"),
    (gguf_header(0, 1) + struct.pack("<Q", 1 << 50) + b"k" * 20, "string length"),
    (gguf_header(0, 1) + gguf_string("k") + struct.pack("<I", 8) + struct.pack("<Q", 1000) + b"short", "needs 1000"),
    (gguf_header(0, 1) + gguf_string("k") + struct.pack("<I", 99), "unknown value type 99"),
    (gguf_header(0, 1) + gguf_string("k") + struct.pack("<IIQ", GGUF_ARRAY, GGUF_ARRAY, 1) + struct.pack("<IQ", GGUF_U8, 0),
     "nested"),
    (gguf_header(0, 1) + gguf_string("k") + struct.pack("<IIQ", GGUF_ARRAY, GGUF_U32, 1 << 40), "array length"),
    (gguf_header(0, 1) + gguf_string("k") + struct.pack("<IB", GGUF_BOOL, 7), "bool value 7"),
    (gguf_header(0, 2) + (gguf_string("k") + struct.pack("<IB", GGUF_U8, 1)) * 2, "appears twice"),
    (gguf_header(0, 1) + struct.pack("<Q", 2) + b"\xc3\x28" + struct.pack("<IB", GGUF_U8, 1), "UTF-8"),
    (gguf_header(0, 1) + gguf_string("general.alignment") + struct.pack("<II", GGUF_U32, 24), "power of two"),
    (gguf_header(0, 1) + gguf_string("general.alignment") + struct.pack("<II", GGUF_U32, 0), "power of two"),
    (with_data(gguf_header(1, 0) + tensor_info("t", [1, 1, 1, 1, 1], 0, 0), 64), "5 dimensions"),
    (with_data(gguf_header(1, 0) + tensor_info("t", [1 << 31, 1 << 31, 1 << 31], 0, 0), 64), "overflow|out of range"),
    (with_data(gguf_header(1, 0) + tensor_info("t", [4], 77, 0), 64), "unknown type 77"),
    (with_data(gguf_header(1, 0) + tensor_info("t", [4], 0, 4), 64), "not a multiple of the alignment"),
    (with_data(gguf_header(1, 0) + tensor_info("t", [64], 0, 0), 64), "past the end"),
    (with_data(gguf_header(1, 0) + tensor_info("t", [4], 0, 1 << 62), 64), "not a multiple|past the end"),
    (with_data(gguf_header(2, 0) + tensor_info("t", [16], 0, 0) + tensor_info("u", [4], 0, 32), 128), "overlap"),
    (with_data(gguf_header(2, 0) + tensor_info("t", [4], 0, 0) + tensor_info("t", [4], 0, 32), 128), "appears twice"),
    (with_data(gguf_header(1, 0) + tensor_info(b"\xff\xfe", [4], 0, 0), 64), "UTF-8"),
    (with_data(gguf_header(1, 0) + tensor_info("t", [33], 2, 0), 64), "blocks"),
])
def test_hostile_gguf(tmp_path, data, match):
    with pytest.raises(llm.FormatError, match=match):
        llm.read_gguf(write(tmp_path, "bad.gguf", data))


def test_every_truncation_of_a_gguf_file_is_a_format_error(tmp_path):
    cfg = lm.ARCHS["qwen2"]
    data = lm.gguf_model_bytes(cfg, lm.random_weights(cfg))
    cuts = sorted(set(list(range(0, 300, 7)) + list(range(len(data) - 40, len(data))) +
                      list(range(300, len(data), max(1, len(data) // 60)))))
    for cut in cuts:
        with pytest.raises(llm.FormatError):
            llm.read_gguf(write(tmp_path, "cut.gguf", data[:cut]))


def test_random_corruptions_give_typed_errors_or_parse(tmp_path):
    """A small in-test fuzz: flipped bytes anywhere in the header region of both formats."""
    cfg = lm.ARCHS["llama"]
    w = lm.random_weights(cfg)
    gguf = bytearray(lm.gguf_model_bytes(cfg, w))
    st = bytearray(safetensors_bytes(w))
    rng = np.random.default_rng(5)
    for data, reader, head in ((gguf, llm.read_gguf, 1500), (st, llm.read_safetensors, 1200)):
        for _ in range(150):
            b = bytearray(data)
            for _ in range(int(rng.integers(1, 4))):
                b[int(rng.integers(0, head))] = int(rng.integers(0, 256))
            p = write(tmp_path, "x.bin", bytes(b))
            try:
                reader(p)
            except LLM_ERRORS:
                pass


def test_block_quantized_tensors_parse_but_do_not_load_yet(tmp_path):
    # 64 elements of Q8_0: two 34-byte blocks.
    data = with_data(gguf_header(1, 0) + tensor_info("q", [64], 8, 0), 68)
    _, _, tensors = llm.read_gguf(write(tmp_path, "q.gguf", data))
    assert tensors == {"q": ("Q8_0", [64], 68)}


def test_gguf_model_with_wrong_tensor_shape_or_type(tmp_path):
    cfg = dict(lm.ARCHS["llama"])
    w = lm.random_weights(cfg)
    w["model.layers.1.mlp.up_proj.weight"] = w["model.layers.1.mlp.up_proj.weight"][:, :16].copy()
    with pytest.raises(llm.ConfigError, match="ffn_up.*shape"):
        llm.load(lm.write_gguf(str(tmp_path / "bad.gguf"), cfg, w))
    with pytest.raises(llm.ConfigError, match="general.architecture 'gpt2'"):
        md = [("general.architecture", GGUF_STRING, "gpt2")]
        llm.load(write(tmp_path, "gpt2.gguf", gguf_bytes(md, [])))
