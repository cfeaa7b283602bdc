#!/usr/bin/env python3
"""Where the time under some functions goes, per operation, from a perf profile.

Reads `perf script -F period,ip,sym` of a `perf record --call-graph` run
(cpu-clock: each sample's period is nanoseconds) on standard input, and
prints for each SYMBOL (a substring of a function's name) the CPU
microseconds per operation spent under its outermost frame, and how they
split among the functions it calls directly ("(self)": in it). N is the
number of operations the profile covers. Sampling adds its own cost, so
the figures are for comparing builds under the same profile. Example,
with bench/unlink_profile.sh's unlink loop:
  perf record --call-graph dwarf,16384 -F 5000 -o /tmp/p.data -p PID -- ...
  perf script -i /tmp/p.data -F period,ip,sym | \\
    bench/perf_callees.py 20000 JournalScope::Commit MetadataLog::Append
"""
import collections
import sys


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    operations = int(sys.argv[1])
    targets = sys.argv[2:]
    under = collections.Counter()  # ns by target
    callees = {target: collections.Counter() for target in targets}
    total = 0

    def sample(period, frames):  # frames: innermost first
        nonlocal total
        total += period
        for target in targets:
            depths = [i for i, frame in enumerate(frames) if target in frame]
            if not depths:
                continue
            outermost = depths[-1]
            under[target] += period
            callee = frames[outermost - 1] if outermost > 0 else "(self)"
            callees[target][callee] += period

    period, frames = None, []
    for line in sys.stdin:
        if not line.strip():
            if period is not None:
                sample(period, frames)
            period, frames = None, []
        elif period is None:  # a sample's first line: its period
            period = int(line.split()[0])
        else:
            parts = line.strip().split(None, 1)
            frames.append((parts[1] if len(parts) > 1 else parts[0])[:110])
    if period is not None:
        sample(period, frames)
    per_op = lambda ns: ns / 1e3 / operations
    print("all samples: %.2f µs per operation" % per_op(total))
    for target in targets:
        print("\n%s: %.3f µs per operation" % (target, per_op(under[target])))
        for callee, ns in callees[target].most_common(25):
            print("  %7.3f  %s" % (per_op(ns), callee))


if __name__ == "__main__":
    main()
