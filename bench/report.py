#!/usr/bin/env python3
"""Turns the JSON lines of bench/run_benchmarks.sh into a markdown report and a bar chart.

Standard library only, plus matplotlib for the chart; without matplotlib the
markdown is written all the same and says the chart was skipped.
"""
import argparse
import json
import math
import os
import sys

# Workload ids in table order, with a label template filled from the run's
# parameters and the unit their values are in.
WORKLOADS = [
    ("seq_write", "sequential write {seq}, dd bs={dd} + fdatasync", "GB/s"),
    ("seq_read_cold", "sequential read {seq}, cold, dd bs={dd}", "GB/s"),
    ("par_write", "{par_jobs} writers × {par}, dd bs={dd} + fdatasync, aggregate", "GB/s"),
    ("par_read_cold", "{par_jobs} readers × {par}, cold, aggregate", "GB/s"),
    ("wide_write", "{wide_jobs} writers × {wide}, dd bs={dd} + fdatasync, aggregate", "GB/s"),
    ("wide_read_cold", "{wide_jobs} readers × {wide}, cold, aggregate", "GB/s"),
    ("fio_randread", "4 KiB random read, fio psync, {fio_jobs} jobs, {fio_files}", "IOPS"),
    ("fio_randwrite", "4 KiB random write, fio psync, {fio_jobs} jobs, {fio_files}", "IOPS"),
    ("small_create", "{small_files} files: create + write 4 KiB + close", "files/s"),
    ("small_stat", "{small_files} files: stat", "files/s"),
    ("small_unlink", "{small_files} files: unlink", "files/s"),
]

GPU_SNAPSHOT_LABELS = [
    ("before_mount", "before mount"),
    ("after_mount", "mounted"),
    ("after_seq_write", "after seq write"),
    ("after_par_write", "after parallel writes"),
    ("after_wide_write", "after wide writes"),
    ("before_unmount", "files deleted"),
    ("after_unmount", "after unmount"),
]


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="results.jsonl written by run_benchmarks.sh")
    parser.add_argument("--markdown", required=True, help="markdown file to write")
    parser.add_argument("--chart", required=True, help="PNG file to write")
    return parser.parse_args()


def read_records(path):
    with open(path) as results:
        return [json.loads(line) for line in results if line.strip()]


def size_text(mib):
    return "%g GiB" % (mib / 1024) if mib >= 1024 else "%g MiB" % mib


def count_text(count):
    return "%gk" % (count / 1000) if count >= 1000 and count % 100 == 0 else str(count)


def workload_labels(run):
    fio_size = size_text(run["fio_mib"])
    fields = {
        "seq": size_text(run["seq_mib"]),
        "par": size_text(run["par_mib"]),
        "par_jobs": run["par_jobs"],
        "wide": size_text(run.get("wide_mib", 0)),
        "wide_jobs": run.get("wide_jobs", 0),
        "fio_jobs": run["fio_jobs"],
        "fio_files": ("one shared %s file" % fio_size) if run["fio_shared"]
        else ("one %s file per job" % fio_size),
        "small_files": count_text(run["small_files"]),
        "dd": "%dM" % run.get("dd_mib", 1),
    }
    return {workload: (label.format(**fields), unit) for workload, label, unit in WORKLOADS}


def value_text(value, unit):
    if unit == "GB/s":
        return "%.2f" % value
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= scale:
            return "%.3g%s" % (value / scale, suffix)
    return "%.0f" % value


BACKEND_OPTIONS = {"backend=cuda", "backend=host", "backend=null", "backend=auto"}


def mount_options(spec):
    """The -o options of a target spec such as "cudafs:backend=null,direct_io"."""
    _, _, options = spec.partition(":")
    return {option for option in options.split(",") if option and not option.startswith("size=")}


def markdown_cell(text):
    return text.replace("|", "\\|").replace("\n", " ")


class Results:
    """The records of one run, indexed by target and workload."""

    def __init__(self, records):
        runs = [record for record in records if record["type"] == "run"]
        if len(runs) != 1:
            raise ValueError("expected one run record, found %d" % len(runs))
        self.run = runs[0]
        self.targets = [record for record in records if record["type"] == "target"]
        self.target_names = [target["target"] for target in self.targets]
        self.results = {(record["target"], record["workload"]): record
                        for record in records if record["type"] == "result"}
        self.memory = {record["target"]: record for record in records if record["type"] == "memory"}
        self.mounted = {target["target"] for target in self.targets if target["status"] == "ok"}
        # The null backend is the FUSE floor that cudafs targets are compared
        # with: the null target mounted with the same other options (the same
        # transport and caching), else the first null target.
        self.null_targets = [target["target"] for target in self.targets
                             if target["target"] in self.mounted
                             and "backend=null" in mount_options(target["spec"])]
        self.null_target = self.null_targets[0] if self.null_targets else None

    def null_for(self, target):
        like = mount_options(self.spec(target)) - BACKEND_OPTIONS
        return next((null for null in self.null_targets
                     if mount_options(self.spec(null)) - BACKEND_OPTIONS == like),
                    self.null_target)

    def workloads(self):
        present = {workload for _, workload in self.results}
        return [workload for workload, _, _ in WORKLOADS if workload in present]

    def value(self, target, workload):
        record = self.results.get((target, workload))
        return None if record is None else record.get("value")

    def cell(self, target, workload, unit):
        if target not in self.mounted:
            return "n/a"
        record = self.results.get((target, workload))
        if record is None:
            return "–"
        if record.get("value") is None:
            error = record.get("error", "unknown error")
            return error if error.startswith("skipped") else "failed: " + error
        text = value_text(record["value"], unit)
        null = self.null_for(target)
        null_value = self.value(null, workload) if null else None
        if (null_value and target not in self.null_targets
                and self.spec(target).startswith("cudafs")):
            text += " (%.0f%% of %s)" % (100 * record["value"] / null_value, null)
        if record.get("note"):
            text += " (%s)" % record["note"]
        return text

    def spec(self, target):
        return next(t["spec"] for t in self.targets if t["target"] == target)


def mount_row(results):
    cells = []
    for target in results.targets:
        if target["status"] == "ok":
            cells.append("ok (%s)" % target.get("filesystem", target["spec"]))
        else:
            cells.append("n/a (mount failed: %s)" % target.get("error", "unknown error"))
    return cells


def memory_rows(results):
    """Peak daemon RSS and GPU memory.used, for the cudafs targets that have them."""
    rows = []
    memory = results.memory
    if not memory:
        return rows
    rss_cells = []
    for target in results.target_names:
        record = memory.get(target, {})
        kib = record.get("daemon_vmhwm_kib")
        cell = "%.0f MiB" % (kib / 1024) if kib is not None else "–"
        if record.get("daemon_alive_at_end") is False:
            cell += " (the daemon died during the run)"
        rss_cells.append(cell)
    rows.append(("cudafs daemon peak RSS (VmHWM)", rss_cells))
    snapshot_keys = [key for key, _ in GPU_SNAPSHOT_LABELS
                     if any(key in record.get("gpu_used_mib", {}) for record in memory.values())]
    if snapshot_keys:
        label = "GPU memory.used, MiB: " + " → ".join(
            text for key, text in GPU_SNAPSHOT_LABELS if key in snapshot_keys)
        gpu_cells = []
        for target in results.target_names:
            snapshots = memory.get(target, {}).get("gpu_used_mib", {})
            gpu_cells.append(" → ".join(str(snapshots.get(key, "?")) for key in snapshot_keys)
                             if snapshots else "–")
        rows.append((label, gpu_cells))
    return rows


def table(results):
    labels = workload_labels(results.run)
    header = ["workload"] + results.target_names
    rows = [("mount", mount_row(results))]
    for workload in results.workloads():
        label, unit = labels[workload]
        rows.append(("%s (%s)" % (label, unit),
                     [results.cell(target, workload, unit) for target in results.target_names]))
    rows.extend(memory_rows(results))
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for label, cells in rows:
        lines.append("| " + " | ".join(markdown_cell(text) for text in [label] + cells) + " |")
    return "\n".join(lines)


def draw_chart(results, path):
    """Returns None when drawn, else why not."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as pyplot
        import matplotlib.ticker
    except ImportError:
        return "matplotlib is not installed"
    labels = workload_labels(results.run)
    workloads = results.workloads()
    targets = results.target_names
    columns = 3
    rows = math.ceil(len(workloads) / columns)
    figure, axes = pyplot.subplots(rows, columns, figsize=(5 * columns, 3.6 * rows), squeeze=False)
    colors = pyplot.get_cmap("tab10")
    for index, workload in enumerate(workloads):
        axis = axes[index // columns][index % columns]
        label, unit = labels[workload]
        values = [results.value(target, workload) for target in targets]
        heights = [value or 0 for value in values]
        bars = axis.bar(range(len(targets)), heights,
                        color=[colors(i % 10) for i in range(len(targets))])
        for bar, value in zip(bars, values):
            axis.annotate(value_text(value, unit) if value is not None else "n/a",
                          (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                          ha="center", va="bottom", fontsize=8)
        axis.set_title(label, fontsize=9, wrap=True)
        axis.set_ylabel(unit, fontsize=8)
        axis.yaxis.set_major_formatter(
            matplotlib.ticker.FuncFormatter(lambda value, _, unit=unit: value_text(value, unit)))
        axis.set_xticks(range(len(targets)))
        axis.set_xticklabels(targets, fontsize=8, rotation=15)
        axis.margins(y=0.15)
    for index in range(len(workloads), rows * columns):
        axes[index // columns][index % columns].axis("off")
    figure.suptitle("cudafs benchmarks, %s, %s" % (results.run.get("gpu") or "no GPU",
                                                   results.run["date"]), fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)
    return None


def notes(results):
    run = results.run
    lines = [
        "- GB/s is 10^9 bytes per second, timed around the whole command (or the whole group "
        "of parallel commands), fdatasync included for writes. Data is copied from /dev/zero.",
        "- *cold*: `sync; echo 3 > /proc/sys/vm/drop_caches` before reading, which empties the "
        "page cache of FUSE files; tmpfs keeps its pages (they are its storage).",
        "- fio: `--ioengine=psync --bs=4k --numjobs=%d --time_based --runtime=%ds`, %s; "
        "`direct=1` (O_DIRECT) wherever a 4 KiB `dd oflag=direct` works, otherwise the cell says "
        "`direct=0`." % (run["fio_jobs"], run["fio_seconds"],
                          "all jobs on one shared file" if run["fio_shared"]
                          else "each job on its own file"),
        "- Small files: bench/smallfiles.py, a Python loop over os.open/os.write/os.close, "
        "os.stat and os.unlink in one directory (stat right after creating, so lookups may be "
        "served from the dentry cache). The interpreter costs a few µs per file; the tmpfs "
        "column, measured with the same script, is the ceiling of this loop on this machine.",
        "- Each mount had `size=%s` unless its spec says otherwise." % run["mount_size"],
    ]
    if results.null_target:
        lines.append("- *% of NAME*: the value as a fraction of target NAME, cudafs with the "
                     "null backend (no data stored) and otherwise the same options, so the same "
                     "FUSE transport and caching, measured in the same run.")
    return "\n".join(lines)


def machine(run):
    lines = [
        "- GPU: %s" % (run.get("gpu") or "none (nvidia-smi not found)"),
        "- CPU: %s, %d CPUs; memory %.0f GiB" % (run.get("cpu_model") or "unknown", run["cpus"],
                                                 run["memory_kib"] / 2**20),
        "- kernel %s%s" % (run["kernel"], (", FUSE max_pages_limit %s" %
                                           run["fuse_max_pages_limit"])
                           if run.get("fuse_max_pages_limit") else ""),
        "- %s; %s" % (run["cudafs_version"], run["fio_version"]),
    ]
    return "\n".join(lines)


def main():
    arguments = parse_arguments()
    results = Results(read_records(arguments.results))
    chart_skipped = draw_chart(results, arguments.chart)
    if chart_skipped:
        chart = "Chart skipped: %s." % chart_skipped
        print("report.py: chart skipped: %s" % chart_skipped, file=sys.stderr)
    else:
        relative = os.path.relpath(arguments.chart, os.path.dirname(os.path.abspath(arguments.markdown)))
        chart = "![benchmarks](%s)" % relative
    with open(arguments.markdown, "w") as markdown:
        markdown.write("# cudafs benchmarks\n\n")
        markdown.write("Produced on %s by\n\n```sh\n%s\n```\n\n" % (results.run["date"],
                                                                   results.run["command"]))
        markdown.write(machine(results.run) + "\n\n")
        markdown.write(table(results) + "\n\n")
        markdown.write(notes(results) + "\n\n")
        markdown.write(chart + "\n")


if __name__ == "__main__":
    main()
