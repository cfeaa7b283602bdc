// The share service under attack, on a real mount: what another user can
// take from it (memory, time, descriptors), and a fuzzer of its protocol
// while a legitimate program maps and the mount serves FUSE throughout.
#include <fcntl.h>
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
  for (const bool allow_other : {false, true}) {
    SCOPED_TRACE(allow_other);
    std::vector<std::string> extra = {"size=64m"};
    if (allow_other) extra.push_back("allow_other");
    ASSERT_TRUE(Remount(extra));
    ASSERT_TRUE(WriteFile(Path("f"), RandomBytes(1 << 20, 3)));
    const std::string address = ShareSocketOf(root());
    int ready[2];
    ASSERT_SYS_OK(pipe(ready));
    const pid_t attacker = fork();
    if (attacker == 0) {
      if (setresgid(kOtherUid, kOtherUid, kOtherUid) != 0 ||
          setresuid(kOtherUid, kOtherUid, kOtherUid) != 0) {
        _exit(1);
      }
      for (int i = 0; i < 40; ++i) (void)ConnectToShare(address);
      (void)!write(ready[1], "x", 1);
      for (;;) pause();
    }
    char byte;
    ASSERT_EQ(read(ready[0], &byte, 1), 1);
    close(ready[0]);
    close(ready[1]);
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
  ASSERT_TRUE(Remount({"size=256m"}));
  const std::string data = RandomBytes(4 << 20, 11);
  ASSERT_TRUE(WriteFile(Path("mapped"), data));
  ASSERT_TRUE(WriteFile(Path("shared"), data));
  const std::string address = ShareSocketOf(root());
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
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(cudafs::Scaled(10));
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
  EXPECT_EQ(failures, 0);
  EXPECT_GT(maps, 10);
  EXPECT_GT(fuzzed, 100);
  EXPECT_EQ(ReadFile(Path("mapped")), data);
  RecordProperty("fuzzed_connections", fuzzed.load());
}

CUDAFS_INSTANTIATE_BACKENDS(ShareLimitsTest);

}  // namespace
}  // namespace cudafs_test
