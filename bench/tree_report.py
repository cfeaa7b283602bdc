#!/usr/bin/env python3
"""Summarises bench/tree_workload.sh's samples: medians into tree.jsonl, tables into tree.md.

  tree_report.py RESULTS SAMPLES [--markdown FILE]

RESULTS (tree.jsonl) holds the run record and one record per target; one
"step" record per target x step is added to it (replacing any from before): the median seconds over
the repetitions, every sample's seconds, files, and on cudafs targets the
median requests by opcode, total and per file. The markdown has the seconds
(steps as rows, targets as columns), the ratios of each cudafs target to
tmpfs and to the null backend, and the requests per file of each cudafs
target.
"""
import argparse
import json
import statistics

# fs/fuse/request_counters.h's order.
OPCODES = ("init lookup forget batch_forget getattr setattr readlink mknod mkdir symlink link "
           "unlink rmdir rename open create read write fsync release opendir readdir "
           "readdirplus releasedir statfs setxattr getxattr listxattr removexattr fallocate "
           "copy_file_range lseek").split()

DESCRIPTIONS = {
    "untar": "`tar -xf` of the tree (an uncompressed tarball on local disk) into the mount",
    "stat": "`find -type f -exec stat {} +` over the tree, right after untar",
    "stat_cold": "the same after `echo 3 > /proc/sys/vm/drop_caches`",
    "grep_cold": "`grep -r -l -F` for a string no file has (reads every byte), after drop_caches",
    "grep_warm": "the same again at once",
    "tar_c": "`tar -cf - tree | cat > /dev/null` (reads every file; not -f /dev/null, "
             "which GNU tar does not read for)",
    "cp_a": "`cp -a` of the tree to a sibling directory in the mount",
    "rm_rf": "`rm -rf` of both trees (files: both trees)",
    "git_clone": "`git clone --no-local` from a repository on local disk (pack copied, "
                 "index-pack and checkout on the mount)",
    "git_status": "`git status --porcelain` right after the clone",
    "git_status_cold": "the same after drop_caches",
    "git_checkout": "`git checkout` of the parent commit (a few hundred files differ)",
    "git_checkout_back": "`git checkout main` again",
    "small_create": "bench/smallfiles.py: open(O_CREAT|O_EXCL) + 4 KiB write + close per file",
    "small_stat": "stat of every file",
    "small_stat2": "stat of every file again at once (free with long attribute caching)",
    "small_unlink": "unlink of every file",
    "ccache_configure_cold": "configure the project (CC='ccache cc'), empty cache (one run "
                             "per target: the cache fills once)",
    "ccache_build_cold": "build it, filling the cache on the mount (one run per target)",
    "ccache_configure": "configure again after `rm -rf` of the build tree",
    "ccache_build": "rebuild from the warm cache on the mount",
}


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def fmt_magnitude(value, small):
    """No decimals from 100 up, one from 10 up, `small(value)` below."""
    if value >= 100:
        return "%.0f" % value
    if value >= 10:
        return "%.1f" % value
    return small(value)


def fmt_seconds(value):
    if value is None:
        return "fail"
    return fmt_magnitude(value, lambda v: "%.2f" % v if v >= 0.1 else "%.3f" % v)


def fmt_number(value):
    if value == 0:
        return ""
    return fmt_magnitude(value, lambda v: "%.3g" % v)


def summarise(samples):
    """{(target, step): step record} and the steps in their first order."""
    groups, order = {}, []
    for sample in samples:
        key = (sample["target"], sample["step"])
        if sample["step"] not in order:
            order.append(sample["step"])
        groups.setdefault(key, []).append(sample)
    steps = {}
    for (target, step), group in groups.items():
        record = {"type": "step", "target": target, "workload": group[0]["workload"],
                  "step": step, "files": group[0]["files"]}
        skipped = [s["skipped"] for s in group if s.get("skipped")]
        good = [s for s in group if s.get("ok")]
        bad = [s for s in group if not s.get("ok") and not s.get("skipped")]
        if skipped:
            record.update(seconds=None, skipped=skipped[0])
        elif bad:
            record.update(seconds=None, error=bad[0].get("error", "failed"),
                          failed_runs=len(bad), runs=len(group))
        else:
            record["seconds"] = statistics.median(s["seconds"] for s in good)
        record["seconds_all"] = [s.get("seconds") for s in group if not s.get("skipped")]
        notes = sorted({s["note"] for s in group if s.get("note")})
        if notes:
            record["note"] = "; ".join(notes)
        # A failed run's requests describe the failure, not the step.
        with_requests = [s["requests"] for s in good if "requests" in s]
        if with_requests:
            names = sorted({n for r in with_requests for n in r})
            median = {n: statistics.median(r.get(n, 0) for r in with_requests) for n in names}
            median = {n: v for n, v in median.items() if v}
            record["requests"] = median
            ops = {n: v for n, v in median.items() if n in OPCODES}
            record["requests_total"] = sum(ops.values())
            if record["files"]:
                record["requests_per_file"] = {n: v / record["files"] for n, v in median.items()}
                record["requests_total_per_file"] = record["requests_total"] / record["files"]
        steps[(target, step)] = record
    return steps, order


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def markdown(run, targets, steps, order):
    names = [t["target"] for t in targets]
    ok = {t["target"] for t in targets if t["status"] == "ok"}
    spec = {t["target"]: t["spec"] for t in targets}
    kind = {t["target"]: t["spec"].split(":", 1)[0] for t in targets}
    cudafs = [n for n in names if kind[n] == "cudafs" and n in ok]

    def options(name):
        return spec[name].split(":", 1)[1].split(",") if ":" in spec[name] else []

    tmpfs = next((n for n in names if kind[n] == "tmpfs" and n in ok), None)
    null = next((n for n in cudafs if "backend=null" in options(n)), None)

    def files_of(step):
        return next((r["files"] for (t, s), r in steps.items() if s == step and r["files"]), 0)

    out = ["# Trees of small files", "",
           "```", run["command"], "```", "",
           "- %s on %s (kernel %s), %d CPUs (%s)%s" % (
               run["date"], run["host"], run["kernel"], run["cpus"], run["cpu_model"],
               ", GPU " + run["gpu"] if run.get("gpu") else ", no GPU"),
           "- cudafs: %s (%s)%s" % (run["cudafs"], run["cudafs_version"],
                                     ", extra options `%s`" % run["cudafs_options"]
                                     if run.get("cudafs_options") else ""),
           "- mounts: size=%s unless the spec says otherwise; every repetition on a fresh "
           "mount" % run["mount_size"]]
    if run.get("tree_files"):
        out.append("- tree: %s: %d files, %.1f MiB%s; git repository from it: %d files" % (
            run["tree_source"], run["tree_files"], run["tree_bytes"] / 2**20,
            " (left out, over %d MiB: %d files, %.1f MiB)" % (
                run["tree_max_file_mib"], run["tree_left_out_files"],
                run["tree_left_out_bytes"] / 2**20) if run.get("tree_left_out_files") else "",
            run.get("git_files", 0)))
    if "small" in run["workloads"].split():
        out.append("- small files: %d files of %d bytes" % (run["small_files"],
                                                          run["small_file_bytes"]))
    if "ccache" in run["workloads"].split():
        out.append("- ccache: " + ("skipped: " + run["ccache_skipped"] if run["ccache_skipped"]
                                   else "%s (%d files), %s" % (run["ccache_project"],
                                                               run["ccache_files"],
                                                               run["ccache_version"])))
    for t in targets:
        if t["status"] != "ok":
            out.append("- %s (`%s`): n/a, mount failed: %s" % (t["target"], t["spec"],
                                                               t.get("error", "")))
    out += ["", "## Seconds (median of %d runs; lower is better)" % run["repeat"], ""]

    def cell(target, step):
        if target not in ok:
            return "n/a"
        record = steps.get((target, step))
        if record is None:
            return "–"
        if record.get("skipped"):
            return "skipped"
        text = fmt_seconds(record["seconds"])
        if record.get("note"):
            text += " (warm!)"
        return text

    rows = [[s, str(files_of(s))] + [cell(n, s) for n in names] for s in order]
    out += table(["step", "files"] + ["%s" % n for n in names], rows)

    pairs = []
    for name in cudafs:
        if name != null and tmpfs:
            pairs.append((name, tmpfs))
        if name != null and null:
            pairs.append((name, null))
    if null and tmpfs:
        pairs.append((null, tmpfs))
    if pairs:
        out += ["", "## Ratios of the median seconds (cudafs / tmpfs, cudafs / null backend)", ""]

        def ratio(a, b, step):
            ra, rb = steps.get((a, step)), steps.get((b, step))
            if not ra or not rb or not ra.get("seconds") or not rb.get("seconds"):
                return "–"
            return "%.2f" % (ra["seconds"] / rb["seconds"])

        rows = [[s] + [ratio(a, b, s) for a, b in pairs] for s in order]
        out += table(["step"] + ["%s / %s" % pair for pair in pairs], rows)

    for name in cudafs:
        records = [(s, steps.get((name, s))) for s in order]
        records = [(s, r) for s, r in records if r and "requests_per_file" in r]
        if not records:
            continue
        used = [op for op in OPCODES if any(r["requests_per_file"].get(op) for _, r in records)]
        out += ["", "## Requests per file: %s (`%s`)" % (name, spec[name]), ""]
        rows = []
        for s, r in records:
            per = r["requests_per_file"]
            rows.append([s, str(r["files"])] + [fmt_number(per.get(op, 0)) for op in used] +
                        [fmt_number(r["requests_total_per_file"]),
                         fmt_number(per.get("forgotten_inodes", 0))])
        out += table(["step", "files"] + used + ["total", "inodes forgotten"], rows)
    failures = [(t, s, steps[(t, s)]) for t in names for s in order
                if (t, s) in steps and steps[(t, s)].get("error")]
    if failures:
        out += ["", "## Failures", ""]
        out += ["- %s, %s (%d of %d runs): %s" % (t, s, r["failed_runs"], r["runs"], r["error"])
                for t, s, r in failures]
        if null and any(t == null for t, _, _ in failures):
            out.append("- %s stores nothing (reads return zeros): what reads its data back "
                       "(git) fails there by design." % null)
    out += ["", "Requests are those that reach cudafs's handlers (`user.cudafs.stats`, "
            "median over the runs, divided by the files of the step); libfuse answers some "
            "itself (FLUSH, INTERRUPT), which are not among them. Empty: none.", "",
            "## Steps", ""]
    out += ["- `%s`: %s" % (s, DESCRIPTIONS.get(s, "")) for s in order]
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results")
    parser.add_argument("samples")
    parser.add_argument("--markdown")
    arguments = parser.parse_args()
    records = load(arguments.results)
    run = next(r for r in records if r["type"] == "run")
    targets = [r for r in records if r["type"] == "target"]
    steps, order = summarise(load(arguments.samples))
    # Rewritten whole, so that running this again replaces the step records.
    with open(arguments.results, "w") as results:
        for record in records:
            if record["type"] != "step":
                results.write(json.dumps(record) + "\n")
        for target in [t["target"] for t in targets]:
            for step in order:
                if (target, step) in steps:
                    results.write(json.dumps(steps[(target, step)]) + "\n")
    if arguments.markdown:
        with open(arguments.markdown, "w") as f:
            f.write(markdown(run, targets, steps, order))


if __name__ == "__main__":
    main()
