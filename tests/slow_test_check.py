#!/usr/bin/env python3
"""Lists the tests of the last ctest run in BUILD_DIR that took longer than
BOUND seconds (default 20) without the label "slow", which `ctest -LE slow`
is meant to leave out: the label must tell the truth (CMakeLists.txt,
cudafs_add_tests' SLOW). Prints nothing when there are none; exit status 1
with --strict when there are.

    tests/slow_test_check.py build [--bound 20] [--strict]
"""

import argparse
import os
import re
import subprocess
import sys


def test_times(log_path):
    times, name = {}, None
    with open(log_path, errors="replace") as log:
        for line in log:
            started = re.match(r"\d+/\d+ Test: (.*)$", line)
            if started:
                name = started.group(1).strip()
                continue
            took = re.match(r"Test time =\s*([0-9.]+) sec", line)
            if took and name is not None:
                times[name] = float(took.group(1))
                name = None
    return times


def slow_labelled(build_dir):
    listing = subprocess.run(["ctest", "-N", "-L", "^slow$"], cwd=build_dir, check=True,
                             capture_output=True, text=True).stdout
    return {m.group(1).strip() for m in re.finditer(r"Test\s+#\d+: (.*)", listing)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir")
    parser.add_argument("--bound", type=float, default=20)
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()
    log = os.path.join(args.build_dir, "Testing", "Temporary", "LastTest.log")
    if not os.path.exists(log):
        sys.exit("slow_test_check: no %s: run ctest first" % log)
    times = test_times(log)
    with open(log, "rb") as f:
        kept = f.read()
    labelled = slow_labelled(args.build_dir)
    with open(log, "wb") as f:  # ctest -N wrote a log of its own over it
        f.write(kept)
    over = sorted(((t, n) for n, t in times.items()
                   if t > args.bound and n not in labelled), reverse=True)
    for seconds, name in over:
        print("slow_test_check: %s took %.1f s and is not labelled slow" % (name, seconds))
    return 1 if over and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
