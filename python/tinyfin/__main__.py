"""`python -m tinyfin` (and the `tinyfin-info` script of a pip install): the tinyfin-info report.

    python -m tinyfin [--json]

The text and the JSON come from the core (report_text, report_json), so they are exactly what
the C++ tinyfin-info prints. Exit status 0 when the cpu plugin is usable, 1 otherwise.
"""
import json
import sys

from . import _C


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv not in ([], ["--json"]):
        print("usage: python -m tinyfin [--json]", file=sys.stderr)
        return 2
    document = _C.report_json()
    sys.stdout.write(document if argv else _C.report_text())
    plugins = json.loads(document)["plugins"]
    if not any(p["name"] == "cpu" and p["outcome"] == "loaded" for p in plugins):
        print("tinyfin: the cpu plugin is not usable, so no op can run; check the search path above or set "
              "TINYFIN_PLUGIN_PATH to the directory holding tinyfin-cpu.so", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
