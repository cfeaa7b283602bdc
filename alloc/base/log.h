// One-line logging for the daemon: stderr while it runs in the
// foreground (or before it detaches), syslog (the journal) afterwards, where
// stderr is /dev/null.
#ifndef CUDAFS_ALLOC_BASE_LOG_H_
#define CUDAFS_ALLOC_BASE_LOG_H_

#include "absl/strings/string_view.h"

namespace cudafs {

// Writes "cudafs: <line>" to the current destination. Thread-safe.
void LogError(absl::string_view line);

// The same at informational priority: how the mount runs, not a fault.
void LogInfo(absl::string_view line);

// From now on LogError goes to syslog, tagged "cudafs[pid]" with `mountpoint`.
void LogToSyslog(absl::string_view mountpoint);

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_BASE_LOG_H_
