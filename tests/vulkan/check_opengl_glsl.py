#!/usr/bin/env python3
"""Checks that every shared kernel also compiles as OpenGL 4.3 GLSL (the opengl plugin's dialect).

    check_opengl_glsl.py GLSLANG ASSEMBLE PRELUDE COMMON KERNEL...

Assembles each kernel with the OpenGL prelude (specialization constants become macros with
their defaults) and compiles it with glslangValidator for OpenGL; any error fails the test.
"""
import pathlib
import subprocess
import sys
import tempfile


def main() -> int:
    glslang, assemble, prelude, common, *kernels = sys.argv[1:]
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for kernel in kernels:
            out = pathlib.Path(tmp) / (pathlib.Path(kernel).stem + ".opengl.comp")
            subprocess.run([sys.executable, assemble, "--api", "opengl", "--prelude", prelude, "--common", common,
                            kernel, "-o", str(out)], check=True)
            result = subprocess.run([glslang, str(out)], capture_output=True, text=True)
            status = "ok" if result.returncode == 0 else "FAILED"
            print(f"{pathlib.Path(kernel).name}: OpenGL 4.3 GLSL {status}")
            if result.returncode != 0:
                print(result.stdout + result.stderr)
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
