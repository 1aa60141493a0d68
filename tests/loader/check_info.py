#!/usr/bin/python3
"""Runs tinyfin-info (JSON and human output) in the environment meson gives the
test and checks the loader's report against what the test expects.

  check_info.py TINYFIN_INFO [--expect PATH OUTCOME [MESSAGE_PART ...]]...
                [--selected NAME] [--requested TEXT] [--note-mentions TEXT]...
                [--device PATH NAME KIND HOST_ADDRESSABLE]... [--ops PATH OP[,OP...]]
                [--info-arg ARG]... [--mkfifo PATH]...

Exit status 0 when every check passed; every failure is printed.
"""
import argparse
import json
import os
import subprocess
import sys

OUTCOMES = {"loaded", "dlopen-failed", "no-entry-symbol", "entry-refused", "abi-mismatch",
            "invalid-table", "probe-refused", "init-failed", "shadowed", "insecure", "crashed",
            "timed-out", "not-a-file"}
KINDS = {"cpu", "gpu", "integrated-gpu", "software-gpu", "other"}
ORIGINS = {"TINYFIN_PLUGIN_PATH", "install", "build-tree"}

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
    return condition


def check_type(obj, key, kind, where):
    if not check(isinstance(obj, dict) and key in obj, f"{where}: missing key '{key}'"):
        return False
    value = obj[key]
    # bool is an int in Python; keep integers and booleans apart.
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    return check(ok, f"{where}.{key}: expected {kind.__name__}, got {value!r}")


def validate_schema(doc, op_names):
    check(isinstance(doc, dict), "top level is not an object")
    check(doc.get("schema") == "tinyfin-info/1", f"schema is {doc.get('schema')!r}")
    core = doc.get("core", {})
    check_type(doc, "core", dict, "$")
    check_type(core, "version", str, "core")
    check(core.get("abi") == "1.2", f"core.abi is {core.get('abi')!r}, expected '1.2'")

    if check_type(doc, "search_path", list, "$"):
        for i, entry in enumerate(doc["search_path"]):
            where = f"search_path[{i}]"
            check_type(entry, "path", str, where)
            if check_type(entry, "origin", str, where):
                check(entry["origin"] in ORIGINS, f"{where}.origin {entry['origin']!r} unknown")

    if check_type(doc, "plugins", list, "$"):
        for i, plugin in enumerate(doc["plugins"]):
            where = f"plugins[{i}]"
            for key in ("path", "resolved_path", "name", "outcome", "message", "version", "abi"):
                check_type(plugin, key, str, where)
            check_type(plugin, "priority", int, where)
            check_type(plugin, "initialised", bool, where)
            if check_type(plugin, "features", dict, where):
                for k, v in plugin["features"].items():
                    check(isinstance(v, str), f"{where}.features[{k!r}] is not a string")
            if check_type(plugin, "outcome", str, where):
                check(plugin["outcome"] in OUTCOMES, f"{where}.outcome {plugin['outcome']!r} unknown")
                if plugin["outcome"] != "loaded":
                    check(plugin.get("message"), f"{where}: outcome {plugin['outcome']} without a message")
            if check_type(plugin, "abi", str, where) and plugin["abi"]:
                major, dot, minor = plugin["abi"].partition(".")
                check(dot and major.isdigit() and minor.isdigit(),
                      f"{where}.abi {plugin['abi']!r} is not 'M.m'")
            if check_type(plugin, "supported_ops", list, where):
                for op in plugin["supported_ops"]:
                    check(op in op_names, f"{where}.supported_ops: {op!r} is not an op")
            if check_type(plugin, "devices", list, where):
                for j, device in enumerate(plugin["devices"]):
                    dwhere = f"{where}.devices[{j}]"
                    check_type(device, "name", str, dwhere)
                    if check_type(device, "kind", str, dwhere):
                        check(device["kind"] in KINDS, f"{dwhere}.kind {device['kind']!r} unknown")
                    check_type(device, "memory_total", int, dwhere)
                    check_type(device, "memory_free", int, dwhere)
                    check_type(device, "uuid", str, dwhere)
                    check_type(device, "host_addressable", bool, dwhere)
                if plugin.get("initialised"):
                    check(plugin["devices"], f"{where}: initialised without devices")

    selection = doc.get("selection", {})
    if check_type(doc, "selection", dict, "$"):
        check_type(selection, "requested", str, "selection")
        check_type(selection, "selected", str, "selection")
        if check_type(selection, "notes", list, "selection"):
            for note in selection["notes"]:
                check(isinstance(note, str), f"selection.notes: {note!r} is not a string")

    if check_type(doc, "ops", list, "$"):
        check(all(isinstance(op, str) for op in doc["ops"]), "ops: not all strings")


def same_file(a, b):
    return os.path.realpath(a) == os.path.realpath(b)


def find_plugin(doc, path):
    for plugin in doc.get("plugins", []):
        if same_file(plugin.get("resolved_path") or plugin.get("path", ""), path):
            return plugin
    return None


def run(command):
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, timeout=60)
    if result.stderr:
        sys.stderr.write(result.stderr)
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("info", help="the tinyfin-info executable")
    parser.add_argument("--expect", nargs="+", action="append", default=[],
                        metavar="PATH OUTCOME [PART]", help="plugin file, outcome, message parts")
    parser.add_argument("--selected")
    parser.add_argument("--requested")
    parser.add_argument("--note-mentions", action="append", default=[])
    parser.add_argument("--device", nargs=4, action="append", default=[],
                        metavar=("PATH", "NAME", "KIND", "HOST_ADDRESSABLE"))
    parser.add_argument("--ops", nargs=2, action="append", default=[], metavar=("PATH", "OPS"))
    parser.add_argument("--info-arg", action="append", default=[],
                        help="extra argument for tinyfin-info (both runs)")
    parser.add_argument("--mkfifo", action="append", default=[],
                        help="create this FIFO (replacing what is there) before running")
    args = parser.parse_args()

    for path in args.mkfifo:
        if os.path.lexists(path):
            os.remove(path)
        os.mkfifo(path, 0o600)

    result = run([args.info, "--json"] + args.info_arg)
    check(result.returncode == 0, f"tinyfin-info --json exited with {result.returncode}")
    try:
        doc = json.loads(result.stdout)
    except json.JSONDecodeError as error:
        print(f"FAIL: tinyfin-info --json printed no valid JSON ({error}):\n{result.stdout}")
        return 1

    op_names = doc.get("ops", []) if isinstance(doc.get("ops"), list) else []
    validate_schema(doc, op_names)
    check("add" in op_names and "matmul" in op_names, f"ops lacks add/matmul: {op_names}")

    cpu = [p for p in doc.get("plugins", []) if p.get("name") == "cpu" and p.get("outcome") == "loaded"]
    if check(cpu, "no loaded cpu plugin"):
        check(cpu[0].get("initialised") is True, "cpu is not initialised")
        check(cpu[0].get("abi") == "1.2", f"cpu abi is {cpu[0].get('abi')!r}")
        devices = cpu[0].get("devices") or [{}]
        check(devices[0].get("kind") == "cpu", f"cpu device kind is {devices[0].get('kind')!r}")
        check(devices[0].get("host_addressable") is True, "cpu device is not host-addressable")
        check(set(cpu[0].get("supported_ops", [])) >= {"add", "mul", "matmul"},
              f"cpu supported_ops: {cpu[0].get('supported_ops')}")

    user_path = [p for p in os.environ.get("TINYFIN_PLUGIN_PATH", "").split(":") if p]
    listed = [entry.get("path") for entry in doc.get("search_path", [])
              if entry.get("origin") == "TINYFIN_PLUGIN_PATH"]
    check(listed == user_path, f"search_path TINYFIN_PLUGIN_PATH entries {listed} != {user_path}")
    check(any(e.get("origin") == "build-tree" for e in doc.get("search_path", [])),
          "search_path has no build-tree entry")

    for expect in args.expect:
        if len(expect) < 2:
            parser.error("--expect needs PATH OUTCOME")
        path, outcome, parts = expect[0], expect[1], expect[2:]
        plugin = find_plugin(doc, path)
        if not check(plugin is not None, f"{path}: not in plugins"):
            continue
        check(plugin["outcome"] == outcome,
              f"{path}: outcome {plugin['outcome']!r}, expected {outcome!r} ({plugin.get('message')})")
        for part in parts:
            check(part in plugin.get("message", ""),
                  f"{path}: message {plugin.get('message')!r} lacks {part!r}")

    # Each --device for a path describes its next device, in order; together they are all of them.
    expected_devices = {}
    for path, name, kind, host in args.device:
        expected_devices.setdefault(path, []).append((name, kind, host))
    for path, wanted in expected_devices.items():
        plugin = find_plugin(doc, path)
        if not check(plugin is not None, f"{path}: not in plugins"):
            continue
        devices = plugin.get("devices", [])
        if not check(len(devices) == len(wanted),
                     f"{path}: {len(devices)} devices, expected {len(wanted)}"):
            continue
        for index, ((name, kind, host), device) in enumerate(zip(wanted, devices)):
            where = f"{path}: device {index}"
            check(device.get("name") == name, f"{where}: name {device.get('name')!r}")
            check(device.get("kind") == kind, f"{where}: kind {device.get('kind')!r}")
            check(device.get("host_addressable") is (host == "true"),
                  f"{where}: host_addressable {device.get('host_addressable')!r}")

    for path, ops in args.ops:
        plugin = find_plugin(doc, path)
        if check(plugin is not None, f"{path}: not in plugins"):
            wanted = [op for op in ops.split(",") if op]
            check(plugin.get("supported_ops") == wanted,
                  f"{path}: supported_ops {plugin.get('supported_ops')}, expected {ops}")

    selection = doc.get("selection", {})
    if args.selected is not None:
        check(selection.get("selected") == args.selected,
              f"selection.selected {selection.get('selected')!r}, expected {args.selected!r}")
    if args.requested is not None:
        check(selection.get("requested") == args.requested,
              f"selection.requested {selection.get('requested')!r}, expected {args.requested!r}")
    notes = "\n".join(n for n in selection.get("notes", []) if isinstance(n, str))
    for part in args.note_mentions:
        check(part in notes, f"selection.notes lack {part!r}:\n{notes}")

    # The human report names every candidate and its outcome.
    human = run([args.info] + args.info_arg)
    check(human.returncode == 0, f"tinyfin-info exited with {human.returncode}")
    for plugin in doc.get("plugins", []):
        check(plugin.get("path", "") in human.stdout,
              f"human output lacks plugin path {plugin.get('path')!r}")
        check(plugin.get("outcome", "") in human.stdout,
              f"human output lacks outcome {plugin.get('outcome')!r}")
        if plugin.get("outcome") not in ("loaded", None) and plugin.get("message"):
            check(plugin["message"] in human.stdout,
                  f"human output lacks the message of {plugin.get('path')!r}: {plugin['message']!r}")

    if failures:
        for failure in failures:
            print(f"FAIL: {failure}")
        print("--- tinyfin-info --json ---")
        print(result.stdout)
        print("--- tinyfin-info ---")
        print(human.stdout)
        return 1
    print(f"ok: {len(doc.get('plugins', []))} plugins checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
