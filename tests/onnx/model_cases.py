"""Real exported models (tests/onnx/models/, made by tools/onnx_export_models.py with PyTorch) run
through tinyfin.onnx on a backend and compared with PyTorch's stored outputs.

    PYTHONPATH=build/python python3 tests/onnx/model_cases.py [--backend cpu,vulkan,...] [--table]
    python3 tests/onnx/model_cases.py --write DIR    # the models with their weights, for benchmarks

prints, per model and backend, the largest error relative to the tolerance, the run time and the
fallback count (docs/onnx.md "Exported models"). test_models.py runs the same in CI.
"""
import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "models")
sys.path.insert(0, HERE)
import model_weights  # noqa: E402

# A value v matches PyTorch's p when |v - p| <= atol + rtol * |p|, with atol a fraction of the
# output's largest magnitude. float32 on every backend; the differences are summation order
# (and, on the GPU plugins, their exp/erf/tanh approximations) through the depth of each model.
TOLERANCES = {
    "fashion_cnn": dict(rtol=1e-4, atol_scale=1e-5),
    "char_gpt": dict(rtol=1e-4, atol_scale=1e-4),
    "resnet18": dict(rtol=1e-4, atol_scale=1e-4),
    "bert": dict(rtol=1e-4, atol_scale=1e-4),
    "llama_block": dict(rtol=1e-4, atol_scale=1e-5),
}


def load(name):
    """(serialized model with its weights drawn, [(feeds, outputs)] per stored case)."""
    import onnx
    model = model_weights.fill(onnx.load(os.path.join(MODELS, name + ".onnx")))
    stored = np.load(os.path.join(MODELS, name + ".npz"))
    cases = {}
    for key in stored.files:
        case, kind, value = key.split(".", 2)
        cases.setdefault(int(case), ({}, {}))[0 if kind == "in" else 1][value] = stored[key]
    return model.SerializeToString(), [cases[c] for c in sorted(cases)]


def error_ratio(got, want, rtol, atol_scale):
    """max |got - want| / (atol + rtol |want|): at most 1 passes."""
    want = want.astype(np.float64)
    atol = atol_scale * max(float(np.abs(want).max(initial=0.0)), 1e-30)
    return float((np.abs(got.astype(np.float64) - want) / (atol + rtol * np.abs(want))).max(initial=0.0))


def run_model(name, backend, data=None):
    """Runs every stored case of name on backend: {"ratio": worst error ratio, "seconds": of the
    runs, "fallbacks": tinyfin ops that left the backend (summed over the cases), "fallback_ops":
    {op type: count}, "shapes_ok": bool, "fusions": load_report's}."""
    import tinyfin.onnx as tfo
    serialized, cases = data or load(name)
    sess = tfo.InferenceSession(serialized, backend=backend, profile=True)
    names = [o.name for o in sess.get_outputs()]
    tol = TOLERANCES[name]
    result = {"ratio": 0.0, "seconds": 0.0, "fallbacks": 0, "fallback_ops": {}, "shapes_ok": True,
              "folded": sess.load_report()["folded"], "nodes": sess.load_report()["nodes"],
              "fusions": sess.load_report()["fusions"]}
    for feeds, outputs in cases:
        start = time.perf_counter()
        got = sess.run(None, feeds)
        result["seconds"] += time.perf_counter() - start
        run = sess.last_run()
        result["fallbacks"] += run["fallbacks"]
        for node in run["nodes"]:
            if node["fallbacks"]:
                ops = result["fallback_ops"]
                ops[node["op_type"]] = ops.get(node["op_type"], 0) + node["fallbacks"]
        for n, g in zip(names, got):
            want = outputs[n]
            if g.shape != want.shape or g.dtype != want.dtype:
                result["shapes_ok"] = False
                continue
            result["ratio"] = max(result["ratio"], error_ratio(g, want, **tol))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--table", action="store_true", help="a Markdown table for docs/onnx.md")
    parser.add_argument("--write", metavar="DIR", help="only write each model with its weights drawn to DIR "
                        "(for tinyfin-bench --onnx and ONNX Runtime)")
    o = parser.parse_args()
    if o.write:
        os.makedirs(o.write, exist_ok=True)
        for name in TOLERANCES:
            with open(os.path.join(o.write, name + ".onnx"), "wb") as f:
                f.write(load(name)[0])
        return
    import tinyfin as tf
    backends = tf.available_backends() if o.backend == "all" else o.backend.split(",")
    rows = []
    for name in TOLERANCES:
        data = load(name)
        for backend in backends:
            r = run_model(name, backend, data)
            rows.append((name, backend, r))
            ops = ", ".join(f"{k} {v}" for k, v in sorted(r["fallback_ops"].items())) or "-"
            print(f"{name:12} {backend:7} error/tolerance {r['ratio']:.3f} shapes {'ok' if r['shapes_ok'] else 'BAD'} "
                  f"{r['seconds'] * 1000:8.1f} ms  fallbacks {r['fallbacks']} ({ops})", flush=True)
    if o.table:
        print("\n| model | backend | max error / tolerance | fallbacks (op types) |\n|---|---|---|---|")
        for name, backend, r in rows:
            ops = ", ".join(f"{k} {v}" for k, v in sorted(r["fallback_ops"].items())) or "none"
            print(f"| {name} | {backend} | {r['ratio']:.3f} | {r['fallbacks']} ({ops}) |")


if __name__ == "__main__":
    main()
