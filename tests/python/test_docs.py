"""Runs every python block of docs/python.md as a script, as a reader would paste it, and checks
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
DOC = os.path.join(os.environ.get("TINYFIN_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", ".."),
                   "docs", "python.md")
EXPECT = re.compile(r"^(?P<indent>\s*)print\((?P<args>.*)\)\s*# -> (?P<want>.*)$")


def blocks():
    text = open(DOC, encoding="utf-8").read()
    found = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(found) >= 4, "docs/python.md lost its python blocks"
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


@pytest.mark.parametrize("index", range(len(blocks())))
def test_docs_python_block_runs_as_pasted(index, tmp_path, monkeypatch):
    code = blocks()[index]
    first = code.splitlines()[0]
    if first.startswith("# needs:"):
        needed = first.split(":", 1)[1].strip()
        if needed not in tf.available_backends():
            pytest.skip(f"needs the {needed} backend")
    monkeypatch.chdir(tmp_path)  # blocks may write files
    namespace = {"__name__": "__main__", "__expect": _expect}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(textwrap.dedent(checked(code)), f"docs/python.md block {index}", "exec"), namespace)
    tf.backend_set("cpu")
