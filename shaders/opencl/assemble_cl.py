#!/usr/bin/env python3
"""Builds one OpenCL C program text for a kernel: common.cl then the kernel's file.

    assemble_cl.py --common common.cl [KERNEL.cl] -o OUT

Each part starts with a #line directive naming its file, so build logs name the original file
and line. Without KERNEL the output is empty: a kernel not ported yet (the plugin's supports()
then refuses the ops that need it).
"""
import argparse
import pathlib
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--common", required=True, type=pathlib.Path)
    parser.add_argument("kernel", nargs="?", type=pathlib.Path)
    parser.add_argument("-o", "--output", required=True, type=pathlib.Path)
    args = parser.parse_args()
    text = ""
    if args.kernel:
        parts = []
        for path in (args.common, args.kernel):
            parts.append(f'#line 1 "{path.name}"')
            parts.append(path.read_text(encoding="utf-8").rstrip("\n"))
        # The selectors are parsed from lines starting with TF_SPEC(: keep the newline before.
        text = "\n" + "\n".join(parts) + "\n"
    if not args.output.exists() or args.output.read_text(encoding="utf-8") != text:
        args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
