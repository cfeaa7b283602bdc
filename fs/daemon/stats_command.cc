#include "fs/daemon/stats_command.h"

#include <sys/statvfs.h>
#include <sys/xattr.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_format.h"
#include "fs/daemon/command_failure.h"
#include "fs/daemon/control_plane.h"
#include "fs/daemon/stats_report.h"

namespace cudafs {

int StatsCommand(const std::string& mountpoint, MountOptions::StatsFormat format) {
  std::string stats(16384, '\0');
  const ssize_t got = getxattr(mountpoint.c_str(), kStatsAttribute, stats.data(), stats.size());
  if (got < 0) {
    if (errno == ENODATA || errno == ENOTSUP) {
      return Fail(absl::StrFormat("%s is not the root of a cudafs mount", mountpoint));
    }
    return Fail(absl::StrFormat("%s: %s", mountpoint, std::strerror(errno)));
  }
  stats.resize(got);
  if (format == MountOptions::StatsFormat::kAll) {
    std::printf("%s", stats.c_str());
    return 0;
  }
  struct statvfs fs;
  if (statvfs(mountpoint.c_str(), &fs) != 0) {
    return Fail(absl::StrFormat("statvfs %s: %s", mountpoint, std::strerror(errno)));
  }
  MountFigures figures;
  figures.size_bytes = uint64_t{fs.f_blocks} * fs.f_frsize;
  figures.used_bytes = uint64_t{fs.f_blocks - fs.f_bfree} * fs.f_frsize;
  figures.files = fs.f_files - fs.f_ffree;
  const StatsReport report = StatsReport::Parse(stats);
  std::printf("%s\n", format == MountOptions::StatsFormat::kJson
                          ? report.Json(figures).c_str()
                          : report.Summary(mountpoint, figures).c_str());
  return 0;
}

}  // namespace cudafs
