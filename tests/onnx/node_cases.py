"""ONNX's own node test cases (Debian's python3-onnx 1.12: onnx.backend.test.case.node) run
through tinyfin.onnx.backend, classified as passed, failed or not supported.

Used by test_conformance.py (CI) and, as a script, to print docs/onnx.md's table and to rewrite
the expected-pass lists:

    PYTHONPATH=build/python python3 tests/onnx/node_cases.py --backend cpu [--write-expected] [--table]
        [--ops Asin,Acos]   (only those op types' cases; --write-expected then rewrites their lines)
"""
import argparse
import collections
import os
import sys

import numpy as np

# ONNX 1.12's case modules use numpy aliases numpy 1.24 removed.
for _alias, _type in (("float", float), ("int", int), ("bool", bool), ("object", object)):
    if not hasattr(np, _alias):
        setattr(np, _alias, _type)

HERE = os.path.dirname(os.path.abspath(__file__))


def load_cases():
    from onnx.backend.test.case.node import collect_testcases
    return sorted(collect_testcases(None), key=lambda c: c.name)


def op_type(case):
    """The op a case tests: the node's type, or for a function's expanded body the op its name
    starts with."""
    nodes = case.model.graph.node
    return nodes[0].op_type if len(nodes) == 1 and not case.name.endswith("_expanded") else _expanded_op(case)


# Case-name stems that do not spell their op.
_ALIASES = {"sce": "SoftmaxCrossEntropyLoss", "nllloss": "NegativeLogLikelihoodLoss",
            "mvn": "MeanVarianceNormalization"}


def _expanded_op(case):
    stem = case.name[len("test_"):]
    if stem.split("_")[0] in _ALIASES:
        return _ALIASES[stem.split("_")[0]]
    compact = stem.replace("_", "")
    best = None
    for name in _all_op_names():
        if compact.startswith(name.lower()) and (best is None or len(name) > len(best)):
            best = name
    return best or case.model.graph.node[0].op_type


_OPS = None


def _all_op_names():
    global _OPS
    if _OPS is None:
        import onnx.defs
        _OPS = sorted({s.name for s in onnx.defs.get_all_schemas_with_history()})
    return _OPS


# Ops whose outputs are random draws: ONNX's cases hold one sample of numpy's generator, which no
# other implementation reproduces (the case modules say so), so only dtype and shape are checked,
# and that Bernoulli's values are 0 or 1.
RANDOM_OPS = {"Bernoulli"}


def compare(what, out, ref, case, random_outputs):
    """None when out matches the case's ref (a tensor, a list for a sequence, None for an empty
    optional), else ('failed' | 'not supported', reason)."""
    if ref is None or isinstance(ref, list):
        if ref is None or out is None:
            return None if out is ref else ("failed", f"{what}: {out!r:.40}, expected {ref!r:.40}")
        if not isinstance(out, list):
            return "failed", f"{what}: a {type(out).__name__}, expected a sequence (list)"
        if len(out) != len(ref):
            return "failed", f"{what}: a sequence of {len(out)}, expected {len(ref)}"
        for k, (o, r) in enumerate(zip(out, ref)):
            result = compare(f"{what}[{k}]", o, r, case, random_outputs)
            if result is not None:
                return result
        return None
    ref = np.asarray(ref)
    if ref.dtype == object:
        return "not supported", "string tensors"
    if not isinstance(out, np.ndarray):
        return "failed", f"{what}: a {type(out).__name__}, expected a tensor"
    if out.dtype != ref.dtype:
        return "failed", f"{what}: dtype {out.dtype}, expected {ref.dtype}"
    if out.shape != ref.shape:
        return "failed", f"{what}: shape {out.shape}, expected {ref.shape}"
    if random_outputs:
        return None if np.all((out == 0) | (out == 1)) else ("failed", f"{what}: values other than 0 and 1")
    try:
        if ref.dtype.kind in "fc":
            np.testing.assert_allclose(out, ref, rtol=case.rtol, atol=case.atol)
        else:
            np.testing.assert_array_equal(out, ref)
    except AssertionError as e:
        lines = [l for l in str(e).splitlines() if "Mismatch" in l or "Max abs" in l]
        return "failed", f"{what}: values differ ({'; '.join(l.strip() for l in lines)})"
    return None


def raised(stage, e):
    """An exception of the load or run stage as ('not supported' | 'failed', reason): an
    UnsupportedError is not supported, every other exception a failure."""
    import tinyfin.onnx
    if isinstance(e, tinyfin.onnx.UnsupportedError):
        return "not supported", str(e).splitlines()[0]
    return "failed", f"{stage}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def run_case(case, backend="cpu"):
    """('passed' | 'failed' | 'not supported', reason)."""
    random_outputs = op_type(case) in RANDOM_OPS
    import tinyfin.onnx.backend as tb
    try:
        rep = tb.prepare(case.model, device=backend)
    except Exception as e:  # noqa: BLE001 (raised() sorts them)
        return raised("load", e)
    for inputs, expected in case.data_sets:
        try:
            outputs = rep.run(list(inputs))
        except Exception as e:  # noqa: BLE001
            return raised("run", e)
        if len(outputs) != len(expected):
            return "failed", f"{len(outputs)} outputs, expected {len(expected)}"
        for i, (out, ref) in enumerate(zip(outputs, expected)):
            result = compare(f"output {i}", out, ref, case, random_outputs)
            if result is not None:
                return result
    return "passed", ""


def expected_path(backend):
    return os.path.join(HERE, f"expected_pass_{backend}.txt")


def read_expected(backend):
    path = expected_path(backend)
    if not os.path.exists(path):
        return set()
    with open(path) as f:
        return {line.strip() for line in f if line.strip() and not line.startswith("#")}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--write-expected", action="store_true")
    parser.add_argument("--table", action="store_true", help="print docs/onnx.md's per-op table")
    parser.add_argument("--failures", action="store_true", help="list each failure's reason")
    parser.add_argument("--ops", help="only the cases of these op types (comma-separated); --write-expected "
                        "then rewrites only their lines")
    args = parser.parse_args()
    import tinyfin
    tinyfin.backend_set(args.backend)
    cases = load_cases()
    if args.ops:
        only = set(args.ops.split(","))
        cases = [c for c in cases if op_type(c) in only]
    results = {c.name: (op_type(c),) + run_case(c, args.backend) for c in cases}
    counts = collections.Counter(r[1] for r in results.values())
    print(f"{args.backend}: {len(cases)} cases: {counts['passed']} passed, {counts['failed']} failed, "
          f"{counts['not supported']} not supported")
    if args.failures:
        for name, (op, status, reason) in sorted(results.items()):
            if status == "failed":
                print(f"  FAIL {name} ({op}): {reason}")
    if args.table:
        per_op = collections.defaultdict(collections.Counter)
        reasons = collections.defaultdict(list)
        for name, (op, status, reason) in results.items():
            per_op[op][status] += 1
            if status == "failed":
                reasons[op].append(f"{name}: {reason}")
        print("| op type | cases | passed | failed | not supported |")
        print("|---|---|---|---|---|")
        for op in sorted(per_op):
            c = per_op[op]
            print(f"| {op} | {sum(c.values())} | {c['passed']} | {c['failed']} | {c['not supported']} |")
        print()
        for op in sorted(reasons):
            for r in reasons[op]:
                print(f"- {r}")
    if args.write_expected:
        passed = {n for n, r in results.items() if r[1] == "passed"}
        if args.ops:  # the other cases' lines stay as they are
            passed |= read_expected(args.backend) - set(results)
        with open(expected_path(args.backend), "w") as f:
            f.write(f"# ONNX 1.12 node cases that pass on {args.backend} (tests/onnx/node_cases.py "
                    "--write-expected); test_conformance.py fails when one of them stops passing.\n")
            for name in sorted(passed):
                f.write(name + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
