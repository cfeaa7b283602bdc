// Hand-over: a mount passed from its daemon to a successor process without
// unmounting (`cudafs --upgrade MOUNTPOINT`), so that a new binary serves
// the files the old one held. docs/DESIGN.md, *A daemon that dies,
// survived*, says what the kernel and libfuse allow.
//
// The successor listens on the abstract socket "@cudafs-hand-over-PID" of
// the daemon it takes over, then sends that daemon SIGUSR1: only root and
// the daemon's user may, as only they may take the mount over. The daemon
// stops its workers between requests (RunSessionLoop; requests then wait
// in the kernel), stops its background tasks, writes its filesystem image,
// connects, checks that the listener runs as root or as itself, and sends
// one message: what the successor needs (HandedOver), its descriptors
// riding along, or why it will not hand over. The successor takes the
// mount over and answers that it serves, and the daemon exits at once,
// unmounting and freeing nothing; any other answer, or none, and the
// daemon serves on.
#ifndef CUDAFS_FS_DAEMON_HAND_OVER_H_
#define CUDAFS_FS_DAEMON_HAND_OVER_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "alloc/devices/device_hand_over.h"

namespace cudafs {

// What a successor takes over. The descriptors are owned (closed by the
// destructor unless taken: -1).
struct HandedOver {
  HandedOver() = default;
  HandedOver(HandedOver&& other) noexcept;
  HandedOver& operator=(HandedOver&&) = delete;
  ~HandedOver();

  int fuse_fd = -1;  // the session's /dev/fuse
  // The memory the files are in.
  DeviceHandOver memory{"", {}};
  uint64_t capacity = 0;     // what the arena may hand out
  uint32_t generation = 0;   // of every inode (FuseSettings::generation)
  std::string init_request;  // the kernel's INIT, for the session to replay
  // What the predecessor negotiated (HandOverNegotiation), which the
  // successor's must equal: the kernel keeps the first negotiation.
  std::string negotiation;
  std::string image;  // Filesystem::SaveImage
  // The command line the mount was made with (argv), whose options the
  // successor serves it with.
  std::vector<std::string> arguments;
  // The metadata log (fs/core/metadata_log.h), where a keeper hands the
  // mount to a successor after a crash (fs/daemon/keeper.h): the image is
  // then what the log says. -1: none.
  int log_fd = -1;
};

// The message on a connected SOCK_SEQPACKET socket: SendHandedOver sends
// `state` with its descriptors (dups of them travel), the image in a
// memfd; SendRefusal says why there is none, and returns `why`.
// ReceiveHandedOver receives either: what the sender hands over, or why
// not. The successor answers with SendAnswer whether it serves (OK) or why
// not, which the sender's ReceiveAnswer returns (or that no answer came).
absl::Status SendHandedOver(int connection, const HandedOver& state);
absl::Status SendRefusal(int connection, const absl::Status& why);
absl::StatusOr<HandedOver> ReceiveHandedOver(int connection);
void SendAnswer(int connection, const absl::Status& serving);
absl::Status ReceiveAnswer(int connection);

// The predecessor's side: connects to the successor waiting for this
// process and, once it checked who that is, sends it what `state` makes
// (or, when that is an error, why not). OK once the successor serves the
// mount: the caller must then exit at once. Any error: no successor, or
// it refused, and the caller serves on.
absl::Status HandOver(absl::FunctionRef<absl::StatusOr<HandedOver>()> state);

// The successor's side.
class HandOverListener {
 public:
  // How long the daemon may take to stop its workers and write its image.
  static constexpr absl::Duration kTimeout = absl::Seconds(60);

  // Listens for daemon `daemon` and asks it (SIGUSR1) to hand over.
  static absl::StatusOr<HandOverListener> Ask(pid_t daemon);
  HandOverListener(HandOverListener&& other) noexcept;
  HandOverListener& operator=(HandOverListener&&) = delete;
  ~HandOverListener();

  // What the daemon sends, or why it does not hand over.
  absl::StatusOr<HandedOver> Receive();
  // The connection Receive took (SendAnswer's).
  int connection() const { return connection_; }
  // Tells the daemon the successor serves (it exits), or why it does not
  // (it serves on).
  void Answer(const absl::Status& serving);

 private:
  HandOverListener(int listener, pid_t daemon) : listener_(listener), daemon_(daemon) {}

  int listener_;
  pid_t daemon_;
  int connection_ = -1;
};

// What a successor's Serve takes the mount from (serve.h): what was handed
// over, and whom to tell whether it serves (SendAnswer's connection).
struct Predecessor {
  HandedOver handed;
  int answer_to = -1;
  // A keeper's successor (recovery after a crash): its connection to the
  // keeper, answer_to too, which it keeps for as long as it serves.
  bool from_keeper = false;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_HAND_OVER_H_
