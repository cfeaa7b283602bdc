// Finding the cudafs mount a file is on, from the mount table
// (/proc/self/mountinfo): a mount whose device numbers are the file's
// st_dev, whose type is fuse.cudafs, and which shows the filesystem's root
// (root field "/"). Only there are the control attributes the daemon's:
// a bind mount of a directory (a container's, `unshare -m`'s) shows that
// directory as its top, and it is no place to ask for the daemon's socket.
#ifndef CUDAFS_FS_CLIENT_MOUNT_TABLE_H_
#define CUDAFS_FS_CLIENT_MOUNT_TABLE_H_

#include <sys/types.h>

#include <istream>
#include <string>
#include <vector>

namespace cudafs::client {

struct CudafsMount {
  std::string mountpoint;  // where the filesystem's root is mounted
  uid_t owner = 0;         // who mounted it: the daemon's uid (user_id=)
  dev_t device = 0;        // st_dev of its files
};

// The mount of `mountinfo` (lines in /proc/PID/mountinfo's format) whose
// files have st_dev `device`: 0, or -EXDEV when there is none, or when
// only bind mounts of directories in it are there (client_error.h says
// why).
int FindCudafsMount(std::istream& mountinfo, dev_t device, CudafsMount* mount);
// The same in this process's mount table.
int FindCudafsMount(dev_t device, CudafsMount* mount);

// Every cudafs mount of `mountinfo` whose root is visible, once each
// (a filesystem mounted at two places: the first), skipping those whose
// line names no owner.
std::vector<CudafsMount> CudafsMounts(std::istream& mountinfo);

}  // namespace cudafs::client

#endif  // CUDAFS_FS_CLIENT_MOUNT_TABLE_H_
