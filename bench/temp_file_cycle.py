#!/usr/bin/env python3
"""One temporary file made and removed over and over in an empty mount.

A script's temp file: create, write 4 KiB, close, unlink, CYCLES times, in
a fresh mount of each target in turn (host memory, host memory with
survive=on, the null backend, tmpfs, and with --cuda GPU memory), ROUNDS
rounds. Prints the median microseconds per cycle, and each cudafs mount's
device_bytes (the memory it holds) right after the cycles and 2.5 s later,
when an empty mount must hold none again. --warmup N cycles first, not
timed: a GPU mount's first file creates its CUDA context. Run as root.
Example:
  bench/temp_file_cycle.py build/cudafs --cycles 2000 --rounds 3
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cudafs_counters import read_stats  # noqa: E402
from mounts import SURVIVE_TARGETS as TARGETS, mounted  # noqa: E402


def device_bytes(mountpoint):
    return read_stats(mountpoint)["device_bytes"]


def run(binary, options, cycles, warmup):
    with mounted(binary, options, "temp-file-cycle-") as mountpoint:
        path = os.path.join(mountpoint, "tmpfile")
        payload = b"x" * 4096

        def cycle(times):
            for _ in range(times):
                with open(path, "wb") as f:
                    f.write(payload)
                os.unlink(path)
        cycle(warmup)
        began = time.monotonic()
        cycle(cycles)
        per_cycle = (time.monotonic() - began) / cycles * 1e6
        held = None
        if options is not None:
            right_after = device_bytes(mountpoint)
            time.sleep(2.5)
            held = (right_after, device_bytes(mountpoint))
        return per_cycle, held


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary")
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=0, help="untimed cycles first")
    parser.add_argument("--cuda", action="store_true", help="GPU memory too (spill=0)")
    args = parser.parse_args()
    binary = os.path.realpath(args.binary)
    targets = dict(TARGETS)
    if args.cuda:
        targets = {"cuda": "backend=cuda,size=4g,spill=0", **targets}
    results = {name: [] for name in targets}
    for _ in range(args.rounds):
        for name, options in targets.items():
            results[name].append(run(binary, options, args.cycles, args.warmup))
    print("| mount | µs per cycle (median of %d) | device_bytes after | 2.5 s later |"
          % args.rounds)
    print("|---|---:|---:|---:|")
    for name, rounds in results.items():
        median = statistics.median(r[0] for r in rounds)
        held = rounds[-1][1]  # the last round's
        after, later = ("%d" % held[0], "%d" % held[1]) if held else ("-", "-")
        print("| %s | %.1f | %s | %s |" % (name, median, after, later))


if __name__ == "__main__":
    main()
