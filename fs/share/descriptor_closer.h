// DescriptorCloser: closes the descriptors that peers of the share service
// sent, and its connections, where close(2) may wait without limit (a file
// of a FUSE filesystem whose server never answers FLUSH, a socket lingering
// on a full send queue, a connection whose unread messages carry such
// descriptors), so that no request, shutdown or unmount waits with them.
//
// Each sender's descriptors are closed in order on a thread of that sender
// (its lane), started when there is something to close and ended when idle:
// a stalled close holds up only the user who sent it, whose descriptors stay
// counted (pending) meanwhile, so the share server refuses that user more.
// Lanes are bounded; past kMaxLanes users at once, the rest share one.
#ifndef CUDAFS_FS_SHARE_DESCRIPTOR_CLOSER_H_
#define CUDAFS_FS_SHARE_DESCRIPTOR_CLOSER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>

namespace cudafs {

class DescriptorCloser {
 public:
  static constexpr int kMaxLanes = 64;

  DescriptorCloser();
  // Returns at once: closes still queued then finish, or not, on their
  // lanes, which hold nothing of the caller's.
  ~DescriptorCloser();

  DescriptorCloser(const DescriptorCloser&) = delete;
  DescriptorCloser& operator=(const DescriptorCloser&) = delete;

  // Takes `fd`, sent by user `uid` (or a connection of theirs), and closes
  // it soon.
  void Close(int fd, uid_t uid);
  // Descriptors of `uid` not closed yet.
  int pending(uid_t uid) const;

  // For --stats: descriptors closed, and those not closed yet.
  struct Stats {
    uint64_t closed = 0;
    uint64_t pending = 0;
  };
  Stats stats() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_SHARE_DESCRIPTOR_CLOSER_H_
