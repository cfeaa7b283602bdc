#!/usr/bin/env python3
"""Daemon memory per file: mounts cudafs, creates files, prints bytes per file.

Mounts BINARY on MOUNTPOINT in the foreground (so the daemon's pid is
known), reads its VmRSS once idle, creates COUNT files of SIZE bytes in
directories of --per-dir files each, waits for the write-back and the
daemon's memory trimmer, and reads VmRSS again. The file data is left out:
with backend=host it lives in the daemon's own memory, in the arena, one
anonymous mapping of the whole capacity (the process's largest), whose
resident bytes are subtracted. What is left is what the daemon keeps per
file in host memory (inode, directory entry, inode table, cached pages);
the cache's share (its cached_bytes, from cudafs --stats, over COUNT) is
printed beside it, since it stops growing at the cache's size.

Run as root (FUSE mount). Example, one million empty files:
  bench/memory_per_file.py build/cudafs --options backend=host --count 1000000 --size 0
"""
import argparse
import os
import re
import subprocess
import sys
import time

SETTLE_SECONDS = 3  # write-back of dirty pages, then the trimmer (1 s period)


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary", help="the cudafs binary")
    parser.add_argument("--options", default="backend=host", help="mount options (-o)")
    parser.add_argument("--count", type=int, default=200000, help="number of files")
    parser.add_argument("--size", type=int, default=0, help="bytes written to each file")
    parser.add_argument("--per-dir", type=int, default=1000, help="files per directory")
    parser.add_argument("--mountpoint", default="/tmp/memory_per_file", help="where to mount")
    return parser.parse_args()


def memory(pid):
    """(VmRSS, resident bytes of the largest mapping: the arena), in bytes."""
    with open("/proc/%d/status" % pid) as status:
        rss = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))
    largest_size, largest_rss, size = 0, 0, 0
    with open("/proc/%d/smaps" % pid) as smaps:
        for line in smaps:
            bounds = re.match(r"^([0-9a-f]+)-([0-9a-f]+) ", line)
            if bounds:
                size = int(bounds.group(2), 16) - int(bounds.group(1), 16)
            elif line.startswith("Rss:") and size > largest_size:
                largest_size, largest_rss = size, int(line.split()[1]) * 1024
    return rss, largest_rss


def create_files(root, count, per_dir, size):
    payload = b"\xa5" * size
    for i in range(count):
        if i % per_dir == 0:
            directory = os.path.join(root, "d%d" % (i // per_dir))
            os.mkdir(directory)
        fd = os.open(os.path.join(directory, "f%d" % i), os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                     0o644)
        try:
            if size and os.write(fd, payload) != size:
                raise OSError("short write")
        finally:
            os.close(fd)


def main():
    arguments = parse_arguments()
    os.makedirs(arguments.mountpoint, exist_ok=True)
    daemon = subprocess.Popen([arguments.binary, arguments.mountpoint, "-f",
                               "-o", arguments.options])
    try:
        deadline = time.time() + 30
        while not os.path.ismount(arguments.mountpoint):
            if daemon.poll() is not None or time.time() > deadline:
                sys.exit("cudafs did not mount")
            time.sleep(0.1)
        time.sleep(SETTLE_SECONDS)
        idle_rss, idle_arena = memory(daemon.pid)
        start = time.time()
        create_files(arguments.mountpoint, arguments.count, arguments.per_dir, arguments.size)
        seconds = time.time() - start
        time.sleep(SETTLE_SECONDS)
        rss, arena = memory(daemon.pid)
        stats = subprocess.run([arguments.binary, "--stats", "--all", arguments.mountpoint],
                               capture_output=True, text=True, check=True).stdout
        cached = int(re.search(r"^cached_bytes (\d+)$", stats, re.M).group(1))
    finally:
        subprocess.run(["umount", arguments.mountpoint])
        daemon.wait()
    per_file = ((rss - arena) - (idle_rss - idle_arena)) / arguments.count
    print("options=%s count=%d size=%d: idle %.1f MiB, then %.1f MiB (arena %.1f MiB) "
          "after %.0f s; %.0f bytes per file, %.0f of them cached pages" %
          (arguments.options, arguments.count, arguments.size, idle_rss / 2**20, rss / 2**20,
           arena / 2**20, seconds, per_file, cached / arguments.count))


if __name__ == "__main__":
    main()
