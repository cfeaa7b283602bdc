// How an inode is written as bytes (alloc/base/coding.h): the one format
// that filesystem images (image_ops.cc) and journal records
// (journal_records.h) share, so that a record's parts go into an image
// unchanged.
#ifndef CUDAFS_FS_CORE_INODE_CODING_H_
#define CUDAFS_FS_CORE_INODE_CODING_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "alloc/base/coding.h"
#include "cache/cached_file.h"
#include "fs/core/inode.h"

namespace cudafs {

// A filesystem image's first bytes: its format's name and version.
inline constexpr absl::string_view kImageMagic = "cudafs filesystem image 1\n";
// How many varints PutInodeHead writes, and where its link count is.
inline constexpr int kInodeHeadFields = 12;
inline constexpr int kInodeHeadNlink = 4;

// Type, mode, owner, group, link count, size and the three times.
void PutInodeHead(const Inode& inode, std::string* out) ABSL_SHARED_LOCKS_REQUIRED(inode.mu);
// The same at `to`, which has room for kInodeHeadBytes; returns the bytes
// used.
inline constexpr size_t kInodeHeadBytes = kInodeHeadFields * kMaxVarintBytes;
size_t EncodeInodeHead(const Inode& inode, char* to) ABSL_SHARED_LOCKS_REQUIRED(inode.mu);
// The extended attributes: their count, then each name and value.
void PutInodeXattrs(const Inode& inode, std::string* out) ABSL_SHARED_LOCKS_REQUIRED(inode.mu);
// What the type holds: a file's extents, a link's target, a device's
// number; a directory's parent and next cookie, then (with `entries`) its
// entries. PutFileBody: of an inode that is no directory.
void PutInodeBody(const Inode& inode, bool entries, std::string* out)
    ABSL_SHARED_LOCKS_REQUIRED(inode.mu, Inode::namespace_lock);
void PutFileBody(const Inode& inode, std::string* out) ABSL_SHARED_LOCKS_REQUIRED(inode.mu);
// A regular file's body read without an arena (a journal's replay) and
// written back: whether the file holds data, and the data's record.
bool ParseRegularBody(absl::string_view body, bool* has_data, CachedFile::Record* record);
void PutRegularBody(bool has_data, const CachedFile::Record& record, std::string* out);

}  // namespace cudafs

#endif  // CUDAFS_FS_CORE_INODE_CODING_H_
