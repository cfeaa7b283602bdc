// The share service under attack, on a real mount: what another user can
// take from it (memory, time, descriptors), and a fuzzer of its protocol
// while a legitimate program maps and the mount serves FUSE throughout.
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "fs/client/cudafs.h"
#include "tests/mount/mount_fixture.h"
#include "tests/support/errno_check.h"
#include "tests/support/file_io.h"
#include "tests/support/processes.h"
#include "tests/support/raw_share_client.h"
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
