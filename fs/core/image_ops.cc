// Filesystem images: the whole filesystem as bytes, for a process that
// takes it over on the same device memory (docs/DESIGN.md, *A daemon that
// dies, survived*). One record per inode, by number: its attributes,
// reference counts and extended attributes, then what its type holds
// (a directory's entries with their cookies, a file's extents, a link's
// target, a device's number). Loading checks all of it against the rest
// before it claims a block: a successor that refuses an image must not
// have freed (and so decommitted) memory its predecessor still serves.
#include <sys/stat.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "alloc/base/coding.h"
#include "alloc/base/status_macros.h"
#include "alloc/devices/device_wrapper.h"
#include "fs/core/filesystem.h"
#include "fs/core/filesystem_state.h"
#include "fs/core/inode_coding.h"
#include "fs/core/journal_records.h"
#include "fs/core/metadata_log.h"

namespace cudafs {

namespace {

absl::Status Bad(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("not a filesystem image this cudafs loads: ", what));
}

bool GetTime(absl::string_view* in, PackedTime* time) {
  uint64_t seconds = 0;
  uint64_t nanoseconds = 0;
  if (!GetVarint(in, &seconds) || !GetVarintUpTo(in, 999'999'999, &nanoseconds)) return false;
  timespec value{};
  value.tv_sec = static_cast<time_t>(seconds);
  value.tv_nsec = static_cast<long>(nanoseconds);
  *time = value;
  return true;
}

// Another device's layout, committing and decommitting nothing: a dry run
// of an image's claims, which finds a block claimed twice or out of place
// without touching the memory.
class LayoutOnly final : public DeviceWrapper {
 public:
  using DeviceWrapper::DeviceWrapper;
  absl::Status Commit(uint64_t, uint64_t) override { return absl::OkStatus(); }
  absl::Status Decommit(uint64_t, uint64_t) override { return absl::OkStatus(); }
};

// The inodes of an image, built on `file_space` and `symlink_space`
// (whose arena claims their blocks), checked for a tree: every name leads
// to an inode of its type, every directory but the root has one name and
// its parent holds it, every inode is reachable or still referenced, and
// link counts are what the names make them.
absl::StatusOr<std::vector<InodeTable::Adopted>> DecodeInodes(
    absl::string_view image, const CachedFile::Space* file_space,
    const ExtentMap::Space* symlink_space, uint64_t* next_ino)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(Inode::namespace_lock) {
  if (!absl::ConsumePrefix(&image, kImageMagic)) return Bad("its header is not this version's");
  uint64_t count = 0;
  if (!GetVarint(&image, next_ino) || !GetVarint(&image, &count)) return Bad("cut short");
  std::vector<InodeTable::Adopted> inodes;
  absl::flat_hash_map<uint64_t, size_t> index;  // number -> position in inodes
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t ino = 0, type = 0, mode = 0, uid = 0, gid = 0, nlink = 0, size = 0, lookups = 0,
             opens = 0, xattr_count = 0;
    PackedTime atime, mtime, ctime;
    if (!GetVarint(&image, &ino) || !GetVarintUpTo(&image, S_IFMT >> 12, &type) ||
        !GetVarintUpTo(&image, 0xffff, &mode) || !GetVarintUpTo(&image, UINT32_MAX, &uid) ||
        !GetVarintUpTo(&image, UINT32_MAX, &gid) || !GetVarintUpTo(&image, UINT32_MAX, &nlink) ||
        !GetVarintUpTo(&image, kMaxFileSize, &size) || !GetTime(&image, &atime) ||
        !GetTime(&image, &mtime) || !GetTime(&image, &ctime) || !GetVarint(&image, &lookups) ||
        !GetVarintUpTo(&image, UINT32_MAX, &opens) || !GetVarint(&image, &xattr_count)) {
      return Bad("an inode cut short");
    }
    const mode_t file_type = static_cast<mode_t>(type << 12);
    if ((mode & S_IFMT) != file_type ||
        !(S_ISREG(file_type) || S_ISDIR(file_type) || S_ISLNK(file_type) || S_ISCHR(file_type) ||
          S_ISBLK(file_type) || S_ISFIFO(file_type) || S_ISSOCK(file_type))) {
      return Bad(absl::StrFormat("inode %d has no type", ino));
    }
    if (!index.emplace(ino, inodes.size()).second) {
      return Bad(absl::StrFormat("inode %d twice", ino));
    }
    auto inode = std::make_shared<Inode>(ino, file_type);
    InodeTable::Adopted& adopted = inodes.emplace_back();
    adopted.inode = inode;
    adopted.references = {lookups, static_cast<uint32_t>(opens)};
    absl::MutexLock lock(&inode->mu);
    inode->mode = static_cast<uint16_t>(mode);
    inode->uid = static_cast<uid_t>(uid);
    inode->gid = static_cast<gid_t>(gid);
    inode->nlink = static_cast<uint32_t>(nlink);
    inode->size = size;
    inode->atime = atime;
    inode->mtime = mtime;
    inode->ctime = ctime;
    for (uint64_t x = 0; x < xattr_count; ++x) {
      absl::string_view name, value;
      if (!GetBytes(&image, &name) || !GetBytes(&image, &value) || name.empty()) {
        return Bad(absl::StrFormat("an extended attribute of inode %d cut short", ino));
      }
      if (!inode->xattrs) inode->xattrs = std::make_unique<Inode::Xattrs>();
      inode->xattrs->emplace(name, value);
    }
    adopted.extra_space = inode->XattrSpace();
    if (!inode->is_directory() && nlink > 1) {
      adopted.extra_space += (nlink - 1) * InodeTable::kSlotBytes;
    }
    if (inode->is_directory()) {
      CUDAFS_RETURN_IF_ERROR(inode->mutable_directory().DecodeFrom(&image));
    } else if (inode->is_regular()) {
      uint64_t has_data = 0;
      if (!GetVarintUpTo(&image, 1, &has_data)) return Bad("a file cut short");
      if (has_data) {
        inode->set_data(std::make_unique<CachedFile>(file_space, ino));
        CUDAFS_RETURN_IF_ERROR(inode->data()->DecodeFrom(&image));
      }
    } else if (inode->is_symlink()) {
      CUDAFS_ASSIGN_OR_RETURN(std::unique_ptr<const SymlinkTarget> target,
                              SymlinkTarget::DecodeFrom(symlink_space, &image));
      if (target->size() != size) return Bad(absl::StrFormat("symlink %d: size", ino));
      inode->set_symlink_target(std::move(target));
    } else if (inode->is_device()) {
      uint64_t rdev = 0;
      if (!GetVarint(&image, &rdev)) return Bad("a device cut short");
      inode->set_rdev(static_cast<dev_t>(rdev));
    }
  }
  if (!image.empty()) return Bad("bytes after the last inode");

  // The tree.
  const auto find = [&](uint64_t ino) -> Inode* {
    const auto it = index.find(ino);
    return it == index.end() ? nullptr : inodes[it->second].inode.get();
  };
  Inode* root = find(kRootInode);
  if (root == nullptr || !root->is_directory() || root->directory().parent() != kRootInode) {
    return Bad("no root directory");
  }
  absl::flat_hash_map<uint64_t, uint64_t> names;  // inode -> names it has
  absl::flat_hash_map<uint64_t, uint64_t> subdirectories;
  std::vector<Inode*> to_visit = {root};
  absl::flat_hash_set<uint64_t> reached = {kRootInode};
  while (!to_visit.empty()) {
    Inode* directory = to_visit.back();
    to_visit.pop_back();
    std::vector<std::pair<std::string, Directory::Entry>> entries;
    directory->directory().ForEachAfter(
        0, [&](absl::string_view name, const Directory::Entry& entry, uint64_t) {
          entries.emplace_back(name, entry);
          return true;
        });
    for (const auto& [name, entry] : entries) {
      Inode* child = find(entry.ino);
      if (child == nullptr || child->type != entry.type) {
        return Bad(absl::StrCat("\"", name, "\" names no inode of its type"));
      }
      ++names[entry.ino];
      if (!child->is_directory()) continue;
      ++subdirectories[directory->ino];
      if (entry.ino == kRootInode || !reached.insert(entry.ino).second ||
          child->directory().parent() != directory->ino) {
        return Bad(absl::StrFormat("directory %d has two names or a wrong parent", entry.ino));
      }
      to_visit.push_back(child);
    }
  }
  for (const InodeTable::Adopted& adopted : inodes) {
    Inode& inode = *adopted.inode;
    absl::MutexLock lock(&inode.mu);
    const uint64_t ino = inode.ino;
    // A removed directory still open has no name and no link.
    const uint64_t expected = !inode.is_directory() ? names[ino]
                              : reached.contains(ino) ? 2 + subdirectories[ino]
                                                      : 0;
    if (inode.nlink != expected) {
      return Bad(absl::StrFormat("inode %d has %d links where its names make %d", ino,
                                 inode.nlink, expected));
    }
    if (expected == 0 && adopted.references.lookups == 0 && adopted.references.opens == 0) {
      return Bad(absl::StrFormat("inode %d has no name and no reference", ino));
    }
  }
  return inodes;
}

}  // namespace

absl::StatusOr<std::string> Filesystem::SaveImage() {
  FilesystemState& state = *state_;
  std::vector<std::shared_ptr<Inode>> inodes = state.table.All();
  std::sort(inodes.begin(), inodes.end(),
            [](const auto& a, const auto& b) { return a->ino < b->ino; });
  // The image names blocks, not cached pages: every byte goes to them.
  for (const std::shared_ptr<Inode>& inode : inodes) {
    CUDAFS_RETURN_IF_ERROR(state.FlushFile(inode->ino));
  }
  std::string out(kImageMagic);
  absl::ReaderMutexLock namespace_lock(&state.namespace_mu);
  state.ReadsNamespace();
  PutVarint(&out, state.table.next_number());
  PutVarint(&out, inodes.size());
  for (const std::shared_ptr<Inode>& inode : inodes) {
    absl::ReaderMutexLock lock(&inode->mu);
    const CachedFile* data = inode->is_regular() ? inode->data() : nullptr;
    if (data != nullptr && data->shared()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "inode %d is mapped by another process, and no image holds a mapping", inode->ino));
    }
    const InodeTable::References references = state.table.ReferencesOf(*inode);
    PutVarint(&out, inode->ino);
    PutInodeHead(*inode, &out);
    PutVarint(&out, references.lookups);
    PutVarint(&out, references.opens);
    PutInodeXattrs(*inode, &out);
    PutInodeBody(*inode, /*entries=*/true, &out);
  }
  return out;
}

absl::Status Filesystem::LoadImage(absl::string_view image) {
  FilesystemState& state = *state_;
  if (state.table.size() != 1 || state.arena->Stats().blocks.used != 0) {
    return absl::FailedPreconditionError("an image loads only into a filesystem still empty");
  }
  absl::MutexLock namespace_lock(&state.namespace_mu);
  state.WritesNamespace();
  uint64_t next_ino = 0;
  {
    // The dry run: the same inodes on an arena of the same layout that
    // holds no memory, dropped with it.
    LayoutOnly layout(&state.arena->device());
    Arena arena(&layout, state.arena->min_block(), state.arena->capacity());
    const CachedFile::Space file_space(&state.cache, &arena, state.config.max_extent);
    const ExtentMap::Space symlink_space(&arena, arena.min_block());
    CUDAFS_RETURN_IF_ERROR(DecodeInodes(image, &file_space, &symlink_space, &next_ino).status());
  }
  CUDAFS_ASSIGN_OR_RETURN(
      std::vector<InodeTable::Adopted> inodes,
      DecodeInodes(image, &state.file_space, &state.symlink_space, &next_ino));
  return state.table.Replace(std::move(inodes), next_ino);
}

absl::Status Filesystem::CheckpointLog() {
  FilesystemState& state = *state_;
  if (state.config.metadata_log == nullptr) return absl::FailedPreconditionError("no metadata log");
  std::vector<std::shared_ptr<Inode>> inodes = state.table.All();
  std::string records;
  absl::ReaderMutexLock namespace_lock(&state.namespace_mu);
  state.ReadsNamespace();
  for (const std::shared_ptr<Inode>& inode : inodes) {
    absl::ReaderMutexLock lock(&inode->mu);
    PutInodeRecord(*inode, /*sequence=*/0, &records);
    const InodeTable::References references = state.table.ReferencesOf(*inode);
    PutCountsRecord(inode->ino, /*sequence=*/0, references.lookups, references.opens, &records);
  }
  for (const std::shared_ptr<Inode>& inode : inodes) {
    if (!inode->is_directory()) continue;
    inode->directory().ForEachAfter(
        0, [&](absl::string_view name, const Directory::Entry& entry, uint64_t cookie) {
          PutEntryRecord(inode->ino, name, /*sequence=*/0, entry, cookie, &records);
          return true;
        });
  }
  state.checkpoint_asked.store(false);
  return state.config.metadata_log->Checkpoint(records);
}

absl::Status Filesystem::LoadLog(const MetadataLog& log, ReplayReport* report) {
  CUDAFS_ASSIGN_OR_RETURN(MetadataLog::Contents contents, log.Read());
  CUDAFS_ASSIGN_OR_RETURN(std::string image,
                          ReplayJournal(contents.checkpoint, contents.journal, report));
  CUDAFS_RETURN_IF_ERROR(LoadImage(image));
  absl::MutexLock lock(&state_->done_mu);
  state_->exchanges_done.insert(report->exchanges.begin(), report->exchanges.end());
  return absl::OkStatus();
}

}  // namespace cudafs
