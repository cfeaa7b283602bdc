#include "fs/fuse/fuse_replies.h"

#include <cerrno>
#include <vector>

#include "alloc/base/errors.h"
#include "alloc/base/log.h"

namespace cudafs::fuse_glue {

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

Caller DataChangerOf(fuse_req_t req, bool kernel_kills, bool uid_rule_without_kernel) {
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

}  // namespace cudafs::fuse_glue
