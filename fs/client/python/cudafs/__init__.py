"""Map files of a cudafs mount into this process's memory with no copy
through FUSE: GPU memory for a GPU-backed mount, host memory for a
host-backed one. Pure Python over libcudafs_client (fs/client/cudafs.h)
through ctypes: the copy pip built into the package, else
CUDAFS_CLIENT_LIBRARY's, else the system's (the .deb), loaded by the first
map. torch is imported only by load_safetensors. The same from a shell:
python -m cudafs --help.

    import cudafs
    with cudafs.map("/mnt/gpu/model.bin") as m:
        t = torch.as_tensor(m, device="cuda")      # uint8, no copy
    tensors = cudafs.load_safetensors("/mnt/gpu/model.safetensors")

By default a mapping is a private copy of the file's bytes made inside the
device (a copy within VRAM on a GPU): it costs memory equal to the file
until closed, later writes to the file do not show in it, and writes to it
do not reach the file. It is the default because CUDA cannot make imported
memory read-only, so a reader given the file's own memory could write it.

map(path, writable=True) needs write access and gives the file's own
memory instead: no copy, no memory of its own, writes through it are the
file's. Call m.sync() between writing through one side (the mapping, or
write()) and reading through the other. Files under 2 MiB are never
shared (OSError EINVAL). Either kind stays valid when the file is removed
or the mount goes away (a shared one then keeps the memory it had).

    with cudafs.map("/mnt/gpu/out.bin", writable=True) as m:
        torch.as_tensor(m, device="cuda").fill_(7)   # writes the file
        m.sync()                                     # read() sees it now
"""

from __future__ import annotations

import ctypes
import errno
import functools
import json
import mmap
import os
import struct
from typing import TYPE_CHECKING, Any, Dict, List, NoReturn, Optional, Union

if TYPE_CHECKING:
    import torch

__all__ = ["Mapping", "PathLike", "map", "load_safetensors", "make_room"]

# The version of cudafs (CMakeLists.txt's project()), written into the
# package by its build: pip's (backend/cudafs_build.py) or cmake --install.
try:
    from ._version import __version__
except ImportError:  # run from a checkout (PYTHONPATH=fs/client/python): unbuilt
    __version__ = "0+unknown"

#: What the functions take as a path: str, bytes or an os.PathLike.
PathLike = Union[str, bytes, os.PathLike]

# cudafs.h's CUDAFS_MAP_WRITABLE and enum cudafs_memory, which ctypes cannot
# read from the library (tests/fs/client/python_module_test.cc compares).
_MAP_WRITABLE = 1
_HOST = 1
_CUDA = 2
_ROOM_ALL = 1
_ROOM_HOLD = 2


def _library_candidates() -> List[str]:
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = []
    # pip's: built with the package, beside this file, so that module and
    # library are always of one version.
    bundled = os.path.join(here, "libcudafs_client.so")
    if os.path.exists(bundled):
        candidates.append(bundled)
    # Run from a checkout (PYTHONPATH=fs/client/python): the build tree's.
    if os.environ.get("CUDAFS_CLIENT_LIBRARY"):
        candidates.append(os.environ["CUDAFS_CLIENT_LIBRARY"])
    # The .deb's: PREFIX/lib/python3/dist-packages/cudafs -> PREFIX/lib,
    # then wherever the dynamic linker looks.
    candidates.append(os.path.join(here, "..", "..", "..", "libcudafs_client.so"))
    candidates.append("libcudafs_client.so")
    return candidates


@functools.lru_cache(maxsize=None)
def _lib() -> ctypes.CDLL:
    # Loaded on first use rather than at import, so that importing the
    # module works without it.
    errors = []
    for path in _library_candidates():
        try:
            library = ctypes.CDLL(path)
        except OSError as error:
            errors.append(str(error))
            continue
        library.cudafs_map.argtypes = [ctypes.c_char_p, ctypes.c_int,
                                       ctypes.POINTER(ctypes.c_void_p)]
        library.cudafs_unmap.argtypes = [ctypes.c_void_p]
        library.cudafs_sync.argtypes = [ctypes.c_void_p]
        for name, result in (("cudafs_mapping_address", ctypes.c_uint64),
                             ("cudafs_mapping_size", ctypes.c_uint64),
                             ("cudafs_mapping_memory", ctypes.c_int),
                             ("cudafs_mapping_device", ctypes.c_int)):
            getattr(library, name).argtypes = [ctypes.c_void_p]
            getattr(library, name).restype = result
        library.cudafs_mapping_move.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        library.cudafs_make_room.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint64,
                                             ctypes.c_int]
        library.cudafs_last_error.restype = ctypes.c_char_p
        return library
    raise OSError(errno.ELIBACC,
                  "libcudafs_client.so not found (pip install ./fs/client/python from a "
                  "cudafs checkout, or set CUDAFS_CLIENT_LIBRARY): " + "; ".join(errors))


def _raise(result: int, path: Optional[PathLike]) -> NoReturn:
    error = -result
    message = _lib().cudafs_last_error().decode(errors="replace")
    raise OSError(error, message or os.strerror(error), path)


class _Handle:
    """Owns one cudafs_mapping; unmapped by close() or when collected."""

    def __init__(self, path: PathLike, writable: bool) -> None:
        self._mapping = ctypes.c_void_p()
        result = _lib().cudafs_map(os.fsencode(path), _MAP_WRITABLE if writable else 0,
                                   ctypes.byref(self._mapping))
        if result != 0:
            _raise(result, path)
        self.address: int = _lib().cudafs_mapping_address(self._mapping)
        self.size: int = _lib().cudafs_mapping_size(self._mapping)
        self.memory: int = _lib().cudafs_mapping_memory(self._mapping)
        self.device: int = _lib().cudafs_mapping_device(self._mapping)
        self.path = path
        self.writable = writable

    def sync(self) -> None:
        result = _lib().cudafs_sync(self._mapping)
        if result != 0:
            _raise(result, self.path)

    def close(self) -> None:
        if self._mapping:
            mapping, self._mapping = self._mapping, ctypes.c_void_p()
            result = _lib().cudafs_unmap(mapping)
            if result != 0:
                _raise(result, None)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing to tell anyone
            pass


class Mapping:
    """A file of the mount mapped into this process by map(); a context
    manager that unmaps on exit.

    GPU memory (is_cuda): exposes __cuda_array_interface__ (uint8, one
    dimension), so torch.as_tensor(m, device="cuda") views it with no copy.
    Host memory: an mmap object (the buffer protocol: memoryview(m),
    numpy.frombuffer(m, numpy.uint8), torch.frombuffer), which refuses to
    close with BufferError while views of it exist.
    """

    def __init__(self, handle: _Handle) -> None:
        self._handle = handle

    @property
    def ptr(self) -> int:
        """The address: a CUdeviceptr for GPU memory, else a host address."""
        self._check_open()
        return self._handle.address

    @property
    def size(self) -> int:
        """The file's size when mapped: the bytes of the mapping."""
        return self._handle.size

    @property
    def is_cuda(self) -> bool:
        """Whether this is GPU memory (a GPU-backed mount)."""
        return self._handle.memory == _CUDA

    @property
    def device(self) -> Optional[int]:
        """The index of the GPU holding the first byte (where a tensor of
        the mapping lives), or None for host memory."""
        return self._handle.device if self.is_cuda else None

    @property
    def writable(self) -> bool:
        """Whether this is the file's own memory (map(writable=True))."""
        return self._handle.writable

    @property
    def closed(self) -> bool:
        """Whether close() was called."""
        return not self._handle._mapping

    def sync(self) -> None:
        """After writing through the mapping or through write(): each side
        sees the other's bytes (fsync, then the kernel's cached pages of the
        file are dropped and its mtime moves). Writable mappings only."""
        self._check_open()
        self._handle.sync()

    def close(self) -> None:
        """Unmaps. Tensors or views made from the mapping must be gone."""
        self._handle.close()

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("the mapping is closed")

    def __enter__(self) -> Mapping:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _CudaMapping(Mapping):
    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        self._check_open()
        return {"shape": (self._handle.size,), "typestr": "|u1",
                "data": (self._handle.address, False), "version": 3,
                "strides": None, "stream": None}

    def __len__(self) -> int:
        return self._handle.size

    def __repr__(self) -> str:
        state = "closed" if self.closed else "cuda:%d at 0x%x" % (self._handle.device, self.ptr)
        return "<cudafs.Mapping %d bytes, %s>" % (self.size, state)


class _HostMapping(Mapping, mmap.mmap):
    # An mmap object over the memory: the buffer protocol as the standard
    # library's (format "B": memoryview(m), numpy.frombuffer,
    # torch.frombuffer), no copy, and close() refuses with BufferError while
    # views of it exist, so none is left pointing at unmapped memory.
    _handle: _Handle

    def __init__(self, handle: _Handle) -> None:  # pylint: disable=super-init-not-called
        # mmap.mmap.__new__ made the range; the handle is the mapping's.
        self._handle = handle

    def __new__(cls, handle: _Handle) -> _HostMapping:
        return super().__new__(cls, -1, handle.size)  # type: ignore[call-arg]

    def close(self) -> None:
        """Unmaps; BufferError while memoryviews (or arrays, tensors) made
        from the mapping exist."""
        mmap.mmap.close(self)
        self._handle.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "host at 0x%x" % self.ptr
        return "<cudafs.Mapping %d bytes, %s>" % (self.size, state)


def _host_mapping(handle: _Handle) -> Mapping:
    mapping = _HostMapping(handle)
    anchor = ctypes.c_char.from_buffer(mapping)
    address = ctypes.addressof(anchor)
    del anchor  # holds a view of the mmap
    result = _lib().cudafs_mapping_move(handle._mapping, ctypes.c_void_p(address))
    if result != 0:
        mmap.mmap.close(mapping)
        handle.close()
        _raise(result, handle.path)
    handle.address = address
    return mapping


def map(path: PathLike, writable: bool = False) -> Mapping:
    """Maps the whole file at `path` (see the module's doc): a private
    copy of its bytes, or with writable=True the file's own memory.

    GPU memory comes in the calling thread's current CUDA context, or the
    device's primary context (the one PyTorch uses) when there is none.
    Raises OSError with the errno of fs/client/cudafs.h: EXDEV for a file
    not on cudafs, EINVAL for an empty one (or, writable, one under 2 MiB),
    EACCES without allow_other (or, writable, without write access),
    EOPNOTSUPP for a backend that cannot hand out memory.

        with cudafs.map("/mnt/gpu/data.bin") as m:
            t = torch.as_tensor(m, device="cuda")   # uint8, no copy
    """
    handle = _Handle(path, writable)
    if handle.memory == _CUDA:
        return _CudaMapping(handle)
    return _host_mapping(handle)


_SAFETENSORS_DTYPES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
    "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
    "BOOL": "bool", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
}


def load_safetensors(path: PathLike, device: Union[str, torch.device, None] = "cuda",
                     writable: bool = False) -> Dict[str, torch.Tensor]:
    """The tensors of a .safetensors file on the mount, as a dict of torch
    tensors that view one mapping of the file (no copy through the host):
    a private copy, or with writable=True the file's own memory (no VRAM of
    its own; writes to the tensors are the file's, see map()). The mapping
    lives as long as any of the tensors. `device` must be where the mapping
    is ("cuda" or "cuda:N" for a GPU-backed mount: on a mount over several
    GPUs, the one holding the file's start; "cpu" for a host-backed one;
    None for wherever it is); other devices raise ValueError (use .to()).
    Needs PyTorch.

        tensors = cudafs.load_safetensors("/mnt/gpu/model.safetensors")
        model.load_state_dict(tensors)
    """
    import torch

    with open(path, "rb") as f:
        (header_size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_size))
    mapping = map(path, writable=writable)
    if mapping.is_cuda:
        where = torch.device("cuda", mapping._handle.device)
        everything = torch.as_tensor(mapping, device=where)
        if everything.data_ptr() != mapping.ptr:
            # PyTorch placed the address elsewhere and copied it: writes
            # would miss the file.
            mapping.close()
            raise RuntimeError("PyTorch copied the mapping instead of viewing it")
    else:
        where = torch.device("cpu")
        everything = torch.frombuffer(mapping, dtype=torch.uint8)
    wanted = where if device is None else torch.device(device)
    if wanted.type != where.type or (wanted.index is not None and wanted.index != where.index):
        del everything  # a view of a host mapping, which would keep it from closing
        mapping.close()
        raise ValueError("the file is mapped on %s, not %s" % (where, wanted))
    start = 8 + header_size
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = getattr(torch, _SAFETENSORS_DTYPES[info["dtype"]])
        begin, end = info["data_offsets"]
        raw = everything[start + begin:start + end]
        tensors[name] = raw.view(dtype).reshape(info["shape"])
    return tensors


def make_room(mount: PathLike, size: Optional[int] = None, *, gpu: Optional[str] = None,
              hold: bool = False) -> None:
    """Moves data of the cudafs mounted at `mount` off its GPUs into host
    memory until `size` bytes are free on each GPU (None: every byte that
    can move), or only on the GPU whose PCI bus id is `gpu`
    ("0000:65:00.0"), and returns then; for a program that sizes itself
    from the GPU's free memory at start. Nothing is lost: files read the
    same, from host memory, and come back to the GPU once it has had room
    for a few seconds; `hold` keeps them off for 60 s. The daemon serves it
    over its socket (cudafs_make_room, as `cudafs --make-room`). The
    mount's owner or root may ask for anything; other users only for a
    size, without `hold` (OSError EPERM). OSError ENOSPC when no more data
    can move; EOPNOTSUPP on a mount holding no GPU memory or without host
    memory to move data to; EXDEV for a path that is not the root of a
    cudafs mount. The error's text is the daemon's.

        cudafs.make_room("/mnt/gpu", 71 << 30)   # then start the server
    """
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
        raise ValueError("size must be a byte count (an int >= 0) or None")
    flags = (_ROOM_ALL if size is None else 0) | (_ROOM_HOLD if hold else 0)
    result = _lib().cudafs_make_room(os.fsencode(mount), None if gpu is None else gpu.encode(),
                                     size or 0, flags)
    if result != 0:
        _raise(result, mount)


