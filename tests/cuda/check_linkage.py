#!/usr/bin/python3
"""Checks the cuda plugin's dynamic dependencies: the CUDA runtime is linked statically (no
NEEDED libcudart), cuBLAS and cuDNN are opened at run time (no NEEDED libcublas/libcudnn), and
the driver library is loaded by the runtime, not the dynamic linker (no NEEDED libcuda), so the
plugin loads on a machine without any of them and explains itself in probe.

  check_linkage.py READELF PLUGIN.so
"""
import re
import subprocess
import sys

FORBIDDEN = re.compile(r"^lib(cudart|cublas|cublasLt|cudnn\w*|cuda)\.so")


def main():
    readelf, plugin = sys.argv[1], sys.argv[2]
    out = subprocess.run([readelf, "-d", "-W", plugin], check=True, capture_output=True, text=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    print(f"{plugin}: NEEDED {', '.join(needed)}")
    bad = [lib for lib in needed if FORBIDDEN.match(lib)]
    if bad:
        print(f"FAIL: links {', '.join(bad)} dynamically")
        return 1
    if not needed:
        print("FAIL: no NEEDED entries at all: is this the plugin?")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
