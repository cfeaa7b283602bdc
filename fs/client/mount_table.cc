#include "fs/client/mount_table.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <fstream>
#include <optional>

#include "fs/client/client_error.h"
#include "fs/wire/mount_info_line.h"

namespace cudafs::client {
namespace {

// A cudafs line of the mount table, with its owner when the filesystem's
// options name one (user_id=).
struct CudafsLine {
  MountInfoLine line;
  bool owned = false;
  uid_t owner = 0;
};

std::optional<CudafsLine> ParseCudafsLine(const std::string& text) {
  std::optional<MountInfoLine> line = ParseMountInfoLine(text);
  if (!line || line->fstype != "fuse.cudafs") return std::nullopt;
  CudafsLine parsed{.line = std::move(*line)};
  const std::optional<std::string> uid = MountOptionValue(parsed.line.super_options, "user_id");
  if (uid) {
    const auto [end, error] = std::from_chars(uid->data(), uid->data() + uid->size(), parsed.owner);
    parsed.owned = error == std::errc() && end == uid->data() + uid->size();
  }
  return parsed;
}

}  // namespace

int FindCudafsMount(std::istream& mountinfo, dev_t device, CudafsMount* mount) {
  std::string bound;  // a bind mount of a directory in it, for the error
  for (std::string line; std::getline(mountinfo, line);) {
    const std::optional<CudafsLine> parsed = ParseCudafsLine(line);
    if (!parsed || parsed->line.dev != device) continue;
    if (parsed->line.root != "/") {
      if (bound.empty()) bound = parsed->line.mountpoint;
      continue;
    }
    if (!parsed->owned) {
      return Fail(EXDEV, "the mount table names no owner of the cudafs mount at %s",
                  parsed->line.mountpoint.c_str());
    }
    *mount = {parsed->line.mountpoint, parsed->owner, parsed->line.dev};
    return 0;
  }
  if (!bound.empty()) {
    return Fail(EXDEV,
                "the file is on a cudafs mount whose root is not visible here, only a bind "
                "mount of a directory in it (%s): its daemon cannot be found safely there",
                bound.c_str());
  }
  return Fail(EXDEV, "the file is not on a cudafs mount");
}

std::vector<CudafsMount> CudafsMounts(std::istream& mountinfo) {
  std::vector<CudafsMount> mounts;
  for (std::string line; std::getline(mountinfo, line);) {
    const std::optional<CudafsLine> parsed = ParseCudafsLine(line);
    if (!parsed || parsed->line.root != "/" || !parsed->owned) continue;
    const bool seen = std::any_of(mounts.begin(), mounts.end(), [&](const CudafsMount& mount) {
      return mount.device == parsed->line.dev;
    });
    if (!seen) mounts.push_back({parsed->line.mountpoint, parsed->owner, parsed->line.dev});
  }
  return mounts;
}

int FindCudafsMount(dev_t device, CudafsMount* mount) {
  std::ifstream mountinfo("/proc/self/mountinfo");
  return FindCudafsMount(mountinfo, device, mount);
}

}  // namespace cudafs::client
