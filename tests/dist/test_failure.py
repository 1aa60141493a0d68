#!/usr/bin/env python3
"""A rank that fails makes the whole mpirun job stop with a clear error within bounded time.

    test_failure.py MPIRUN_ARGS... -- DIST_FAIL
    test_failure.py MPIRUN_ARGS... -- python3 py_fail.py

For each way of failing (dist_fail.cpp, or tinyfin.dist's python/py_fail.py), runs the job and checks: it ends (a subprocess timeout
of 120 s, far above the few seconds it takes, is the hang detector), with a non-zero status,
and the failing rank's message or the timeout's is on stderr.
"""
import os
import subprocess
import sys

split = sys.argv.index("--")
mpirun, program = sys.argv[1:split], sys.argv[split + 1:]

CASES = {
    # mode: (extra environment, text that must be in the output)
    "throw": ({}, "simulated failure in the data loader at step 3; aborting every rank"),
    "escape": ({}, "what():  simulated failure in the data loader at step 3"),
    "unwind": ({}, "an exception is leaving the program; aborting every rank"),
    "exit": ({}, "exited with non-zero status"),
    "hang": ({"TINYFIN_DIST_TIMEOUT": "3"}, "did not complete within 3 s (TINYFIN_DIST_TIMEOUT)"),
}

PY_CASES = {
    "abort": ({}, "simulated failure in the data loader at step 3; aborting every rank"),
    "uncaught": ({}, "uncaught RuntimeError: simulated failure in the data loader at step 3; aborting every rank"),
    "hang": ({"TINYFIN_DIST_TIMEOUT": "3"}, "did not complete within 3 s (TINYFIN_DIST_TIMEOUT)"),
}
if program[-1].endswith(".py"):
    CASES = PY_CASES

failed = 0
for mode, (env_extra, expected) in CASES.items():
    env = dict(os.environ, **env_extra)
    try:
        run = subprocess.run(mpirun + program + [mode], env=env, capture_output=True, text=True,
                             timeout=120)
    except subprocess.TimeoutExpired:
        print(f"FAIL {mode}: the job did not stop within 120 s (hang)")
        failed += 1
        continue
    output = run.stdout + run.stderr
    ok = run.returncode != 0 and expected in output
    print(f"{'ok  ' if ok else 'FAIL'} {mode}: exit status {run.returncode}")
    if not ok:
        print(f"  expected a non-zero status and {expected!r} in:\n{output}")
        failed += 1
sys.exit(1 if failed else 0)
