// The kernel's mount table (/proc/PID/mountinfo), read one way for all:
// the daemon finds its own mount in it and watches it, a client (the
// library, the interposer) finds the mount of a file and so its daemon,
// the tests find a mountpoint's entry. The standard library only: the
// client library links nothing else.
#ifndef CUDAFS_FS_WIRE_MOUNT_INFO_LINE_H_
#define CUDAFS_FS_WIRE_MOUNT_INFO_LINE_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cudafs {

// One line: "ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL...] -
// TYPE SOURCE SUPER_OPTIONS", its paths and names unescaped.
struct MountInfoLine {
  int id = 0;  // unique among the mounts that exist, reused once one is gone
  int parent = 0;
  std::string device;  // "MAJOR:MINOR" of the filesystem, as written
  dev_t dev = 0;       // the same as stat's st_dev holds it
  // The filesystem's directory the mount shows: "/" for a whole
  // filesystem, the directory for a bind mount of one below it.
  std::string root;
  std::string mountpoint;
  std::string options;  // the mount's ("rw,nosuid,...")
  std::string fstype;   // "fuse.cudafs"
  std::string source;
  std::string super_options;  // the filesystem's ("rw,user_id=0,...")
  friend bool operator==(const MountInfoLine&, const MountInfoLine&) = default;
};

// `line` parsed; nullopt when it is not in that format.
std::optional<MountInfoLine> ParseMountInfoLine(std::string_view line);

// Every line of `text` that parses, in order.
std::vector<MountInfoLine> ParseMountInfo(std::string_view text);

// The value of `key` ("user_id") in a comma-separated option list.
std::optional<std::string> MountOptionValue(std::string_view options, std::string_view key);

// Undoes the octal escapes (\040 for a space; also tab, newline and
// backslash) the kernel writes in a field. Anything else, a malformed
// escape included, is kept as it is.
std::string UnescapeMountField(std::string_view field);

}  // namespace cudafs

#endif  // CUDAFS_FS_WIRE_MOUNT_INFO_LINE_H_
