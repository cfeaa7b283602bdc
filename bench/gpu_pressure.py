#!/usr/bin/env python3
"""cudafs giving GPU memory back: a mount holding --fill of the card in files
of mixed sizes, then a PyTorch program taking --take of the card: (a) in
1 GiB tensors, (b) in one allocation, (c) in one allocation after
`cudafs --make-room`. While the program holds its memory: where the files'
bytes are, reads of 4 GiB of them against tmpfs, a 2 GiB write; after it
exits, how long until the data is back on the GPU; after each scenario,
every file's sha256 read back through the mount against the written one;
at the end the daemon's CPU while nothing happens. Prints Markdown tables,
writes every number to OUT/gpu_pressure.json.

    bench/gpu_pressure.py --cudafs build/cudafs --fill 0.6 --take 0.9 \\
      --idle-seconds 60 --out "$OUT" --scenarios a,b,c
    bench/gpu_pressure.py --plan-only --total-bytes 80g   # the file list, no GPU

A program that meets OOM retries for --patience seconds (first OOM and
time to all of it both reported). (c) asks --make-room for exactly what the
program takes; the program's CUDA context (about 0.5 GiB) then comes out of
that room, so its start check and allocation fail unless --room-extra 1g.
Needs root (mount, drop_caches); torch only in the subprocesses that touch
the GPU, so this process never holds GPU memory.
"""

import argparse
import hashlib
import json
import math
import multiprocessing
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
CHUNK = 8 * MIB
BLOCK = 64 * MIB
CLASSES = [("c8g", 8 * GIB, 2), ("c1g", GIB, 8), ("c16m", 16 * MIB, 200),
           ("c256k", 256 * KIB, 2000)]
READ_SET = 4 * GIB
BACK_TIMEOUT = 120
BACK_SLACK = 64 * MIB  # host bytes still counted as "back": metadata, a pool's last pieces
NAMES = {"a": "a: 1 GiB tensors", "b": "b: one allocation",
         "c": "c: --make-room, then one allocation"}

PROBE = ("import json, torch; free, total = torch.cuda.mem_get_info(); "
         "print(json.dumps({'free': free, 'total': total, 'name': torch.cuda.get_device_name()}))")

# Timing starts once the CUDA context exists; mem_get_info then is what a
# vLLM-style start check sees. On OOM the program keeps trying for
# `patience` seconds, so one run tells both where a naive program fails and
# how long the watcher took to make room.
CHILD = r"""
import json, sys, time
mode, want, patience = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
import torch
oom = getattr(torch.cuda, "OutOfMemoryError", RuntimeError)
free_at_start, total = torch.cuda.mem_get_info()
held, got, first_oom, failures = [], 0, None, 0
start = time.monotonic()
while got < want:
    size = min(1 << 30, want - got) if mode == "chunks" else want
    try:
        held.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
        got += size
    except oom as error:
        failures += 1
        if first_oom is None:
            first_oom = {"at_bytes": got, "seconds": time.monotonic() - start,
                         "error": (str(error).splitlines() or [""])[0][:300]}
        if time.monotonic() - start > patience:
            break
        time.sleep(0.05)
seconds = time.monotonic() - start
print(json.dumps({"mode": mode, "want": want, "free_at_start": free_at_start, "total": total,
                  "got": got, "seconds": seconds, "had_all": got >= want, "first_oom": first_oom,
                  "failures": failures, "free_after": torch.cuda.mem_get_info()[0]}), flush=True)
sys.stdin.readline()
"""


def parse_size(text):
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kmgt]?)i?b?", text.strip().lower())
    if not match:
        raise argparse.ArgumentTypeError("not a size: %r" % text)
    return int(float(match.group(1)) * 1024 ** " kmgt".index(match.group(2) or " "))


def plan(target):
    """The files totalling TARGET bytes: the classes scaled down when TARGET
    is smaller than their sum, the rest in 1 GiB files and one last piece."""
    scale = min(1.0, target / sum(size * count for _, size, count in CLASSES))
    sizes = [(name, size) for name, size, count in CLASSES for _ in range(int(count * scale))]
    rest = target - sum(size for _, size in sizes)
    sizes += [("c1g", GIB)] * (rest // GIB) + ([("rest", rest % GIB)] if rest % GIB else [])
    counters, files = {}, []
    for index, (name, size) in enumerate(sizes):
        counters[name] = counters.get(name, 0) + 1
        files.append({"path": "%s/%05d.bin" % (name, counters[name] - 1), "size": size,
                      "index": index, "kind": name})
    return files


def read_set(files):
    """About READ_SET bytes of files, 1 GiB ones first, the 8 GiB ones last."""
    order = ["c1g", "c16m", "rest", "c256k", "c8g"]
    chosen, total = [], 0
    for f in sorted(files, key=lambda f: (order.index(f["kind"]), f["index"])):
        if total >= READ_SET:
            break
        chosen.append(f)
        total += f["size"]
    return chosen


_blocks = {}


def chunks(size, index, kind):
    """SIZE bytes in 8 MiB pieces of the kind's random block. Every 64 KiB
    starts with (file index, offset): no two files, and no two 64 KiB pieces
    of one, have the same bytes, so misplaced data shows in the hash."""
    if kind not in _blocks:
        _blocks[kind] = os.urandom(BLOCK)
    for offset in range(0, size, CHUNK):
        n = min(CHUNK, size - offset)
        chunk = bytearray(_blocks[kind][offset % BLOCK:offset % BLOCK + n])
        for at in range(0, n - 15, 64 * KIB):
            struct.pack_into("<QQ", chunk, at, index, offset + at)
        yield chunk


def write_file(path, pieces, digest=None):
    with open(path, "wb", buffering=0) as out:
        for piece in pieces:
            out.write(piece)
            if digest:
                digest.update(piece)
        os.fsync(out.fileno())


def _write_task(task):
    path, size, index, kind = task
    digest = hashlib.sha256()
    write_file(path, chunks(size, index, kind), digest)
    return path, digest.hexdigest()


def hash_file(path):
    digest, view = hashlib.sha256(), memoryview(bytearray(CHUNK))
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(view):
            digest.update(view[:n])
    return path, digest.hexdigest()


def pool_map(function, tasks, timeout, workers=8):
    # Workers must die of the pool's SIGTERM, not run our handler (a worker
    # raising SystemExit mid-queue leaves terminate() waiting on it forever).
    reset = lambda: [signal.signal(s, signal.SIG_DFL) for s in (signal.SIGTERM, signal.SIGHUP)]
    with multiprocessing.get_context("fork").Pool(workers, initializer=reset) as pool:
        return dict(pool.map_async(function, tasks, chunksize=1).get(timeout))


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def read_rate(paths):
    """GB/s of reading PATHS one after another in 8 MiB reads."""
    view, total = memoryview(bytearray(CHUNK)), 0
    start = time.monotonic()
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while n := f.readinto(view):
                total += n
    return total / (time.monotonic() - start) / 1e9


def number(value):
    return int(value) if str(value).isdigit() else 0


def places(stats):
    """Bytes held (and used by files) on the GPUs and in host memory. Keys
    may be missing or renamed: missing counts 0, and a part with no
    deviceI_place is host memory when it is the last of several."""
    get = lambda key: number(stats.get(key))
    out = {"gpu": 0, "host": 0, "gpu_used": 0, "host_used": 0, "ok": bool(stats),
           "moved_out": get("moved_out_bytes"), "moved_back": get("moved_back_bytes")}
    parts = sorted(int(k[6:-6]) for k in stats if re.fullmatch(r"device\d+_bytes", k))
    out["spill"] = len(parts) > 1
    if not parts:  # one part: a GPU, or host memory where no GPU was usable
        out["host" if str(stats.get("device", "")).startswith("host") else "gpu"] = \
            get("device_bytes")
    for i in parts:
        last = "host" if i == parts[-1] and len(parts) > 1 else "gpu"
        kind = "host" if str(stats.get("device%d_place" % i, last)) == "host" else "gpu"
        out[kind] += get("device%d_bytes" % i)
        out[kind + "_used"] += get("device%d_used_bytes" % i)
    used = any(k.endswith("_used_bytes") for k in stats)
    out["host_data"] = out["host_used"] if used else out["host"]
    return out


def where(paths):
    """File bytes by place from user.cudafs.where, summed over PATHS."""
    total = {"gpu": 0, "host": 0, "unreadable": 0}
    for path in paths:
        try:
            text = os.getxattr(path, "user.cudafs.where").decode()
        except OSError:
            total["unreadable"] += 1
            continue
        for line in text.splitlines():
            fields = line.split()
            if len(fields) == 2:
                total["host" if fields[0] == "host" else "gpu"] += number(fields[1])
    return total if total["unreadable"] < len(paths) else None


def daemon_pid(binary, mount):
    """The cudafs process whose command line names the mountpoint."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if os.path.basename(argv[0]) == os.path.basename(binary) and any(
                a and os.path.realpath(a) == os.path.realpath(mount) for a in argv[1:]):
            return int(pid)
    return None


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15


def mount(cudafs, mountpoint, options):
    """Mounts CUDAFS at MOUNTPOINT with -o OPTIONS (exits saying why if it
    cannot); the daemon's pid, or None if it cannot be found."""
    p = subprocess.run([cudafs, mountpoint, "-o", options],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0 or not os.path.ismount(mountpoint):
        sys.exit("mounting failed (%s): %s" % (p.returncode, p.stderr.strip()[-500:]))
    return daemon_pid(cudafs, mountpoint)


def fill_files(mountpoint, files, workers=8):
    """Writes FILES (plan's) under MOUNTPOINT: {path: sha256}, seconds."""
    for kind in sorted({f["kind"] for f in files}):
        os.makedirs(os.path.join(mountpoint, kind))
        _blocks[kind] = os.urandom(BLOCK)  # made before the pool forks: its workers share them
    tasks = sorted(((os.path.join(mountpoint, f["path"]), f["size"], f["index"], f["kind"])
                    for f in files), key=lambda t: -t[1])
    start = time.monotonic()
    hashes = pool_map(_write_task, tasks, 600 + sum(f["size"] for f in files) / 1e8, workers)
    return hashes, time.monotonic() - start


def unmount(mountpoint, pid):
    """Unmounts (lazily if it must) and waits up to 30 s for the daemon PID
    to exit: it lets go of its GPU and host memory only then."""
    for command in (["umount", mountpoint], ["umount", "-l", mountpoint]):
        if os.path.ismount(mountpoint):
            try:
                subprocess.run(command, capture_output=True, timeout=120)
            except subprocess.TimeoutExpired:
                pass
    for _ in range(300):
        if not pid or not os.path.exists("/proc/%d" % pid):
            break
        time.sleep(0.1)


class Run:
    def __init__(self, args, total, files):
        self.args, self.total, self.files = args, total, files
        self.hashes, self.child, self.workers = {}, None, 8

    def at(self, f, root=None):
        return os.path.join(root or self.args.mount, f["path"])

    def sample(self, samples, t0):
        try:
            p = subprocess.run([self.args.cudafs, "--stats", "--json", self.args.mount],
                               capture_output=True, text=True, timeout=15)
            stats = json.loads(p.stdout) if p.returncode == 0 else {}
        except (subprocess.TimeoutExpired, ValueError):
            stats = {}
        samples.append(dict(places(stats), t=time.monotonic() - t0))
        self.last_stats = {k: v for k, v in stats.items() if not k.startswith(("requests_", "handler_ns_"))}

    def verify(self):
        drop_caches()
        start = time.monotonic()
        got = pool_map(hash_file, list(self.hashes), 600 + sum(f["size"] for f in self.files) / 2e8,
                       self.workers)
        bad = sorted(p for p, h in self.hashes.items() if got.get(p) != h)
        return {"files": len(got), "mismatches": len(bad), "first_mismatches": bad[:10],
                "seconds": time.monotonic() - start}

    def program(self, name, want, samples, t0):
        """Starts the program; its JSON line once it has its memory (or gave
        up), sampling the stats meanwhile; None if it died or stalled."""
        with open(os.path.join(self.args.out, "program-%s.log" % name), "wb") as log:
            self.child = subprocess.Popen(
                [sys.executable, "-c", CHILD, "chunks" if name == "a" else "one", str(want),
                 str(self.args.patience)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        data, fd = b"", self.child.stdout.fileno()
        deadline = time.monotonic() + self.args.patience + 180
        while b"\n" not in data and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.2)[0]:
                piece = os.read(fd, 65536)
                if not piece:
                    break
                data += piece
            self.sample(samples, t0)
        try:
            return json.loads(data.split(b"\n")[0])
        except ValueError:
            return None

    def stop_child(self):
        if self.child:
            try:
                self.child.communicate(b"\n", timeout=60)
            except subprocess.TimeoutExpired:
                self.child.kill()
                self.child.wait(30)
            self.child = None

    def wait_back(self, r, t1, timeout=BACK_TIMEOUT):
        """Samples from T1 on until the data is back on the GPU (no more
        than BACK_SLACK in host memory), at most TIMEOUT seconds; sets
        r["back_seconds"] when it is. The samples."""
        back = []
        while True:
            self.sample(back, t1)
            if back[-1]["ok"] and (back[-1]["host_data"] <= BACK_SLACK or not back[-1]["spill"]):
                r["back_seconds"] = back[-1]["t"]
                break
            if time.monotonic() - t1 >= timeout:
                break
            time.sleep(0.5)
        return back

    def scenario(self, name, shm):
        args, r, want = self.args, {"scenario": name}, int(self.args.take * self.total)
        samples, t0 = [], time.monotonic()
        self.sample(samples, t0)
        if name == "c":
            start, size = time.monotonic(), "%dm" % -(-(want + args.room_extra) // MIB)
            try:
                p = subprocess.run([args.cudafs, "--make-room", args.mount, size],
                                   capture_output=True, text=True, timeout=600)
                rc, err = p.returncode, p.stderr.strip()[-500:]
            except subprocess.TimeoutExpired:
                rc, err = None, "timed out after 600 s"
            seconds = time.monotonic() - start
            self.sample(samples, t0)
            moved = samples[-1]["moved_out"] - samples[0]["moved_out"]
            r["make_room"] = {"size": size, "seconds": seconds, "rc": rc, "stderr": err,
                              "moved_out": moved, "gbps": moved / seconds / 1e9}
        r["program"] = (self.program(name, want, samples, t0)
                        or {"error": "no report (see program-%s.log)" % name})
        # The watcher may still be moving data once the program has its memory.
        still = time.monotonic()
        while time.monotonic() - still < 2 and time.monotonic() - t0 < args.patience + 240:
            time.sleep(0.5)
            self.sample(samples, t0)
            if samples[-1]["moved_out"] != samples[-2]["moved_out"]:
                still = time.monotonic()
        good = [s for s in samples if s["ok"]]
        if good and good[-1]["moved_out"] > good[0]["moved_out"]:
            # From the last sample before the first move to the first at the
            # final count: a bound from above on the time, so the rate is low.
            began = max(s["t"] for s in good if s["moved_out"] == good[0]["moved_out"])
            ended = min(s["t"] for s in good if s["moved_out"] == good[-1]["moved_out"])
            r["moved_out"] = good[-1]["moved_out"] - good[0]["moved_out"]
            r["move_gbps"] = r["moved_out"] / max(ended - began, 1e-3) / 1e9
        r["held"], r["held_stats"] = samples[-1], self.last_stats
        r["files_where"] = where([self.at(f) for f in self.files])
        reads = read_set(self.files)
        r["read_set_where"] = where([self.at(f) for f in reads])
        drop_caches()
        r["read_gbps"] = read_rate([self.at(f) for f in reads])
        if shm:
            r["read_gbps_tmpfs"] = read_rate([self.at(f, shm) for f in reads])
        # Made and hashed beforehand: the timing is the writes and the fsync.
        written, digest = os.path.join(args.mount, "pressure-%s.bin" % name), hashlib.sha256()
        pieces = list(chunks(2 * GIB, 10 ** 6 + ord(name), "c1g"))
        for piece in pieces:
            digest.update(piece)
        start = time.monotonic()
        try:
            write_file(written, pieces)
            r["write_gbps"] = 2 * GIB / (time.monotonic() - start) / 1e9
            self.hashes[written] = digest.hexdigest()
        except OSError as error:
            r["write_error"] = str(error)
        del pieces
        self.stop_child()
        t1 = time.monotonic()
        back = self.wait_back(r, t1)
        r["back"], r["back_stats"] = back[-1], self.last_stats
        r["moved_back"] = back[-1]["moved_back"] - samples[0]["moved_back"]
        r["verify"] = self.verify()
        self.hashes.pop(written, None)
        if os.path.exists(written):
            os.unlink(written)
        r["samples"] = samples + [dict(s, t=s["t"] + t1 - t0) for s in back]
        return r


def cell(value, form="%.1f", scale=1):
    return "–" if value is None else form % (value / scale)


def report(results):
    print("cudafs under GPU memory pressure on %s (%.1f GiB): %.1f GiB in %d files, written "
          "in %.1f s (%.2f GB/s); the program takes %.1f GiB; -o %s\n" % (
              results["gpu"], results["total_bytes"] / GIB, results["fill_bytes"] / GIB,
              results["files"], results["write_seconds"],
              results["fill_bytes"] / results["write_seconds"] / 1e9,
              results["take_bytes"] / GIB, results["mount_options"]))
    print("| scenario | make-room s | free at start GiB | got GiB | first OOM at GiB (s) "
          "| s to all | moved out GiB | move GB/s |\n|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in results["scenarios"]:
        p, room, oom = r["program"], r.get("make_room", {}), r["program"].get("first_oom")
        print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            NAMES[r["scenario"]], cell(room.get("seconds"), "%.2f")
            + (" (rc %s)" % room["rc"] if room and room["rc"] != 0 else ""),
            cell(p.get("free_at_start"), scale=GIB)
            + (" (%s take)" % "≥<"[p["free_at_start"] < p["want"]] if "want" in p else ""),
            cell(p.get("got"), scale=GIB),
            "%.1f (%.2f)" % (oom["at_bytes"] / GIB, oom["seconds"]) if oom else "–",
            cell(p.get("seconds") if p.get("had_all") else None, "%.2f"),
            cell(room.get("moved_out", r.get("moved_out")), scale=GIB)
            + (" (+%.1f)" % ((r.get("moved_out", 0) - room["moved_out"]) / GIB) if room else ""),
            cell(room.get("gbps") if room else r.get("move_gbps"))))
    if any(r["scenario"] == "c" for r in results["scenarios"]):
        print("\n(c): moved out by --make-room (+ by the watcher after it), at make-room's rate.")
    print("\n| scenario | GPU GiB | host GiB | files on host GiB | read set on host GiB "
          "| read GB/s | tmpfs GB/s | 2 GiB write GB/s | back on GPU s | mismatches | verify s |"
          "\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results["scenarios"]:
        files, reads = r["files_where"], r["read_set_where"]
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %d of %d | %.1f |" % (
            NAMES[r["scenario"]], cell(r["held"]["gpu"], scale=GIB),
            cell(r["held"]["host"], scale=GIB), cell(files and files["host"], scale=GIB),
            cell(reads and reads["host"], scale=GIB), cell(r.get("read_gbps"), "%.2f"),
            cell(r.get("read_gbps_tmpfs"), "%.2f"),
            cell(r.get("write_gbps"), "%.2f") if "write_error" not in r else r["write_error"],
            cell(r.get("back_seconds")) if "back_seconds" in r else "> %d" % BACK_TIMEOUT,
            r["verify"]["mismatches"], r["verify"]["files"], r["verify"]["seconds"]))
    if "idle_cpu_percent" in results:
        print("\nThe daemon's CPU over %d idle seconds: %.2f%%" %
              (results["idle_seconds"], results["idle_cpu_percent"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cudafs")
    parser.add_argument("--mount", default="/mnt/cudafs-pressure")
    parser.add_argument("--fill", type=float, default=0.6)
    parser.add_argument("--take", type=float, default=0.9)
    parser.add_argument("--idle-seconds", type=int, default=60)
    parser.add_argument("--out", default=os.environ.get("OUT"))
    parser.add_argument("--scenarios", default="a,b,c")
    parser.add_argument("--patience", type=float, default=30,
                        help="seconds the program keeps retrying after OOM (0: gives up)")
    parser.add_argument("--room-extra", type=parse_size, default=0,
                        help="(c) asks --make-room for this much more than the program takes "
                        "(its CUDA context is about 0.5 GiB)")
    parser.add_argument("--total-bytes", type=parse_size,
                        help="the card's memory (skips the probe)")
    parser.add_argument("--plan-only", action="store_true")
    args = parser.parse_args()
    scenarios = args.scenarios.split(",")
    if not set(scenarios) <= set(NAMES) or not 0 < args.fill < 1 or not 0 < args.take <= 1:
        parser.error("--scenarios takes a,b,c; --fill and --take are fractions")
    if args.plan_only and not args.total_bytes:
        parser.error("--plan-only needs --total-bytes")
    gpu_name = "a card of --total-bytes"
    if not args.total_bytes:
        p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                           timeout=120)
        if p.returncode != 0:
            sys.exit("reading the GPU's memory failed: %s" % p.stderr.strip()[-500:])
        probe = json.loads(p.stdout.strip().splitlines()[-1])
        args.total_bytes, gpu_name = probe["total"], probe["name"]
    total = args.total_bytes
    fill = int(total * args.fill)
    files = plan(fill)
    mount_mib = math.ceil(total * args.fill * 1.3 / MIB)
    if args.plan_only:
        print("%d files, %d bytes (%.2f GiB) of %.2f GiB; -o size=%dm; read set %s\n" % (
            len(files), fill, fill / GIB, total / GIB, mount_mib,
            ", ".join(f["path"] for f in read_set(files))))
        print("| file | bytes |\n|---|---:|")
        for f in files:
            print("| %s | %d |" % (f["path"], f["size"]))
        return
    if not args.cudafs:
        parser.error("--cudafs is needed")
    if os.geteuid() != 0:
        sys.exit("needs root (mount, drop_caches)")
    args.cudafs = os.path.abspath(args.cudafs)
    args.out = args.out or tempfile.mkdtemp(prefix="gpu-pressure-")
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.mount, exist_ok=True)
    if os.path.ismount(args.mount):
        sys.exit("%s is already a mountpoint" % args.mount)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda sig, frame: sys.exit("stopped by signal %d" % sig))
    results = {"command": sys.argv, "gpu": gpu_name, "total_bytes": total, "fill_bytes": fill,
               "take_bytes": int(args.take * total), "files": len(files),
               "mount_options": "size=%dm" % mount_mib, "scenarios": []}
    run, shm, pid = Run(args, total, files), None, None
    try:
        pid = results["daemon_pid"] = mount(args.cudafs, args.mount, "size=%dm" % mount_mib)
        run.hashes, results["write_seconds"] = fill_files(args.mount, files)
        reads = read_set(files)
        if shutil.disk_usage("/dev/shm").free > sum(f["size"] for f in reads) + GIB:
            shm = tempfile.mkdtemp(prefix="cudafs-pressure-", dir="/dev/shm")
            for f in reads:
                os.makedirs(os.path.join(shm, f["kind"]), exist_ok=True)
                shutil.copyfile(os.path.join(args.mount, f["path"]), os.path.join(shm, f["path"]))
        for name in scenarios:
            print("scenario %s ..." % NAMES[name], file=sys.stderr, flush=True)
            results["scenarios"].append(run.scenario(name, shm))
        if pid:
            # Whatever make-room held has lapsed and the data is back: nothing moves.
            before, start = cpu_ticks(pid), time.monotonic()
            time.sleep(args.idle_seconds)
            results["idle_seconds"] = args.idle_seconds
            ticks = cpu_ticks(pid) - before
            results["idle_cpu_percent"] = (100 * ticks / os.sysconf("SC_CLK_TCK")
                                           / (time.monotonic() - start))
        report(results)
    finally:
        run.stop_child()
        unmount(args.mount, pid)
        if shm:
            shutil.rmtree(shm, ignore_errors=True)
        with open(os.path.join(args.out, "gpu_pressure.json"), "w") as f:
            json.dump(results, f, indent=1)
        print("\nAll numbers: %s" % os.path.join(args.out, "gpu_pressure.json"), file=sys.stderr)


if __name__ == "__main__":
    main()
