"""ggml's block-quantized formats for the llm tests, written from the format's definitions
(ggml's docs and block structs, ggml-quants.c's dequantize_row_* and quantize_row_*_ref
semantics) and not from tinyfin's code: numpy dequantization of Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
Q4_K, Q5_K and Q6_K; numpy quantization of Q8_0 and Q4_0 (round to nearest as the reference
does); random valid k-quant blocks; and an independent GGUF reader that checks the layout
against the GGUF specification (ggml's docs/gguf.md) while it parses."""
import struct

import numpy as np

# ggml type id -> (name, block elements, block bytes)
GGML = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22),
        7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176),
        14: ("Q6_K", 256, 210), 30: ("BF16", 1, 2)}
TYPE_ID = {v[0]: k for k, v in GGML.items()}


def block_geometry(name):
    _, n, b = GGML[TYPE_ID[name]]
    return n, b


def _f16(raw):
    return raw.view("<f2").astype(np.float32)


def _blocks(data, nbytes):
    a = np.frombuffer(data, dtype=np.uint8)
    assert a.size % nbytes == 0
    return a.reshape(-1, nbytes)


# ---- dequantization (one row of blocks -> float32), per format ------------------------------

def dq_q8_0(data):
    b = _blocks(data, 34)
    d = _f16(b[:, 0:2].copy())[:, 0]
    q = b[:, 2:].view(np.int8).astype(np.float32)
    return (d[:, None] * q).reshape(-1)


def _nibbles32(qs):
    """qs [n, 16] -> [n, 32]: element j in the low nibble of qs[j], j+16 in the high one."""
    return np.concatenate([qs & 0xF, qs >> 4], axis=1).astype(np.float32)


def dq_q4_0(data):
    b = _blocks(data, 18)
    d = _f16(b[:, 0:2].copy())[:, 0]
    return (d[:, None] * (_nibbles32(b[:, 2:]) - 8)).reshape(-1)


def dq_q4_1(data):
    b = _blocks(data, 20)
    d, m = _f16(b[:, 0:2].copy())[:, 0], _f16(b[:, 2:4].copy())[:, 0]
    return (d[:, None] * _nibbles32(b[:, 4:]) + m[:, None]).reshape(-1)


def _fifth_bits(qh_bytes):
    """qh [n, 4] as a little-endian u32 -> [n, 32] of 0/16: bit j is element j's bit 4."""
    qh = qh_bytes.copy().view("<u4")[:, 0]
    return (((qh[:, None] >> np.arange(32, dtype=np.uint32)) & 1) * 16).astype(np.float32)


def dq_q5_0(data):
    b = _blocks(data, 22)
    d = _f16(b[:, 0:2].copy())[:, 0]
    q = _nibbles32(b[:, 6:]) + _fifth_bits(b[:, 2:6])
    return (d[:, None] * (q - 16)).reshape(-1)


def dq_q5_1(data):
    b = _blocks(data, 24)
    d, m = _f16(b[:, 0:2].copy())[:, 0], _f16(b[:, 2:4].copy())[:, 0]
    q = _nibbles32(b[:, 8:]) + _fifth_bits(b[:, 4:8])
    return (d[:, None] * q + m[:, None]).reshape(-1)


def k_scale_min(scales):
    """The 8 (scale, min) 6-bit pairs packed in 12 bytes (ggml's get_scale_min_k4)."""
    q = scales.astype(np.int32)
    sc, mn = np.zeros((q.shape[0], 8), np.float32), np.zeros((q.shape[0], 8), np.float32)
    for j in range(8):
        if j < 4:
            sc[:, j], mn[:, j] = q[:, j] & 63, q[:, j + 4] & 63
        else:
            sc[:, j] = (q[:, j + 4] & 0xF) | ((q[:, j - 4] >> 6) << 4)
            mn[:, j] = (q[:, j + 4] >> 4) | ((q[:, j] >> 6) << 4)
    return sc, mn


def dq_q4_k(data):
    b = _blocks(data, 144)
    d, dmin = _f16(b[:, 0:2].copy())[:, 0], _f16(b[:, 2:4].copy())[:, 0]
    sc, mn = k_scale_min(b[:, 4:16])
    qs = b[:, 16:]
    out = np.zeros((b.shape[0], 256), np.float32)
    for c in range(4):  # 64 elements per 32 bytes: low nibbles then high nibbles
        q = qs[:, 32 * c:32 * c + 32]
        for h, vals in enumerate((q & 0xF, q >> 4)):
            s = 2 * c + h
            out[:, 64 * c + 32 * h:64 * c + 32 * h + 32] = \
                (d * sc[:, s])[:, None] * vals - (dmin * mn[:, s])[:, None]
    return out.reshape(-1)


def dq_q5_k(data):
    b = _blocks(data, 176)
    d, dmin = _f16(b[:, 0:2].copy())[:, 0], _f16(b[:, 2:4].copy())[:, 0]
    sc, mn = k_scale_min(b[:, 4:16])
    qh, qs = b[:, 16:48], b[:, 48:]
    out = np.zeros((b.shape[0], 256), np.float32)
    for c in range(4):
        q = qs[:, 32 * c:32 * c + 32]
        for h, vals in enumerate((q & 0xF, q >> 4)):
            s = 2 * c + h
            high = ((qh >> s) & 1) * 16
            out[:, 64 * c + 32 * h:64 * c + 32 * h + 32] = \
                (d * sc[:, s])[:, None] * (vals + high) - (dmin * mn[:, s])[:, None]
    return out.reshape(-1)


def dq_q6_k(data):
    b = _blocks(data, 210)
    ql, qh = b[:, 0:128].astype(np.int32), b[:, 128:192].astype(np.int32)
    scales = b[:, 192:208].view(np.int8).astype(np.float32)
    d = _f16(b[:, 208:210].copy())[:, 0]
    out = np.zeros((b.shape[0], 256), np.float32)
    for half in range(2):  # 128 elements from 64 ql bytes, 32 qh bytes and 8 scales
        L, H, S = ql[:, 64 * half:64 * half + 64], qh[:, 32 * half:32 * half + 32], scales[:, 8 * half:8 * half + 8]
        for part in range(4):
            low = (L[:, :32] & 0xF, L[:, 32:] & 0xF, L[:, :32] >> 4, L[:, 32:] >> 4)[part]
            q = (low | (((H >> (2 * part)) & 3) << 4)) - 32
            for l16 in range(2):
                sl = slice(16 * l16, 16 * l16 + 16)
                out[:, 128 * half + 32 * part + 16 * l16:128 * half + 32 * part + 16 * l16 + 16] = \
                    (d * S[:, 2 * part + l16])[:, None] * q[:, sl]
    return out.reshape(-1)


DEQUANT = {"Q8_0": dq_q8_0, "Q4_0": dq_q4_0, "Q4_1": dq_q4_1, "Q5_0": dq_q5_0, "Q5_1": dq_q5_1,
           "Q4_K": dq_q4_k, "Q5_K": dq_q5_k, "Q6_K": dq_q6_k}


def dequantize(data, type_name, shape):
    if type_name == "F32":
        return np.frombuffer(data, "<f4").reshape(shape).copy()
    if type_name == "F16":
        return np.frombuffer(data, "<f2").astype(np.float32).reshape(shape)
    if type_name == "BF16":
        return (np.frombuffer(data, "<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)
    return DEQUANT[type_name](data).reshape(shape)


# ---- quantization (ggml's reference rules, round to nearest) ---------------------------------

def _roundf(v):
    """C's roundf of float32 values: halves away from zero."""
    v = v.astype(np.float64)
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def q_q8_0(x):
    """x float32 [..., K] -> Q8_0 bytes: d = max|x| / 127, q = round(x / d)."""
    x = np.ascontiguousarray(x, np.float32).reshape(-1, 32)
    amax = np.max(np.abs(x), axis=1)
    d = amax / np.float32(127)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    q = _roundf(x * inv[:, None]).astype(np.int8)
    out = np.zeros((x.shape[0], 34), np.uint8)
    out[:, 0:2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def q_q4_0(x):
    """x float32 [..., K] -> Q4_0 bytes: d = (the value of largest magnitude) / -8,
    q = min(15, trunc(x / d + 8.5))."""
    x = np.ascontiguousarray(x, np.float32).reshape(-1, 32)
    idx = np.argmax(np.abs(x), axis=1)  # the first of equal magnitudes, as the reference's strict <
    mx = x[np.arange(x.shape[0]), idx]
    d = (mx / np.float32(-8)).astype(np.float32)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    v = (x * inv[:, None]).astype(np.float32) + np.float32(8.5)
    q = np.minimum(15, np.trunc(v.astype(np.float64)).astype(np.int64)).astype(np.uint8)
    out = np.zeros((x.shape[0], 18), np.uint8)
    out[:, 0:2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out.tobytes()


QUANT = {"Q8_0": q_q8_0, "Q4_0": q_q4_0}


def random_k_blocks(rng, type_name, rows, cols, scale=0.02):
    """Valid random blocks of Q4_K / Q5_K / Q6_K / Q8_0 / Q4_0 for rows x cols weights whose
    values are about `scale` in size: random fields, as a quantizer might have written them."""
    n, nb = block_geometry(type_name)
    count = rows * cols // n
    raw = rng.integers(0, 256, size=(count, nb), dtype=np.uint8)

    def f16(a):
        return np.asarray(a, "<f2").view(np.uint8).reshape(-1, 2)

    if type_name in ("Q4_K", "Q5_K"):
        top = 15 if type_name == "Q4_K" else 31  # the largest quant
        raw[:, 0:2] = f16(rng.uniform(0.3, 1.0, count) * scale / 63 / top * 2)
        raw[:, 2:4] = f16(rng.uniform(0.3, 1.0, count) * scale / 63)
    elif type_name == "Q6_K":
        raw[:, 192:208] = rng.integers(-40, 41, size=(count, 16)).astype(np.int8).view(np.uint8)
        raw[:, 208:210] = f16(rng.uniform(0.5, 1.0, count) * scale / 40 / 16)
    elif type_name == "Q8_0":
        raw[:, 0:2] = f16(rng.uniform(-1, 1, count) * scale / 64)
    elif type_name == "Q4_0":
        raw[:, 0:2] = f16(rng.uniform(-1, 1, count) * scale / 4)
    else:
        raise ValueError(type_name)
    return raw.tobytes()


# ---- an independent GGUF reader ----------------------------------------------------------------

class GgufLayoutError(Exception):
    pass


_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def read_gguf(path):
    """Parses a GGUF file, checking its layout against the specification: magic, version 3,
    general.alignment (u32, a power of two; 32 when absent), the data section at the first
    aligned offset after the tensor infos, each tensor's offset a multiple of the alignment, its
    byte size (elements / block * block bytes) inside the file, no overlaps, dims whole blocks.
    Returns (metadata {key: value}, tensors {name: (type name, shape (row-major), bytes)}, info)."""
    buf = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        size = struct.calcsize(fmt)
        if pos + size > len(buf):
            raise GgufLayoutError(f"truncated at {pos}")
        v = struct.unpack_from(fmt, buf, pos)[0]
        pos += size
        return v

    def string():
        nonlocal pos
        n = take("<Q")
        if pos + n > len(buf):
            raise GgufLayoutError("string past the end")
        s = buf[pos:pos + n]
        pos += n
        return s.decode("utf-8")

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("<I"), take("<Q")
            if et == 9:
                raise GgufLayoutError("nested array")
            return [value(et) for _ in range(n)]
        return take(_SCALARS[t])

    if buf[:4] != b"GGUF":
        raise GgufLayoutError("magic")
    pos = 4
    version = take("<I")
    if version != 3:
        raise GgufLayoutError(f"version {version}")
    n_tensors, n_kv = take("<Q"), take("<Q")
    meta, meta_types = {}, {}
    for _ in range(n_kv):
        k = string()
        t = take("<I")
        if k in meta:
            raise GgufLayoutError(f"duplicate key {k}")
        meta[k], meta_types[k] = value(t), t
    alignment = meta.get("general.alignment", 32)
    if "general.alignment" in meta and meta_types["general.alignment"] != 4:
        raise GgufLayoutError("general.alignment is not u32")
    if alignment <= 0 or alignment & (alignment - 1):
        raise GgufLayoutError("alignment is not a power of two")
    infos = []
    for _ in range(n_tensors):
        name = string()
        nd = take("<I")
        ne = [take("<Q") for _ in range(nd)]
        t, off = take("<I"), take("<Q")
        if t not in GGML:
            raise GgufLayoutError(f"{name}: type {t}")
        tname, bn, bb = GGML[t]
        if ne[0] % bn:
            raise GgufLayoutError(f"{name}: rows of {ne[0]} are not whole {tname} blocks")
        if off % alignment:
            raise GgufLayoutError(f"{name}: offset {off} unaligned")
        infos.append((name, tname, list(reversed(ne)), off, int(np.prod(ne)) // bn * bb))
    data_start = (pos + alignment - 1) // alignment * alignment
    tensors, spans = {}, []
    for name, tname, shape, off, nbytes in infos:
        if data_start + off + nbytes > len(buf):
            raise GgufLayoutError(f"{name}: bytes past the end")
        spans.append((off, off + nbytes, name))
        tensors[name] = (tname, shape, buf[data_start + off:data_start + off + nbytes])
    spans.sort()
    for (a0, a1, an), (b0, b1, bn_) in zip(spans, spans[1:]):
        if b0 < a1:
            raise GgufLayoutError(f"{an} and {bn_} overlap")
    return meta, tensors, dict(version=version, alignment=alignment, data_start=data_start, size=len(buf),
                               meta_types=meta_types)


# ---- a GGUF writer for pre-encoded tensors ----------------------------------------------------

def gguf_raw_bytes(metadata, tensors, alignment=32, offsets=None):
    """metadata: list of (key, type, value) as llm_models.gguf_value takes; tensors: list of
    (name, shape (row-major), type name, bytes). offsets: override each tensor's offset
    (hostile files)."""
    import llm_models as lm
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, vtype, v in metadata:
        out += lm.gguf_string(key) + struct.pack("<I", vtype) + lm.gguf_value(vtype, v)
    datas, offset = [], 0
    for i, (name, shape, tname, data) in enumerate(tensors):
        ne = list(reversed(shape))
        off = offset if offsets is None else offsets[i]
        out += lm.gguf_string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        out += struct.pack("<IQ", TYPE_ID[tname], off)
        datas.append(data)
        offset += len(data)
        offset += (alignment - offset % alignment) % alignment
    out += b"\0" * ((alignment - len(out) % alignment) % alignment)
    for data in datas:
        out += data + b"\0" * ((alignment - len(data) % alignment) % alignment)
    return out
