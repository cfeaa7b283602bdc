#!/usr/bin/env python3
"""How fast this machine copies host memory, by threads: the ceiling for a
path whose bytes cross host memory several times (a read through FUSE does:
the device's DMA into the request buffer, the kernel's copy out of it).
Copies a 2 GiB buffer 5 times with PyTorch's CPU copy on 1, 8 and 16 threads.

usage: bench/host_copy_rate.py
"""

import time

import torch


def main():
    source = torch.ones(2**31, dtype=torch.uint8)
    target = torch.empty_like(source)
    target.copy_(source)  # faults every page in before timing
    for threads in (1, 8, 16):
        torch.set_num_threads(threads)
        start = time.monotonic()
        for _ in range(5):
            target.copy_(source)
        rate = 5 * source.numel() / (time.monotonic() - start) / 1e9
        print(f"host memcpy, {threads} threads: {rate:.1f} GB/s copied "
              f"({2 * rate:.1f} GB/s read+write)")


if __name__ == "__main__":
    main()
