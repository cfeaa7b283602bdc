#!/usr/bin/env python3
"""Small-file metadata benchmark: create+write+close, then stat, then unlink.

Times each phase over COUNT files of SIZE bytes in one fresh directory and
prints one JSON object with the rate of each phase in files per second.
The stat pass runs twice in a row (stat, then stat2): the second finds
every attribute the first fetched still in the kernel's cache where the
filesystem lets it cache them long enough, and then costs no request.

With --counters MOUNT (the root of a cudafs mount), it also reads cudafs's
request counters around each phase, outside the timed loops, and adds
"requests": {phase: {op: count}} to the output (bench/cudafs_counters.py).

Written in Python (os.open/os.write/os.close, os.stat, os.unlink) so that it
runs on any machine without a compiler; the interpreter adds a few
microseconds per file, so compare against the same script on tmpfs, which is
the ceiling of this loop on that machine.
"""
import argparse
import json
import os
import sys
import time


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, help="directory to create; must not exist")
    parser.add_argument("--count", type=int, default=20000, help="number of files")
    parser.add_argument("--size", type=int, default=4096, help="bytes written to each file")
    parser.add_argument("--counters", metavar="MOUNT",
                        help="root of a cudafs mount whose request counters to read per phase")
    return parser.parse_args()


def timed(phase, names):
    start = time.perf_counter()
    for name in names:
        phase(name)
    return time.perf_counter() - start


def main():
    arguments = parse_arguments()
    os.mkdir(arguments.dir)
    names = [os.path.join(arguments.dir, "f%07d" % i) for i in range(arguments.count)]
    payload = b"\xa5" * arguments.size

    def create(name):
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            written = os.write(fd, payload)
            if written != len(payload):
                raise OSError("short write to %s: %d of %d bytes" % (name, written, len(payload)))
        finally:
            os.close(fd)

    def check_stat(name):
        if os.stat(name).st_size != len(payload):
            raise OSError("%s has the wrong size after writing it" % name)

    counters = None
    if arguments.counters:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from cudafs_counters import Counters
        counters = Counters(arguments.counters)
    phases = [("create", create), ("stat", check_stat), ("stat2", check_stat),
              ("unlink", os.unlink)]
    seconds = {}
    requests = {}
    for phase, function in phases:
        before = counters.begin() if counters else None
        seconds[phase] = timed(function, names)
        if counters:
            requests[phase] = counters.since(before)
    os.rmdir(arguments.dir)
    result = {"count": arguments.count, "size": arguments.size}
    for phase, elapsed in seconds.items():
        result[phase + "_seconds"] = elapsed
        result[phase + "_per_second"] = arguments.count / elapsed
    if counters:
        result["requests"] = requests
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
