"""Runs tests/llm/tokenizer/tokenizer_tool (the C++ tokenizers) on a batch of texts."""

import json
import os
import subprocess

TOOL = os.environ.get("TOKENIZER_TOOL", "tokenizer_tool")


def run(mode, kind, path, items, *options):
    result = subprocess.run([TOOL, mode, kind, str(path), *options], input=json.dumps(items).encode(),
                            capture_output=True, timeout=300)
    if result.returncode != 0:
        raise RuntimeError(result.stderr.decode(errors="replace"))
    return json.loads(result.stdout)


def encode(kind, path, texts, *options):
    return run("encode", kind, path, texts, *options)


def decode(kind, path, id_lists, *options):
    return [bytes.fromhex(h) for h in run("decode", kind, path, id_lists, *options)]


def error(mode, kind, path, items, *options):
    """The tool's error message (stderr) for input that must be refused."""
    result = subprocess.run([TOOL, mode, kind, str(path), *options], input=json.dumps(items).encode(),
                            capture_output=True, timeout=60)
    assert result.returncode == 1, (result.returncode, result.stderr)
    return result.stderr.decode(errors="replace")
