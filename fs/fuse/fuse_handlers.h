// The request handlers, one per FUSE operation, by concern as in the
// kernel's fs/fuse; MakeOperations in fuse_ops.cc puts them in the one
// operations table. Private to the glue (fs/fuse).
#ifndef CUDAFS_FS_FUSE_FUSE_HANDLERS_H_
#define CUDAFS_FS_FUSE_FUSE_HANDLERS_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "fs/fuse/libfuse.h"

namespace cudafs::fuse_glue {

// Names, links and directories: fuse_dir_ops.cc.
void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name);
void Forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void ForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets);
void ReadLink(fuse_req_t req, fuse_ino_t ino);
void MakeNode(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev);
void MakeDirectory(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode);
void SymbolicLink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name);
void Link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t new_parent, const char* new_name);
void Unlink(fuse_req_t req, fuse_ino_t parent, const char* name);
void RemoveDirectory(fuse_req_t req, fuse_ino_t parent, const char* name);
void Rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent,
            const char* new_name, unsigned int flags);
void OpenDirectory(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void ReadDirectory(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, fuse_file_info*);
void ReadDirectoryPlus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, fuse_file_info*);
void ReleaseDirectory(fuse_req_t req, fuse_ino_t, fuse_file_info*);

// File data and open files: fuse_file_ops.cc.
void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void Create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi);
void Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, fuse_file_info* fi);
void Write(fuse_req_t req, fuse_ino_t ino, const char* data, size_t size, off_t offset,
           fuse_file_info* fi);
void Fsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info*);
void Release(fuse_req_t req, fuse_ino_t ino, fuse_file_info*);
void Fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
               fuse_file_info*);
void CopyFileRange(fuse_req_t req, fuse_ino_t in, off_t in_offset, fuse_file_info*, fuse_ino_t out,
                   off_t out_offset, fuse_file_info*, size_t length, int);
void Lseek(fuse_req_t req, fuse_ino_t ino, off_t offset, int whence, fuse_file_info*);

// Attributes and the filesystem's: fuse_attr_ops.cc.
void GetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*);
void SetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info*);
void StatFs(fuse_req_t req, fuse_ino_t);

// Extended attributes, the control plane's on the root: fuse_xattr_ops.cc.
void SetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size,
              int flags);
void GetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size);
void ListXattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void RemoveXattr(fuse_req_t req, fuse_ino_t ino, const char* name);

}  // namespace cudafs::fuse_glue

#endif  // CUDAFS_FS_FUSE_FUSE_HANDLERS_H_
