#include "fs/core/inode_coding.h"

#include "alloc/base/coding.h"

namespace cudafs {

size_t EncodeInodeHead(const Inode& inode, char* to) {
  auto sec = [](const timespec& time) { return static_cast<uint64_t>(time.tv_sec); };
  auto nsec = [](const timespec& time) { return static_cast<uint64_t>(time.tv_nsec); };
  return EncodeVarints(
      to, {uint64_t{inode.type} >> 12, inode.mode, inode.uid, inode.gid, inode.nlink, inode.size,
           sec(inode.atime), nsec(inode.atime), sec(inode.mtime), nsec(inode.mtime),
           sec(inode.ctime), nsec(inode.ctime)});
}

void PutInodeHead(const Inode& inode, std::string* out) {
  char head[kInodeHeadBytes];
  out->append(head, EncodeInodeHead(inode, head));
}

void PutInodeXattrs(const Inode& inode, std::string* out) {
  PutVarint(out, inode.xattrs ? inode.xattrs->size() : 0);
  if (!inode.xattrs) return;
  for (const auto& [name, value] : *inode.xattrs) {
    PutBytes(out, name);
    PutBytes(out, value);
  }
}

void PutInodeBody(const Inode& inode, bool entries, std::string* out) {
  if (!inode.is_directory()) {
    PutFileBody(inode, out);
  } else if (entries) {
    inode.directory().EncodeTo(out);
  } else {
    PutVarint(out, inode.directory().parent());
    PutVarint(out, inode.directory().next_cookie());
  }
}

void PutFileBody(const Inode& inode, std::string* out) {
  if (inode.is_regular()) {
    const CachedFile* data = inode.data();
    PutVarint(out, data != nullptr ? 1 : 0);
    if (data != nullptr) data->EncodeTo(out);
  } else if (inode.is_symlink()) {
    inode.symlink_target().EncodeTo(out);
  } else if (inode.is_device()) {
    PutVarint(out, inode.rdev());
  }
}

bool ParseRegularBody(absl::string_view body, bool* has_data, CachedFile::Record* record) {
  uint64_t data = 0;
  if (!GetVarintUpTo(&body, 1, &data)) return false;
  *has_data = data != 0;
  if (*has_data && !CachedFile::ParseRecord(&body, record)) return false;
  return body.empty();
}

void PutRegularBody(bool has_data, const CachedFile::Record& record, std::string* out) {
  PutVarint(out, has_data ? 1 : 0);
  if (has_data) CachedFile::PutRecord(record, out);
}

}  // namespace cudafs
