#include "fs/daemon/upgrade_command.h"

#include <fcntl.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "fs/daemon/cgroup_membership.h"
#include "fs/daemon/command_failure.h"
#include "fs/daemon/command_line.h"
#include "fs/daemon/control_plane.h"
#include "fs/daemon/daemonize.h"
#include "fs/daemon/hand_over.h"
#include "fs/daemon/host_probes.h"
#include "fs/daemon/mount_plan.h"
#include "fs/daemon/serve.h"

namespace cudafs {
namespace {

// The daemon serving `mountpoint`, as its root says.
absl::StatusOr<pid_t> DaemonOf(const std::string& mountpoint) {
  char value[32] = {};
  const ssize_t n = getxattr(mountpoint.c_str(), kDaemonAttribute, value, sizeof(value) - 1);
  int pid = 0;
  if (n <= 0 || !absl::SimpleAtoi(absl::string_view(value, n), &pid) || pid <= 0) {
    return absl::NotFoundError(absl::StrFormat(
        "%s is not served by a cudafs that can hand it over (%s)", mountpoint,
        n < 0 ? std::strerror(errno) : "no daemon attribute: older than --upgrade, remount it"));
  }
  return pid;
}

// The effective uid of process `pid`.
absl::StatusOr<uid_t> UserOf(pid_t pid) {
  const std::optional<std::string> status = ReadHostFile(absl::StrCat("/proc/", pid, "/status"));
  for (absl::string_view line : absl::StrSplit(status.value_or(""), '\n')) {
    if (!absl::ConsumePrefix(&line, "Uid:")) continue;
    const std::vector<absl::string_view> ids =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    uint32_t effective = 0;
    if (ids.size() >= 2 && absl::SimpleAtoi(ids[1], &effective)) return effective;
  }
  return absl::NotFoundError(absl::StrFormat("daemon %d is gone", pid));
}

// The options the mount was made with (its command line, handed over).
absl::StatusOr<MountOptions> OptionsOf(const HandedOver& handed, const std::string& mountpoint) {
  std::vector<const char*> argv;
  for (const std::string& argument : handed.arguments) argv.push_back(argument.c_str());
  absl::StatusOr<MountOptions> options = ParseCommandLine(argv);
  if (!options.ok() || options->action != MountOptions::Action::kMount) {
    return absl::InvalidArgumentError(
        "the running daemon's command line is not a mount this cudafs reads: remount instead");
  }
  // Where it is mounted now (its command line may name it relative to a
  // directory it left), and in the background whatever it was started
  // with: the command returns once the successor serves.
  options->mountpoint = mountpoint;
  options->foreground = false;
  options->debug = false;
  return options;
}

}  // namespace

int UpgradeCommand(const std::string& mountpoint_argument) {
  // Where the allocation interposer is preloaded system-wide, the daemon's
  // own allocations must not wait for the room it would make.
  setenv("CUDAFS_MAKE_ROOM", "0", 1);
  // A GPU's memory comes as a descriptor per allocation: thousands for a
  // large mount, which the successor then keeps.
  RaiseOpenFileLimit();
  char* resolved = realpath(mountpoint_argument.c_str(), nullptr);
  if (resolved == nullptr) {
    return Fail(absl::StrFormat("%s: %s", mountpoint_argument, std::strerror(errno)));
  }
  const std::string mountpoint = resolved;
  std::free(resolved);
  const absl::StatusOr<pid_t> daemon = DaemonOf(mountpoint);
  if (!daemon.ok()) return Fail(daemon.status().message());
  // The new daemon runs as this command does: root taking a user's mount
  // over would serve that user's files with root's privileges.
  const absl::StatusOr<uid_t> user = UserOf(*daemon);
  if (!user.ok()) return Fail(user.status().message());
  if (*user != geteuid()) {
    return Fail(absl::StrFormat(
        "%s is served for user %d: that user upgrades it (the new daemon runs as whoever "
        "runs --upgrade)",
        mountpoint, *user));
  }
  absl::StatusOr<HandOverListener> listener = HandOverListener::Ask(*daemon);
  if (!listener.ok()) return Fail(listener.status().message());
  absl::StatusOr<HandedOver> handed = listener->Receive();
  if (!handed.ok()) {
    return Fail(absl::StrCat(mountpoint, ": the running daemon keeps it: ", handed.status().message()));
  }
  absl::StatusOr<MountOptions> options = OptionsOf(*handed, mountpoint);
  absl::StatusOr<MountPlan> plan =
      options.ok() ? MountPlan::Make(*options, ProbeMachine(options->max_request))
                   : absl::StatusOr<MountPlan>(options.status());
  if (!plan.ok()) {
    listener->Answer(plan.status());
    return Fail(plan.status().message());
  }
  Predecessor predecessor{.handed = *std::move(handed), .answer_to = listener->connection()};
  ReadyPipe ready(Daemonize());
  if (absl::Status joined = JoinCgroupsOf(*daemon); !joined.ok()) {
    Fail(absl::StrCat(mountpoint, ": the running daemon keeps it: ", joined.message()));
    listener->Answer(joined);
    ready.Send(kExitUsage);
    return kExitUsage;
  }
  return Serve(*plan, ready, &predecessor);
}

int RecoverCommand(int keeper, const std::string& mountpoint) {
  setenv("CUDAFS_MAKE_ROOM", "0", 1);
  RaiseOpenFileLimit();
  // Its children (fusermount3) must not hold the keeper's connection.
  fcntl(keeper, F_SETFD, FD_CLOEXEC);
  absl::StatusOr<HandedOver> handed = ReceiveHandedOver(keeper);
  if (!handed.ok()) return Fail(handed.status().message());
  absl::StatusOr<MountOptions> options = OptionsOf(*handed, mountpoint);
  absl::StatusOr<MountPlan> plan =
      options.ok() ? MountPlan::Make(*options, ProbeMachine(options->max_request))
                   : absl::StatusOr<MountPlan>(options.status());
  if (!plan.ok()) {
    SendAnswer(keeper, plan.status());
    return Fail(plan.status().message());
  }
  Predecessor predecessor{.handed = *std::move(handed), .answer_to = keeper, .from_keeper = true};
  // No one waits for this process but the keeper, which it answers.
  ReadyPipe ready(-1);
  return Serve(*plan, ready, &predecessor);
}

}  // namespace cudafs
