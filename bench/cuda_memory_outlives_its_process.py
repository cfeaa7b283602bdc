#!/usr/bin/env python3
"""Whether GPU memory outlives the process that made it, held by a descriptor.

What surviving a daemon's crash rests on (docs/DESIGN.md, *A daemon that
dies, survived*): a process that never touches CUDA holds GPU memory
exported as a POSIX descriptor (cuMemExportToShareableHandle) while its
maker is killed with SIGKILL; a process started afterwards imports it and
reads the bytes written before the kill; once the holder closes it, the
GPU's memory is free again. Uses the driver through ctypes (no toolkit).
Prints each step, with the GPU's free memory; exits 1 if a byte differs.
Example:
  bench/cuda_memory_outlives_its_process.py --mib 1024
"""
import argparse
import ctypes
import hashlib
import os
import signal
import socket
import sys
import time

POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR


class Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class Prop(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", Location), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", AllocFlags)]


class Access(ctypes.Structure):
    _fields_ = [("location", Location), ("flags", ctypes.c_int)]


def driver():
    cu = ctypes.CDLL("libcuda.so.1")

    def call(name, *args):
        result = getattr(cu, name)(*args)
        if result != 0:
            raise SystemExit("%s failed: CUresult %d" % (name, result))

    call("cuInit", 0)
    context = ctypes.c_void_p()
    call("cuDevicePrimaryCtxRetain", ctypes.byref(context), 0)
    call("cuCtxSetCurrent", context)
    return call


def free_mib(call):
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    call("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
    return free.value >> 20


def mapped(call, handle, size):
    address = ctypes.c_uint64()
    call("cuMemAddressReserve", ctypes.byref(address), ctypes.c_size_t(size), ctypes.c_size_t(0),
         ctypes.c_uint64(0), ctypes.c_uint64(0))
    call("cuMemMap", address, ctypes.c_size_t(size), ctypes.c_size_t(0), handle, ctypes.c_uint64(0))
    access = Access(Location(1, 0), 3)  # the device, read and write
    call("cuMemSetAccess", address, ctypes.c_size_t(size), ctypes.byref(access), ctypes.c_size_t(1))
    return address


def copy(call, destination, source, size):
    """cuMemcpyAsync between two addresses (unified addressing), waited for."""
    call("cuMemcpyAsync", ctypes.c_uint64(destination), ctypes.c_uint64(source),
         ctypes.c_size_t(size), ctypes.c_void_p(0))
    call("cuCtxSynchronize")


def maker(size, channel):
    """Makes memory, writes it, sends it to the holder, and waits to die."""
    call = driver()
    prop = Prop(type=1, requestedHandleTypes=POSIX_FD, location=Location(1, 0))
    handle = ctypes.c_uint64()
    call("cuMemCreate", ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(prop),
         ctypes.c_uint64(0))
    address = mapped(call, handle, size)
    data = os.urandom(size)
    copy(call, address.value, ctypes.cast(data, ctypes.c_void_p).value, size)
    fd = ctypes.c_int()
    call("cuMemExportToShareableHandle", ctypes.byref(fd), handle, POSIX_FD, ctypes.c_uint64(0))
    socket.send_fds(channel, [hashlib.sha256(data).digest()], [fd.value])
    time.sleep(3600)


def reader(size, fd, digest):
    """Imports the memory in a new process and checks its bytes."""
    call = driver()
    handle = ctypes.c_uint64()
    call("cuMemImportFromShareableHandle", ctypes.byref(handle), ctypes.c_void_p(fd), POSIX_FD)
    address = mapped(call, handle, size)
    data = ctypes.create_string_buffer(size)
    copy(call, ctypes.addressof(data), address.value, size)
    same = hashlib.sha256(data.raw).digest() == digest
    print("reader: imported after the maker's death; bytes %s; GPU free %d MiB"
          % ("unchanged" if same else "DIFFER", free_mib(call)), flush=True)
    os._exit(0 if same else 1)


def probe_free():
    """The GPU's free memory, from a short-lived process."""
    pid = os.fork()
    if pid == 0:
        print("  GPU free %d MiB" % free_mib(driver()), flush=True)
        os._exit(0)
    os.waitpid(pid, 0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024)
    size = parser.parse_args().mib << 20
    # This process is the holder: it never loads the driver, so that
    # forked children may.
    ours, theirs = socket.socketpair()
    print("before:", flush=True)
    probe_free()
    pid = os.fork()
    if pid == 0:
        ours.close()
        maker(size, theirs)
    theirs.close()
    message, fds, _, _ = socket.recv_fds(ours, 64, 1)
    fd = fds[0]
    print("holder: got the memory's descriptor; killing the maker (SIGKILL)", flush=True)
    probe_free()
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    time.sleep(1)
    print("after the kill, the holder holding it:", flush=True)
    probe_free()
    child = os.fork()
    if child == 0:
        reader(size, fd, message)
    _, status = os.waitpid(child, 0)
    os.close(fd)
    time.sleep(1)
    print("after the holder closed it:", flush=True)
    probe_free()
    sys.exit(0 if os.waitstatus_to_exitcode(status) == 0 else 1)


if __name__ == "__main__":
    main()
