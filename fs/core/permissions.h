// Permissions: the few permission rules the core applies itself, as pure
// functions of modes, owners and the caller, so that each is testable
// without an arena or a Filesystem.
//
// The mount always has default_permissions, so the kernel has already checked
// every request against the POSIX permission bits and the caller's
// capabilities (CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_CHOWN, CAP_MKNOD,
// CAP_SYS_ADMIN for trusted.*, ...) before it reaches the core, and the core
// applies no access check of its own (read, write, execute, the sticky
// directory rule, who may chmod, chown or set times): it could only
// approximate the kernel's with uid 0, and a FUSE request carries no
// capabilities. What the core still decides: the owner of what it creates,
// what a data change or a chown does to set-id bits, and who sees trusted.*
// names in a listing.
#ifndef CUDAFS_FS_CORE_PERMISSIONS_H_
#define CUDAFS_FS_CORE_PERMISSIONS_H_

#include <sys/types.h>

#include "absl/strings/string_view.h"
#include "fs/core/caller.h"

namespace cudafs {

// Owner, group and mode of an inode that `caller` creates with `mode` (type
// and permission bits) in a directory with `parent_mode` and `parent_gid`.
struct Ownership {
  uid_t uid;
  gid_t gid;
  mode_t mode;
};
Ownership OwnershipOfNew(mode_t mode, const Caller& caller, mode_t parent_mode, gid_t parent_gid);

// The mode (type and permission bits) of a file with group `gid` after
// `caller` changed its data: a write, truncate, fallocate or copy, or a
// setattr that asks for the same.
mode_t ModeAfterDataChange(mode_t mode, gid_t gid, const Caller& caller);

// The mode (type and permission bits) after a change of owner or group.
mode_t ModeAfterChown(mode_t mode);

// Whether listxattr shows extended attribute `name` to `caller`.
bool ListsExtendedAttribute(absl::string_view name, const Caller& caller);

}  // namespace cudafs

#endif  // CUDAFS_FS_CORE_PERMISSIONS_H_
