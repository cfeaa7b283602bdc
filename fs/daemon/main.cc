// The cudafs binary: parse options, open the device, mount, serve.
//
// Without -f the process forks before touching the device (a CUDA context
// does not survive fork) and the parent waits on a pipe until the child has
// mounted or failed, so `cudafs DIR` returns only once DIR is usable and
// exits 2 with the child's one-line message when it is not.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "alloc/base/log.h"
#include "alloc/devices/faulty_device.h"
#include "alloc/devices/open_device.h"
#include "alloc/storage/arena.h"
#include "fs/core/filesystem.h"
#include "fs/daemon/abandoned_mount_watcher.h"
#include "fs/daemon/command_line.h"
#include "fs/daemon/control_plane.h"
#include "fs/daemon/host_probes.h"
#include "fs/daemon/manual.h"
#include "fs/daemon/memory_trimmer.h"
#include "fs/daemon/mount_info.h"
#include "fs/daemon/mount_options.h"
#include "fs/daemon/mount_plan.h"
#include "fs/daemon/option_table.h"
#include "fs/daemon/periodic_task.h"
#include "fs/daemon/make_room_command.h"
#include "fs/daemon/stats_report.h"
#include "fs/fuse/fuse_ops.h"
#include "fs/fuse/session_loop.h"
#include "fs/room/room_keeper.h"
#include "fs/share/share_server.h"
#ifdef CUDAFS_WITH_CUDA
#include "alloc/devices/cuda_device.h"
#endif

namespace cudafs {
namespace {

constexpr int kExitUsage = 2;
// zero_message_open: how long a file goes without a write before its
// growth slack is given back (and how often that is looked at).
constexpr absl::Duration kIdleGrowthTrimInterval = absl::Seconds(1);

int Fail(const std::string& message) {
  std::fprintf(stderr, "cudafs: %s\n", message.c_str());
  return kExitUsage;
}

int ListDevices() {
#ifdef CUDAFS_WITH_CUDA
  absl::StatusOr<std::vector<CudaDeviceInfo>> devices = ListCudaDevices();
  if (!devices.ok()) return Fail(std::string(devices.status().message()));
  std::printf("%-5s %-32s %-14s %12s %12s\n", "INDEX", "NAME", "PCI BUS ID", "TOTAL MiB",
              "FREE MiB");
  for (const CudaDeviceInfo& device : *devices) {
    std::printf("%-5d %-32s %-14s %12llu %12llu\n", device.index, device.name.c_str(),
                device.pci_bus_id.c_str(),
                static_cast<unsigned long long>(device.total_bytes >> 20),
                static_cast<unsigned long long>(device.free_bytes >> 20));
  }
  return 0;
#else
  return Fail("built without the CUDA device: no GPUs to list");
#endif
}

// --stats: the counters a mounted cudafs publishes on its root directory,
// with what statvfs says of it (StatsReport).
int PrintStats(const std::string& mountpoint, MountOptions::StatsFormat format) {
  std::string stats(16384, '\0');
  const ssize_t got = getxattr(mountpoint.c_str(), kStatsAttribute, stats.data(), stats.size());
  if (got < 0) {
    if (errno == ENODATA || errno == ENOTSUP) {
      return Fail(absl::StrFormat("%s is not the root of a cudafs mount", mountpoint));
    }
    return Fail(absl::StrFormat("%s: %s", mountpoint, std::strerror(errno)));
  }
  stats.resize(got);
  if (format == MountOptions::StatsFormat::kAll) {
    std::printf("%s", stats.c_str());
    return 0;
  }
  struct statvfs fs;
  if (statvfs(mountpoint.c_str(), &fs) != 0) {
    return Fail(absl::StrFormat("statvfs %s: %s", mountpoint, std::strerror(errno)));
  }
  MountFigures figures;
  figures.size_bytes = uint64_t{fs.f_blocks} * fs.f_frsize;
  figures.used_bytes = uint64_t{fs.f_blocks - fs.f_bfree} * fs.f_frsize;
  figures.files = fs.f_files - fs.f_ffree;
  const StatsReport report = StatsReport::Parse(stats);
  std::printf("%s\n", format == MountOptions::StatsFormat::kJson
                          ? report.Json(figures).c_str()
                          : report.Summary(mountpoint, figures).c_str());
  return 0;
}

// Tells the waiting parent how the mount went (the exit status it should
// return), once.
class ReadyPipe {
 public:
  explicit ReadyPipe(int fd) : fd_(fd) {}
  void Send(unsigned char exit_status) {
    if (fd_ < 0) return;
    (void)!write(fd_, &exit_status, 1);
    close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// Forks; the parent waits for the child's verdict and exits with it. Returns
// the write end of the pipe in the child.
int Daemonize() {
  int fds[2];
  if (pipe(fds) != 0) {
    std::perror("cudafs: pipe");
    std::exit(1);
  }
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("cudafs: fork");
    std::exit(1);
  }
  if (pid > 0) {
    close(fds[1]);
    unsigned char status;
    ssize_t got;
    do {
      got = read(fds[0], &status, 1);
    } while (got < 0 && errno == EINTR);
    // No byte: the child died before it could say.
    std::exit(got == 1 ? status : 1);
  }
  close(fds[0]);
  setsid();
  return fds[1];
}

void DetachStdio() {
  const int null = open("/dev/null", O_RDWR);
  if (null < 0) return;
  dup2(null, STDIN_FILENO);
  dup2(null, STDOUT_FILENO);
  dup2(null, STDERR_FILENO);
  if (null > STDERR_FILENO) close(null);
}

// The share service for the mount whose files carry device `numbers`
// (MAJOR:MINOR), letting in whom the mount's options let in; null, with a
// log line, when it cannot listen (the mount works without it).
std::unique_ptr<ShareServer> StartSharing(Filesystem& filesystem, const FuseContext& context,
                                          const MountOptions& options,
                                          const std::string& numbers) {
  unsigned major_number = 0, minor_number = 0;
  if (std::sscanf(numbers.c_str(), "%u:%u", &major_number, &minor_number) != 2) return nullptr;
  ShareSettings settings;
  settings.mount_device = makedev(major_number, minor_number);
  settings.owner = getuid();
  settings.allow_other = absl::c_linear_search(options.fuse_options, "allow_other");
  settings.allow_root = absl::c_linear_search(options.fuse_options, "allow_root");
  settings.file_changed = [&context](InodeNumber ino) { InvalidateCachedData(context, ino); };
  absl::StatusOr<std::unique_ptr<ShareServer>> server =
      ShareServer::Start(&filesystem, settings);
  if (!server.ok()) {
    LogError(absl::StrCat("no sharing: ", server.status().message()));
    return nullptr;
  }
  return *std::move(server);
}

// Carries out `plan`: opens the device, mounts and serves until unmounted.
int Serve(const MountPlan& plan, ReadyPipe& ready) {
  const MountOptions& options = plan.options();
  const auto fail = [&](const std::string& message) {
    Fail(message);
    ready.Send(kExitUsage);
    return kExitUsage;
  };
  // Before any thread starts (the write-back flusher, the CUDA driver's,
  // the memory trimmer): threads inherit the mask, and a SIGTERM that came
  // right after the mount appeared, before the session loop's handlers,
  // went to one of them and killed the daemon with the mount left behind.
  // A stop signal during startup now waits for those handlers.
  BlockStopSignals();
  RaiseOpenFileLimit();
  // Root's auto_unmount is ours (fs/daemon/abandoned_mount_watcher.h); the
  // watcher runs before the mount appears, so that no moment leaves it
  // unwatched.
  std::optional<AbandonedMountWatcher> watcher;
  if (absl::c_linear_search(options.fuse_options, "auto_unmount") && geteuid() == 0) {
    absl::StatusOr<AbandonedMountWatcher> started =
        AbandonedMountWatcher::Start(options.mountpoint);
    if (!started.ok()) return fail(std::string(started.status().message()));
    watcher.emplace(*std::move(started));
  }

  // The device may round its arena up further, to its granule; the Arena
  // hands out no more than the plan's capacity.
  uint64_t capacity = 0;
  const ArenaSizer sizer = [&](uint64_t device_memory) -> absl::StatusOr<uint64_t> {
    absl::StatusOr<uint64_t> planned = plan.Capacity(device_memory);
    if (planned.ok()) capacity = *planned;
    return planned;
  };
  absl::StatusOr<OpenedDevice> opened = OpenDevice(DeviceRequest{
      .kind = options.backend,
      .gpus = options.device,
      .gpu_idle = options.gpu_idle,
      .arena_size = sizer,
      .reserve =
          [&](uint64_t gpu_memory) {
            return options.reserve.Resolve(gpu_memory, MountPlan::kDefaultReservePercent);
          },
      .spill =
          [&](uint64_t host_memory) {
            return options.spill.Resolve(host_memory, MountPlan::kDefaultSpillPercent);
          }});
  if (!opened.ok()) return fail(std::string(opened.status().message()));
  if (!opened->notice.empty()) std::fprintf(stderr, "%s\n", opened->notice.c_str());
  // backend=auto says when it fell back to host memory, and only then.
  const BackendKind backend = options.backend != BackendKind::kAuto ? options.backend
                              : opened->notice.empty()              ? BackendKind::kCuda
                                                                    : BackendKind::kHost;
  std::unique_ptr<Device> device = std::move(opened->device);
  // A testing aid: device calls that fail on request (kFaultsAttribute).
  FaultyDevice* faults = nullptr;
  if (const char* env = std::getenv("CUDAFS_FAULT_INJECTION");
      env != nullptr && std::string_view(env) == "1") {
    auto faulty = std::make_unique<FaultyDevice>(std::move(device));
    faults = faulty.get();
    device = std::move(faulty);
    std::fprintf(stderr, "cudafs: fault injection on: root sets %s on the mount's root\n",
                 kFaultsAttribute);
  }
  Arena arena(device.get(), options.min_block, capacity);

  FilesystemConfig config = plan.FilesystemConfigFor(arena.capacity(), backend);
  // The glue invalidates what the kernel caches; it exists once the
  // filesystem does, and nothing is cached before the mount.
  const FuseContext* glue = nullptr;
  config.attributes_changed = [&glue](InodeNumber ino) {
    if (glue != nullptr) InvalidateCachedAttributes(*glue, ino);
  };
  Filesystem filesystem(&arena, config);
  RoomKeeper keeper(&filesystem, &arena, RoomKeeper::Options{});
  UringBuffers uring_buffers(device.get());
  FuseContext context(&filesystem, device.get(), plan.FuseSettingsFor(backend), &uring_buffers);
  glue = &context;
  ControlPlane control(&context, &arena, getuid(), faults, &keeper);
  context.control = &control;

  std::vector<std::string> arguments = {"cudafs", "-o", "default_permissions",
                                        "-o", "subtype=cudafs", "-o", FsnameOption(options.source)};
  for (const std::string& option : options.fuse_options) {
    if (option == "auto_unmount" && geteuid() == 0) continue;  // the watcher's
    arguments.push_back("-o");
    arguments.push_back(option);
  }
  if (context.settings.uring) {
    arguments.insert(arguments.end(),
                     {"-o", "io_uring", "-o",
                      absl::StrCat("io_uring_q_depth=", context.settings.uring_depth)});
  }
  if (options.debug) arguments.push_back("-d");
  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());

  fuse_session* session =
      fuse_session_new(&args, &FuseOperations(), sizeof(fuse_lowlevel_ops), &context);
  // libfuse copies the argument vector when it edits it; the copy is ours.
  fuse_opt_free_args(&args);
  if (session == nullptr) return fail("cannot start the FUSE session (see the message above)");
  context.session = session;
  if (fuse_session_mount(session, options.mountpoint.c_str()) != 0) {
    context.session = nullptr;
    fuse_session_destroy(session);
    return fail(absl::StrFormat("cannot mount on %s", options.mountpoint));
  }
  // Found without asking the filesystem, which does not serve yet.
  std::optional<MountInfoEntry> mount = MountAt(options.mountpoint);
  if (mount && mount->fstype != "fuse.cudafs") mount.reset();
  if (mount && watcher) watcher->Watch(*mount);

  // Detached before the parent exits, so that whoever ran cudafs finds the
  // daemon off their terminal (and pipes) once the command returns.
  if (!options.foreground) {
    (void)!chdir("/");
    DetachStdio();
    LogToSyslog(options.mountpoint);
  }
  // Declared after the filesystem and the device its exports use, so
  // destroyed before them; and after the session is destroyed below, so no
  // request reads its address or stats any more.
  std::unique_ptr<ShareServer> sharing;
  if (!mount) {
    LogError(absl::StrCat("the mount is not in /proc/self/mountinfo: no readahead change, no "
                          "sharing",
                          watcher ? ", no auto_unmount" : ""));
  } else {
    if (const std::string note = RaiseReadahead(mount->device, context.settings.max_request);
        !note.empty()) {
      LogInfo(note);
    }
    sharing = StartSharing(filesystem, context, options, mount->device);
    control.set_sharing(sharing.get());
  }
  ready.Send(0);

  const MemoryTrimmer trimmer;
  // Other programs' allocations are seen only by asking: no event says so.
  std::optional<PeriodicTask> keeping;
  if (keeper.active()) {
    keeping.emplace(RoomKeeper::Options{}.interval,
                    std::function<absl::Duration()>([&keeper] { return keeper.Round(); }),
                    "room-keeper");
  }
  // zero_message_open: no RELEASE says when a writer is done, so a file's
  // growth slack goes once it has had no write for a while.
  std::optional<PeriodicTask> growth_trimmer;
  if (config.trim_growth_when_idle) {
    growth_trimmer.emplace(kIdleGrowthTrimInterval,
                           [&filesystem] { filesystem.TrimIdleGrowth(kIdleGrowthTrimInterval); });
  }
  const int result = RunSessionLoop(session, options.mountpoint, *device,
                                    static_cast<int>(context.settings.workers),
                                    context.settings.max_request);
  if (result < 0) LogError(absl::StrCat("serving failed: ", std::strerror(-result)));
  uring_buffers.UnregisterAll();  // before libfuse frees them
  context.session = nullptr;
  fuse_session_destroy(session);
  return result < 0 ? 1 : 0;
}

int Main(int argc, char** argv) {
  // Debian's abseil checks every Mutex acquisition against a global lock
  // graph: a process-wide lock on every request and seconds spent tearing
  // down a million inode mutexes. Our lock order is documented and tested.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::StatusOr<MountOptions> parsed =
      ParseCommandLine(absl::Span<const char* const>(argv, argc));
  if (!parsed.ok()) {
    // One line, naming what was wrong; --help has the rest.
    return Fail(absl::StrCat(parsed.status().message(), " (see cudafs --help)"));
  }
  MountOptions& options = *parsed;
  switch (options.action) {
    case MountOptions::Action::kHelp:
      std::printf("%s", UsageText("cudafs").c_str());
      return 0;
    case MountOptions::Action::kVersion:
      std::printf("cudafs %s (libfuse %s)\n", CUDAFS_VERSION, fuse_pkgversion());
      return 0;
    case MountOptions::Action::kListDevices:
      return ListDevices();
    case MountOptions::Action::kOptionsMarkdown:
      std::printf("%s", MountOptionsMarkdown().c_str());
      return 0;
    case MountOptions::Action::kManual:
      std::printf("%s", ManualPage(CUDAFS_VERSION).c_str());
      return 0;
    case MountOptions::Action::kStats:
      return PrintStats(options.mountpoint, options.stats_format);
    case MountOptions::Action::kMakeRoom:
      return MakeRoomCommand(options.mountpoint, options.make_room_bytes);
    case MountOptions::Action::kMount:
      break;
  }
  struct stat st;
  if (stat(options.mountpoint.c_str(), &st) != 0) {
    return Fail(absl::StrFormat("mountpoint %s: %s", options.mountpoint, std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Fail(absl::StrFormat("mountpoint %s is not a directory", options.mountpoint));
  }
  // libfuse resolves the mountpoint itself; keep an absolute path for the
  // daemon, which changes directory to /.
  if (char* absolute = realpath(options.mountpoint.c_str(), nullptr)) {
    options.mountpoint = absolute;
    std::free(absolute);
  }
  const MachineFacts facts = ProbeMachine(options.max_request);
  absl::StatusOr<MountPlan> plan = MountPlan::Make(options, facts);
  if (!plan.ok()) return Fail(std::string(plan.status().message()));
  ReadyPipe ready(options.foreground ? -1 : Daemonize());
  return Serve(*plan, ready);
}

}  // namespace
}  // namespace cudafs

int main(int argc, char** argv) {
  // The auto_unmount watcher is this binary under another name
  // (fs/daemon/abandoned_mount_watcher.h).
  if (argc == 2 && std::string_view(argv[0]) == cudafs::kWatcherName) {
    return cudafs::RunAbandonedMountWatcher();
  }
  return cudafs::Main(argc, argv);
}
