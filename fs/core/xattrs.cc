// The extended-attribute operations of Filesystem (see filesystem_state.h
// for the one-place rule).
#include <sys/xattr.h>

#include <cerrno>
#include <string>

#include "absl/strings/match.h"
#include "alloc/base/errors.h"
#include "fs/core/filesystem.h"
#include "fs/core/filesystem_state.h"

namespace cudafs {
namespace {

constexpr size_t kXattrNameMax = 255;
constexpr size_t kXattrValueMax = 65536;

// The namespaces we keep. Who may read or write which namespace the
// kernel has checked (xattr_permission() and the LSM hooks, with
// capabilities).
absl::Status ValidateXattrName(absl::string_view name) {
  if (name.empty() || name.size() > kXattrNameMax) return PosixError(ERANGE);
  // A namespace with no name in it: the VFS says EINVAL for filesystems
  // with per-namespace handlers (xattr_resolve_name); FUSE leaves it to us.
  if (name == "trusted." || name == "security." || name == "user.") return PosixError(EINVAL);
  if (absl::StartsWith(name, "trusted.") || absl::StartsWith(name, "security.") ||
      absl::StartsWith(name, "user.")) {
    return absl::OkStatus();
  }
  return PosixError(EOPNOTSUPP);
}

}  // namespace

absl::Status Filesystem::SetExtendedAttribute(InodeNumber ino, absl::string_view name,
                                              absl::string_view value, int flags) {
  if (absl::Status status = ValidateXattrName(name); !status.ok()) return status;
  if (value.size() > kXattrValueMax) return PosixError(E2BIG);
  absl::StatusOr<std::shared_ptr<Inode>> found = state_->Get(ino);
  if (!found.ok()) return found.status();
  Inode& inode = **found;
  absl::MutexLock lock(&inode.mu);
  auto it = inode.xattrs.find(name);
  if ((flags & XATTR_CREATE) && it != inode.xattrs.end()) return PosixError(EEXIST);
  if ((flags & XATTR_REPLACE) && it == inode.xattrs.end()) return PosixError(ENODATA);
  const uint64_t old_bytes = it == inode.xattrs.end() ? 0 : Inode::XattrSpaceOf(name, it->second);
  const uint64_t new_bytes = Inode::XattrSpaceOf(name, value);
  if (new_bytes > old_bytes) {
    if (absl::Status status = state_->table.ReserveSpace(new_bytes - old_bytes); !status.ok()) {
      return status;
    }
  } else {
    state_->table.ReleaseSpace(old_bytes - new_bytes);
  }
  if (it == inode.xattrs.end()) {
    inode.xattrs.emplace(std::string(name), std::string(value));
  } else {
    it->second.assign(value.data(), value.size());
  }
  inode.ctime = Now();
  return absl::OkStatus();
}

absl::StatusOr<std::string> Filesystem::GetExtendedAttribute(InodeNumber ino,
                                                             absl::string_view name) {
  if (absl::Status status = ValidateXattrName(name); !status.ok()) return status;
  absl::StatusOr<std::shared_ptr<Inode>> found = state_->Get(ino);
  if (!found.ok()) return found.status();
  Inode& inode = **found;
  absl::ReaderMutexLock lock(&inode.mu);
  auto it = inode.xattrs.find(name);
  if (it == inode.xattrs.end()) return PosixError(ENODATA);
  return it->second;
}

absl::StatusOr<std::string> Filesystem::ListExtendedAttributes(InodeNumber ino,
                                                               const Caller& caller) {
  absl::StatusOr<std::shared_ptr<Inode>> found = state_->Get(ino);
  if (!found.ok()) return found.status();
  Inode& inode = **found;
  absl::ReaderMutexLock lock(&inode.mu);
  std::string names;
  for (const auto& [name, value] : inode.xattrs) {
    if (!ListsExtendedAttribute(name, caller)) continue;
    names.append(name);
    names.push_back('\0');
  }
  return names;
}

absl::Status Filesystem::RemoveExtendedAttribute(InodeNumber ino, absl::string_view name) {
  if (absl::Status status = ValidateXattrName(name); !status.ok()) return status;
  absl::StatusOr<std::shared_ptr<Inode>> found = state_->Get(ino);
  if (!found.ok()) return found.status();
  Inode& inode = **found;
  absl::MutexLock lock(&inode.mu);
  auto it = inode.xattrs.find(name);
  if (it == inode.xattrs.end()) return PosixError(ENODATA);
  state_->table.ReleaseSpace(Inode::XattrSpaceOf(name, it->second));
  inode.xattrs.erase(it);
  inode.ctime = Now();
  return absl::OkStatus();
}

}  // namespace cudafs
