// Finding the cudafs mount a file is on, from the mount table
// (/proc/self/mountinfo): the mount whose device numbers are the file's
// st_dev and whose type is fuse.cudafs.
#ifndef CUDAFS_FS_CLIENT_MOUNT_TABLE_H_
#define CUDAFS_FS_CLIENT_MOUNT_TABLE_H_

#include <sys/types.h>

#include <istream>
#include <string>

namespace cudafs::client {

// The mountpoint of the cudafs mount of `mountinfo` (lines in
// /proc/PID/mountinfo's format) whose files have st_dev `device`: 0, or
// -EXDEV (client_error.h says why).
int FindCudafsMount(std::istream& mountinfo, dev_t device, std::string* mountpoint);
// The same in this process's mount table.
int FindCudafsMount(dev_t device, std::string* mountpoint);

}  // namespace cudafs::client

#endif  // CUDAFS_FS_CLIENT_MOUNT_TABLE_H_
