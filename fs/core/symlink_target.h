// SymlinkTarget: the target of a symbolic link, kept as tmpfs keeps it.
// Short targets live in host memory beside the inode; a long one takes a
// block of the arena (min_block), counted against size= as tmpfs counts the
// page it puts such a target in, so that links can neither fill the
// daemon's memory nor store more than the mount's size.
#ifndef CUDAFS_FS_CORE_SYMLINK_TARGET_H_
#define CUDAFS_FS_CORE_SYMLINK_TARGET_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "alloc/storage/arena.h"
#include "alloc/storage/extent_map.h"

namespace cudafs {

class SymlinkTarget {
 public:
  // Longest target kept in host memory (tmpfs: SHORT_SYMLINK_LEN - 1).
  static constexpr size_t kShortMax = 127;

  // ENOSPC when a long target finds no room in the arena of `space`, which
  // must outlive the target.
  static absl::StatusOr<std::unique_ptr<const SymlinkTarget>> Make(const ExtentMap::Space* space,
                                                                   absl::string_view target);

  // The target as a record of a filesystem image (alloc/base/coding.h): a
  // long one by its block, which DecodeFrom claims in the arena of `space`
  // (InvalidArgument for a record that is none).
  void EncodeTo(std::string* out) const;
  static absl::StatusOr<std::unique_ptr<const SymlinkTarget>> DecodeFrom(
      const ExtentMap::Space* space, absl::string_view* in);

  // The target; an I/O error when the arena cannot be read.
  absl::StatusOr<std::string> Read() const;
  size_t size() const { return size_; }

 private:
  SymlinkTarget(std::string short_target, std::unique_ptr<ExtentMap> long_target, size_t size)
      : short_target_(std::move(short_target)),
        long_target_(std::move(long_target)),
        size_(size) {}

  const std::string short_target_;               // empty for a long target
  const std::unique_ptr<ExtentMap> long_target_;  // null for a short one
  const size_t size_;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_CORE_SYMLINK_TARGET_H_
