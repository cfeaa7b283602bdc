#include "fs/core/permissions.h"

#include <sys/stat.h>

#include "absl/strings/match.h"

namespace cudafs {

Ownership OwnershipOfNew(mode_t mode, const Caller& caller, mode_t parent_mode, gid_t parent_gid) {
  // setgid directories hand their group down, and their setgid bit to
  // subdirectories. (Whether a new file may keep its own setgid bit the
  // kernel has decided already: mode_strip_sgid, with CAP_FSETID.)
  if (!(parent_mode & S_ISGID)) return Ownership{caller.uid(), caller.gid(), mode};
  if (S_ISDIR(mode)) mode |= S_ISGID;
  return Ownership{caller.uid(), parent_gid, mode};
}

mode_t ModeAfterDataChange(mode_t mode, gid_t gid, const Caller& caller) {
  // What a change of the data by `caller` does to set-id bits, for a caller
  // that the kernel says lacks CAP_FSETID: suid goes; sgid goes when the
  // group may execute, and otherwise when the caller is not in the file's
  // group (the kernel's setattr_should_drop_sgid).
  if (!caller.drops_set_id() || !S_ISREG(mode)) return mode;
  mode &= ~S_ISUID;
  if ((mode & S_ISGID) && ((mode & S_IXGRP) || !caller.InGroup(gid))) mode &= ~S_ISGID;
  return mode;
}

mode_t ModeAfterChown(mode_t mode) {
  // chown drops set-id bits of non-directories, even for root.
  if (S_ISDIR(mode)) return mode;
  mode &= ~S_ISUID;
  if (mode & S_IXGRP) mode &= ~S_ISGID;
  return mode;
}

bool ListsExtendedAttribute(absl::string_view name, const Caller& caller) {
  return !absl::StartsWith(name, "trusted.") || caller.sees_trusted_names();
}

}  // namespace cudafs
