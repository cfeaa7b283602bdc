#!/usr/bin/env python3
"""Memory held after deletes of small files, and under a ccache-like churn.

Section "deletes": on a fresh mount, creates FILES files of SIZE bytes,
deletes three quarters of them in random order, and reads what the
filesystem holds 1, 3 and 10 s later: df's used bytes, the memory held
(cudafs: device_bytes of `cudafs --stats --all`, the arena's committed
granules; tmpfs: df's used bytes, the pages it holds, with the growth of
Shmem in /proc/meminfo in the JSON lines, which other programs move too)
and the daemon's RSS. Section "churn": on a fresh mount, keeps a
working set of CHURN_FILES files of 1-64 KiB and for CHURN_SECONDS replaces
them as a compiler cache does (a new entry written to a temporary name and
renamed in, an old one evicted, a hit read), sampling used, held and RSS
every second; prints the samples' range after the first 10 s, the
operations per second and the daemon's CPU seconds.

Targets, each a fresh mount on a temporary directory, run one after
another in every round: `host`, `null` and `cuda` (BINARY with that
backend), `tmpfs`, and `before` or `before-cuda` (--before BINARY, an
older build to compare with, with backend=host or cuda). Run as root.
Example:
  bench/memory_after_deletes.py build/cudafs --before /tmp/old/cudafs --rounds 3
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary", help="the cudafs binary")
    parser.add_argument("--before", help="an older cudafs binary: the target 'before'")
    parser.add_argument("--targets", default="host,null,tmpfs,before")
    parser.add_argument("--sections", default="deletes,churn")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each section")
    parser.add_argument("--files", type=int, default=20000)
    parser.add_argument("--size", type=int, default=6000, help="bytes of each file (deletes)")
    parser.add_argument("--churn-files", type=int, default=5000, help="the working set")
    parser.add_argument("--churn-seconds", type=int, default=120)
    parser.add_argument("--mount-size", default="1g")
    return parser.parse_args()


class Target:
    """A fresh filesystem of one kind on a temporary directory."""

    def __init__(self, kind, arguments):
        self.kind = kind
        self.dir = tempfile.mkdtemp(prefix="cudafs-memory-")
        self.daemon = None
        if kind == "tmpfs":
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + arguments.mount_size,
                            "tmpfs", self.dir], check=True)
        else:
            # "before" and "before-BACKEND": the older build, on host memory
            # unless a backend is named.
            before = kind.startswith("before")
            self.binary = arguments.before if before else arguments.binary
            backend = (kind.partition("-")[2] if before else kind) or "host"
            options = "backend=%s,size=%s" % (backend, arguments.mount_size)
            self.daemon = subprocess.Popen([self.binary, self.dir, "-f", "-o", options],
                                           stderr=subprocess.DEVNULL)
            deadline = time.time() + 30
            while not os.path.ismount(self.dir):
                if self.daemon.poll() is not None or time.time() > deadline:
                    sys.exit("%s did not mount" % kind)
                time.sleep(0.1)
        self.shmem_base = shmem()

    def close(self):
        subprocess.run(["umount", self.dir], check=True)
        if self.daemon:
            self.daemon.wait()
        os.rmdir(self.dir)

    def sample(self):
        """used, held (bytes), daemon RSS (bytes, or None) and CPU seconds."""
        st = os.statvfs(self.dir)
        used = (st.f_blocks - st.f_bfree) * st.f_frsize
        if self.daemon is None:
            # tmpfs frees a page as the file goes: it holds what df counts.
            # Shmem moves with every other program's shared memory too.
            return {"used": used, "held": used, "shmem_growth": shmem() - self.shmem_base,
                    "rss": None, "cpu": None}
        stats = subprocess.run([self.binary, "--stats", "--all", self.dir], capture_output=True,
                               text=True, check=True).stdout
        held = int(re.search(r"^device_bytes (\d+)$", stats, re.M).group(1))
        with open("/proc/%d/status" % self.daemon.pid) as status:
            rss = next(int(l.split()[1]) * 1024 for l in status if l.startswith("VmRSS:"))
        with open("/proc/%d/stat" % self.daemon.pid) as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return {"used": used, "held": held, "rss": rss, "cpu": cpu}


def shmem():
    with open("/proc/meminfo") as meminfo:
        return next(int(l.split()[1]) * 1024 for l in meminfo if l.startswith("Shmem:"))


def write_file(path, payload):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, payload)
    finally:
        os.close(fd)


def deletes(target, arguments, seed):
    rng = random.Random(seed)
    payload = os.urandom(arguments.size)
    names = [os.path.join(target.dir, "f%06d" % i) for i in range(arguments.files)]
    for name in names:
        write_file(name, payload)
    time.sleep(3)
    result = {"created": target.sample()}
    rng.shuffle(names)
    start = time.time()
    for name in names[:arguments.files * 3 // 4]:
        os.unlink(name)
    result["delete_seconds"] = time.time() - start
    for after in (1, 3, 10):
        time.sleep(max(0, start + result["delete_seconds"] + after - time.time()))
        result["after_%ds" % after] = target.sample()
    return result


def churn(target, arguments, seed):
    rng = random.Random(seed)
    blob = os.urandom(64 * 1024)
    live = []
    for i in range(arguments.churn_files):
        live.append(os.path.join(target.dir, "e%07d" % i))
        write_file(live[-1], blob[:rng.randint(1, 64 * 1024)])
    serial = arguments.churn_files
    samples = []
    operations = 0
    start = time.time()
    cpu_start = target.sample()["cpu"]
    next_sample = start + 1
    while time.time() < start + arguments.churn_seconds:
        choice = rng.random()
        if choice < 0.4:  # a new entry, written aside and renamed in
            name = os.path.join(target.dir, "e%07d" % serial)
            serial += 1
            write_file(name + ".tmp", blob[:rng.randint(1, 64 * 1024)])
            os.rename(name + ".tmp", name)
            evicted = rng.randrange(len(live))
            os.unlink(live[evicted])
            live[evicted] = name
        elif choice < 0.6:  # an entry overwritten in place
            write_file(rng.choice(live), blob[:rng.randint(1, 64 * 1024)])
        else:  # a hit
            with open(rng.choice(live), "rb") as f:
                f.read()
        operations += 1
        if time.time() >= next_sample:
            samples.append(dict(target.sample(), t=time.time() - start))
            next_sample += 1
    seconds = time.time() - start
    steady = [s for s in samples if s["t"] >= 10]
    over = [s["held"] - s["used"] for s in steady]
    cpu_end = target.sample()["cpu"]
    return {
        "operations_per_second": operations / seconds,
        "used_mib": [min(s["used"] for s in steady) / 2**20, max(s["used"] for s in steady) / 2**20],
        "held_minus_used_mib": [min(over) / 2**20, max(over) / 2**20,
                                sorted(over)[len(over) // 2] / 2**20],
        "rss_mib": None if steady[0]["rss"] is None else
        [min(s["rss"] for s in steady) / 2**20, max(s["rss"] for s in steady) / 2**20],
        "daemon_cpu_seconds": None if cpu_start is None else cpu_end - cpu_start,
        "samples": samples,
    }


def measure(section, kind, arguments, round_number):
    """Runs `section` on a fresh target of `kind`; its result also goes to
    stderr as a JSON line."""
    target = Target(kind, arguments)
    try:
        result = section(target, arguments, seed=round_number)
    finally:
        target.close()
    print("json " + json.dumps({"section": section.__name__, "round": round_number,
                                "target": kind, **result}), file=sys.stderr)
    return result


def mib(value):
    return "-" if value is None else "%.1f" % (value / 2**20)


def main():
    arguments = parse_arguments()
    kinds = [k for k in arguments.targets.split(",")
             if not k.startswith("before") or arguments.before]
    sections = arguments.sections.split(",")
    print("# load at start: %s" % open("/proc/loadavg").read().split()[:3], flush=True)
    if "deletes" in sections:
        print("deletes: %d files of %d bytes, three quarters deleted" %
              (arguments.files, arguments.size))
        print("| round | target | used MiB | held MiB after 1 s | 3 s | 10 s | RSS MiB after 10 s |"
              " created: held MiB | RSS MiB |")
        for round_number in range(arguments.rounds):
            for kind in kinds:
                r = measure(deletes, kind, arguments, round_number)
                print("| %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    round_number, kind, mib(r["after_10s"]["used"]), mib(r["after_1s"]["held"]),
                    mib(r["after_3s"]["held"]), mib(r["after_10s"]["held"]),
                    mib(r["after_10s"]["rss"]), mib(r["created"]["held"]),
                    mib(r["created"]["rss"])), flush=True)
    if "churn" in sections:
        print("churn: %d files of 1-64 KiB for %d s" % (arguments.churn_files,
                                                        arguments.churn_seconds))
        print("| round | target | ops/s | used MiB | held - used MiB (min, max, median) |"
              " RSS MiB | daemon CPU s |")
        for round_number in range(arguments.rounds):
            for kind in kinds:
                r = measure(churn, kind, arguments, round_number)
                rss = "-" if r["rss_mib"] is None else "%.0f-%.0f" % tuple(r["rss_mib"])
                cpu = "-" if r["daemon_cpu_seconds"] is None else "%.1f" % r["daemon_cpu_seconds"]
                print("| %d | %s | %.0f | %.0f-%.0f | %.1f, %.1f, %.1f | %s | %s |" % (
                    round_number, kind, r["operations_per_second"], *r["used_mib"],
                    *r["held_minus_used_mib"], rss, cpu), flush=True)
    print("# load at end: %s" % open("/proc/loadavg").read().split()[:3])


if __name__ == "__main__":
    main()
