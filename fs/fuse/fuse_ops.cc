// FUSE glue. Locks (flock and POSIX record locks) are deliberately not
// implemented: without getlk/setlk/flock handlers the kernel keeps them
// itself, which is exactly right for a filesystem that only this machine
// can reach.
#include "fs/fuse/fuse_ops.h"

#include <linux/capability.h>
#include <sys/sysinfo.h>
#include <sys/xattr.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
#include "alloc/base/errors.h"
#include "alloc/base/log.h"
#include "alloc/devices/pinned_buffer.h"
#include "fs/fuse/io_mode.h"

namespace cudafs {
namespace {

FuseContext& Context(fuse_req_t req) {
  return *static_cast<FuseContext*>(fuse_req_userdata(req));
}

Filesystem& Fs(fuse_req_t req) { return *Context(req).filesystem; }

Caller CallerOf(fuse_req_t req) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  return Caller(ctx->uid, ctx->gid, [req]() {
    std::vector<gid_t> groups(64);
    int count = fuse_req_getgroups(req, static_cast<int>(groups.size()), groups.data());
    if (count > static_cast<int>(groups.size())) {
      groups.resize(count);
      count = fuse_req_getgroups(req, count, groups.data());
    }
    groups.resize(count > 0 ? count : 0);
    return groups;
  });
}

// The caller of a request that changes a file's data, with the kernel's
// verdict on its set-id bits (`kernel_kills`: the request's
// FUSE_*_KILL_SUIDGID flag under FUSE_HANDLE_KILLPRIV_V2, or the empty
// setattr described at SetAttr).
//
// Without KILLPRIV_V2 (libfuse 3.14 cannot ask for it, nor can anyone of
// a kernel before 5.11) the kernel gives its verdict another way: before a
// write through the page cache, a truncate (O_TRUNC opens included: see
// Negotiate), a fallocate or a copy_file_range it decides with the caller's
// CAP_FSETID, and
// fuse_setattr() sends the mode without the bits in a SETATTR of its own
// (file_remove_privs(), do_truncate()). The request that changes the data
// must then apply no rule of its own: the uid rule of Caller would clear
// the bits for a user with CAP_FSETID and keep them for root without it.
// What the kernel leaves to us is a direct-I/O write
// (fuse_direct_write_iter() removes nothing), where the uid rule is the
// best guess there is: `uid_rule_without_kernel`.
Caller DataChangerOf(fuse_req_t req, bool kernel_kills, bool uid_rule_without_kernel = false) {
  Caller caller = CallerOf(req);
  if (Context(req).negotiated.kernel_kills_set_id || !uid_rule_without_kernel) {
    caller.set_drops_set_id(kernel_kills);
  }
  return caller;
}

void ReplyError(fuse_req_t req, const absl::Status& status) {
  const int error = ToErrno(status);
  // Expected errors (ENOENT, EEXIST, ...) are the caller's business; an I/O
  // error is ours and worth one line.
  if (error == EIO) LogError(status.ToString());
  fuse_reply_err(req, error);
}

void ReplyStatus(fuse_req_t req, const absl::Status& status) {
  if (status.ok()) {
    fuse_reply_err(req, 0);
  } else {
    ReplyError(req, status);
  }
}

fuse_entry_param EntryOf(fuse_req_t req, const struct stat& st) {
  fuse_entry_param entry{};
  entry.ino = st.st_ino;
  entry.generation = Context(req).settings.generation;
  entry.attr = st;
  entry.attr_timeout = Context(req).settings.attr_timeout;
  entry.entry_timeout = Context(req).settings.entry_timeout;
  return entry;
}

void ReplyEntry(fuse_req_t req, const absl::StatusOr<struct stat>& st) {
  if (!st.ok()) return ReplyError(req, st.status());
  fuse_entry_param entry = EntryOf(req, *st);
  // If the kernel cannot take the reply (the caller was interrupted), it
  // never learns of the reference we added.
  if (fuse_reply_entry(req, &entry) != 0) Fs(req).Forget(st->st_ino, 1);
}

// A per-thread buffer for read replies, from the device so that a GPU
// device can fill it with one DMA (pinned memory).
// Sized for the largest request at once (`max_request`), so that it is
// allocated once per thread.
char* ReadBuffer(Device& device, size_t size, size_t max_request) {
  thread_local PinnedBuffer buffer;
  if (buffer.size() < size || buffer.device() != &device) {
    buffer = PinnedBuffer(&device, std::max<size_t>(size, max_request));
  }
  return buffer.data();
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

void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  absl::StatusOr<struct stat> st = Fs(req).Lookup(parent, name);
  if (absl::IsNotFound(st.status()) || ToErrno(st.status()) == ENOENT) {
    // A negative entry (inode 0) lets the kernel cache "no such name" like
    // any other: creating a file then costs no LOOKUP round trip. Every
    // create goes through this connection, which drops the negative entry.
    fuse_entry_param negative{};
    negative.entry_timeout = Context(req).settings.entry_timeout;
    fuse_reply_entry(req, &negative);
    return;
  }
  ReplyEntry(req, st);
}

void Forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  Context(req).stats.requests.CountForgotten(1);
  Fs(req).Forget(ino, nlookup);
  fuse_reply_none(req);
}

void ForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  Context(req).stats.requests.CountForgotten(count);
  for (size_t i = 0; i < count; ++i) Fs(req).Forget(forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

void GetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  absl::StatusOr<struct stat> st = Fs(req).GetAttributes(ino);
  if (!st.ok()) return ReplyError(req, st.status());
  fuse_reply_attr(req, &*st, Context(req).settings.attr_timeout);
}

void SetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info*) {
  AttributeChanges changes;
  if (to_set & FUSE_SET_ATTR_MODE) changes.mode = attr->st_mode;
  if (to_set & FUSE_SET_ATTR_UID) changes.uid = attr->st_uid;
  if (to_set & FUSE_SET_ATTR_GID) changes.gid = attr->st_gid;
  if (to_set & FUSE_SET_ATTR_SIZE) changes.size = attr->st_size;
  if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW)) {
    changes.atime = AttributeChanges::Time{(to_set & FUSE_SET_ATTR_ATIME_NOW) != 0, attr->st_atim};
  }
  if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) {
    changes.mtime = AttributeChanges::Time{(to_set & FUSE_SET_ATTR_MTIME_NOW) != 0, attr->st_mtim};
  }
  if (to_set & FUSE_SET_ATTR_CTIME) changes.ctime = attr->st_ctim;
  // Under FUSE_HANDLE_KILLPRIV_V2 the kernel leaves removing set-id bits to
  // us and says when: FATTR_KILL_SUIDGID (the bit of FUSE_SET_ATTR_KILL_SUID)
  // with a truncate by a caller without CAP_FSETID (with a chown it is
  // always there, and the core's chown rule applies), and a setattr that
  // changes nothing, which is what chown(f, -1, -1) and the kernel's
  // file_remove_privs() (before a fallocate or copy_file_range by a caller
  // without CAP_FSETID) send.
  // Without KILLPRIV_V2 the kernel sends the mode itself (see
  // DataChangerOf), worked out again in fuse_setattr() by a narrower rule
  // than file_remove_privs(): suid, and sgid only with group execute. When
  // the kernel decided that a caller without CAP_FSETID outside the file's
  // group clears sgid without group execute, as tmpfs does, that leaves
  // nothing to send, and what arrives is the same empty setattr, for the
  // core to clear it. (A truncate carries the size, so there that case
  // keeps its sgid, as on any FUSE filesystem without KILLPRIV_V2.)
  constexpr int kAttributeBits = FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID |
                                 FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME |
                                 FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW;
  changes.remove_set_id = !(to_set & kAttributeBits);
  const bool kernel_kills = (to_set & FUSE_SET_ATTR_KILL_SUID) || changes.remove_set_id;
  absl::StatusOr<struct stat> st =
      Fs(req).SetAttributes(ino, changes, DataChangerOf(req, kernel_kills));
  if (!st.ok()) return ReplyError(req, st.status());
  fuse_reply_attr(req, &*st, Context(req).settings.attr_timeout);
}

void ReadLink(fuse_req_t req, fuse_ino_t ino) {
  absl::StatusOr<std::string> target = Fs(req).ReadLink(ino);
  if (!target.ok()) return ReplyError(req, target.status());
  fuse_reply_readlink(req, target->c_str());
}

void MakeNode(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  ReplyEntry(req, Fs(req).MakeNode(parent, name, mode, rdev, CallerOf(req)));
}

void MakeDirectory(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  ReplyEntry(req, Fs(req).MakeDirectory(parent, name, mode, CallerOf(req)));
}

void SymbolicLink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
  ReplyEntry(req, Fs(req).SymbolicLink(parent, name, target, CallerOf(req)));
}

void Link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t new_parent, const char* new_name) {
  ReplyEntry(req, Fs(req).Link(ino, new_parent, new_name));
}

void Unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  ReplyStatus(req, Fs(req).Unlink(parent, name));
}

void RemoveDirectory(fuse_req_t req, fuse_ino_t parent, const char* name) {
  ReplyStatus(req, Fs(req).RemoveDirectory(parent, name));
}

void Rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent,
            const char* new_name, unsigned int flags) {
  ReplyStatus(req, Fs(req).Rename(parent, name, new_parent, new_name, flags));
}

void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  // Under zero_message_open the first OPEN's ENOSYS tells the kernel to open
  // every file itself from then on (FUSE_CAP_NO_OPEN_SUPPORT): the open
  // succeeds, with the page cache kept, and no RELEASE follows.
  if (Context(req).negotiated.zero_message_open) return (void)fuse_reply_err(req, ENOSYS);
  absl::StatusOr<uint64_t> size = Fs(req).Open(ino, fi->flags, DataChangerOf(req, KernelKills(fi)));
  if (!size.ok()) return ReplyError(req, size.status());
  const bool direct_io = ChooseDirectIo(Context(req).negotiated, fi->flags, *size);
  SetCaching(direct_io, fi);
  if (MarksAccessAtOpen(fi->flags, direct_io)) Fs(req).MarkAccessed(ino);
  if (fuse_reply_open(req, fi) != 0) Fs(req).Release(ino);
}

void Create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
            fuse_file_info* fi) {
  // Under zero_message_open no RELEASE comes for any file once the kernel
  // opens files itself (fuse_file_put() checks that when the file is
  // closed), so no handle is counted: see Release.
  const bool counted = !Context(req).negotiated.zero_message_open;
  absl::StatusOr<struct stat> st =
      Fs(req).Create(parent, name, mode, fi->flags, CallerOf(req),
                     counted ? Filesystem::Handle::kCounted : Filesystem::Handle::kUncounted);
  if (!st.ok()) return ReplyError(req, st.status());
  fuse_entry_param entry = EntryOf(req, *st);
  SetCaching(ChooseDirectIo(Context(req).negotiated, fi->flags, std::nullopt), fi);
  if (fuse_reply_create(req, &entry, fi) != 0) {
    if (counted) Fs(req).Release(st->st_ino);
    Fs(req).Forget(st->st_ino, 1);
  }
}

// The request's io_uring payload buffer, registered with the device, when
// the request came over io_uring and the buffer holds `size` bytes; else
// nullptr.
char* UringPayload(fuse_req_t req, size_t size) {
#if FUSE_VERSION >= FUSE_MAKE_VERSION(3, 18)
  if (!fuse_req_is_uring(req)) return nullptr;
  char* payload = nullptr;
  size_t capacity = 0;
  if (fuse_req_get_payload(req, &payload, &capacity, nullptr) != 0 || capacity < size) {
    return nullptr;
  }
  Context(req).uring_buffers->Prepare(payload, capacity);
  return payload;
#else
  (void)req;
  (void)size;
  return nullptr;
#endif
}

void Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, fuse_file_info* fi) {
  // Over io_uring the reply goes out of the payload buffer: filling it
  // directly saves libfuse's copy into it.
  char* buffer = UringPayload(req, size);
  if (buffer == nullptr) {
    buffer = ReadBuffer(*Context(req).device, size, Context(req).settings.max_request);
  }
  if (!buffer) {
    fuse_reply_err(req, ENOMEM);
    return;
  }
  absl::StatusOr<size_t> got =
      Fs(req).Read(ino, offset, size, buffer, (fi->flags & O_NOATIME) == 0);
  if (!got.ok()) return ReplyError(req, got.status());
  fuse_reply_buf(req, buffer, *got);
}

void Write(fuse_req_t req, fuse_ino_t ino, const char* data, size_t size, off_t offset,
           fuse_file_info* fi) {
  // Over io_uring `data` is the payload buffer; registering it lets the
  // device DMA from it.
  UringPayload(req, size);
  const Caller caller =
      DataChangerOf(req, KernelKills(fi), /*uid_rule_without_kernel=*/IsDirectIoOpen(fi));
  absl::StatusOr<size_t> written =
      Fs(req).Write(ino, offset, data, size, (fi->flags & O_APPEND) != 0, caller);
  if (!written.ok()) return ReplyError(req, written.status());
  fuse_reply_write(req, *written);
}

// Returns once the file's cached writes are in the arena. Without a cache
// there is nothing to wait for: ENOSYS makes the kernel stop asking, and
// fsync then costs no round trip.
void Fsync(fuse_req_t req, fuse_ino_t ino, int /*datasync*/, fuse_file_info*) {
  if (!Context(req).settings.cache) {
    fuse_reply_err(req, ENOSYS);
    return;
  }
  ReplyStatus(req, Fs(req).Fsync(ino));
}

// Under zero_message_open nothing was counted (see Create); a RELEASE may
// still come for a file created before the kernel learned to open files
// itself, and is not one.
void Release(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  if (!Context(req).negotiated.zero_message_open) Fs(req).Release(ino);
  fuse_reply_err(req, 0);
}

// Directories are opened with a request, although nothing needs it: with
// FUSE_CAP_NO_OPENDIR_SUPPORT and attributes cached for a day, opening the
// mount's root succeeds from the kernel's caches even when the daemon has
// died and the kernel has not yet aborted the connection (over io_uring
// that can take a while), and fusermount3's auto_unmount, which unmounts
// only when that open fails with ENOTCONN, would leave the dead mount
// behind. With OPENDIR the open waits for the abort and fails.
//
// The kernel's readdir cache (FOPEN_CACHE_DIR) is not asked for: it takes
// in a READDIR reply whenever it arrives, checking the directory's version
// at that moment, not when the request was sent. A listing answered before
// an unlink and delivered after another lister restarted the cache stays
// in it, and the unlinker's next listing shows the name it removed (75 of
// 12,477 rounds; DirectoryListingTest). No notification from here can be
// ordered after a reply's delivery. docs/BENCHMARKS.md has what it cost.
void OpenDirectory(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  absl::StatusOr<struct stat> st = Fs(req).GetAttributes(ino);
  if (!st.ok()) return ReplyError(req, st.status());
  if (!S_ISDIR(st->st_mode)) return (void)fuse_reply_err(req, ENOTDIR);
  fuse_reply_open(req, fi);
}

void ReadDirectoryCommon(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, bool plus) {
  std::vector<char> buffer(size);
  size_t used = 0;
  absl::Status status = Fs(req).ReadDirectory(
      ino, static_cast<uint64_t>(offset), plus, [&](const DirectoryEntry& entry) {
        char* out = buffer.data() + used;
        const size_t room = size - used;
        size_t needed;
        if (plus) {
          fuse_entry_param param{};
          const bool dot = entry.name == "." || entry.name == "..";
          if (dot) {
            // The kernel takes no reference for these; ino 0 says so.
            param.attr.st_ino = entry.attr.st_ino;
            param.attr.st_mode = entry.attr.st_mode;
          } else {
            param = EntryOf(req, entry.attr);
          }
          needed = fuse_add_direntry_plus(req, out, room, entry.name.c_str(), &param,
                                          static_cast<off_t>(entry.next_cookie));
        } else {
          needed = fuse_add_direntry(req, out, room, entry.name.c_str(), &entry.attr,
                                     static_cast<off_t>(entry.next_cookie));
        }
        if (needed > room) return false;
        used += needed;
        return true;
      });
  if (!status.ok()) return ReplyError(req, status);
  fuse_reply_buf(req, buffer.data(), used);
}

void ReadDirectory(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, fuse_file_info*) {
  ReadDirectoryCommon(req, ino, size, offset, /*plus=*/false);
}

void ReadDirectoryPlus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
                       fuse_file_info*) {
  ReadDirectoryCommon(req, ino, size, offset, /*plus=*/true);
}

void ReleaseDirectory(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }

void StatFs(fuse_req_t req, fuse_ino_t) {
  struct statvfs st = Fs(req).StatFs();
  fuse_reply_statfs(req, &st);
}

// The control plane, for an attribute of the root directory; else null.
ControlAttributes* ControlOf(fuse_req_t req, fuse_ino_t ino) {
  return ino == FUSE_ROOT_ID ? Context(req).control : nullptr;
}

void SetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size,
              int flags) {
  if (ControlAttributes* control = ControlOf(req, ino)) {
    if (std::optional<absl::Status> status =
            control->Set(name, absl::string_view(value, size), fuse_req_ctx(req)->uid)) {
      return ReplyStatus(req, *status);
    }
  }
  ReplyStatus(req, Fs(req).SetExtendedAttribute(ino, name, absl::string_view(value, size), flags));
}

// getxattr/listxattr protocol: size 0 asks for the length; a buffer too
// small is ERANGE.
void ReplySized(fuse_req_t req, const absl::StatusOr<std::string>& value, size_t size) {
  if (!value.ok()) return ReplyError(req, value.status());
  if (size == 0) return (void)fuse_reply_xattr(req, value->size());
  if (value->size() > size) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, value->data(), value->size());
}

void GetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  if (ControlAttributes* control = ControlOf(req, ino)) {
    if (std::optional<absl::StatusOr<std::string>> value =
            control->Get(name, fuse_req_ctx(req)->uid)) {
      return ReplySized(req, *value, size);
    }
  }
  ReplySized(req, Fs(req).GetExtendedAttribute(ino, name), size);
}

// Whether process `pid` holds `capability` in its effective set, from
// /proc (as libfuse reads supplementary groups); nullopt when that cannot
// be read: the process is gone, or lives in a PID namespace the daemon
// cannot see (the kernel sends pid 0 then).
std::optional<bool> HasCapability(pid_t pid, int capability) {
  if (pid <= 0) return std::nullopt;
  std::FILE* status = std::fopen(absl::StrFormat("/proc/%d/status", pid).c_str(), "re");
  if (status == nullptr) return std::nullopt;
  std::optional<bool> held;
  char line[256];
  unsigned long long effective;
  while (std::fgets(line, sizeof line, status) != nullptr) {
    if (std::sscanf(line, "CapEff: %llx", &effective) == 1) {
      held = (effective >> capability) & 1;
      break;
    }
  }
  std::fclose(status);
  return held;
}

// tmpfs lists trusted.* names to callers with CAP_SYS_ADMIN. A process that
// exits and whose pid is reused between its request and this read could
// get the other process's answer: names only, as reading or writing a
// trusted.* value is checked by the kernel itself.
void ListXattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  Caller caller = CallerOf(req);
  const fuse_ctx* ctx = fuse_req_ctx(req);
  caller.set_trusted_names_check([pid = ctx->pid, uid = ctx->uid] {
    return HasCapability(pid, CAP_SYS_ADMIN).value_or(uid == 0);
  });
  ReplySized(req, Fs(req).ListExtendedAttributes(ino, caller), size);
}

void RemoveXattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  if (ControlAttributes* control = ControlOf(req, ino)) {
    if (std::optional<absl::Status> status = control->Remove(name)) {
      return ReplyStatus(req, *status);
    }
  }
  ReplyStatus(req, Fs(req).RemoveExtendedAttribute(ino, name));
}

void Fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
               fuse_file_info*) {
  if (offset < 0 || length <= 0) {
    fuse_reply_err(req, EINVAL);
    return;
  }
  // The kernel's verdict on set-id bits, if it gives one, came before as
  // an empty setattr (see SetAttr).
  ReplyStatus(req, Fs(req).Allocate(ino, mode, offset, length, DataChangerOf(req, false)));
}

void CopyFileRange(fuse_req_t req, fuse_ino_t in, off_t in_offset, fuse_file_info*,
                   fuse_ino_t out, off_t out_offset, fuse_file_info*, size_t length, int) {
  absl::StatusOr<size_t> copied =
      Fs(req).CopyFileRange(in, in_offset, out, out_offset, length, DataChangerOf(req, false));
  if (!copied.ok()) return ReplyError(req, copied.status());
  fuse_reply_write(req, *copied);
}

void Lseek(fuse_req_t req, fuse_ino_t ino, off_t offset, int whence, fuse_file_info*) {
  if (offset < 0) {
    fuse_reply_err(req, ENXIO);
    return;
  }
  absl::StatusOr<uint64_t> position = Fs(req).Seek(ino, offset, whence);
  if (!position.ok()) return ReplyError(req, position.status());
  fuse_reply_lseek(req, static_cast<off_t>(*position));
}

// Serves a request with `handler` after counting it as `request`. In the
// handlers, not in the session loop: over io_uring libfuse's own ring
// threads call them without passing through the loop.
template <FuseRequest request, auto handler>
struct Counted;

template <FuseRequest request, typename... Args, void (*handler)(fuse_req_t, Args...)>
struct Counted<request, handler> {
  static void Serve(fuse_req_t req, Args... args) {
    Context(req).stats.requests.Count(request);
    handler(req, args...);
  }
};

// Init, which gets the userdata instead of a request.
template <FuseRequest request, void (*handler)(void*, fuse_conn_info*)>
struct Counted<request, handler> {
  static void Serve(void* userdata, fuse_conn_info* conn) {
    static_cast<FuseContext*>(userdata)->stats.requests.Count(request);
    handler(userdata, conn);
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

const fuse_lowlevel_ops& FuseOperations() {
  static const fuse_lowlevel_ops ops = MakeOperations();
  return ops;
}

}  // namespace cudafs
