// Caller: who asks for an operation, as the core needs to know it (the
// permission rules themselves are in permissions.h).
#ifndef CUDAFS_FS_CORE_CALLER_H_
#define CUDAFS_FS_CORE_CALLER_H_

#include <sys/types.h>

#include <functional>
#include <optional>
#include <utility>
#include <vector>

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

}  // namespace cudafs

#endif  // CUDAFS_FS_CORE_CALLER_H_
