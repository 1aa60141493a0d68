"""SentencePiece tokenizers against libsentencepiece's Python encoder (Debian's
python3-sentencepiece): a BPE model with byte fallback trained here on the fortunes text, then the
same ids from Tokenizer::from_sentencepiece (the .model through libsentencepiece's C++ library),
from Tokenizer::from_vocabulary (tinyfin's own SentencePiece-style merging of the GGUF-style
tokens, scores and types extracted from the model) and from Tokenizer::from_tokenizer_json (the
model converted to a Llama-2-style tokenizer.json, as Hugging Face's converter does: merges ranked
by the merged piece's score, byte fallback, Prepend/Replace normalizer)."""

import json

import pytest
import sentencepiece as spm

import corpus
import tokenizer_tool as tool

TRAIN = ["fortunes", "computers", "literature", "wisdom", "science", "linux"]
HELD_OUT = ["people", "work", "pets", "food", "politics", "love"]
KINDS = ["--model", "--vocabulary", "--json"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    work = tmp_path_factory.mktemp("spm")
    text = work / "train.txt"
    text.write_text("\n".join(corpus.fortunes(TRAIN)), encoding="utf-8")
    prefix = work / "fortunes"
    # Llama 2's settings: BPE, byte fallback, no normalization, digits split, a dummy prefix.
    spm.SentencePieceTrainer.train(
        input=str(text), model_prefix=str(prefix), vocab_size=1200, model_type="bpe", byte_fallback=True,
        normalization_rule_name="identity", remove_extra_whitespaces=False, add_dummy_prefix=True,
        split_digits=True, allow_whitespace_only_pieces=True, character_coverage=0.9995,
        control_symbols=["<|eot|>"], unk_id=0, bos_id=1, eos_id=2, pad_id=-1, num_threads=2,
        input_sentence_size=200000, shuffle_input_sentence=False, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=str(prefix) + ".model")

    # The GGUF-style vocabulary: tokenizer.ggml.tokens / scores / token_type.
    def kind(i):
        if sp.is_unknown(i): return 2
        if sp.is_control(i): return 3
        if sp.is_unused(i): return 5
        if sp.is_byte(i): return 6
        return 1
    n = sp.get_piece_size()
    vocabulary = {
        "model": "llama", "tokens": [sp.id_to_piece(i) for i in range(n)],
        "scores": [sp.get_score(i) for i in range(n)], "token_types": [kind(i) for i in range(n)],
        "bos_id": sp.bos_id(), "eos_id": sp.eos_id(), "unk_id": sp.unk_id(), "add_bos": True,
    }
    vocabulary_path = work / "vocabulary.json"
    vocabulary_path.write_text(json.dumps(vocabulary), encoding="utf-8")
    json_dir = work / "hf"
    json_dir.mkdir()
    (json_dir / "tokenizer.json").write_text(json.dumps(llama2_tokenizer_json(sp, vocabulary)), encoding="utf-8")
    (json_dir / "tokenizer_config.json").write_text(json.dumps(
        {"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>"}), encoding="utf-8")
    return sp, {"--model": str(prefix) + ".model", "--vocabulary": vocabulary_path,
                "--json": json_dir / "tokenizer.json"}


def llama2_tokenizer_json(sp, vocabulary):
    """The layout of Llama 2's tokenizer.json: merges are every split of a normal piece into two
    normal pieces, ranked by the merged piece's id (SentencePiece numbers pieces by score)."""
    tokens, types = vocabulary["tokens"], vocabulary["token_types"]
    normal = {t: i for i, t in enumerate(tokens) if types[i] == 1}
    merges = []
    for piece, i in sorted(normal.items(), key=lambda item: item[1]):
        splits = [(piece[:k], piece[k:]) for k in range(1, len(piece)) if piece[:k] in normal and piece[k:] in normal]
        merges.extend(sorted(splits, key=lambda lr: (normal[lr[0]], normal[lr[1]])))
    specials = [i for i, k in enumerate(types) if k in (2, 3)]
    return {
        "version": "1.0",
        "added_tokens": [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i in specials],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": [f"{a} {b}" for a, b in merges]},
    }


@pytest.fixture(scope="module")
def texts():
    held_out = corpus.fortunes(HELD_OUT)
    assert len(held_out) > 1000
    return corpus.EDGE_CASES + held_out[:1500]


@pytest.mark.parametrize("kind", KINDS)
def test_ids_equal_libsentencepiece(model, texts, kind):
    sp, paths = model
    path = paths[kind]
    expected = [sp.encode(t) for t in texts]
    got = tool.encode(kind, path, texts, "--no-bos")
    mismatches = [(t, e, g) for t, e, g in zip(texts, expected, got) if e != g]
    assert not mismatches, f"{len(mismatches)} of {len(texts)} texts differ; first: {mismatches[0]!r}"
    # The test must exercise merges and byte fallback, not only single characters.
    flat = [i for ids in expected for i in ids]
    assert any(sp.is_byte(i) for i in flat), "no text needed byte fallback"
    assert sum(len(sp.id_to_piece(i)) > 3 for i in flat) > 1000


@pytest.mark.parametrize("kind", KINDS)
def test_bos_and_special_tokens(model, kind):
    sp, paths = model
    path = paths[kind]
    eot = sp.piece_to_id("<|eot|>")
    assert sp.is_control(eot)
    text = "Hello<|eot|> world"
    with_bos = tool.encode(kind, path, [text])[0]
    assert with_bos[0] == sp.bos_id() and with_bos[1:] == sp.encode(text)
    assert eot not in with_bos  # spelled out in characters, not the control token
    parsed = tool.encode(kind, path, [text, "<s>Hi"], "--parse-special", "--no-bos")
    # The control token is cut out; each side is encoded on its own (with the dummy prefix).
    assert parsed[0] == sp.encode("Hello") + [eot] + sp.encode(" world")
    assert parsed[1] == [sp.bos_id()] + sp.encode("Hi")
    # A prompt that spells BOS gets no second one.
    assert tool.encode(kind, path, ["<s>Hi"], "--parse-special")[0] == [sp.bos_id()] + sp.encode("Hi")


@pytest.mark.parametrize("kind", KINDS)
def test_decode_round_trip(model, texts, kind):
    sp, paths = model
    path = paths[kind]
    ids = [[sp.bos_id()] + sp.encode(t) + [sp.eos_id()] for t in texts]
    decoded = tool.decode(kind, path, ids)
    for text, got, i in zip(texts, decoded, ids):
        assert got == text.encode(), (text, got)
        assert got.decode() == sp.decode(i)
    kept = tool.decode(kind, path, [[sp.bos_id()] + sp.encode("Hi")], "--keep-special")[0]
    assert kept == b"<s>Hi"


@pytest.mark.parametrize("kind", KINDS)
def test_decode_refuses_out_of_range_ids(model, kind):
    sp, paths = model
    path = paths[kind]
    message = tool.error("decode", kind, path, [[5, sp.get_piece_size()]])
    assert "out of range" in message and str(sp.get_piece_size()) in message
    assert "out of range" in tool.error("decode", kind, path, [[-1]])


def test_vocabulary_with_inconsistent_arrays_is_refused(model, tmp_path):
    vocabulary_path = model[1]["--vocabulary"]
    vocabulary = json.loads(vocabulary_path.read_text(encoding="utf-8"))
    cases = {
        "scores": dict(vocabulary, scores=vocabulary["scores"][:-1]),
        "token_type": dict(vocabulary, token_types=vocabulary["token_types"][:10]),
        "bos_token_id": dict(vocabulary, bos_id=len(vocabulary["tokens"])),
        "has type 9": dict(vocabulary, token_types=[9] + vocabulary["token_types"][1:]),
        "byte type": dict(vocabulary, token_types=[6] + vocabulary["token_types"][1:]),
        "model": dict(vocabulary, model="unigram"),
    }
    for expected, broken in cases.items():
        path = tmp_path / "broken.json"
        path.write_text(json.dumps(broken), encoding="utf-8")
        assert expected in tool.error("encode", "--vocabulary", path, ["x"])


def test_malformed_model_file_is_refused(tmp_path):
    for name, data in {"garbage": b"\x00\xff not a protobuf" * 10, "empty": b"", "text": b"hello"}.items():
        path = tmp_path / f"{name}.model"
        path.write_bytes(data)
        assert "SentencePiece" in tool.error("encode", "--model", path, ["x"]) or "no pieces" in tool.error(
            "encode", "--model", path, ["x"])
    assert "directory" in tool.error("encode", "--model", tmp_path, ["x"])
