// Handlers of file data and open files.
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "alloc/devices/pinned_buffer.h"
#include "fs/fuse/fuse_handlers.h"
#include "fs/fuse/fuse_replies.h"
#include "fs/fuse/io_mode.h"
#include "fs/fuse/resent_requests.h"

namespace cudafs::fuse_glue {
namespace {

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

}  // namespace

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

void Create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  // Under zero_message_open no RELEASE comes for any file once the kernel
  // opens files itself (fuse_file_put() checks that when the file is
  // closed), so no handle is counted: see Release.
  const bool counted = !Context(req).negotiated.zero_message_open;
  absl::StatusOr<struct stat> st = MadeBefore(
      req,
      Fs(req).Create(parent, name, mode, fi->flags, CallerOf(req),
                     counted ? Filesystem::Handle::kCounted : Filesystem::Handle::kUncounted),
      parent, name, S_IFREG);
  if (!st.ok()) return ReplyError(req, st.status());
  fuse_entry_param entry = EntryOf(req, *st);
  SetCaching(ChooseDirectIo(Context(req).negotiated, fi->flags, std::nullopt), fi);
  if (fuse_reply_create(req, &entry, fi) != 0) {
    if (counted) Fs(req).Release(st->st_ino);
    Fs(req).Forget(st->st_ino, 1);
  }
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
      Fs(req).Write(ino, offset, data, size, AppendsAtTheEnd(fi), caller);
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

void CopyFileRange(fuse_req_t req, fuse_ino_t in, off_t in_offset, fuse_file_info*, fuse_ino_t out,
                   off_t out_offset, fuse_file_info*, size_t length, int) {
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

}  // namespace cudafs::fuse_glue
