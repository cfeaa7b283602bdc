// Handlers of extended attributes. The root's go to the control plane
// first (control_attributes.h).
#include <linux/capability.h>
#include <sys/xattr.h>

#include <cerrno>
#include <cstdio>
#include <optional>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "fs/fuse/control_attributes.h"
#include "fs/fuse/fuse_handlers.h"
#include "fs/fuse/fuse_replies.h"
#include "fs/fuse/resent_requests.h"

namespace cudafs::fuse_glue {
namespace {

// The control plane, for an attribute of the root directory; else null.
ControlAttributes* ControlOf(fuse_req_t req, fuse_ino_t ino) {
  return ino == FUSE_ROOT_ID ? Context(req).control : nullptr;
}

// getxattr/listxattr protocol: size 0 asks for the length; a buffer too
// small is ERANGE.
void ReplySized(fuse_req_t req, const absl::StatusOr<std::string>& value, size_t size) {
  if (!value.ok()) return ReplyError(req, value.status());
  if (size == 0) return (void)fuse_reply_xattr(req, value->size());
  if (value->size() > size) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, value->data(), value->size());
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

}  // namespace

void SetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size,
              int flags) {
  if (ControlAttributes* control = ControlOf(req, ino)) {
    if (std::optional<absl::Status> status =
            control->Set(name, absl::string_view(value, size), fuse_req_ctx(req)->uid)) {
      return ReplyStatus(req, *status);
    }
  }
  ReplyStatus(req, DoneBefore(Fs(req).SetExtendedAttribute(ino, name,
                                                           absl::string_view(value, size), flags),
                              (flags & XATTR_CREATE) != 0 ? EEXIST : 0));
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
  ReplyStatus(req, DoneBefore(Fs(req).RemoveExtendedAttribute(ino, name), ENODATA));
}

}  // namespace cudafs::fuse_glue
