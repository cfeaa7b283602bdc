#include "fs/daemon/serve.h"

#include <sys/sysmacros.h>
#include <unistd.h>

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
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "alloc/base/log.h"
#include "alloc/devices/faulty_device.h"
#include "alloc/devices/open_device.h"
#include "alloc/storage/arena.h"
#include "fs/core/filesystem.h"
#include "fs/daemon/abandoned_mount_watcher.h"
#include "fs/daemon/background_tasks.h"
#include "fs/daemon/command_failure.h"
#include "fs/daemon/control_plane.h"
#include "fs/daemon/host_probes.h"
#include "fs/daemon/mount_info.h"
#include "fs/fuse/fuse_kernel_notifier.h"
#include "fs/fuse/fuse_context.h"
#include "fs/fuse/fuse_ops.h"
#include "fs/fuse/session_loop.h"
#include "fs/room/room_keeper.h"
#include "fs/share/share_server.h"

namespace cudafs {
namespace {

// Root's auto_unmount is ours (fs/daemon/abandoned_mount_watcher.h); the
// watcher runs before the mount appears, so that no moment leaves it
// unwatched. Others' auto_unmount is fusermount3's: none here.
absl::StatusOr<std::optional<AbandonedMountWatcher>> StartWatcher(const MountOptions& options) {
  std::optional<AbandonedMountWatcher> watcher;
  if (absl::c_linear_search(options.fuse_options, "auto_unmount") && geteuid() == 0) {
    absl::StatusOr<AbandonedMountWatcher> started =
        AbandonedMountWatcher::Start(options.mountpoint);
    if (!started.ok()) return started.status();
    watcher.emplace(*std::move(started));
  }
  return watcher;
}

// Where the mount's data lives.
struct Storage {
  std::unique_ptr<Device> device;
  // A testing aid: device calls that fail on request (kFaultsAttribute);
  // null unless CUDAFS_FAULT_INJECTION=1.
  FaultyDevice* faults = nullptr;
  // The backend opened: host memory where backend=auto found no GPU.
  BackendKind backend = BackendKind::kAuto;
  // What the arena may hand out (MountPlan::Capacity).
  uint64_t capacity = 0;
};

// Opens the device the plan asks for; the one-line notices of the
// fallback to host memory and of fault injection go to stderr.
absl::StatusOr<Storage> OpenStorage(const MountPlan& plan) {
  const MountOptions& options = plan.options();
  Storage storage;
  // The device may round its arena up further, to its granule; the Arena
  // hands out no more than the plan's capacity.
  const ArenaSizer sizer = [&](uint64_t device_memory) -> absl::StatusOr<uint64_t> {
    absl::StatusOr<uint64_t> planned = plan.Capacity(device_memory);
    if (planned.ok()) storage.capacity = *planned;
    return planned;
  };
  absl::StatusOr<OpenedDevice> opened = OpenDevice(DeviceRequest{
      .kind = options.backend,
      .gpus = options.device,
      .gpu_idle = options.gpu_idle.value_or(MountPlan::kDefaultGpuIdle),
      .arena_size = sizer,
      .reserve =
          [&](uint64_t gpu_memory) {
            return options.reserve.Resolve(gpu_memory, MountPlan::kDefaultReservePercent);
          },
      .spill =
          [&](uint64_t host_memory) {
            return options.spill.Resolve(host_memory, MountPlan::kDefaultSpillPercent);
          }});
  if (!opened.ok()) return opened.status();
  if (!opened->notice.empty()) std::fprintf(stderr, "%s\n", opened->notice.c_str());
  // backend=auto says when it fell back to host memory, and only then.
  storage.backend = options.backend != BackendKind::kAuto ? options.backend
                    : opened->notice.empty()              ? BackendKind::kCuda
                                                          : BackendKind::kHost;
  if (const std::string unused = plan.UnusedOptionsNotice(storage.backend); !unused.empty()) {
    std::fprintf(stderr, "%s\n", unused.c_str());
  }
  storage.device = std::move(opened->device);
  if (const char* env = std::getenv("CUDAFS_FAULT_INJECTION");
      env != nullptr && std::string_view(env) == "1") {
    auto faulty = std::make_unique<FaultyDevice>(std::move(storage.device));
    storage.faults = faulty.get();
    storage.device = std::move(faulty);
    std::fprintf(stderr, "cudafs: fault injection on: root sets %s on the mount's root\n",
                 kFaultsAttribute);
  }
  return storage;
}

// A FUSE session for `context`, mounted on the mountpoint, with `notifier`
// attached to it. libfuse gets the options it handles but root's
// auto_unmount (the watcher's), and io_uring when the plan chose it.
absl::StatusOr<fuse_session*> StartSession(const MountOptions& options, FuseContext& context,
                                           FuseKernelNotifier& notifier) {
  std::vector<std::string> arguments = {"cudafs",         "-o", "default_permissions",       "-o",
                                        "subtype=cudafs", "-o", FsnameOption(options.source)};
  for (const std::string& option : options.fuse_options) {
    if (option == "auto_unmount" && geteuid() == 0) continue;  // the watcher's
    arguments.push_back("-o");
    arguments.push_back(option);
  }
  if (context.settings.uring) {
    arguments.insert(
        arguments.end(),
        {"-o", "io_uring", "-o", absl::StrCat("io_uring_q_depth=", context.settings.uring_depth)});
  }
  if (options.debug) arguments.push_back("-d");
  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());

  fuse_session* session =
      fuse_session_new(&args, &FuseOperations(), sizeof(fuse_lowlevel_ops), &context);
  // libfuse copies the argument vector when it edits it; the copy is ours.
  fuse_opt_free_args(&args);
  if (session == nullptr) {
    return absl::InternalError("cannot start the FUSE session (see the message above)");
  }
  notifier.Attach(session);
  if (fuse_session_mount(session, options.mountpoint.c_str()) != 0) {
    notifier.Attach(nullptr);
    fuse_session_destroy(session);
    return absl::InternalError(absl::StrFormat("cannot mount on %s", options.mountpoint));
  }
  return session;
}

// The mount just made on `mountpoint`, found without asking the
// filesystem, which does not serve yet; nullopt when it cannot be found.
std::optional<MountInfoLine> OwnMount(const std::string& mountpoint) {
  std::optional<MountInfoLine> mount = MountAt(mountpoint);
  if (mount && mount->fstype != "fuse.cudafs") mount.reset();
  return mount;
}

// The share service for the mount whose files carry device `numbers`
// (MAJOR:MINOR), letting in whom the mount's options let in, making room
// with `room_maker`; null, with a log line, when it cannot listen (the
// mount works without it, but for make-room).
std::unique_ptr<ShareServer> StartSharing(Filesystem& filesystem, KernelNotifier* notifier,
                                          RoomMaker* room_maker, const MountOptions& options,
                                          const std::string& numbers) {
  unsigned major_number = 0, minor_number = 0;
  if (std::sscanf(numbers.c_str(), "%u:%u", &major_number, &minor_number) != 2) return nullptr;
  ShareSettings settings;
  settings.mount_device = makedev(major_number, minor_number);
  settings.owner = getuid();
  settings.allow_other = absl::c_linear_search(options.fuse_options, "allow_other");
  settings.allow_root = absl::c_linear_search(options.fuse_options, "allow_root");
  settings.notifier = notifier;
  settings.room_maker = room_maker;
  absl::StatusOr<std::unique_ptr<ShareServer>> server =
      ShareServer::Start(&filesystem, settings);
  if (!server.ok()) {
    LogError(absl::StrCat("no sharing: ", server.status().message()));
    return nullptr;
  }
  return *std::move(server);
}

// Serves the mounted `session` until it is unmounted (or a stop signal
// unmounts it); returns the daemon's exit status.
int ServeUntilUnmounted(fuse_session* session, const std::string& mountpoint, Device& device,
                        const FuseSettings& settings) {
  const int result = RunSessionLoop(session, mountpoint, device, static_cast<int>(settings.workers),
                                    settings.max_request);
  if (result < 0) LogError(absl::StrCat("serving failed: ", std::strerror(-result)));
  return result < 0 ? 1 : 0;
}

void EndSession(fuse_session* session, FuseKernelNotifier& notifier, UringBuffers& uring_buffers) {
  uring_buffers.UnregisterAll();  // before libfuse frees them
  notifier.Attach(nullptr);
  fuse_session_destroy(session);
}

}  // namespace

int Serve(const MountPlan& plan, ReadyPipe& ready) {
  const MountOptions& options = plan.options();
  const auto fail = [&](absl::string_view message) {
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
  absl::StatusOr<std::optional<AbandonedMountWatcher>> started = StartWatcher(options);
  if (!started.ok()) return fail(started.status().message());
  std::optional<AbandonedMountWatcher>& watcher = *started;

  absl::StatusOr<Storage> storage = OpenStorage(plan);
  if (!storage.ok()) return fail(storage.status().message());
  auto& [device, faults, backend, capacity] = *storage;
  Arena arena(device.get(), options.min_block, capacity);

  FilesystemConfig config = plan.FilesystemConfigFor(arena.capacity(), backend);
  // Every call up into the kernel goes through the notifier; nothing is cached
  // before the mount, so it is attached to the session once there is one.
  FuseKernelNotifier notifier;
  config.notifier = &notifier;
  Filesystem filesystem(&arena, config);
  Placement placement(&arena);
  RoomKeeper keeper(&filesystem, &placement, RoomKeeper::Options{.ready = options.spill_ready});
  UringBuffers uring_buffers(device.get());
  FuseContext context(&filesystem, device.get(), plan.FuseSettingsFor(backend), &uring_buffers);
  ControlPlane control(&context, &arena, getuid(), faults, &keeper, plan.WhyNoRoom(backend));
  context.control = &control;

  absl::StatusOr<fuse_session*> session = StartSession(options, context, notifier);
  if (!session.ok()) return fail(session.status().message());
  const std::optional<MountInfoLine> mount = OwnMount(options.mountpoint);
  if (mount && watcher) watcher->Watch(*mount);

  // Detached before the parent exits, so that whoever ran cudafs finds the
  // daemon off their terminal (and pipes) once the command returns.
  if (!options.foreground) Detach(options.mountpoint);
  // Declared after the filesystem and the device its exports use, so
  // destroyed before them; and after the session ends (EndSession, below),
  // so no request reads its address or stats any more.
  std::unique_ptr<ShareServer> sharing;
  if (!mount) {
    LogError(
        absl::StrCat("the mount is not in /proc/self/mountinfo: no readahead change, no "
                     "sharing",
                     watcher ? ", no auto_unmount" : ""));
  } else {
    if (const std::string note = RaiseReadahead(mount->device, context.settings.max_request);
        !note.empty()) {
      LogInfo(note);
    }
    sharing = StartSharing(filesystem, &notifier, &control, options, mount->device);
    control.set_sharing(sharing.get());
  }
  ready.Send(0);

  const BackgroundTasks tasks(filesystem, config.trim_growth_when_idle, keeper);
  const int status = ServeUntilUnmounted(*session, options.mountpoint, *device, context.settings);
  EndSession(*session, notifier, uring_buffers);
  return status;
}

}  // namespace cudafs
