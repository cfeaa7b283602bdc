// The keeper: what lets a mount outlive its daemon (docs/DESIGN.md, *A
// daemon that dies, survived*), for mounts made with `survive`.
//
// The daemon starts it before mounting: this binary again, run as
// `cudafs-keeper MOUNTPOINT` with one end of a socket pair as its stdin,
// whose other end only the daemon holds. Once the kernel's INIT came, the
// daemon sends it what a successor takes the mount over with (HandedOver:
// the /dev/fuse descriptor, the memory's descriptors, the metadata log's,
// INIT, the negotiation and the command line; no image: the log holds the
// metadata). The keeper holds those and nothing else: it never maps the
// memory or reads the log. A GPU's memory changes as the daemon maps and
// releases its pieces: the daemon tells the keeper of each (Follow), a
// mapped piece's descriptor riding along, before any file's block in it
// is handed out.
//
// When the daemon's end closes without a farewell, however the daemon
// died, the keeper starts a successor: the mount's command line, run by
// this binary with kKeeperFdVariable naming its end of a new socket pair,
// to which the keeper sends what it holds; once the successor answers that
// it serves, the keeper keeps it as it kept the first. Requests the dead
// daemon had read wait in the kernel meanwhile, and the successor has them
// sent again. A successor that fails is tried again, kMaxAttempts times in
// a row; then the keeper gives up: it closes what it holds, so the mount
// answers ENOTCONN, and detaches the mount (as root; for others
// `fusermount3 -u -z`).
//
// A farewell (the daemon unmounted, or handed the mount to `cudafs
// --upgrade`) ends the keeper, closing what it held. A keeper that dies
// leaves its daemon serving as one without a keeper.
#ifndef CUDAFS_FS_DAEMON_KEEPER_H_
#define CUDAFS_FS_DAEMON_KEEPER_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "alloc/devices/device_hand_over.h"
#include "fs/daemon/hand_over.h"

namespace cudafs {

// The keeper's argv[0], which tells main to run it.
inline constexpr char kKeeperName[] = "cudafs-keeper";
// In a successor's environment: the descriptor of its connection to the
// keeper that started it.
inline constexpr char kKeeperFdVariable[] = "CUDAFS_KEEPER_FD";
// ... and the mountpoint, absolute (its command line may name it relative
// to a directory the daemon left).
inline constexpr char kKeeperMountpointVariable[] = "CUDAFS_KEEPER_MOUNTPOINT";

// The daemon's end.
class KeeperLink {
 public:
  // How many successors in a row may fail before the keeper gives up.
  static constexpr int kMaxAttempts = 5;

  // Starts the keeper for `mountpoint` (absolute). REQUIRES: /proc mounted
  // (the keeper runs /proc/self/exe).
  static absl::StatusOr<KeeperLink> Start(const std::string& mountpoint);
  // A successor's: the connection its keeper started it with (taken).
  explicit KeeperLink(int connection) : connection_(connection) {}
  KeeperLink(KeeperLink&& other) noexcept;
  KeeperLink& operator=(KeeperLink&&) = delete;
  // Without a farewell: to the keeper, the daemon died.
  ~KeeperLink();

  // Gives the keeper what a successor needs (its image unused), in place of
  // what it held.
  absl::Status Hold(const HandedOver& state);
  // A GPU piece mapped or released since (DeviceHandOver::WatchPieces);
  // a mapped piece's descriptor is sent, and closed. Thread-safe.
  absl::Status Follow(const DeviceHandOver::PieceChange& change);
  // The daemon ends on purpose: the keeper lets go of everything and ends.
  void Farewell();

 private:
  // One message at a time: Hold's may take several.
  std::unique_ptr<absl::Mutex> mu_ = std::make_unique<absl::Mutex>();
  int connection_ ABSL_GUARDED_BY(*mu_);
};

// The keeper's main, for `cudafs-keeper MOUNTPOINT` with the daemon's
// connection as stdin.
int RunKeeper(const std::string& mountpoint);

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_KEEPER_H_
