#!/usr/bin/env python3
"""Checks that the opencl plugin has no link-time dependency on OpenCL or CLBlast.

    check_needed.py READELF PLUGIN.so

Reads the NEEDED entries of the dynamic section (readelf -d) and fails when one names libOpenCL
or libclblast: the plugin must load on machines without them and dlopen both itself.
"""
import re
import subprocess
import sys


def main() -> int:
    readelf, plugin = sys.argv[1], sys.argv[2]
    out = subprocess.run([readelf, "-d", "-W", plugin], check=True, capture_output=True, text=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    if not needed:
        print(f"{plugin}: no NEEDED entries found in readelf output:\n{out}")
        return 1
    print(f"{plugin}: NEEDED {', '.join(needed)}")
    bad = [lib for lib in needed if "opencl" in lib.lower() or "clblast" in lib.lower()]
    if bad:
        print(f"{plugin}: links {', '.join(bad)} at build time; they must be loaded at run time")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
