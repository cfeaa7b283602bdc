// What the share service knows of the mount it serves: whose it is, who
// else FUSE lets in, whom to tell of writes through a mapping, and who
// makes room on its GPUs.
#ifndef CUDAFS_FS_SHARE_SHARE_SETTINGS_H_
#define CUDAFS_FS_SHARE_SHARE_SETTINGS_H_

#include <sys/types.h>

#include "fs/core/kernel_notifier.h"
#include "fs/share/room_maker.h"

namespace cudafs {

struct ShareSettings {
  dev_t mount_device = 0;  // st_dev of the mount's files
  uid_t owner = 0;         // the mounting user
  bool allow_other = false;
  bool allow_root = false;
  // Told (DataChanged) after a process wrote a file through a shared
  // mapping, so that the kernel drops what it caches of it. Null: nothing
  // caches. Must outlive the service.
  KernelNotifier* notifier = nullptr;
  // Makes room on the GPUs for kShareMakeRoom. Null: the mount cannot.
  // Must outlive the service.
  RoomMaker* room_maker = nullptr;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_SHARE_SHARE_SETTINGS_H_
