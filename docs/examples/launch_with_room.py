"""A job launcher that makes room on the GPUs first, then runs the job in
its place: the Python form of `cudafs --make-room MOUNT SIZE && JOB`.

    python3 launch_with_room.py --mount /mnt/gpu --gib 71 -- python3 serve.py
    python3 launch_with_room.py --mount /mnt/gpu -- ./train.sh    # room: all

Run it as the mount's owner or root (others may ask only for a size, and
not hold it). For a job that should simply wait for its allocations, use
`cudafs run -- JOB` instead.
"""

import argparse
import os
import sys

import cudafs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mount", required=True, help="the cudafs mount point, e.g. /mnt/gpu")
    parser.add_argument("--gib", type=float,
                        help="GiB to have free on each GPU (default: move every byte that can)")
    parser.add_argument("job", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = parser.parse_args()
    job = args.job[1:] if args.job[:1] == ["--"] else args.job
    if not job:
        parser.error("no job to run: give it after --")

    size = None if args.gib is None else int(args.gib * 2**30)
    try:
        # Returns once `size` bytes are free on each GPU of the mount (as the
        # driver reports it), and holds the room for 60 s.
        cudafs.make_room(args.mount, size, hold=True)
    except OSError as error:
        # ENOSPC: host memory (spill=) is full, or the rest of the GPUs is
        # other programs' or mapped. The job would fail to allocate: stop.
        sys.exit("no room made on %s: %s" % (args.mount, error.strerror))
    print("room made on %s; starting %s" % (args.mount, " ".join(job)), flush=True)
    os.execvp(job[0], job)


if __name__ == "__main__":
    main()
