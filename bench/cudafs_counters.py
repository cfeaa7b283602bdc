"""Per-opcode FUSE request counters of a mounted cudafs, for the benchmarks.

A cudafs mount publishes "name value" lines on its root directory in the
extended attribute user.cudafs.stats (fs/fuse/request_counters.h): one
requests_<op> line per request type and forgotten_inodes. Every reading is
itself one or more GETXATTRs (Python's os.getxattr first tries a 128-byte
buffer, which the stats do not fit: two), which the next reading counts;
Counters measures what one reading costs when nothing else moves, keeps
track of its own readings and takes them out of the differences.

RELEASE and FORGET reach the daemon after the system calls that cause them
have returned, so settle() reads until the counters stop moving.
"""
import os
import time

STATS_ATTRIBUTE = "user.cudafs.stats"


def read_stats(mount):
    """The stats of the cudafs mounted at MOUNT as {name: int}."""
    text = os.getxattr(mount, STATS_ATTRIBUTE).decode()
    stats = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                stats[parts[0]] = int(parts[1])
            except ValueError:
                pass
    return stats


def _requests(stats):
    return {name: value for name, value in stats.items()
            if name.startswith("requests_") or name == "forgotten_inodes"}


class Counters:
    """Readings of one mount's request counters, with our own GETXATTRs counted."""

    def __init__(self, mount):
        self.mount = mount
        self.readings = 0
        self.cost = 1  # GETXATTRs per reading, measured by settle()

    def read(self):
        self.readings += 1
        return _requests(read_stats(self.mount))

    def settle(self, interval=0.1, limit=10.0):
        """Reads until two readings agree (but for our GETXATTRs); returns the last."""
        latest = self.read()
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            time.sleep(interval)
            previous, latest = latest, self.read()
            if all(latest.get(k) == v for k, v in previous.items()
                   if k != "requests_getxattr"):
                self.cost = latest["requests_getxattr"] - previous["requests_getxattr"]
                break
        return latest

    def begin(self):
        """A settled reading to measure from; the readings are counted from here."""
        before = self.settle()
        self.readings = 0
        return before

    def since(self, before):
        """Settles, then returns {op: requests} grown since BEFORE (non-zero
        ones, ours taken out); forgotten inodes under "forgotten_inodes"."""
        after = self.settle()
        grown = {}
        for name, value in after.items():
            delta = value - before.get(name, 0)
            if name == "requests_getxattr":
                delta -= self.readings * self.cost
            if delta:
                grown[name[len("requests_"):] if name.startswith("requests_") else name] = delta
        return grown
