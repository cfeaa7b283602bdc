// DescriptorCloser: closes descriptors whose close(2) may wait without
// limit (a file of a FUSE filesystem whose server never answers FLUSH) on
// a thread of its own, so that no request, shutdown or unmount waits with
// them. A stalled close stalls only this thread; the descriptors behind it
// stay counted against the user who sent them, so the share server can
// refuse that user more.
#ifndef CUDAFS_FS_SHARE_DESCRIPTOR_CLOSER_H_
#define CUDAFS_FS_SHARE_DESCRIPTOR_CLOSER_H_

#include <sys/types.h>

#include <memory>

namespace cudafs {

class DescriptorCloser {
 public:
  DescriptorCloser();
  // Returns at once: a close still stalled then finishes, or not, on its
  // own thread, which holds nothing of the caller's.
  ~DescriptorCloser();

  DescriptorCloser(const DescriptorCloser&) = delete;
  DescriptorCloser& operator=(const DescriptorCloser&) = delete;

  // Takes `fd`, sent by user `uid`, and closes it soon.
  void Close(int fd, uid_t uid);
  // Descriptors of `uid` not closed yet.
  int pending(uid_t uid) const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_SHARE_DESCRIPTOR_CLOSER_H_
