"""python -m cudafs: the module's calls from a shell, to check that a file
maps (and how fast) or to make room before a job. Exit status 0 on success,
1 when the call fails (one line on stderr says why), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import errno
import importlib.util
import os
import re
import sys
import time
from typing import List, Optional

import cudafs

class _Failure(Exception):
    """A failed call: its one line for stderr."""


def _why(path: str, error: OSError) -> str:
    # "PATH: message (ENAME)", the path once (the library's messages may
    # hold it already).
    message = str(error.strerror or error)
    if path not in message:
        message = "%s: %s" % (path, message)
    name = errno.errorcode.get(error.errno or 0)
    return "%s (%s)" % (message, name) if name else message


def _byte_count(text: str) -> Optional[int]:
    # `cudafs --make-room`'s SIZE: digits with an optional k/m/g/t/p/e
    # suffix (powers of 1024), or "all" (None).
    if text == "all":
        return None
    found = re.fullmatch(r"([0-9]+)([kmgtpe]?)", text.lower())
    if not found:
        raise argparse.ArgumentTypeError(
            "not a byte count: %r (expected digits with an optional k/m/g/t/p/e suffix, or all)"
            % text)
    return int(found.group(1)) << (10 * ("kmgtpe".index(found.group(2)) + 1) if found.group(2)
                                   else 0)


def _size(size: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return "%.1f %s" % (size / (1 << shift), unit)
    return "%d bytes" % size


def _kind(writable: bool) -> str:
    return "the file's own memory" if writable else "a private copy"


def _map(args: argparse.Namespace) -> str:
    started = time.monotonic()
    try:
        with cudafs.map(args.path, writable=args.writable) as m:
            took = time.monotonic() - started
            where = "GPU memory on cuda:%s" % m.device if m.is_cuda else "host memory"
            return "%s: %d bytes (%s), %s in %s, mapped in %.1f ms" % (
                args.path, m.size, _size(m.size), _kind(args.writable), where, took * 1e3)
    except OSError as error:
        raise _Failure("map " + _why(args.path, error)) from None


def _load_safetensors(args: argparse.Namespace) -> str:
    if importlib.util.find_spec("torch") is None:
        raise _Failure("load_safetensors needs PyTorch, which %s does not have "
                       "(pip install torch)" % sys.executable)
    import torch

    started = time.monotonic()
    try:
        tensors = cudafs.load_safetensors(args.path, device=args.device, writable=args.writable)
    except OSError as error:
        raise _Failure("load_safetensors " + _why(args.path, error)) from None
    except (ValueError, RuntimeError, KeyError) as error:
        raise _Failure("load_safetensors %s: %s" % (args.path, error)) from None
    if any(t.is_cuda for t in tensors.values()):
        torch.cuda.synchronize()
    took = time.monotonic() - started
    if args.list:
        for name, tensor in tensors.items():
            print("%s %s %s" % (name, str(tensor.dtype).replace("torch.", ""),
                                list(tensor.shape)))
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    where = next(iter(tensors.values())).device if tensors else args.device
    return "%s: %d tensors, %s on %s (%s), in %.1f ms" % (
        args.path, len(tensors), _size(total), where, _kind(args.writable), took * 1e3)


def _make_room(args: argparse.Namespace) -> str:
    started = time.monotonic()
    try:
        cudafs.make_room(args.mount, args.size, hold=args.hold)
    except OSError as error:
        raise _Failure("make_room " + _why(args.mount, error)) from None
    took = time.monotonic() - started
    if args.size is None:
        return "%s: every byte that can move is off the GPUs (%.1f s)" % (args.mount, took)
    return "%s: %s free on each GPU (%.1f s)" % (args.mount, _size(args.size), took)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m cudafs",
        description="Map files of a cudafs mount into this process's GPU (or host) memory, "
                    "or make room on its GPUs: the calls of the Python module cudafs.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    map_command = commands.add_parser(
        "map", help="map a file and say where it landed (a check that mapping works)",
        description="Maps the file (cudafs.map), says how big, where and how fast, and "
                    "unmaps it.")
    map_command.add_argument("path", help="a file on a cudafs mount")
    map_command.add_argument("--writable", action="store_true",
                             help="the file's own memory instead of a private copy "
                                  "(needs write access; files of 2 MiB and more)")
    map_command.set_defaults(run=_map)

    load = commands.add_parser(
        "load_safetensors", aliases=["load-safetensors"],
        help="load a .safetensors file's tensors (needs PyTorch)",
        description="Loads the tensors of a .safetensors file on the mount "
                    "(cudafs.load_safetensors) and says how many, how big and how fast.")
    load.add_argument("path", help="a .safetensors file on a cudafs mount")
    load.add_argument("--device", default="cuda",
                      help="where the file is mapped: cuda, cuda:N, or cpu for a host-backed "
                           "mount (default: cuda)")
    load.add_argument("--writable", action="store_true",
                      help="tensors of the file's own memory instead of a private copy")
    load.add_argument("--list", action="store_true",
                      help="print each tensor's name, dtype and shape")
    load.set_defaults(run=_load_safetensors)

    room = commands.add_parser(
        "make_room", aliases=["make-room"],
        help="move the mount's data off its GPUs until SIZE is free on each",
        description="Moves data of the mount off its GPUs into host memory until SIZE is "
                    "free on each GPU (cudafs.make_room, as `cudafs --make-room`). The "
                    "mount's owner or root may ask for all and --hold; others for a SIZE.")
    room.add_argument("mount", help="the mount point of a cudafs mount")
    room.add_argument("size", nargs="?", default=None, type=_byte_count, metavar="SIZE|all",
                      help="bytes, with an optional k/m/g/t suffix (powers of 1024), or all: "
                           "every byte that can move (default: all)")
    room.add_argument("--hold", action="store_true",
                      help="keep the room for 60 s: nothing comes back meanwhile")
    room.set_defaults(run=_make_room)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        print(args.run(args))
    except _Failure as failure:
        print("cudafs: %s" % failure, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
