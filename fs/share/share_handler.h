// ShareHandler: what the share service does with one request of a peer the
// server let in (peer_access.h): checks the descriptor that came with it
// (descriptor_checks.h), asks the filesystem (a copy's plan and fill, a
// shared mapping's export, a sync), and says what to send back
// (share_mapping.h, share_replies.h) and what the connection waits for
// next; a make-room request goes to the settings' RoomMaker. It touches
// no socket, so no peer can hold it up.
#ifndef CUDAFS_FS_SHARE_SHARE_HANDLER_H_
#define CUDAFS_FS_SHARE_SHARE_HANDLER_H_

#include <sys/types.h>

#include <cstdint>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "fs/core/filesystem.h"
#include "fs/share/share_outcome.h"
#include "fs/share/share_settings.h"
#include "fs/wire/share_protocol.h"

namespace cudafs {

class ShareHandler {
 public:
  // `filesystem` must outlive the handler.
  ShareHandler(Filesystem* filesystem, ShareSettings settings)
      : filesystem_(filesystem), settings_(std::move(settings)) {}

  // Serves `request` (its magic this protocol's) of the peer `uid` with
  // the descriptors `fds` that came with it (the caller keeps them),
  // arriving when the connection waits for `expected` (kClose: a fresh
  // connection). `previous`: what the last outcome of the connection
  // asked for (kFill's copy).
  ShareOutcome Serve(const ShareRequest& request, uid_t uid, absl::Span<const int> fds,
                     ShareNext expected, const ShareOutcome& previous);

  // For --stats: requests answered, those refused (an errno), copies and
  // shared mappings handed out and their bytes, syncs after mapped writes.
  struct Stats {
    uint64_t requests = 0;
    uint64_t refused = 0;
    uint64_t copies = 0;
    uint64_t copied_bytes = 0;
    uint64_t shared = 0;
    uint64_t shared_bytes = 0;
    uint64_t syncs = 0;
    uint64_t rooms = 0;  // make-room requests that got their room
  };
  Stats stats() const;
  // Counts a request refused before it reached Serve (a wrong protocol, a
  // peer not let in, a busy server).
  void CountRefused();

  const ShareSettings& settings() const { return settings_; }

 private:
  // kShareMap: the descriptor checked, then a copy's plan or the file's
  // own memory.
  ShareOutcome Map(int fd, bool writable);
  ShareOutcome PlanCopy(InodeNumber ino);
  ShareOutcome Share(InodeNumber ino);
  // kShareFill: the memory `planned` asked for, filled.
  ShareOutcome Fill(absl::Span<const int> fds, uint64_t memory_bytes,
                    const ShareOutcome& planned);
  // kShareSync: what the kernel caches of the file dropped.
  ShareOutcome Sync(int fd);
  // kShareMakeRoom, for `uid`.
  ShareOutcome MakeRoom(const ShareRequest& request, uid_t uid);
  // A reply carrying `status` (success, with nothing more to say, if ok),
  // counted.
  ShareOutcome Answer(const absl::Status& status);

  Filesystem* const filesystem_;
  const ShareSettings settings_;
  mutable absl::Mutex mu_;
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cudafs

#endif  // CUDAFS_FS_SHARE_SHARE_HANDLER_H_
