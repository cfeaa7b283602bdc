// Fd: owns a file descriptor and closes it when destroyed.
#ifndef CUDAFS_TESTS_SUPPORT_FD_H_
#define CUDAFS_TESTS_SUPPORT_FD_H_

#include <unistd.h>

#include <utility>

namespace cudafs_test {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    Reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ~Fd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Closes now and returns close()'s result, for tests about close itself.
  int Close() { return ::close(std::exchange(fd_, -1)); }
  void Reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace cudafs_test

#endif  // CUDAFS_TESTS_SUPPORT_FD_H_
