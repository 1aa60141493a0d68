#!/usr/bin/python3
"""numpy and PyTorch timings for tinyfin-bench, which runs it as a co-process:

    /usr/bin/python3 bench_peers.py --serve

Protocol, one JSON object per line.
  stdin:  first the settings {"threads", "repeat", "warmup", "budget_s", "sample_s", "settle_s",
          "clock": "wall" | "cpu", "peers": ["numpy", "torch"]}, then one case per line
          ({"op", ...shapes}); EOF ends.
  stdout: for the settings, {"peer", "note"} lines (a peer missing, or how its threads were set)
          and {"status": "ready"}; for each case, per peer that has the op, {"peer", "median_ns",
          "min_ns", "max_ns", "p25_ns", "p75_ns", "samples", "inner"} or {"peer", "error"}, then
          {"status": "done"}. tinyfin-bench sends each case right after timing it itself, so both see the
same load on a shared machine. Timing follows tinyfin-bench's: warm-up calls, one call to size the
samples, then samples of back-to-back calls; every op allocates its result, as tinyfin's do, except
in cases with "out": true, which write into a preallocated array (out=) as tinyfin's out= form does.

Threads: torch.set_num_threads(threads) for ATen/oneDNN, and OpenBLAS (which numpy and torch's
matmul use through Debian's libblas.so.3) pinned to the same count with threadpoolctl when it is
installed, else openblas_set_num_threads() through ctypes in every loaded OpenBLAS.
"""
import ctypes
import json
import sys
import time

INSTALL_HINT = {
    "numpy": "numpy not installed: apt-get install python3-numpy",
    "torch": "torch not installed: apt-get install python3-torch (or scripts/setup --bench)",
}


def emit(**fields):
    print(json.dumps(fields), flush=True)


def quantile(values, q):
    pos = q * (len(values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def measure(fn, cfg):
    # Wall clock, or the process's CPU time (every thread) like tinyfin-bench --clock cpu.
    clock_ns = time.process_time_ns if cfg.get("clock") == "cpu" else time.perf_counter_ns
    for _ in range(cfg["warmup"]):
        fn()
    # Sized from a batch lasting a tenth of a sample, as tinyfin-bench does: one call of a tiny
    # op is mostly the clock's own cost.
    batch = 1
    while True:
        t0 = clock_ns()
        for _ in range(batch):
            fn()
        elapsed = (clock_ns() - t0) * 1e-9
        one = max(elapsed / batch, 1e-9)
        if elapsed >= cfg["sample_s"] / 10 or batch >= 100000000:
            break
        batch *= 10
    inner = max(1, round(cfg["sample_s"] / one))
    samples = max(3, min(cfg["repeat"], int(cfg["budget_s"] / (one * inner))))
    ns = []
    for _ in range(samples):
        t0 = clock_ns()
        for _ in range(inner):
            fn()
        ns.append((clock_ns() - t0) / inner)
    ns.sort()
    return {"median_ns": quantile(ns, 0.5), "min_ns": ns[0], "max_ns": ns[-1],
            "p25_ns": quantile(ns, 0.25), "p75_ns": quantile(ns, 0.75),
            "samples": samples, "inner": inner}


def pin_openblas(threads):
    """Sets every loaded OpenBLAS to threads; returns how, for the note."""
    try:
        import threadpoolctl
        threadpoolctl.threadpool_limits(limits=threads, user_api="blas")
        return "threadpoolctl"
    except ImportError:
        pass
    done = []
    seen = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "openblas" not in path or path in seen or not path.startswith("/"):
                continue
            seen.add(path)
            try:
                lib = ctypes.CDLL(path)
                lib.openblas_set_num_threads(threads)
                done.append(path)
            except (OSError, AttributeError):
                pass
    return "ctypes openblas_set_num_threads in " + ", ".join(done) if done else "no OpenBLAS loaded"


# ---- Cases per peer: each returns the call to time, or None when the peer has no such op ------

def numpy_case(np, case, rng):
    op = case["op"]
    f32 = np.float32

    def randn(shape):
        return rng.standard_normal(shape, dtype=f32)

    if op == "matmul":
        if case.get("dtype"):
            return None  # bf16: numpy has none; f16: numpy's is not a BLAS product
        a, b = randn(case["a"]), randn(case["b"])
        return lambda: np.matmul(a, b)
    if op in ("add", "mul"):
        if case.get("grad"):
            return None  # numpy has no autograd
        a, b = randn(case["n"]), randn(case["n"])
        if case.get("out"):
            c = np.empty(case["n"], dtype=f32)
            ufunc = np.add if op == "add" else np.multiply
            return lambda: ufunc(a, b, out=c)
        return (lambda: a + b) if op == "add" else (lambda: a * b)
    if op == "sum":
        x = randn(case["n"])
        return lambda: x.sum()
    if op == "softmax":
        x = randn(case["x"])

        def softmax():
            e = np.exp(x - x.max(axis=-1, keepdims=True))
            return e / e.sum(axis=-1, keepdims=True)
        return softmax
    if op == "layer_norm":
        x = randn(case["x"])
        w, b = randn(case["x"][-1]), randn(case["x"][-1])

        def layer_norm():
            mean = x.mean(axis=-1, keepdims=True)
            var = x.var(axis=-1, keepdims=True)
            return (x - mean) / np.sqrt(var + f32(1e-5)) * w + b
        return layer_norm
    return None  # numpy has no conv2d


def torch_case(torch, case, generator):
    op = case["op"]
    F = torch.nn.functional

    def randn(shape):
        return torch.randn(shape, generator=generator, dtype=torch.float32)

    if op == "matmul":
        a, b = randn(case["a"]), randn(case["b"])
        if case.get("dtype"):
            a, b = a.to(getattr(torch, case["dtype"])), b.to(getattr(torch, case["dtype"]))
        return lambda: torch.matmul(a, b)
    if op in ("add", "mul"):
        a, b = randn(case["n"]), randn(case["n"])
        if case.get("grad"):
            a.requires_grad_()
            b.requires_grad_()
            fn = torch.add if op == "add" else torch.mul
            if case["grad"] == "record":
                return lambda: fn(a, b)

            def off():
                with torch.no_grad():
                    return fn(a, b)
            return off
        if case.get("out"):
            c = torch.empty(case["n"], dtype=torch.float32)
            fn = torch.add if op == "add" else torch.mul
            return lambda: fn(a, b, out=c)
        return (lambda: a + b) if op == "add" else (lambda: a * b)
    if op == "sum":
        x = randn(case["n"])
        return lambda: x.sum()
    if op == "softmax":
        x = randn(case["x"])
        return lambda: torch.softmax(x, -1)
    if op == "layer_norm":
        x = randn(case["x"])
        d = case["x"][-1]
        w, b = randn(d), randn(d)
        return lambda: F.layer_norm(x, (d,), w, b)
    if op == "conv2d":
        x, w = randn(case["x"]), randn(case["w"])
        return lambda: F.conv2d(x, w, stride=case["stride"], padding=case["padding"])
    if op == "conv2d_bwd":
        x = randn(case["x"]).requires_grad_()
        w = randn(case["w"]).requires_grad_()
        with torch.enable_grad():
            y = F.conv2d(x, w, stride=case["stride"], padding=case["padding"])
        dy = randn(list(y.shape))
        return lambda: torch.autograd.grad(y, (x, w), dy, retain_graph=True)
    return None


def main():
    if sys.argv[1:] != ["--serve"]:
        print("usage: bench_peers.py --serve  (run by tinyfin-bench --compare)", file=sys.stderr)
        return 2
    cfg = json.loads(sys.stdin.readline())
    threads = int(cfg["threads"])
    modules = {}
    for peer in cfg["peers"]:
        try:
            modules[peer] = __import__(peer)
        except ImportError:
            emit(peer=peer, note=INSTALL_HINT.get(peer, f"{peer} not installed"))
    makers = {}
    if modules:
        how = pin_openblas(threads)
    if "numpy" in modules:
        np = modules["numpy"]
        rng = np.random.default_rng(0)
        makers["numpy"] = lambda case: numpy_case(np, case, rng)
        emit(peer="numpy", note=f"numpy {np.__version__}, OpenBLAS threads {threads} ({how})")
    if "torch" in modules:
        torch = modules["torch"]
        torch.set_num_threads(threads)
        torch.set_grad_enabled(False)
        gen = torch.Generator().manual_seed(0)
        makers["torch"] = lambda case: torch_case(torch, case, gen)
        emit(peer="torch", note=f"torch {torch.__version__}, torch.get_num_threads() = "
                                f"{torch.get_num_threads()}, OpenBLAS threads {threads} ({how})")
    emit(status="ready")

    for line in sys.stdin:
        case = json.loads(line)
        for peer, make in makers.items():
            try:
                fn = make(case)
                if fn is not None:
                    emit(peer=peer, **measure(fn, cfg))
            except Exception as e:  # a failing case must not stop the others
                emit(peer=peer, error=f"{type(e).__name__}: {e}")
            fn = None  # free the operands before the next peer runs
            # Let OpenBLAS's spinning workers (numpy and torch matmul) go idle before the next peer.
            time.sleep(cfg.get("settle_s", 0))
        emit(status="done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
