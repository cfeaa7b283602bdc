#!/usr/bin/env python3
"""An N GiB safetensors file reaching the GPU, on the GPU machine: from
tmpfs and from a cudafs mount with safetensors' load_file(device="cuda"),
against cudafs.load_safetensors (a private copy made inside the GPU, mapped
into this process); then a kernel reading the mapping against ordinary
device memory. Prints one Markdown table; every load is checked against the
file's tensors.

    CUDAFS_CLIENT_LIBRARY=... PYTHONPATH=fs/client/python \\
      bench/share_gpu.py --cudafs build/cudafs --gib 8 --repeat 3

Needs root (mount, drop_caches), torch and safetensors.
"""

import argparse
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
    subprocess.run([args.cudafs, mount, "-o", "size=%d,%s" % (2 * size + (1 << 30), args.options)],
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

        # A kernel reading the mapping, against ordinary device memory.
        with cudafs.map(on_cudafs) as mapping:
            mapped = torch.as_tensor(mapping, device="cuda")
            ordinary = mapped.clone()
            bandwidth = {}
            for name, tensor in (("mapped", mapped), ("ordinary", ordinary)):
                words = tensor[: tensor.numel() // 8 * 8].view(torch.int64)
                words.sum()
                torch.cuda.synchronize()
                start = time.perf_counter()
                for _ in range(10):
                    words.sum()
                torch.cuda.synchronize()
                bandwidth[name] = 10 * words.numel() * 8 / (time.perf_counter() - start) / 1e9
            del mapped, ordinary

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
        print("A kernel (torch int64 sum) reading the mapping: %.0f GB/s; the same bytes in "
              "ordinary device memory: %.0f GB/s" % (bandwidth["mapped"], bandwidth["ordinary"]))
    finally:
        subprocess.run(["umount", mount])
        subprocess.run(["umount", tmpfs])
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
