// Filesystem: the cudafs core. Inodes, directories, permissions, timestamps
// and file data (through the Arena), with one method per FUSE low-level
// operation, addressed by inode number like the FUSE protocol. It knows
// nothing about FUSE itself (the glue in fs/fuse translates), so every
// operation is testable without mounting.
//
// Semantics follow tmpfs: setgid directories, suid/sgid dropped on write
// and chown (permissions are the kernel's business: see permissions.h),
// nanosecond timestamps with tmpfs' ctime/mtime rules and relatime atime,
// holes that read as zeros, data that lives until the last lookup reference
// and open handle of an unlinked file are gone.
//
// Inode lifetime: an inode exists while it has a name (nlink > 0), a kernel
// lookup reference (Lookup/Create/... add one, Forget drops them) or an open
// handle (Open/Create add one, Release drops it). Inode numbers are never
// reused within a mount; the FUSE glue gives them the mount's generation.
#ifndef CUDAFS_FS_CORE_FILESYSTEM_H_
#define CUDAFS_FS_CORE_FILESYSTEM_H_

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "alloc/base/sizes.h"
#include "alloc/storage/arena.h"
#include "cache/page_cache.h"
#include "fs/core/caller.h"

namespace cudafs {

using InodeNumber = uint64_t;
inline constexpr InodeNumber kRootInode = 1;  // FUSE_ROOT_ID
// Extended attribute names in this namespace are cudafs's own: the
// control attributes of the mount's root (answered before the Filesystem
// is asked, fs/fuse/control_attributes.h) and kWhereAttribute. No inode
// stores one, so a directory's owner cannot make a name of theirs pass for
// the daemon's (behind a bind mount, their directory is a mount's root).
inline constexpr char kCudafsAttributePrefix[] = "user.cudafs.";
// A read-only extended attribute of every regular file: Where's answer.
inline constexpr char kWhereAttribute[] = "user.cudafs.where";

struct FilesystemState;
class KernelNotifier;
class MetadataLog;
struct ReplayReport;

struct FilesystemConfig {
  mode_t root_mode = 01777;  // like tmpfs
  uid_t root_uid = 0;
  gid_t root_gid = 0;
  uint64_t max_inodes = 0;  // 0: unlimited
  // Largest extent a growing file gets; see ExtentMap for the policy (the
  // daemon's mount plan sizes it by the capacity).
  uint64_t max_extent = kMiB;
  bool update_atime = true;  // false for noatime
  // Bytes of host-side write-back page cache (cache/page_cache.h); 0: none,
  // every read and write goes to the arena.
  uint64_t cache_bytes = 0;
  // Growth slack (ExtentMap) normally goes when the last open handle is
  // released. A kernel that sends no RELEASE (zero_message_open) needs
  // TrimIdleGrowth instead: with this set, writes that leave slack note
  // their file for it.
  bool trim_growth_when_idle = false;
  // Told, outside every lock, when an operation changed attributes that
  // its reply does not carry (KernelNotifier::AttributesChanged), so that
  // whoever caches attributes (the kernel, for FUSE) drops them. Null:
  // nobody caches them. Must outlive the Filesystem.
  KernelNotifier* notifier = nullptr;
  // Where every change is journaled, for a successor after a crash
  // (metadata_log.h, journal_scope.h); null: nowhere. Needs cache_bytes 0:
  // a cached write is in no memory that outlives the process. Must outlive
  // the Filesystem.
  MetadataLog* metadata_log = nullptr;
  // Called (from an operation's thread) once the log's journal outgrows
  // twice its checkpoint and `checkpoint_floor` bytes, for its owner to
  // run CheckpointLog.
  std::function<void()> checkpoint_due;
  uint64_t checkpoint_floor = uint64_t{64} << 20;
};

// setattr: only the engaged fields change.
struct AttributeChanges {
  std::optional<mode_t> mode;
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  std::optional<uint64_t> size;
  // A time value, or "now" (UTIME_NOW; the owner-or-writer rule applies).
  struct Time {
    bool now = false;
    timespec value{};
  };
  std::optional<Time> atime;
  std::optional<Time> mtime;
  std::optional<timespec> ctime;
  // Remove set-id bits as a data change by the caller would: the kernel
  // asks for that with chown(f, -1, -1) and before changes it makes
  // without a write (see the FUSE glue's SetAttr).
  bool remove_set_id = false;
};

struct DirectoryEntry {
  std::string name;
  struct stat attr;  // st_ino and the type bits of st_mode are always set;
                     // the rest only for ReadDirectory(plus = true)
  uint64_t next_cookie;  // offset to pass to resume after this entry
};

class Filesystem {
 public:
  // `arena` must outlive the Filesystem.
  Filesystem(Arena* arena, FilesystemConfig config);
  ~Filesystem();

  Filesystem(const Filesystem&) = delete;
  Filesystem& operator=(const Filesystem&) = delete;

  // Namespace. Operations that return an attribute for a new or found name
  // add one lookup reference to it (the FUSE entry reply's).
  absl::StatusOr<struct stat> Lookup(InodeNumber parent, absl::string_view name);
  void Forget(InodeNumber ino, uint64_t count);
  absl::StatusOr<struct stat> MakeNode(InodeNumber parent, absl::string_view name, mode_t mode,
                                       dev_t rdev, const Caller& caller);
  absl::StatusOr<struct stat> MakeDirectory(InodeNumber parent, absl::string_view name,
                                            mode_t mode, const Caller& caller);
  absl::StatusOr<struct stat> SymbolicLink(InodeNumber parent, absl::string_view name,
                                           absl::string_view target, const Caller& caller);
  absl::StatusOr<struct stat> Link(InodeNumber ino, InodeNumber new_parent,
                                   absl::string_view new_name);
  absl::Status Unlink(InodeNumber parent, absl::string_view name);
  absl::Status RemoveDirectory(InodeNumber parent, absl::string_view name);
  // flags: 0, RENAME_NOREPLACE or RENAME_EXCHANGE. `request`: the id of
  // the request that asks it (0: none), which an exchange journals, so that
  // a successor knows it was done (ExchangeDone).
  absl::Status Rename(InodeNumber parent, absl::string_view name, InodeNumber new_parent,
                      absl::string_view new_name, unsigned flags, uint64_t request = 0);
  // Whether the log LoadLog loaded says request `request` exchanged two
  // names: sent again, it must not swap them back.
  bool ExchangeDone(uint64_t request);
  // The target of symlink `ino`; counts as an access for its atime.
  absl::StatusOr<std::string> ReadLink(InodeNumber ino);

  // Attributes.
  absl::StatusOr<struct stat> GetAttributes(InodeNumber ino);
  absl::StatusOr<struct stat> SetAttributes(InodeNumber ino, const AttributeChanges& changes,
                                            const Caller& caller);

  // Files. Create makes a regular file and opens it (EEXIST if the name
  // exists). Open applies O_TRUNC and returns the file's size after it, so
  // that the caller can choose how to serve the open.
  // Every successful Open, and Create with a counted handle, is matched by
  // one Release.
  enum class Handle {
    kCounted,
    // For a kernel that will send no RELEASE (zero_message_open: once it
    // opens files itself it releases none, created ones included): the
    // file lives while it has a name or a lookup reference, which the
    // kernel holds while the file is open.
    kUncounted,
  };
  absl::StatusOr<struct stat> Create(InodeNumber parent, absl::string_view name, mode_t mode,
                                     int flags, const Caller& caller,
                                     Handle handle = Handle::kCounted);
  absl::StatusOr<uint64_t> Open(InodeNumber ino, int flags, const Caller& caller);
  void Release(InodeNumber ino);
  // Gives back the growth slack of files whose last write that left some
  // was at least `idle` ago (FilesystemConfig::trim_growth_when_idle), as
  // Release does for the last handle. A file written again grows anew.
  void TrimIdleGrowth(absl::Duration idle);
  // Counts as a read of `ino` for its atime (relatime rules, unless the
  // mount is noatime): for reads that a cache above the filesystem serves
  // without asking it. A moved atime is reported to
  // FilesystemConfig::notifier.
  void MarkAccessed(InodeNumber ino);

  // Reads up to `size` bytes at `offset` into `out`; short at end of file.
  // `update_atime` false: an O_NOATIME handle.
  absl::StatusOr<size_t> Read(InodeNumber ino, uint64_t offset, size_t size, char* out,
                              bool update_atime = true);
  // Writes at `offset`, or at the end of file when `append` (O_APPEND
  // handles: the end is taken under the file's lock, so racing appenders
  // never overwrite each other). All or nothing on ENOSPC.
  absl::StatusOr<size_t> Write(InodeNumber ino, uint64_t offset, const char* data, size_t size,
                               bool append, const Caller& caller);
  // mode: 0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
  // FALLOC_FL_ZERO_RANGE [| FALLOC_FL_KEEP_SIZE].
  absl::Status Allocate(InodeNumber ino, int mode, uint64_t offset, uint64_t length,
                        const Caller& caller);
  // Returns once every byte written to `ino` is in the arena (fsync).
  absl::Status Fsync(InodeNumber ino);
  // A private copy of regular file `ino`'s bytes for another process (the
  // share service, fs/share), made in memory that process allocates:
  // PlanCopy says which pieces of memory (Exporter::PlanCopy), FillCopy
  // copies into them (cached writes flushed first; later writes do not show
  // in it) and returns the bytes copied, the file's size or what fits.
  // EINVAL for an empty file or one that is not regular; EOPNOTSUPP where
  // the device cannot copy into another process's memory; EAGAIN when the
  // file's bytes moved between the two so that the pieces no longer fit.
  struct CopyPlan {
    uint64_t size = 0;  // the file's now
    std::vector<Exporter::CopyPiece> pieces;
  };
  absl::StatusOr<CopyPlan> PlanCopy(InodeNumber ino);
  // `memory`: the pieces, whose descriptors the caller checked.
  absl::StatusOr<uint64_t> FillCopy(InodeNumber ino, absl::Span<const Exporter::CopyMemory> memory);
  // The memory of regular file `ino` itself, which another process maps
  // and writes with no copy (ExtentMap::Share: the file may move into
  // blocks of its own first, and bypasses the write-back cache from then
  // on). EINVAL for a file smaller than the device's granule (such files
  // are copied, never shared) or not regular; EOPNOTSUPP where the device
  // cannot share memory; ENOSPC when the move finds no room.
  absl::StatusOr<std::unique_ptr<ExportedMemory>> ExportShared(InodeNumber ino);
  // A process wrote regular file `ino` through a shared mapping: its mtime
  // and ctime move, as a write's do.
  absl::Status NoteMappedWrite(InodeNumber ino);
  // SEEK_DATA / SEEK_HOLE (others are the kernel's business).
  absl::StatusOr<uint64_t> Seek(InodeNumber ino, uint64_t offset, int whence);
  absl::StatusOr<size_t> CopyFileRange(InodeNumber in, uint64_t in_offset, InodeNumber out,
                                       uint64_t out_offset, size_t length, const Caller& caller);

  // Directories. Calls `emit` for each entry after `cookie` (0 starts at
  // "."), in a stable order; stops when emit returns false (the entry did
  // not fit and is not consumed). Cookies stay valid while the directory
  // changes: an entry present throughout is returned exactly once. With
  // `plus`, each consumed entry other than "." and ".." gains a lookup
  // reference.
  absl::Status ReadDirectory(InodeNumber ino, uint64_t cookie, bool plus,
                             const std::function<bool(const DirectoryEntry&)>& emit);

  // Extended attributes. Namespaces: user.* (regular files and directories),
  // trusted.* and security.*; listing shows trusted.* names to uid 0 only.
  // Their names and values take inode space (see StatFs). Names under
  // kCudafsAttributePrefix are never stored: setting one is EPERM, and
  // removing one ENODATA (kWhereAttribute of a regular file: EPERM).
  absl::Status SetExtendedAttribute(InodeNumber ino, absl::string_view name,
                                    absl::string_view value, int flags);
  absl::StatusOr<std::string> GetExtendedAttribute(InodeNumber ino, absl::string_view name);
  // Names visible to the caller, each followed by NUL (listxattr's format).
  absl::StatusOr<std::string> ListExtendedAttributes(InodeNumber ino, const Caller& caller);
  absl::Status RemoveExtendedAttribute(InodeNumber ino, absl::string_view name);

  struct statvfs StatFs();
  PageCacheStats CacheStats() const;

  // Where file data lives (placement_ops.cc), for giving a GPU's memory
  // back to other programs (RoomKeeper). Moves the blocks that regular
  // files hold in arena part `from` into the first of `to` (parts) with
  // room, file by file, least or most recently used first, until at least
  // `bytes` have moved; returns the bytes moved. Every request sees a
  // file as if its bytes had never moved: each file moves under its lock,
  // a piece at a time. Files another process maps (ExportShared) stay.
  // `out_of_room`, when given, says whether the moves stopped for want of
  // room in `to` with bytes still to move.
  enum class MoveOrder { kLeastRecentlyUsed, kMostRecentlyUsed };
  uint64_t MoveData(size_t from, absl::Span<const size_t> to, uint64_t bytes, MoveOrder order,
                    bool* out_of_room = nullptr);
  // Compaction (Arena::PlanCompaction): moves the blocks of regular files
  // out of the sparsest committed granules into fuller ones, up to about
  // `budget` bytes, so that the emptied granules' memory goes back; returns
  // the bytes moved. As MoveData, each file under its lock, and files
  // another process maps stay.
  uint64_t CompactData(uint64_t budget);
  // Bytes of blocks regular file `ino` holds in each place
  // (DevicePart::place), as kWhereAttribute's value: "gpu0 N\nhost M\n".
  absl::StatusOr<std::string> Where(InodeNumber ino);

  // Images (image_ops.cc): the whole filesystem as bytes, for a process
  // that takes it over on the same device memory. SaveImage writes the
  // cache back first and must run with no operation and no move running;
  // FailedPrecondition while another process maps a file (ExportShared).
  // LoadImage, into a filesystem nothing was done with yet on that memory,
  // claims the image's blocks in the arena; InvalidArgument, with nothing
  // claimed or changed, for an image that is not one, breaks the tree or
  // does not fit this arena.
  absl::StatusOr<std::string> SaveImage();
  absl::Status LoadImage(absl::string_view image);
  // The metadata log (FilesystemConfig::metadata_log). CheckpointLog makes
  // the whole filesystem the log's checkpoint, emptying its journal (run
  // as SaveImage is: no operation, no move). LoadLog loads what `log`, kept
  // by another process, says, by LoadImage's rules; `report` says what
  // its replay mended (journal_records.h).
  absl::Status CheckpointLog();
  absl::Status LoadLog(const MetadataLog& log, ReplayReport* report);

 private:
  // The inodes, namespace, configuration and page cache that every
  // operation works on (fs/core/filesystem_state.h).
  const std::unique_ptr<FilesystemState> state_;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_CORE_FILESYSTEM_H_
