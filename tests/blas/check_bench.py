#!/usr/bin/python3
"""tinyfin-bench smoke test: the case list, JSON and CSV output, where ops ran, the raw OpenBLAS
reference, bad arguments, and the peers' answer when torch is missing."""
import csv, io, json, os, subprocess, sys, tempfile

bench = sys.argv[1]
QUICK = ["--repeat", "3", "--warmup", "1", "--budget", "0.05", "--settle", "0"]


def run(*args, env=None, code=0):
    out = subprocess.run([bench, *args], capture_output=True, text=True, env=env)
    assert out.returncode == code, f"tinyfin-bench {' '.join(args)} exited {out.returncode}: {out.stderr}"
    return out.stdout


listing = run("--list")
for op in ("overhead", "matmul", "matmul_batched", "conv2d", "conv2d_bwd", "add", "mul", "softmax", "layer_norm", "sum"):
    assert f"\n{op} " in listing, f"{op} missing from --list:\n{listing}"

doc = json.loads(run("--op", "matmul,overhead,add", "--size", "64,add16,1K", "--threads", "1", "--json", *QUICK))
assert doc["schema"] == "tinyfin-bench/1", doc
assert doc["statistic"] == "median" and doc["clock"] == "wall", doc
assert doc["machine"]["threads"] == 1, doc["machine"]
rows = {(r["op"], r["size"], r["backend"]): r for r in doc["results"]}
for backend in ("blas", "cpu", "openblas"):
    row = rows[("matmul", "64", backend)]
    assert "error" not in row and row["median_ns"] > 0 and row["rate"] > 0 and row["samples"] >= 3, row
assert rows[("matmul", "64", "blas")]["ran_on"] == "blas", rows[("matmul", "64", "blas")]
assert rows[("matmul", "64", "openblas")]["kind"] == "reference"
# blas runs add itself (the cpu kernels it links), no fallback.
assert rows[("add", "1K", "blas")]["ran_on"] == "blas", rows[("add", "1K", "blas")]
assert rows[("overhead", "add16", "cpu")]["unit"] == "ns/call"
ratios = {(r["op"], r["size"], r["backend"]): r["time_ratio"] for r in doc["ratios"]}
assert "openblas" in ratios[("matmul", "64", "blas")], ratios

table = list(csv.DictReader(io.StringIO(run("--op", "matmul", "--size", "64", "--backend", "blas", "--csv", *QUICK))))
assert [(r["op"], r["backend"]) for r in table] == [("matmul", "blas")], table

doc = json.loads(run("--op", "matmul", "--size", "64", "--threads", "1", "--clock", "cpu", "--stat", "min", "--json",
                     *QUICK))
assert doc["statistic"] == "min" and doc["clock"] == "cpu", doc
assert all(r["min_ns"] > 0 for r in doc["results"]), doc["results"]

for bad in (["--repeat", "0"], ["--bogus"], ["--compare", "matlab"], ["--op"], ["--clock", "sundial"],
            ["--stat", "mean"], ["--budget", "0"], ["--settle", "-1"], ["--rounds", "0"], ["--rounds", "2"],
            ["--train-gpt", "1", "--rounds", "2"]):
    run(*bad, code=2)

# A torch that cannot be imported: the peers say how to install it, numpy still runs.
with tempfile.TemporaryDirectory() as fake:
    with open(os.path.join(fake, "torch.py"), "w") as f:
        f.write("raise ImportError('no torch here')\n")
    env = dict(os.environ, PYTHONPATH=fake)
    doc = json.loads(run("--op", "matmul", "--size", "64", "--compare", "numpy,torch", "--json", *QUICK, env=env))
    assert any("torch not installed: apt-get install python3-torch" in n for n in doc["notes"]), doc["notes"]
    have_numpy = subprocess.run(["/usr/bin/python3", "-c", "import numpy"], capture_output=True).returncode == 0
    backends = {r["backend"] for r in doc["results"]}
    assert ("numpy" in backends) == have_numpy, (backends, doc["notes"])
    assert "torch" not in backends, backends
    # --rounds: tinyfin and the (here missing) tuned peer in turn, a line per round and the medians.
    if os.path.isdir("/usr/share/games/fortunes"):
        out = run("--train-gpt", "1", "--compare", "torch", "--rounds", "2", "--threads", "1", env=env)
        assert "round 2: tokens/s ratio tinyfin / torch tuned" in out, out
        assert "training tokens/s ratio vs torch tuned: no result in 2 rounds" in out, out
print("tinyfin-bench ok")
