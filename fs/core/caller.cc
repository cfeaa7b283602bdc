#include "fs/core/caller.h"

#include <algorithm>

namespace cudafs {

bool Caller::InGroup(gid_t gid) const {
  if (gid == gid_) return true;
  if (!fetch_groups_) return false;
  if (!groups_) groups_ = fetch_groups_();
  return std::find(groups_->begin(), groups_->end(), gid) != groups_->end();
}

bool Caller::sees_trusted_names() const {
  if (!sees_trusted_names_) {
    sees_trusted_names_ = check_trusted_names_ ? check_trusted_names_() : uid_ == 0;
  }
  return *sees_trusted_names_;
}

}  // namespace cudafs
