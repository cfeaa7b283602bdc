#!/usr/bin/env python3
"""CUDA programs beside cudafs: loading a safetensors file to the GPU from a
mount against from tmpfs, and how much a busy cudafs slows a bf16
matrix-multiply loop sharing the GPU. Needs root (drop_caches), PyTorch with
CUDA and safetensors.

usage: bench/gpu_consumers.py safetensors MOUNT TMPFS [--gib 8] [--runs 3]
       bench/gpu_consumers.py matmul MOUNT [--seconds 10] [--loads NAME,...]
MOUNT is a mounted cudafs, TMPFS a mounted tmpfs; prints markdown rows.
"""

import argparse
import os
import shutil
import subprocess
import time

import torch
from safetensors.torch import load_file, save_file


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")


def make_checkpoint(path, gib):
    # 256 MiB bf16 tensors, like a model's layers (their values do not
    # matter to the load).
    tensors = {f"layer{i}.weight": torch.full((8192, 16384), float(i), dtype=torch.bfloat16)
               for i in range(gib * 4)}
    save_file(tensors, path)


def load_rate(path, runs):
    size = os.path.getsize(path)
    rates = []
    for _ in range(runs):
        drop_caches()
        start = time.monotonic()
        tensors = load_file(path, device="cuda")
        torch.cuda.synchronize()
        rates.append(size / (time.monotonic() - start) / 1e9)
        del tensors
        torch.cuda.empty_cache()
    return rates


def safetensors(args):
    source = os.path.join(args.tmpfs, "model.safetensors")
    make_checkpoint(source, args.gib)
    copy = os.path.join(args.mount, "model.safetensors")
    shutil.copyfile(source, copy)
    print(f"| load_file(device=\"cuda\"), {args.gib} GiB, GB/s, {args.runs} runs | tmpfs | cudafs |")
    print("|---|---|---|")
    tmpfs = load_rate(source, args.runs)
    cudafs = load_rate(copy, args.runs)
    print(f"| each run | {' / '.join(f'{r:.2f}' for r in tmpfs)} | "
          f"{' / '.join(f'{r:.2f}' for r in cudafs)} |")
    print(f"| best | {max(tmpfs):.2f} | {max(cudafs):.2f} |")
    os.unlink(source)
    os.unlink(copy)


def matmul_rate(seconds):
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    count = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        for _ in range(20):
            a @ b
        torch.cuda.synchronize()
        count += 20
    elapsed = time.monotonic() - start
    return count * 2 * 8192**3 / elapsed / 1e12


LOADS = {
    # name: (readers, writers, dd flags of the writers)
    "8 readers + 4 writers": (8, 4, "oflag=direct"),
    "8 readers": (8, 0, ""),
    "4 writers": (0, 4, "oflag=direct"),
    "4 writers in place": (0, 4, "oflag=direct conv=notrunc"),
}


def matmul(args):
    files = [os.path.join(args.mount, f"stream{i}") for i in range(12)]
    for path in files:
        subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=1M", "count=2048", "status=none"],
                       check=True)
    print("| bf16 matmul 8192², TFLOP/s, beside cudafs streaming | alone | busy | slower by |")
    print("|---|---|---|---|")
    for name in args.loads.split(","):
        readers, writers, flags = LOADS[name]
        alone = matmul_rate(args.seconds)
        # Readers and writers in loops, each its own process group, until the
        # loop has run.
        read = "while :; do dd if={0} of=/dev/null bs=1M iflag=direct status=none; done"
        write = "while :; do dd if=/dev/zero of={0} bs=1M count=2048 " + flags + " status=none; done"
        load = [subprocess.Popen(["bash", "-c", read.format(p)], start_new_session=True)
                for p in files[:readers]]
        load += [subprocess.Popen(["bash", "-c", write.format(p)], start_new_session=True)
                 for p in files[8:8 + writers]]
        time.sleep(2)
        busy = matmul_rate(args.seconds)
        for process in load:
            os.killpg(process.pid, 9)
        for process in load:
            process.wait()
        print(f"| {name}, {args.seconds:g} s each | {alone:.1f} | {busy:.1f} | "
              f"{(1 - busy / alone) * 100:.1f}% |", flush=True)
    for path in files:
        os.unlink(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    load = commands.add_parser("safetensors")
    load.add_argument("mount")
    load.add_argument("tmpfs")
    load.add_argument("--gib", type=int, default=8)
    load.add_argument("--runs", type=int, default=3)
    mm = commands.add_parser("matmul")
    mm.add_argument("mount")
    mm.add_argument("--seconds", type=float, default=10)
    mm.add_argument("--loads", default=",".join(LOADS), help="comma-separated: " + ", ".join(LOADS))
    args = parser.parse_args()
    {"safetensors": safetensors, "matmul": matmul}[args.command](args)


if __name__ == "__main__":
    main()
