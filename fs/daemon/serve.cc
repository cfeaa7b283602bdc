#include "fs/daemon/serve.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "alloc/base/log.h"
#include "alloc/base/status_macros.h"
#include "alloc/devices/faulty_device.h"
#include "alloc/devices/open_device.h"
#include "alloc/storage/arena.h"
#include "fs/core/filesystem.h"
#include "fs/core/journal_records.h"
#include "fs/core/metadata_log.h"
#include "fs/daemon/abandoned_mount_watcher.h"
#include "fs/daemon/background_tasks.h"
#include "fs/daemon/command_failure.h"
#include "fs/daemon/control_plane.h"
#include "fs/daemon/hand_over.h"
#include "fs/daemon/host_probes.h"
#include "fs/daemon/keeper.h"
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
// unwatched. Others' auto_unmount is fusermount3's: none here. A mount
// that survives its daemon has none: its keeper unmounts it when no
// successor can take it over.
absl::StatusOr<std::optional<AbandonedMountWatcher>> StartWatcher(const MountOptions& options) {
  std::optional<AbandonedMountWatcher> watcher;
  if (absl::c_linear_search(options.fuse_options, "auto_unmount") && geteuid() == 0 &&
      !options.survive) {
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

// What a session negotiated at INIT, as far as it shapes what the kernel
// sends and expects: a successor's must be its predecessor's, as the
// kernel keeps the first negotiation (hand_over.h).
std::string NegotiationOf(const FuseContext& context) {
  return absl::StrFormat("libfuse %s, %s, max_request %d, direct_io_min %d, zero_message_open %d, "
                         "kernel_kills_set_id %d",
                         fuse_pkgversion(), context.stats.transport.load(),
                         context.settings.max_request, context.negotiated.direct_io_min,
                         context.negotiated.zero_message_open,
                         context.negotiated.kernel_kills_set_id);
}

// Takes over the connection `predecessor` handed over: libfuse answers
// nothing but INIT until it has seen one, and offers no call to adopt a
// connection, so the session is mounted on one end of a socket pair that
// holds the INIT the kernel sent the predecessor, receives and negotiates
// it as its own (its reply goes to the pair, where no one reads it: the
// kernel keeps the first), and then has the /dev/fuse descriptor put in
// that end's place.
absl::Status AdoptSession(fuse_session* session, Predecessor& predecessor, FuseContext& context) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return absl::ErrnoToStatus(errno, "socketpair");
  }
  // pair[1] stays open until INIT's reply has gone into it: a write to a
  // pair whose other end is closed would raise SIGPIPE.
  absl::Cleanup close_other_end = [&] { close(pair[1]); };
  const std::string& init = predecessor.handed.init_request;
  const bool queued = send(pair[1], init.data(), init.size(), 0) == static_cast<ssize_t>(init.size());
  if (!queued || fuse_session_mount(session, absl::StrCat("/dev/fd/", pair[0]).c_str()) != 0) {
    close(pair[0]);
    return absl::InternalError("cannot start a session on the connection handed over");
  }
  // As large as the workers' own, so that INIT grants the max_write they
  // read.
  std::vector<char> buffer(ReceiveBufferSize(context.settings.max_request));
  fuse_buf request = {};
  request.mem = buffer.data();
  request.size = buffer.size();
  const int received = fuse_session_receive_buf(session, &request);
  if (received != static_cast<int>(init.size())) {
    return absl::InternalError("the INIT handed over did not come through");
  }
  fuse_session_process_buf(session, &request);
  if (NegotiationOf(context) != predecessor.handed.negotiation) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this cudafs negotiates otherwise with the kernel (", NegotiationOf(context),
        ") than the running one (", predecessor.handed.negotiation, "): remount instead"));
  }
  // The session's descriptor is now the connection.
  if (dup3(predecessor.handed.fuse_fd, fuse_session_fd(session), O_CLOEXEC) < 0) {
    return absl::ErrnoToStatus(errno, "dup3 of the connection handed over");
  }
  close(std::exchange(predecessor.handed.fuse_fd, -1));
  return absl::OkStatus();
}

// A FUSE session for `context`, mounted on the mountpoint (or, for a
// successor, on the connection handed over), with `notifier` attached to
// it. libfuse gets the options it handles but root's auto_unmount (the
// watcher's), and io_uring when the plan chose it.
absl::StatusOr<fuse_session*> StartSession(const MountOptions& options, FuseContext& context,
                                           FuseKernelNotifier& notifier,
                                           Predecessor* predecessor) {
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
  if (predecessor != nullptr) {
    if (absl::Status adopted = AdoptSession(session, *predecessor, context); !adopted.ok()) {
      notifier.Attach(nullptr);
      fuse_session_destroy(session);
      return adopted;
    }
    return session;
  }
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

void EndSession(fuse_session* session, FuseKernelNotifier& notifier, UringBuffers& uring_buffers) {
  uring_buffers.UnregisterAll();  // before libfuse frees them
  notifier.Attach(nullptr);
  fuse_session_destroy(session);
}

// survive=on: the keeper, and the metadata log it holds (keeper.h);
// neither without.
struct Survival {
  std::optional<KeeperLink> keeper;
  std::unique_ptr<MetadataLog> log;
};

// A new mount's, or a keeper's successor's: it keeps both of its
// predecessor's.
absl::StatusOr<Survival> StartSurvival(const MountOptions& options, Predecessor* predecessor) {
  Survival survival;
  if (predecessor != nullptr && predecessor->from_keeper) {
    CUDAFS_ASSIGN_OR_RETURN(survival.log,
                            MetadataLog::Adopt(std::exchange(predecessor->handed.log_fd, -1)));
    // Only now: a refusal above still reaches the keeper on it.
    survival.keeper.emplace(predecessor->answer_to);
  } else if (options.survive) {
    CUDAFS_ASSIGN_OR_RETURN(KeeperLink keeper, KeeperLink::Start(options.mountpoint));
    survival.keeper.emplace(std::move(keeper));
    CUDAFS_ASSIGN_OR_RETURN(survival.log, MetadataLog::Create());
  }
  return survival;
}

// A GPU's pieces, as the daemon maps and releases them, reach the keeper
// before any file's block in them is handed out: what it holds is all of
// the memory whenever the daemon dies. A keeper gone (said once) leaves
// the mount serving, as one without a keeper.
absl::Status FollowPieces(Device& device, KeeperLink& keeper) {
  return DeviceHandOver::WatchPieces(device, [&keeper](const DeviceHandOver::PieceChange& change) {
    static std::atomic<bool> said{false};
    if (absl::Status followed = keeper.Follow(change); !followed.ok() && !said.exchange(true)) {
      LogError(absl::StrCat("the keeper no longer follows the GPU's memory: a crash now loses "
                            "the files: ",
                            followed.message()));
    }
  });
}

// What the keeper holds for a successor (keeper.h), the metadata `log`
// in place of an image; without a log, what a hand-over passes but the
// image.
absl::StatusOr<HandedOver> StateToKeep(const Storage& storage, const Arena& arena,
                                       const MetadataLog* log, const FuseContext& context,
                                       fuse_session* session, const std::string& init_request,
                                       const std::vector<std::string>& arguments) {
  HandedOver state;
  CUDAFS_ASSIGN_OR_RETURN(state.memory, DeviceHandOver::Of(*storage.device));
  state.fuse_fd = dup(fuse_session_fd(session));
  if (state.fuse_fd < 0) return absl::ErrnoToStatus(errno, "dup");
  if (log != nullptr) {
    state.log_fd = dup(log->fd());
    if (state.log_fd < 0) return absl::ErrnoToStatus(errno, "dup");
  }
  state.capacity = arena.capacity();
  state.generation = context.settings.generation;
  state.init_request = init_request;
  state.negotiation = NegotiationOf(context);
  state.arguments = arguments;
  return state;
}

// What this daemon hands a successor (hand_over.h), or why it cannot: the
// memory must be able to pass (DeviceHandOver), the session's requests
// must come through /dev/fuse (a ring's requests in flight would hang),
// and no fusermount3 may be waiting to unmount the mount when this process
// ends (other users' auto_unmount). Writes the image: call with the
// workers and the background tasks stopped.
absl::StatusOr<HandedOver> StateToHandOver(const MountOptions& options, const Storage& storage,
                                           const Arena& arena, Filesystem& filesystem,
                                           const FuseContext& context, fuse_session* session,
                                           const std::string& init_request,
                                           const std::vector<std::string>& arguments) {
  if (context.settings.uring) {
    return absl::FailedPreconditionError(
        "a mount served over io_uring cannot be handed over yet (one mounted with uring=off can)");
  }
  if (absl::c_linear_search(options.fuse_options, "auto_unmount") && geteuid() != 0) {
    return absl::FailedPreconditionError(
        "fusermount3 would unmount this mount (auto_unmount) when its daemon ends: remount it");
  }
  if (init_request.empty()) return absl::FailedPreconditionError("the session has no INIT yet");
  // The image first: writing the cache back may take memory the state
  // must then hold.
  CUDAFS_ASSIGN_OR_RETURN(std::string image, filesystem.SaveImage());
  CUDAFS_ASSIGN_OR_RETURN(HandedOver state,
                          StateToKeep(storage, arena, nullptr, context, session, init_request,
                                      arguments));
  state.image = std::move(image);
  return state;
}

// This process's command line: a mount's, as made (a successor serves with
// the one handed to it).
std::vector<std::string> OwnArguments() {
  std::ifstream file("/proc/self/cmdline", std::ios::binary);
  const std::string cmdline((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  return absl::StrSplit(cmdline, '\0', absl::SkipEmpty());
}

// A successor's session is mounted on a descriptor, not on a path, so
// libfuse does not unmount it when a stop signal ends the loop: this does,
// if the mount there is still `mount` (after an unmount it is gone, and
// another may be there). Root only; another user's successor leaves the
// mount to `fusermount3 -u`, answering ENOTCONN meanwhile.
void UnmountHandedOver(const MountInfoLine& mount) {
  const int fd = open(mount.mountpoint.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  const bool ours = MountIdOf(fd) == mount.id;
  close(fd);
  if (ours && umount2(mount.mountpoint.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0) {
    LogError(absl::StrCat("cannot unmount ", mount.mountpoint, ": ", std::strerror(errno),
                          " (fusermount3 -u does)"));
  }
}

// The storage a predecessor handed over, on the same memory.
absl::StatusOr<Storage> AdoptStorage(HandedOver& handed) {
  Storage storage;
  storage.backend = handed.memory.on_gpus() ? BackendKind::kCuda : BackendKind::kHost;
  CUDAFS_ASSIGN_OR_RETURN(storage.device, handed.memory.Adopt());
  storage.capacity = handed.capacity;
  return storage;
}

}  // namespace

int Serve(const MountPlan& plan, ReadyPipe& ready, Predecessor* predecessor) {
  const MountOptions& options = plan.options();
  const bool from_keeper = predecessor != nullptr && predecessor->from_keeper;
  const auto fail = [&](absl::string_view message) {
    Fail(message);
    if (predecessor != nullptr) {
      SendAnswer(predecessor->answer_to, absl::FailedPreconditionError(message));
    }
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
  absl::StatusOr<Survival> survival = StartSurvival(options, predecessor);
  if (!survival.ok()) return fail(survival.status().message());
  std::optional<KeeperLink>& keeper = survival->keeper;
  std::unique_ptr<MetadataLog>& log = survival->log;

  absl::StatusOr<Storage> storage =
      predecessor != nullptr ? AdoptStorage(predecessor->handed) : OpenStorage(plan);
  if (!storage.ok()) return fail(storage.status().message());
  auto& [device, faults, backend, capacity] = *storage;
  if (keeper && backend == BackendKind::kCuda) {
    if (absl::Status watched = FollowPieces(*device, *keeper); !watched.ok()) {
      return fail(absl::StrCat("survive=on: ", watched.message()));
    }
  }
  Arena arena(device.get(), options.min_block, capacity);
  // A file made and removed over and over in an empty mount (a script's
  // temp file) would commit and decommit a granule each time.
  arena.LingerEmptyGranules();

  FilesystemConfig config = plan.FilesystemConfigFor(arena.capacity(), backend);
  // Every call up into the kernel goes through the notifier; nothing is cached
  // before the mount, so it is attached to the session once there is one.
  FuseKernelNotifier notifier;
  config.notifier = &notifier;
  config.metadata_log = log.get();
  // A checkpoint needs no request running: the session loop pauses. The
  // tests ask for one every so many bytes, so that a short test pauses.
  config.checkpoint_due = AskForPause;
  if (const char* floor = std::getenv("CUDAFS_TEST_CHECKPOINT_BYTES"); floor != nullptr) {
    config.checkpoint_floor = std::strtoull(floor, nullptr, 10);
  }
  Filesystem filesystem(&arena, config);
  // A successor shares the arena's memory with its predecessor, which
  // serves on if this one fails: from here on a failure must exit without
  // freeing (which would decommit) anything.
  const auto fail_taking_over = [&](absl::string_view message) {
    fail(message);
    _exit(kExitUsage);
  };
  std::string recovered;
  if (from_keeper) {
    ReplayReport report;
    if (absl::Status loaded = filesystem.LoadLog(*log, &report); !loaded.ok()) {
      fail_taking_over(absl::StrCat("the dead daemon's files: ", loaded.message()));
    }
    if (backend == BackendKind::kCuda) arena.DecommitUnheld();
    // Said once the log is syslog's (Detach, below).
    recovered = absl::StrFormat(
        "took the mount over after its daemon died: %d inodes from %d transactions "
        "(%d mended%s%s)",
        report.inodes, report.transactions, report.mended.size(),
        report.mended.empty() ? "" : ", the first: ",
        report.mended.empty() ? "" : report.mended.front());
  } else if (predecessor != nullptr) {
    if (absl::Status loaded = filesystem.LoadImage(predecessor->handed.image); !loaded.ok()) {
      fail_taking_over(absl::StrCat("the running daemon's files: ", loaded.message()));
    }
    predecessor->handed.image.clear();
  }
  // A new log starts from where the files are.
  if (log != nullptr && !from_keeper) {
    if (absl::Status written = filesystem.CheckpointLog(); !written.ok()) {
      if (predecessor != nullptr) fail_taking_over(written.message());
      return fail(written.message());
    }
  }
  Placement placement(&arena);
  RoomKeeper room_keeper(&filesystem, &placement,
                         RoomKeeper::Options{.ready = options.spill_ready});
  UringBuffers uring_buffers(device.get());
  FuseSettings settings = plan.FuseSettingsFor(backend);
  if (predecessor != nullptr) settings.generation = predecessor->handed.generation;
  FuseContext context(&filesystem, device.get(), settings, &uring_buffers);
  ControlPlane control(&context, &arena, getuid(), faults, &room_keeper, plan.WhyNoRoom(backend));
  context.control = &control;

  absl::StatusOr<fuse_session*> session = StartSession(options, context, notifier, predecessor);
  if (!session.ok()) {
    if (predecessor != nullptr) fail_taking_over(session.status().message());
    return fail(session.status().message());
  }
  // The INIT a successor replays, and the command line it serves with; a
  // successor has its predecessor's.
  std::string init_request = predecessor != nullptr ? predecessor->handed.init_request : "";
  const std::vector<std::string> arguments =
      predecessor != nullptr ? predecessor->handed.arguments : OwnArguments();
  // What the keeper holds, once there is an INIT to replay: a successor
  // replayed one, a new mount has one once the kernel sent it.
  const auto hold = [&] {
    if (!keeper) return;
    absl::StatusOr<HandedOver> state =
        StateToKeep(*storage, arena, log.get(), context, *session, init_request, arguments);
    const absl::Status held = state.ok() ? keeper->Hold(*state) : state.status();
    if (!held.ok()) {
      LogError(absl::StrCat("the keeper holds nothing: a crash now loses the files: ",
                            held.message()));
    }
  };
  if (from_keeper) {
    // The requests the dead daemon read and never answered.
    if (absl::Status resent = ResendInFlightRequests(*session); !resent.ok()) {
      LogError(absl::StrCat("requests in flight at the crash wait until unmounted: ",
                            resent.message()));
    }
  } else if (predecessor != nullptr) {
    hold();
  }
  if (predecessor != nullptr) {
    // The predecessor exits now (or, the keeper's, is gone); requests wait
    // in the kernel meanwhile.
    SendAnswer(predecessor->answer_to, absl::OkStatus());
    LogInfo("took the mount over from the running daemon");
  }
  const std::optional<MountInfoLine> mount = OwnMount(options.mountpoint);
  if (mount && watcher) watcher->Watch(*mount);

  // Detached before the parent exits, so that whoever ran cudafs finds the
  // daemon off their terminal (and pipes) once the command returns.
  if (!options.foreground) Detach(options.mountpoint);
  if (!recovered.empty()) LogInfo(recovered);
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

  // Serves until unmounted (or a stop signal unmounts it); a hand-over
  // asked for (SIGUSR1) stops the workers and the background tasks, and
  // this process exits once a successor serves, or serves on. A pause
  // asked for writes the metadata log's checkpoint.
  int result = 0;
  SessionLoopSettings loop;
  loop.threads = static_cast<int>(context.settings.workers);
  loop.max_request = context.settings.max_request;
  loop.init_request = &init_request;
  if (predecessor == nullptr) loop.after_init = hold;
  loop.resident_buffers = keeper.has_value();
  for (;;) {
    std::optional<BackgroundTasks> tasks;
    tasks.emplace(filesystem, arena, config.trim_growth_when_idle, room_keeper);
    result = RunSessionLoop(*session, options.mountpoint, *device, loop);
    if (result != kHandOverAsked && result != kPauseAsked) break;
    tasks.reset();
    if (result == kPauseAsked) {
      const absl::Time began = absl::Now();
      if (absl::Status written = filesystem.CheckpointLog(); !written.ok()) {
        LogError(absl::StrCat("no checkpoint of the metadata log: ", written.message()));
      } else {
        LogInfo(absl::StrFormat("metadata log: a checkpoint of %d bytes in %.3f s",
                                log->checkpoint_bytes(),
                                absl::ToDoubleSeconds(absl::Now() - began)));
      }
      continue;
    }
    const absl::Status handed = HandOver([&] {
      return StateToHandOver(options, *storage, arena, filesystem, context, *session, init_request,
                             arguments);
    });
    if (handed.ok()) {
      LogInfo("handed the mount over to its successor");
      if (keeper) keeper->Farewell();
      _exit(0);  // the successor owns everything now: nothing to free or unmount
    }
    LogError(absl::StrCat("no hand-over, serving on: ", handed.message()));
  }
  if (keeper) keeper->Farewell();
  if (result < 0) LogError(absl::StrCat("serving failed: ", std::strerror(-result)));
  if (predecessor != nullptr && mount) UnmountHandedOver(*mount);
  EndSession(*session, notifier, uring_buffers);
  return result < 0 ? 1 : 0;
}

}  // namespace cudafs
