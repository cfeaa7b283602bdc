#!/usr/bin/env python3
"""What survive=on costs the metadata steps, paired against the same mount without it.

Runs ROUNDS rounds; each round mounts every target afresh, in turn (host
memory with and without survive=on, the null backend, tmpfs), and times on
each: untar of TARBALL, stat of every file, 5,000 creates of 4 KiB files,
their stats and unlinks, and rm -rf of the tree; then a 16 MiB file
written 4 KiB at a time in random order (4,096 extents) and 5,000 random
4 KiB overwrites of it, through O_DIRECT (what a write journals grows
with what it changed, not with the file). Interleaving the targets
round by round, in an order shuffled each round (--seed), keeps a
machine's drift, and the place in the round, out of the ratios. Prints the
median seconds per step and target, and the median over rounds of
survive/host and survive/null; then the same for two figures of each
cudafs daemon over each step, which the machine's noise touches less
than the wall time: the CPU time of its threads (/proc/PID/task/*/
schedstat) and the time its request handlers took (the stats'
handler_ns_* lines). --target NAME=OPTIONS adds a cudafs mount of its
own (before tmpfs), to see what one option costs, and --binary NAME=PATH
serves that one with another build, to compare two daemons in one run;
each such target gets its own columns against host and null. Run as root.
Examples:
  bench/survive_cost.py build/cudafs /tmp/tree.tar --rounds 7
  bench/survive_cost.py build/cudafs /tmp/tree.tar --target nocache=backend=host,size=4g,cache=0
  bench/survive_cost.py build/cudafs /tmp/tree.tar --target before=backend=host,size=4g,survive=on \
    --binary before=/tmp/cudafs-before
"""
import argparse
import mmap
import os
import random
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cudafs_counters import read_stats  # noqa: E402
from mounts import add_target_options, chosen_targets, compared_pairs, mounted  # noqa: E402
STEPS = ["untar", "stat", "create", "stat_small", "unlink", "rm_rf", "frag_fill",
         "frag_overwrite"]


class Daemon:
    """The cudafs daemon serving MOUNTPOINT, for its CPU and handler time."""

    def __init__(self, mountpoint):
        self.mountpoint = mountpoint
        self.pid = None
        for entry in os.listdir("/proc"):
            try:
                with open("/proc/%s/comm" % entry) as f:
                    if f.read().strip() != "cudafs":
                        continue
                with open("/proc/%s/cmdline" % entry, "rb") as f:
                    if mountpoint.encode() in f.read().split(b"\0"):
                        self.pid = int(entry)
            except (OSError, ValueError):
                continue
        if self.pid is None:
            raise SystemExit("no cudafs daemon serves " + mountpoint)

    def cpu(self):
        total = 0
        for task in os.listdir("/proc/%d/task" % self.pid):
            try:
                with open("/proc/%d/task/%s/schedstat" % (self.pid, task)) as f:
                    total += int(f.read().split()[0])
            except OSError:
                pass  # a thread that ended meanwhile
        return total / 1e9

    def handlers(self):
        return sum(value for name, value in read_stats(self.mountpoint).items()
                   if name.startswith("handler_ns_")) / 1e9


def timed(results, step, work, daemon=None):
    began = time.monotonic()
    before = (daemon.cpu(), daemon.handlers()) if daemon else None
    work()
    results[step] = time.monotonic() - began
    if daemon:
        results["cpu", step] = daemon.cpu() - before[0]
        results["handlers", step] = daemon.handlers() - before[1]


def fragmented(results, path, daemon):
    pages = 4096
    page = mmap.mmap(-1, 4096)  # aligned, for O_DIRECT
    page.write(b"f" * 4096)
    order = list(range(pages))
    random.Random(1).shuffle(order)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    try:
        timed(results, "frag_fill", lambda: [os.pwritev(fd, [page], p * 4096) for p in order],
              daemon)
        timed(results, "frag_overwrite",
              lambda: [os.pwritev(fd, [page], order[(i * 7919) % pages] * 4096)
                       for i in range(5000)], daemon)
    finally:
        os.close(fd)


def run(binary, target, options, tarball):
    with mounted(binary, options, "survive-cost-") as mountpoint:
        return run_in(mountpoint, options, tarball)


def run_in(mountpoint, options, tarball):
    """Every step on MOUNTPOINT: seconds by step, and each daemon's figures."""
    daemon = Daemon(mountpoint) if options is not None else None
    results = {}
    timed(results, "untar",
          lambda: subprocess.run(["tar", "xf", tarball, "-C", mountpoint], check=True), daemon)
    paths = [os.path.join(root, name) for root, _, names in os.walk(mountpoint)
             for name in names]
    timed(results, "stat", lambda: [os.lstat(p) for p in paths], daemon)
    small = os.path.join(mountpoint, "small")
    os.mkdir(small)
    payload = b"x" * 4096

    def create():
        for i in range(5000):
            with open(os.path.join(small, "f%d" % i), "wb") as f:
                f.write(payload)
    timed(results, "create", create, daemon)
    timed(results, "stat_small",
          lambda: [os.stat(os.path.join(small, "f%d" % i)) for i in range(5000)], daemon)
    timed(results, "unlink",
          lambda: [os.unlink(os.path.join(small, "f%d" % i)) for i in range(5000)], daemon)
    timed(results, "rm_rf", lambda: subprocess.run(
        ["rm", "-rf", "--one-file-system"] + [os.path.join(mountpoint, n)
                                              for n in os.listdir(mountpoint)], check=True),
          daemon)
    fragmented(results, os.path.join(mountpoint, "fragmented"), daemon)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary_path", metavar="binary")
    parser.add_argument("tarball")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0, help="of each round's order of targets")
    add_target_options(parser)
    args = parser.parse_args()
    targets, binaries = chosen_targets(parser, args, os.path.realpath(args.binary_path))
    samples = {target: [] for target in targets}
    order = list(targets)
    shuffle = random.Random(args.seed).shuffle
    for _ in range(args.rounds):
        shuffle(order)
        for target in order:
            samples[target].append(run(binaries[target], target, targets[target], args.tarball))
    pairs = compared_pairs(targets)

    def table(title, key, names):
        print("\n" + title)
        print("| step | " + " | ".join(names) + "".join(" | %s / %s" % p for p in pairs) + " |")
        print("|---|" + "---:|" * (len(names) + len(pairs)))
        for step in STEPS:
            medians = [statistics.median(s[key(step)] for s in samples[t]) for t in names]
            ratios = [statistics.median(x[key(step)] / y[key(step)]
                                        for x, y in zip(samples[a], samples[b])) for a, b in pairs]
            print("| %s | %s |" % (step, " | ".join(["%.3f" % m for m in medians] +
                                                    ["%.3f" % r for r in ratios])))

    daemons = [t for t in targets if targets[t] is not None]
    table("Wall time", lambda step: step, list(targets))
    table("The daemon's CPU time", lambda step: ("cpu", step), daemons)
    table("The daemon's handlers' time", lambda step: ("handlers", step), daemons)
    print("(median seconds of %d rounds; ratios: the median of the rounds' ratios)" % args.rounds)


if __name__ == "__main__":
    main()
