"""Byte-level BPE (tokenizer.json and GGUF "gpt2" vocabularies) against a reference written here
from the algorithm's definition: a BPE trained on the fortunes text by counting pairs, and the
classic encoder (byte-to-unicode map, regex pre-tokenizer, lowest-ranked pair merged until none
applies). Python's re has no \\p{L}, so the reference pre-tokenizer spells the patterns for ASCII
and the texts checked are printable ASCII; tests/llm/tokenizer/test_tokenizer.cpp checks the
Unicode cases by hand."""

import collections
import json
import re

import pytest

import corpus
import tokenizer_tool as tool

# The pre-tokenizers of GPT-2 and Llama 3, restricted to ASCII (\p{L} -> [A-Za-z], \p{N} -> [0-9]).
GPT2_ASCII = r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+"""
LLAMA3_ASCII = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\nA-Za-z0-9]?[A-Za-z]+|[0-9]{1,3}| ?[^\sA-Za-z0-9]+[\r\n]*"""
                r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
LLAMA3_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                  r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")


def bytes_to_unicode():
    """GPT-2's map: printable Latin-1 bytes stand for themselves, the rest for U+0100 onwards."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTES = bytes_to_unicode()


def pre_tokens(pattern, text):
    return ["".join(BYTES[b] for b in m.encode()) for m in re.findall(pattern, text)]


def train(pattern, texts, merges):
    """Plain BPE training: repeatedly merge the most frequent adjacent pair, updating the pair
    counts of only the words that hold it."""
    counts = collections.Counter(tuple(t) for text in texts for t in pre_tokens(pattern, text))
    words = [list(w) for w in counts]
    freq = list(counts.values())
    pairs, where = collections.Counter(), collections.defaultdict(set)
    for k, word in enumerate(words):
        for pair in zip(word, word[1:]):
            pairs[pair] += freq[k]
            where[pair].add(k)
    rules = []
    for _ in range(merges):
        best = max(pairs, key=pairs.get, default=None)
        if best is None or pairs[best] <= 0:
            break
        rules.append(best)
        for k in list(where[best]):
            word = words[k]
            for pair in zip(word, word[1:]):
                pairs[pair] -= freq[k]
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            words[k] = out
            for pair in zip(out, out[1:]):
                pairs[pair] += freq[k]
                where[pair].add(k)
    return rules


def encode_word(word, ranks):
    """The classic BPE encoder: merge the lowest-ranked pair (all its occurrences, left to right)."""
    parts = list(word)
    while len(parts) > 1:
        pairs = [(ranks.get((a, b), 1 << 30), a, b) for a, b in zip(parts, parts[1:])]
        rank, a, b = min(pairs)
        if rank == 1 << 30:
            break
        out, i = [], 0
        while i < len(parts):
            if i + 1 < len(parts) and parts[i] == a and parts[i + 1] == b:
                out.append(a + b)
                i += 2
            else:
                out.append(parts[i])
                i += 1
        parts = out
    return parts


class Reference:
    def __init__(self, pattern, rules, ignore_merges=False):
        self.pattern, self.ignore_merges = pattern, ignore_merges
        self.tokens = [BYTES[b] for b in range(256)] + [a + b for a, b in rules]
        self.ids = {t: i for i, t in reversed(list(enumerate(self.tokens)))}
        self.ranks = {pair: r for r, pair in reversed(list(enumerate(rules)))}
        self.rules = rules

    def encode(self, text):
        ids = []
        for word in pre_tokens(self.pattern, text):
            if self.ignore_merges and word in self.ids:
                ids.append(self.ids[word])
                continue
            ids.extend(self.ids[p] for p in encode_word(word, self.ranks))
        return ids


SPECIALS = ["<|endoftext|>", "<|eot_id|>"]


def tokenizer_json(reference, pre_tokenizer, ignore_merges):
    vocab = {}
    for i, t in enumerate(reference.tokens):
        vocab.setdefault(t, i)
    n = len(reference.tokens)
    return {
        "version": "1.0",
        "added_tokens": [{"id": n + k, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for k, s in enumerate(SPECIALS)],
        "normalizer": None,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": ignore_merges, "vocab": vocab,
                  "merges": [f"{a} {b}" for a, b in reference.rules]},
    }


GPT2_PRE = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
LLAMA3_PRE = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}

STYLES = {
    # name: (ASCII reference pattern, tokenizer.json pre_tokenizer, ignore_merges, GGUF tokenizer.ggml.pre)
    "gpt2": (GPT2_ASCII, GPT2_PRE, False, "gpt-2"),
    "llama3": (LLAMA3_ASCII, LLAMA3_PRE, True, "llama-bpe"),
}


@pytest.fixture(scope="module", params=sorted(STYLES))
def style(request, tmp_path_factory):
    pattern, pre, ignore_merges, gguf_pre = STYLES[request.param]
    training = corpus.printable_ascii(corpus.fortunes(["fortunes", "wisdom"]))
    reference = Reference(pattern, train(pattern, training, 300), ignore_merges)
    work = tmp_path_factory.mktemp(request.param)
    (work / "tokenizer.json").write_text(json.dumps(tokenizer_json(reference, pre, ignore_merges)), encoding="utf-8")
    n = len(reference.tokens)
    vocabulary = {"model": "gpt2", "pre": gguf_pre, "tokens": reference.tokens + SPECIALS,
                  "token_types": [1] * n + [3] * len(SPECIALS),
                  "merges": [f"{a} {b}" for a, b in reference.rules], "bos_id": -1, "eos_id": n, "add_bos": False}
    (work / "vocabulary.json").write_text(json.dumps(vocabulary), encoding="utf-8")
    return reference, work


@pytest.fixture(scope="module")
def texts():
    held_out = corpus.printable_ascii(corpus.fortunes(["people", "work", "pets", "food", "politics"]))
    assert len(held_out) > 1000
    return corpus.printable_ascii(corpus.EDGE_CASES) + held_out[:1500]


@pytest.mark.parametrize("kind", ["--json", "--vocabulary"])
def test_ids_equal_reference(style, texts, kind):
    reference, work = style
    path = work / ("tokenizer.json" if kind == "--json" else "vocabulary.json")
    got = tool.encode(kind, path, texts)
    expected = [reference.encode(t) for t in texts]
    mismatches = [(t, e, g) for t, e, g in zip(texts, expected, got) if e != g]
    assert not mismatches, f"{len(mismatches)} of {len(texts)} texts differ; first: {mismatches[0]!r}"
    assert sum(i >= 256 for ids in expected for i in ids) > 5000  # merges did happen


@pytest.mark.parametrize("kind", ["--json", "--vocabulary"])
def test_round_trip_and_specials(style, texts, kind):
    reference, work = style
    path = work / ("tokenizer.json" if kind == "--json" else "vocabulary.json")
    unicode_texts = [t for t in corpus.EDGE_CASES if t] + texts[:200]
    ids = tool.encode(kind, path, unicode_texts)
    assert tool.decode(kind, path, ids) == [t.encode() for t in unicode_texts]
    n = len(reference.tokens)
    text = "end<|endoftext|>"
    plain, parsed = tool.encode(kind, path, [text])[0], tool.encode(kind, path, [text], "--parse-special")[0]
    assert plain == reference.encode(text) and n not in plain
    assert parsed == reference.encode("end") + [n]
    assert tool.decode(kind, path, [parsed])[0] == b"end"
    assert tool.decode(kind, path, [parsed], "--keep-special")[0] == text.encode()
