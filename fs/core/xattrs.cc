// The extended-attribute operations of Filesystem (see filesystem_state.h
// for the one-place rule).
#include <sys/xattr.h>

#include <cerrno>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "alloc/base/errors.h"
#include "alloc/base/status_macros.h"
#include "fs/core/filesystem.h"
#include "fs/core/filesystem_state.h"
#include "fs/core/journal_scope.h"

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

// The value of `inode`'s attribute `name`, or null.
const std::string* FindXattr(const Inode& inode, absl::string_view name)
    ABSL_SHARED_LOCKS_REQUIRED(inode.mu) {
  if (!inode.xattrs) return nullptr;
  auto it = inode.xattrs->find(name);
  return it == inode.xattrs->end() ? nullptr : &it->second;
}

absl::Status WhereIsReadOnly() {
  return PosixError(EPERM, absl::StrCat(kWhereAttribute, " says where a file's bytes are: "
                                        "it cannot be set or removed"));
}

absl::Status CudafsNamesAreNotStored(absl::string_view name) {
  return PosixError(EPERM, absl::StrCat(name, ": names under ", kCudafsAttributePrefix,
                                        " are cudafs's own control attributes, answered at "
                                        "the mount's root only; they cannot be stored"));
}

}  // namespace

absl::Status Filesystem::SetExtendedAttribute(InodeNumber ino, absl::string_view name,
                                              absl::string_view value, int flags) {
  CUDAFS_RETURN_IF_ERROR(ValidateXattrName(name));
  if (value.size() > kXattrValueMax) return PosixError(E2BIG);
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> found, state_->Get(ino));
  Inode& inode = *found;
  if (name == kWhereAttribute && inode.is_regular()) return WhereIsReadOnly();
  if (absl::StartsWith(name, kCudafsAttributePrefix)) return CudafsNamesAreNotStored(name);
  JournalScope journal(*state_);
  absl::MutexLock lock(&inode.mu);
  const std::string* old_value = FindXattr(inode, name);
  if ((flags & XATTR_CREATE) && old_value) return PosixError(EEXIST);
  if ((flags & XATTR_REPLACE) && !old_value) return PosixError(ENODATA);
  const uint64_t old_bytes = old_value ? Inode::XattrSpaceOf(name, *old_value) : 0;
  const uint64_t new_bytes = Inode::XattrSpaceOf(name, value);
  if (new_bytes > old_bytes) {
    CUDAFS_RETURN_IF_ERROR(state_->table.ReserveSpace(new_bytes - old_bytes));
  } else {
    state_->table.ReleaseSpace(old_bytes - new_bytes);
  }
  if (!inode.xattrs) inode.xattrs = std::make_unique<Inode::Xattrs>();
  inode.xattrs->insert_or_assign(std::string(name), std::string(value));
  inode.ctime = Now();
  JournalScope::Inode(ino);
  return absl::OkStatus();
}

absl::StatusOr<std::string> Filesystem::GetExtendedAttribute(InodeNumber ino,
                                                             absl::string_view name) {
  CUDAFS_RETURN_IF_ERROR(ValidateXattrName(name));
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> found, state_->Get(ino));
  Inode& inode = *found;
  if (name == kWhereAttribute && inode.is_regular()) return Where(ino);
  absl::ReaderMutexLock lock(&inode.mu);
  const std::string* value = FindXattr(inode, name);
  if (!value) return PosixError(ENODATA);
  return *value;
}

absl::StatusOr<std::string> Filesystem::ListExtendedAttributes(InodeNumber ino,
                                                               const Caller& caller) {
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> found, state_->Get(ino));
  Inode& inode = *found;
  absl::ReaderMutexLock lock(&inode.mu);
  std::string names;
  if (!inode.xattrs) return names;
  for (const auto& [name, value] : *inode.xattrs) {
    if (!ListsExtendedAttribute(name, caller)) continue;
    names.append(name);
    names.push_back('\0');
  }
  return names;
}

absl::Status Filesystem::RemoveExtendedAttribute(InodeNumber ino, absl::string_view name) {
  CUDAFS_RETURN_IF_ERROR(ValidateXattrName(name));
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> found, state_->Get(ino));
  Inode& inode = *found;
  if (name == kWhereAttribute && inode.is_regular()) return WhereIsReadOnly();
  JournalScope journal(*state_);
  absl::MutexLock lock(&inode.mu);
  const std::string* value = FindXattr(inode, name);
  if (!value) return PosixError(ENODATA);
  JournalScope::Inode(ino);
  state_->table.ReleaseSpace(Inode::XattrSpaceOf(name, *value));
  inode.xattrs->erase(name);
  if (inode.xattrs->empty()) inode.xattrs.reset();
  inode.ctime = Now();
  return absl::OkStatus();
}

}  // namespace cudafs
