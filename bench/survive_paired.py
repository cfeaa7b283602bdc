#!/usr/bin/env python3
"""What survive=on costs the metadata steps, with every target mounted at once and the steps taken in turns.

survive_cost.py mounts one target at a time, so a round's ratio holds
whatever the machine did between two mounts' turns, seconds apart: on the
16-core H200 machine its rounds' ratios spread from 0.7 to 1.6. Here each
round mounts every target (host memory with and without survive=on, the
null backend, tmpfs; --target and --binary as in survive_cost.py) side by
side, and takes each step in short turns, the targets in an order shuffled
each turn: an untar of TARBALL (--untars of them, a turn each), creates of
4 KiB files, their stats and unlinks (--files of them, --chunk a turn),
and rm -rf of each untarred tree (a turn each). A target's time for a step
is the sum of its turns, so what drifts over a round touches every target
alike. Prints, per step, the median over rounds of each target's seconds
and of survive/host, survive/null (and each --target against both), and
the ratio of the rounds' sums. Run as root. Example:
  bench/survive_paired.py build/cudafs /tmp/usrinclude.tar --rounds 8
"""
import argparse
import contextlib
import os
import random
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mounts import add_target_options, chosen_targets, compared_pairs, mounted  # noqa: E402

STEPS = ["untar", "create", "stat", "unlink", "rm_rf"]


def round_of(mountpoints, args, shuffle):
    """One round on the mounted targets: seconds by step and target."""
    seconds = {step: dict.fromkeys(mountpoints, 0.0) for step in STEPS}

    def turns(step, count, work):
        for turn in range(count):
            order = list(mountpoints)
            shuffle(order)
            for target in order:
                began = time.monotonic()
                work(mountpoints[target], turn)
                seconds[step][target] += time.monotonic() - began

    def untar(mountpoint, turn):
        tree = os.path.join(mountpoint, "tree%d" % turn)
        os.mkdir(tree)
        subprocess.run(["tar", "xf", args.tarball, "-C", tree], check=True)

    payload = b"x" * 4096
    chunks = range(0, args.files, args.chunk)

    def files(mountpoint, turn):
        first = chunks[turn]
        return [os.path.join(mountpoint, "small", "f%d" % i)
                for i in range(first, min(first + args.chunk, args.files))]

    def create(mountpoint, turn):
        for path in files(mountpoint, turn):
            with open(path, "wb") as f:
                f.write(payload)

    turns("untar", args.untars, untar)
    for mountpoint in mountpoints.values():
        os.mkdir(os.path.join(mountpoint, "small"))
    turns("create", len(chunks), create)
    turns("stat", len(chunks), lambda m, turn: [os.stat(p) for p in files(m, turn)])
    turns("unlink", len(chunks), lambda m, turn: [os.unlink(p) for p in files(m, turn)])
    turns("rm_rf", args.untars, lambda m, turn: subprocess.run(
        ["rm", "-rf", "--one-file-system", os.path.join(m, "tree%d" % turn)], check=True))
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary_path", metavar="binary")
    parser.add_argument("tarball")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--untars", type=int, default=3, help="turns of untar and rm -rf")
    parser.add_argument("--files", type=int, default=5000, help="small files made and removed")
    parser.add_argument("--chunk", type=int, default=100, help="small files in a turn")
    parser.add_argument("--seed", type=int, default=0, help="of each turn's order of targets")
    add_target_options(parser)
    args = parser.parse_args()
    if args.files < 1 or args.chunk < 1 or args.untars < 1 or args.rounds < 1:
        parser.error("--rounds, --untars, --files and --chunk want positive numbers")
    targets, binaries = chosen_targets(parser, args, os.path.realpath(args.binary_path))

    shuffle = random.Random(args.seed).shuffle
    rounds = []
    for _ in range(args.rounds):
        with contextlib.ExitStack() as stack:
            mountpoints = {t: stack.enter_context(mounted(binaries[t], targets[t], "paired-"))
                           for t in targets}
            rounds.append(round_of(mountpoints, args, shuffle))

    pairs = compared_pairs(targets)
    print("| step | " + " | ".join(targets) +
          "".join(" | %s / %s | (sums)" % p for p in pairs) + " |")
    print("|---|" + "---:|" * (len(targets) + 2 * len(pairs)))
    for step in STEPS:
        cells = ["%.3f" % statistics.median(r[step][t] for r in rounds) for t in targets]
        for a, b in pairs:
            cells.append("%.3f" % statistics.median(r[step][a] / r[step][b] for r in rounds))
            cells.append("%.3f" % (sum(r[step][a] for r in rounds) /
                                   sum(r[step][b] for r in rounds)))
        print("| %s | %s |" % (step, " | ".join(cells)))
    print("(median seconds of %d rounds; ratios: the median of the rounds' ratios, and the "
          "ratio of their sums)" % args.rounds)


if __name__ == "__main__":
    main()
