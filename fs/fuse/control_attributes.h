// The daemon's control plane, reached through extended attributes of the
// mount's root directory (cudafs --stats reads one). The FUSE glue asks it
// first about every extended attribute of the root and only routes: which
// names exist, who may use them and what they do is the daemon's business
// (fs/daemon/control_plane.h).
#ifndef CUDAFS_FS_FUSE_CONTROL_ATTRIBUTES_H_
#define CUDAFS_FS_FUSE_CONTROL_ATTRIBUTES_H_

#include <sys/types.h>

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cudafs {

class ControlAttributes {
 public:
  virtual ~ControlAttributes() = default;

  // Each answers nullopt when `name` is not a control attribute: it is then
  // an ordinary attribute of the root, for the Filesystem. `caller` is the
  // requesting uid. Errors carry their errno (PosixError).
  virtual std::optional<absl::StatusOr<std::string>> Get(absl::string_view name,
                                                         uid_t caller) = 0;
  virtual std::optional<absl::Status> Set(absl::string_view name, absl::string_view value,
                                          uid_t caller) = 0;
  virtual std::optional<absl::Status> Remove(absl::string_view name) = 0;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_FUSE_CONTROL_ATTRIBUTES_H_
