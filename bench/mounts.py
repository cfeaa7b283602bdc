"""A fresh mount for one round of a benchmark: cudafs with options, or tmpfs."""
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
