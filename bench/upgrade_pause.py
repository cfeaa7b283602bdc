#!/usr/bin/env python3
"""How long `cudafs --upgrade` stalls the programs using a mount.

On a fresh host-backend mount (uring=off), writes FILES files of SIZE
bytes in directories of 1,000, then runs `BINARY --upgrade` ROUNDS times
while a probe thread creates and removes a file in a loop (requests the
kernel cannot answer from its caches). Prints, per round, the command's
wall time and the probe's longest wait for one create: the pause
programs see (the old daemon stopping and writing its image, the new one
loading it and replaying INIT). Run as root. Example:
  bench/upgrade_pause.py build/cudafs --files 100000 --size 4096 --rounds 3
"""
import argparse
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
    args = parser.parse_args()
    binary = os.path.realpath(args.binary)
    mountpoint = tempfile.mkdtemp(prefix="cudafs-upgrade-")
    subprocess.run([binary, mountpoint, "-o", "backend=host,uring=off,size=16g"], check=True)
    try:
        payload = os.urandom(args.size)
        for i in range(args.files):
            directory = os.path.join(mountpoint, "d%d" % (i // 1000))
            if i % 1000 == 0:
                os.mkdir(directory)
            with open(os.path.join(directory, "f%d" % i), "wb") as f:
                f.write(payload)
        probe = os.path.join(mountpoint, "probe")
        for round_number in range(args.rounds):
            longest = [0.0]
            stop = threading.Event()

            def watch():
                while not stop.is_set():
                    start = time.monotonic()
                    os.close(os.open(probe, os.O_CREAT | os.O_WRONLY, 0o600))
                    longest[0] = max(longest[0], time.monotonic() - start)
                    os.unlink(probe)

            thread = threading.Thread(target=watch)
            thread.start()
            time.sleep(0.2)
            start = time.monotonic()
            subprocess.run([binary, "--upgrade", mountpoint], check=True,
                           stderr=subprocess.DEVNULL)
            command = time.monotonic() - start
            time.sleep(0.2)
            stop.set()
            thread.join()
            print("round %d: %d files of %d B: --upgrade %.3f s, longest create %.3f s"
                  % (round_number + 1, args.files, args.size, command, longest[0]), flush=True)
    finally:
        subprocess.run(["umount", mountpoint], check=False)
        os.rmdir(mountpoint)


if __name__ == "__main__":
    main()
