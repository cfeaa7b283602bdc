#include "fs/client/mount_table.h"

#include <sys/sysmacros.h>

#include <cerrno>
#include <charconv>
#include <fstream>
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

}  // namespace

int FindCudafsMount(std::istream& mountinfo, dev_t device, CudafsMount* mount) {
  const std::string numbers = std::to_string(major(device)) + ":" + std::to_string(minor(device));
  std::string bound;  // a bind mount of a directory in it, for the error
  for (std::string line; std::getline(mountinfo, line);) {
    // "ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS ... - TYPE SOURCE SUPER_OPTIONS"
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    fields >> id >> parent >> dev >> root >> point;
    if (dev != numbers) continue;
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 12, "fuse.cudafs ") != 0) continue;
    if (root != "/") {
      if (bound.empty()) bound = UnescapeMountField(point);
      continue;
    }
    std::istringstream tail(line.substr(dash + 3));
    std::string type, source, options, uid;
    tail >> type >> source >> options;
    uid_t owner = 0;
    const bool named = OptionValue(options, "user_id=", &uid);
    const auto parsed = std::from_chars(uid.data(), uid.data() + uid.size(), owner);
    if (!named || parsed.ec != std::errc() || parsed.ptr != uid.data() + uid.size()) {
      return Fail(EXDEV, "the mount table names no owner of the cudafs mount at %s",
                  UnescapeMountField(point).c_str());
    }
    mount->mountpoint = UnescapeMountField(point);
    mount->owner = owner;
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

int FindCudafsMount(dev_t device, CudafsMount* mount) {
  std::ifstream mountinfo("/proc/self/mountinfo");
  return FindCudafsMount(mountinfo, device, mount);
}

}  // namespace cudafs::client
