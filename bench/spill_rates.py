#!/usr/bin/env python3
"""What moving file data off a GPU into host memory costs, step by step, on
this machine: committing host memory (4 KiB and huge pages, by threads),
pinning it (cuMemHostRegister, on committed and on untouched memory), and
the GPU's copy into it (pinned and pageable). Then the driver's own
eviction: how long one large allocation takes while managed memory holds
the card, and how fast evicted managed memory reads back.
The figures behind the spill design in docs/DESIGN.md.

usage: bench/spill_rates.py [--gib N] [--managed-gib N]
"""

import argparse
import ctypes
import ctypes.util
import mmap
import os
import subprocess
import sys
import threading
import time

GIB = 1 << 30
CHUNK = GIB
MADV_HUGEPAGE = 14
MADV_POPULATE_WRITE = 23
CU_MEMHOSTREGISTER_PORTABLE = 1
CU_MEM_ATTACH_GLOBAL = 1

libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
cu = ctypes.CDLL("libcuda.so.1")
ctx = ctypes.c_void_p()


def check(result, what):
    if result != 0:
        raise RuntimeError(f"{what} failed: CUresult {result}")


def reserve(size):
    addr = libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE,
                     mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000, -1, 0)  # NORESERVE
    if addr in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap")
    return addr


def parallel(count, work):
    """Runs work(i) for i < count on count threads; seconds taken."""
    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - start


def current():
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


def commit_rate(gib, threads, huge):
    base = reserve(gib * GIB)
    if huge:
        libc.madvise(ctypes.c_void_p(base), gib * GIB, MADV_HUGEPAGE)
    per = gib * GIB // threads

    def work(i):
        if libc.madvise(ctypes.c_void_p(base + i * per), per, MADV_POPULATE_WRITE) != 0:
            raise OSError(ctypes.get_errno(), "MADV_POPULATE_WRITE")

    seconds = parallel(threads, work)
    anon_huge = huge_kib()
    libc.munmap(ctypes.c_void_p(base), gib * GIB)
    return gib * GIB / seconds / 1e9, anon_huge


def huge_kib():
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("AnonHugePages:"):
                return int(line.split()[1])
    return -1


def register_rate(gib, threads, populate):
    base = reserve(gib * GIB)
    libc.madvise(ctypes.c_void_p(base), gib * GIB, MADV_HUGEPAGE)
    if populate:
        libc.madvise(ctypes.c_void_p(base), gib * GIB, MADV_POPULATE_WRITE)
    chunks = gib * GIB // CHUNK

    def work(i):
        current()
        for c in range(i, chunks, threads):
            check(cu.cuMemHostRegister_v2(ctypes.c_void_p(base + c * CHUNK),
                                          ctypes.c_size_t(CHUNK),
                                          CU_MEMHOSTREGISTER_PORTABLE), "cuMemHostRegister")

    seconds = parallel(threads, work)
    return base, gib * GIB / seconds / 1e9


def unregister(base, gib):
    start = time.monotonic()
    for c in range(gib * GIB // CHUNK):
        check(cu.cuMemHostUnregister(ctypes.c_void_p(base + c * CHUNK)), "cuMemHostUnregister")
    seconds = time.monotonic() - start
    libc.munmap(ctypes.c_void_p(base), gib * GIB)
    return gib * GIB / seconds / 1e9


def copy_rate(device, host, gib, threads, piece):
    """Device -> host copies of `piece` bytes, threads each with a stream."""
    total = gib * GIB
    per = total // threads

    def work(i):
        current()
        stream = ctypes.c_void_p()
        check(cu.cuStreamCreate(ctypes.byref(stream), 1), "cuStreamCreate")
        for done in range(0, per, piece):
            off = i * per + done
            check(cu.cuMemcpyDtoHAsync_v2(ctypes.c_void_p(host + off),
                                          ctypes.c_uint64(device + off),
                                          ctypes.c_size_t(piece), stream), "cuMemcpyDtoHAsync")
        check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize")
        cu.cuStreamDestroy_v2(stream)

    return total / parallel(threads, work) / 1e9


def free_bytes():
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    check(cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
    return free.value, total.value


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=int, default=8)
    parser.add_argument("--managed-gib", type=int, default=40)
    args = parser.parse_args()
    gib = args.gib

    for name in ("enabled", "defrag"):
        path = f"/sys/kernel/mm/transparent_hugepage/{name}"
        print(f"THP {name}: {open(path).read().strip() if os.path.exists(path) else 'absent'}")
    print(f"cpus {os.cpu_count()}")

    for huge in (False, True):
        for threads in (1, 8):
            rate, anon = commit_rate(gib, threads, huge)
            print(f"commit {gib} GiB, {'huge pages' if huge else '4 KiB pages'}, "
                  f"{threads} threads: {rate:.1f} GB/s (AnonHugePages {anon // 1024} MiB)")

    check(cu.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    current()

    for populate in (True, False):
        for threads in (1, 8):
            base, rate = register_rate(gib, threads, populate)
            print(f"cuMemHostRegister {gib} GiB in 1 GiB pieces, "
                  f"{'committed' if populate else 'untouched'} memory, {threads} threads: "
                  f"{rate:.1f} GB/s; unregister {unregister(base, gib):.1f} GB/s")

    device = ctypes.c_uint64()
    check(cu.cuMemAlloc_v2(ctypes.byref(device), ctypes.c_size_t(gib * GIB)), "cuMemAlloc")
    check(cu.cuMemsetD8_v2(device, 7, ctypes.c_size_t(gib * GIB)), "cuMemsetD8")
    check(cu.cuCtxSynchronize(), "cuCtxSynchronize")
    pinned, _ = register_rate(gib, 8, True)
    for threads in (1, 8):
        for piece in (8 << 20, 64 << 20):
            print(f"device->pinned host {gib} GiB, {threads} streams, {piece >> 20} MiB pieces: "
                  f"{copy_rate(device.value, pinned, gib, threads, piece):.1f} GB/s")
    unregister(pinned, gib)
    pageable = reserve(gib * GIB)
    libc.madvise(ctypes.c_void_p(pageable), gib * GIB, MADV_HUGEPAGE)
    libc.madvise(ctypes.c_void_p(pageable), gib * GIB, MADV_POPULATE_WRITE)
    for threads in (1, 8):
        print(f"device->pageable host (committed) {gib} GiB, {threads} streams, 8 MiB pieces: "
              f"{copy_rate(device.value, pageable, gib, threads, 8 << 20):.1f} GB/s")
    libc.munmap(ctypes.c_void_p(pageable), gib * GIB)
    check(cu.cuMemFree_v2(device), "cuMemFree")

    # The driver's eviction: managed memory written on the GPU, then another
    # process asks for more than is free in one allocation.
    managed = ctypes.c_uint64()
    size = args.managed_gib * GIB
    check(cu.cuMemAllocManaged(ctypes.byref(managed), ctypes.c_size_t(size),
                               CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged")
    check(cu.cuMemsetD8_v2(managed, 5, ctypes.c_size_t(size)), "cuMemsetD8 managed")
    check(cu.cuCtxSynchronize(), "cuCtxSynchronize")
    free, total = free_bytes()
    want = free + size * 3 // 4
    print(f"managed {args.managed_gib} GiB resident; free {free / GIB:.1f} GiB of "
          f"{total / GIB:.1f}; another process asks for {want / GIB:.1f} GiB at once")
    child = (f"import torch, time; t = time.monotonic(); "
             f"x = torch.empty({want}, dtype=torch.uint8, device='cuda'); "
             f"torch.cuda.synchronize(); print(f'  one allocation took {{time.monotonic() - t:.2f}} s')")
    result = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    print(result.stdout.strip() or f"  failed: {result.stderr.strip().splitlines()[-1]}")
    free, _ = free_bytes()
    print(f"  after it exits: free {free / GIB:.1f} GiB (evicted pages stay in host memory)")
    device = ctypes.c_uint64()
    check(cu.cuMemAlloc_v2(ctypes.byref(device), ctypes.c_size_t(gib * GIB)), "cuMemAlloc")
    start = time.monotonic()
    check(cu.cuMemcpyDtoD_v2(device, managed, ctypes.c_size_t(gib * GIB)), "cuMemcpyDtoD")
    check(cu.cuCtxSynchronize(), "cuCtxSynchronize")
    print(f"  evicted managed memory read on the GPU (migrates back): "
          f"{gib * GIB / (time.monotonic() - start) / 1e9:.1f} GB/s")
    cu.cuMemFree_v2(device)
    cu.cuMemFree_v2(managed)


if __name__ == "__main__":
    main()
