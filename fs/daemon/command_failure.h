// How the cudafs command says it cannot do what it was asked (a bad
// command line, an unusable mountpoint, a mount that fails): one line on
// stderr, and exit status 2.
#ifndef CUDAFS_FS_DAEMON_COMMAND_FAILURE_H_
#define CUDAFS_FS_DAEMON_COMMAND_FAILURE_H_

#include "absl/strings/string_view.h"

namespace cudafs {

inline constexpr int kExitUsage = 2;

// Prints "cudafs: `message`" on stderr; returns kExitUsage.
int Fail(absl::string_view message);

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_COMMAND_FAILURE_H_
