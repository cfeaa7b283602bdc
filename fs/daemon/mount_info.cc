#include "fs/daemon/mount_info.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

#include "absl/algorithm/container.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace cudafs {

std::string ReadFromStart(int fd) {
  std::string text;
  char buffer[8192];
  for (;;) {
    const ssize_t got = pread(fd, buffer, sizeof buffer, static_cast<off_t>(text.size()));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return text;
    text.append(buffer, static_cast<size_t>(got));
  }
}

bool IsCovered(absl::Span<const MountInfoLine> mounts, const MountInfoLine& mount) {
  return absl::c_any_of(mounts, [&](const MountInfoLine& other) {
    return other.parent == mount.id && other.mountpoint == mount.mountpoint;
  });
}

std::optional<int> MountIdOf(int fd) {
  std::ifstream fdinfo(absl::StrCat("/proc/self/fdinfo/", fd));
  for (std::string line; std::getline(fdinfo, line);) {
    absl::string_view value = line;
    int id;
    if (absl::ConsumePrefix(&value, "mnt_id:") &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(value), &id)) {
      return id;
    }
  }
  return std::nullopt;
}

bool IsMountRoot(const std::string& path) {
  struct statx st;
  return statx(AT_FDCWD, path.c_str(), 0, 0, &st) == 0 &&
         (st.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
         (st.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

std::optional<MountInfoLine> MountAt(const std::string& path) {
  const int fd = open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  const std::optional<int> id = MountIdOf(fd);
  close(fd);
  if (!id) return std::nullopt;
  const int mountinfo = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
  if (mountinfo < 0) return std::nullopt;
  const std::string text = ReadFromStart(mountinfo);
  close(mountinfo);
  for (MountInfoLine& mount : ParseMountInfo(text)) {
    if (mount.id == *id) return std::move(mount);
  }
  return std::nullopt;
}

}  // namespace cudafs
