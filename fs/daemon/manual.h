// The cudafs(8) manual page, in roff: the option list comes from the option
// table, as --help and the README's table do (`cudafs --manual` prints it;
// the build installs it as share/man/man8/cudafs.8).
#ifndef CUDAFS_FS_DAEMON_MANUAL_H_
#define CUDAFS_FS_DAEMON_MANUAL_H_

#include <string>

#include "absl/strings/string_view.h"

namespace cudafs {

std::string ManualPage(absl::string_view version);

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_MANUAL_H_
