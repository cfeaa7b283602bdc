#include "fs/core/symlink_target.h"

#include <climits>
#include <utility>

#include "alloc/base/coding.h"
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

void SymlinkTarget::EncodeTo(std::string* out) const {
  PutVarint(out, size_);
  if (long_target_) {
    long_target_->EncodeTo(out);
  } else {
    PutBytes(out, short_target_);
  }
}

absl::StatusOr<std::unique_ptr<const SymlinkTarget>> SymlinkTarget::DecodeFrom(
    const ExtentMap::Space* space, absl::string_view* in) {
  uint64_t size = 0;
  if (!GetVarintUpTo(in, PATH_MAX - 1, &size) || size == 0) {
    return absl::InvalidArgumentError("symlink: no target length");
  }
  if (size > kShortMax) {
    auto blocks = std::make_unique<ExtentMap>(space);
    CUDAFS_RETURN_IF_ERROR(blocks->DecodeFrom(in));
    return std::unique_ptr<const SymlinkTarget>(
        new SymlinkTarget(std::string(), std::move(blocks), size));
  }
  absl::string_view target;
  if (!GetBytes(in, &target) || target.size() != size) {
    return absl::InvalidArgumentError("symlink: a record cut short");
  }
  return std::unique_ptr<const SymlinkTarget>(new SymlinkTarget(std::string(target), nullptr, size));
}

}  // namespace cudafs
