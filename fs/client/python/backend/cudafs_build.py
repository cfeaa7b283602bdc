"""The PEP 517 build backend of the Python package `cudafs`: compiles
libcudafs_client (fs/client, fs/wire) with the system's C++ compiler into
the package, beside the module that loads it through ctypes, and writes the
wheel. In-tree and standard library only, so that pip builds it offline in
a fresh virtual environment: Python 3.12 and later no longer seed
setuptools into one, and --no-build-isolation then finds none.

From a checkout the sources are the repository's (three folders up); from
an sdist, its `cpp` folder, which build_sdist fills with the same files.
Environment: CXX (default c++), CXXFLAGS (added). No CUDA toolkit: the
library declares the driver API itself (alloc/devices/cuda_api.h) and
loads libcuda.so.1 at run time.
"""

import base64
import hashlib
import io
import os
import re
import shlex
import subprocess
import sysconfig
import tarfile
import tempfile
import zipfile

_NAME = "cudafs"
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIBRARY = "libcudafs_client.so"
# What libcudafs_client is made of (fs/client/CMakeLists.txt): the client,
# its parts and the wire format.
_SOURCE_DIRS = ("fs/client", "fs/wire")


def _source_root():
    for root in (os.path.join(_HERE, "..", "..", ".."), os.path.join(_HERE, "cpp")):
        if os.path.exists(os.path.join(root, "fs", "client", "cudafs.h")):
            return os.path.normpath(root)
    raise RuntimeError("the C++ sources of libcudafs_client are missing: build from a cudafs "
                       "checkout (fs/client/python) or from its sdist")


def _version(root):
    # One version for the daemon and the package: the library refuses a
    # daemon of another version (EPROTONOSUPPORT).
    with open(os.path.join(root, "CMakeLists.txt")) as f:
        found = re.search(r"project\(cudafs VERSION ([0-9.]+)", f.read())
    if not found:
        raise RuntimeError("no `project(cudafs VERSION ...)` in " + root + "/CMakeLists.txt")
    return found.group(1)


def _version_module(version):
    # cudafs.__version__, written here as the dist-info's Version is, so
    # that the two cannot differ (fs/client/CMakeLists.txt writes the .deb's).
    return ('__version__ = "%s"\n' % version).encode()


def _sources(root):
    return sorted(os.path.join(root, folder, name) for folder in _SOURCE_DIRS
                  for name in os.listdir(os.path.join(root, folder)) if name.endswith(".cc"))


def _compile_flags(root):
    return (["-std=c++20", "-O2", "-fPIC", "-fvisibility=hidden", "-fvisibility-inlines-hidden",
             "-I", root] + shlex.split(os.environ.get("CXXFLAGS", "")))


def _compile_library(root, output):
    command = ([os.environ.get("CXX", "c++")] + _compile_flags(root) + ["-shared", "-o", output]
               + _sources(root) + ["-ldl"])
    print("cudafs_build: " + " ".join(shlex.quote(word) for word in command), flush=True)
    try:
        subprocess.run(command, check=True)
    except FileNotFoundError:
        raise RuntimeError("no C++ compiler (%s): install g++ (Debian: build-essential), or set "
                           "CXX" % command[0]) from None
    except subprocess.CalledProcessError as error:
        raise RuntimeError("compiling libcudafs_client failed (exit %d)"
                           % error.returncode) from None


def _metadata(version):
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
            "Summary: Map files of a cudafs mount into GPU (or host) memory with no copy\n"
            "License: MIT\nRequires-Python: >=3.8\n" % (_NAME, version))


def _wheel_tag():
    # The library is plain C ABI, loaded through ctypes: any Python 3 on
    # this platform.
    return "py3-none-" + sysconfig.get_platform().replace("-", "_").replace(".", "_")


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def _dist_info(version):
    # The wheel's metadata, and what prepare_metadata_for_build_wheel
    # writes: fs/client/CMakeLists.txt installs that beside the .deb's
    # module, so that pip and importlib.metadata see it there too.
    info = "%s-%s.dist-info" % (_NAME, version)
    return info, [(info + "/METADATA", _metadata(version).encode()),
                  (info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: cudafs_build\n"
                                     "Root-Is-Purelib: false\nTag: %s\n" % _wheel_tag()).encode())]


def _built_library():
    with tempfile.TemporaryDirectory() as work:
        library = os.path.join(work, _LIBRARY)
        _compile_library(_source_root(), library)
        with open(library, "rb") as f:
            return f.read()


def _write_wheel(wheel_directory, version, files):
    info, metadata = _dist_info(version)
    files = files + metadata
    record = [_record_line(name, data) for name, data in files] + [info + "/RECORD,,"]
    files.append((info + "/RECORD", ("\n".join(record) + "\n").encode()))
    wheel = "%s-%s-%s.whl" % (_NAME, version, _wheel_tag())
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w", zipfile.ZIP_DEFLATED) as out:
        for name, data in files:
            entry = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            entry.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            out.writestr(entry, data, zipfile.ZIP_DEFLATED)
    return wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version(_source_root())
    files = []
    package = os.path.join(_HERE, _NAME)
    for name in sorted(os.listdir(package)):
        if name.endswith(".py") or name == "py.typed":
            with open(os.path.join(package, name), "rb") as f:
                files.append((_NAME + "/" + name, f.read()))
    files.append((_NAME + "/_version.py", _version_module(version)))
    files.append((_NAME + "/" + _LIBRARY, _built_library()))
    return _write_wheel(wheel_directory, version, files)


# PEP 660, `pip install -e`: the checkout's module, changes to it seen at
# the next import, and the library and version built for it, which the
# checkout does not hold (nothing is written into it). The installed
# package's __init__ runs the checkout's in its own place, so that the
# module finds the library beside __file__ as in a wheel, and looks up its
# submodules (__main__, _version) in the checkout first.
_EDITABLE_INIT = """# cudafs installed editable (pip install -e) from %(source)r:
# the module is the checkout's; this folder holds what pip built for it.
__path__.insert(0, %(source)r)
with open(%(init)r) as _source:
    exec(compile(_source.read(), %(init)r, "exec"))
del _source
"""


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version(_source_root())
    source = os.path.join(_HERE, _NAME)
    init = _EDITABLE_INIT % {"source": source, "init": os.path.join(source, "__init__.py")}
    files = [(_NAME + "/__init__.py", init.encode()),
             (_NAME + "/_version.py", _version_module(version)),
             (_NAME + "/" + _LIBRARY, _built_library())]
    return _write_wheel(wheel_directory, version, files)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info, files = _dist_info(_version(_source_root()))
    for name, data in files:
        os.makedirs(os.path.join(metadata_directory, os.path.dirname(name)), exist_ok=True)
        with open(os.path.join(metadata_directory, name), "wb") as f:
            f.write(data)
    return info


def _headers(root):
    # Every header the sources include from the repository, as the
    # compiler finds them (-MM): a header that moves elsewhere comes along.
    command = [os.environ.get("CXX", "c++"), "-MM"] + _compile_flags(root) + _sources(root)
    output = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout
    words = output.replace("\\\n", " ").split()
    return sorted({os.path.relpath(os.path.normpath(word), root) for word in words
                   if word.endswith(".h") and os.path.normpath(word).startswith(root + os.sep)})


def build_sdist(sdist_directory, config_settings=None):
    root = _source_root()
    version = _version(root)
    base = "%s-%s" % (_NAME, version)
    sdist = base + ".tar.gz"
    cpp = ["CMakeLists.txt"] + [os.path.relpath(source, root) for source in _sources(root)]
    path = os.path.join(sdist_directory, sdist)
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as out:
        for name in ("pyproject.toml", "backend/cudafs_build.py"):
            out.add(os.path.join(_HERE, name), base + "/" + name)
        for name in sorted(os.listdir(os.path.join(_HERE, _NAME))):
            if name.endswith(".py") or name == "py.typed":
                out.add(os.path.join(_HERE, _NAME, name), "%s/%s/%s" % (base, _NAME, name))
        for name in cpp + _headers(root):
            out.add(os.path.join(root, name), base + "/cpp/" + name)
        info = tarfile.TarInfo(base + "/PKG-INFO")
        metadata = _metadata(version).encode()
        info.size = len(metadata)
        out.addfile(info, io.BytesIO(metadata))
    return sdist
