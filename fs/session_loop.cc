#include "fs/session_loop.h"

#include <linux/fuse.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <string>
#include <fstream>
#include <iterator>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "alloc/log.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace cudafs {
namespace {

// Written by the signal handlers and by workers that see the session end;
// the main thread sleeps on it.
int g_wakeup_fd = -1;

void Wake() {
  const uint64_t one = 1;
  (void)!write(g_wakeup_fd, &one, sizeof one);
}

void OnStopSignal(int) { Wake(); }

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

// libfuse reads whole requests of up to its session buffer size (256 pages
// of payload plus a 4 KiB header; fuse_i.h) into the buffer it is given,
// whatever size that buffer claims.
size_t ReceiveBufferSize() { return 256 * static_cast<size_t>(sysconf(_SC_PAGESIZE)) + 4096; }

// Where a request starts in a worker's buffer: placed so that a FUSE_WRITE's
// payload, which follows the request header and fuse_write_in, begins on a
// page boundary. The payload is what gets DMA'd
// to the device, and copies from page-aligned host memory take the copy
// engines' fast path; every other request only moves 80 bytes forward.
constexpr size_t kWritePayloadOffset = sizeof(fuse_in_header) + sizeof(fuse_write_in);
constexpr size_t kRequestOffset = 4096 - kWritePayloadOffset;

// How long open files of a lazily detached mount keep the daemon alive
// after it was told to stop.
constexpr absl::Duration kStopGrace = absl::Seconds(2);

class Workers {
 public:
  Workers(fuse_session* session, Device& device) : session_(session), device_(device) {}

  void Start(int count) {
    absl::MutexLock lock(&mu_);
    running_ = count;
    for (int i = 0; i < count; ++i) threads_.emplace_back([this] { Serve(); });
  }

  // Waits for every worker to return, at most `timeout`.
  bool AwaitStopped(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(
                                    +[](int* running) { return *running == 0; }, &running_),
                                timeout);
  }

  void Join() {
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
  }

  int error() {
    absl::MutexLock lock(&mu_);
    return error_;
  }

 private:
  void Serve() {
    const size_t capacity = kRequestOffset + ReceiveBufferSize();
    char* buffer = static_cast<char*>(device_.AllocateHostBuffer(capacity));
    int error = 0;
    while (buffer != nullptr && !fuse_session_exited(session_)) {
      fuse_buf request = {};
      request.mem = buffer + kRequestOffset;
      request.size = capacity - kRequestOffset;
      const int received = fuse_session_receive_buf(session_, &request);
      if (received == -EINTR || received == -EAGAIN) continue;
      if (received <= 0) {
        // 0: unmounted (libfuse saw ENODEV). Errors after the session was
        // told to exit come from its device fd being closed under us.
        if (!fuse_session_exited(session_)) error = received;
        break;
      }
      fuse_session_process_buf(session_, &request);
    }
    if (buffer == nullptr) error = -ENOMEM;
    if (buffer != nullptr) device_.FreeHostBuffer(buffer, capacity);
    fuse_session_exit(session_);
    absl::MutexLock lock(&mu_);
    if (error < 0 && error_ == 0) error_ = error;
    --running_;
    Wake();
  }

  fuse_session* const session_;
  Device& device_;
  std::vector<std::thread> threads_;
  absl::Mutex mu_;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  int error_ ABSL_GUARDED_BY(mu_) = 0;
};

// Undoes /proc/self/mountinfo's octal escapes ("\040" for a space).
std::string UnescapeMountField(absl::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && field.size() - i >= 4) {
      out.push_back(static_cast<char>(((field[i + 1] - '0') << 6) | ((field[i + 2] - '0') << 3) |
                                      (field[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(field[i]);
    }
  }
  return out;
}

// The FUSE connection number of the mount on `mountpoint`: the minor number
// of its device in /proc/self/mountinfo. Read from there rather than with
// stat(), which only our own workers could answer and which would hold the
// mount busy against an early unmount.
std::optional<unsigned> ConnectionOf(const std::string& mountpoint) {
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::optional<unsigned> connection;
  for (std::string line; std::getline(mountinfo, line);) {
    // "36 35 0:52 / /mnt/gpu rw,nosuid - fuse.cudafs cudafs rw,..."
    const std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    if (fields.size() < 5 || UnescapeMountField(fields[4]) != mountpoint) continue;
    const size_t colon = fields[2].find(':');
    unsigned minor_number;
    if (colon != absl::string_view::npos &&
        absl::SimpleAtoi(fields[2].substr(colon + 1), &minor_number)) {
      connection = minor_number;  // the last one: mounts stack
    }
  }
  return connection;
}

// Cuts the FUSE connection `id` (/sys/fs/fuse/connections): blocked
// requests fail and the workers' reads return.
bool AbortConnection(unsigned id) {
  const std::string path = absl::StrFormat("/sys/fs/fuse/connections/%u/abort", id);
  FILE* abort = std::fopen(path.c_str(), "w");
  if (abort == nullptr) return false;
  const bool written = std::fputs("1", abort) >= 0;
  return std::fclose(abort) == 0 && written;
}

}  // namespace

int RunSessionLoop(fuse_session* session, const std::string& mountpoint, Device& device,
                   int threads) {
  g_wakeup_fd = eventfd(0, EFD_CLOEXEC);
  if (g_wakeup_fd < 0) return -errno;

  struct sigaction stop = {};
  stop.sa_handler = OnStopSignal;
  stop.sa_flags = SA_RESTART;
  sigemptyset(&stop.sa_mask);
  struct sigaction ignore = stop;
  ignore.sa_handler = SIG_IGN;
  struct sigaction saved[std::size(kStopSignals)], saved_pipe;
  for (size_t i = 0; i < std::size(kStopSignals); ++i) {
    sigaction(kStopSignals[i], &stop, &saved[i]);
  }
  // A reader that went away must not kill the daemon.
  sigaction(SIGPIPE, &ignore, &saved_pipe);

  // Workers block the stop signals, so they reach this thread.
  sigset_t stop_set, previous_mask;
  sigemptyset(&stop_set);
  for (int signal : kStopSignals) sigaddset(&stop_set, signal);
  pthread_sigmask(SIG_BLOCK, &stop_set, &previous_mask);
  Workers workers(session, device);
  workers.Start(threads);
  pthread_sigmask(SIG_SETMASK, &previous_mask, nullptr);

  // The connection's number, to cut it if open files outlive the unmount.
  const std::optional<unsigned> connection = ConnectionOf(mountpoint);

  uint64_t wakeups;
  while (read(g_wakeup_fd, &wakeups, sizeof wakeups) < 0 && errno == EINTR) {
  }
  fuse_session_exit(session);
  fuse_session_unmount(session);
  if (!workers.AwaitStopped(kStopGrace)) {
    if (!connection || !AbortConnection(*connection)) {
      LogError(absl::StrCat(mountpoint,
                            ": files still open after unmount and the connection cannot be cut "
                            "(is /sys/fs/fuse/connections mounted?)"));
    }
    if (!workers.AwaitStopped(kStopGrace)) {
      // Workers stuck in the kernel would touch the device after it is
      // gone; the driver frees VRAM at process exit anyway.
      LogError(absl::StrCat(mountpoint, ": requests still in flight; exiting"));
      _exit(1);
    }
  }
  workers.Join();

  for (size_t i = 0; i < std::size(kStopSignals); ++i) {
    sigaction(kStopSignals[i], &saved[i], nullptr);
  }
  sigaction(SIGPIPE, &saved_pipe, nullptr);
  close(g_wakeup_fd);
  g_wakeup_fd = -1;
  return workers.error();
}

}  // namespace cudafs
