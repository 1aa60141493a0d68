#!/usr/bin/python3
"""Checks that each plugin exports exactly one defined dynamic symbol,
tf_plugin_entry (style habit 9). Linker-provided symbols are ignored.

  check_symbols.py NM PLUGIN.so [PLUGIN.so ...]
"""
import subprocess
import sys

ENTRY = "tf_plugin_entry"
# Symbols the linker defines in every shared object.
LINKER_SYMBOLS = {"_init", "_fini", "_edata", "_end", "__bss_start", "_DYNAMIC",
                  "_GLOBAL_OFFSET_TABLE_", "__data_start", "data_start", "__dso_handle"}
TEXT_TYPES = set("TtWwi")


def exported(nm, path):
    """(name, type) of every defined dynamic symbol of path."""
    out = subprocess.run([nm, "-D", "--defined-only", path], check=True, text=True,
                         stdout=subprocess.PIPE).stdout
    symbols = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        kind, name = fields[-2], fields[-1]
        name = name.split("@")[0]  # drop version suffixes (sym@@VERS)
        if name in LINKER_SYMBOLS or kind in ("A", "U", "w", "v"):
            continue  # absolute version nodes, undefined and weak undefined references
        symbols.append((name, kind))
    return symbols


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    nm, plugins = sys.argv[1], sys.argv[2:]
    failed = False
    for path in plugins:
        symbols = exported(nm, path)
        text = [name for name, kind in symbols if kind in TEXT_TYPES]
        other = [f"{name} ({kind})" for name, kind in symbols if kind not in TEXT_TYPES]
        if text != [ENTRY]:
            print(f"FAIL: {path}: exported text symbols {text}, expected only {ENTRY}")
            failed = True
        if other:
            print(f"FAIL: {path}: also exports data symbols: {', '.join(other)}")
            failed = True
        if text == [ENTRY] and not other:
            print(f"ok: {path} exports only {ENTRY}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
