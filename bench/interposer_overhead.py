#!/usr/bin/env python3
"""What cudafs's allocation interposer costs a program whose allocations
succeed (issue 43), without and with `cudafs run --` (libcudafs_preload.so)
in one run, alternating:

  - cuMemAlloc_v2 + cuMemFree_v2 of --bytes (2 MiB), --count (100k) times,
    from bench/cuda_alloc_probe.c: entry points found by dlsym, and (row
    "proc") through cuGetProcAddress_v2 as the CUDA runtime finds them;
    also allocations and frees timed apart (batches of 1000). ns per call.
  - PyTorch: a 4-layer MLP (--width, fp32), batch 256, AdamW, --steps
    (200) steps after --warmup (20): ms per step, each step synchronised,
    and the steps back to back; the allocations that reached the driver
    meanwhile (none, once PyTorch's cache is warm); seconds from the launch
    to the first step (imports and CUDA context).

No mount is needed: on success the interposer never asks one. Runs that
would not end by --deadline seconds after the start are skipped and say
so. Prints Markdown tables; OUT/interposer_overhead.json, rewritten after
every run.

    bench/interposer_overhead.py --cudafs build/cudafs --out "$OUT"
    bench/interposer_overhead.py --plan-only
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import interposer_pressure as ip  # noqa: E402
import gpu_pressure as gp  # noqa: E402

TRAIN_CHILD = r"""
import json, sys, time
steps, warmup, batch, width = map(int, sys.argv[1:5])
launched = float(sys.argv[5])  # the harness's time.time() when it started us
import torch
start = time.monotonic()
torch.manual_seed(0)
layers = []
for i in range(4):
    layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
model = torch.nn.Sequential(*layers[:-1]).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(batch, width, device="cuda")
y = torch.randn(batch, width, device="cuda")

def step():
    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return loss

for _ in range(warmup):
    step()
torch.cuda.synchronize()
ready, ready_wall = time.monotonic(), time.time()
segments = lambda: torch.cuda.memory_stats().get("segment.all.allocated", 0)
before = segments()
each = []
for _ in range(steps):
    t = time.perf_counter()
    step()
    torch.cuda.synchronize()
    each.append(time.perf_counter() - t)
t = time.perf_counter()
for _ in range(steps):
    loss = step()
torch.cuda.synchronize()
back_to_back = (time.perf_counter() - t) / steps
each.sort()
print(json.dumps({"steps": steps, "warmup": warmup, "batch": batch, "width": width,
                  "setup_seconds": ready - start, "launch_to_ready_seconds": ready_wall - launched,
                  "median_ms": 1e3 * each[len(each) // 2],
                  "mean_ms": 1e3 * sum(each) / len(each),
                  "p90_ms": 1e3 * each[int(len(each) * 0.9)],
                  "min_ms": 1e3 * each[0], "back_to_back_ms": 1e3 * back_to_back,
                  "driver_allocations": segments() - before, "loss": float(loss),
                  "device": torch.cuda.get_device_name()}), flush=True)
"""


def runs(args):
    """(kind, variant, repeat) in the order they run: one of each first, so
    that a deadline leaves both variants of each. With --abba, every other
    repeat runs the interposer first, so that a drift over the runs falls
    on both variants alike."""
    order = []
    for repeat in range(args.repeats):
        variants = list(ip.VARIANTS)
        if args.abba and repeat % 2 == 1:
            variants.reverse()
        for kind in args.kinds.split(","):
            for variant in variants:
                order.append((kind, variant, repeat))
    return order


def command(args, kind, variant):
    env = ip.plain_env()
    if kind == "torch":
        argv = [sys.executable, "-c", TRAIN_CHILD, str(args.steps), str(args.warmup),
                str(args.batch), str(args.width), "LAUNCH"]
    else:
        argv = [args.probe, "micro", str(args.bytes), str(args.count), str(args.rounds), kind]
    if variant == "interposer":
        argv = [args.cudafs, "run", "--"] + argv
    return argv, env


def shown(argv):
    return " ".join("<interposer_overhead.TRAIN_CHILD>" if a == TRAIN_CHILD else shlex.quote(a)
                    for a in argv)


def one(args, kind, variant, repeat, timeout):
    argv, env = command(args, kind, variant)
    r = {"kind": kind, "variant": variant, "repeat": repeat, "command": shown(argv)}
    log = os.path.join(args.out, "overhead-%s-%s-%d.log" % (kind, variant, repeat))
    start = time.monotonic()
    argv = ["%.6f" % time.time() if a == "LAUNCH" else a for a in argv]
    try:
        with open(log, "wb") as err:
            p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=err,
                               timeout=timeout)
        r["exit_status"] = p.returncode
        for line in p.stdout.decode(errors="replace").splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                r["result"] = value
        if "result" not in r:
            with open(log, errors="replace") as f:
                lines = [line for line in f.read().splitlines() if line.strip()]
            r["error"] = "no result (exit status %s): %s" % (p.returncode, (lines or [""])[-1])
            r["log_tail"] = lines[-20:]
    except subprocess.TimeoutExpired:
        r["error"] = "timed out after %.0f s" % timeout
    r["seconds"] = time.monotonic() - start
    return r


def report(results):
    print("Command: `%s`\n" % results["command_line"])
    done = [r for r in results["runs"] if "result" in r]
    print("cuMemAlloc_v2 + cuMemFree_v2 of %s bytes on %s, %d pairs after 1000 of warm-up "
          "(%d rounds), then %d allocations in batches of 1000 and their frees; ns per call; "
          "interposer: `cudafs run --` (libcudafs_preload.so)\n" % (
              results["bytes"], results.get("gpu", "the GPU"), results["count"],
              results["rounds"], results["count"] // 10))
    print("| entry point found by | interposer | run | alloc+free ns | rounds' ns | alloc ns "
          "| free ns | cuMemAlloc from |\n|---|---|---:|---:|---|---:|---:|---|")
    for r in results["runs"]:
        if r["kind"] == "torch":
            continue
        x = r.get("result", {})
        print("| %s | %s | %d | %s | %s | %s | %s | %s |" % (
            "dlsym" if r["kind"] == "dlsym" else "cuGetProcAddress_v2",
            "with" if r["variant"] == "interposer" else "without", r["repeat"] + 1,
            gp.cell(x.get("pair_ns"), "%.0f"),
            " ".join("%.0f" % v for v in x.get("round_pair_ns", [])) or "–",
            gp.cell(x.get("alloc_ns"), "%.0f"), gp.cell(x.get("free_ns"), "%.0f"),
            x.get("entry_from") or ip.one_line(r.get("error") or r.get("skipped", "–"))))
    for kind in ("dlsym", "proc"):
        plain = [r["result"]["pair_ns"] for r in done if r["kind"] == kind
                 and r["variant"] == "plain"]
        inter = [r["result"]["pair_ns"] for r in done if r["kind"] == kind
                 and r["variant"] == "interposer"]
        if plain and inter:
            a, b = statistics.median(plain), statistics.median(inter)
            print("\n%s: with the interposer %+.0f ns per pair (%+.2f%%), medians of %d and %d "
                  "runs" % (kind, b - a, 100 * (b - a) / a, len(plain), len(inter)), end="")
    print("\n\nCommand: `%s`\n" % results["command_line"])
    print("PyTorch: 4-layer MLP, width %d, batch %d, fp32, AdamW; %d steps after %d of "
          "warm-up\n" % (results["width"], results["batch"], results["steps"],
                         results["warmup"]))
    print("| interposer | run | median ms/step | mean | p90 | back to back ms/step "
          "| allocations reaching the driver | s from launch to warm |"
          "\n|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in results["runs"]:
        if r["kind"] != "torch":
            continue
        x = r.get("result", {})
        print("| %s | %d | %s | %s | %s | %s | %s | %s |" % (
            "with" if r["variant"] == "interposer" else "without", r["repeat"] + 1,
            gp.cell(x.get("median_ms"), "%.3f"), gp.cell(x.get("mean_ms"), "%.3f"),
            gp.cell(x.get("p90_ms"), "%.3f"), gp.cell(x.get("back_to_back_ms"), "%.3f"),
            x.get("driver_allocations", ip.one_line(r.get("error") or r.get("skipped", "–"))),
            gp.cell(x.get("launch_to_ready_seconds"), "%.2f")))
    print("\nEach step synchronised, then the same steps back to back (one synchronisation). "
          "s from launch to warm: from starting the process to the end of the warm-up "
          "(imports, CUDA context, model, warm-up steps).")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cudafs")
    parser.add_argument("--probe", help="cuda_alloc_probe (default: beside --cudafs)")
    parser.add_argument("--out", default=os.environ.get("OUT"))
    parser.add_argument("--bytes", type=gp.parse_size, default=2 * gp.MIB)
    parser.add_argument("--count", type=int, default=100000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=2,
                        help="runs of each kind and variant, alternating")
    parser.add_argument("--deadline", type=float, default=300,
                        help="seconds after the start by which the last run must end")
    parser.add_argument("--kinds", default="dlsym,torch,proc",
                        help="what to time: dlsym, proc (the C probe's pairs), torch (the MLP)")
    parser.add_argument("--abba", action="store_true",
                        help="every other repeat runs the interposer first")
    parser.add_argument("--plan-only", action="store_true")
    args = parser.parse_args()
    if not set(args.kinds.split(",")) <= {"dlsym", "torch", "proc"}:
        parser.error("--kinds takes dlsym, torch and proc")
    began = time.monotonic()
    if args.cudafs:
        args.cudafs = os.path.abspath(args.cudafs)
        args.probe = os.path.abspath(args.probe or os.path.join(os.path.dirname(args.cudafs),
                                                                "cuda_alloc_probe"))
    elif args.plan_only:
        args.cudafs, args.probe = "CUDAFS", args.probe or "cuda_alloc_probe"
    else:
        parser.error("--cudafs is needed")
    if args.plan_only:
        for kind, variant, repeat in runs(args):
            print("%-5s %-10s %d  %s" % (kind, variant, repeat + 1,
                                         shown(command(args, kind, variant)[0])))
        return
    for path in (args.cudafs, args.probe):
        if not os.access(path, os.X_OK):
            sys.exit("%s is not an executable" % path)
    args.out = args.out or tempfile.mkdtemp(prefix="interposer-overhead-")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "interposer_overhead.json")
    results = {"command": sys.argv, "command_line": ip.command_line(),
               "bytes": args.bytes, "count": args.count, "rounds": args.rounds,
               "steps": args.steps, "warmup": args.warmup, "batch": args.batch,
               "width": args.width, "runs": []}
    try:
        p = subprocess.run([args.probe, "info"], capture_output=True, text=True, timeout=60)
        results["gpu"] = json.loads(p.stdout.strip().splitlines()[-1])["name"]
    except (OSError, ValueError, IndexError, KeyError, subprocess.TimeoutExpired):
        pass

    def save():
        with open(path + ".tmp", "w") as f:
            json.dump(results, f, indent=1)
        os.replace(path + ".tmp", path)

    try:
        for kind, variant, repeat in runs(args):
            left = args.deadline - (time.monotonic() - began)
            done = [r["seconds"] for r in results["runs"] if r["kind"] == kind and "seconds" in r]
            need = max(done) if done else 20
            if left < need:
                results["runs"].append({"kind": kind, "variant": variant, "repeat": repeat,
                                        "skipped": "%.0f s left, a run takes %.0f" % (left, need)})
                continue
            print("[%3.0f s] %s %s %d ..." % (time.monotonic() - began, kind, variant, repeat + 1),
                  file=sys.stderr, flush=True)
            results["runs"].append(one(args, kind, variant, repeat, left))
            save()
    finally:
        results["seconds"] = time.monotonic() - began
        save()
        report(results)
        print("\nAll numbers: %s" % path, file=sys.stderr)


if __name__ == "__main__":
    main()
