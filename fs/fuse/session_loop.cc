#include "fs/fuse/session_loop.h"

#include <linux/fuse.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <iterator>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "alloc/base/log.h"
#include "alloc/devices/pinned_buffer.h"
#include "fs/fuse/resent_requests.h"

namespace cudafs {
namespace {

// Written by the signal handlers and by workers that see the session end;
// the main thread sleeps on it.
int g_wakeup_fd = -1;

void Wake() {
  const uint64_t one = 1;
  (void)!write(g_wakeup_fd, &one, sizeof one);
}

volatile sig_atomic_t g_stop_asked = 0;

void OnStopSignal(int) {
  g_stop_asked = 1;
  Wake();
}

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

// Asks for a hand-over (session_loop.h); only root and the daemon's user
// can send it, as they alone may take the mount over.
constexpr int kHandOverSignal = SIGUSR1;
volatile sig_atomic_t g_hand_over_asked = 0;

void OnHandOverSignal(int) {
  g_hand_over_asked = 1;
  Wake();
}

// AskForPause's.
std::atomic<bool> g_pause_asked{false};

// Sent to our own workers to interrupt a read() of /dev/fuse (EINTR) when
// the daemon stops; its handler does nothing.
constexpr int kInterruptSignal = SIGUSR2;

void OnInterruptSignal(int) {}

// Where a request starts in a worker's buffer: placed so that a FUSE_WRITE's
// payload, which follows the request header and fuse_write_in, begins on a
// page boundary. The payload is what gets DMA'd
// to the device, and copies from page-aligned host memory take the copy
// engines' fast path; every other request only moves 80 bytes forward.
constexpr size_t kWritePayloadOffset = sizeof(fuse_in_header) + sizeof(fuse_write_in);
constexpr size_t kRequestOffset = 4096 - kWritePayloadOffset;

// How long a worker may take to finish the request it is serving when the
// daemon stops.
constexpr absl::Duration kStopTimeout = absl::Seconds(5);

class Workers {
 public:
  Workers(fuse_session* session, Device& device, const SessionLoopSettings& settings)
      : session_(session), device_(device), settings_(settings) {}

  void Start(int count) {
    absl::MutexLock lock(&mu_);
    running_ = count;
    for (int i = 0; i < count; ++i) threads_.emplace_back([this] { Serve(); });
  }

  // Ends every worker of a session marked exited: each one still blocked
  // in read() is interrupted until it returns and sees the mark (a signal
  // sent just before it enters read() would be lost, hence the repeats).
  // False if some are still busy with a request after `timeout`.
  bool Stop(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (!AwaitStopped(absl::Milliseconds(10))) {
      if (absl::Now() > deadline) return false;
      // A thread that has returned but is not joined yet may still be
      // signalled (its id stays valid); the handler does nothing.
      for (std::thread& thread : threads_) pthread_kill(thread.native_handle(), kInterruptSignal);
    }
    return true;
  }

  // Ends every worker between two requests, leaving the session as it is:
  // what the kernel has not handed out stays queued for whoever reads the
  // connection next. (Not through fuse_session_exit: libfuse drops a
  // request it read after the session was marked exited, and the kernel
  // would wait for its answer forever.) False as Stop.
  bool Pause(absl::Duration timeout) {
    pausing_.store(true, std::memory_order_relaxed);
    return Stop(timeout);
  }

  void Join() {
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
  }

  int error() {
    absl::MutexLock lock(&mu_);
    return error_;
  }
  // Whether the session ended under a worker (unmounted, or failed).
  bool ended() {
    absl::MutexLock lock(&mu_);
    return ended_;
  }

 private:
  void Serve() {
    const size_t capacity = kRequestOffset + ReceiveBufferSize(settings_.max_request);
    const PinnedBuffer buffer(&device_, capacity);
    if (settings_.resident_buffers && buffer.data() != nullptr &&
        madvise(buffer.data(), capacity, MADV_POPULATE_WRITE) != 0) {
      std::memset(buffer.data(), 0, capacity);  // before Linux 5.14
    }
    int error = 0;
    while (buffer.data() != nullptr && !fuse_session_exited(session_) &&
           !pausing_.load(std::memory_order_relaxed)) {
      fuse_buf request = {};
      request.mem = buffer.data() + kRequestOffset;
      request.size = capacity - kRequestOffset;
      const int received = fuse_session_receive_buf(session_, &request);
      if (received == -EINTR || received == -EAGAIN) continue;
      if (received <= 0) {
        // 0: unmounted (libfuse saw ENODEV). Errors after the session was
        // told to exit come from its device fd being closed under us.
        if (!fuse_session_exited(session_)) {
          error = received;
          absl::MutexLock lock(&mu_);
          ended_ = true;
        }
        break;
      }
      const bool whole = static_cast<size_t>(received) >= sizeof(fuse_in_header);
      const bool init =
          whole && static_cast<const fuse_in_header*>(request.mem)->opcode == FUSE_INIT;
      if (whole) fuse_glue::NoteRequestId(static_cast<const fuse_in_header*>(request.mem)->unique);
      // Before any other request: the kernel waits for INIT's reply.
      if (init) settings_.init_request->assign(static_cast<const char*>(request.mem), received);
      fuse_session_process_buf(session_, &request);
      if (init && settings_.after_init) settings_.after_init();
    }
    if (buffer.data() == nullptr) error = -ENOMEM;
    // The others stop too, but for a pause, which stops each itself.
    if (!pausing_.load(std::memory_order_relaxed)) fuse_session_exit(session_);
    absl::MutexLock lock(&mu_);
    if (error < 0 && error_ == 0) error_ = error;
    --running_;
    Wake();
  }

  bool AwaitStopped(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(
                                    +[](int* running) { return *running == 0; }, &running_),
                                timeout);
  }

  fuse_session* const session_;
  Device& device_;
  const SessionLoopSettings& settings_;
  std::atomic<bool> pausing_{false};
  std::vector<std::thread> threads_;
  absl::Mutex mu_;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  int error_ ABSL_GUARDED_BY(mu_) = 0;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
};

// Blocks (SIG_BLOCK) or unblocks (SIG_UNBLOCK) the stop signals in the
// calling thread.
void MaskStopSignals(int how) {
  sigset_t stop_set;
  sigemptyset(&stop_set);
  for (int signal : kStopSignals) sigaddset(&stop_set, signal);
  sigaddset(&stop_set, kHandOverSignal);
  pthread_sigmask(how, &stop_set, nullptr);
}

}  // namespace

void BlockStopSignals() { MaskStopSignals(SIG_BLOCK); }

size_t ReceiveBufferSize(size_t max_request) {
  return std::max<size_t>(max_request, 256 * static_cast<size_t>(sysconf(_SC_PAGESIZE))) + 4096;
}

int RunSessionLoop(fuse_session* session, const std::string& mountpoint, Device& device,
                   const SessionLoopSettings& settings) {
  g_wakeup_fd = eventfd(0, EFD_CLOEXEC);
  if (g_wakeup_fd < 0) return -errno;
  g_hand_over_asked = 0;
  g_stop_asked = 0;
  g_pause_asked = false;
  fuse_session_reset(session);  // served again after a hand-over that failed

  // No SA_RESTART: the main thread's read of the wakeup eventfd returns
  // EINTR (and is read again), and ThreadSanitizer runs a handler only when
  // the call it interrupted returns, which a restarted read never did.
  struct sigaction stop = {};
  stop.sa_handler = OnStopSignal;
  sigemptyset(&stop.sa_mask);
  struct sigaction ignore = stop;
  ignore.sa_handler = SIG_IGN;
  // No SA_RESTART: the point is to make a blocked read() return.
  struct sigaction interrupt = {};
  interrupt.sa_handler = OnInterruptSignal;
  sigemptyset(&interrupt.sa_mask);
  struct sigaction hand_over = stop;
  hand_over.sa_handler = OnHandOverSignal;
  struct sigaction saved[std::size(kStopSignals)], saved_pipe, saved_interrupt, saved_hand_over;
  for (size_t i = 0; i < std::size(kStopSignals); ++i) {
    sigaction(kStopSignals[i], &stop, &saved[i]);
  }
  sigaction(kHandOverSignal, &hand_over, &saved_hand_over);
  sigaction(kInterruptSignal, &interrupt, &saved_interrupt);
  // A reader that went away must not kill the daemon.
  sigaction(SIGPIPE, &ignore, &saved_pipe);

  // Workers block the stop signals, so they reach this thread; one that
  // came since BlockStopSignals is delivered to the handler now.
  BlockStopSignals();
  Workers workers(session, device, settings);
  workers.Start(settings.threads);
  MaskStopSignals(SIG_UNBLOCK);

  uint64_t wakeups;
  while (read(g_wakeup_fd, &wakeups, sizeof wakeups) < 0 && errno == EINTR) {
  }
  // The workers stop before the session's /dev/fuse descriptor is closed
  // (fuse_session_unmount closes it): a worker still reading it could
  // otherwise read whatever file the daemon opens next under that number.
  const bool pause = (g_hand_over_asked || g_pause_asked) && !g_stop_asked;
  if (!pause) fuse_session_exit(session);
  // A pause waits for every request in flight, however long it takes:
  // the daemon serves on afterwards, or hands over, and must not die.
  if (!(pause ? workers.Pause(absl::InfiniteDuration()) : workers.Stop(kStopTimeout))) {
    // Workers stuck in the device would touch it after it is gone; the
    // driver frees VRAM at process exit anyway.
    LogError(absl::StrCat(mountpoint, ": requests still in flight; exiting"));
    _exit(1);
  }
  workers.Join();
  // A hand-over asked while the session was ending anyway (unmounted, or
  // a stop signal) is moot.
  const bool hand_over_asked = g_hand_over_asked && !g_stop_asked && !workers.ended();
  const bool paused = pause && !workers.ended();
  // Closing the descriptor ends the connection: files still open on the
  // mount fail with ENOTCONN from here on.
  if (!paused) fuse_session_unmount(session);
  // A stop signal from here on waits for the next loop's handlers (after a
  // hand-over that failed) rather than killing a daemon still mounted.
  BlockStopSignals();

  for (size_t i = 0; i < std::size(kStopSignals); ++i) {
    sigaction(kStopSignals[i], &saved[i], nullptr);
  }
  sigaction(kHandOverSignal, &saved_hand_over, nullptr);
  sigaction(SIGPIPE, &saved_pipe, nullptr);
  sigaction(kInterruptSignal, &saved_interrupt, nullptr);
  close(g_wakeup_fd);
  g_wakeup_fd = -1;
  return hand_over_asked ? kHandOverAsked : paused ? kPauseAsked : workers.error();
}

void AskForPause() {
  g_pause_asked = true;
  if (g_wakeup_fd >= 0) Wake();
}

absl::Status ResendInFlightRequests(fuse_session* session) {
  // FUSE_NOTIFY_RESEND (Linux 6.9; enum fuse_notify_code, which older
  // headers lack): a notification, so no request id.
  constexpr int32_t kNotifyResend = 7;
  const fuse_out_header header = {.len = sizeof(fuse_out_header), .error = kNotifyResend,
                                  .unique = 0};
  if (write(fuse_session_fd(session), &header, sizeof header) != sizeof header) {
    return absl::ErrnoToStatus(errno, "FUSE_NOTIFY_RESEND (Linux 6.9 or later)");
  }
  return absl::OkStatus();
}

}  // namespace cudafs
