#!/usr/bin/env python3
"""Runs one timed step of bench/tree_workload.sh and appends its sample.

  tree_step.py --mount MOUNT [--counters] [--cold] [--cwd DIR] [--ok-rc 0,1]
               [--timeout S] [--log LOG] --append FILE [--field KEY=STRING |
               --field KEY:=JSON ...] -- COMMAND

COMMAND is one bash command line, run in --cwd (default MOUNT). The wall
time covers exactly that bash process (time.perf_counter around it).
--cold: sync and drop the page cache, dentries and inodes first (echo 3 >
/proc/sys/vm/drop_caches). --counters: MOUNT is a cudafs root; its request
counters are read (settled) before and after the command, outside the
timed span, and the growth by opcode goes into "requests".

Appends one JSON object to FILE: the --field values, seconds, ok, rc and,
where they apply, requests, note and error. Exits 0 when the command
returned an accepted status, 1 otherwise.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cudafs_counters import Counters  # noqa: E402


def drop_caches():
    """Flushes dirty data and evicts caches; returns a note when it could not."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as control:
            control.write("3\n")
        return ""
    except OSError as error:
        return "warm: could not drop caches (%s)" % error.strerror


def last_error_line(log_path, start):
    """The last non-empty line LOG got since offset START, for the record."""
    if not log_path:
        return ""
    try:
        with open(log_path, errors="replace") as log:
            log.seek(start)
            lines = [line.strip() for line in log if line.strip() and not line.startswith("$ ")]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def interrupted(signum, frame):
    raise KeyboardInterrupt


def main():
    signal.signal(signal.SIGTERM, interrupted)
    parser = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1])
    parser.add_argument("--mount", required=True)
    parser.add_argument("--counters", action="store_true")
    parser.add_argument("--cold", action="store_true")
    parser.add_argument("--cwd")
    parser.add_argument("--ok-rc", default="0")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--log")
    parser.add_argument("--append", required=True)
    parser.add_argument("--field", action="append", default=[])
    parser.add_argument("command", nargs=argparse.REMAINDER)
    arguments = parser.parse_args()
    command = arguments.command[1:] if arguments.command[:1] == ["--"] else arguments.command
    if len(command) != 1:
        parser.error("give the command as one bash command line after --")
    command = command[0]

    record = {}
    for field in arguments.field:
        key, value = field.split("=", 1)
        if key.endswith(":"):
            record[key[:-1]] = json.loads(value)
        else:
            record[key] = value
    accepted = {int(status) for status in arguments.ok_rc.split(",")}

    note = drop_caches() if arguments.cold else ""
    counters = Counters(arguments.mount) if arguments.counters else None
    before = counters.begin() if counters else None

    log = open(arguments.log, "a") if arguments.log else subprocess.DEVNULL
    log_start = log.tell() if arguments.log else 0
    if arguments.log:
        log.write("$ (cd %s && %s)\n" % (arguments.cwd or arguments.mount, command))
        log.flush()
    timed_out = False
    start = time.perf_counter()
    try:
        process = subprocess.Popen(["bash", "-c", command], cwd=arguments.cwd or arguments.mount,
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                   start_new_session=True)
    except OSError as error:  # the directory to run in is missing: an earlier step failed
        if arguments.log:
            log.write("cannot run in %s: %s\n" % (arguments.cwd or arguments.mount, error.strerror))
        process = None
        status = 127
    if process:
        try:
            status = process.wait(timeout=arguments.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(process.pid, signal.SIGKILL)
            status = process.wait()
        except KeyboardInterrupt:
            # Ctrl-C or SIGTERM: the command runs in a session of its own
            # (for the timeout), out of reach of the terminal's signal; stop
            # it before the caller unmounts.
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
    seconds = time.perf_counter() - start
    if arguments.log:
        if timed_out:
            log.write("timed out after %gs\n" % arguments.timeout)
        log.close()

    ok = status in accepted and not timed_out
    record.update(seconds=seconds, ok=ok, rc=status)
    if counters:
        record["requests"] = counters.since(before)
    if note:
        record["note"] = note
    if not ok:
        record["error"] = ("timed out after %gs" % arguments.timeout if timed_out else
                           last_error_line(arguments.log, log_start) or "exit status %d" % status)
    with open(arguments.append, "a") as samples:
        samples.write(json.dumps(record) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
