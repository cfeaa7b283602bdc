#include "fs/core/symlink_target.h"

#include <utility>

namespace cudafs {

absl::StatusOr<std::unique_ptr<const SymlinkTarget>> SymlinkTarget::Make(
    const ExtentMap::Space* space, absl::string_view target) {
  if (target.size() <= kShortMax) {
    return std::unique_ptr<const SymlinkTarget>(
        new SymlinkTarget(std::string(target), nullptr, target.size()));
  }
  auto blocks = std::make_unique<ExtentMap>(space);
  if (absl::Status status = blocks->Write(0, target.data(), target.size()); !status.ok()) {
    return status;
  }
  return std::unique_ptr<const SymlinkTarget>(
      new SymlinkTarget(std::string(), std::move(blocks), target.size()));
}

absl::StatusOr<std::string> SymlinkTarget::Read() const {
  if (!long_target_) return short_target_;
  std::string target(size_, '\0');
  if (absl::Status status = long_target_->Read(0, size_, target.data()); !status.ok()) {
    return status;
  }
  return target;
}

}  // namespace cudafs
