// StatsReport: what `cudafs --stats` prints about a mounted cudafs, from
// the counters the daemon publishes on the mount's root ("name value"
// lines, ControlPlane) and what statvfs says of the mount: a one-line
// summary for people (the default), every counter as those lines
// (--all), or one JSON object for scripts (--json).
#ifndef CUDAFS_FS_DAEMON_STATS_REPORT_H_
#define CUDAFS_FS_DAEMON_STATS_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace cudafs {

// What statvfs(2) says of the mount.
struct MountFigures {
  uint64_t size_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t files = 0;  // inodes in use
};

class StatsReport {
 public:
  // The counters of `text`, in order; lines without a value are skipped.
  static StatsReport Parse(absl::string_view text);

  // "MOUNT: 1.5 MiB of 64.0 MiB used (2%), 3 files, 2.0 MiB held on
  // host memory, /dev/fuse, cache hit rate 50% of 8 small reads".
  std::string Summary(absl::string_view mountpoint, const MountFigures& figures) const;
  // Every counter (numbers as numbers, others as strings) and the figures
  // (size_bytes, used_bytes, files), as one JSON object.
  std::string Json(const MountFigures& figures) const;

  // The value of counter `name`, if there is one.
  std::optional<std::string> Get(absl::string_view name) const;
  // The same as a number (0 when absent or not a number).
  uint64_t Number(absl::string_view name) const;

 private:
  std::vector<std::pair<std::string, std::string>> counters_;
};

// 1536 -> "1.5 KiB".
std::string HumanBytes(uint64_t bytes);

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_STATS_REPORT_H_
