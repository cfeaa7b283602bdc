// The cudafs(8) manual page. Its text is docs/cudafs.8.md, a small subset
// of markdown (the file's first lines say which) built into the binary and
// turned into roff here, with the option table's list where the text asks
// for it, as --help and the README's table take theirs (`cudafs --manual`
// prints it; the build installs it as share/man/man8/cudafs.8).
#ifndef CUDAFS_FS_DAEMON_MANUAL_H_
#define CUDAFS_FS_DAEMON_MANUAL_H_

#include <string>

#include "absl/strings/string_view.h"

namespace cudafs {

// The page of this build, in roff.
std::string ManualPage(absl::string_view version);

// `markdown` in roff: `options` (roff) where the text has the comment
// "<!-- options -->", "NAME version" as the title line's source.
std::string ManualRoff(absl::string_view markdown, absl::string_view version,
                       absl::string_view options);

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_MANUAL_H_
