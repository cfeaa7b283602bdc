#include "fs/fuse/negotiation.h"

#include "absl/strings/str_format.h"
#include "alloc/base/sizes.h"
#include "fs/fuse/libfuse.h"

namespace cudafs {
namespace {

// Capabilities that an older libfuse cannot ask for, as 0: the kernel then
// never offers them, and nothing is asked or declined.
#if FUSE_VERSION >= FUSE_MAKE_VERSION(3, 18)
constexpr uint64_t kDirectIoAllowMmap = FUSE_CAP_DIRECT_IO_ALLOW_MMAP;
constexpr uint64_t kOverIoUring = FUSE_CAP_OVER_IO_URING;
#else
constexpr uint64_t kDirectIoAllowMmap = 0;
constexpr uint64_t kOverIoUring = 0;
#endif
#ifdef FUSE_CAP_HANDLE_KILLPRIV_V2
constexpr uint64_t kHandleKillPrivV2 = FUSE_CAP_HANDLE_KILLPRIV_V2;
#else
constexpr uint64_t kHandleKillPrivV2 = 0;
#endif

// The flags INIT asks for, starting from libfuse's defaults.
class Wants {
 public:
  explicit Wants(const KernelOffer& offer) : capable_(offer.capable), want_(offer.wanted) {}

  // Asks for `capability` if the kernel offers it; says whether it does.
  bool Ask(uint64_t capability) {
    if (capability == 0 || (capable_ & capability) != capability) return false;
    want_ |= capability;
    return true;
  }
  // Declines a capability libfuse may ask for by default.
  void Decline(uint64_t capability) { want_ &= ~capability; }

  uint64_t want() const { return want_; }

 private:
  const uint64_t capable_;
  uint64_t want_;
};

}  // namespace

Negotiation Negotiate(const FuseSettings& settings, const KernelOffer& offer) {
  Negotiation result;
  Negotiated& negotiated = result.negotiated;
  Wants wants(offer);
  // Shared mmap of direct-I/O files, through the page cache.
  const bool mmap_with_direct_io = wants.Ask(kDirectIoAllowMmap);
  // Over io_uring libfuse's ring threads (one per CPU) take requests and
  // call the same operations; RunSessionLoop still serves /dev/fuse, which
  // carries INIT, FORGET and interrupts.
  result.uring = settings.uring && wants.Ask(kOverIoUring);
  if (!settings.uring) wants.Decline(kOverIoUring);
  // Large requests: FUSE's per-request cost, not the copy, is the limit
  // (see docs/DESIGN.md, "Data path"). libfuse grants max_write up to the
  // size of the buffer the first request was received in (our
  // receive-buf-size patch), which RunSessionLoop sizes from max_request.
  result.max_write = static_cast<uint32_t>(settings.max_request);
  result.max_readahead = static_cast<uint32_t>(settings.max_request);
  // Every /dev/fuse worker holds a receive buffer (a request plus 8 KiB of
  // header room) and, once it has served a read, a read reply buffer; over
  // io_uring reads are answered from the ring entry's own buffer.
  uint64_t buffers = uint64_t{settings.workers} * (2 * settings.max_request + 8 * kKiB);
  if (result.uring) {
    result.uring_buffer_bytes = uint64_t{offer.cpus} * settings.uring_depth * result.max_write;
    buffers += result.uring_buffer_bytes;
    result.log.push_back(absl::StrFormat("requests over io_uring, %d queues of depth %d",
                                         offer.cpus, settings.uring_depth));
  } else {
    result.log.push_back(settings.uring
                             ? "the kernel did not offer io_uring: requests over /dev/fuse"
                             : "requests over /dev/fuse");
  }
  result.request_buffer_bytes = buffers;
  if (!settings.request_limit_note.empty()) result.log.push_back(settings.request_limit_note);
  result.log.push_back(absl::StrFormat(
      "asked for requests of up to %d KiB, readahead %d KiB; request buffers take up to %d MiB "
      "of host memory",
      result.max_write / kKiB, result.max_readahead / kKiB, (buffers + kMiB - 1) / kMiB));
  negotiated.direct_io_min = settings.requested_direct_io_min.value_or(
      mmap_with_direct_io ? kDefaultDirectIoMin : kNeverDirectIo);
  if (settings.zero_message_open) {
    // Existing files then never get an open reply to ask for direct I/O
    // in; new files still do (CREATE), and keep the default rule.
    negotiated.zero_message_open = wants.Ask(FUSE_CAP_NO_OPEN_SUPPORT);
    if (!negotiated.zero_message_open) {
      result.log.push_back(
          "the kernel cannot open files without a request: zero_message_open is off");
    }
  }
  // The kernel says, with the caller's CAP_FSETID, when a write, truncate
  // or O_TRUNC open must clear set-id bits; a FUSE request carries no
  // capabilities, so the daemon could only guess from the uid. (Without
  // it, direct-I/O writes would not clear them at all: the kernel leaves
  // that to the filesystem.)
  negotiated.kernel_kills_set_id = wants.Ask(kHandleKillPrivV2);
  if (!negotiated.kernel_kills_set_id) {
    // Without KILLPRIV_V2 the kernel removes set-id bits itself, with a
    // SETATTR of the new mode (see DataChangerOf), but only when the
    // filesystem does not claim FUSE_HANDLE_KILLPRIV (v1: "the filesystem
    // kills them on write, truncate and chown", which it could do only by
    // uid), so that is declined.
    wants.Decline(FUSE_CAP_HANDLE_KILLPRIV);
  }
  // O_TRUNC arrives with open instead of as a separate setattr, except:
  // - without KILLPRIV_V2: fuse_do_setattr() drops the ATTR_OPEN truncate,
  //   and the mode the kernel computed with it, when the OPEN already
  //   truncated, and the OPEN itself says nothing about CAP_FSETID;
  // - with zero_message_open: there is no OPEN to carry it (the kernel
  //   would take the truncate as done).
  // The kernel then truncates with a SETATTR (size 0 and, where due, the
  // mode) after the open, one more request per O_TRUNC open, as on every
  // local filesystem.
  if (!negotiated.kernel_kills_set_id || negotiated.zero_message_open ||
      !wants.Ask(FUSE_CAP_ATOMIC_O_TRUNC)) {
    wants.Decline(FUSE_CAP_ATOMIC_O_TRUNC);
  }
  wants.Ask(FUSE_CAP_EXPORT_SUPPORT);
  // Lookups and readdir in one directory run concurrently in the core.
  wants.Ask(FUSE_CAP_PARALLEL_DIROPS);
  result.want = wants.want();
  result.time_gran = 1;  // nanosecond timestamps
  return result;
}

}  // namespace cudafs
