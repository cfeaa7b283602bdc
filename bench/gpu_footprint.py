#!/usr/bin/env python3
"""What a cudafs mount holds on the GPU over its life, and how fast it lets go.

Mounts cudafs (backend=cuda) in the foreground and samples nvidia-smi at each
step: before mounting, the empty mount, after metadata work (directories,
empty files, stat, df), after the first byte of data (with that write's
latency), after deleting it (how long until the process leaves the GPU and
VRAM is back), and for a large file: VRAM after writing it, and how long
after its unlink the VRAM comes back. Needs root and nvidia-smi.

usage: bench/gpu_footprint.py CUDAFS MOUNTPOINT [--gpu-idle S] [--large-gib N]
Prints a markdown table and writes the daemon's log beside the mountpoint.
"""

import argparse
import os
import subprocess
import sys
import time


def smi(query, *extra):
    out = subprocess.run(["nvidia-smi", f"--query-{query}", "--format=csv,noheader,nounits",
                          *extra], capture_output=True, text=True, check=True).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def vram_used_mib(gpu):
    return int(smi("gpu=memory.used", f"--id={gpu}")[0])


def gpu_pids(gpu):
    """Processes with a context on the GPU."""
    bus = smi("gpu=pci.bus_id", f"--id={gpu}")[0]
    pids = set()
    for line in smi("compute-apps=gpu_bus_id,pid"):
        app_bus, pid = [field.strip() for field in line.split(",")]
        if app_bus == bus:
            pids.add(int(pid))
    return pids


def wait_until(condition, timeout, step=0.02):
    """Seconds until condition() held, or None after timeout."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if condition():
            return time.monotonic() - start
        time.sleep(step)
    return None


def timed(command):
    start = time.monotonic()
    subprocess.run(command, check=True, capture_output=True)
    return time.monotonic() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cudafs")
    parser.add_argument("mountpoint")
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--gpu-idle", type=float, default=5.0, help="the gpu_idle= option")
    parser.add_argument("--large-gib", type=int, default=10)
    args = parser.parse_args()
    mnt = args.mountpoint
    os.makedirs(mnt, exist_ok=True)
    rows = []

    def row(step, detail=""):
        pids = gpu_pids(args.gpu)
        rows.append((step, vram_used_mib(args.gpu), "yes" if daemon.pid in pids else "no", detail))

    baseline = vram_used_mib(args.gpu)
    rows.append(("before mounting", baseline, "-", ""))
    log_path = os.path.join(os.path.dirname(os.path.abspath(mnt)), "gpu_footprint.daemon.log")
    log = open(log_path, "w")
    daemon = subprocess.Popen(
        [args.cudafs, "-f", mnt, "-o", f"backend=cuda,gpu_idle={args.gpu_idle:g}"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        if wait_until(lambda: os.path.ismount(mnt), 30) is None:
            sys.exit("cudafs did not mount")
        row("empty mount")
        for i in range(100):
            os.makedirs(f"{mnt}/d{i % 10}", exist_ok=True)
            open(f"{mnt}/d{i % 10}/empty{i}", "w").close()
        os.stat(f"{mnt}/d1/empty1")
        subprocess.run(["df", mnt], check=True, capture_output=True)
        subprocess.run(["dd", f"if={mnt}/d1/empty1", "of=/dev/null", "status=none"], check=True)
        row("100 empty files, stat, df, read")

        # O_DIRECT: the write reaches the daemon before dd returns.
        first = timed(["dd", "if=/dev/zero", f"of={mnt}/first", "bs=4k", "count=1",
                       "oflag=direct", "status=none"])
        second = timed(["dd", "if=/dev/zero", f"of={mnt}/second", "bs=4k", "count=1",
                        "oflag=direct", "status=none"])
        row("first 4 KiB written", f"first write {first * 1000:.0f} ms, next {second * 1000:.1f} ms")

        os.unlink(f"{mnt}/first")
        os.unlink(f"{mnt}/second")
        gone = wait_until(lambda: daemon.pid not in gpu_pids(args.gpu), args.gpu_idle + 10)
        row("all deleted, then idle",
            f"context gone {gone:.2f} s after the delete" if gone is not None else "context kept")
        back = wait_until(lambda: vram_used_mib(args.gpu) <= baseline + 2, 5)
        rows[-1] = rows[-1][:3] + (rows[-1][3] + (
            f"; VRAM at the baseline after {gone + back:.2f} s" if gone is not None and back is not None
            else "; VRAM not back at the baseline"),)

        large = f"{mnt}/large"
        subprocess.run(["dd", "if=/dev/zero", f"of={large}", "bs=1M", f"count={args.large_gib * 1024}",
                        "conv=fsync", "status=none"], check=True)
        full = vram_used_mib(args.gpu)
        row(f"{args.large_gib} GiB file written")
        start = time.monotonic()
        os.unlink(large)
        unlinked = time.monotonic() - start
        freed = wait_until(
            lambda: vram_used_mib(args.gpu) <= full - args.large_gib * 1024 * 0.95, 10, step=0.01)
        row(f"{args.large_gib} GiB file deleted",
            f"unlink took {unlinked * 1000:.0f} ms; 95% of its VRAM back "
            + (f"{freed:.2f} s after the unlink" if freed is not None else "not within 10 s"))
        gone = wait_until(lambda: daemon.pid not in gpu_pids(args.gpu), args.gpu_idle + 10)
        row("then idle", f"context gone {gone:.2f} s after the delete" if gone is not None
            else "context kept")
    finally:
        subprocess.run(["umount", mnt], check=False)
        daemon.wait(timeout=30)
        log.close()

    print(f"gpu_idle={args.gpu_idle:g}; VRAM is nvidia-smi's memory.used of GPU {args.gpu}\n")
    print("| step | VRAM used (MiB) | cudafs listed by nvidia-smi | detail |")
    print("|---|---|---|---|")
    for step, mib, listed, detail in rows:
        print(f"| {step} | {mib} | {listed} | {detail} |")
    with open(log_path) as lines:
        context_lines = [l.strip() for l in lines if "context" in l]
    print("\ndaemon log:\n" + "\n".join(f"    {l}" for l in context_lines))


if __name__ == "__main__":
    main()
