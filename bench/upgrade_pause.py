#!/usr/bin/env python3
"""How long `cudafs --upgrade`, or a crash of a survive=on daemon, stalls the programs using a mount.

On a fresh mount (uring=off; --backend host or cuda), writes FILES files
of SIZE bytes in directories of 1,000 and BIG files of 1 GiB, then runs
`BINARY --upgrade` ROUNDS times (with --kill: mounts with survive=on and
kills the daemon with SIGKILL instead, for its keeper's successor to take
over) while a probe thread creates and removes a file in a loop (requests
the kernel cannot answer from its caches). Prints, per round, the
command's wall time (with --kill: from the kill until the mount's root
names a new daemon) and the probe's longest wait for one create and
remove: the pause programs see (the old daemon stopping and writing its
image, the new one loading it, or the log, and replaying INIT).
Afterwards every big file must read back as written. Run as root.
Examples:
  bench/upgrade_pause.py build/cudafs --files 100000 --size 4096 --rounds 3
  bench/upgrade_pause.py build/cudafs --backend cuda --big 40 --files 100000
  bench/upgrade_pause.py build/cudafs --kill --big 40 --files 100000
"""
import argparse
import hashlib
import os
import subprocess
import tempfile
import threading
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary")
    parser.add_argument("--files", type=int, default=10000)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backend", default="host", choices=["host", "cuda"])
    parser.add_argument("--big", type=int, default=0, help="files of 1 GiB")
    parser.add_argument("--kill", action="store_true",
                        help="survive=on, and kill -9 the daemon instead of --upgrade")
    args = parser.parse_args()
    binary = os.path.realpath(args.binary)
    mountpoint = tempfile.mkdtemp(prefix="cudafs-upgrade-")
    size_gib = 16 + args.big + args.files * max(args.size, 4096) // (1 << 30)
    # survive=on keeps GPU memory only where nothing spills to host memory.
    survive = (",survive=on" + (",spill=0" if args.backend == "cuda" else "")) if args.kill else ""
    subprocess.run([binary, mountpoint, "-o", "backend=%s,uring=off,size=%dg%s"
                    % (args.backend, size_gib, survive)], check=True)
    try:
        digests = {}
        began = time.monotonic()
        chunk = os.urandom(64 << 20)
        for i in range(args.big):
            digest = hashlib.sha256()
            with open(os.path.join(mountpoint, "big%d" % i), "wb") as f:
                for piece in range(16):
                    data = bytes([i, piece]) + chunk[2:]
                    f.write(data)
                    digest.update(data)
            digests["big%d" % i] = digest.hexdigest()
        payload = os.urandom(args.size)
        for i in range(args.files):
            directory = os.path.join(mountpoint, "d%d" % (i // 1000))
            if i % 1000 == 0:
                os.mkdir(directory)
            with open(os.path.join(directory, "f%d" % i), "wb") as f:
                f.write(payload)
        print("wrote %d files of 1 GiB and %d of %d B in %.1f s"
              % (args.big, args.files, args.size, time.monotonic() - began), flush=True)
        probe = os.path.join(mountpoint, "probe")
        for round_number in range(args.rounds):
            longest = [0.0, 0.0]  # the longest create and remove, and when it began
            stop = threading.Event()

            def watch():
                while not stop.is_set():
                    began = time.monotonic()
                    os.close(os.open(probe, os.O_CREAT | os.O_WRONLY, 0o600))
                    os.unlink(probe)
                    took = time.monotonic() - began
                    if took > longest[0]:
                        longest[:] = [took, began]

            thread = threading.Thread(target=watch)
            thread.start()
            time.sleep(0.2)
            start = time.monotonic()
            try:
                if args.kill:
                    daemon = int(os.getxattr(mountpoint, "user.cudafs.daemon"))
                    start = time.monotonic()
                    os.kill(daemon, 9)
                    # Asked while no daemon serves, the root waits for the next.
                    while int(os.getxattr(mountpoint, "user.cudafs.daemon")) == daemon:
                        time.sleep(0.001)
                    what = "kill -9 to a new daemon"
                else:
                    upgrade = subprocess.run([binary, "--upgrade", mountpoint],
                                             stderr=subprocess.PIPE, text=True)
                    if upgrade.returncode != 0:
                        raise SystemExit("--upgrade failed: " + upgrade.stderr)
                    what = "--upgrade"
                command = time.monotonic() - start
                time.sleep(0.2)
            finally:
                stop.set()
                thread.join()
            print("round %d: %d files of %d B and %d of 1 GiB (%s): %s %.3f s, "
                  "longest create and remove %.3f s (from %+.3f s)"
                  % (round_number + 1, args.files, args.size, args.big, args.backend, what,
                     command, longest[0], longest[1] - start), flush=True)
        for name, expected in digests.items():
            digest = hashlib.sha256()
            with open(os.path.join(mountpoint, name), "rb") as f:
                while True:
                    data = f.read(64 << 20)
                    if not data:
                        break
                    digest.update(data)
            if digest.hexdigest() != expected:
                raise SystemExit("%s changed across the rounds" % name)
        if digests:
            print("%d files of 1 GiB read back unchanged" % len(digests), flush=True)
    finally:
        subprocess.run(["umount", mountpoint], check=False)
        os.rmdir(mountpoint)


if __name__ == "__main__":
    main()
