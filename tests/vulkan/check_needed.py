#!/usr/bin/env python3
"""Checks that a plugin has no link-time dependency on the Vulkan loader.

    check_needed.py READELF PLUGIN.so

Reads the NEEDED entries of the dynamic section (readelf -d) and fails when one names
libvulkan: the vulkan plugin must load on machines without Vulkan and dlopen the loader itself.
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
    bad = [lib for lib in needed if "vulkan" in lib.lower()]
    if bad:
        print(f"{plugin}: links {', '.join(bad)} at build time; Vulkan must be loaded at run time (volk)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
