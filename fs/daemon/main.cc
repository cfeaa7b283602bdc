// The cudafs binary: parse the command line; answer a command that needs no
// mount (--help, --stats, ...); or check the mountpoint, probe the host,
// make the plan, fork (without -f) and serve.
//
// Without -f the process forks before touching the device (a CUDA context
// does not survive fork) and the parent waits on a pipe until the child has
// mounted or failed, so `cudafs DIR` returns only once DIR is usable and
// exits 2 with the child's one-line message when it is not.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "alloc/devices/cuda_api.h"
#include "fs/daemon/abandoned_mount_watcher.h"
#include "fs/daemon/command_failure.h"
#include "fs/daemon/command_line.h"
#include "fs/daemon/daemonize.h"
#include "fs/daemon/host_probes.h"
#include "fs/daemon/keeper.h"
#include "fs/daemon/list_devices_command.h"
#include "fs/daemon/make_room_command.h"
#include "fs/daemon/manual.h"
#include "fs/daemon/mount_plan.h"
#include "fs/daemon/option_table.h"
#include "fs/daemon/run_command.h"
#include "fs/daemon/serve.h"
#include "fs/daemon/stats_command.h"
#include "fs/daemon/upgrade_command.h"
#include "fs/fuse/libfuse.h"

namespace cudafs {
namespace {

// The exit status of a command that needs no mount; nullopt for a mount.
std::optional<int> RunCommand(const MountOptions& options) {
  switch (options.action) {
    case MountOptions::Action::kHelp:
      std::printf("%s", UsageText("cudafs").c_str());
      return 0;
    case MountOptions::Action::kVersion:
      // What this binary drives: the libfuse it was built with, and NVIDIA
      // drivers from the oldest cuda_api.h supports on.
      std::printf("cudafs %s (libfuse %s, CUDA driver API %d.%d+)\n", CUDAFS_VERSION,
                  fuse_pkgversion(), cu::kOldestDriverVersion / 1000,
                  cu::kOldestDriverVersion % 1000 / 10);
      return 0;
    case MountOptions::Action::kListDevices:
      return ListDevicesCommand();
    case MountOptions::Action::kOptionsMarkdown:
      std::printf("%s", MountOptionsMarkdown().c_str());
      return 0;
    case MountOptions::Action::kManual:
      std::printf("%s", ManualPage(CUDAFS_VERSION).c_str());
      return 0;
    case MountOptions::Action::kStats:
      return StatsCommand(options.mountpoint, options.stats_format);
    case MountOptions::Action::kMakeRoom:
      return MakeRoomCommand(options.mountpoint, options.make_room_bytes);
    case MountOptions::Action::kUpgrade:
      return UpgradeCommand(options.mountpoint);
    case MountOptions::Action::kMount:
      break;
  }
  return std::nullopt;
}

// A directory to mount on, made absolute: libfuse resolves the mountpoint
// itself, but the daemon changes directory to /.
absl::Status ResolveMountpoint(std::string& mountpoint) {
  struct stat st;
  if (stat(mountpoint.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("mountpoint %s: %s", mountpoint, std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("mountpoint %s is not a directory", mountpoint));
  }
  if (char* absolute = realpath(mountpoint.c_str(), nullptr)) {
    mountpoint = absolute;
    std::free(absolute);
  }
  return absl::OkStatus();
}

// Checks the mountpoint and makes the plan in the command's own process,
// so that either failure is its message; then, without -f, forks before
// Serve opens the device.
int Mount(MountOptions options) {
  // Where the allocation interposer is preloaded system-wide, the daemon's
  // own allocations must not wait for the room it would make.
  setenv("CUDAFS_MAKE_ROOM", "0", 1);
  if (absl::Status usable = ResolveMountpoint(options.mountpoint); !usable.ok()) {
    return Fail(usable.message());
  }
  const MachineFacts facts = ProbeMachine(options.max_request);
  absl::StatusOr<MountPlan> plan = MountPlan::Make(options, facts);
  if (!plan.ok()) return Fail(plan.status().message());
  ReadyPipe ready(options.foreground ? -1 : Daemonize());
  return Serve(*plan, ready);
}

int Main(int argc, char** argv) {
  absl::StatusOr<MountOptions> options =
      ParseCommandLine(absl::Span<const char* const>(argv, argc));
  if (!options.ok()) {
    // One line, naming what was wrong; --help has the rest.
    return Fail(absl::StrCat(options.status().message(), " (see cudafs --help)"));
  }
  if (const std::optional<int> status = RunCommand(*options)) return *status;
  return Mount(*std::move(options));
}

}  // namespace
}  // namespace cudafs

int main(int argc, char** argv) {
  // Debian's abseil checks every Mutex acquisition against a global lock
  // graph: a process-wide lock on every request and seconds spent tearing
  // down a million inode mutexes. Our lock order is documented and tested.
  // First of all: a keeper's successor serves too (it checked every lock
  // of a mount it took over, and spent a second of its start on them).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // The auto_unmount watcher is this binary under another name
  // (fs/daemon/abandoned_mount_watcher.h).
  if (argc == 2 && std::string_view(argv[0]) == cudafs::kWatcherName) {
    return cudafs::RunAbandonedMountWatcher();
  }
  // The keeper of a mount that survives its daemon, and a successor it
  // started (fs/daemon/keeper.h).
  if (argc == 2 && std::string_view(argv[0]) == cudafs::kKeeperName) {
    return cudafs::RunKeeper(argv[1]);
  }
  if (const char* keeper = std::getenv(cudafs::kKeeperFdVariable); keeper != nullptr) {
    const char* mountpoint_variable = std::getenv(cudafs::kKeeperMountpointVariable);
    const std::string mountpoint = mountpoint_variable != nullptr ? mountpoint_variable : "";
    const int fd = std::atoi(keeper);
    unsetenv(cudafs::kKeeperFdVariable);
    unsetenv(cudafs::kKeeperMountpointVariable);
    return cudafs::RecoverCommand(fd, mountpoint);
  }
  if (cudafs::IsRunCommand(argc, argv)) return cudafs::RunCommand(argc, argv);
  return cudafs::Main(argc, argv);
}
