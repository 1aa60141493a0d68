#!/usr/bin/env python3
"""Builds one complete GLSL compute shader for an API from the shared sources.

    assemble.py --api vulkan|opengl --prelude PRELUDE --common COMMON KERNEL -o OUT

The result is the API's #version line, the API's prelude, the shared library (common.glsl) and
the kernel, each preceded by a #line directive so compiler messages name the original file and
line. See README.md for the contract.
"""
import argparse
import pathlib
import re
import sys

VERSIONS = {"vulkan": "#version 450", "opengl": "#version 430"}
# TF_SPEC(id, type, NAME, default) declarations at the start of a line.
SPEC = re.compile(r"^TF_SPEC\(\s*(\d+)\s*,\s*(\w+)\s*,\s*(\w+)\s*,\s*([^)]+?)\s*\)", re.M)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api", choices=sorted(VERSIONS), required=True)
    parser.add_argument("--prelude", required=True, type=pathlib.Path)
    parser.add_argument("--common", required=True, type=pathlib.Path)
    parser.add_argument("kernel", type=pathlib.Path)
    parser.add_argument("-o", "--output", required=True, type=pathlib.Path)
    args = parser.parse_args()

    parts = [VERSIONS[args.api]]
    kernel = args.kernel.read_text(encoding="utf-8")
    # GLSL's #line takes a source-string number, not a name: number the parts 1, 2, 3 and say
    # which is which in a comment the compiler's messages can be matched against.
    for number, path in enumerate([args.prelude, args.common, args.kernel], start=1):
        parts.append(f"// source {number}: {path.name}")
        parts.append(f"#line 1 {number}")
        parts.append(path.read_text(encoding="utf-8").rstrip("\n"))
        if number == 1 and args.api == "opengl":
            # OpenGL has no specialization constants: each TF_SPEC selector is a macro the
            # plugin defines before compiling; these defaults apply to the ones it leaves out.
            for _, _, name, value in SPEC.findall(kernel):
                parts.append(f"#ifndef {name}\n#define {name} {value}\n#endif")
    text = "\n".join(parts) + "\n"
    # Rewrite only when the text changed, so ninja does not rebuild what depends on it.
    if not args.output.exists() or args.output.read_text(encoding="utf-8") != text:
        args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
