#include "alloc/base/log.h"

#include <syslog.h>

#include <atomic>
#include <cstdio>
#include <string>

namespace cudafs {
namespace {
std::atomic<bool> to_syslog{false};
// openlog keeps the pointer it is given: the identity must outlive it.
std::string* syslog_identity = nullptr;

void Log(int priority, absl::string_view line) {
  if (to_syslog.load(std::memory_order_acquire)) {
    syslog(priority, "%.*s", static_cast<int>(line.size()), line.data());
  } else {
    std::fprintf(stderr, "cudafs: %.*s\n", static_cast<int>(line.size()), line.data());
  }
}
}  // namespace

void LogError(absl::string_view line) { Log(LOG_ERR, line); }

void LogInfo(absl::string_view line) { Log(LOG_INFO, line); }

void LogToSyslog(absl::string_view mountpoint) {
  syslog_identity = new std::string("cudafs " + std::string(mountpoint));
  openlog(syslog_identity->c_str(), LOG_PID, LOG_DAEMON);
  to_syslog.store(true, std::memory_order_release);
}

}  // namespace cudafs
