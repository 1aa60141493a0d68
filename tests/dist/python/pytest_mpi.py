#!/usr/bin/python3
"""Runs pytest on every rank of an mpirun job and merges the ranks' JUnit reports, so that
scripts/testlog-summary counts each case once and a case fails when it fails on any rank.

    mpirun ... -np N python3 pytest_mpi.py --junitxml=PATH TEST_FILE...

Rank r writes PATH.rank<r>; after a barrier rank 0 writes PATH with every case, marked failed
with the failing ranks' messages where any rank failed it. The exit status is pytest's (mpirun
fails the job when any rank fails).
"""
import os
import sys
import xml.etree.ElementTree as ET

import pytest

import tinyfin.dist as dist


def merge(paths, out):
    cases = {}  # (classname, name) -> (element, [(rank, failure element)])
    order = []
    for rank, path in enumerate(paths):
        for case in ET.parse(path).getroot().iter("testcase"):
            key = (case.get("classname"), case.get("name"))
            if key not in cases:
                cases[key] = (case, [])
                order.append(key)
            for bad in case:
                if bad.tag in ("failure", "error"):
                    cases[key][1].append((rank, bad))
    suite = ET.Element("testsuite", name="pytest-mpi", tests=str(len(order)))
    failures = 0
    for key in order:
        case, bad = cases[key]
        merged = ET.SubElement(suite, "testcase", classname=key[0] or "", name=key[1] or "")
        if bad:
            failures += 1
            text = "\n".join(f"rank {r}: {b.get('message', '')}\n{b.text or ''}" for r, b in bad)
            ET.SubElement(merged, "failure", message=f"failed on ranks {[r for r, _ in bad]}").text = text
        elif any(child.tag == "skipped" for child in case):
            ET.SubElement(merged, "skipped", message="skipped")
    suite.set("failures", str(failures))
    root = ET.Element("testsuites")
    root.append(suite)
    ET.ElementTree(root).write(out, encoding="utf-8", xml_declaration=True)


def main(argv):
    junit = [a for a in argv if a.startswith("--junitxml=")]
    args = [a for a in argv if not a.startswith("--junitxml=")]
    ctx = dist.init()
    mine = None
    if junit:
        path = junit[0].split("=", 1)[1]
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        mine = f"{path}.rank{ctx.rank}"
        args = [f"--junitxml={mine}"] + args
    # Only rank 0 prints pytest's report in full; the others say what failed.
    if ctx.rank != 0:
        args = ["-q", "--no-header", "-rf"] + args
    rc = pytest.main(["-p", "no:cacheprovider"] + args)
    dist.barrier()
    if junit and ctx.rank == 0:
        merge([f"{path}.rank{r}" for r in range(ctx.world_size)], path)
    dist.finalize()
    return int(rc)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
