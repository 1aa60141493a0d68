#!/usr/bin/python3
"""tinyfin-bench --llm smoke test on a tiny random Llama-shaped model written by
tools/tinyfin_llm_random_model.py: both thread counts report positive rates, the bytes per
generated token equal the model's matrices (every layer's projections and the LM head, bf16) plus
the f32 KV cache at the mean position, computed here from the shape, the read bandwidth is the
better of the two probes (never below the plain one) and the ceiling is it over those bytes. Bad
arguments exit 2. --compare llamacpp: its argument handling without the npm package (a GGUF file
wanted; node-llama-cpp missing from NODE_PATH or node missing: an error naming what to install,
before tinyfin's own run)."""
import os, re, shutil, subprocess, sys, tempfile

bench, writer = sys.argv[1], sys.argv[2]
with tempfile.TemporaryDirectory() as tmp:
    model = os.path.join(tmp, "tiny")
    subprocess.run(["/usr/bin/python3", writer, "--shape", "tiny", "--dtype", "bf16", "--out", model], check=True,
                   capture_output=True)
    prompt, generate = 24, 4
    out = subprocess.run([bench, "--llm", model, "--prompt", str(prompt), "--generate", str(generate), "--repeat", "1"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr}\n{out.stdout}"
    text = out.stdout
    # The tiny shape: hidden 128, 2 layers, 4 heads (head_dim 32), 2 KV heads, intermediate 352, vocab 512.
    h, layers, heads, kv, inter, vocab, d = 128, 2, 4, 2, 352, 512, 32
    matrices = layers * (h * heads * d + 2 * h * kv * d + heads * d * h + 3 * h * inter) + vocab * h
    weight_gb = 2 * matrices / 1e9
    kv_gb = 2 * layers * kv * d * (prompt + generate / 2) * 4 / 1e9
    m = re.search(r"bytes read per generated token: ([0-9.]+) GB of weights \+ ([0-9.]+) GB of KV cache", text)
    assert m, text
    assert abs(float(m.group(1)) - weight_gb) < 1e-3 and abs(float(m.group(2)) - kv_gb) < 1e-3, (m.groups(), weight_gb, kv_gb)
    for clock in ("on the process CPU clock", "on the wall clock"):
        section = text.split(clock, 1)[1].splitlines()
        rows = [line.split() for line in section[2:4]]
        assert [r[0] for r in rows] == ["1", "2"], section
        for r in rows:
            plain, read, ceiling, gen, frac, prompt_rate = map(float, r[1:7])
            assert plain > 0 and read >= plain and gen > 0 and prompt_rate > 0, r
            # The table prints read with 2 decimals, ceiling and fractions with 3.
            assert abs(ceiling - read / (weight_gb + kv_gb)) <= 0.0051 / (weight_gb + kv_gb) + 6e-4, r
            assert abs(frac - gen / ceiling) <= 0.002 * frac + 6e-4, r
    # The load options reach the run and are named in its first line.
    flags = subprocess.run([bench, "--llm", model, "--prompt", "4", "--generate", "2", "--repeat", "1", "--threads", "1",
                            "--no-fuse", "--no-prepack"], capture_output=True, text=True, timeout=120)
    assert flags.returncode == 0, flags
    assert "--no-fuse, --no-prepack)" in flags.stdout.splitlines()[0], flags.stdout
    bad = subprocess.run([bench, "--llm"], capture_output=True, text=True)
    assert bad.returncode == 2, bad
    missing = subprocess.run([bench, "--llm", os.path.join(tmp, "absent"), "--threads", "1"], capture_output=True,
                             text=True, timeout=120)
    assert missing.returncode != 0, missing
    # --compare llamacpp: llama.cpp reads GGUF only.
    hf = subprocess.run([bench, "--llm", model, "--compare", "llamacpp"], capture_output=True, text=True, timeout=60)
    assert hf.returncode == 2 and "FILE.gguf" in hf.stderr, hf
    gguf = os.path.join(tmp, "tiny.gguf")
    subprocess.run(["/usr/bin/python3", writer, "--shape", "tiny", "--gguf", "--out", gguf], check=True,
                   capture_output=True)
    short = [bench, "--llm", gguf, "--prompt", "4", "--generate", "2", "--repeat", "1", "--threads", "1"]
    alone = subprocess.run(short, capture_output=True, text=True, timeout=120)
    assert alone.returncode == 0 and "llama.cpp on the same file" not in alone.stdout, alone
    empty = os.path.join(tmp, "node_modules")
    os.mkdir(empty)
    env = dict(os.environ, NODE_PATH=empty)
    no_pkg = subprocess.run(short + ["--compare", "llamacpp"], capture_output=True, text=True, timeout=120, env=env)
    assert no_pkg.returncode == 1, no_pkg
    assert "repeat 1" not in no_pkg.stderr, no_pkg.stderr  # the error comes before tinyfin's run
    if shutil.which("node"):
        assert "node-llama-cpp not found in NODE_PATH" in no_pkg.stderr and "npm install" in no_pkg.stderr, no_pkg
        assert "@node-llama-cpp/linux-x64" in no_pkg.stderr, no_pkg.stderr
    no_node = subprocess.run(short + ["--compare", "llamacpp", "--node", os.path.join(tmp, "no-such-node")],
                             capture_output=True, text=True, timeout=120, env=env)
    assert no_node.returncode == 1 and "cannot run" in no_node.stderr, no_node
print("ok")
