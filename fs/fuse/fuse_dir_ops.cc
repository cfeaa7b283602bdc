// Handlers of names, links and directories.
#include <linux/fs.h>

#include <cerrno>
#include <vector>

#include "alloc/base/errors.h"
#include "fs/fuse/fuse_handlers.h"
#include "fs/fuse/fuse_replies.h"
#include "fs/fuse/resent_requests.h"

namespace cudafs::fuse_glue {
namespace {

// A READDIR (or, with `plus`, READDIRPLUS) reply of up to `size` bytes,
// from the entry after cookie `offset`.
void ReadDirectoryCommon(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, bool plus) {
  std::vector<char> buffer(size);
  size_t used = 0;
  absl::Status status = Fs(req).ReadDirectory(
      ino, static_cast<uint64_t>(offset), plus, [&](const DirectoryEntry& entry) {
        char* out = buffer.data() + used;
        const size_t room = size - used;
        size_t needed;
        if (plus) {
          fuse_entry_param param{};
          const bool dot = entry.name == "." || entry.name == "..";
          if (dot) {
            // The kernel takes no reference for these; ino 0 says so.
            param.attr.st_ino = entry.attr.st_ino;
            param.attr.st_mode = entry.attr.st_mode;
          } else {
            param = EntryOf(req, entry.attr);
          }
          needed = fuse_add_direntry_plus(req, out, room, entry.name.c_str(), &param,
                                          static_cast<off_t>(entry.next_cookie));
        } else {
          needed = fuse_add_direntry(req, out, room, entry.name.c_str(), &entry.attr,
                                     static_cast<off_t>(entry.next_cookie));
        }
        if (needed > room) return false;
        used += needed;
        return true;
      });
  if (!status.ok()) return ReplyError(req, status);
  fuse_reply_buf(req, buffer.data(), used);
}

}  // namespace

void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  absl::StatusOr<struct stat> st = Fs(req).Lookup(parent, name);
  if (absl::IsNotFound(st.status()) || ToErrno(st.status()) == ENOENT) {
    // A negative entry (inode 0) lets the kernel cache "no such name" like
    // any other: creating a file then costs no LOOKUP round trip. Every
    // create goes through this connection, which drops the negative entry.
    fuse_entry_param negative{};
    negative.entry_timeout = Context(req).settings.entry_timeout;
    fuse_reply_entry(req, &negative);
    return;
  }
  ReplyEntry(req, st);
}

void Forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  Context(req).stats.requests.CountForgotten(1);
  Fs(req).Forget(ino, nlookup);
  fuse_reply_none(req);
}

void ForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  Context(req).stats.requests.CountForgotten(count);
  for (size_t i = 0; i < count; ++i) Fs(req).Forget(forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

void ReadLink(fuse_req_t req, fuse_ino_t ino) {
  absl::StatusOr<std::string> target = Fs(req).ReadLink(ino);
  if (!target.ok()) return ReplyError(req, target.status());
  fuse_reply_readlink(req, target->c_str());
}

void MakeNode(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  ReplyEntry(req, MadeBefore(req, Fs(req).MakeNode(parent, name, mode, rdev, CallerOf(req)),
                             parent, name, (mode & S_IFMT) != 0 ? mode & S_IFMT : S_IFREG));
}

void MakeDirectory(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  ReplyEntry(req, MadeBefore(req, Fs(req).MakeDirectory(parent, name, mode, CallerOf(req)),
                             parent, name, S_IFDIR));
}

void SymbolicLink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
  ReplyEntry(req, MadeBefore(req, Fs(req).SymbolicLink(parent, name, target, CallerOf(req)),
                             parent, name, S_IFLNK));
}

void Link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t new_parent, const char* new_name) {
  ReplyEntry(req, MadeBefore(req, Fs(req).Link(ino, new_parent, new_name), new_parent, new_name,
                             /*type=*/0, ino));
}

void Unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  ReplyStatus(req, DoneBefore(Fs(req).Unlink(parent, name)));
}

void RemoveDirectory(fuse_req_t req, fuse_ino_t parent, const char* name) {
  ReplyStatus(req, DoneBefore(Fs(req).RemoveDirectory(parent, name)));
}

// An exchange finds no trace of its own effect (both names are there
// either way): the log says which were done, and one sent again after a
// crash is not swapped back.
void Rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent,
            const char* new_name, unsigned int flags) {
  if ((flags & RENAME_EXCHANGE) && Resent() && Fs(req).ExchangeDone(RequestId())) {
    fuse_reply_err(req, 0);
    return;
  }
  ReplyStatus(req, DoneBefore(Fs(req).Rename(parent, name, new_parent, new_name, flags,
                                             RequestId())));
}

// Directories are opened with a request, although nothing needs it: with
// FUSE_CAP_NO_OPENDIR_SUPPORT and attributes cached for a day, opening the
// mount's root succeeds from the kernel's caches even when the daemon has
// died and the kernel has not yet aborted the connection (over io_uring
// that can take a while), and fusermount3's auto_unmount, which unmounts
// only when that open fails with ENOTCONN, would leave the dead mount
// behind. With OPENDIR the open waits for the abort and fails.
//
// The kernel's readdir cache (FOPEN_CACHE_DIR) is not asked for: it takes
// in a READDIR reply whenever it arrives, checking the directory's version
// at that moment, not when the request was sent. A listing answered before
// an unlink and delivered after another lister restarted the cache stays
// in it, and the unlinker's next listing shows the name it removed. No
// notification from here can be ordered after a reply's delivery.
// docs/MEASUREMENTS.md, "The kernel's readdir cache turned off", has how
// often that was seen and what leaving the cache off costs.
void OpenDirectory(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  absl::StatusOr<struct stat> st = Fs(req).GetAttributes(ino);
  if (!st.ok()) return ReplyError(req, st.status());
  if (!S_ISDIR(st->st_mode)) return (void)fuse_reply_err(req, ENOTDIR);
  fuse_reply_open(req, fi);
}

void ReadDirectory(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, fuse_file_info*) {
  ReadDirectoryCommon(req, ino, size, offset, /*plus=*/false);
}

void ReadDirectoryPlus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, fuse_file_info*) {
  ReadDirectoryCommon(req, ino, size, offset, /*plus=*/true);
}

void ReleaseDirectory(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }

}  // namespace cudafs::fuse_glue
