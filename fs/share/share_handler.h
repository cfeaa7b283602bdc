// ShareHandler: what the share service does with one request of a peer the
// server let in: checks the descriptor that came with it, asks the
// filesystem, and says what to send back and what the connection waits
// for next. It touches no socket, so no peer can hold it up.
#ifndef CUDAFS_FS_SHARE_SHARE_HANDLER_H_
#define CUDAFS_FS_SHARE_SHARE_HANDLER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "absl/synchronization/mutex.h"
#include "fs/core/filesystem.h"
#include "fs/core/kernel_notifier.h"
#include "fs/wire/share_protocol.h"

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
};

// Whether user `uid` may use the mount (FUSE's rule: the owner, anyone
// with allow_other, root with allow_root).
bool ShareAllowed(uid_t uid, const ShareSettings& settings);

// A message to send, with descriptors borrowed from ShareOutcome::held.
struct ShareMessage {
  std::string bytes;
  std::vector<int> fds;
};

// What a connection waits for after the messages are sent.
enum class ShareNext {
  kClose,
  kFill,      // kShareFill, with memory for the copy planned
  kImported,  // kShareImported (or the end): `held` goes then
};

struct ShareOutcome {
  std::vector<ShareMessage> messages;
  std::unique_ptr<ExportedMemory> held;
  ShareNext next = ShareNext::kClose;
  // kFill: the copy the client provides memory for, in pieces of these
  // lengths.
  InodeNumber ino = 0;
  ShareMemoryKind kind = kShareHost;
  std::vector<uint64_t> piece_bytes;
};

// The reply refusing with `error` and `why`, in the framing of the
// client's protocol `magic` (its layout up to the message is the same in
// every version).
ShareMessage ShareRefusal(uint32_t magic, int error, absl::string_view why);

// Refuses a request at once from its first four bytes when they announce
// another protocol than this daemon's (in words that client shows) or no
// cudafs protocol at all; nullopt when they announce this one.
std::optional<ShareMessage> RefuseOtherProtocol(uint32_t magic);

class ShareHandler {
 public:
  // `filesystem` must outlive the handler.
  ShareHandler(Filesystem* filesystem, ShareSettings settings)
      : filesystem_(filesystem), settings_(std::move(settings)) {}

  // Serves `request` (its magic this protocol's) with the descriptors
  // `fds` that came with it (the caller keeps them), arriving when the
  // connection waits for `expected` (kClose: a fresh connection).
  // `previous`: what the last outcome of the connection asked for (kFill's
  // copy).
  ShareOutcome Serve(const ShareRequest& request, absl::Span<const int> fds, ShareNext expected,
                     const ShareOutcome& previous);

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
  };
  Stats stats() const;
  // Counts a request refused before it reached Serve (a wrong protocol, a
  // peer not let in, a busy server).
  void CountRefused();

  const ShareSettings& settings() const { return settings_; }

 private:
  ShareOutcome Map(int fd, bool writable);
  ShareOutcome Fill(absl::Span<const int> fds, uint64_t memory_bytes,
                    const ShareOutcome& planned);
  ShareOutcome Sync(int fd);
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
