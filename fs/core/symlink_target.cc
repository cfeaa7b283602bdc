#include "fs/core/symlink_target.h"

#include <utility>

#include "alloc/base/status_macros.h"

namespace cudafs {

absl::StatusOr<std::unique_ptr<const SymlinkTarget>> SymlinkTarget::Make(
    const ExtentMap::Space* space, absl::string_view target) {
  if (target.size() <= kShortMax) {
    return std::unique_ptr<const SymlinkTarget>(
        new SymlinkTarget(std::string(target), nullptr, target.size()));
  }
  auto blocks = std::make_unique<ExtentMap>(space);
  CUDAFS_RETURN_IF_ERROR(blocks->Write(0, target.data(), target.size()));
  return std::unique_ptr<const SymlinkTarget>(
      new SymlinkTarget(std::string(), std::move(blocks), target.size()));
}

absl::StatusOr<std::string> SymlinkTarget::Read() const {
  if (!long_target_) return short_target_;
  std::string target(size_, '\0');
  CUDAFS_RETURN_IF_ERROR(long_target_->Read(0, size_, target.data()));
  return target;
}

}  // namespace cudafs
