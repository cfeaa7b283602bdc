#!/usr/bin/env python3
"""An N GiB safetensors file reaching the GPU, on the GPU machine: from
tmpfs and from a cudafs mount with safetensors' load_file(device="cuda"),
against cudafs.load_safetensors as a private copy (made inside the GPU) and
as a shared mapping of the file's own memory; a kernel reading each
mapping against ordinary device memory; then a kernel writing an N GiB
file through a shared mapping, and sha256sum of it through FUSE against
the hash of the mapped bytes. Prints Markdown tables; every load is
checked against the file's tensors.

    CUDAFS_CLIENT_LIBRARY=... PYTHONPATH=fs/client/python \\
      bench/share_gpu.py --cudafs build/cudafs --gib 8 --repeat 3

Needs root (mount, drop_caches), torch and safetensors.
"""

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

import torch
from safetensors.torch import load_file, save_file

import cudafs


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def timed(load):
    """Seconds from the call to tensors usable on the GPU."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    tensors = load()
    torch.cuda.synchronize()
    return time.perf_counter() - start, tensors


def same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cudafs", required=True)
    parser.add_argument("--gib", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--options", default="backend=cuda")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="share-gpu-")
    tmpfs, mount = os.path.join(work, "tmpfs"), os.path.join(work, "cudafs")
    os.makedirs(tmpfs)
    os.makedirs(mount)
    size = args.gib << 30
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d" % (size + (1 << 30)), "tmpfs", tmpfs],
                   check=True)
    subprocess.run([args.cudafs, mount, "-o", "size=%d,%s" % (3 * size + (1 << 30), args.options)],
                   check=True)
    try:
        # 256 MiB bf16 tensors, made on the GPU.
        count = args.gib * 4
        made = {"t%03d" % i: torch.randn(128 << 20, dtype=torch.bfloat16, device="cuda")
                .reshape(8192, -1) for i in range(count)}
        on_tmpfs = os.path.join(tmpfs, "model.safetensors")
        save_file(made, on_tmpfs)
        on_cudafs = os.path.join(mount, "model.safetensors")
        shutil.copyfile(on_tmpfs, on_cudafs)
        rows = []

        def run(name, load, cold):
            times = []
            for _ in range(args.repeat):
                if cold:
                    drop_caches()
                seconds, tensors = timed(load)
                if not same(tensors, made):
                    sys.exit("%s: the tensors differ from the file's" % name)
                del tensors
                torch.cuda.empty_cache()
                times.append(seconds)
            rows.append((name, times))

        run("load_file(device=\"cuda\") from tmpfs", lambda: load_file(on_tmpfs, device="cuda"),
            cold=False)
        run("load_file(device=\"cuda\") from cudafs", lambda: load_file(on_cudafs, device="cuda"),
            cold=True)
        run("cudafs.load_safetensors (private copy)", lambda: cudafs.load_safetensors(on_cudafs),
            cold=True)
        # The first shared mapping moves what lies in blocks under 2 MiB (the
        # file's first few MiB) into blocks of their own; later ones map.
        first_shared, tensors = timed(lambda: cudafs.load_safetensors(on_cudafs, writable=True))
        del tensors
        run("cudafs.load_safetensors(writable=True) (shared mapping)",
            lambda: cudafs.load_safetensors(on_cudafs, writable=True), cold=True)

        # A kernel reading each mapping, against ordinary device memory.
        def read_bandwidth(tensor):
            words = tensor[: tensor.numel() // 8 * 8].view(torch.int64)
            words.sum()
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(10):
                words.sum()
            torch.cuda.synchronize()
            return 10 * words.numel() * 8 / (time.perf_counter() - start) / 1e9

        bandwidth = {}
        with cudafs.map(on_cudafs) as copy, cudafs.map(on_cudafs, writable=True) as shared:
            for name, mapping in (("copy", copy), ("shared", shared)):
                bandwidth[name] = read_bandwidth(torch.as_tensor(mapping, device="cuda"))
            ordinary = torch.as_tensor(copy, device="cuda").clone()
            bandwidth["ordinary"] = read_bandwidth(ordinary)
            del ordinary

        # A kernel writes an N GiB file through a shared mapping; read(2)
        # then sees its bytes (sha256sum through FUSE against the mapping's).
        written = os.path.join(mount, "written.bin")
        with open(written, "wb") as f:
            f.truncate(size)
        steps = {}
        start = time.perf_counter()
        with cudafs.map(written, writable=True) as out:
            steps["map (holes become zeroed blocks)"] = time.perf_counter() - start
            words = torch.as_tensor(out, device="cuda").view(torch.int64)
            torch.cuda.synchronize()
            start = time.perf_counter()
            torch.arange(words.numel(), device="cuda", out=words)
            words.mul_(0x9E3779B97F4A7C15 - (1 << 64)).bitwise_xor_(words >> 29)
            torch.cuda.synchronize()
            steps["kernel writes"] = time.perf_counter() - start
            start = time.perf_counter()
            out.sync()
            steps["sync"] = time.perf_counter() - start
            mapped_hash = hashlib.sha256()
            chunk = 256 << 20
            raw = torch.as_tensor(out, device="cuda")
            for at in range(0, size, chunk):
                mapped_hash.update(raw[at:at + chunk].cpu().numpy().tobytes())
            del raw, words
        drop_caches()
        start = time.perf_counter()
        through_fuse = subprocess.run(["sha256sum", written], check=True, capture_output=True,
                                      text=True).stdout.split()[0]
        steps["sha256sum through FUSE"] = time.perf_counter() - start
        if through_fuse != mapped_hash.hexdigest():
            sys.exit("sha256sum through FUSE %s differs from the mapped bytes' %s" %
                     (through_fuse, mapped_hash.hexdigest()))

        gpu = torch.cuda.get_device_name()
        print("%d GiB safetensors (%d bf16 tensors of 256 MiB) on %s; seconds, %d runs; "
              "cudafs -o %s; page cache dropped before each cudafs load" %
              (args.gib, count, gpu, args.repeat, args.options))
        print()
        print("| load | min | median | max | GB/s (median) |")
        print("|---|---:|---:|---:|---:|")
        file_bytes = os.path.getsize(on_cudafs)
        for name, times in rows:
            times.sort()
            median = times[len(times) // 2]
            print("| %s | %.3f | %.3f | %.3f | %.1f |" %
                  (name, times[0], median, times[-1], file_bytes / median / 1e9))
        print()
        print("First shared mapping of the file (moves its small first blocks): %.3f s" %
              first_shared)
        print()
        print("A kernel (torch int64 sum) reading the private copy: %.0f GB/s; the shared "
              "mapping: %.0f GB/s; the same bytes in ordinary device memory: %.0f GB/s" %
              (bandwidth["copy"], bandwidth["shared"], bandwidth["ordinary"]))
        print()
        print("A kernel writing a %d GiB file through a shared mapping (sha256sum through "
              "FUSE matches the mapped bytes: %s):" % (args.gib, through_fuse[:16]))
        print()
        print("| step | seconds | GB/s |")
        print("|---|---:|---:|")
        for name, seconds in steps.items():
            print("| %s | %.3f | %.1f |" % (name, seconds, size / seconds / 1e9))
    finally:
        subprocess.run(["umount", mount])
        subprocess.run(["umount", tmpfs])
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
