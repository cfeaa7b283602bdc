"""A fresh mount for one round of a benchmark (cudafs with options, or
tmpfs), and the targets survive=on is measured beside."""
import contextlib
import os
import subprocess
import tempfile

# What survive=on is measured beside, by name: its options (None: tmpfs).
SURVIVE_TARGETS = {
    "host": "backend=host,size=4g",
    "survive": "backend=host,size=4g,survive=on",
    "null": "backend=null,size=4g",
    "tmpfs": None,
}


@contextlib.contextmanager
def mounted(binary, options, prefix):
    """Mounts BINARY with OPTIONS (None: a 4 GiB tmpfs) on a new directory
    named after PREFIX; yields its path; unmounts and removes it after."""
    mountpoint = tempfile.mkdtemp(prefix=prefix)
    if options is None:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4g", "tmpfs", mountpoint], check=True)
    else:
        subprocess.run([binary, mountpoint, "-o", options], check=True)
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", mountpoint], check=False)
        os.rmdir(mountpoint)


def add_target_options(parser):
    """--target NAME=OPTIONS and --binary NAME=PATH, for a benchmark of the
    SURVIVE_TARGETS."""
    parser.add_argument("--target", action="append", default=[], metavar="NAME=OPTIONS",
                        help="another cudafs mount, with these options")
    parser.add_argument("--binary", action="append", default=[], metavar="NAME=PATH",
                        help="serve target NAME with this cudafs binary")


def chosen_targets(parser, args, binary):
    """The SURVIVE_TARGETS and those of --target (before tmpfs), by name:
    their options, and the binary that serves each cudafs one (BINARY, or
    that of --binary)."""
    targets = {name: options for name, options in SURVIVE_TARGETS.items() if options is not None}
    for target in args.target:
        name, _, options = target.partition("=")
        if not name or not options or name in SURVIVE_TARGETS:
            parser.error("--target wants NAME=OPTIONS, a name of its own: " + target)
        targets[name] = options
    targets["tmpfs"] = None
    binaries = {target: binary for target in targets}
    for served in args.binary:
        name, _, path = served.partition("=")
        if name not in targets or targets[name] is None or not path:
            parser.error("--binary wants NAME=PATH of a cudafs target: " + served)
        binaries[name] = os.path.realpath(path)
    return targets, binaries


def compared_pairs(targets):
    """(target, base) for each cudafs target but host and null, against
    each of those two."""
    return [(t, base) for t, options in targets.items()
            if options is not None and t not in ("host", "null") for base in ("host", "null")]
