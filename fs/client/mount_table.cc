#include "fs/client/mount_table.h"

#include <sys/sysmacros.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "fs/client/client_error.h"
#include "fs/wire/mountinfo_field.h"

namespace cudafs::client {

int FindCudafsMount(std::istream& mountinfo, dev_t device, std::string* mountpoint) {
  const std::string numbers = std::to_string(major(device)) + ":" + std::to_string(minor(device));
  for (std::string line; std::getline(mountinfo, line);) {
    // "ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS ... - TYPE SOURCE ..."
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    fields >> id >> parent >> dev >> root >> point;
    if (dev != numbers) continue;
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 12, "fuse.cudafs ") != 0) continue;
    *mountpoint = UnescapeMountField(point);
    return 0;
  }
  return Fail(EXDEV, "the file is not on a cudafs mount");
}

int FindCudafsMount(dev_t device, std::string* mountpoint) {
  std::ifstream mountinfo("/proc/self/mountinfo");
  return FindCudafsMount(mountinfo, device, mountpoint);
}

}  // namespace cudafs::client
