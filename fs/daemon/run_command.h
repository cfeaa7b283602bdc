// cudafs run [-o MOUNTPOINT]... -- COMMAND [ARG...]: runs COMMAND with the
// allocation interposer (fs/client/interposer) preloaded, so that its GPU
// allocations that fail for want of memory wait for the cudafs mounts (or
// only those named) to make room and are tried again.
#ifndef CUDAFS_FS_DAEMON_RUN_COMMAND_H_
#define CUDAFS_FS_DAEMON_RUN_COMMAND_H_

namespace cudafs {

// Whether the command line is `cudafs run ... -- ...`: `run` with a `--`
// after it (without one, `run` is a mount's SOURCE or MOUNTPOINT).
bool IsRunCommand(int argc, const char* const* argv);

// Replaces the process with COMMAND; returns only on failure, with the
// exit status (2: a usage error; 127: COMMAND cannot be run), having said
// why on stderr.
int RunCommand(int argc, const char* const* argv);

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_RUN_COMMAND_H_
