// Device faults in a running daemon (CUDAFS_FAULT_INJECTION=1, plan set
// through the root's user.cudafs.faults attribute), seen through the mount:
// every failing system call is EIO or ENOSPC, no read returns a wrong
// byte, a failed call leaves its file's bytes old or new inside its range
// and unchanged outside, files it did not touch stay intact, the daemon
// lives on, and once the faults stop the mount works as before. With the
// write-back cache on (the default) and off.
//
// CUDAFS_TEST_SEED picks the random sequence (printed on failure).
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/mount/mount.h"
#include "tests/mount/mount_fixture.h"
#include "tests/mount/mount_table.h"
#include "tests/support/errno_check.h"
#include "tests/support/eventually.h"
#include "tests/support/fd.h"
#include "tests/support/file_io.h"
#include "tests/support/processes.h"
#include "tests/support/test_scale.h"
#include "tests/support/test_seed.h"

namespace cudafs_test {
namespace {

constexpr size_t kMiB = 1 << 20;

class MountFaultTest : public BackendTest {
 protected:
  void TearDown() override { mount_.Unmount(); }

  // Sets the fault plan ("off", or "probability=P,seed=N").
  testing::AssertionResult Faults(const std::string& plan) {
    if (setxattr(mount_.path().c_str(), "user.cudafs.faults", plan.data(), plan.size(), 0) != 0) {
      return testing::AssertionFailure() << "setting the fault plan: " << ErrnoName(errno);
    }
    return testing::AssertionSuccess();
  }

  void Run(const std::vector<std::string>& extra);

  Mount mount_;
};

struct Victim {
  std::string path;
  Fd fd;
  std::string content;  // what every read must return
};

testing::AssertionResult ReadsBack(int fd, const std::string& expected) {
  const std::optional<std::string> actual = ReadAt(fd, 0, expected.size() + 1);
  if (!actual) return testing::AssertionFailure() << "read: " << ErrnoName(errno);
  return BytesEqual(*actual, expected);
}

void MountFaultTest::Run(const std::vector<std::string>& extra) {
  setenv("CUDAFS_FAULT_INJECTION", "1", 1);
  StartOrSkip(mount_, MountOptions(extra));
  unsetenv("CUDAFS_FAULT_INJECTION");
  if (HasFatalFailure() || IsSkipped()) return;
  const std::string root = mount_.path();
  const uint64_t seed = cudafs::TestSeed();
  SCOPED_TRACE(cudafs::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  auto random = [&](uint64_t bound) { return std::uniform_int_distribution<uint64_t>(0, bound)(rng); };

  // Files no operation touches: checksummed (kept) before, compared after.
  std::vector<std::pair<std::string, std::string>> bystanders;
  for (const size_t size : {size_t{300000}, size_t{5000}, kMiB + 17}) {
    const std::string path = root + "/bystander" + std::to_string(bystanders.size());
    bystanders.emplace_back(path, RandomBytes(size, seed + size));
    ASSERT_TRUE(WriteFile(path, bystanders.back().second));
  }
  std::vector<Victim> victims(3);
  for (size_t i = 0; i < victims.size(); ++i) {
    victims[i].path = root + "/victim" + std::to_string(i);
    ASSERT_TRUE(OpenFd(victims[i].path, O_RDWR | O_CREAT, &victims[i].fd));
  }

  const std::string plan = "probability=0.05,seed=" + std::to_string(seed);
  ASSERT_TRUE(Faults(plan));
  // A scaled-down run (CUDAFS_TEST_SCALE) goes on past its count until a
  // few calls have failed, up to the full count: 150 operations at 5% per
  // device call leave some seeds without a single fault.
  constexpr int kFullCount = 1500;
  constexpr int kEnoughFailures = 3;
  const int scaled = cudafs::Scaled(kFullCount);
  int failures = 0;
  int short_reads = 0;  // failures that returned the bytes before the fault
  int op = 0;
  for (; op < scaled || (failures < kEnoughFailures && op < kFullCount); ++op) {
    Victim& victim = victims[random(victims.size() - 1)];
    const int fd = victim.fd.get();
    const std::string before = victim.content;
    const uint64_t offset = random(3) == 0 ? random(3 * kMiB) : random(before.size());
    const uint64_t length = random(4) == 0 ? random(kMiB) : random(64 * 1024);
    std::string after = before;  // the content if the call succeeds
    // The content if the call fails, outside [touched_begin, touched_end).
    std::string settled = before;
    bool short_write = false;
    // A failed call may leave these bytes old or new, no others.
    uint64_t touched_begin = offset, touched_end = offset + length;
    long result = 0;
    const uint64_t kind = random(5);
    static constexpr const char* kKinds[] = {"pwrite", "pwrite", "ftruncate", "punch", "pread",
                                             "fsync"};
    SCOPED_TRACE(std::string(kKinds[kind]) + " " + victim.path + " offset " +
                 std::to_string(offset) + " length " + std::to_string(length) + " size " +
                 std::to_string(before.size()) + ", operation " + std::to_string(op));
    switch (kind) {
      case 0:
      case 1: {
        const std::string data = RandomBytes(length, rng());
        result = pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
        // A write of nothing changes nothing, past the end neither (POSIX).
        if (length > 0 && after.size() < offset + length) after.resize(offset + length, '\0');
        if (length > 0) after.replace(offset, length, data);
        if (result >= 0 && static_cast<uint64_t>(result) < length) {
          // The kernel sent the write as several requests and a later one
          // failed: the first `result` bytes are written, the rest is as
          // for a failed call.
          const uint64_t written = static_cast<uint64_t>(result);
          if (settled.size() < offset + written) settled.resize(offset + written, '\0');
          settled.replace(offset, written, data, 0, written);
          touched_begin = offset + written;
          short_write = true;
        }
        break;
      }
      case 2: {
        const uint64_t size = random(3 * kMiB);
        result = ftruncate(fd, static_cast<off_t>(size));
        after.resize(size, '\0');
        touched_begin = std::min<uint64_t>(size, before.size());
        touched_end = std::max<uint64_t>(size, before.size());
        break;
      }
      case 3: {
        if (length == 0) continue;
        result = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                           static_cast<off_t>(offset), static_cast<off_t>(length));
        if (offset < after.size()) {
          const uint64_t end = std::min<uint64_t>(after.size(), offset + length);
          std::fill(after.begin() + offset, after.begin() + end, '\0');
        }
        break;
      }
      case 4: {
        std::string out(length, '\0');
        result = pread(fd, out.data(), out.size(), static_cast<off_t>(offset));
        if (result >= 0) {
          const size_t expected =
              offset >= before.size() ? 0 : std::min<uint64_t>(length, before.size() - offset);
          const size_t got = static_cast<size_t>(result);
          ASSERT_LE(got, expected);
          if (got > 0) {
            ASSERT_TRUE(BytesEqual(out.substr(0, got), before.substr(offset, got)))
                << "read a wrong byte";
          }
          if (got < expected) {
            // A read that fails part way returns the bytes before the
            // failure, as POSIX has it and as ext4 does on a bad sector:
            // the kernel's page-cache read (filemap_read) returns what it
            // already copied when a page behind it fails to read (readahead
            // failed, then the page's own read_folio too), and a direct-I/O
            // read that the kernel split into several READ requests returns
            // the ones before the one that failed. The daemon itself fails
            // a READ request whole (a short reply would tell the kernel the
            // file ends there). So: the bytes are right, and the error is
            // still there for the next read at that offset, not an end of
            // file; once the device works, the rest reads back. (Unless the
            // daemon's write-back cache holds the pages there: a read it
            // serves needs no device, so it cannot fail, and then it must
            // return the right bytes.)
            ASSERT_GT(got, 0u) << "a failing read returned 0 (end of file) inside the file";
            const off_t at = static_cast<off_t>(offset + got);
            std::string rest(expected - got, '\0');
            ASSERT_TRUE(Faults("probability=1,ops=read"));
            const ssize_t again = pread(fd, rest.data(), rest.size(), at);
            const int error = errno;
            ASSERT_TRUE(Faults("off"));
            if (again < 0) {
              EXPECT_EQ(error, EIO) << ErrnoName(error);
            } else {
              ASSERT_GT(again, 0) << "the read after a short read found an end of file";
              ASSERT_TRUE(BytesEqual(rest.substr(0, static_cast<size_t>(again)),
                                     before.substr(at, static_cast<size_t>(again))))
                  << "the read after a short read returned a wrong byte";
            }
            const std::optional<std::string> tail = ReadAt(fd, at, rest.size());
            ASSERT_TRUE(tail.has_value()) << ErrnoName(errno);
            ASSERT_TRUE(BytesEqual(*tail, before.substr(at, rest.size())))
                << "the rest of a short read";
            const std::optional<struct stat> st = StatFd(fd);
            ASSERT_TRUE(st.has_value());
            ASSERT_EQ(static_cast<uint64_t>(st->st_size), before.size()) << "a read resized";
            ++failures;
            ++short_reads;
            ASSERT_TRUE(Faults(plan + std::to_string(op)));  // a fresh sequence
            continue;
          }
        }
        break;
      }
      case 5: {  // a failed write-back keeps the pages dirty, the bytes as they were
        result = fsync(fd);
        touched_begin = touched_end = 0;
        break;
      }
    }
    if (result >= 0 && !short_write) {
      victim.content = after;
      continue;
    }
    ++failures;
    if (!short_write) {
      const int error = errno;
      ASSERT_TRUE(error == EIO || error == ENOSPC) << "failed with " << ErrnoName(error);
    }
    ASSERT_TRUE(Faults("off"));
    const std::optional<struct stat> st = StatFd(fd);
    ASSERT_TRUE(st.has_value());
    ASSERT_EQ(static_cast<uint64_t>(st->st_size), settled.size()) << "a failed call resized";
    const std::optional<std::string> actual = ReadAt(fd, 0, settled.size());
    ASSERT_TRUE(actual.has_value()) << ErrnoName(errno);
    ASSERT_EQ(actual->size(), settled.size());
    for (size_t i = 0; i < actual->size(); ++i) {
      const bool touched = i >= touched_begin && i < touched_end;
      const char updated = i < after.size() ? after[i] : '\0';
      ASSERT_TRUE((*actual)[i] == settled[i] || (touched && (*actual)[i] == updated))
          << "byte " << i << " is neither old nor new";
    }
    victim.content = *actual;
    ASSERT_TRUE(Faults(plan + std::to_string(op)));  // a fresh sequence
  }
  ASSERT_TRUE(Faults("off"));
  const std::map<std::string, std::string> stats = MountStats(root);
  ASSERT_TRUE(stats.contains("faults_injected"));
  std::printf("%d operations, %s faults injected, %d calls failed (%d short reads)\n", op,
              stats.at("faults_injected").c_str(), failures, short_reads);
  EXPECT_GT(failures, 0) << "no call failed: the faults did not reach the mount";
  ASSERT_TRUE(mount_.daemon() && ProcessAlive(*mount_.daemon())) << "the daemon died";

  // Everything as the model says, and the mount works as before.
  for (Victim& victim : victims) {
    ASSERT_SYS_OK(fsync(victim.fd.get()));
    EXPECT_TRUE(ReadsBack(victim.fd.get(), victim.content)) << victim.path;
  }
  for (const auto& [path, content] : bystanders) {
    EXPECT_EQ(ReadFile(path), content) << path << " changed";
  }
  const std::string fresh = RandomBytes(3 * kMiB + 5, seed);
  ASSERT_TRUE(WriteFile(root + "/after", fresh));
  EXPECT_EQ(ReadFile(root + "/after"), fresh);
}

// With the write-back cache named: host memory has none by default, and the
// host instance stands in for the GPU's data path where CI has no GPU.
TEST_P(MountFaultTest, DeviceFaultsFailCallsCleanlyAndTheMountRecovers) { Run({"cache=64m"}); }

TEST_P(MountFaultTest, SameWithoutTheWriteBackCache) { Run({"cache=0"}); }

// Only root may set the plan, and a malformed plan is refused.
TEST_P(MountFaultTest, OnlyRootSetsAWellFormedPlan) {
  setenv("CUDAFS_FAULT_INJECTION", "1", 1);
  StartOrSkip(mount_, MountOptions());
  unsetenv("CUDAFS_FAULT_INJECTION");
  if (HasFatalFailure() || IsSkipped()) return;
  EXPECT_FALSE(Faults("probability=2"));
  EXPECT_FALSE(Faults("sometimes"));
  const std::string root = mount_.path();
  const Errno as_other = RunAs(kOtherUid, kOtherGid, [&] {
    const std::string plan = "probability=1";
    return ResultErrno(setxattr(root.c_str(), "user.cudafs.faults", plan.data(), plan.size(), 0));
  });
  EXPECT_EQ(as_other.value, EPERM);
  EXPECT_TRUE(WriteFile(root + "/still", "fine"));  // no fault was switched on
}

// make-room comes over the share socket, not as a FUSE request: while one
// runs (slowed to seconds by copies that each wait 5 s), the root answers
// (its attributes, a create in it: no lock on it, no FUSE worker held) and
// so does --stats, and the make-room still moves everything, losing
// nothing. Not a listing with attributes: a file being moved is locked for
// one piece, milliseconds at link speed, here the copy's 5 s.
TEST_P(MountFaultTest, TheRootAndItsFilesAnswerWhileAMakeRoomRuns) {
  if (backend() == "host") GTEST_SKIP() << "host memory has no GPU to make room on";
  setenv("CUDAFS_FAULT_INJECTION", "1", 1);
  StartOrSkip(mount_, MountOptions({"size=256m"}));
  unsetenv("CUDAFS_FAULT_INJECTION");
  if (HasFatalFailure() || IsSkipped()) return;
  const std::string root = mount_.path();
  const auto stats_of = [&root] {  // as `cudafs --stats` prints them
    return ParseStats(RunCommand({kBinary, "--stats", "--all", root}).out);
  };
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(WriteFile(root + "/f" + std::to_string(i), RandomBytes(kMiB, i)));
  }
  ASSERT_TRUE(Faults("delay=5000,ops=copy"));
  const pid_t make_room = fork();
  ASSERT_GE(make_room, 0);
  if (make_room == 0) {
    execl(kBinary, kBinary, "--make-room", root.c_str(), "all", static_cast<char*>(nullptr));
    _exit(127);
  }
  // The make-room has asked once the daemon counts it; then it is at least
  // in its first copy, 5 s long.
  const bool asked = Eventually([&] { return MountStats(root)["make_room_calls"] == "1"; });
  struct stat st = {};
  const int stat_result = stat(root.c_str(), &st);
  const int created = open((root + "/new").c_str(), O_CREAT | O_WRONLY, 0644);
  const int create_error = errno;
  if (created >= 0) close(created);
  // The files being moved answer too (their copy holds their lock shared),
  // and so a listing, which asks each entry's attributes (READDIRPLUS).
  int stated = 0;
  for (int i = 0; i < 4; ++i) {
    struct stat file = {};
    if (stat((root + "/f" + std::to_string(i)).c_str(), &file) == 0 && file.st_size == kMiB) {
      ++stated;
    }
  }
  size_t listed = 0;
  if (DIR* dir = opendir(root.c_str())) {
    while (const dirent* entry = readdir(dir)) listed += entry->d_name[0] != '.';
    closedir(dir);
  }
  const std::map<std::string, std::string> stats = stats_of();
  int status = 0;
  const pid_t still = waitpid(make_room, &status, WNOHANG);
  const std::optional<int> done = WaitForChild(make_room, std::chrono::seconds(120));
  ASSERT_TRUE(asked) << "the make-room never reached the daemon";
  EXPECT_EQ(still, 0) << "the make-room ended first: the root waited for it";
  EXPECT_EQ(stat_result, 0);
  EXPECT_GE(created, 0) << ErrnoName(create_error);
  EXPECT_EQ(stated, 4);
  EXPECT_EQ(listed, 5u);
  EXPECT_EQ(stats.count("moved_out_bytes"), 1u);
  ASSERT_TRUE(done.has_value());
  EXPECT_TRUE(WIFEXITED(*done) && WEXITSTATUS(*done) == 0);
  ASSERT_TRUE(Faults("off"));
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(BytesEqual(ReadStored(root + "/f" + std::to_string(i)).value_or(""),
                           RandomBytes(kMiB, i)));
  }
  EXPECT_NE(stats_of()["moved_out_bytes"], "0");
}

CUDAFS_INSTANTIATE_BACKENDS(MountFaultTest);

}  // namespace
}  // namespace cudafs_test
