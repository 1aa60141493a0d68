#!/usr/bin/python3
"""tinyfin-info on the real build tree: human and JSON output agree with ops.def, show cpu
and the backend auto selects."""
import json, os, re, subprocess, sys

tool = sys.argv[1]
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ops_def = open(os.path.join(root, "include", "tinyfin", "ops.def")).read()
ops = [m.group(1) for m in re.finditer(r'^TF_OP\(\s*\d+\s*,\s*\w+\s*,\s*"(\w+)"', ops_def, re.M)]
assert ops, "no ops parsed from ops.def"

out = subprocess.run([tool, "--json"], capture_output=True, text=True)
assert out.returncode == 0, f"tinyfin-info --json exited {out.returncode}: {out.stderr}"
info = json.loads(out.stdout)
assert info["schema"] == "tinyfin-info/1"
assert info["core"]["abi"] == "1.2", info["core"]
assert info["ops"] == ops, (info["ops"], ops)
cpu = [p for p in info["plugins"] if p["name"] == "cpu"]
assert len(cpu) == 1, info["plugins"]
cpu = cpu[0]
assert cpu["outcome"] == "loaded", cpu
assert cpu["initialised"] is True
assert cpu["abi"] == "1.2"
assert cpu["path"].endswith("tinyfin-cpu.so"), cpu["path"]
assert len(cpu["devices"]) == 1 and cpu["devices"][0]["kind"] == "cpu", cpu["devices"]
assert cpu["devices"][0]["host_addressable"] is True
assert cpu["devices"][0]["memory_total"] > 0
assert set(cpu["supported_ops"]) == set(ops), set(ops) - set(cpu["supported_ops"])
assert any(d["origin"] == "build-tree" for d in info["search_path"]), info["search_path"]
# What auto picks in this build (tests/meson.build): blas where it is built, else cpu.
expected = os.environ.get("TINYFIN_TEST_AUTO_BACKEND") or "cpu"
assert info["selection"]["selected"] == expected, (expected, info["selection"])
assert info["selection"]["notes"], info["selection"]

human = subprocess.run([tool], capture_output=True, text=True)
assert human.returncode == 0, human.stderr
text = human.stdout
assert cpu["path"] in text
assert "outcome: loaded" in text
assert f"Selection: TINYFIN_BACKEND=auto -> {expected}" in text, text
for op in ops:
    assert re.search(rf"^  {op}\s+x", text, re.M), f"op {op} missing from the matrix:\n{text}"

bad = subprocess.run([tool, "--bogus"], capture_output=True, text=True)
assert bad.returncode == 2 and "unknown argument" in bad.stderr
print(f"tinyfin-info ok: {len(ops)} ops, cpu loaded from {cpu['path']}")
