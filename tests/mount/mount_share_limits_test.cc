// The share service under attack, on a real mount: what another user can
// take from it (memory, time, descriptors), and a fuzzer of its protocol
// while a legitimate program maps and the mount serves FUSE throughout.
#include <fcntl.h>
#include <linux/falloc.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "fs/client/cudafs.h"
#include "fs/wire/descriptor_socket.h"
#include "fs/wire/share_protocol.h"
#include "tests/mount/mount_fixture.h"
#include "tests/support/errno_check.h"
#include "tests/support/file_io.h"
#include "tests/support/lingering_sockets.h"
#include "tests/support/processes.h"
#include "tests/support/raw_share_client.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_scale.h"

namespace cudafs_test {

using namespace std::chrono_literals;

namespace {

using ShareLimitsTest = FsTest;

// A "Name:  N kB" line of /proc/PID/status, in bytes; -1 if unreadable.
int64_t StatusBytes(pid_t pid, const std::string& name) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(name + ":", 0) == 0) return std::stoll(line.substr(name.size() + 1)) * 1024;
  }
  return -1;
}

uint64_t FreeBytes(const std::string& path) {
  struct statvfs fs = {};
  statvfs(path.c_str(), &fs);
  return uint64_t{fs.f_bfree} * fs.f_frsize;
}

// The hoarding attack: another user asks for many private copies of a
// file it may read and keeps only the mappings. The copies are its own
// memory (in its RSS, where the OOM killer finds it), never the daemon's,
// and take nothing from the mount.
TEST_P(ShareLimitsTest, PrivateCopiesAreTheCallersMemory) {
  SKIP_UNLESS_CUDAFS();
  if (backend() != "host") GTEST_SKIP() << "host memory: GPU copies are checked on the GPU";
  ASSERT_TRUE(Remount({"size=64m", "allow_other"}));
  constexpr size_t kFile = 16 << 20;
  constexpr int kCopies = 8;  // 128 MiB of copies from a 64 MiB mount
  const std::string data = RandomBytes(kFile, 7);
  ASSERT_TRUE(WriteFile(Path("f"), data));
  ASSERT_SYS_OK(chmod(Path("f").c_str(), 0644));
  const pid_t daemon = *mount().daemon();
  const int64_t daemon_before = StatusBytes(daemon, "RssShmem");
  const uint64_t free_before = FreeBytes(root());
  const std::string path = Path("f");
  const Errno held = RunAs(kOtherUid, kOtherUid, [&]() -> Errno {
    std::vector<cudafs_mapping*> copies;
    const int64_t own_before = StatusBytes(getpid(), "RssShmem");
    for (int i = 0; i < kCopies; ++i) {
      cudafs_mapping* m = nullptr;
      if (cudafs_map(path.c_str(), 0, &m) != 0) return Errno{1};
      const char* bytes = static_cast<const char*>(cudafs_mapping_pointer(m));
      if (cudafs_mapping_size(m) != kFile || std::string_view(bytes, kFile) != data) {
        return Errno{2};
      }
      copies.push_back(m);
    }
    if (StatusBytes(getpid(), "RssShmem") - own_before < int64_t{kCopies} * int64_t{kFile}) return Errno{3};
    if (StatusBytes(daemon, "RssShmem") - daemon_before > int64_t{4} << 20) return Errno{4};
    if (FreeBytes(path.substr(0, path.size() - 2)) != free_before) return Errno{5};
    return Errno{0};
  });
  EXPECT_EQ(held, Errno{0}) << "1 map failed, 2 wrong bytes, 3 not the caller's memory, "
                               "4 the daemon's memory, 5 taken from the mount";
}

// Silent connections of another user hold up no map of the owner, with or
// without allow_other (without it they are refused at once).
TEST_P(ShareLimitsTest, SilentConnectionsOfAnotherUserStallNoMap) {
  SKIP_UNLESS_CUDAFS();
  if (backend() == "cuda" && OnFakeGpus()) GTEST_SKIP() << kNoCopiesOnFakeGpus;
  for (const bool allow_other : {false, true}) {
    SCOPED_TRACE(allow_other);
    std::vector<std::string> extra = {"size=64m", allow_other ? "allow_other" : "noallow_other"};
    ASSERT_TRUE(Remount(extra));
    ASSERT_TRUE(WriteFile(Path("f"), RandomBytes(1 << 20, 3)));
    const std::string address = ShareSocketOf(root());
    const pid_t attacker = StartAs(kOtherUid, kOtherGid, [&] {
      for (int i = 0; i < 40; ++i) (void)ConnectToShare(address);  // held open, silent
    });
    ASSERT_GT(attacker, 0);
    for (int i = 0; i < 20; ++i) {
      const auto start = std::chrono::steady_clock::now();
      cudafs_mapping* m = nullptr;
      EXPECT_EQ(cudafs_map(Path("f").c_str(), 0, &m), 0) << cudafs_last_error();
      cudafs_unmap(m);
      EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << "map " << i;
    }
    kill(attacker, SIGKILL);
    WaitForChild(attacker, 10s);
  }
}

// A listener of another user's on an abstract socket, standing in for an
// impostor daemon: it takes every connection and counts the descriptors
// sent on it, until Report().
class Impostor {
 public:
  Impostor() {
    address_ = "@cudafs-test-impostor-" + std::to_string(getpid());
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(done_, O_CLOEXEC) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(ready[0]);
      close(done_[1]);  // its end comes with Report()
      Serve(ready[1]);
    }
    close(ready[1]);
    close(done_[0]);
    char byte;
    listening_ = read(ready[0], &byte, 1) == 1;
    close(ready[0]);
  }
  ~Impostor() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      WaitForChild(pid_, 10s);
    }
    if (done_[1] >= 0) close(done_[1]);
  }
  bool listening() const { return listening_; }
  const std::string& address() const { return address_; }

  // 0: nobody connected; 1: connections, no descriptor; 2: descriptors
  // received; else the impostor failed.
  int Report() {
    close(done_[1]);
    done_[1] = -1;
    const std::optional<int> status = WaitForChild(pid_, 10s);
    pid_ = -1;
    return status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
  }

 private:
  [[noreturn]] void Serve(int ready) {
    sockaddr_un address = {};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path + 1, address_.data() + 1, address_.size() - 1);
    const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (setresgid(kOtherGid, kOtherGid, kOtherGid) != 0 ||
        setresuid(kOtherUid, kOtherUid, kOtherUid) != 0 ||
        bind(listener, reinterpret_cast<sockaddr*>(&address),
             static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address_.size())) != 0 ||
        listen(listener, 8) != 0 || write(ready, "r", 1) != 1) {
      _exit(10);
    }
    int connections = 0;
    int descriptors = 0;
    for (;;) {
      pollfd waits[2] = {{listener, POLLIN, 0}, {done_[0], POLLIN, 0}};
      if (poll(waits, 2, -1) < 0) _exit(11);
      if (waits[1].revents != 0) _exit(descriptors > 0 ? 2 : connections > 0 ? 1 : 0);
      const int connection = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (connection < 0) continue;
      ++connections;
      // The request comes at once, with the file's descriptor; then the
      // client waits for a reply, which ends with the connection.
      std::vector<int> fds;
      bool refused = false;
      char request[64];
      cudafs::ReceiveWithDescriptors(connection, request, sizeof request, 0, 16, &fds, &refused);
      descriptors += static_cast<int>(fds.size()) + (refused ? 1 : 0);
      for (int fd : fds) close(fd);
      close(connection);
    }
  }

  std::string address_;
  pid_t pid_ = -1;
  int done_[2] = {-1, -1};
  bool listening_ = false;
};

// The attack of a directory's owner on a program that sees the mount
// through a bind mount of the directory (a container, `unshare -m`): the
// owner names a socket of theirs in the directory's user.cudafs.socket and
// listens there; root's program maps its 0600 file through the bind mount.
// The daemon stores no such name below its root, and the client asks only
// the mount's root: the map goes to the real daemon, or, where only the
// bind mount is visible, fails saying why; the impostor gets nothing.
TEST_P(ShareLimitsTest, ABindMountOfADirectoryLeadsToNoOtherDaemon) {
  SKIP_UNLESS_CUDAFS();
  if (backend() != "host") GTEST_SKIP() << "the client's choice of daemon is the same on a GPU";
  ASSERT_TRUE(Remount({"size=64m", "allow_other"}));
  const std::string dir = Path("d");
  ASSERT_SYS_OK(mkdir(dir.c_str(), 0755));
  ASSERT_SYS_OK(chown(dir.c_str(), kOtherUid, kOtherGid));
  const std::string data = RandomBytes(1 << 20, 13);
  ASSERT_TRUE(WriteFile(dir + "/secret", data));
  ASSERT_SYS_OK(chmod((dir + "/secret").c_str(), 0600));
  Impostor impostor;
  ASSERT_TRUE(impostor.listening());
  const std::string evil = impostor.address();
  EXPECT_EQ(RunAs(kOtherUid, kOtherGid,
                  [&] {
                    return ResultErrno(setxattr(dir.c_str(), cudafs::kShareSocketAttribute,
                                                evil.data(), evil.size(), 0));
                  }),
            Errno{EPERM});
  TempDir bound("/tmp/cudafs-bind-");
  ASSERT_FALSE(bound.path().empty());
  const std::string through = bound.path() + "/secret";
  const std::string mountpoint = root();
  for (const bool root_visible : {true, false}) {
    SCOPED_TRACE(root_visible ? "the mount's root visible" : "only the bind mount visible");
    // Root's program, in a mount namespace of its own.
    const Errno mapped = RunAs(0, 0, [&]() -> Errno {
      if (unshare(CLONE_NEWNS) != 0 ||
          ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
          ::mount(dir.c_str(), bound.path().c_str(), nullptr, MS_BIND, nullptr) != 0 ||
          (!root_visible && umount2(mountpoint.c_str(), MNT_DETACH) != 0)) {
        return Errno{100};
      }
      cudafs_mapping* m = nullptr;
      const int result = cudafs_map(through.c_str(), 0, &m);
      if (result != 0) {
        const bool says_why =
            std::string_view(cudafs_last_error()).find("root is not visible here") !=
            std::string_view::npos;
        return Errno{says_why ? -result : 101};
      }
      const bool same = std::string_view(static_cast<const char*>(cudafs_mapping_pointer(m)),
                                         cudafs_mapping_size(m)) == data;
      cudafs_unmap(m);
      return Errno{same ? 0 : 102};
    });
    EXPECT_EQ(mapped, Errno{root_visible ? 0 : EXDEV})
        << "100: no namespace, 101: failed without saying why, 102: wrong bytes";
  }
  EXPECT_EQ(impostor.Report(), 0) << "1: the impostor was reached, 2: it got descriptors";
}

// Random and mutated messages with all kinds of descriptors, from several
// connections at once, while a program maps (a copy and a shared mapping)
// and reads and writes through FUSE: every legitimate call succeeds with
// the right bytes, and the daemon lives on.
TEST_P(ShareLimitsTest, ProtocolFuzzLeavesMapsAndTheMountWorking) {
  SKIP_UNLESS_CUDAFS();
  if (backend() != "host") GTEST_SKIP() << "host memory (the GPU's maps are checked there)";
  ASSERT_TRUE(Remount({"size=256m", "allow_other"}));
  const std::string data = RandomBytes(4 << 20, 11);
  ASSERT_TRUE(WriteFile(Path("mapped"), data));
  ASSERT_TRUE(WriteFile(Path("shared"), data));
  const std::string address = ShareSocketOf(root());
  const int seconds = cudafs::Scaled(10);
  // Another user sends, with its requests, sockets whose last close
  // lingers (a loopback TCP connection over a full send queue nobody
  // reads, SO_LINGER 5 s): the closes hold up that user alone.
  const pid_t lingerer = fork();
  if (lingerer == 0) {
    if (setresgid(kOtherGid, kOtherGid, kOtherGid) != 0 ||
        setresuid(kOtherUid, kOtherUid, kOtherUid) != 0) {
      _exit(1);
    }
    LingeringSockets sockets;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    for (int sent = 0; std::chrono::steady_clock::now() < until && sent < 16; ++sent) {
      const int lingering = sockets.Make(5);
      if (lingering < 0) _exit(3);
      const int connection = ConnectToShare(address);
      const cudafs::ShareRequest request = MakeShareRequest(cudafs::kShareMap);
      if (SendRaw(connection, &request, sizeof request, lingering)) {
        close(lingering);
      } else {
        LingeringSockets::CloseAtOnce(lingering);
      }
      cudafs::ShareReply reply;
      ReceiveReply(connection, &reply, 1000);
      close(connection);
      std::this_thread::sleep_for(200ms);
    }
    _exit(0);  // the peers close: the lingering ends
  }
  std::atomic<bool> done = false;
  std::atomic<int> fuzzed = 0;
  std::vector<std::thread> fuzzers;
  for (int t = 0; t < 4; ++t) {
    fuzzers.emplace_back([&, t] {
      std::mt19937_64 random(1000 + t);
      const auto pick = [&](uint64_t n) { return random() % n; };
      while (!done) {
        // A descriptor: none, a file of the mount (read-only or not), a
        // directory, /dev/null, a pipe, a memfd, a socket.
        int fd = -1;
        switch (pick(8)) {
          case 1: fd = open(Path("mapped").c_str(), O_RDONLY | O_CLOEXEC); break;
          case 2: fd = open(Path("shared").c_str(), O_RDWR | O_CLOEXEC); break;
          case 3: fd = open(root().c_str(), O_RDONLY | O_CLOEXEC); break;
          case 4: fd = open("/dev/null", O_RDWR | O_CLOEXEC); break;
          case 5: {
            int ends[2];
            if (pipe2(ends, O_CLOEXEC) == 0) {
              fd = ends[0];
              close(ends[1]);
            }
            break;
          }
          case 6: {
            fd = memfd_create("fuzz", MFD_CLOEXEC);
            if (fd >= 0 && ftruncate(fd, static_cast<off_t>(pick(8 << 20))) != 0) {
              close(fd);
              fd = -1;
            }
            break;
          }
          case 7: fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0); break;
        }
        const int connection = ConnectToShare(address);
        if (connection < 0) {
          if (fd >= 0) close(fd);
          continue;
        }
        // A sequence of messages: well-formed ones of every op with random
        // fields, mutated bytes, short ones; then read, or hang up.
        for (int message = 0, count = 1 + static_cast<int>(pick(3)); message < count; ++message) {
          cudafs::ShareRequest request = MakeShareRequest(
              static_cast<uint32_t>(1 + pick(5)), pick(4) == 0 ? static_cast<uint32_t>(random()) : 0);
          if (pick(4) == 0) request.memory_bytes = pick(4) == 0 ? random() : pick(16 << 20);
          char bytes[sizeof request];
          std::memcpy(bytes, &request, sizeof request);
          for (int flips = static_cast<int>(pick(3)); flips > 0; --flips) {
            bytes[pick(sizeof bytes)] ^= static_cast<char>(1u << pick(8));
          }
          const size_t length = pick(5) == 0 ? pick(sizeof bytes) : sizeof bytes;
          SendRaw(connection, bytes, length, message == 0 ? fd : -1);
          if (pick(3) != 0) {
            cudafs::ShareReply reply;
            ReceiveReply(connection, &reply, static_cast<int>(pick(200)));
          }
        }
        close(connection);
        if (fd >= 0) close(fd);
        ++fuzzed;
      }
    });
  }
  std::atomic<int> failures = 0;
  std::thread fuse_user([&] {
    for (int i = 0; !done; ++i) {
      const std::string name = Path("io" + std::to_string(i % 8));
      const std::string bytes = RandomBytes(64 << 10, i);
      if (!WriteFile(name, bytes) || ReadFile(name) != bytes) ++failures;
    }
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int maps = 0;
  while (std::chrono::steady_clock::now() < until) {
    cudafs_mapping* copy = nullptr;
    if (cudafs_map(Path("mapped").c_str(), 0, &copy) != 0) {
      ADD_FAILURE() << "copy: " << cudafs_last_error();
    } else {
      EXPECT_EQ(std::string_view(static_cast<const char*>(cudafs_mapping_pointer(copy)),
                                 cudafs_mapping_size(copy)),
                data);
      cudafs_unmap(copy);
    }
    cudafs_mapping* shared = nullptr;
    if (cudafs_map(Path("shared").c_str(), CUDAFS_MAP_WRITABLE, &shared) != 0) {
      ADD_FAILURE() << "shared: " << cudafs_last_error();
    } else {
      cudafs_unmap(shared);
    }
    ++maps;
  }
  done = true;
  for (std::thread& fuzzer : fuzzers) fuzzer.join();
  fuse_user.join();
  EXPECT_EQ(WaitForChild(lingerer, 30s), std::optional<int>(0)) << "the lingering sender";
  EXPECT_EQ(failures, 0);
  EXPECT_GT(maps, seconds) << "fewer than a map a second";
  EXPECT_GT(fuzzed, 100);
  EXPECT_EQ(ReadFile(Path("mapped")), data);
  RecordProperty("fuzzed_connections", fuzzed.load());
}

// The descriptors of a writable mapping's pieces, from a conversation
// spoken by hand (the library maps and closes them; an attacker keeps
// them): empty when the daemon refused or said nothing.
std::vector<int> SharedPieces(const std::string& address, int file) {
  std::vector<int> pieces;
  const int connection = ConnectToShare(address);
  if (connection < 0) return pieces;
  const cudafs::ShareRequest request = MakeShareRequest(cudafs::kShareMap, cudafs::kShareWritable);
  cudafs::ShareReply reply = {};
  if (SendRaw(connection, &request, sizeof request, file) &&
      ReceiveWhole(connection, &reply, &pieces) && reply.error == 0) {
    while (pieces.size() < reply.pieces) {
      cudafs::SharePieces batch;
      if (!ReceiveWhole(connection, &batch, &pieces, cudafs::kShareBatch)) break;
    }
  }
  close(connection);
  return pieces;
}

// The attack that killed the daemon: another user maps a file of its own
// writable, keeps the pieces, and truncates one. The daemon's view of the
// piece must not shrink under it: the truncate fails, and every file
// reads back whole with the daemon alive.
TEST_P(ShareLimitsTest, AnImporterCannotResizeTheDaemonsMemory) {
  SKIP_UNLESS_CUDAFS();
  ASSERT_TRUE(Remount({"size=64m", "allow_other", "mode=1777"}));
  const std::string mine = RandomBytes(2 << 20, 5);
  const std::string theirs = RandomBytes(4 << 20, 6);
  ASSERT_TRUE(WriteFile(Path("root-file"), mine));
  const std::string path = Path("theirs");
  const std::string address = ShareSocketOf(root());
  const Errno attack = RunAs(kOtherUid, kOtherGid, [&]() -> Errno {
    if (!WriteFile(path, theirs)) return Errno{1};
    const int file = open(path.c_str(), O_RDWR | O_CLOEXEC);
    std::vector<int> pieces = SharedPieces(address, file);
    close(file);
    if (pieces.empty()) return Errno{2};
    int result = 0;
    for (int piece : pieces) {
      if (ftruncate(piece, 0) == 0) result = 3;
      else if (errno != EPERM) result = 4;
      if (ftruncate(piece, off_t{1} << 30) == 0) result = 5;
      close(piece);
    }
    return Errno{result};
  });
  EXPECT_EQ(attack, Errno{0}) << "1 no file, 2 no pieces, 3 shrunk, 4 not EPERM, 5 grown";
  EXPECT_EQ(ReadFile(path), theirs);
  EXPECT_EQ(ReadFile(Path("root-file")), mine);
  EXPECT_TRUE(ProcessAlive(*mount().daemon()));
}

// The stall after unmount: another user leaves, on a connection it never
// reads from, a message carrying a socket whose last close lingers 30 s.
// Closing that connection releases the socket; the daemon must still end
// at once when unmounted, not when the attacker lets go.
TEST_P(ShareLimitsTest, UnmountWaitsForNoAttacker) {
  SKIP_UNLESS_CUDAFS();
  ASSERT_TRUE(Remount({"size=64m", "allow_other"}));
  ASSERT_TRUE(WriteFile(Path("f"), "data"));
  const std::string address = ShareSocketOf(root());
  // The attacker's sockets and connections stay open until it is killed.
  const pid_t attacker = StartAs(kOtherUid, kOtherGid, [&] {
    // Static: the peers must stay open, never read, after the body returns.
    static LingeringSockets sockets;
    for (int i = 0; i < 4; ++i) {
      const int lingering = sockets.Make(30);
      if (lingering < 0) _exit(3);
      const int connection = ConnectToShare(address);  // left open
      const cudafs::ShareRequest request = MakeShareRequest(cudafs::kShareMap);
      const char extra = 'x';
      SendRaw(connection, &request, sizeof request);
      if (SendRaw(connection, &extra, 1, lingering)) {
        close(lingering);
      } else {
        LingeringSockets::CloseAtOnce(lingering);
      }
    }
  });
  ASSERT_GT(attacker, 0);
  std::this_thread::sleep_for(500ms);  // answered and dropped: the closes wait
  const pid_t daemon = *mount().daemon();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(mount().Unmount());
  EXPECT_FALSE(ProcessAlive(daemon)) << "the daemon outlived its unmount by 10 s";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  kill(attacker, SIGKILL);
  WaitForChild(attacker, 10s);
}

// Memory charged to a process's memory cgroup: a child group of this
// process's, on cgroup v2 or v1's memory controller. Tests that need one
// skip where cgroups cannot be made.
class MemoryCgroup {
 public:
  static std::optional<MemoryCgroup> Make(const std::string& name) {
    std::ifstream mine("/proc/self/cgroup");
    for (std::string line; std::getline(mine, line);) {
      const size_t colon = line.find(':'), second = line.find(':', colon + 1);
      if (colon == std::string::npos || second == std::string::npos) continue;
      const std::string controllers = line.substr(colon + 1, second - colon - 1);
      const std::string path = line.substr(second + 1);
      std::string base;
      if (controllers == "memory") base = "/sys/fs/cgroup/memory" + path;
      else if (controllers.empty() && line.rfind("0::", 0) == 0 &&
               access("/sys/fs/cgroup/cgroup.controllers", R_OK) == 0) {
        base = "/sys/fs/cgroup" + path;
      } else {
        continue;
      }
      const std::string dir = base + "/" + name;
      if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) continue;
      MemoryCgroup group(base, dir);
      if (group.Usage() >= 0) return group;
      rmdir(dir.c_str());
    }
    return std::nullopt;
  }
  // Moves process `pid` into the group (false if it could not be).
  bool Enter(pid_t pid) const { return WriteTo(dir_ + "/cgroup.procs", pid); }
  // Moves `pid` back where the group was made.
  void Leave(pid_t pid) const { (void)WriteTo(parent_ + "/cgroup.procs", pid); }
  int64_t Usage() const {
    for (const char* name : {"/memory.current", "/memory.usage_in_bytes"}) {
      std::ifstream in(dir_ + name);
      int64_t bytes;
      if (in >> bytes) return bytes;
    }
    return -1;
  }
  void Remove() const { rmdir(dir_.c_str()); }

 private:
  MemoryCgroup(std::string parent, std::string dir)
      : parent_(std::move(parent)), dir_(std::move(dir)) {}
  static bool WriteTo(const std::string& file, pid_t pid) {
    std::ofstream out(file);
    out << pid << std::endl;
    return static_cast<bool>(out);
  }
  std::string parent_;
  std::string dir_;
};

// A private copy conversation spoken by hand, into the memfd that
// `make_memory(bytes)` builds: the daemon's answer to the fill (an errno),
// or a negative number when the conversation broke before it. The memory
// of a fill answered 0 is appended to `kept` (its pages stay charged while
// it is open).
int CopyInto(const std::string& address, int file,
             const std::function<int(uint64_t)>& make_memory, std::vector<int>* kept) {
  const int connection = ConnectToShare(address);
  if (connection < 0) return -1;
  int result = -2;
  const cudafs::ShareRequest map = MakeShareRequest(cudafs::kShareMap);
  cudafs::ShareReply plan = {};
  std::vector<int> none;
  if (SendRaw(connection, &map, sizeof map, file) && ReceiveWhole(connection, &plan, &none) &&
      plan.error == 0 && plan.pieces == 1) {
    cudafs::SharePieces pieces;
    if (ReceiveWhole(connection, &pieces, &none)) {
      const int memory = make_memory(plan.memory_bytes);
      cudafs::ShareRequest fill = MakeShareRequest(cudafs::kShareFill);
      fill.memory_bytes = plan.memory_bytes;
      cudafs::ShareReply filled = {};
      if (memory >= 0 && SendRaw(connection, &fill, sizeof fill, memory) &&
          ReceiveWhole(connection, &filled, &none)) {
        result = filled.error;
      }
      if (result == 0) {
        kept->push_back(memory);
      } else if (memory >= 0) {
        close(memory);
      }
    }
  }
  close(connection);
  return result;
}

// Copies cost their asker, never the daemon, however the asker builds the
// memory it brings: a memfd with holes anywhere the copy would write is
// refused (the daemon's writes would allocate its pages in the daemon's
// memory cgroup), and with a memory cgroup per side, the daemon's stays
// flat while the asker's grows by the copies.
TEST_P(ShareLimitsTest, CopiesAreChargedToTheAskerHoweverItsMemoryIsBuilt) {
  SKIP_UNLESS_CUDAFS();
  if (backend() != "host") GTEST_SKIP() << "host memory: GPU copies are GPU memory";
  ASSERT_TRUE(Remount({"size=64m", "allow_other"}));
  constexpr uint64_t kFile = 8 << 20;
  ASSERT_TRUE(WriteFile(Path("f"), RandomBytes(kFile, 9)));
  ASSERT_SYS_OK(chmod(Path("f").c_str(), 0644));
  const std::string address = ShareSocketOf(root());
  const std::string tag = std::to_string(getpid());
  std::optional<MemoryCgroup> daemon_group = MemoryCgroup::Make("cudafs-test-daemon-" + tag);
  std::optional<MemoryCgroup> asker_group = MemoryCgroup::Make("cudafs-test-asker-" + tag);
  const pid_t daemon = *mount().daemon();
  const bool cgroups = daemon_group && asker_group && daemon_group->Enter(daemon);
  const int64_t daemon_before = cgroups ? daemon_group->Usage() : 0;
  // Quarters [from, to) of the copy's size written, of a memfd twice as
  // large as the copy; `written` false: only fallocated.
  const auto allocated = [](uint64_t from, uint64_t to, bool written = true) {
    return [from, to, written](uint64_t bytes) {
      const int fd = memfd_create("asker", MFD_CLOEXEC);
      if (fd < 0 || ftruncate(fd, static_cast<off_t>(2 * bytes)) != 0) return -1;
      const off_t at = static_cast<off_t>(from * bytes / 4);
      const size_t length = static_cast<size_t>((to - from) * bytes / 4);
      if (length > 0 && written && pwrite(fd, std::string(length, 'a').data(), length, at) !=
                                       static_cast<ssize_t>(length)) {
        return -1;
      }
      if (length > 0 && !written && fallocate(fd, 0, at, static_cast<off_t>(length)) != 0) {
        return -1;
      }
      return fd;
    };
  };
  struct Way {
    const char* name;
    std::function<int(uint64_t)> make;
    int error;
  };
  const std::vector<Way> ways = {
      {"sized, nothing allocated", allocated(0, 0), EINVAL},
      {"twice the size, the upper half allocated", allocated(4, 8), EINVAL},
      {"the lower half allocated", allocated(0, 2), EINVAL},
      {"only the first quarter allocated", allocated(0, 1), EINVAL},
      {"allocated, then a page punched",
       [](uint64_t bytes) {
         const int fd = memfd_create("asker", MFD_CLOEXEC);
         if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
             pwrite(fd, std::string(bytes, 'a').data(), bytes, 0) !=
                 static_cast<ssize_t>(bytes) ||
             fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                       static_cast<off_t>(bytes / 2), 4096) != 0) {
           return -1;
         }
         return fd;
       },
       EINVAL},
      {"only fallocated (the daemon cannot tell it from holes)", allocated(0, 8, false),
       EINVAL},
      {"all written", allocated(0, 8), 0},
  };
  const std::string path = Path("f");
  for (const Way& way : ways) {
    SCOPED_TRACE(way.name);
    // The asker is born into its group (the group's files are root's).
    if (cgroups) {
      ASSERT_TRUE(asker_group->Enter(getpid()));
    }
    const Errno asked = RunAs(kOtherUid, kOtherGid, [&]() -> Errno {
      const int64_t asker_before = cgroups ? asker_group->Usage() : 0;
      const int file = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      int answer = 0;
      std::vector<int> copies;
      for (int i = 0; i < 8 && answer == 0; ++i) {
        answer = CopyInto(address, file, way.make, &copies);
      }
      close(file);
      const int64_t asker_after = cgroups ? asker_group->Usage() : 0;
      for (int copy : copies) close(copy);
      if (answer != way.error) return Errno{answer < 0 ? 101 : answer == 0 ? 103 : answer};
      if (cgroups && way.error == 0 && asker_after - asker_before < int64_t{kFile}) {
        return Errno{102};
      }
      return Errno{0};
    });
    if (cgroups) asker_group->Leave(getpid());
    EXPECT_EQ(asked, Errno{0})
        << "101 no answer, 102 not charged to the asker, 103 filled where it must be refused";
    // Less than one copy's worth in all: a copy whose pages the daemon
    // allocated would charge it kFile. What the daemon does allocate (its
    // buffers, a sanitizer's shadow of them: 4.2 MiB under TSan) stays
    // below that.
    if (cgroups) {
      EXPECT_LT(daemon_group->Usage() - daemon_before, int64_t{kFile}) << "charged to the daemon";
    }
  }
  if (cgroups) {
    daemon_group->Leave(daemon);
    daemon_group->Remove();
    asker_group->Remove();
  } else {
    RecordProperty("cgroups", "none could be made: only the refusals were checked");
  }
  EXPECT_TRUE(ProcessAlive(daemon));
}

CUDAFS_INSTANTIATE_BACKENDS(ShareLimitsTest);

}  // namespace
}  // namespace cudafs_test
