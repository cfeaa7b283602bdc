#include "fs/client/mount_table.h"

#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <fstream>
#include <optional>
#include <sstream>

#include "fs/client/client_error.h"
#include "fs/wire/mountinfo_field.h"

namespace cudafs::client {
namespace {

// The value of `key` ("user_id=") in a comma-separated option list.
bool OptionValue(const std::string& options, const std::string& key, std::string* value) {
  std::istringstream list(options);
  for (std::string option; std::getline(list, option, ',');) {
    if (option.compare(0, key.size(), key) == 0) {
      *value = option.substr(key.size());
      return true;
    }
  }
  return false;
}

// A cudafs line of the mount table: "ID PARENT MAJOR:MINOR ROOT MOUNTPOINT
// OPTIONS ... - TYPE SOURCE SUPER_OPTIONS".
struct CudafsLine {
  dev_t device = 0;
  std::string root;
  std::string mountpoint;  // unescaped
  bool owned = false;      // SUPER_OPTIONS name the owner (user_id=)
  uid_t owner = 0;
};

std::optional<CudafsLine> ParseCudafsLine(const std::string& line) {
  std::istringstream fields(line);
  std::string id, parent, numbers, root, point;
  fields >> id >> parent >> numbers >> root >> point;
  const size_t dash = line.find(" - ");
  unsigned major_number = 0, minor_number = 0;
  char colon = 0;
  std::istringstream device(numbers);
  if (dash == std::string::npos || line.compare(dash + 3, 12, "fuse.cudafs ") != 0 ||
      !(device >> major_number >> colon >> minor_number) || colon != ':') {
    return std::nullopt;
  }
  CudafsLine parsed;
  parsed.device = makedev(major_number, minor_number);
  parsed.root = root;
  parsed.mountpoint = UnescapeMountField(point);
  std::istringstream tail(line.substr(dash + 3));
  std::string type, source, options, uid;
  tail >> type >> source >> options;
  const bool named = OptionValue(options, "user_id=", &uid);
  const auto owner = std::from_chars(uid.data(), uid.data() + uid.size(), parsed.owner);
  parsed.owned = named && owner.ec == std::errc() && owner.ptr == uid.data() + uid.size();
  return parsed;
}

}  // namespace

int FindCudafsMount(std::istream& mountinfo, dev_t device, CudafsMount* mount) {
  std::string bound;  // a bind mount of a directory in it, for the error
  for (std::string line; std::getline(mountinfo, line);) {
    const std::optional<CudafsLine> parsed = ParseCudafsLine(line);
    if (!parsed || parsed->device != device) continue;
    if (parsed->root != "/") {
      if (bound.empty()) bound = parsed->mountpoint;
      continue;
    }
    if (!parsed->owned) {
      return Fail(EXDEV, "the mount table names no owner of the cudafs mount at %s",
                  parsed->mountpoint.c_str());
    }
    *mount = {parsed->mountpoint, parsed->owner, parsed->device};
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
    if (!parsed || parsed->root != "/" || !parsed->owned) continue;
    const bool seen = std::any_of(mounts.begin(), mounts.end(), [&](const CudafsMount& mount) {
      return mount.device == parsed->device;
    });
    if (!seen) mounts.push_back({parsed->mountpoint, parsed->owner, parsed->device});
  }
  return mounts;
}

int FindCudafsMount(dev_t device, CudafsMount* mount) {
  std::ifstream mountinfo("/proc/self/mountinfo");
  return FindCudafsMount(mountinfo, device, mount);
}

}  // namespace cudafs::client
