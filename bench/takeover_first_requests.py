#!/usr/bin/env python3
"""What a survive=on daemon's successor's first requests cost, after a kill -9.

Mounts BINARY with survive=on on a GPU (spill=0, uring=off; --backend
host for host memory), writes an 8 MiB file through O_DIRECT, then ROUNDS
times kills the daemon with SIGKILL and times, once the mount's root names
the new daemon: a stat, two 1 MiB reads and two 1 MiB writes through
O_DIRECT (the first of each is the successor's first), and 32 writes of
1 MiB past the end (new GPU memory, which the keeper must hold too).
Run as root. Example:
  bench/takeover_first_requests.py build/cudafs --rounds 4
"""
import argparse
import mmap
import os
import subprocess
import tempfile
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--backend", default="cuda", choices=["host", "cuda"])
    args = parser.parse_args()
    mountpoint = tempfile.mkdtemp(prefix="cudafs-takeover-")
    options = "backend=%s,survive=on,uring=off,size=4g" % args.backend
    if args.backend == "cuda":
        options += ",spill=0"
    subprocess.run([os.path.realpath(args.binary), mountpoint, "-o", options], check=True)
    try:
        buffer = mmap.mmap(-1, 1 << 20)  # aligned, as O_DIRECT wants
        buffer.write(os.urandom(1 << 20))
        path = os.path.join(mountpoint, "f")
        fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o600)
        for mib in range(8):
            os.pwritev(fd, [buffer], mib << 20)

        def timed(what, work):
            began = time.monotonic()
            work()
            print("  %s %.1f ms" % (what, (time.monotonic() - began) * 1e3), flush=True)

        for round_number in range(args.rounds):
            daemon = int(os.getxattr(mountpoint, "user.cudafs.daemon"))
            began = time.monotonic()
            os.kill(daemon, 9)
            while int(os.getxattr(mountpoint, "user.cudafs.daemon")) == daemon:
                time.sleep(0.001)
            print("round %d: serving after %.1f ms"
                  % (round_number, (time.monotonic() - began) * 1e3), flush=True)
            timed("stat", lambda: os.stat(path))
            timed("read 1 MiB", lambda: os.preadv(fd, [buffer], 0))
            timed("read 1 MiB again", lambda: os.preadv(fd, [buffer], 1 << 20))
            timed("write 1 MiB", lambda: os.pwritev(fd, [buffer], 2 << 20))
            timed("write 1 MiB again", lambda: os.pwritev(fd, [buffer], 3 << 20))
            end = 8 + 32 * round_number
            timed("grow 32 MiB",
                  lambda: [os.pwritev(fd, [buffer], (end + i) << 20) for i in range(32)])
        os.close(fd)
    finally:
        subprocess.run(["umount", mountpoint], check=False)
        os.rmdir(mountpoint)


if __name__ == "__main__":
    main()
