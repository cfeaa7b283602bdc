#!/usr/bin/env python3
"""One mount over several GPUs (device=all), on a machine with two or more:
df and a fill past one GPU's memory; cold readers of 1 GiB files on a
device=all mount against a one-GPU mount, tmpfs and the null backend; a
CUDA program on GPU 0 reading a file that lies on GPU 1 through a shared
mapping, against reading it through FUSE; reserve= while another program
allocates. Prints Markdown tables.

    CUDAFS_CLIENT_LIBRARY=... PYTHONPATH=fs/client/python \\
      bench/multi_gpu.py --cudafs build/cudafs

Needs root (mount, drop_caches) and torch.
"""

import argparse
import concurrent.futures
import errno
import os
import shutil
import subprocess
import sys
import tempfile
import time

# The GPUs in PCI order, as cudafs --list-devices numbers them (the CUDA
# runtime's default order may differ).
os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")

import torch  # noqa: E402

import cudafs  # noqa: E402

GIB = 1 << 30


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def run(*command):
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def write_file(path, size, chunk=4 << 20):
    """Writes `size` bytes; returns the bytes written before ENOSPC."""
    block = os.urandom(chunk)
    done = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while done < size:
            try:
                done += os.write(fd, block[: min(chunk, size - done)])
            except OSError as e:
                if e.errno == errno.ENOSPC:
                    break
                raise
    finally:
        os.close(fd)
    return done


def readers(paths):
    """GB/s of `dd` readers, one per path, all at once, after drop_caches."""
    drop_caches()
    start = time.perf_counter()
    procs = [subprocess.Popen(["dd", "if=" + p, "of=/dev/null", "bs=1M"],
                              stderr=subprocess.DEVNULL) for p in paths]
    for p in procs:
        if p.wait() != 0:
            sys.exit("dd failed")
    return len(paths) * GIB / (time.perf_counter() - start) / 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cudafs", required=True)
    parser.add_argument("--readers", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    gpus = torch.cuda.device_count()
    if gpus < 2:
        sys.exit("needs two GPUs, found %d" % gpus)
    work = tempfile.mkdtemp(prefix="multi-gpu-")
    mounts = {}

    def mount(name, options):
        path = os.path.join(work, name)
        os.makedirs(path)
        if options == "tmpfs":
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40g", "tmpfs", path], check=True)
        else:
            subprocess.run([args.cudafs, path, "-o", options], check=True)
        mounts[name] = path
        return path

    try:
        print(run(args.cudafs, "--list-devices"))
        pool = mount("all", "device=all,size=90%")
        df = run("df", "-B1", pool).splitlines()[-1].split()
        one_gpu = torch.cuda.get_device_properties(0).total_memory
        print("## df of device=all\n\n%s bytes = %.2f × one GPU's memory\n"
              % (df[1], int(df[1]) / one_gpu))

        # Fill past one GPU: 16 writers of (1.2 × one GPU / 16) each.
        each = int(1.2 * one_gpu / 16) // (4 << 20) * (4 << 20)
        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(16) as pool_writers:
            written = sum(pool_writers.map(
                lambda i: write_file(os.path.join(pool, "fill%02d" % i), each), range(16)))
        seconds = time.perf_counter() - start
        stats = run(args.cudafs, "--stats", "--all", pool)
        per_gpu = [line for line in stats.splitlines() if line.startswith("device")]
        print("## Fill\n\n%.1f GiB written in %.1f s (%.1f GB/s), %.2f × one GPU; ENOSPC: %s\n"
              % (written / GIB, seconds, written / seconds / 1e9, written / one_gpu,
                 written < 16 * each))
        print("```\n%s\n```\n" % "\n".join(per_gpu))
        for i in range(16):
            os.unlink(os.path.join(pool, "fill%02d" % i))

        # Cold readers, of copies of one random GiB.
        source = os.path.join(mount("tmpfs", "tmpfs"), "source")
        subprocess.run(["dd", "if=/dev/urandom", "of=" + source, "bs=4M", "count=256",
                        "status=none"], check=True)
        mount("gpu0", "device=0,size=40g")
        mount("null", "backend=null,size=40g")
        most = max(args.readers)
        with concurrent.futures.ThreadPoolExecutor(8) as copiers:
            list(copiers.map(lambda job: shutil.copyfile(source, job),
                             [os.path.join(path, "r%02d" % i) for path in mounts.values()
                              for i in range(most)]))
        print("## Cold readers, 1 GiB each, GB/s (rounds)\n")
        print("| readers | " + " | ".join(mounts) + " |")
        print("|---:|" + "---:|" * len(mounts))
        for n in args.readers:
            cells = []
            for name, path in mounts.items():
                rates = [readers([os.path.join(path, "r%02d" % i) for i in range(n)])
                         for _ in range(args.rounds)]
                cells.append(" / ".join("%.1f" % r for r in rates))
            print("| %d | %s |" % (n, " | ".join(cells)))
        print()
        print("```\n%s\n```\n" % "\n".join(
            line for line in run(args.cudafs, "--stats", "--all", pool).splitlines()
            if line.startswith("device")))

        def bandwidth(tensor, repeat=10):
            """GB/s of a kernel summing `tensor` on the GPU PyTorch puts it."""
            words = tensor.view(torch.int64)
            with torch.cuda.device(tensor.device):
                words.sum()
                torch.cuda.synchronize()
                start = time.perf_counter()
                for _ in range(repeat):
                    words.sum()
                torch.cuda.synchronize()
            return repeat * words.numel() * 8 / (time.perf_counter() - start) / 1e9

        def view(mapping):
            """The mapping as a tensor, where PyTorch places its address,
            checked to be the mapping itself and not a copy."""
            tensor = torch.as_tensor(mapping)
            if tensor.data_ptr() != mapping.ptr:
                sys.exit("PyTorch copied the mapping")
            return tensor

        def fuse_sum(path):
            with open(path, "rb") as f:
                return torch.frombuffer(bytearray(f.read()), dtype=torch.int64).sum().item()

        # A file striped over both GPUs, mapped by a program on each (shared
        # and as a private copy): the tensor lives on the GPU of the file's
        # first piece, and its kernels read the other GPU's pieces over
        # NVLink.
        striped = os.path.join(pool, "striped")
        with open(striped, "wb") as out:
            for _ in range(8):
                with open(source, "rb") as chunk:
                    shutil.copyfileobj(chunk, out, 4 << 20)
        expected = fuse_sum(striped)
        print("## An 8 GiB file striped over the GPUs, mapped by a program on each\n")
        print("| program on | mapping | tensor on | sum matches read(2) | kernel sum GB/s |")
        print("|---|---|---|---|---:|")
        for gpu in range(gpus):
            with torch.cuda.device(gpu):
                torch.cuda.synchronize()
                for writable in (True, False):
                    with cudafs.map(striped, writable=writable) as mapping:
                        tensor = view(mapping)
                        same = tensor.view(torch.int64).sum().item() == expected
                        print("| cuda:%d | %s | %s | %s | %.0f |"
                              % (gpu, "shared" if writable else "private copy", tensor.device,
                                 same, bandwidth(tensor)))
                        del tensor
        os.unlink(striped)
        print()

        # A file on GPU 1, pulled by GPU 0 over NVLink.
        on_one = mount("gpu1", "device=1,size=20g")
        size = 8 * GIB
        path = os.path.join(on_one, "data.bin")
        with open(path, "wb") as out:
            for _ in range(size // GIB):
                with open(source, "rb") as chunk:
                    shutil.copyfileobj(chunk, out, 4 << 20)
        expected = fuse_sum(path)
        print(run("nvidia-smi", "--query-gpu=index,pci.bus_id,memory.used", "--format=csv"))
        rows = []
        with torch.cuda.device(0):
            torch.cuda.synchronize()
            with cudafs.map(path, writable=True) as mapping:
                tensor = view(mapping)
                if tensor.view(torch.int64).sum().item() != expected:
                    sys.exit("the mapping and read(2) differ")
                rows.append(("kernel sum over the mapping, on %s (the GPU holding it)"
                             % tensor.device, bandwidth(tensor)))
                local = torch.empty(size, dtype=torch.uint8, device="cuda:0")
                torch.cuda.synchronize()
                start = time.perf_counter()
                local.copy_(tensor)
                torch.cuda.synchronize()
                rows.append(("GPU 0 copies the mapping into its own memory (peer copy)",
                             size / (time.perf_counter() - start) / 1e9))
                del tensor
            rows.append(("kernel sum over GPU 0's own memory", bandwidth(local)))
            del local
            torch.cuda.empty_cache()
            drop_caches()
            start = time.perf_counter()
            with open(path, "rb", buffering=0) as f:
                host = torch.empty(size, dtype=torch.uint8).pin_memory()
                buffer, done = memoryview(host.numpy()), 0
                while done < size:  # one read(2) returns at most 2 GiB
                    done += f.readinto(buffer[done:])
                through_fuse = host.to("cuda:0")
            torch.cuda.synchronize()
            rows.append(("read(2) through FUSE into pinned memory, then to GPU 0 (cold)",
                         size / (time.perf_counter() - start) / 1e9))
            del through_fuse, host
            torch.cuda.empty_cache()
        print("## An 8 GiB file on GPU 1, read by a program on GPU 0\n")
        print("| path | GB/s |\n|---|---:|")
        for name, rate in rows:
            print("| %s | %.1f |" % (name, rate))
        print()

        # reserve=: another program holds memory, cudafs leaves the reserve.
        for name in ("gpu0", "gpu1", "null", "tmpfs", "all"):
            subprocess.run(["umount", mounts.pop(name)], check=True)
        hog = torch.empty(40 * GIB, dtype=torch.uint8, device="cuda:0")
        free, total = torch.cuda.mem_get_info(0)
        reserve = 16 * GIB
        kept = mount("reserve", "device=0,size=90%%,reserve=%d" % reserve)
        written = write_file(os.path.join(kept, "fill"), total)
        free_after, _ = torch.cuda.mem_get_info(0)
        print("## reserve=16g on GPU 0 while this process holds 40 GiB of it\n")
        print("free before %.2f GiB; written %.2f GiB until ENOSPC; free after %.2f GiB "
              "(reserve %.0f GiB)\n" % (free / GIB, written / GIB, free_after / GIB,
                                        reserve / GIB))
        del hog
    finally:
        for path in mounts.values():
            subprocess.run(["umount", path])
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
