// INIT's negotiation as a pure function: from the plan's FuseSettings and
// what the kernel offers, what INIT asks for, what was settled (Negotiated)
// and what to log. Init in fuse_ops.cc reads the connection, calls
// Negotiate and writes its answer back.
#ifndef CUDAFS_FS_FUSE_NEGOTIATION_H_
#define CUDAFS_FS_FUSE_NEGOTIATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "fs/fuse/fuse_settings.h"
#include "fs/fuse/kernel_settings.h"

namespace cudafs {

// What INIT settled with the kernel. Written by Init, before any other
// request; read-only after.
struct Negotiated {
  // How each open is served (decided per open, see ChooseDirectIo in
  // io_mode.h): with FOPEN_DIRECT_IO every read and write is one
  // request straight to us, in pieces of up to max_request, and no page of
  // file data is kept in host RAM, which is fastest for large streams;
  // through the kernel's page cache re-reads and small reads cost no
  // request at all. Files of at least `direct_io_min` bytes when opened,
  // and O_DIRECT opens, get direct I/O. The kernel refuses shared mmap of
  // direct-I/O files unless the connection negotiates
  // FUSE_DIRECT_IO_ALLOW_MMAP (kernel 6.6, libfuse 3.18 here), and keeps
  // the page cache coherent with direct writes only then, so without it no
  // file gets direct I/O by default.
  uint64_t direct_io_min = kNeverDirectIo;
  // FuseSettings::zero_message_open, where the kernel can open files
  // without a request.
  bool zero_message_open = false;
  // FUSE_HANDLE_KILLPRIV_V2: the kernel flags each write, truncate and
  // O_TRUNC open whose caller lacks CAP_FSETID. Without it the kernel
  // clears them itself, with a SETATTR of the mode, for everything but
  // direct-I/O writes, where the uid rule of Caller applies (see
  // DataChangerOf in fuse_replies.h).
  bool kernel_kills_set_id = false;

  bool operator==(const Negotiated&) const = default;
};

// What the kernel offers at INIT, as libfuse hands it to the init handler.
struct KernelOffer {
  // FUSE_CAP_* flags the kernel (and libfuse) support.
  uint64_t capable = 0;
  // FUSE_CAP_* flags libfuse asks for by default; kept unless declined.
  uint64_t wanted = 0;
  // CPUs configured: libfuse starts one io_uring queue per CPU.
  uint32_t cpus = 0;
};

// INIT's answer and what follows from it.
struct Negotiation {
  // The FUSE_CAP_* flags INIT asks for, in full (libfuse's defaults
  // included): each is one the kernel offers.
  uint64_t want = 0;
  uint32_t max_write = 0;
  uint32_t max_readahead = 0;
  uint32_t time_gran = 0;
  Negotiated negotiated;
  // Requests over io_uring, else over /dev/fuse (FuseStats::transport).
  bool uring = false;
  // FuseStats::uring_buffer_bytes and request_buffer_bytes.
  uint64_t uring_buffer_bytes = 0;
  uint64_t request_buffer_bytes = 0;
  // Lines for the log, in order.
  std::vector<std::string> log;
};

Negotiation Negotiate(const FuseSettings& settings, const KernelOffer& offer);

}  // namespace cudafs

#endif  // CUDAFS_FS_FUSE_NEGOTIATION_H_
