// The cudafs command line:
//
//   cudafs [SOURCE] MOUNTPOINT [-f] [-d] [-s] [-o OPT[,OPT...]]
//   cudafs --help | --version | --list-devices | --stats [--all|--json] MOUNTPOINT
//   cudafs --make-room MOUNTPOINT SIZE|all
//   cudafs --upgrade MOUNTPOINT
//   cudafs --options-markdown   (not in --help: the README's option table)
//   cudafs --manual             (not in --help: the cudafs(8) page, in roff)
//
// Flags may come in any order and -o may repeat (mount.fuse3 runs
// `cudafs SOURCE MOUNTPOINT -o rw,size=8G,...`); each -o item is an entry
// of the option table. Parsing is pure: nothing here touches a device or
// the filesystem, so every rule is unit-tested.
#ifndef CUDAFS_FS_DAEMON_COMMAND_LINE_H_
#define CUDAFS_FS_DAEMON_COMMAND_LINE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "fs/daemon/mount_options.h"

namespace cudafs {

// Parses argv (argv[0] is the program name) into what to do
// (MountOptions::action) and how. On error the status message is one line
// that names the offending argument or option.
absl::StatusOr<MountOptions> ParseCommandLine(absl::Span<const char* const> argv);

// The --help text.
std::string UsageText(absl::string_view program);

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_COMMAND_LINE_H_
