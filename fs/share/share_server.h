// ShareServer: the socket through which a program maps a file of the mount
// into its own memory, GPU memory for the GPU backend, with no copy
// through FUSE (the wire format: fs/client/protocol.h; the client:
// fs/client/cudafs.h). A layer beside the FUSE glue, over the same
// Filesystem.
//
// A request proves access with an open descriptor of the file (SCM_RIGHTS),
// which must be of this mount, of a regular file, not O_PATH, and open for
// reading (a private copy, Filesystem::ExportCopy) or for reading and
// writing (a shared mapping of the file's own memory,
// Filesystem::ExportShared, and the sync after writing through one); the
// peer's uid must be one the mount lets in, as FUSE decides: the mounting
// user, anyone with allow_other, root with allow_root.
//
// The socket is abstract ("@cudafs-PID-RANDOM"): nothing on disk to clean
// up, gone with the daemon, and its unguessable name is published only
// through the mount root's CUDAFS_SOCKET_ATTRIBUTE.
#ifndef CUDAFS_FS_SHARE_SHARE_SERVER_H_
#define CUDAFS_FS_SHARE_SHARE_SERVER_H_

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "fs/core/filesystem.h"

namespace cudafs {

struct ShareSettings {
  dev_t mount_device = 0;  // st_dev of the mount's files
  uid_t owner = 0;         // the mounting user
  bool allow_other = false;
  bool allow_root = false;
  // Called after a process wrote file `ino` through a shared mapping, so
  // that the kernel drops what it caches of it.
  std::function<void(InodeNumber ino)> file_changed;
};

class ShareServer {
 public:
  // Connections served at once (the workers), and accepted ones that may
  // wait for a worker; more are refused with EAGAIN.
  static constexpr int kWorkers = 4;
  static constexpr size_t kMaxWaiting = 16;

  // Listens on a fresh abstract socket and serves from a thread of its own.
  // `filesystem` must outlive the server.
  static absl::StatusOr<std::unique_ptr<ShareServer>> Start(Filesystem* filesystem,
                                                            const ShareSettings& settings);
  // Stops listening, ends the connections and waits for them.
  ~ShareServer();

  ShareServer(const ShareServer&) = delete;
  ShareServer& operator=(const ShareServer&) = delete;

  // "@NAME": what the mount root's CUDAFS_SOCKET_ATTRIBUTE says.
  const std::string& address() const { return address_; }

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

 private:
  ShareServer(Filesystem* filesystem, const ShareSettings& settings, int listener,
              std::string address)
      : filesystem_(filesystem), settings_(settings), listener_(listener),
        address_(std::move(address)) {}

  void Accept();
  // A worker: serves waiting connections until the server stops.
  void Work();
  // Serves one connection (the caller closes it).
  void Serve(int connection);
  // Counts a request, refused unless `ok`, and what `count` adds.
  void Count(bool ok, absl::FunctionRef<void(Stats&)> count);

  Filesystem* const filesystem_;
  const ShareSettings settings_;
  const int listener_;
  const std::string address_;
  absl::Mutex mu_;
  // Accepted, waiting for a worker.
  std::deque<int> waiting_ ABSL_GUARDED_BY(mu_);
  // Being served (shut down on destruction, so that workers stop at once).
  absl::flat_hash_set<int> serving_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  mutable absl::Mutex stats_mu_;
  Stats stats_ ABSL_GUARDED_BY(stats_mu_);
  std::thread acceptor_;
  std::vector<std::thread> workers_;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_SHARE_SHARE_SERVER_H_
