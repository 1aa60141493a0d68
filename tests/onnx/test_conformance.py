"""ONNX's node test cases (python3-onnx 1.12) on every loaded backend that has an expected-pass
list: each listed case must pass (a regression fails); a case not listed is skipped with its
status (not supported, or failing with the reason), so the counts stay honest."""
import pytest

import node_cases

import tinyfin as tf

CASES = node_cases.load_cases()
BACKENDS = [b for b in ("cpu", "vulkan", "opengl", "opencl")
            if b in tf.available_backends() and node_cases.read_expected(b)]
EXPECTED = {b: node_cases.read_expected(b) for b in BACKENDS}


def test_expected_lists_name_real_cases():
    names = {c.name for c in CASES}
    for backend, expected in EXPECTED.items():
        assert expected <= names, f"{backend}: unknown cases {sorted(expected - names)[:5]}"
    assert "cpu" in EXPECTED and len(EXPECTED["cpu"]) > 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_node_case(case, backend):
    tf.backend_set(backend)
    status, reason = node_cases.run_case(case, backend)
    if case.name in EXPECTED[backend]:
        assert status == "passed", f"{case.name} on {backend} regressed: {status}: {reason}"
    elif status == "passed":
        pytest.skip("passes but is not in the expected list yet (node_cases.py --write-expected)")
    else:
        pytest.skip(f"{status}: {reason}")
