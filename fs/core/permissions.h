// Permissions: who asks (Caller), and the few permission rules the core
// applies itself, as pure functions of modes, owners and the caller, so
// that each is testable without an arena or a Filesystem.
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

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace cudafs {

// Who asks: the owner of what it creates, and whether a change of a file's
// data removes the file's set-user-ID and set-group-ID bits, which the
// kernel decides from CAP_FSETID and passes along (FUSE_HANDLE_KILLPRIV_V2).
class Caller {
 public:
  // Supplementary groups are fetched only when needed (for FUSE that means
  // reading /proc), and at most once.
  using GroupsFetcher = std::function<std::vector<gid_t>()>;
  // `drops_set_id` defaults to the rule used where the kernel gives no
  // verdict: everyone but uid 0.
  Caller(uid_t uid, gid_t gid, GroupsFetcher groups = nullptr)
      : uid_(uid), gid_(gid), drops_set_id_(uid != 0), fetch_groups_(std::move(groups)) {}
  static Caller Root() { return Caller(0, 0); }

  uid_t uid() const { return uid_; }
  gid_t gid() const { return gid_; }
  // True when gid is the caller's primary or a supplementary group.
  bool InGroup(gid_t gid) const;
  // Whether listxattr shows this caller trusted.* names, which tmpfs shows
  // to CAP_SYS_ADMIN only (listxattr reaches the filesystem without a
  // capability check). A FUSE request carries no capabilities: the glue
  // gives a check of what the calling process holds (it reads /proc, so it
  // runs only when a trusted.* name is there to show, and at most once);
  // without one, uid 0 stands in.
  using TrustedNamesCheck = std::function<bool()>;
  bool sees_trusted_names() const;
  Caller& set_trusted_names_check(TrustedNamesCheck check) {
    check_trusted_names_ = std::move(check);
    return *this;
  }
  // True when a write, truncate, fallocate or copy into a regular file by
  // this caller clears its set-user-ID bit, and its set-group-ID bit when
  // the group may execute or the caller is not in the group, as the
  // kernel's file_remove_privs() does for a caller without CAP_FSETID.
  bool drops_set_id() const { return drops_set_id_; }
  Caller& set_drops_set_id(bool drops) {
    drops_set_id_ = drops;
    return *this;
  }

 private:
  uid_t uid_;
  gid_t gid_;
  bool drops_set_id_;
  GroupsFetcher fetch_groups_;
  mutable std::optional<std::vector<gid_t>> groups_;
  TrustedNamesCheck check_trusted_names_;
  mutable std::optional<bool> sees_trusted_names_;
};

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
