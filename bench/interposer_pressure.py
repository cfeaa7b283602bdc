#!/usr/bin/env python3
"""GPU programs that do not retry, with and without cudafs's allocation
interposer (issue 43): a mount holding --fill of the card in files of mixed
sizes (bench/gpu_pressure.py's, -o size= --size of the card), then a
program taking --take of the card, each scenario twice: as is, and under
`cudafs run -o MOUNT --` (libcudafs_preload.so):

  a  PyTorch, 1 GiB tensors as fast as it can, no retry (the first
     out-of-memory ends it)
  b  PyTorch, one allocation
  c  PyTorch with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, 1 GiB
     tensors (its memory comes from cuMemCreate, in 20 MiB pieces)
  d  JAX with its default preallocation, XLA_PYTHON_CLIENT_MEM_FRACTION=--take
  e  a plain C program (bench/cuda_alloc_probe.c): cuMemAlloc_v2 in 1 GiB
     steps, no retry

Per run: whether the program got all it asked for, how much it got, how
long it took (from its CUDA context to its memory; and from its launch),
the data moved out meanwhile, how long until the data was back on the GPU
after the program exited, and every file's sha256 read back through the
mount against the written one. Each run starts once the data is back on
the GPU, as bench/gpu_pressure.py's scenarios do. Prints Markdown tables;
OUT/interposer_pressure.json is rewritten after every run, so a run that
fails or a call cut short keeps the others' numbers. Runs that would not
finish by --deadline seconds after the start are skipped, and say so.

    bench/interposer_pressure.py --cudafs build/cudafs --probe build/cuda_alloc_probe \\
      --out "$OUT" [--scenarios a,b,c,d,e] [--variants plain,interposer]
    bench/interposer_pressure.py --plan-only --total-bytes 80g   # the runs, no GPU

Needs root (mount, drop_caches); torch and jax only in the programs, so
this process never holds GPU memory.
"""

import argparse
import json
import math
import os
import re
import select
import shlex
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_pressure as gp  # noqa: E402  (the plan, the files, the stats, the verification)

GIB, MIB = gp.GIB, gp.MIB
PRELOAD = "libcudafs_preload.so"

SCENARIOS = {
    "a": {"title": "PyTorch, 1 GiB steps, no retry", "program": "torch", "mode": "chunks"},
    "b": {"title": "PyTorch, one allocation", "program": "torch", "mode": "one"},
    "c": {"title": "PyTorch, expandable_segments, 1 GiB steps", "program": "torch",
          "mode": "chunks", "env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}},
    "d": {"title": "JAX, default preallocation", "program": "jax"},
    "e": {"title": "C, cuMemAlloc_v2 in 1 GiB steps", "program": "c"},
}
VARIANTS = ("plain", "interposer")
# What the caller's environment may carry that would change a program's
# allocations: each run sets only its own.
CLEARED = ("LD_PRELOAD", "CUDAFS_ROOM_MOUNTS", "CUDAFS_MAKE_ROOM", "CUDAFS_PRELOAD_LIBRARY",
           "CUDAFS_ROOM_TIMEOUT", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF",
           "XLA_PYTHON_CLIENT_PREALLOCATE",
           "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR", "TF_GPU_ALLOCATOR")
# A run's seconds, guessed before one of its kind has run (the deadline's
# sums): start, moves out, the data's return (at most 256 MiB / 0.1 s,
# after 5 s of room), the verification.
GUESS = {"plain": 40, "interposer": 75}

# JAX: the allocator takes MEM_FRACTION of the card when the backend starts
# (or at its first array); the pool's size is what it got. Timing starts
# after the import, before the backend starts (its CUDA context included).
JAX_CHILD = r"""
import json, sys, time
want = int(sys.argv[1])
import jax, jax.numpy as jnp
out = {"mode": "jax-preallocate", "want": want, "free_at_start": None, "got": 0,
       "had_all": False, "first_oom": None, "failures": 0}
start = time.monotonic()
try:
    device = jax.devices()[0]
    out["platform"], out["device_kind"] = device.platform, device.device_kind
    out["init_seconds"] = time.monotonic() - start
    jnp.zeros((256,), jnp.float32).block_until_ready()
    stats = device.memory_stats() or {}
    out["memory_stats"] = {k: v for k, v in stats.items() if isinstance(v, int)}
    pool = stats.get("pool_bytes", stats.get("bytes_reserved"))
    out["bytes_limit"] = stats.get("bytes_limit")
    if pool is None:  # the harness reads what nvidia-smi says the process holds
        out["got"] = out["had_all"] = None
    else:
        out["got"] = int(pool)
        out["had_all"] = device.platform == "gpu" and out["got"] >= 0.99 * want
except Exception as error:
    text = str(error)
    out["error"] = (text.splitlines() or [""])[0][:300]
    if "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower():
        out["failures"] = 1
        out["first_oom"] = {"at_bytes": 0, "seconds": time.monotonic() - start,
                            "error": out["error"]}
out["seconds"] = time.monotonic() - start
print(json.dumps(out), flush=True)
sys.stdin.readline()
"""


def command_line():
    """How this script was run, as a shell line."""
    return " ".join(shlex.quote(a) for a in [os.path.basename(sys.executable)] + sys.argv)


def plain_env():
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    # A preload of someone else's stays; ours never does in a plain run.
    others = [p for p in re.split(r"[: ]", os.environ.get("LD_PRELOAD", ""))
              if p and os.path.basename(p) != PRELOAD]
    if others:
        env["LD_PRELOAD"] = ":".join(others)
    return env


def command(args, name, variant, want):
    """The run's argv and environment."""
    s = SCENARIOS[name]
    env = plain_env()
    env.update(s.get("env", {}))
    if s["program"] == "torch":
        argv = [sys.executable, "-c", gp.CHILD, s["mode"], str(want), str(args.patience)]
    elif s["program"] == "jax":
        argv = [sys.executable, "-c", JAX_CHILD, str(want)]
        env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = "%g" % args.take
    else:
        argv = [args.probe, "take", str(want), str(GIB), str(args.patience)]
    if variant == "interposer":
        argv = [args.cudafs, "run", "-o", args.mount, "--"] + argv
    return argv, env


def shown(argv, env=None):
    """ARGV as a shell line, the children's scripts named, not quoted."""
    names = {gp.CHILD: "<gpu_pressure.CHILD>", JAX_CHILD: "<interposer_pressure.JAX_CHILD>"}
    words = [names.get(a) or shlex.quote(a) for a in argv]
    prefix = ["%s=%s" % (k, shlex.quote(v)) for k, v in sorted((env or {}).items())]
    return " ".join(prefix + words)


def gpu_used(pid):
    """Bytes nvidia-smi says process PID holds on the GPUs (None: it cannot say)."""
    try:
        p = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                            "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    used = [int(f[1]) * MIB for f in (line.split(",") for line in p.stdout.splitlines())
            if len(f) == 2 and f[0].strip() == str(pid) and f[1].strip().isdigit()]
    return sum(used) if used else None


def preloaded(pid):
    """Whether process PID has libcudafs_preload.so mapped (None: cannot tell)."""
    try:
        with open("/proc/%d/maps" % pid) as f:
            return any(line.rstrip().endswith("/" + PRELOAD) for line in f)
    except OSError:
        return None


class PressureRun(gp.Run):
    def run_program(self, argv, env, log_path, timeout, samples, t0):
        """Starts ARGV; its report (the first JSON object it prints) once it
        has its memory or gave up, sampling the mount's stats meanwhile;
        None if it died or took longer than TIMEOUT. Leaves it holding its
        memory (stop_child lets it go)."""
        with open(log_path, "wb") as log:
            launched = time.monotonic()
            self.child = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=log)
        data, fd, report = b"", self.child.stdout.fileno(), None
        while report is None and time.monotonic() - launched < timeout:
            if select.select([fd], [], [], 0.2)[0]:
                piece = os.read(fd, 65536)
                if not piece:
                    break
                data += piece
                *lines, data = data.split(b"\n")
                for line in lines:
                    try:
                        value = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(value, dict) and "want" in value:
                        report = value
                        break
            if report is None:
                self.sample(samples, t0)
        if report is not None:
            report["launch_seconds"] = time.monotonic() - launched
            report["preloaded"] = preloaded(self.child.pid)
            # Its CUDA context included: a check on what the program says it got.
            report["nvidia_smi_used"] = gpu_used(self.child.pid)
            if report.get("got", 0) is None and report["nvidia_smi_used"] is not None:
                report["got"], report["got_from"] = report["nvidia_smi_used"], "nvidia-smi"
                report["had_all"] = report["got"] >= 0.99 * report["want"]
        elif self.child.poll() is not None:
            self.last_exit = self.child.returncode
        return report

    def stop_child(self, kill=False):
        """Lets the program go (a line on its stdin), or kills it."""
        if self.child:
            try:
                if kill:
                    self.child.kill()
                self.child.communicate(b"\n", timeout=5 if kill else 60)
            except (subprocess.TimeoutExpired, BrokenPipeError, ValueError):
                self.child.kill()
                self.child.wait(30)
            self.last_exit = self.child.returncode
            self.child = None

    def one(self, name, variant, left, r):
        """Scenario NAME as VARIANT (plain, interposer), in at most about
        LEFT seconds, into its record R (what it had when it failed stays)."""
        args, want = self.args, int(self.args.take * self.total)
        argv, env = command(args, name, variant, want)
        r.update(want=want, command=shown(argv, {k: v for k, v in env.items() if k in CLEARED}))
        samples, t0, self.last_exit = [], time.monotonic(), None
        self.sample(samples, t0)
        r["start"] = samples[0]
        # The interposer waits at most 30 s + 1 s per GiB for the room.
        timeout = min(left, 120 + (30 + want / GIB if variant == "interposer" else 0))
        log = os.path.join(args.out, "program-%s-%s.log" % (name, variant))
        p = self.run_program(argv, env, log, timeout, samples, t0)
        if p is None:
            self.stop_child(kill=True)
            p = {"error": "no report in %.0f s (exit status %s; see %s)" % (
                time.monotonic() - t0, self.last_exit, os.path.basename(log))}
            try:
                with open(log, errors="replace") as f:
                    p["log_tail"] = f.read()[-2000:]
            except OSError:
                pass
        r["program"] = p
        # The watcher may still be moving data once the program has its memory.
        still = time.monotonic()
        while time.monotonic() - still < 2 and time.monotonic() - t0 < timeout + 60:
            time.sleep(0.5)
            self.sample(samples, t0)
            if samples[-1]["moved_out"] != samples[-2]["moved_out"]:
                still = time.monotonic()
        r["held"], r["held_stats"] = samples[-1], self.last_stats
        good = [s for s in samples if s["ok"]]
        if good:
            r["moved_out"] = good[-1]["moved_out"] - good[0]["moved_out"]
        r["files_where"] = gp.where([self.at(f) for f in self.files])
        self.stop_child()
        r["exit_status"] = self.last_exit
        t1 = time.monotonic()
        back = self.wait_back(r, t1, max(10, min(gp.BACK_TIMEOUT, left - (t1 - t0) - 15)))
        r["back"], r["back_stats"] = back[-1], self.last_stats
        r["moved_back"] = back[-1]["moved_back"] - samples[0]["moved_back"]
        r["verify"] = self.verify()
        r["samples"] = samples + [dict(s, t=s["t"] + t1 - t0) for s in back]
        r["seconds"] = time.monotonic() - t0


def cell(value, form="%.1f", scale=1):
    return gp.cell(value, form, scale)


def one_line(text, width=100):
    """TEXT on one line, fit for a table cell."""
    text = " ".join(str(text).split()).replace("|", "/")
    return text if len(text) <= width else text[:width - 1] + "…"


def outcome(r):
    if "skipped" in r:
        return "skipped (%s)" % r["skipped"]
    p = r.get("program")
    if p is None:
        said = "no report"
    elif p.get("had_all"):
        said = "yes"
    elif p.get("platform") not in (None, "gpu"):
        said = "no: JAX ran on %s" % p["platform"]
    elif "got" not in p:
        said = "no: %s" % one_line(p.get("error", "no report"), 80)
    else:
        said = "no" + (": %s" % one_line(p["error"], 60) if p.get("error") else "")
    if "error" in r:
        said += "; harness error: %s" % one_line(r["error"], 80)
    return said


def report(results):
    print("Command: `%s`\n" % results["command_line"])
    print("cudafs and GPU programs that do not retry, on %s (%.1f GiB): a mount of -o %s "
          "holding %.1f GiB in %d files (written in %s s); each program takes %.1f GiB "
          "(--take %g); interposer: `cudafs run -o MOUNT -- PROGRAM` (%s)\n" % (
              results["gpu"], results["total_bytes"] / GIB, results["mount_options"],
              results["fill_bytes"] / GIB, results["files"],
              cell(results.get("write_seconds")), results["take_bytes"] / GIB,
              results["take"], PRELOAD))
    print("| scenario | interposer | got all | got GiB | nvidia-smi GiB | free at start GiB "
          "| first OOM at GiB (s) | s to memory | s from launch | moved out GiB | back on GPU s "
          "| files changed | verify s |\n|---|---|---|" + "---:|" * 10)
    for r in results["runs"]:
        p, oom = r.get("program", {}), r.get("program", {}).get("first_oom")
        loaded = p.get("preloaded")
        variant = "with" if r["variant"] == "interposer" else "without"
        if loaded is not None and loaded != (r["variant"] == "interposer"):
            variant += " (%s loaded!)" % ("but" if loaded else "not")
        verify = r.get("verify")
        print("| %s: %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["scenario"], r["title"], variant, outcome(r), cell(p.get("got"), "%.2f", GIB),
            cell(p.get("nvidia_smi_used"), "%.2f", GIB),
            cell(p.get("free_at_start"), scale=GIB),
            "%.1f (%.2f)" % (oom["at_bytes"] / GIB, oom["seconds"]) if oom else "–",
            cell(p.get("seconds"), "%.2f"), cell(p.get("launch_seconds"), "%.2f"),
            cell(r.get("moved_out"), scale=GIB),
            (cell(r.get("back_seconds")) if "back_seconds" in r else
             "–" if "back" not in r else "> %.0f" % r["back"]["t"]),
            "%d of %d" % (verify["mismatches"], verify["files"]) if verify else "–",
            cell(verify and verify["seconds"])))
    for variant, said in (("plain", "Without the interposer"), ("interposer", "With it")):
        ran = [r for r in results["runs"] if r["variant"] == variant and "program" in r]
        print("\n%s: %d of %d runs got all they asked for; %d of them changed files." % (
            said, sum(1 for r in ran if r["program"].get("had_all")), len(ran),
            sum(1 for r in ran if r.get("verify", {}).get("mismatches"))), end="")
    late = ["%s %s (%.1f GiB)" % (r["scenario"], r["variant"], r["start"]["host_data"] / GIB)
            for r in results["runs"] if r.get("start", {}).get("host_data", 0) > gp.BACK_SLACK]
    if late:
        print("\n\nStarted with data still in host memory (its return timed out): %s"
              % ", ".join(late), end="")
    print("\n\ngot all: the program had every byte it asked for (JAX: its pool, within 1%). "
          "nvidia-smi GiB: what nvidia-smi said the process held once it had its memory "
          "(its CUDA context included). s to memory: from the program's CUDA context "
          "(JAX: from the start of its backend) "
          "to its memory, or to its giving up. s from launch: from starting the process, "
          "Python's imports included. files changed: sha256 of every file read back through "
          "the mount after the program exited and the data came back, against the written "
          "one.")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cudafs")
    parser.add_argument("--probe", help="cuda_alloc_probe (default: beside --cudafs)")
    parser.add_argument("--mount", default="/mnt/cudafs-interposer")
    parser.add_argument("--fill", type=float, default=0.6)
    parser.add_argument("--take", type=float, default=0.9)
    parser.add_argument("--size", type=float, default=0.7,
                        help="the mount's size=, a fraction of the card")
    parser.add_argument("--out", default=os.environ.get("OUT"))
    parser.add_argument("--scenarios", default="a,b,c,d,e")
    parser.add_argument("--variants", default="plain,interposer")
    parser.add_argument("--patience", type=float, default=0,
                        help="seconds a program keeps retrying after OOM (0: the first ends it)")
    parser.add_argument("--deadline", type=float, default=470,
                        help="seconds after the start by which the last run must end")
    parser.add_argument("--workers", type=int, default=min(12, os.cpu_count() or 8),
                        help="processes writing and hashing the files")
    parser.add_argument("--total-bytes", type=gp.parse_size, help="the card's memory (no probe)")
    parser.add_argument("--plan-only", action="store_true")
    args = parser.parse_args()
    began = time.monotonic()
    scenarios, variants = args.scenarios.split(","), args.variants.split(",")
    if not set(scenarios) <= set(SCENARIOS) or not set(variants) <= set(VARIANTS):
        parser.error("--scenarios takes a,b,c,d,e; --variants plain,interposer")
    if not 0 < args.fill < args.size or not 0 < args.take <= 1:
        parser.error("--fill, --size and --take are fractions, --fill below --size")
    if args.plan_only and not args.total_bytes:
        parser.error("--plan-only needs --total-bytes")
    if args.cudafs:
        args.cudafs = os.path.abspath(args.cudafs)
        args.probe = os.path.abspath(args.probe or os.path.join(os.path.dirname(args.cudafs),
                                                                "cuda_alloc_probe"))
    elif not args.plan_only:
        parser.error("--cudafs is needed")
    else:
        args.cudafs, args.probe = "CUDAFS", args.probe or "cuda_alloc_probe"
    gpu_name = "a card of --total-bytes"
    if not args.total_bytes:
        try:
            p = subprocess.run([args.probe, "info"], capture_output=True, text=True, timeout=60)
            probe = json.loads(p.stdout.strip().splitlines()[-1])
        except (OSError, ValueError, IndexError, subprocess.TimeoutExpired) as error:
            sys.exit("reading the GPU's memory with %s failed: %s" % (args.probe, error))
        args.total_bytes, gpu_name = probe["total"], probe["name"]
    total = args.total_bytes
    fill = int(total * args.fill)
    files = gp.plan(fill)
    options = "size=%dm" % math.ceil(total * args.size / MIB)
    runs = [(n, v) for n in scenarios for v in variants]
    if args.plan_only:
        print("%d files, %.2f GiB of %.2f GiB; -o %s; each program takes %.2f GiB\n" % (
            len(files), fill / GIB, total / GIB, options, args.take * total / GIB))
        for n, v in runs:
            argv, env = command(args, n, v, int(args.take * total))
            set_here = {k: v for k, v in env.items() if k in CLEARED}
            print("%s %-10s %s" % (n, v, shown(argv, set_here)))
        return
    if os.geteuid() != 0:
        sys.exit("needs root (mount, drop_caches)")
    for path in (args.cudafs, args.probe):
        if not os.access(path, os.X_OK):
            sys.exit("%s is not an executable" % path)
    args.out = args.out or tempfile.mkdtemp(prefix="interposer-pressure-")
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.mount, exist_ok=True)
    if os.path.ismount(args.mount):
        # This script's own mountpoint: left by a run that was killed.
        print("%s is mounted (an earlier run's?): unmounting it" % args.mount, file=sys.stderr)
        gp.unmount(args.mount, gp.daemon_pid(args.cudafs, args.mount))
        if os.path.ismount(args.mount):
            sys.exit("%s is still a mountpoint" % args.mount)
    for sig in (gp.signal.SIGTERM, gp.signal.SIGHUP):
        gp.signal.signal(sig, lambda sig, frame: sys.exit("stopped by signal %d" % sig))
    path = os.path.join(args.out, "interposer_pressure.json")
    results = {"command": sys.argv, "command_line": command_line(),
               "gpu": gpu_name, "total_bytes": total, "fill_bytes": fill, "take": args.take,
               "take_bytes": int(args.take * total), "files": len(files),
               "mount_options": options, "deadline": args.deadline, "runs": []}

    def save():
        with open(path + ".tmp", "w") as f:
            json.dump(results, f, indent=1)
        os.replace(path + ".tmp", path)

    run, pid = PressureRun(args, total, files), None
    run.workers = args.workers
    try:
        pid = results["daemon_pid"] = gp.mount(args.cudafs, args.mount, options)
        run.hashes, results["write_seconds"] = gp.fill_files(args.mount, files, args.workers)
        save()
        # The files' data settles on the GPU before the first run.
        run.wait_back({}, time.monotonic(), 60)
        for name, variant in runs:
            left = args.deadline - (time.monotonic() - began)
            done = [r["seconds"] for r in results["runs"] if r.get("variant") == variant
                    and "seconds" in r]
            need = max(done) if done else GUESS[variant]
            if left < need:
                results["runs"].append({"scenario": name, "variant": variant,
                                        "title": SCENARIOS[name]["title"],
                                        "skipped": "%.0f s left, a run takes %.0f" % (left, need)})
                save()
                continue
            print("[%3.0f s] %s: %s, %s ..." % (time.monotonic() - began, name,
                                                 SCENARIOS[name]["title"], variant),
                  file=sys.stderr, flush=True)
            r = {"scenario": name, "variant": variant, "title": SCENARIOS[name]["title"]}
            results["runs"].append(r)
            started = time.monotonic()
            try:
                run.one(name, variant, left, r)
            except Exception as error:  # one run's failure keeps the others' numbers
                run.stop_child(kill=True)
                r.update(error="%s: %s" % (type(error).__name__, error),
                         traceback=traceback.format_exc()[-3000:],
                         seconds=time.monotonic() - started)
            save()
    finally:
        run.stop_child()
        gp.unmount(args.mount, pid)
        results["seconds"] = time.monotonic() - began
        save()
        if results["runs"]:
            report(results)
        print("\nAll numbers: %s" % path, file=sys.stderr)


if __name__ == "__main__":
    main()
