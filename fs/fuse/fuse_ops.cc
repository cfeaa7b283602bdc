// The operations table, and INIT. Locks (flock and POSIX record locks) are
// deliberately not implemented: without getlk/setlk/flock handlers the
// kernel keeps them itself, which is exactly right for a filesystem that
// only this machine can reach.
#include "fs/fuse/fuse_ops.h"

#include <sys/sysinfo.h>

#include <chrono>
#include <string>

#include "alloc/base/log.h"
#include "fs/fuse/fuse_handlers.h"
#include "fs/fuse/fuse_replies.h"
#include "fs/fuse/negotiation.h"

namespace cudafs {
namespace fuse_glue {
namespace {

// CLOCK_MONOTONIC, read through the vDSO: no system call.
uint64_t MonotonicNanoseconds() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// INIT: what the kernel offers, negotiated (negotiation.h), written back.
void Init(void* userdata, fuse_conn_info* conn) {
  FuseContext& context = *static_cast<FuseContext*>(userdata);
#if FUSE_VERSION >= FUSE_MAKE_VERSION(3, 18)
  const KernelOffer offer{.capable = conn->capable_ext,
                          .wanted = conn->want_ext,
                          .cpus = static_cast<uint32_t>(get_nprocs_conf())};
#else
  const KernelOffer offer{.capable = conn->capable,
                          .wanted = conn->want,
                          .cpus = static_cast<uint32_t>(get_nprocs_conf())};
#endif
  const Negotiation negotiation = Negotiate(context.settings, offer);
#if FUSE_VERSION >= FUSE_MAKE_VERSION(3, 18)
  // Through libfuse's setters, which keep its record of the wants (and
  // the 32-bit want it converts) in step.
  for (int bit = 0; bit < 64; ++bit) {
    const uint64_t flag = uint64_t{1} << bit;
    if (negotiation.want & flag) {
      fuse_set_feature_flag(conn, flag);
    } else {
      fuse_unset_feature_flag(conn, flag);
    }
  }
#else
  conn->want = static_cast<unsigned>(negotiation.want);
#endif
  conn->max_write = negotiation.max_write;
  conn->max_readahead = negotiation.max_readahead;
  conn->time_gran = negotiation.time_gran;
  context.negotiated = negotiation.negotiated;
  context.stats.transport = negotiation.uring ? "io_uring" : "/dev/fuse";
  context.stats.uring_buffer_bytes = negotiation.uring_buffer_bytes;
  context.stats.request_buffer_bytes = negotiation.request_buffer_bytes;
  for (const std::string& line : negotiation.log) LogInfo(line);
}

// Serves a request with `handler`, counting it as `request` and the time
// the handler took. In the handlers, not in the session loop: over
// io_uring libfuse's own ring threads call them without passing through
// the loop.
template <FuseRequest request, auto handler>
struct Counted;

template <FuseRequest request, typename... Args, void (*handler)(fuse_req_t, Args...)>
struct Counted<request, handler> {
  static void Serve(fuse_req_t req, Args... args) {
    // Taken before the handler: its reply frees `req`.
    RequestCounters& counters = Context(req).stats.requests;
    counters.Count(request);
    const uint64_t began = MonotonicNanoseconds();
    handler(req, args...);
    counters.CountHandlerTime(request, MonotonicNanoseconds() - began);
  }
};

// Init, which gets the userdata instead of a request.
template <FuseRequest request, void (*handler)(void*, fuse_conn_info*)>
struct Counted<request, handler> {
  static void Serve(void* userdata, fuse_conn_info* conn) {
    RequestCounters& counters = static_cast<FuseContext*>(userdata)->stats.requests;
    counters.Count(request);
    const uint64_t began = MonotonicNanoseconds();
    handler(userdata, conn);
    counters.CountHandlerTime(request, MonotonicNanoseconds() - began);
  }
};

fuse_lowlevel_ops MakeOperations() {
  fuse_lowlevel_ops ops{};
  ops.init = Counted<FuseRequest::init, Init>::Serve;
  ops.lookup = Counted<FuseRequest::lookup, Lookup>::Serve;
  ops.forget = Counted<FuseRequest::forget, Forget>::Serve;
  ops.forget_multi = Counted<FuseRequest::batch_forget, ForgetMulti>::Serve;
  ops.getattr = Counted<FuseRequest::getattr, GetAttr>::Serve;
  ops.setattr = Counted<FuseRequest::setattr, SetAttr>::Serve;
  ops.readlink = Counted<FuseRequest::readlink, ReadLink>::Serve;
  ops.mknod = Counted<FuseRequest::mknod, MakeNode>::Serve;
  ops.mkdir = Counted<FuseRequest::mkdir, MakeDirectory>::Serve;
  ops.symlink = Counted<FuseRequest::symlink, SymbolicLink>::Serve;
  ops.link = Counted<FuseRequest::link, Link>::Serve;
  ops.unlink = Counted<FuseRequest::unlink, Unlink>::Serve;
  ops.rmdir = Counted<FuseRequest::rmdir, RemoveDirectory>::Serve;
  ops.rename = Counted<FuseRequest::rename, Rename>::Serve;
  ops.open = Counted<FuseRequest::open, Open>::Serve;
  ops.create = Counted<FuseRequest::create, Create>::Serve;
  ops.read = Counted<FuseRequest::read, Read>::Serve;
  ops.write = Counted<FuseRequest::write, Write>::Serve;
  ops.fsync = Counted<FuseRequest::fsync, Fsync>::Serve;
  // No flush or fsyncdir: close needs no round trip (dirty pages are written
  // back in the background, fsync waits for them), and directories live in
  // host memory. Without a handler the kernel stops asking after the first
  // ENOSYS and reports success to the caller.
  ops.release = Counted<FuseRequest::release, Release>::Serve;
  ops.opendir = Counted<FuseRequest::opendir, OpenDirectory>::Serve;
  ops.readdir = Counted<FuseRequest::readdir, ReadDirectory>::Serve;
  ops.readdirplus = Counted<FuseRequest::readdirplus, ReadDirectoryPlus>::Serve;
  ops.releasedir = Counted<FuseRequest::releasedir, ReleaseDirectory>::Serve;
  ops.statfs = Counted<FuseRequest::statfs, StatFs>::Serve;
  ops.setxattr = Counted<FuseRequest::setxattr, SetXattr>::Serve;
  ops.getxattr = Counted<FuseRequest::getxattr, GetXattr>::Serve;
  ops.listxattr = Counted<FuseRequest::listxattr, ListXattr>::Serve;
  ops.removexattr = Counted<FuseRequest::removexattr, RemoveXattr>::Serve;
  // No access: with default_permissions the kernel answers access(2)
  // itself, with capabilities, and never asks.
  ops.fallocate = Counted<FuseRequest::fallocate, Fallocate>::Serve;
  ops.copy_file_range = Counted<FuseRequest::copy_file_range, CopyFileRange>::Serve;
  ops.lseek = Counted<FuseRequest::lseek, Lseek>::Serve;
  return ops;
}

}  // namespace
}  // namespace fuse_glue

const fuse_lowlevel_ops& FuseOperations() {
  static const fuse_lowlevel_ops ops = fuse_glue::MakeOperations();
  return ops;
}

}  // namespace cudafs
