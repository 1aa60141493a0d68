"""Runs every python block of docs/python.md (and docs/porting-from-pytorch.md) as a script, as a reader would paste it, and checks
that each line `print(...)  # -> TEXT` prints TEXT. A block whose first line is
`# needs: <backend>` runs when that backend is usable (CI has vulkan on lavapipe)."""
import contextlib
import io
import os
import re
import textwrap

import pytest

import tinyfin as tf

# The checkout's docs; scripts/test-packaging runs a copy of these tests outside the checkout and
# names the checkout in TINYFIN_SOURCE_DIR.
DOCS_DIR = os.path.join(os.environ.get("TINYFIN_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", ".."),
                        "docs")
DOC = os.path.join(DOCS_DIR, "python.md")
PORTING = os.path.join(DOCS_DIR, "porting-from-pytorch.md")
EXPECT = re.compile(r"^(?P<indent>\s*)print\((?P<args>.*)\)\s*# -> (?P<want>.*)$")


def blocks(doc=DOC, at_least=4):
    text = open(doc, encoding="utf-8").read()
    found = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(found) >= at_least, f"{doc} lost its python blocks"
    return found


def checked(code):
    """The block with each `print(...)  # -> TEXT` turned into a check of what it prints."""
    lines = []
    for line in code.splitlines():
        m = EXPECT.match(line)
        if m:
            line = f"{m['indent']}__expect({m['want'].strip()!r}, {m['args']})"
        lines.append(line)
    return "\n".join(lines)


def _expect(want, *args):
    out = io.StringIO()
    print(*args, file=out)
    got = out.getvalue().strip()
    assert got == want, f"the docs say {want!r}, the code prints {got!r}"
    print(got)


CASES = [(DOC, i) for i in range(len(blocks()))] + [(PORTING, i) for i in range(len(blocks(PORTING, 1)))]


@pytest.mark.parametrize("doc,index", CASES, ids=[f"{os.path.basename(d)}-{i}" for d, i in CASES])
def test_docs_python_block_runs_as_pasted(doc, index, tmp_path, monkeypatch):
    code = blocks(doc, 1)[index]
    first = code.splitlines()[0]
    if first.startswith("# needs:"):
        needed = first.split(":", 1)[1].strip()
        if needed not in tf.available_backends():
            pytest.skip(f"needs the {needed} backend")
    monkeypatch.chdir(tmp_path)  # blocks may write files
    namespace = {"__name__": "__main__", "__expect": _expect}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(textwrap.dedent(checked(code)), f"docs/{os.path.basename(doc)} block {index}", "exec"), namespace)
    tf.backend_set("cpu")
