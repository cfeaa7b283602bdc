// The cudafs command line, run as a user would: help and version, refusal of
// bad arguments (exit 2, one line naming the culprit, nothing mounted), the
// daemon and foreground modes, mount options as seen through statvfs, stat
// and /proc/self/mountinfo, backend selection, and mounting from fstab
// through mount(8) and mount.fuse3.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
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
#include "tests/support/temp_dir.h"

namespace cudafs_test {

using namespace std::chrono_literals;

namespace {

constexpr int kExitUsage = 2;
constexpr uint64_t kMiB = 1 << 20;
// The host backend reserves its arena in granules of this size.
constexpr uint64_t kHostGranule = 2 * kMiB;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  std::string line;
  while (std::getline(stream, line)) lines.push_back(line);
  return lines;
}

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// A fresh directory to mount on. On destruction, whatever got mounted there
// is unmounted (so a test that fails half-way leaves nothing behind), its
// daemon waited for, and the directory removed.
class ScratchDir {
 public:
  ScratchDir() : dir_("/tmp/cudafs-cli-") {}
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    if (path().empty()) return;
    // A mount that stays keeps its files.
    if (!UnmountAndWait(path(), FindDaemon(path()))) dir_.Keep();
  }
  const std::string& path() const { return dir_.path(); }

 private:
  TempDir dir_;
};

// Neither a mount nor a daemon for `mountpoint` exists (a failed daemon may
// take a moment to exit).
testing::AssertionResult NothingMounted(const std::string& mountpoint) {
  if (IsMounted(mountpoint)) {
    return testing::AssertionFailure() << "something is mounted on " << mountpoint;
  }
  if (!Eventually([&] { return !FindDaemon(mountpoint).has_value(); }, 5s)) {
    return testing::AssertionFailure() << "a cudafs process for " << mountpoint << " is running";
  }
  return testing::AssertionSuccess();
}

// `argv` exits with `exit_code`, prints one line on stderr that names
// `culprit`, and nothing gets mounted on `mountpoint`.
testing::AssertionResult Refused(const std::vector<std::string>& argv, int exit_code,
                                 const std::string& culprit, const std::string& mountpoint) {
  const CommandResult result = RunCommand(argv, 60s);
  const std::string command = Join(argv, " ");
  if (result.exit_code != exit_code) {
    return testing::AssertionFailure() << "`" << command << "` exited " << result.exit_code
                                       << ", expected " << exit_code << "; stderr:\n"
                                       << result.err;
  }
  const std::string error = FirstLine(result.err);
  if (Lines(result.err).size() != 1 || !error.starts_with("cudafs: ") ||
      error.find(culprit) == std::string::npos) {
    return testing::AssertionFailure() << "`" << command << "`: stderr should be one line "
                                       << "saying \"cudafs: ...\" and naming " << culprit
                                       << "; stderr:\n" << result.err;
  }
  if (!result.out.empty()) {
    return testing::AssertionFailure() << "`" << command << "` printed on stdout: " << result.out;
  }
  if (!mountpoint.empty()) return NothingMounted(mountpoint);
  return testing::AssertionSuccess();
}

// fusermount3 -u; retried for a while, since any process that happens to
// stat the mount at that moment (df does, for every mount) makes it EBUSY.
// Where fusermount3 is not installed (the GPU machine has no fuse3
// package), root unmounts with umount(8).
testing::AssertionResult UnmountNow(const std::string& mountpoint) {
  CommandResult result;
  std::vector<std::string> command = {"fusermount3", "-u", mountpoint};
  for (int attempt = 0; attempt < 50; ++attempt) {
    result = RunCommand(command);
    if (result.exit_code == 0) return testing::AssertionSuccess();
    if (result.exit_code == 127) {  // not found
      command = {"umount", mountpoint};
      continue;
    }
    std::this_thread::sleep_for(100ms);
  }
  return testing::AssertionFailure() << command[0] << " " << mountpoint << " exited "
                                     << result.exit_code << ": " << result.err;
}

bool HaveGpu() {
  static const bool have_gpu = RunCommand({kBinary, "--list-devices"}, 60s).exit_code == 0;
  return have_gpu;
}

// Skips tests that start cudafs where it cannot (see BackendTest).
#define SKIP_UNLESS_CAN_MOUNT()                                                        \
  do {                                                                                 \
    if (TestDirFromEnv()) GTEST_SKIP() << "needs a cudafs mount (CUDAFS_TEST_DIR is set)"; \
    if (const auto why = WhyCannotMount("host")) GTEST_SKIP() << *why;                 \
  } while (0)

// ---------------------------------------------------------------------------
// Arguments that do not mount

TEST(CliTest, HelpDescribesUsageAndOptions) {
  for (const char* flag : {"--help", "-h"}) {
    SCOPED_TRACE(flag);
    const CommandResult result = RunCommand({kBinary, flag});
    EXPECT_EQ(result.exit_code, 0) << result.err;
    EXPECT_EQ(result.err, "");
    EXPECT_TRUE(result.out.starts_with("usage: cudafs [SOURCE] MOUNTPOINT")) << result.out;
    for (const char* option : {"size=", "nr_inodes=", "mode=", "uid=", "gid=", "backend=",
                               "device=", "min_block=", "allow_other", "-f", "--version"}) {
      EXPECT_NE(result.out.find(option), std::string::npos) << "help does not mention " << option;
    }
  }
  // Once help is asked for, the rest of the line does not matter.
  const CommandResult with_junk = RunCommand({kBinary, "--help", "/nonexistent", "-o", "bogus"});
  EXPECT_EQ(with_junk.exit_code, 0) << with_junk.err;
}

TEST(CliTest, VersionPrintsVersion) {
  const CommandResult long_form = RunCommand({kBinary, "--version"});
  EXPECT_EQ(long_form.exit_code, 0) << long_form.err;
  // Every build drives CUDA (alloc/devices/cuda_api.h): the line says from
  // which driver on.
  EXPECT_TRUE(std::regex_search(
      long_form.out,
      std::regex(
          R"(^cudafs [0-9]+\.[0-9]+\.[0-9]+ \(libfuse [0-9.]+, CUDA driver API [0-9]+\.[0-9]\+\)\n$)")))
      << long_form.out;
  EXPECT_EQ(Lines(long_form.out).size(), 1u) << long_form.out;
  const CommandResult short_form = RunCommand({kBinary, "-V"});
  EXPECT_EQ(short_form.exit_code, 0) << short_form.err;
  EXPECT_EQ(short_form.out, long_form.out);
}

// Without a GPU (CI), --list-devices says why there is none (no driver, no
// device), never that the binary cannot drive one, and that mounts will
// use host memory, in one line.
TEST(CliTest, ListDevicesSaysWhyThereIsNoGpu) {
  const CommandResult result = RunCommand({kBinary, "--list-devices"}, 60s);
  if (result.exit_code == 0) GTEST_SKIP() << "a GPU is here:\n" << result.out;
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(Lines(result.err).size(), 1u) << result.err;
  EXPECT_EQ(result.err.find("built without"), std::string::npos) << result.err;
  EXPECT_TRUE(std::regex_search(result.err, std::regex("libcuda\\.so\\.1|NVIDIA driver|cuInit")))
      << result.err;
  EXPECT_NE(result.err.find("mounts will keep file data in host memory"), std::string::npos)
      << result.err;
}

TEST(CliTest, UnknownOptionsAreRefused) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  EXPECT_TRUE(Refused({kBinary, dir.path(), "-o", "bogus_option"}, kExitUsage, "bogus_option",
                      dir.path()));
  EXPECT_TRUE(Refused({kBinary, dir.path(), "-o", "size=64m,frobnicate=3"}, kExitUsage,
                      "frobnicate", dir.path()));
  EXPECT_TRUE(Refused({kBinary, dir.path(), "--frobnicate"}, kExitUsage, "--frobnicate",
                      dir.path()));
  EXPECT_TRUE(Refused({kBinary, dir.path(), "-x"}, kExitUsage, "-x", dir.path()));
  // Flags take no value.
  EXPECT_TRUE(Refused({kBinary, dir.path(), "-o", "ro=1"}, kExitUsage, "ro", dir.path()));
  // The type is fixed.
  EXPECT_TRUE(Refused({kBinary, dir.path(), "-o", "subtype=other"}, kExitUsage, "subtype",
                      dir.path()));
  EXPECT_TRUE(Refused({kBinary, dir.path(), "-o"}, kExitUsage, "-o", dir.path()));
}

TEST(CliTest, MalformedValuesAreRefused) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"size=abc", "size="},
      {"size=0", "size="},
      {"size=12x", "size="},
      {"size=-1", "size="},
      {"size=1.5g", "size="},
      {"size=", "size="},
      {"size", "size="},
      {"size=0%", "size="},
      {"size=16e", "size="},
      {"size=abc%", "size="},
      {"size=99999999999e", "size="},
      {"nr_inodes=-1", "nr_inodes="},
      {"nr_inodes=many", "nr_inodes="},
      {"mode=999", "mode="},
      {"mode=17777", "mode="},
      {"mode=rwx", "mode="},
      {"uid=notanumber", "uid="},
      {"uid=-1", "uid="},
      {"uid=4294967295", "uid="},
      {"gid=wheel", "gid="},
      {"backend=gpu", "backend="},
      {"backend=", "backend="},
      {"device=gpu0", "device="},
      {"min_block=3000", "min_block="},
      {"min_block=2k", "min_block="},
      {"min_block=2g", "min_block="},
      {"min_block=0", "min_block="},
      {"fsname=", "fsname="},
      {"cache=lots", "cache="},
      {"cache=-1", "cache="},
      {"uring=yes", "uring="},
      {"uring=", "uring="},
      {"uring_depth=0", "uring_depth="},
      {"uring_depth=65", "uring_depth="},
      {"uring_depth=four", "uring_depth="},
      {"max_request=3m", "max_request="},
      {"max_request=64k", "max_request="},
  };
  for (const auto& [option, culprit] : cases) {
    SCOPED_TRACE(option);
    EXPECT_TRUE(Refused({kBinary, dir.path(), "-o", "backend=host," + option}, kExitUsage, culprit,
                        dir.path()));
  }
}

// Like reserve=, device= means GPUs: said where there are none, it is
// refused, not ignored.
TEST(CliTest, DeviceWithoutAGpuBackendIsRefused) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  for (const char* options : {"backend=host,device=0", "backend=null,device=all"}) {
    SCOPED_TRACE(options);
    EXPECT_TRUE(Refused({kBinary, dir.path(), "-o", options}, kExitUsage,
                        "device= picks GPUs: this backend has no GPU", dir.path()));
  }
}

TEST(CliTest, SpillWithoutAGpuBackendIsRefused) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  for (const char* options : {"backend=host,spill=1g", "backend=null,spill=10%"}) {
    SCOPED_TRACE(options);
    EXPECT_TRUE(Refused({kBinary, dir.path(), "-o", options}, kExitUsage,
                        "spill= is host memory for data moved off the GPUs", dir.path()));
  }
}

TEST(CliTest, GpuIdleWithoutAGpuBackendIsRefused) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  for (const char* options : {"backend=host,gpu_idle=2", "backend=null,gpu_idle=never"}) {
    SCOPED_TRACE(options);
    EXPECT_TRUE(Refused({kBinary, dir.path(), "-o", options}, kExitUsage,
                        "gpu_idle= releases a GPU's context: this backend has no GPU",
                        dir.path()));
  }
}

TEST(CliTest, MissingMountpointIsRefused) {
  EXPECT_TRUE(Refused({kBinary}, kExitUsage, "MOUNTPOINT", ""));
  EXPECT_TRUE(Refused({kBinary, "-o", "backend=host"}, kExitUsage, "MOUNTPOINT", ""));
  EXPECT_TRUE(Refused({kBinary, "-f"}, kExitUsage, "MOUNTPOINT", ""));
  // One pointer to --help, not two.
  EXPECT_EQ(RunCommand({kBinary}).err, "cudafs: missing MOUNTPOINT (see cudafs --help)\n");
}

// Refused before libfuse tries (the kernel's EINVAL came with a second line).
TEST(CliTest, EmptySourceIsRefused) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::vector<std::string> argv = {kBinary, "", dir.path(), "-o", "backend=host,size=64m"};
  EXPECT_TRUE(Refused(argv, kExitUsage, "SOURCE", dir.path()));
  EXPECT_EQ(RunCommand(argv, 60s).err,
            "cudafs: empty SOURCE: name one, or leave it out for \"cudafs\" (see cudafs --help)\n");
}

TEST(CliTest, ExtraArgumentIsRefused) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  EXPECT_TRUE(Refused({kBinary, "src", dir.path(), "surplus"}, kExitUsage, "surplus", dir.path()));
}

TEST(CliTest, UnusableMountpointIsRefused) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string missing = dir.path() + "/does-not-exist";
  const CommandResult result = RunCommand({kBinary, missing, "-o", "backend=host"}, 60s);
  EXPECT_NE(result.exit_code, 0);
  EXPECT_EQ(Lines(result.err).size(), 1u) << result.err;
  EXPECT_NE(result.err.find(missing), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(strerror(ENOENT)), std::string::npos) << result.err;
  EXPECT_TRUE(NothingMounted(missing));

  const std::string file = dir.path() + "/a-file";
  ASSERT_TRUE(WriteFile(file, "x"));
  const CommandResult on_file = RunCommand({kBinary, file, "-o", "backend=host"}, 60s);
  EXPECT_NE(on_file.exit_code, 0);
  EXPECT_EQ(Lines(on_file.err).size(), 1u) << on_file.err;
  EXPECT_NE(on_file.err.find(file), std::string::npos) << on_file.err;
  EXPECT_NE(on_file.err.find("not a directory"), std::string::npos) << on_file.err;
  EXPECT_TRUE(NothingMounted(file));
}

// ---------------------------------------------------------------------------
// Backend selection

TEST(CliTest, CudaBackendWithoutGpuIsRefused) {
  if (HaveGpu()) GTEST_SKIP() << "this machine has a usable GPU";
  if (TestDirFromEnv()) GTEST_SKIP() << "needs a cudafs mount (CUDAFS_TEST_DIR is set)";
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const CommandResult result = RunCommand({kBinary, dir.path(), "-o", "backend=cuda"}, 60s);
  EXPECT_EQ(result.exit_code, kExitUsage) << result.err;
  ASSERT_EQ(Lines(result.err).size(), 1u) << result.err;
  EXPECT_TRUE(result.err.starts_with("cudafs: ")) << result.err;
  EXPECT_GT(result.err.size(), std::string("cudafs: \n").size()) << "no reason given";
  EXPECT_TRUE(NothingMounted(dir.path()));
}

TEST(CliTest, AutoBackendFallsBackToHostMemoryWithNotice) {
  SKIP_UNLESS_CAN_MOUNT();
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const CommandResult result =
      RunCommand({kBinary, dir.path(), "-o", "backend=auto,size=64m"}, 60s);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  ASSERT_TRUE(IsMounted(dir.path()));
  if (HaveGpu()) {
    EXPECT_EQ(result.err, "") << "the GPU was usable: no notice expected";
  } else {
    EXPECT_EQ(Lines(result.err).size(), 1u) << result.err;
    EXPECT_TRUE(result.err.starts_with("cudafs: ")) << result.err;
    EXPECT_NE(result.err.find("host memory"), std::string::npos) << result.err;
  }
  const std::string file = dir.path() + "/file";
  const std::string data = RandomBytes(3 * kMiB + 5, 7);
  ASSERT_TRUE(WriteFile(file, data));
  const std::optional<std::string> read_back = ReadFile(file);
  ASSERT_TRUE(read_back.has_value());
  EXPECT_TRUE(BytesEqual(*read_back, data));
}

// backend=auto without a GPU mounts in host memory, and says which GPU
// options that leaves without effect rather than taking them in silence.
TEST(CliTest, AutoBackendInHostMemoryNamesTheGpuOptionsItIgnores) {
  SKIP_UNLESS_CAN_MOUNT();
  if (HaveGpu()) GTEST_SKIP() << "this machine has a usable GPU";
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const CommandResult result = RunCommand(
      {kBinary, dir.path(), "-o", "backend=auto,size=64m,reserve=1g,spill_ready=8m"}, 60s);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  ASSERT_TRUE(IsMounted(dir.path()));
  const std::vector<std::string> lines = Lines(result.err);
  ASSERT_EQ(lines.size(), 2u) << result.err;
  EXPECT_NE(lines[0].find("host memory"), std::string::npos) << result.err;
  EXPECT_EQ(lines[1],
            "cudafs: reserve=, spill_ready= have no effect: without a GPU the files are in host "
            "memory");
  ASSERT_TRUE(WriteFile(dir.path() + "/file", "still works"));
  EXPECT_EQ(ReadFile(dir.path() + "/file"), "still works");
}

// ---------------------------------------------------------------------------
// Mounting, once per backend

class CliMountTest : public BackendTest {
 protected:
  // Runs `cudafs [source] MOUNTPOINT -o backend=...,extra` on `dir`.
  CommandResult MountOn(const ScratchDir& dir, const std::vector<std::string>& extra,
                        const std::string& source = "") {
    std::vector<std::string> argv = {kBinary};
    if (!source.empty()) argv.push_back(source);
    argv.insert(argv.end(), {dir.path(), "-o", Join(MountOptions(extra), ",")});
    return RunCommand(argv, 60s);
  }

  // Capacity in bytes as statvfs reports it.
  static uint64_t CapacityBytes(const struct statvfs& st) {
    return uint64_t{st.f_blocks} * st.f_frsize;
  }
};

TEST_P(CliMountTest, DaemonizesOnceTheMountIsReady) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const CommandResult result = MountOn(dir, {"size=64m"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(result.err, "");
  // No waiting: the command returned only once the mount was in place.
  const std::optional<MountEntry> entry = FindMount(dir.path());
  ASSERT_TRUE(entry.has_value()) << "nothing mounted right after cudafs exited";
  EXPECT_EQ(entry->fstype, "fuse.cudafs");
  const std::optional<pid_t> daemon = FindDaemon(dir.path());
  ASSERT_TRUE(daemon.has_value()) << "no daemon serves the mount";
  EXPECT_TRUE(ProcessAlive(*daemon));
  // Detached: its own session, standard streams on /dev/null.
  EXPECT_NE(getsid(*daemon), getsid(0));
  char target[PATH_MAX] = {};
  const std::string stdout_link = "/proc/" + std::to_string(*daemon) + "/fd/1";
  ASSERT_SYS_OK(readlink(stdout_link.c_str(), target, sizeof target - 1));
  EXPECT_STREQ(target, "/dev/null");

  // It serves requests and keeps running.
  ASSERT_TRUE(WriteFile(dir.path() + "/file", "served\n"));
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(ProcessAlive(*daemon));
  EXPECT_EQ(ReadFile(dir.path() + "/file"), "served\n");

  // Unmounting ends it.
  ASSERT_TRUE(UnmountNow(dir.path()));
  EXPECT_TRUE(Eventually([&] { return !ProcessAlive(*daemon); }, 10s));
}

// Runs `cudafs MOUNTPOINT -f -o OPTIONS` in a child writing to `output`.
pid_t StartInForeground(const std::string& mountpoint, const std::vector<std::string>& options,
                        int output) {
  const std::string joined = Join(options, ",");
  const pid_t child = fork();
  if (child == 0) {
    dup2(output, 1);
    dup2(output, 2);
    execl(kBinary, kBinary, mountpoint.c_str(), "-f", "-o", joined.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  return child;
}

TEST_P(CliMountTest, ForegroundServesUntilUnmounted) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  Fd output(memfd_create("cudafs-output", MFD_CLOEXEC));
  const pid_t child = StartInForeground(dir.path(), MountOptions({"size=64m"}), output.get());
  ASSERT_GT(child, 0);
  const bool mounted = Eventually([&] { return IsMounted(dir.path()); }, 60s);
  if (!mounted) {
    kill(child, SIGTERM);
    WaitForChild(child, 10s);
    FAIL() << "cudafs -f did not mount; output:\n" << ReadWholeFd(output.get());
  }
  // The process we started is the server; it did not fork away.
  EXPECT_EQ(FindDaemon(dir.path()), child);
  EXPECT_EQ(waitpid(child, nullptr, WNOHANG), 0) << "cudafs -f exited while mounted";
  ASSERT_TRUE(WriteFile(dir.path() + "/file", "foreground\n"));
  EXPECT_EQ(ReadFile(dir.path() + "/file"), "foreground\n");

  ASSERT_TRUE(UnmountNow(dir.path()));
  const std::optional<int> status = WaitForChild(child, 10s);
  ASSERT_TRUE(status.has_value()) << "cudafs -f still ran 10 s after the unmount";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << "wait status " << *status << "; output:\n" << ReadWholeFd(output.get());
}

TEST_P(CliMountTest, SourceShowsInMountinfoAndDf) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const CommandResult result = MountOn(dir, {"size=64m"}, "my-gpu-files");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::optional<MountEntry> entry = FindMount(dir.path());
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->source, "my-gpu-files");
  const CommandResult df = RunCommand({"df", "-P", dir.path()});
  ASSERT_EQ(df.exit_code, 0) << df.err;
  const std::vector<std::string> lines = Lines(df.out);
  ASSERT_EQ(lines.size(), 2u) << df.out;
  EXPECT_TRUE(lines[1].starts_with("my-gpu-files ")) << df.out;
  EXPECT_TRUE(lines[1].ends_with(" " + dir.path())) << df.out;
}

TEST_P(CliMountTest, DefaultSourceIsCudafs) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const CommandResult result = MountOn(dir, {"size=64m"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::optional<MountEntry> entry = FindMount(dir.path());
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->source, "cudafs");
}

TEST_P(CliMountTest, FsnameOverridesSource) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const CommandResult result = MountOn(dir, {"fsname=from-option", "size=64m"}, "positional");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::optional<MountEntry> entry = FindMount(dir.path());
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->source, "from-option");
}

// SOURCE (and fsname=, and the first field of an fstab line) is one name:
// commas in it must not add mount options or change the type.
TEST_P(CliMountTest, SourceCannotAddMountOptions) {
  for (const std::string source : {"x,subtype=evil", "x,allow_other", "x,dev,suid", "x\\,dev"}) {
    SCOPED_TRACE(source);
    ScratchDir dir;
    ASSERT_FALSE(dir.path().empty());
    // Not MountOptions(): that adds allow_other, one of the options to keep out
    // (as root's mounts imply it unless told noallow_other).
    const CommandResult result = RunCommand(
        {kBinary, source, dir.path(), "-o", "backend=" + backend() + ",size=64m,noallow_other"},
        60s);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const std::optional<MountEntry> entry = FindMount(dir.path());
    ASSERT_TRUE(entry.has_value());
    EXPECT_EQ(entry->fstype, "fuse.cudafs");
    EXPECT_EQ(entry->source, source);
    EXPECT_NE(entry->options.find("nosuid"), std::string::npos) << entry->options;
    EXPECT_NE(entry->options.find("nodev"), std::string::npos) << entry->options;
    EXPECT_EQ(entry->super_options.find("allow_other"), std::string::npos)
        << entry->super_options;
    EXPECT_TRUE(UnmountNow(dir.path()));
  }
}

TEST_P(CliMountTest, SizeSetsCapacityAndDefaultInodeCount) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const CommandResult result = MountOn(dir, {"size=64m"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::optional<struct statvfs> st = StatFs(dir.path());
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(CapacityBytes(*st), 64 * kMiB);
  EXPECT_EQ(st->f_frsize, 4096u) << "default min_block";
  // --help: one inode per 4 KiB of size by default.
  EXPECT_EQ(st->f_files, 64 * kMiB / 4096);
}

// size= is a limit, as tmpfs's: one past the device's memory (which tmpfs
// takes of RAM) mounts, and df shows the device's memory, all it can hold.
TEST_P(CliMountTest, SizePastTheDeviceShowsTheDevice) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::vector<uint64_t> capacities;
  for (const char* size : {"size=100%", "size=150%", "size=99999t", "size=1e"}) {
    SCOPED_TRACE(size);
    std::vector<std::string> options = {size};
    if (backend() != "host") options.push_back("device=0");
    const CommandResult result = MountOn(dir, options);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const std::optional<struct statvfs> st = StatFs(dir.path());
    ASSERT_TRUE(st.has_value());
    capacities.push_back(CapacityBytes(*st));
    ASSERT_TRUE(UnmountNow(dir.path()));
  }
  for (const uint64_t capacity : capacities) EXPECT_EQ(capacity, capacities[0]);
}

TEST_P(CliMountTest, SizeAsPercentageOfDeviceMemory) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  // Of GPU 0 alone (device=all would make it of the sum); host memory has
  // no devices to name.
  std::vector<std::string> options = {"size=1%"};
  if (backend() != "host") options.push_back("device=0");
  const CommandResult result = MountOn(dir, options);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::optional<struct statvfs> st = StatFs(dir.path());
  ASSERT_TRUE(st.has_value());
  const uint64_t capacity = CapacityBytes(*st);
  if (backend() == "host") {
    const uint64_t memory =
        uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE));
    const uint64_t expected = memory / 100;
    // Rounded up to the backend's granule, down to whole blocks.
    EXPECT_GE(capacity + st->f_frsize, expected);
    EXPECT_LE(capacity, expected + kHostGranule);
  } else {
    // The GPU's memory as --list-devices reports it: TOTAL MiB and FREE MiB
    // end the line of device 0. The percentage may apply to either.
    const CommandResult devices = RunCommand({kBinary, "--list-devices"}, 60s);
    std::optional<std::pair<double, double>> total_free;
    for (const std::string& line : Lines(devices.out)) {
      std::istringstream fields(line);
      std::vector<std::string> words{std::istream_iterator<std::string>(fields), {}};
      if (words.size() >= 3 && words[0] == "0") {
        total_free = {std::stod(words[words.size() - 2]), std::stod(words.back())};
      }
    }
    ASSERT_TRUE(total_free.has_value()) << devices.out;
    const double capacity_mib = double(capacity) / kMiB;
    EXPECT_GE(capacity_mib, total_free->second / 100 * 0.9) << devices.out;
    EXPECT_LE(capacity_mib, total_free->first / 100 * 1.1 + 2) << devices.out;
  }
}

TEST_P(CliMountTest, MinBlockSetsBlockSize) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const CommandResult result = MountOn(dir, {"size=64m", "min_block=64k"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::optional<struct statvfs> st = StatFs(dir.path());
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->f_frsize, 64u << 10);
  EXPECT_EQ(CapacityBytes(*st), 64 * kMiB);
}

TEST_P(CliMountTest, NrInodesLimitsFiles) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const CommandResult result = MountOn(dir, {"size=64m", "nr_inodes=50"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::optional<struct statvfs> st = StatFs(dir.path());
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->f_files, 50u);
  ASSERT_GT(st->f_ffree, 0u);
  ASSERT_LT(st->f_ffree, 50u) << "the root directory is an inode too";
  // Exactly the free inodes can be created, then ENOSPC.
  for (uint64_t i = 0; i < st->f_ffree; ++i) {
    Fd fd(open((dir.path() + "/f" + std::to_string(i)).c_str(), O_CREAT | O_WRONLY, 0644));
    ASSERT_TRUE(fd.valid()) << "file " << i << " of " << st->f_ffree << ": " << ErrnoName(errno);
  }
  EXPECT_ERRNO(open((dir.path() + "/one-too-many").c_str(), O_CREAT | O_WRONLY, 0644), ENOSPC);
  EXPECT_ERRNO(mkdir((dir.path() + "/dir-too-many").c_str(), 0755), ENOSPC);
}

TEST_P(CliMountTest, RootDirectoryAttributesFromOptions) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const CommandResult result = MountOn(dir, {"size=64m", "mode=0750", "uid=1000", "gid=1001"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::optional<struct stat> st = StatPath(dir.path());
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(S_ISDIR(st->st_mode));
  EXPECT_EQ(st->st_mode & 07777, 0750u);
  EXPECT_EQ(st->st_uid, 1000u);
  EXPECT_EQ(st->st_gid, 1001u);
}

TEST_P(CliMountTest, RootDirectoryDefaults) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const CommandResult result = MountOn(dir, {"size=64m"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::optional<struct stat> st = StatPath(dir.path());
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->st_mode & 07777, 01777u);
  EXPECT_EQ(st->st_uid, getuid());
  EXPECT_EQ(st->st_gid, getgid());
}

TEST_P(CliMountTest, ReadOnlyRefusesWrites) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const CommandResult result = MountOn(dir, {"size=64m", "ro"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::optional<MountEntry> entry = FindMount(dir.path());
  ASSERT_TRUE(entry.has_value());
  EXPECT_TRUE(entry->options.starts_with("ro")) << entry->options;
  const std::optional<struct statvfs> st = StatFs(dir.path());
  ASSERT_TRUE(st.has_value());
  EXPECT_NE(st->f_flag & ST_RDONLY, 0u);
  EXPECT_ERRNO(open((dir.path() + "/file").c_str(), O_CREAT | O_WRONLY, 0644), EROFS);
  EXPECT_ERRNO(mkdir((dir.path() + "/dir").c_str(), 0755), EROFS);
  EXPECT_ERRNO(symlink("target", (dir.path() + "/link").c_str()), EROFS);
  EXPECT_ERRNO(chmod(dir.path().c_str(), 0700), EROFS);
  EXPECT_TRUE(ListDir(dir.path()).has_value());
}

TEST_P(CliMountTest, OptionsMayComeAnywhereAndRepeat) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  // mount.fuse3 puts options last; people put them first.
  const CommandResult result =
      RunCommand({kBinary, "-o", "size=32m", "-omode=0700", dir.path(), "-o",
                  Join(MountOptions({"nr_inodes=100"}), ",")},
                 60s);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::optional<struct statvfs> st = StatFs(dir.path());
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(CapacityBytes(*st), 32 * kMiB);
  EXPECT_EQ(st->f_files, 100u);
  const std::optional<struct stat> root = StatPath(dir.path());
  ASSERT_TRUE(root.has_value());
  EXPECT_EQ(root->st_mode & 07777, 0700u);
}

// Pages of `path` in the kernel's page cache (mincore on an untouched
// mapping reports residency without faulting anything in).
size_t CachedPages(const std::string& path, size_t size) {
  Fd fd(open(path.c_str(), O_RDONLY));
  if (!fd.valid()) return SIZE_MAX;
  void* map = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (map == MAP_FAILED) return SIZE_MAX;
  const size_t pages = (size + 4095) / 4096;
  std::vector<unsigned char> resident(pages);
  size_t cached = SIZE_MAX;
  if (mincore(map, size, resident.data()) == 0) {
    cached = std::count_if(resident.begin(), resident.end(), [](unsigned char r) { return r & 1; });
  }
  munmap(map, size);
  return cached;
}

// Direct I/O is the default where shared mmap of direct-I/O files works
// (libfuse >= 3.18 and the kernel offering FUSE_DIRECT_IO_ALLOW_MMAP):
// written data then takes no page-cache copy. nodirect_io keeps it.
TEST_P(CliMountTest, DefaultCachingFollowsDirectIoMmapSupport) {
  // "cudafs 0.1.0 (libfuse 3.18.3)"
  const std::string version = RunCommand({kBinary, "--version"}).out;
  const size_t at = version.find("libfuse ");
  int major = 0, minor = 0;
  ASSERT_NE(at, std::string::npos) << version;
  ASSERT_EQ(std::sscanf(version.c_str() + at, "libfuse %d.%d", &major, &minor), 2) << version;
  if (major * 100 + minor < 318) GTEST_SKIP() << "built with libfuse " << major << "." << minor;
  struct utsname kernel;
  int kernel_major = 0, kernel_minor = 0;
  ASSERT_EQ(uname(&kernel), 0);
  std::sscanf(kernel.release, "%d.%d", &kernel_major, &kernel_minor);
  if (kernel_major * 100 + kernel_minor < 606) {
    GTEST_SKIP() << "kernel " << kernel.release << " predates FUSE_DIRECT_IO_ALLOW_MMAP";
  }
  for (const bool cached_mode : {false, true}) {
    SCOPED_TRACE(cached_mode ? "nodirect_io" : "default");
    ScratchDir dir;
    ASSERT_FALSE(dir.path().empty());
    std::vector<std::string> extra = {"size=64m"};
    if (cached_mode) extra.push_back("nodirect_io");
    const CommandResult result = MountOn(dir, extra);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const std::string path = dir.path() + "/data";
    ASSERT_TRUE(WriteFile(path, RandomBytes(kMiB, 5)));
    const size_t cached = CachedPages(path, kMiB);
    ASSERT_NE(cached, SIZE_MAX) << ErrnoName(errno);
    if (cached_mode) {
      EXPECT_GT(cached, 0u) << "nodirect_io should leave written pages cached";
    } else {
      EXPECT_EQ(cached, 0u) << "direct I/O should keep file data out of the page cache";
    }
    ASSERT_TRUE(UnmountNow(dir.path()));
  }
}

TEST_P(CliMountTest, MountedFilesystemStoresData) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const CommandResult result = MountOn(dir, {"size=64m"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "") << "backend=" << backend() << " named explicitly: no notice";
  const std::string data = RandomBytes(5 * kMiB + 123, 11);
  ASSERT_TRUE(WriteFile(dir.path() + "/data", data));
  const std::optional<std::string> read_back = ReadFile(dir.path() + "/data");
  ASSERT_TRUE(read_back.has_value());
  EXPECT_TRUE(BytesEqual(*read_back, data));
}

// -s serves with one thread: slower, but complete.
TEST_P(CliMountTest, SingleThreadedServes) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const CommandResult result =
      RunCommand({kBinary, dir.path(), "-s", "-o", Join(MountOptions({"size=64m"}), ",")}, 60s);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string data = RandomBytes(2 * kMiB + 7, 13);
  ASSERT_TRUE(WriteFile(dir.path() + "/data", data));
  ASSERT_SYS_OK(mkdir((dir.path() + "/dir").c_str(), 0755));
  ASSERT_SYS_OK(rename((dir.path() + "/data").c_str(), (dir.path() + "/dir/data").c_str()));
  const std::optional<std::string> read_back = ReadFile(dir.path() + "/dir/data");
  ASSERT_TRUE(read_back.has_value());
  EXPECT_TRUE(BytesEqual(*read_back, data));
}

// SIGINT, SIGTERM and SIGHUP unmount and end the daemon, also while a file
// on the mount is open (the open file is cut off after a grace period, so
// that case is tried once).
TEST_P(CliMountTest, StopSignalsUnmountAndExit) {
  for (const int signal : {SIGTERM, SIGINT, SIGHUP}) {
    for (const bool file_open : {false, true}) {
      if (file_open && signal != SIGTERM) continue;
      SCOPED_TRACE(std::string(sigabbrev_np(signal)) + (file_open ? " with a file open" : ""));
      ScratchDir dir;
      ASSERT_FALSE(dir.path().empty());
      const CommandResult result = MountOn(dir, {"size=64m"});
      ASSERT_EQ(result.exit_code, 0) << result.err;
      const std::optional<pid_t> daemon = FindDaemon(dir.path());
      ASSERT_TRUE(daemon.has_value());
      Fd open_file;
      if (file_open) {
        open_file.Reset(open((dir.path() + "/held").c_str(), O_CREAT | O_RDWR, 0644));
        ASSERT_TRUE(open_file.valid()) << ErrnoName(errno);
      }
      ASSERT_SYS_OK(kill(*daemon, signal));
      EXPECT_TRUE(Eventually([&] { return !ProcessAlive(*daemon); }, 15s))
          << "the daemon still runs";
      EXPECT_FALSE(IsMounted(dir.path()));
    }
  }
}

// Contents are volatile like tmpfs; what a crash must leave is a mount
// that says so (ENOTCONN), that umount clears, and a path that mounts again.
TEST_P(CliMountTest, KilledDaemonLeavesAMountThatUnmountsAndRemounts) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  CommandResult result = MountOn(dir, {"size=64m"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  ASSERT_TRUE(WriteFile(dir.path() + "/file", "lost with the daemon\n"));
  const std::optional<pid_t> daemon = FindDaemon(dir.path());
  ASSERT_TRUE(daemon.has_value());
  ASSERT_SYS_OK(kill(*daemon, SIGKILL));
  ASSERT_TRUE(Eventually([&] { return !ProcessAlive(*daemon); }, 10s));

  // A request already queued when the connection went down fails with
  // ECONNABORTED; every later one with ENOTCONN.
  struct stat st;
  EXPECT_TRUE(Eventually(
      [&] { return stat((dir.path() + "/file").c_str(), &st) != 0 && errno == ENOTCONN; }, 5s));
  EXPECT_ERRNO(open((dir.path() + "/new").c_str(), O_CREAT | O_WRONLY, 0644), ENOTCONN);
  ASSERT_TRUE(UnmountNow(dir.path()));
  EXPECT_FALSE(IsMounted(dir.path()));

  result = MountOn(dir, {"size=64m"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_ERRNO(stat((dir.path() + "/file").c_str(), &st), ENOENT);
  ASSERT_TRUE(WriteFile(dir.path() + "/file", "new life\n"));
  EXPECT_EQ(ReadFile(dir.path() + "/file"), "new life\n");
  ASSERT_TRUE(UnmountNow(dir.path()));
}

// A mount by root lets others in as the modes say (allow_other is
// implied); with noallow_other only root gets in, whatever the modes say.
TEST_P(CliMountTest, RootMountsLetOthersInUnlessNoallowOther) {
  auto stat_as_other = [](const std::string& path) {
    return RunAs(kOtherUid, kOtherGid, [&] {
      struct stat st;
      return ResultErrno(stat(path.c_str(), &st));
    });
  };
  for (const bool allow_other : {false, true}) {
    SCOPED_TRACE(allow_other ? "allow_other" : "noallow_other");
    Mount mount;
    std::vector<std::string> options = {"backend=" + backend(), "size=64m", "mode=0777"};
    if (!allow_other) options.push_back("noallow_other");
    ASSERT_TRUE(mount.Start(options));
    const std::string file = mount.path() + "/open-to-all";
    ASSERT_TRUE(WriteFile(file, "x", 0666));
    ASSERT_SYS_OK(chmod(file.c_str(), 0666));
    EXPECT_EQ(stat_as_other(file), Errno{allow_other ? 0 : EACCES});
  }
}

// Every option passed through to libfuse mounts and shows its effect in
// /proc/self/mountinfo (allow_other and ro have tests of their own).
TEST_P(CliMountTest, ForwardedOptionsTakeEffect) {
  const struct {
    const char* option;
    bool super;            // in the filesystem's options, else the mount's
    const char* word;      // looked for among them
    bool present;
  } kCases[] = {
      {"nosuid", false, "nosuid", true}, {"suid", false, "nosuid", false},
      {"nodev", false, "nodev", true},   {"dev", false, "nodev", false},
      {"noexec", false, "noexec", true}, {"exec", false, "noexec", false},
      {"sync", true, "sync", true},      {"async", true, "sync", false},
      {"dirsync", true, "dirsync", true},
      // libfuse lets the kernel admit everyone and turns others away itself.
      {"allow_root", true, "allow_other", true},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.option);
    ScratchDir dir;
    ASSERT_FALSE(dir.path().empty());
    const CommandResult result = RunCommand(
        {kBinary, dir.path(), "-o",
         Join({"backend=" + backend(), "size=64m", "mode=0777", c.option}, ",")},
        60s);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const std::optional<MountEntry> entry = FindMount(dir.path());
    ASSERT_TRUE(entry.has_value()) << "exited 0 but nothing is mounted";
    std::vector<std::string> words;
    std::istringstream list(c.super ? entry->super_options : entry->options);
    for (std::string word; std::getline(list, word, ',');) words.push_back(word);
    EXPECT_EQ((std::find(words.begin(), words.end(), c.word) != words.end()), c.present)
        << (c.super ? entry->super_options : entry->options);
    if (std::string_view(c.option) == "allow_root") {
      // A name never looked up reaches libfuse, which refuses other users.
      const std::string path = dir.path() + "/not-there";
      EXPECT_EQ(RunAs(kOtherUid, kOtherGid, [&] {
                  struct stat st;
                  return ResultErrno(stat(path.c_str(), &st));
                }),
                Errno{EACCES});
      struct stat st;
      EXPECT_ERRNO(stat(path.c_str(), &st), ENOENT);
    }
    EXPECT_TRUE(UnmountNow(dir.path()));
  }
}

// max_read= would mount and then fail the session at init (libfuse wants
// the value from init as well): refused up front instead.
TEST_P(CliMountTest, MaxReadIsRefused) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  EXPECT_TRUE(Refused(
      {kBinary, dir.path(), "-o", Join(MountOptions({"size=64m", "max_read=65536"}), ",")},
      kExitUsage, "max_read=", dir.path()));
}

// Children of `pid` that are zombies.
std::vector<pid_t> ZombieChildren(pid_t pid) {
  std::vector<pid_t> zombies;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return zombies;
  while (const dirent* entry = readdir(proc)) {
    const pid_t child = atoi(entry->d_name);
    if (child <= 0) continue;
    std::ifstream stat_file("/proc/" + std::to_string(child) + "/stat");
    std::string stat;
    if (!std::getline(stat_file, stat)) continue;
    // pid (comm) state ppid ...
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream fields(stat.substr(paren + 2));
    char state = 0;
    pid_t parent = 0;
    fields >> state >> parent;
    if (parent == pid && state == 'Z') zombies.push_back(child);
  }
  closedir(proc);
  return zombies;
}

// auto_unmount: a daemon killed with SIGKILL leaves no mount behind (no
// ENOTCONN). As root the watcher of fs/daemon/abandoned_mount_watcher.h
// does it, whatever fusermount3 the machine has.
TEST_P(CliMountTest, AutoUnmountUnmountsAKilledDaemon) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::vector<std::string> argv = {
      kBinary, dir.path(), "-o", Join(MountOptions({"size=64m", "auto_unmount"}), ",")};
  const CommandResult result = RunCommand(argv, 60s);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  ASSERT_TRUE(IsMounted(dir.path()));
  const std::optional<pid_t> daemon = FindDaemon(dir.path());
  ASSERT_TRUE(daemon.has_value());
  ASSERT_TRUE(WriteFile(dir.path() + "/file", "x"));
  // A fusermount3 that gave up at once would linger as a zombie.
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(ZombieChildren(*daemon), std::vector<pid_t>{});
  ASSERT_SYS_OK(kill(*daemon, SIGKILL));
  ASSERT_TRUE(Eventually([&] { return !ProcessAlive(*daemon); }, 10s));
  EXPECT_TRUE(Eventually([&] { return !IsMounted(dir.path()); }, 10s))
      << "still mounted after the daemon died";
  struct stat st;
  EXPECT_SYS_OK(stat(dir.path().c_str(), &st));
  EXPECT_ERRNO(stat((dir.path() + "/file").c_str(), &st), ENOENT);
}

// The watcher unmounts only a dead mount: after a clean unmount, a new
// mount on the same directory stays.
TEST_P(CliMountTest, AutoUnmountLeavesALaterMountAlone) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  for (const char* options : {"size=64m,auto_unmount", "size=64m"}) {
    SCOPED_TRACE(options);
    const std::optional<pid_t> earlier = FindDaemon(dir.path());
    if (earlier) {
      ASSERT_TRUE(UnmountNow(dir.path()));
      ASSERT_TRUE(Eventually([&] { return !ProcessAlive(*earlier); }, 10s));
    }
    const CommandResult result = MountOn(dir, {options});
    ASSERT_EQ(result.exit_code, 0) << result.err;
  }
  // The first mount's watcher has woken by now (its daemon is gone).
  std::this_thread::sleep_for(500ms);
  EXPECT_TRUE(IsMounted(dir.path()));
  EXPECT_TRUE(WriteFile(dir.path() + "/file", "x"));
}

// The children of `pid` named `comm`.
std::vector<pid_t> ChildrenNamed(pid_t pid, const std::string& comm) {
  std::vector<pid_t> children;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string dir = entry.path().string();
    std::ifstream stat_file(dir + "/stat");
    std::string stat;
    if (!std::getline(stat_file, stat)) continue;
    // pid (comm) state ppid ...
    const size_t open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    char state = 0;
    pid_t parent = 0;
    fields >> state >> parent;
    if (parent == pid && stat.substr(open + 1, close - open - 1) == comm) {
      children.push_back(atoi(entry.path().filename().c_str()));
    }
  }
  return children;
}

// Root's watcher shows as `cudafs-unmount MOUNTPOINT`, so that pkill -f
// "cudafs MOUNTPOINT" finds the daemon alone (killing the watcher with it
// left the mount dead).
TEST_P(CliMountTest, AutoUnmountWatcherHasACommandLineOfItsOwn) {
  if (geteuid() != 0) GTEST_SKIP() << "the watcher is root's";
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  ASSERT_EQ(MountOn(dir, {"size=64m", "auto_unmount"}).exit_code, 0);
  const std::optional<pid_t> daemon = FindDaemon(dir.path());
  ASSERT_TRUE(daemon.has_value());
  const std::vector<pid_t> watchers = ChildrenNamed(*daemon, "cudafs-unmount");
  ASSERT_EQ(watchers.size(), 1u);
  std::ifstream cmdline_file("/proc/" + std::to_string(watchers[0]) + "/cmdline");
  std::stringstream cmdline;
  cmdline << cmdline_file.rdbuf();
  EXPECT_EQ(cmdline.str(), "cudafs-unmount" + std::string(1, '\0') + dir.path() + '\0');
  const CommandResult pgrep =
      RunCommand({"pgrep", "-f", std::string(kBinary) + " " + dir.path()});
  EXPECT_EQ(pgrep.out, std::to_string(*daemon) + "\n");
  EXPECT_TRUE(UnmountNow(dir.path()));
}

// Two mounts on one directory: the watcher detaches its own daemon's
// mount, never the other. The top one goes at once; a dead one below
// another cannot be reached until the one above is gone, and then goes.
TEST_P(CliMountTest, AutoUnmountDetachesItsOwnMountOfAStack) {
  if (geteuid() != 0) GTEST_SKIP() << "the watcher is root's";
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  // Each mount has a file named after it, and an nr_inodes= of its own
  // that tells its daemon from the others.
  int mounts = 0;
  const auto mount_and_mark = [&](const std::string& options, const std::string& name) {
    const std::string tag = "nr_inodes=" + std::to_string(1000 + ++mounts);
    const CommandResult result = MountOn(dir, {"size=64m", tag, options});
    std::optional<pid_t> daemon;
    if (result.exit_code != 0 || !WriteFile(dir.path() + "/" + name, name)) return daemon;
    const CommandResult pgrep = RunCommand({"pgrep", "-f", dir.path() + " .*" + tag});
    for (const std::string& pid : Lines(pgrep.out)) {
      std::ifstream comm_file("/proc/" + pid + "/comm");
      std::string comm;
      if (std::getline(comm_file, comm) && comm == "cudafs") daemon = std::stoi(pid);
    }
    return daemon;
  };
  const std::optional<pid_t> lower = mount_and_mark("auto_unmount", "lower");
  ASSERT_TRUE(lower.has_value());
  const std::optional<pid_t> upper = mount_and_mark("auto_unmount", "upper");
  ASSERT_TRUE(upper.has_value());

  ASSERT_SYS_OK(kill(*upper, SIGKILL));
  EXPECT_TRUE(Eventually([&] { return ReadFile(dir.path() + "/lower") == "lower"; }, 10s))
      << "the upper mount's watcher did not uncover the lower mount";
  ASSERT_TRUE(IsMounted(dir.path()));

  // Now the dead one is below: its watcher must leave the live one on top.
  const std::optional<pid_t> top = mount_and_mark("rw", "top");
  ASSERT_TRUE(top.has_value());
  ASSERT_SYS_OK(kill(*lower, SIGKILL));
  ASSERT_TRUE(Eventually([&] { return !ProcessAlive(*lower); }, 10s));
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(ReadFile(dir.path() + "/top"), "top") << "the live mount on top went";
  ASSERT_TRUE(UnmountNow(dir.path()));
  EXPECT_TRUE(Eventually([&] { return !IsMounted(dir.path()); }, 10s))
      << "the dead mount below was left behind";
  struct stat st;
  EXPECT_SYS_OK(stat(dir.path().c_str(), &st));
}

// systemd starts services with a soft limit of 1024 descriptors: the
// daemon raises its soft limit to the hard one.
TEST_P(CliMountTest, OpenFileLimitIsRaisedToTheHardLimit) {
  if (!HaveTool("prlimit")) GTEST_SKIP() << "no prlimit";
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const CommandResult result = RunCommand(
      {"prlimit", "--nofile=128:4096", kBinary, dir.path(), "-o",
       Join(MountOptions({"size=64m"}), ",")},
      60s);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  const std::optional<pid_t> daemon = FindDaemon(dir.path());
  ASSERT_TRUE(daemon.has_value());
  std::ifstream limits("/proc/" + std::to_string(*daemon) + "/limits");
  std::string line;
  while (std::getline(limits, line) && !line.starts_with("Max open files")) {
  }
  std::istringstream fields(line.substr(std::string("Max open files").size()));
  std::string soft, hard;
  fields >> soft >> hard;
  EXPECT_EQ(soft, "4096") << line;
  EXPECT_EQ(hard, "4096") << line;
  EXPECT_TRUE(UnmountNow(dir.path()));
}

// What auto_unmount relies on: fusermount3 unmounts a dead daemon's mount
// only when opening its root fails with ENOTCONN, so that open must reach
// the daemon, however warm the kernel's caches. A stopped daemon shows it:
// the open waits for it.
TEST_P(CliMountTest, OpeningTheRootAlwaysReachesTheDaemon) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const CommandResult result = MountOn(dir, {"size=64m"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::optional<pid_t> daemon = FindDaemon(dir.path());
  ASSERT_TRUE(daemon.has_value());
  for (int i = 0; i < 2; ++i) {  // the second open finds everything cached
    DIR* listing = opendir(dir.path().c_str());
    ASSERT_NE(listing, nullptr) << ErrnoName(errno);
    while (readdir(listing) != nullptr) {
    }
    closedir(listing);
  }
  ASSERT_SYS_OK(kill(*daemon, SIGSTOP));
  ASSERT_TRUE(Eventually([&] { return AllThreadsStopped(*daemon); }, 10s));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int fd = open(dir.path().c_str(), O_RDONLY | O_DIRECTORY);
    _exit(fd >= 0 ? 0 : std::min(errno, 255));
  }
  std::this_thread::sleep_for(500ms);
  int status = 0;
  const pid_t early = waitpid(child, &status, WNOHANG);
  EXPECT_EQ(early, 0) << "the open did not wait for the daemon: it "
                      << (WIFEXITED(status) && WEXITSTATUS(status) == 0
                              ? std::string("succeeded")
                              : "failed with " + ErrnoName(WEXITSTATUS(status)));
  ASSERT_SYS_OK(kill(*daemon, SIGCONT));
  if (early == 0) {
    ASSERT_EQ(waitpid(child, &status, 0), child);
  }
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the open failed: " << ErrnoName(WEXITSTATUS(status));
  EXPECT_TRUE(UnmountNow(dir.path()));
}

TEST_P(CliMountTest, ForegroundExitsZeroOnSigterm) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  Fd output(memfd_create("cudafs-output", MFD_CLOEXEC));
  const pid_t child = StartInForeground(dir.path(), MountOptions({"size=64m"}), output.get());
  ASSERT_GT(child, 0);
  if (!Eventually([&] { return IsMounted(dir.path()); }, 60s)) {
    kill(child, SIGKILL);
    WaitForChild(child, 10s);
    FAIL() << "cudafs -f did not mount; output:\n" << ReadWholeFd(output.get());
  }
  ASSERT_SYS_OK(kill(child, SIGTERM));
  const std::optional<int> status = WaitForChild(child, 15s);
  ASSERT_TRUE(status.has_value()) << "cudafs -f still ran 15 s after SIGTERM";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << "wait status " << *status << "; output:\n" << ReadWholeFd(output.get());
  EXPECT_FALSE(IsMounted(dir.path()));
}

// Refusals that only the daemon can decide, once it knows the device: they
// must still come back as the command's exit status and message.
TEST_P(CliMountTest, SizeBelowMinBlockIsRefused) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  EXPECT_TRUE(Refused(
      {kBinary, dir.path(), "-o", Join(MountOptions({"size=64k", "min_block=1m"}), ",")},
      kExitUsage, "min_block", dir.path()));
}

std::map<std::string, std::string> StatsOf(const std::string& mountpoint) {
  return ParseStats(RunCommand({kBinary, "--stats", "--all", mountpoint}).out);
}

// cudafs --stats prints the transport and the write-back cache's counters;
// small writes stay dirty in the cache until fsync (or the flusher), and
// cache=0 turns the cache off.
TEST_P(CliMountTest, StatsShowTheWriteBackCache) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const CommandResult result = MountOn(dir, {"size=64m", "cache=1m"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::map<std::string, std::string> stats = StatsOf(dir.path());
  EXPECT_EQ(stats["cache_budget_bytes"], std::to_string(kMiB));
  EXPECT_TRUE(stats["transport"] == "io_uring" || stats["transport"] == "/dev/fuse")
      << stats["transport"];
  const std::string data = RandomBytes(3000, 23);
  Fd fd(open((dir.path() + "/small").c_str(), O_CREAT | O_WRONLY, 0644));
  ASSERT_TRUE(fd.valid()) << ErrnoName(errno);
  ASSERT_EQ(write(fd.get(), data.data(), data.size()), static_cast<ssize_t>(data.size()));
  ASSERT_SYS_OK(fsync(fd.get()));
  fd.Reset();
  stats = StatsOf(dir.path());
  EXPECT_EQ(stats["dirty_bytes"], "0") << "fsync returns once the data is in the arena";
  EXPECT_NE(stats["flushed_bytes"], "0");
  const std::optional<std::string> read_back = ReadFile(dir.path() + "/small");
  ASSERT_TRUE(read_back.has_value());
  EXPECT_TRUE(BytesEqual(*read_back, data));
  // Read-only: the counters are not the user's to change.
  EXPECT_ERRNO(setxattr(dir.path().c_str(), "user.cudafs.stats", "1", 1, 0), EPERM);
  // They follow everyone's activity: other users may not read them.
  const std::string root = dir.path();
  EXPECT_EQ(RunAs(kOtherUid, kOtherGid,
                  [&] {
                    char value[4096];
                    return ResultErrno(getxattr(root.c_str(), "user.cudafs.stats", value,
                                                sizeof value));
                  }),
            Errno{EACCES});
  EXPECT_TRUE(UnmountNow(dir.path()));

  ScratchDir uncached;
  ASSERT_FALSE(uncached.path().empty());
  ASSERT_EQ(MountOn(uncached, {"size=64m", "cache=0"}).exit_code, 0);
  EXPECT_EQ(StatsOf(uncached.path())["cache_budget_bytes"], "0");
  EXPECT_TRUE(UnmountNow(uncached.path()));
}

// A counter of a stats reading; -1 where it is missing.
int64_t Counter(const std::map<std::string, std::string>& stats, const std::string& name) {
  const auto it = stats.find(name);
  return it == stats.end() ? -1 : std::stoll(it->second);
}

int64_t Requests(const std::map<std::string, std::string>& stats, const std::string& op) {
  return Counter(stats, "requests_" + op);
}

// --stats counts the requests that reach the daemon, by type, every type
// printed (zeros too) after the other counters. Only counters that no
// attribute timeout or background activity can touch are compared exactly.
TEST_P(CliMountTest, StatsCountRequestsByType) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const CommandResult result = MountOn(dir, {"size=64m"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::vector<std::string> lines =
      Lines(RunCommand({kBinary, "--stats", "--all", dir.path()}).out);
  const auto first_request = std::find_if(lines.begin(), lines.end(), [](const std::string& line) {
    return line.starts_with("requests_");
  });
  ASSERT_NE(first_request, lines.end());
  EXPECT_TRUE(std::all_of(first_request, lines.end(), [](const std::string& line) {
    return line.starts_with("requests_") || line.starts_with("forgotten_inodes ") ||
           line.starts_with("handler_ns_");
  })) << "the request counters come after the others";
  std::map<std::string, std::string> before = ParseStats(Join(lines, "\n"));
  for (const char* op :
       {"init", "lookup", "forget", "batch_forget", "getattr", "setattr", "readlink", "mknod",
        "mkdir", "symlink", "link", "unlink", "rmdir", "rename", "open", "create", "read",
        "write", "fsync", "release", "opendir", "readdir", "readdirplus", "releasedir", "statfs",
        "setxattr", "getxattr", "listxattr", "removexattr", "fallocate", "copy_file_range",
        "lseek"}) {
    EXPECT_GE(Requests(before, op), 0) << "no requests_" << op;
    EXPECT_GE(Counter(before, std::string("handler_ns_") + op), 0) << "no handler_ns_" << op;
  }
  EXPECT_EQ(Requests(before, "init"), 1);
  EXPECT_GT(Counter(before, "handler_ns_init"), 0) << "INIT's handler took no time";
  const std::string root = dir.path();
  const std::string file = root + "/counted";
  // The growth of `op`'s counter from `before` to a new reading, which then
  // becomes `before`.
  auto grown = [&](const std::string& op) {
    const std::map<std::string, std::string> after = MountStats(root);
    const int64_t growth = Requests(after, op) - Requests(before, op);
    before = after;
    return growth;
  };
  // Each reading is itself one GETXATTR, counted in what it reports.
  EXPECT_EQ(grown("getxattr"), 1);

  struct stat st;
  EXPECT_ERRNO(stat(file.c_str(), &st), ENOENT);
  EXPECT_EQ(grown("lookup"), 1) << "a stat of a new name";
  // One CREATE that also opens (no OPEN); the negative entry the stat left
  // may have expired, adding a LOOKUP that is not compared.
  Fd fd(open(file.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644));
  ASSERT_TRUE(fd.valid()) << ErrnoName(errno);
  const std::map<std::string, std::string> created = MountStats(root);
  EXPECT_EQ(Requests(created, "create") - Requests(before, "create"), 1);
  EXPECT_EQ(Requests(created, "open") - Requests(before, "open"), 0);
  before = created;
  const std::string data = RandomBytes(4096, 14);
  ASSERT_EQ(write(fd.get(), data.data(), data.size()), static_cast<ssize_t>(data.size()));
  EXPECT_EQ(grown("write"), 1) << "a 4 KiB write";
  // RELEASE reaches the daemon after close returns.
  fd.Reset();
  const int64_t released = Requests(before, "release");
  EXPECT_TRUE(Eventually([&] { return Requests(MountStats(root), "release") > released; }, 10s));
  EXPECT_EQ(grown("release"), 1);

  // The kernel forgets the unlinked inode, the only one it held besides
  // the root (which it never forgets), in a FORGET or a BATCH_FORGET, as
  // soon as the unlink drops it: maybe before the next reading.
  const std::map<std::string, std::string> held = before;
  ASSERT_SYS_OK(unlink(file.c_str()));
  EXPECT_EQ(grown("unlink"), 1);
  const int64_t forgotten = Counter(held, "forgotten_inodes");
  EXPECT_TRUE(Eventually(
      [&] { return Counter(MountStats(root), "forgotten_inodes") > forgotten; }, 10s));
  const std::map<std::string, std::string> after = MountStats(root);
  EXPECT_EQ(Counter(after, "forgotten_inodes") - forgotten, 1);
  EXPECT_GE(Requests(after, "forget") + Requests(after, "batch_forget") -
                Requests(held, "forget") - Requests(held, "batch_forget"),
            1);
  EXPECT_EQ(Requests(after, "mkdir"), 0) << "nothing made a directory";
  EXPECT_TRUE(UnmountNow(dir.path()));
}

// Whether this build of cudafs on this kernel serves large files with
// direct I/O: libfuse 3.18+ and a kernel that lets direct-I/O files be
// mmapped (6.6+), see FuseContext::direct_io_min.
bool DirectIoAvailable() {
  if (!LibfuseAtLeast(3, 18)) return false;
  struct utsname host;
  if (uname(&host) != 0) return false;
  int major = 0, minor = 0;
  if (std::sscanf(host.release, "%d.%d", &major, &minor) != 2) return false;
  return std::pair(major, minor) >= std::pair(6, 6);
}

// Every change goes through the mount, so the kernel keeps names,
// attributes and small files' pages: what was seen once costs no request
// the second time. Large files bypass the page cache. Listings are asked
// for every time: the kernel's readdir cache can keep a stale one (see
// OpenDirectory in fs/fuse/fuse_dir_ops.cc).
TEST_P(CliMountTest, KernelCachesWhatOnlyThisMountChanges) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const CommandResult result = MountOn(dir, {"size=64m", "direct_io_min=64k"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string root = dir.path();
  const std::string tree = root + "/tree";
  ASSERT_SYS_OK(mkdir(tree.c_str(), 0755));
  const std::string small = RandomBytes(5000, 21);
  const std::string large = RandomBytes(256 << 10, 22);
  for (const char* name : {"a", "b", "c"}) {
    ASSERT_TRUE(WriteFile(tree + "/" + name, small));
  }
  ASSERT_TRUE(WriteFile(tree + "/large", large));
  std::map<std::string, std::string> before = MountStats(root);
  auto grown = [&](std::initializer_list<const char*> ops) {
    const std::map<std::string, std::string> after = MountStats(root);
    int64_t growth = 0;
    for (const char* op : ops) growth += Requests(after, op) - Requests(before, op);
    before = after;
    return growth;
  };
  auto stat_all = [&] {
    for (const char* name : {"a", "b", "c", "large"}) {
      struct stat st;
      ASSERT_SYS_OK(stat((tree + "/" + name).c_str(), &st));
    }
  };
  stat_all();
  grown({});
  stat_all();
  EXPECT_EQ(grown({"lookup", "getattr"}), 0) << "a second stat of each file";

  auto list = [&](int expected) {
    DIR* listing = opendir(tree.c_str());
    ASSERT_NE(listing, nullptr) << ErrnoName(errno);
    int entries = 0;
    while (readdir(listing) != nullptr) ++entries;
    closedir(listing);
    EXPECT_EQ(entries, expected) << "with . and ..";
  };
  list(6);
  grown({});
  list(6);
  EXPECT_GE(grown({"readdir", "readdirplus"}), 1) << "a second listing asks cudafs";

  EXPECT_EQ(ReadFile(tree + "/a"), small);
  grown({});
  EXPECT_EQ(ReadFile(tree + "/a"), small);
  EXPECT_EQ(grown({"read"}), 0) << "a small file read again";
  EXPECT_EQ(ReadFile(tree + "/large"), large);
  grown({});
  EXPECT_EQ(ReadFile(tree + "/large"), large);
  if (DirectIoAvailable()) {
    EXPECT_GE(grown({"read"}), 1) << "a file of direct_io_min bytes or more bypasses the cache";
  }

  // A change through the mount shows at once, cached or not.
  ASSERT_TRUE(WriteFile(tree + "/a", "changed"));
  EXPECT_EQ(ReadFile(tree + "/a"), "changed");
  struct stat st;
  ASSERT_SYS_OK(stat((tree + "/a").c_str(), &st));
  EXPECT_EQ(st.st_size, 7);
  ASSERT_SYS_OK(unlink((tree + "/b").c_str()));
  EXPECT_ERRNO(stat((tree + "/b").c_str(), &st), ENOENT);
  list(5);
  EXPECT_TRUE(UnmountNow(dir.path()));
}

// zero_message_open: after the first OPEN (answered ENOSYS), opening and
// closing an existing file cost no request, and files keep their pages;
// O_TRUNC (a SETATTR then) and files unlinked while open behave as ever.
TEST_P(CliMountTest, ZeroMessageOpenCostsNoRequestAndLosesNothing) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const CommandResult result = MountOn(dir, {"size=64m", "zero_message_open"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string root = dir.path();
  const std::string file = root + "/f";
  const std::string data = RandomBytes(3 << 20, 23);
  ASSERT_TRUE(WriteFile(file, data));
  EXPECT_EQ(ReadFile(file), data);  // the one OPEN, answered ENOSYS
  std::map<std::string, std::string> before = MountStats(root);
  auto grown = [&](const char* op) {
    const std::map<std::string, std::string> after = MountStats(root);
    const int64_t growth = Requests(after, op) - Requests(before, op);
    before = after;
    return growth;
  };
  EXPECT_EQ(ReadFile(file), data);
  EXPECT_EQ(ReadFile(file), data);
  EXPECT_EQ(grown("open"), 0);
  EXPECT_EQ(grown("read"), 0) << "even a 3 MiB file stays in the page cache";
  EXPECT_EQ(grown("release"), 0);

  ASSERT_TRUE(WriteFile(file, "short"));  // O_TRUNC without an OPEN to carry it
  EXPECT_EQ(ReadFile(file), "short");
  struct stat st;
  ASSERT_SYS_OK(stat(file.c_str(), &st));
  EXPECT_EQ(st.st_size, 5);
  Fd held(open(file.c_str(), O_RDONLY));
  ASSERT_TRUE(held.valid()) << ErrnoName(errno);
  ASSERT_SYS_OK(unlink(file.c_str()));
  char buffer[8] = {};
  EXPECT_EQ(pread(held.get(), buffer, sizeof buffer, 0), 5);
  EXPECT_EQ(std::string(buffer, 5), "short");
  held.Reset();
  EXPECT_ERRNO(stat(file.c_str(), &st), ENOENT);
  EXPECT_TRUE(UnmountNow(dir.path()));
}

// --stats alone: one line for people; --json: every counter and the space
// figures for scripts, numbers as numbers.
TEST_P(CliMountTest, StatsSummaryAndJson) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  ASSERT_EQ(MountOn(dir, {"size=64m"}).exit_code, 0);
  ASSERT_TRUE(WriteFile(dir.path() + "/f", RandomBytes(3 << 20, 24)));
  const CommandResult summary = RunCommand({kBinary, "--stats", dir.path()});
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_EQ(Lines(summary.out).size(), 1u) << summary.out;
  EXPECT_NE(summary.out.find(dir.path() + ": 3.0 MiB of 64.0 MiB used (5%), 2 files"),
            std::string::npos)
      << summary.out;
  // A GPU mount names each place its data may be: the GPU, and the host
  // memory it moves data to (spill=).
  EXPECT_NE(summary.out.find(backend() == "cuda" ? ", held: gpu0 " : " held on "),
            std::string::npos)
      << summary.out;
  const CommandResult json = RunShell(
      ShellQuote(kBinary) + " --stats --json " + ShellQuote(dir.path()) +
      " | python3 -c \"import json, sys; d = json.load(sys.stdin); "
      "print(d['size_bytes'], d['used_bytes'] >= 3 << 20, d['files'], "
      "type(d['requests_write']).__name__, d['transport'] in ('io_uring', '/dev/fuse'), "
      "d['device_bytes'] >= 3 << 20)\"");
  EXPECT_EQ(json.out, std::to_string(64 << 20) + " True 2 int True True\n") << json.err;
  EXPECT_TRUE(UnmountNow(dir.path()));
}

// Inode numbers start again with each mount, so a file handle (what an NFS
// client holds) kept from an earlier mount names a file of the new one by
// number: the mount's generation makes the kernel refuse it.
TEST_P(CliMountTest, FileHandlesOfAnEarlierMountAreStale) {
  if (geteuid() != 0) GTEST_SKIP() << "open_by_handle_at needs root";
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  ASSERT_EQ(MountOn(dir, {"size=64m"}).exit_code, 0);
  ASSERT_TRUE(WriteFile(dir.path() + "/old", "old mount"));
  auto handle = std::make_unique<char[]>(sizeof(file_handle) + MAX_HANDLE_SZ);
  auto* h = reinterpret_cast<file_handle*>(handle.get());
  h->handle_bytes = MAX_HANDLE_SZ;
  int mount_id;
  ASSERT_SYS_OK(name_to_handle_at(AT_FDCWD, (dir.path() + "/old").c_str(), h, &mount_id, 0));
  ASSERT_TRUE(UnmountNow(dir.path()));
  ASSERT_EQ(MountOn(dir, {"size=64m"}).exit_code, 0);
  ASSERT_TRUE(WriteFile(dir.path() + "/new", "new mount"));  // the number "old" had
  ASSERT_TRUE(WriteFile("/proc/sys/vm/drop_caches", "2"));
  Fd root(open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  EXPECT_ERRNO(open_by_handle_at(root.get(), h, O_RDONLY | O_CLOEXEC), ESTALE);
  root.Reset();
  EXPECT_TRUE(UnmountNow(dir.path()));
}

// A mount that the user may not enter (noallow_other) is not said to be
// something else.
TEST_P(CliMountTest, StatsOfAMountTheUserMayNotEnterSayPermissionDenied) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run as another user";
  if (!HaveTool("setpriv")) GTEST_SKIP() << "no setpriv";
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  ASSERT_EQ(RunCommand({kBinary, dir.path(), "-o", "backend=" + backend() + ",size=64m,noallow_other"},
                       60s)
                .exit_code,
            0);
  for (const char* format : {"--json", "--all"}) {
    SCOPED_TRACE(format);
    const CommandResult result =
        RunCommand({"setpriv", "--reuid=" + std::to_string(kOtherUid),
                    "--regid=" + std::to_string(kOtherGid), "--clear-groups", kBinary, "--stats",
                    format, dir.path()});
    EXPECT_EQ(result.exit_code, kExitUsage);
    EXPECT_EQ(result.err, "cudafs: " + dir.path() + ": " + strerror(EACCES) + "\n");
  }
  EXPECT_TRUE(UnmountNow(dir.path()));
}

// The write-back cache saves GPU trips; in host memory it is one more copy
// and slower, so there it is off unless cache= asks for it.
TEST_P(CliMountTest, WriteBackCacheByDefaultOnlyOnTheGpu) {
  if (const char* options = getenv("CUDAFS_TEST_MOUNT_OPTIONS");
      options != nullptr && std::string_view(options).find("cache=") != std::string_view::npos) {
    GTEST_SKIP() << "CUDAFS_TEST_MOUNT_OPTIONS sets cache=";
  }
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  ASSERT_EQ(MountOn(dir, {"size=64m"}).exit_code, 0);
  EXPECT_EQ(StatsOf(dir.path())["cache_budget_bytes"],
            backend() == "host" ? "0" : std::to_string(64 * kMiB));
  const CommandResult summary = RunCommand({kBinary, "--stats", dir.path()});
  EXPECT_EQ(summary.out.find("no write-back cache") != std::string::npos, backend() == "host")
      << summary.out;
  EXPECT_TRUE(UnmountNow(dir.path()));
}

TEST(CliTest, StatsOfSomethingElseIsRefused) {
  const CommandResult result = RunCommand({kBinary, "--stats", "/tmp"});
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("not the root of a cudafs mount"), std::string::npos) << result.err;
}

TEST(CliTest, MakeRoomOnSomethingElseIsRefused) {
  const CommandResult result = RunCommand({kBinary, "--make-room", "/tmp", "1g"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("cannot make room"), std::string::npos) << result.err;
}

// cudafs run: the command runs with the allocation interposer preloaded
// (found beside the binary), and with the mounts it names; what it cannot
// run is refused as env(1) would, what it is told wrong as a usage error.
TEST(CliTest, RunPreloadsTheInterposerForTheCommand) {
  CommandResult result = RunCommand({kBinary, "run", "--", "sh", "-c", "echo \"$LD_PRELOAD\""});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string library = result.out.substr(0, result.out.find('\n'));
  EXPECT_EQ(library.substr(library.rfind('/') + 1), "libcudafs_preload.so") << result.out;
  EXPECT_EQ(access(library.c_str(), R_OK), 0) << library;
  // Added once before what the environment preloads already. That
  // environment reaches cudafs itself too, which a sanitized cudafs cannot
  // run under: the sanitizer must come first, and the interposer has none.
  if (!DaemonHasSanitizer()) {
    result = RunCommand({"env", "LD_PRELOAD=" + library + ":libm.so.6", "CUDAFS_MAKE_ROOM=0",
                         kBinary, "run", "--", "sh", "-c", "echo \"$LD_PRELOAD $CUDAFS_MAKE_ROOM\""});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_EQ(result.out, library + ":libm.so.6 \n");
  }
  // A program under it runs as it would without.
  result = RunCommand({kBinary, "run", "--", "ls", "/"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("proc"), std::string::npos);
  result = RunCommand({kBinary, "run", "--", "/no/such/program"});
  EXPECT_EQ(result.exit_code, 127);
  EXPECT_EQ(result.err, "cudafs run: /no/such/program: No such file or directory\n");
  result = RunCommand({kBinary, "run", "--"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.err.rfind("cudafs run: no COMMAND after --\n", 0), 0u) << result.err;
  result = RunCommand({kBinary, "run", "-x", "--", "true"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.err.rfind("cudafs run: unknown argument \"-x\" before --\n", 0), 0u)
      << result.err;
  result = RunCommand({kBinary, "run", "-o", "/tmp", "--", "true"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.err.rfind("cudafs run: not the root of a cudafs mount\n", 0), 0u)
      << result.err;
}

TEST_P(CliMountTest, RunNamesTheMountsToAsk) {
  if (backend() != "host") GTEST_SKIP() << "the mount is only named";
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  ASSERT_EQ(MountOn(dir, {"size=64m"}).exit_code, 0);
  CommandResult result = RunCommand(
      {kBinary, "run", "-o", dir.path(), "--", "sh", "-c", "echo \"$CUDAFS_ROOM_MOUNTS\""});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, dir.path() + "\n");
  // A directory in it is no mount to name.
  ASSERT_SYS_OK(mkdir((dir.path() + "/d").c_str(), 0755));
  result = RunCommand({kBinary, "run", "-o", dir.path() + "/d", "--", "true"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("but a directory in one"), std::string::npos) << result.err;
  EXPECT_TRUE(UnmountNow(dir.path()));
}

// user.cudafs.where names the places holding a file's bytes, and how many
// each holds; it is cudafs's to say, never the user's to set.
TEST_P(CliMountTest, WhereSaysWhereAFilesBytesAre) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  ASSERT_EQ(MountOn(dir, {"size=64m"}).exit_code, 0);
  const std::string file = dir.path() + "/f";
  ASSERT_TRUE(WriteFile(file, RandomBytes(kMiB, 7)));
  char value[256] = {};
  const ssize_t got = getxattr(file.c_str(), "user.cudafs.where", value, sizeof value - 1);
  ASSERT_TRUE(SysOk(got, "getxattr"));
  const std::string where(value, got);
  if (backend() == "host") {
    EXPECT_EQ(where, "host 1048576\n");
  } else {
    EXPECT_EQ(where.rfind("gpu", 0), 0u) << where;
    EXPECT_NE(where.find(" 1048576\n"), std::string::npos) << where;
  }
  EXPECT_TRUE(SysFails(setxattr(file.c_str(), "user.cudafs.where", "host", 4, 0), "setxattr",
                       {EPERM}));
  EXPECT_TRUE(SysFails(removexattr(file.c_str(), "user.cudafs.where"), "removexattr", {EPERM}));
  EXPECT_TRUE(UnmountNow(dir.path()));
}

// --make-room moves data to host memory: a mount without any (the host
// backend, or spill=0) says so rather than pretending.
TEST_P(CliMountTest, MakeRoomNeedsHostMemoryToMoveDataTo) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::vector<std::string> options = {"size=64m"};
  if (backend() != "host") options.push_back("spill=0");
  ASSERT_EQ(MountOn(dir, options).exit_code, 0);
  ASSERT_TRUE(WriteFile(dir.path() + "/f", RandomBytes(kMiB, 8)));
  const CommandResult result = RunCommand({kBinary, "--make-room", dir.path(), "all"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find(backend() == "host"
                                ? "this mount keeps its files in host memory (backend=host): "
                                  "it holds no GPU memory to give back"
                                : "this mount has no host memory to move its data to (spill=0)"),
            std::string::npos)
      << result.err;
  // It comes over the share socket, not as an attribute of the root.
  EXPECT_ERRNO(setxattr(dir.path().c_str(), "user.cudafs.make_room", "all", 3, 0), EPERM);
  EXPECT_TRUE(BytesEqual(ReadStored(dir.path() + "/f").value_or(""), RandomBytes(kMiB, 8)));
  EXPECT_TRUE(UnmountNow(dir.path()));
}

// The user.cudafs. names are the daemon's, at the mount's root only:
// below it none can be stored, by anyone (a directory's owner would make
// their directory's attributes pass for the root's behind a bind mount),
// and --make-room on a directory in the mount, or on a bind mount of one,
// fails saying so.
TEST_P(CliMountTest, ControlNamesExistOnlyAtTheRoot) {
  if (!HaveTool("setpriv")) GTEST_SKIP() << "no setpriv";
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  ASSERT_EQ(MountOn(dir, {"size=64m", "mode=0777"}).exit_code, 0);
  const std::string sub = dir.path() + "/d";
  const std::string file = dir.path() + "/f";
  ASSERT_SYS_OK(mkdir(sub.c_str(), 0755));
  ASSERT_SYS_OK(chown(sub.c_str(), kOtherUid, kOtherGid));
  ASSERT_TRUE(WriteFile(file, "x"));
  const std::vector<std::string> names = {"user.cudafs.socket", "user.cudafs.stats",
                                          "user.cudafs.make_room", "user.cudafs.faults",
                                          "user.cudafs.anything"};
  for (const std::string& path : {sub, file}) {
    for (const std::string& name : names) {
      SCOPED_TRACE(path + " " + name);
      EXPECT_ERRNO(setxattr(path.c_str(), name.c_str(), "@x", 2, 0), EPERM);
      char value[64];
      EXPECT_ERRNO(getxattr(path.c_str(), name.c_str(), value, sizeof value), ENODATA);
      EXPECT_ERRNO(removexattr(path.c_str(), name.c_str()), ENODATA);
    }
  }
  EXPECT_ERRNO(setxattr(sub.c_str(), "user.cudafs.where", "host", 4, 0), EPERM);
  // At the root, a name the daemon does not know is not stored either;
  // other user.* names are, everywhere.
  EXPECT_ERRNO(setxattr(dir.path().c_str(), "user.cudafs.anything", "1", 1, 0), EPERM);
  EXPECT_SYS_OK(setxattr(sub.c_str(), "user.mine", "1", 1, 0));
  // The directory's owner, the attacker of a bind mount, is refused alike.
  EXPECT_EQ(RunAs(kOtherUid, kOtherGid,
                  [&] {
                    return ResultErrno(setxattr(sub.c_str(), "user.cudafs.socket", "@evil", 5, 0));
                  }),
            Errno{EPERM});
  CommandResult result = RunCommand({kBinary, "--make-room", sub, "1g"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, "cudafs: " + sub +
                            ": cannot make room: not the root of a cudafs mount, but a "
                            "directory in one\n");
  ScratchDir bind;
  ASSERT_FALSE(bind.path().empty());
  ASSERT_TRUE(ShellOk("mount --bind " + ShellQuote(sub) + " " + ShellQuote(bind.path())));
  result = RunCommand({kBinary, "--make-room", bind.path(), "1g"});
  EXPECT_TRUE(ShellOk("umount " + ShellQuote(bind.path())));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, "cudafs: " + bind.path() +
                            ": cannot make room: not the root of a cudafs mount, but a bind "
                            "mount of a directory in one\n");
  EXPECT_TRUE(UnmountNow(dir.path()));
}

// make-room is the daemon's to allow, whatever the root's mode: on a
// root anyone may write (mode=0777), another user may not move everything
// (nor hold room), and may ask for a size as often as it likes: a GPU
// program asking for the room its allocation needs comes first. The host
// backend holds no GPU memory, so an allowed request ends in EOPNOTSUPP,
// a refused one in EPERM.
TEST_P(CliMountTest, MakeRoomIsAuthorizedByTheDaemon) {
  if (!HaveTool("setpriv")) GTEST_SKIP() << "no setpriv";
  if (backend() != "host") GTEST_SKIP() << "the host backend's refusal tells who was let in";
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  ASSERT_EQ(MountOn(dir, {"size=64m", "mode=0777"}).exit_code, 0);
  const auto as_other = [&](const std::string& size) {
    return RunCommand({"setpriv", "--reuid=" + std::to_string(kOtherUid),
                       "--regid=" + std::to_string(kOtherGid), "--clear-groups", kBinary,
                       "--make-room", dir.path(), size});
  };
  const std::string refused = "cudafs: " + dir.path() + ": cannot make room: ";
  const std::string no_gpu =
      refused +
      "this mount keeps its files in host memory (backend=host): it holds no GPU memory to give "
      "back: Operation not supported\n";
  CommandResult result = as_other("all");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, refused +
                            "only the user who mounted it, or root, can make room for all or "
                            "hold it; other users may ask for a size: Operation not permitted\n");
  for (int i = 0; i < 2; ++i) {
    result = as_other("1000000");
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_EQ(result.err, no_gpu);
  }
  // The owner (root here) is let in, for all.
  result = RunCommand({kBinary, "--make-room", dir.path(), "all"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, no_gpu);
  EXPECT_TRUE(UnmountNow(dir.path()));
}

// On a GPU, --make-room all moves every file's bytes to host memory; they
// read the same from there.
TEST_P(CliMountTest, MakeRoomMovesDataToHostMemoryAndLosesNothing) {
  if (backend() == "host") GTEST_SKIP() << "host memory has no GPU to make room on";
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  ASSERT_EQ(MountOn(dir, {"size=256m"}).exit_code, 0);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(WriteFile(dir.path() + "/f" + std::to_string(i), RandomBytes((i + 1) * kMiB, i)));
  }
  const CommandResult result = RunCommand({kBinary, "--make-room", dir.path(), "all"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (int i = 0; i < 4; ++i) {
    const std::string file = dir.path() + "/f" + std::to_string(i);
    char value[256] = {};
    const ssize_t got = getxattr(file.c_str(), "user.cudafs.where", value, sizeof value - 1);
    ASSERT_TRUE(SysOk(got, "getxattr"));
    EXPECT_EQ(std::string(value, got).rfind("host ", 0), 0u) << value;
    EXPECT_TRUE(BytesEqual(ReadStored(file).value_or(""), RandomBytes((i + 1) * kMiB, i)));
  }
  EXPECT_NE(StatsOf(dir.path())["moved_out_bytes"], "0");
  EXPECT_EQ(StatsOf(dir.path())["make_room_calls"], "1");
  EXPECT_TRUE(StatsOf(dir.path()).contains("spill_ready_bytes"));
  EXPECT_TRUE(UnmountNow(dir.path()));
}

TEST_P(CliMountTest, CacheBeyondHalfTheMemoryIsRefused) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  EXPECT_TRUE(Refused({kBinary, dir.path(), "-o", Join(MountOptions({"size=64m", "cache=1e"}), ",")},
                      kExitUsage, "cache=", dir.path()));
}

// Whether this kernel and this build of cudafs can serve FUSE over
// io_uring: the fuse module's enable_uring is Y and libfuse is 3.18+.
bool UringAvailable() {
  return ReadFile("/sys/module/fuse/parameters/enable_uring") == "Y\n" && LibfuseAtLeast(3, 18);
}

// Whether process `pid` holds an io_uring instance: libfuse makes one per
// queue when FUSE over io_uring starts.
bool HoldsIoUring(pid_t pid) {
  const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
  DIR* dir = opendir(fds.c_str());
  if (dir == nullptr) return false;
  bool found = false;
  while (const dirent* entry = readdir(dir)) {
    char target[64] = {};
    const std::string link = fds + "/" + entry->d_name;
    if (readlink(link.c_str(), target, sizeof(target) - 1) > 0 &&
        std::string_view(target) == "anon_inode:[io_uring]") {
      found = true;
    }
  }
  closedir(dir);
  return found;
}

// uring= picks the transport: off is /dev/fuse, auto is io_uring exactly
// when the kernel offers it, and on without it is refused, naming the
// parameter that turns it on. Data round-trips either way. (CI runs this
// with enable_uring N and Y.)
TEST_P(CliMountTest, UringOptionPicksTheTransport) {
  const bool available = UringAvailable();
  for (const std::string mode : {"off", "auto", "on"}) {
    SCOPED_TRACE("uring=" + mode + (available ? ", kernel offers io_uring" : ", no io_uring"));
    ScratchDir dir;
    ASSERT_FALSE(dir.path().empty());
    if (mode == "on" && !available) {
      EXPECT_TRUE(Refused(
          {kBinary, dir.path(), "-o", Join(MountOptions({"size=64m", "uring=on"}), ",")},
          kExitUsage, "uring=on", dir.path()));
      continue;
    }
    const CommandResult result = MountOn(dir, {"size=64m", "uring=" + mode});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const std::string data = RandomBytes(3 * kMiB + 5, 17);
    ASSERT_TRUE(WriteFile(dir.path() + "/data", data));
    const std::optional<std::string> read_back = ReadFile(dir.path() + "/data");
    ASSERT_TRUE(read_back.has_value());
    EXPECT_TRUE(BytesEqual(*read_back, data));
    const std::optional<pid_t> daemon = FindDaemon(dir.path());
    ASSERT_TRUE(daemon.has_value());
    EXPECT_EQ(HoldsIoUring(*daemon), mode != "off" && available);
    EXPECT_TRUE(UnmountNow(dir.path()));
  }
}

// The daemon serving `mountpoint`, as its root says (what --upgrade asks).
std::optional<pid_t> DaemonAttribute(const std::string& mountpoint) {
  char value[32] = {};
  const ssize_t n = getxattr(mountpoint.c_str(), "user.cudafs.daemon", value, sizeof value - 1);
  if (n <= 0) return std::nullopt;
  return static_cast<pid_t>(std::atoi(value));
}

// --upgrade: this binary takes the mount over without unmounting it, twice.
// The files, a descriptor held open (read and written before, between and
// after) and the requests of a writer running throughout carry over, and
// the old daemons exit; the last one unmounts as any does. The files may
// be in host memory or on GPUs. A mount served over io_uring is not handed
// over: the command says why, and the running daemon serves on.
TEST_P(CliMountTest, UpgradeHandsTheMountToThisBinaryWithNothingLost) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  ASSERT_EQ(MountOn(dir, {"size=64m"}).exit_code, 0);
  const std::string big = RandomBytes(5 * kMiB, 31);
  ASSERT_TRUE(WriteFile(dir.path() + "/big", big));
  const bool uring =
      RunCommand({kBinary, "--stats", dir.path()}).out.find("io_uring") != std::string::npos;
  const bool handed_over = !uring;
  Fd held(open((dir.path() + "/held").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_GE(held.get(), 0);
  ASSERT_EQ(pwrite(held.get(), "before ", 7, 0), 7);

  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  int appended = 0;
  const std::string log = dir.path() + "/log";
  std::thread writer([&] {
    while (!stop) {
      const std::string line = "line " + std::to_string(appended) + "\n";
      const int fd = open(log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0 || write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
        ++failures;
      }
      if (fd >= 0) close(fd);
      ++appended;
    }
  });
  std::vector<pid_t> daemons = {DaemonAttribute(dir.path()).value_or(0)};
  for (int round = 0; round < 2; ++round) {
    std::this_thread::sleep_for(100ms);
    const CommandResult upgrade = RunCommand({kBinary, "--upgrade", dir.path()}, 90s);
    if (handed_over) {
      EXPECT_EQ(upgrade.exit_code, 0) << upgrade.err;
      EXPECT_NE(upgrade.err.find("took the mount over"), std::string::npos) << upgrade.err;
    } else {
      EXPECT_EQ(upgrade.exit_code, 2) << upgrade.err;
      EXPECT_NE(upgrade.err.find("io_uring"), std::string::npos) << upgrade.err;
    }
    daemons.push_back(DaemonAttribute(dir.path()).value_or(0));
    char word[16] = {};
    ASSERT_EQ(pread(held.get(), word, 7, 0), 7);
    EXPECT_STREQ(word, "before ");
  }
  stop = true;
  writer.join();
  EXPECT_EQ(failures, 0);
  ASSERT_EQ(pwrite(held.get(), "after", 5, 7), 5);
  char both[13] = {};
  ASSERT_EQ(pread(held.get(), both, 12, 0), 12);
  EXPECT_STREQ(both, "before after");
  EXPECT_EQ(held.Close(), 0);
  EXPECT_TRUE(BytesEqual(ReadStored(dir.path() + "/big").value_or(""), big));
  std::string expected;
  for (int i = 0; i < appended; ++i) expected += "line " + std::to_string(i) + "\n";
  EXPECT_TRUE(BytesEqual(ReadStored(log).value_or(""), expected));

  if (handed_over) {
    EXPECT_NE(daemons[1], daemons[0]);
    EXPECT_NE(daemons[2], daemons[1]);
    EXPECT_TRUE(Eventually([&] { return !ProcessAlive(daemons[0]) && !ProcessAlive(daemons[1]); },
                           10s));
  } else {
    EXPECT_EQ(daemons[2], daemons[0]);
  }
  EXPECT_TRUE(ProcessAlive(daemons[2]));
  EXPECT_TRUE(UnmountNow(dir.path()));
  EXPECT_TRUE(Eventually([&] { return !ProcessAlive(daemons[2]); }, 10s));
}

// `pid`'s cgroup in the v2 hierarchy, or "" where it has none.
std::string V2CgroupOf(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/cgroup");
  for (std::string line; std::getline(file, line);) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return "";
}

// Where the whole v2 hierarchy is mounted, or "".
std::string V2Mount() {
  std::ifstream file("/proc/self/mountinfo");
  for (std::string line; std::getline(file, line);) {
    std::istringstream fields(line);
    std::string id, parent, device, root, mountpoint;
    fields >> id >> parent >> device >> root >> mountpoint;
    if (root == "/" && line.find(" - cgroup2 ") != std::string::npos) return mountpoint;
  }
  return "";
}

// --upgrade of what is no cudafs mount, by another user, or with too few
// files to open, and a SIGUSR1 that no successor asked for, change
// nothing; run from another cgroup, the new daemon joins the old one's; a
// successor ends on SIGTERM as a daemon does.
TEST_P(CliMountTest, UpgradeFailsOnNoMountIgnoresStraySignalsAndASuccessorStopsOnSigterm) {
  const CommandResult none = RunCommand({kBinary, "--upgrade", "/tmp"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("/tmp is not served by a cudafs"), std::string::npos) << none.err;
  EXPECT_EQ(RunCommand({kBinary, "--upgrade"}).exit_code, 2);

  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  ASSERT_EQ(MountOn(dir, {"size=64m"}).exit_code, 0);
  ASSERT_TRUE(WriteFile(dir.path() + "/f", "kept"));
  const std::optional<pid_t> daemon = DaemonAttribute(dir.path());
  ASSERT_TRUE(daemon.has_value());
  ASSERT_SYS_OK(kill(*daemon, SIGUSR1));
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(ProcessAlive(*daemon));
  EXPECT_EQ(ReadFile(dir.path() + "/f"), "kept");
  ASSERT_TRUE(WriteFile(dir.path() + "/g", "served"));
  EXPECT_EQ(ReadFile(dir.path() + "/g"), "served");
  // Another user's --upgrade would run the new daemon as that user.
  if (HaveTool("setpriv")) {
    const CommandResult other = RunCommand(
        {"setpriv", "--reuid=" + std::to_string(kOtherUid), "--regid=" + std::to_string(kOtherGid),
         "--clear-groups", kBinary, "--upgrade", dir.path()});
    EXPECT_EQ(other.exit_code, 2);
    EXPECT_NE(other.err.find(dir.path() + " is served for user 0: that user upgrades it"),
              std::string::npos)
        << other.err;
    EXPECT_EQ(DaemonAttribute(dir.path()), daemon);
  }
  // A GPU's memory comes as a descriptor per allocation: the command
  // raises its open-file limit as far as it may, and says when that is
  // too little.
  const bool uring =
      RunCommand({kBinary, "--stats", dir.path()}).out.find("io_uring") != std::string::npos;
  std::string limit = "";
  if (backend() == "cuda" && !uring) {
    for (int i = 0; i < 12; ++i) {
      ASSERT_TRUE(WriteFile(dir.path() + "/piece" + std::to_string(i), RandomBytes(2 * kMiB, i)));
    }
    const CommandResult low = RunCommand(
        {"sh", "-c", "ulimit -n 16 && exec \"$0\" --upgrade \"$1\"", kBinary, dir.path()});
    EXPECT_EQ(low.exit_code, 2);
    EXPECT_NE(low.err.find("this process may open too few files (ulimit -n)"), std::string::npos)
        << low.err;
    EXPECT_EQ(DaemonAttribute(dir.path()), daemon);
    limit = "ulimit -Sn 16 && ";
  }
  // From a cgroup of its own, as the package's postinst runs in apt's
  // service, which systemd ends by killing what is left in it.
  std::string elsewhere;
  if (const std::string v2 = V2Mount(); !v2.empty() && !V2CgroupOf(getpid()).empty()) {
    elsewhere = v2 + V2CgroupOf(getpid()) + "/cudafs-upgrade-" + std::to_string(getpid());
    if (mkdir(elsewhere.c_str(), 0755) != 0) elsewhere.clear();
  }
  const std::string enter = elsewhere.empty() ? "" : "echo $$ > '" + elsewhere + "/cgroup.procs' && ";
  const CommandResult upgraded = RunCommand(
      {"sh", "-c", enter + limit + "exec \"$0\" --upgrade \"$1\"", kBinary, dir.path()});
  if (uring) {
    EXPECT_EQ(upgraded.exit_code, 2) << "not over io_uring";
    if (!elsewhere.empty()) {
      EXPECT_TRUE(Eventually([&] { return rmdir(elsewhere.c_str()) == 0; }, 10s));
    }
    EXPECT_TRUE(UnmountNow(dir.path()));
    return;
  }
  ASSERT_EQ(upgraded.exit_code, 0) << upgraded.err;
  if (!elsewhere.empty()) {
    EXPECT_EQ(V2CgroupOf(DaemonAttribute(dir.path()).value_or(0)), V2CgroupOf(*daemon))
        << "the new daemon stayed in the command's cgroup";
    EXPECT_TRUE(Eventually([&] { return rmdir(elsewhere.c_str()) == 0; }, 10s))
        << "nothing is left in the command's cgroup";
  }
  // A successor, mounted on a descriptor rather than a path, unmounts on a
  // stop signal all the same.
  const std::optional<pid_t> successor = DaemonAttribute(dir.path());
  ASSERT_TRUE(successor.has_value());
  ASSERT_SYS_OK(kill(*successor, SIGTERM));
  EXPECT_TRUE(Eventually([&] { return !IsMounted(dir.path()); }, 10s));
  EXPECT_TRUE(Eventually([&] { return !ProcessAlive(*successor); }, 10s));
}

CUDAFS_INSTANTIATE_BACKENDS(CliMountTest);

// ---------------------------------------------------------------------------
// fstab

void SkipUnlessMountHelpers() {
  for (const char* tool : {"mount", "mount.fuse3", "fusermount3"}) {
    if (!HaveTool(tool) && access((std::string("/sbin/") + tool).c_str(), X_OK) != 0) {
      GTEST_SKIP() << "`" << tool << "` is not installed";
    }
  }
}

// Mounting from fstab through mount(8) and mount.fuse3: skips where cudafs
// cannot mount or the helpers are missing, and gives each test a directory
// for its fstab and a mountpoint.
class CliFstabTest : public testing::Test {
 protected:
  void SetUp() override {
    SKIP_UNLESS_CAN_MOUNT();
    SkipUnlessMountHelpers();
    if (IsSkipped()) return;
    ASSERT_FALSE(dir_.path().empty());
    ASSERT_FALSE(mnt_.path().empty());
  }

  const std::string& mountpoint() const { return mnt_.path(); }

  // Writes an fstab holding `line` and mounts mountpoint() from it with
  // `mount --fstab`, which must exit 0.
  testing::AssertionResult MountLine(const std::string& line) {
    const std::string fstab = dir_.path() + "/fstab";
    if (testing::AssertionResult written = WriteFile(fstab, line + "\n"); !written) return written;
    const CommandResult result = RunCommand({"mount", "--fstab", fstab, mountpoint()}, 60s);
    if (result.exit_code == 0) return testing::AssertionSuccess();
    return testing::AssertionFailure()
           << "mount exited " << result.exit_code << "; fstab line: " << line << "\n"
           << result.out << result.err;
  }

  // Mounts mountpoint() from an fstab holding `line`, checks the mount, and
  // unmounts it.
  void MountFromFstab(const std::string& line) {
    ASSERT_TRUE(MountLine(line));
    const std::optional<MountEntry> entry = FindMount(mountpoint());
    ASSERT_TRUE(entry.has_value()) << "mount exited 0 but nothing is mounted";
    EXPECT_EQ(entry->fstype, "fuse.cudafs");
    EXPECT_EQ(entry->source, "cudafs-src");
    EXPECT_TRUE(entry->options.starts_with("rw")) << entry->options;
    // The cudafs options arrived.
    const std::optional<struct statvfs> st = StatFs(mountpoint());
    ASSERT_TRUE(st.has_value());
    EXPECT_EQ(uint64_t{st->f_blocks} * st->f_frsize, 64 * kMiB);
    const std::optional<struct stat> root = StatPath(mountpoint());
    ASSERT_TRUE(root.has_value());
    EXPECT_EQ(root->st_mode & 07777, 0750u);
    ASSERT_TRUE(WriteFile(mountpoint() + "/file", "from fstab\n"));
    EXPECT_EQ(ReadFile(mountpoint() + "/file"), "from fstab\n");
    const std::optional<pid_t> daemon = FindDaemon(mountpoint());
    EXPECT_TRUE(daemon.has_value());
    EXPECT_TRUE(UnmountNow(mountpoint()));
    EXPECT_FALSE(IsMounted(mountpoint()));
    if (daemon) {
      EXPECT_TRUE(Eventually([&] { return !ProcessAlive(*daemon); }, 10s));
    }
  }

 private:
  ScratchDir dir_;  // for the fstab file
  ScratchDir mnt_;
};

// The usual fstab entry: type fuse.cudafs makes mount.fuse3 run `cudafs`.
// mount(8) starts helpers without the caller's PATH, so `cudafs` must be
// installed where /bin/sh finds it by default (`make install` puts it in
// /usr/local/bin); a symlink in a directory added to PATH is not seen.
TEST_F(CliFstabTest, TypeFuseCudafsRunsInstalledBinary) {
  const CommandResult installed = RunCommand({"env", "-i", "/bin/sh", "-c", "command -v cudafs"});
  if (installed.exit_code != 0) {
    GTEST_SKIP() << "cudafs is not installed on the default PATH that mount(8) gives its "
                    "helpers; `cmake --install` it to run this test";
  }
  const std::string installed_path = FirstLine(installed.out);
  if (RunCommand({"cmp", "-s", installed_path, kBinary}).exit_code != 0) {
    GTEST_SKIP() << "the installed " << installed_path << " is not the binary under test ("
                 << kBinary << ")";
  }
  MountFromFstab("cudafs-src " + mountpoint() +
                 " fuse.cudafs backend=host,size=64m,mode=0750,noauto 0 0");
}

// The older form, type fuse with PROGRAM#SOURCE, names the binary by path, so
// it runs the binary under test wherever it is.
TEST_F(CliFstabTest, TypeFuseWithProgramPath) {
  MountFromFstab(std::string(kBinary) + "#cudafs-src " + mountpoint() +
                 " fuse backend=host,size=64m,mode=0750,noauto 0 0");
}

// The first field of an fstab line reaches cudafs as SOURCE through
// mount.fuse3: commas in it stay part of the name.
TEST_F(CliFstabTest, SourceWithCommasAddsNoOptions) {
  ASSERT_TRUE(MountLine(std::string(kBinary) + "#x,subtype=evil,allow_other " + mountpoint() +
                        " fuse backend=host,size=64m,noallow_other,noauto 0 0"));
  const std::optional<MountEntry> entry = FindMount(mountpoint());
  ASSERT_TRUE(entry.has_value()) << "mount exited 0 but nothing is mounted";
  EXPECT_EQ(entry->fstype, "fuse.cudafs");
  EXPECT_EQ(entry->source, "x,subtype=evil,allow_other");
  EXPECT_EQ(entry->super_options.find("allow_other"), std::string::npos) << entry->super_options;
  EXPECT_TRUE(UnmountNow(mountpoint()));
}

// The README's fstab line as written there: the first line of type
// fuse.cudafs after its "### /etc/fstab" heading, split into its fields.
std::vector<std::string> ReadmeFstabFields() {
  std::ifstream readme(std::string(kSourceDir) + "/README.md");
  bool in_section = false;
  for (std::string line; std::getline(readme, line);) {
    if (line == "### /etc/fstab") in_section = true;
    if (!in_section) continue;
    std::istringstream words(line);
    std::vector<std::string> fields{std::istream_iterator<std::string>(words), {}};
    if (fields.size() == 6 && fields[2] == "fuse.cudafs") return fields;
  }
  return {};
}

// The README's fstab line makes a shared scratch dir: mounted by root
// through mount(8) and mount.fuse3, another user may create files in its
// sticky root and not delete a third's, and the mount is nosuid,nodev. The
// line is taken from the README with only the mountpoint, a test size and
// backend=host changed; it runs the binary under test through the type
// fuse and PROGRAM#SOURCE, which mount.fuse3 treats as fuse.cudafs but for
// finding the program.
TEST_F(CliFstabTest, ReadmeLineMakesASharedStickyScratchDir) {
  std::vector<std::string> fields = ReadmeFstabFields();
  ASSERT_EQ(fields.size(), 6u) << "no fstab line of type fuse.cudafs under README.md's "
                                  "\"### /etc/fstab\"";
  std::vector<std::string> options;
  std::istringstream list(fields[3]);
  for (std::string option; std::getline(list, option, ',');) {
    options.push_back(option.starts_with("size=") ? "size=64m" : option);
  }
  ASSERT_TRUE(std::find(options.begin(), options.end(), "mode=1777") != options.end())
      << fields[3];
  options.push_back("backend=host");
  fields[0] = std::string(kBinary) + "#" + fields[0];
  fields[1] = mountpoint();
  fields[2] = "fuse";
  fields[3] = Join(options, ",");
  ASSERT_TRUE(MountLine(Join(fields, " ")));
  const std::optional<MountEntry> entry = FindMount(mountpoint());
  ASSERT_TRUE(entry.has_value()) << "mount exited 0 but nothing is mounted";
  std::vector<std::string> words;
  std::istringstream mount_options(entry->options);
  for (std::string word; std::getline(mount_options, word, ',');) words.push_back(word);
  for (const char* word : {"nosuid", "nodev"}) {
    EXPECT_TRUE(std::find(words.begin(), words.end(), word) != words.end())
        << word << " missing: " << entry->options;
  }

  constexpr uid_t kThirdUid = 65533;
  const std::string others_file = mountpoint() + "/of-a-third-user";
  const std::string own_file = mountpoint() + "/of-nobody";
  EXPECT_EQ(RunAs(kThirdUid, kThirdUid, [&] {
              return WriteFile(others_file, "mine\n") ? Errno{0} : Errno{errno};
            }),
            Errno{0});
  EXPECT_EQ(RunAs(kOtherUid, kOtherGid, [&] {
              if (!WriteFile(own_file, "mine\n")) return Errno{errno};
              if (Errno listed = ResultErrno(access(mountpoint().c_str(), R_OK)); listed.value != 0) {
                return listed;
              }
              return ResultErrno(unlink(others_file.c_str()));
            }),
            Errno{EPERM})
      << "nobody must create a file and be refused deleting another user's";
  EXPECT_TRUE(StatPath(others_file).has_value());
  EXPECT_TRUE(UnmountNow(mountpoint()));
}

}  // namespace
}  // namespace cudafs_test
