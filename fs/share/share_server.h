// ShareServer: the socket through which a program maps a file of the mount
// into its own memory, GPU memory for the GPU backend, with no copy
// through FUSE (the wire format: fs/wire/share_protocol.h; the client:
// fs/client/cudafs.h; what each request does: ShareHandler).
//
// No peer can stall it: the peer's uid is checked at accept, before it
// costs anything (FUSE's rule: the mounting user, anyone with allow_other,
// root with allow_root); one thread reads and writes every connection
// without blocking, each with a deadline, and hands complete requests to
// workers that touch no socket; each user holds a bounded number of
// connections, and some are kept for the owner and root; descriptors of a
// kind no request takes are refused as they come; no thread of the
// server closes what a peer sent, or a connection still holding unread
// messages (whose descriptors the close would release): a
// DescriptorCloser does, on a lane of the sender's, and they count
// against their sender meanwhile.
//
// The socket is abstract ("@cudafs-PID-RANDOM"): nothing on disk to clean
// up, gone with the daemon, and its name is published through the mount
// root's kShareSocketAttribute.
#ifndef CUDAFS_FS_SHARE_SHARE_SERVER_H_
#define CUDAFS_FS_SHARE_SHARE_SERVER_H_

#include <sys/types.h>

#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "fs/core/filesystem.h"
#include "fs/share/descriptor_closer.h"
#include "fs/share/share_handler.h"
#include "fs/share/share_outcome.h"
#include "fs/share/share_settings.h"

namespace cudafs {

class ShareServer {
 public:
  // Threads serving requests at once; make-room requests, which take
  // seconds and run one at a time anyway (RoomKeeper), have a thread of
  // their own, so that maps are served meanwhile.
  static constexpr int kWorkers = 4;
  // Connections open at once, in all and per user (a user's descriptors
  // still being closed count as connections); more are refused with
  // EAGAIN.
  static constexpr size_t kMaxConnections = 256;
  static constexpr size_t kReservedForOwner = 32;
  static constexpr int kMaxPerUser = 16;
  // How long a peer may take to send a request after connecting or after
  // a reply asked for memory, to read what is sent, and to import a
  // shared mapping's pieces.
  static constexpr absl::Duration kRequestDeadline = absl::Seconds(2);
  static constexpr absl::Duration kReplyDeadline = absl::Seconds(10);
  static constexpr absl::Duration kImportDeadline = absl::Seconds(30);

  // Listens on a fresh abstract socket and serves from threads of its own.
  // `filesystem` must outlive the server.
  static absl::StatusOr<std::unique_ptr<ShareServer>> Start(Filesystem* filesystem,
                                                            ShareSettings settings);
  // Stops listening, ends the connections and waits for the workers.
  ~ShareServer();

  ShareServer(const ShareServer&) = delete;
  ShareServer& operator=(const ShareServer&) = delete;

  // "@NAME": what the mount root's kShareSocketAttribute says.
  const std::string& address() const { return address_; }
  // For --stats: the requests served, and what peers sent being closed.
  struct Stats {
    ShareHandler::Stats requests;
    uint64_t closed = 0;   // descriptors and connections closed on lanes
    uint64_t closing = 0;  // not closed yet: a close that waits shows here
  };
  Stats stats() const;

 private:
  struct Connection;
  // A complete request for a worker, and what it made of it.
  struct Job {
    int socket;
    uid_t uid;
    ShareRequest request;
    std::vector<int> fds;
    ShareNext expected;
    ShareOutcome previous;  // the plan a kFill answers
  };
  struct Done {
    int socket;
    ShareOutcome outcome;
  };

  ShareServer(Filesystem* filesystem, ShareSettings settings, int listener, int wake,
              int spare, std::string address);

  // The connections' thread: accepts, reads, writes, expires.
  void Loop();
  void AcceptAll();
  // A peer not let in, whose uid is not counted.
  static constexpr uid_t kNobody = static_cast<uid_t>(-1);

  // Sends `refusal` on a connection of `uid` being turned away and closes
  // it.
  void TurnAway(int socket, uid_t uid, int error, absl::string_view why);
  // Closes a connection of `uid`, where its close cannot stall us.
  void CloseConnection(int socket, uid_t uid);
  // Reads what the peer sent; a whole request becomes a job.
  void Read(Connection& connection);
  // Sends the connection's outcome from its first message, then what the
  // socket takes of it.
  void StartWriting(Connection& connection);
  void Write(Connection& connection);
  void Finish(Done done);
  // Ends a connection; one a worker serves only once its result is back,
  // unless the server is `stopping`.
  void Drop(int socket, bool stopping = false);
  // A worker: serves jobs (make-room ones, if `rooms`) until the server
  // stops.
  void Work(bool rooms);
  // Closes a descriptor a peer sent, where its close cannot stall us.
  void Dispose(int fd, uid_t uid);

  ShareHandler handler_;
  const int listener_;
  const int wake_;  // an eventfd: workers' results, or the stop
  int spare_;       // a descriptor kept to accept with when out of them
  const std::string address_;
  DescriptorCloser closer_;

  // The loop thread's own.
  absl::flat_hash_map<int, std::unique_ptr<Connection>> connections_;
  absl::flat_hash_map<uid_t, int> per_user_;

  absl::Mutex mu_;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  std::deque<Job> room_jobs_ ABSL_GUARDED_BY(mu_);
  std::vector<Done> done_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread loop_;
  std::vector<std::thread> workers_;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_SHARE_SHARE_SERVER_H_
