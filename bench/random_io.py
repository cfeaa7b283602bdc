#!/usr/bin/env python3
"""4 KiB random reads or writes on an existing file, as one process would
issue them (one pread or pwrite at a time, offsets aligned to 4 KiB, the same
seed every run); prints thousands of operations per second. Writes end with
an fdatasync, counted in the time.

  bench/random_io.py read|write FILE [COUNT]
"""
import os
import random
import sys
import time

BLOCK = 4096


def main():
    mode, path = sys.argv[1], sys.argv[2]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
    blocks = os.stat(path).st_size // BLOCK
    offsets = [o * BLOCK for o in random.Random(47).choices(range(blocks), k=count)]
    fd = os.open(path, os.O_RDONLY if mode == "read" else os.O_WRONLY)
    data = os.urandom(BLOCK)
    start = time.perf_counter()
    if mode == "read":
        for offset in offsets:
            os.pread(fd, BLOCK, offset)
    else:
        for offset in offsets:
            os.pwrite(fd, data, offset)
        os.fdatasync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    print(f"{count / elapsed / 1000:.1f}")


if __name__ == "__main__":
    main()
