#!/usr/bin/python3
"""tinyfin-info (JSON and human output) on the build tree shows the cuda plugin with a clear
outcome: "probe-refused" with the reason where there is no usable CUDA (CI: the CUDA error by
name, number and text), or "loaded" with GPU devices where there is one.

  check_cuda_info.py TINYFIN_INFO CUDA_PLUGIN_PATH
"""
import json
import os
import re
import subprocess
import sys

# What probe says when it refuses (plugins/cuda/device.cpp).
REFUSALS = [
    re.compile(r"^CUDA driver not usable: cudaError\w+ \(\d+\): \S.*$"),
    re.compile(r"^no CUDA device: .+$"),
    re.compile(r"^cuBLAS not found: libcublas\.so\.13: .+$"),
    re.compile(r"^cuDNN not found: libcudnn\.so\.9: .+$"),
]
FEATURES = ["cuda.runtime", "cuda.driver", "cudnn", "cublas", "kernels", "device0.compute_capability",
            "device0.pci_bus_id"]

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
    return condition


def main():
    info, plugin_path = sys.argv[1], os.path.realpath(sys.argv[2])
    result = subprocess.run([info, "--json"], capture_output=True, text=True, timeout=120)
    if not check(result.returncode == 0, f"tinyfin-info --json exited {result.returncode}: {result.stderr}"):
        return report()
    doc = json.loads(result.stdout)
    records = [p for p in doc["plugins"] if os.path.realpath(p.get("resolved_path") or p["path"]) == plugin_path]
    if not check(len(records) == 1, f"expected one record for {plugin_path}, got {len(records)}"):
        return report()
    cuda = records[0]
    check(cuda["name"] == "cuda", f"name is {cuda['name']!r}")
    check(cuda["abi"] == "1.2", f"abi is {cuda['abi']!r}")
    outcome, message = cuda["outcome"], cuda["message"]
    print(f"cuda plugin: {outcome}: {message}")

    if outcome == "probe-refused":
        check(any(r.match(message) for r in REFUSALS), f"probe-refused without a known reason: {message!r}")
        check(not cuda["initialised"], "a refused plugin was initialised")
        check(cuda["devices"] == [], "a refused plugin lists devices")
        check(doc["selection"]["selected"] != "cuda", "cuda selected although refused")
    elif outcome == "loaded":
        check(cuda["initialised"], "loaded but not initialised by tinyfin-info")
        check(cuda["devices"], "loaded without devices")
        for device in cuda["devices"]:
            check(device["kind"] in ("gpu", "integrated-gpu"), f"device kind {device['kind']!r}")
            check(re.fullmatch(r"[0-9a-f]{32}", device["uuid"]), f"uuid {device['uuid']!r} is not 32 hex digits")
            check(device["memory_total"] > 0, "device without memory")
            check(device["host_addressable"] is False, "device memory reported host-addressable")
        for key in FEATURES:
            check(key in cuda["features"], f"feature {key} missing: {sorted(cuda['features'])}")
        for op in ["add", "matmul", "conv2d", "conv2d_grad_input", "conv2d_grad_weight", "max_pool2d",
                   "max_pool2d_backward", "cross_entropy", "sum", "relu"]:
            check(op in cuda["supported_ops"], f"op {op} not in supported_ops")
        check(doc["selection"]["selected"] == "cuda" or os.environ.get("TINYFIN_BACKEND", "auto") != "auto",
              f"auto selected {doc['selection']['selected']!r}, not cuda")
    else:
        check(False, f"unexpected outcome {outcome!r}: {message}")

    human = subprocess.run([info], capture_output=True, text=True, timeout=120)
    check(human.returncode == 0, f"tinyfin-info exited {human.returncode}")
    check(f"outcome: {outcome}" in human.stdout, f"human output lacks 'outcome: {outcome}'")
    if outcome != "loaded":
        check(message in human.stdout, "human output lacks the probe message")
    return report()


def report():
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
