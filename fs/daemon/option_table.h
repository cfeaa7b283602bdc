// The -o options of cudafs, one entry each: the names the parser accepts,
// how the value is parsed and what it sets, and what --help and the
// README's option table say about it. ParseCommandLine applies entries,
// UsageText prints them, `cudafs --options-markdown` prints the README's
// table (a test keeps README.md in step with it).
#ifndef CUDAFS_FS_DAEMON_OPTION_TABLE_H_
#define CUDAFS_FS_DAEMON_OPTION_TABLE_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "fs/daemon/mount_options.h"

namespace cudafs {

// What applying options changes. `fsname` is kept apart because it must win
// over a positional SOURCE wherever it appears.
struct OptionTarget {
  MountOptions* options;
  std::optional<std::string> fsname;
};

enum class OptionSection {
  kCudafs,   // ours; --help's "cudafs options"
  kFuse,     // libfuse's or the kernel's; --help's "FUSE options"
  kIgnored,  // for mount(8) and fstab; accepted and dropped
  kRefused,  // libfuse's, but refused (help says why); not in --help
};

// Whether an option takes "=VALUE". A missing value reads as an empty one,
// so "size" alone is reported as a bad value for size=.
enum class OptionValue { kNone, kRequired, kEither };

// One line of --help and one row of the README's table.
struct OptionForm {
  absl::string_view syntax = {};  // "size=N[k|m|g|t]"; empty: the entry's names
  // Broken into lines by hand where --help breaks them; the README joins
  // them.
  absl::string_view help = {};
  absl::string_view readme = {};  // more for the README only, after `help`
};

struct MountOptionSpec {
  // Names with one effect, comma-separated ("atime,relatime"); "x-*"
  // matches every name starting with "x-".
  absl::string_view names = {};
  OptionSection section = OptionSection::kCudafs;
  OptionValue value = OptionValue::kNone;
  // Parses `value` into the target; empty for options that set nothing.
  // Messages name the option and escape what the user typed (one line).
  std::function<absl::Status(absl::string_view name, absl::string_view value, OptionTarget&)>
      apply = {};
  bool forward = false;  // also handed to libfuse as written
  std::vector<OptionForm> forms = {};
  // The default, as a value the option parses to what MountOptions starts
  // with (tested); `default_text` instead where no value says it.
  absl::string_view default_value = {};
  absl::string_view default_text = {};
  bool is_default = false;  // a flag whose effect is what happens unasked
};

absl::Span<const MountOptionSpec> MountOptionTable();

// The entry that accepts `name`, or null.
const MountOptionSpec* FindMountOption(absl::string_view name);

// Applies one item of an -o list ("size=8G", "ro").
absl::Status ApplyMountOption(absl::string_view option, OptionTarget& target);

// --help's sections of -o options.
std::string MountOptionsHelp();

// The README's table of options, in Markdown.
std::string MountOptionsMarkdown();

// The man page's list of options, in roff (man(7)): one tagged paragraph
// per spelling, what --help says and the README adds, and the default.
std::string MountOptionsRoff();

// Text made safe for roff: backslashes, and a dot or quote that would
// start a line, escaped; hyphens as \- (so options can be searched for).
std::string RoffEscape(absl::string_view text);

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_OPTION_TABLE_H_
