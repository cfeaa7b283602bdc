// Shared helpers for the tests that run against a mounted cudafs.
//
// Each *_test.cc is its own executable, so everything here is header-only.
//
// FsTest gives every test a fresh, empty filesystem: it starts the real
// `cudafs` binary (CUDAFS_BINARY, or the one the environment variable
// CUDAFS_TEST_BINARY names: another build, or a copy on the GPU machine)
// on a temporary mountpoint with the backend
// named by the test parameter and unmounts it afterwards. When the
// environment variable CUDAFS_TEST_DIR names a directory, the tests run in a
// fresh subdirectory of it instead, so the suite can be checked against
// tmpfs (or compared with it). Tests that need a real cudafs mount (mount
// options, the daemon) skip there.
//
// A mount that fails to start skips the test ("cudafs cannot mount here"),
// since a machine without FUSE cannot run these tests at all; set
// CUDAFS_TEST_REQUIRE_MOUNT=1 to make that a failure instead.
#ifndef CUDAFS_TESTS_MOUNT_MOUNT_FIXTURE_H_
#define CUDAFS_TESTS_MOUNT_MOUNT_FIXTURE_H_

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <map>
#include <optional>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#ifndef CUDAFS_BINARY
#error "CUDAFS_BINARY must name the built cudafs binary"
#endif
#ifndef CUDAFS_SOURCE_DIR
#error "CUDAFS_SOURCE_DIR must name the repository root"
#endif

namespace cudafs_test {

using namespace std::chrono_literals;

inline const char* const kBinary = [] {
  const char* binary = getenv("CUDAFS_TEST_BINARY");
  return binary != nullptr && *binary != '\0' ? binary : CUDAFS_BINARY;
}();
inline constexpr const char* kSourceDir = CUDAFS_SOURCE_DIR;

// Users for permission tests: an owner that is not root, and "nobody".
inline constexpr uid_t kOwnerUid = 1000;
inline constexpr gid_t kOwnerGid = 1000;
inline constexpr uid_t kOtherUid = 65534;
inline constexpr gid_t kOtherGid = 65534;

// ---------------------------------------------------------------------------
// errno checks

inline std::string ErrnoName(int err) {
  const char* name = strerrorname_np(err);
  return name != nullptr ? name : "errno " + std::to_string(err);
}

// The outcome of a call as an errno value (0: success) that gtest prints by
// name, so `EXPECT_EQ(result, Errno{EACCES})` reads "EPERM vs EACCES".
struct Errno {
  // Child processes that did not report a result (crashed, timed out).
  static constexpr int kNoResult = -1;
  int value = 0;
  friend bool operator==(Errno, Errno) = default;
  friend void PrintTo(Errno e, std::ostream* os) {
    if (e.value == 0) {
      *os << "success";
    } else if (e.value == kNoResult) {
      *os << "no result (child process died)";
    } else {
      *os << ErrnoName(e.value);
    }
  }
};

// errno of the call that returned `result` when it failed (-1), else
// success. Reads errno before anything else can change it.
inline Errno ResultErrno(long long result) { return Errno{result == -1 ? errno : 0}; }

inline testing::AssertionResult SysOk(long long result, const char* call) {
  const int err = errno;
  if (result != -1) return testing::AssertionSuccess();
  return testing::AssertionFailure() << call << " failed: " << ErrnoName(err) << " ("
                                     << strerror(err) << ")";
}

inline testing::AssertionResult SysFails(long long result, const char* call,
                                         std::initializer_list<int> expected) {
  const int err = errno;
  std::string wanted;
  for (int e : expected) wanted += (wanted.empty() ? "" : " or ") + ErrnoName(e);
  if (result != -1) {
    return testing::AssertionFailure()
           << call << " succeeded (returned " << result << "), expected " << wanted;
  }
  for (int e : expected) {
    if (err == e) return testing::AssertionSuccess();
  }
  return testing::AssertionFailure() << call << " failed with " << ErrnoName(err) << ", expected "
                                     << wanted;
}

}  // namespace cudafs_test

// A system call that returns -1 on failure must succeed.
#define ASSERT_SYS_OK(call) ASSERT_TRUE(::cudafs_test::SysOk((call), #call))
#define EXPECT_SYS_OK(call) EXPECT_TRUE(::cudafs_test::SysOk((call), #call))
// A system call must fail with one of the listed errno values.
#define EXPECT_ERRNO(call, ...) EXPECT_TRUE(::cudafs_test::SysFails((call), #call, {__VA_ARGS__}))
#define ASSERT_ERRNO(call, ...) ASSERT_TRUE(::cudafs_test::SysFails((call), #call, {__VA_ARGS__}))

namespace cudafs_test {

// ---------------------------------------------------------------------------
// Files and data

// Owns a file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    Reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ~Fd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Closes now and returns close()'s result, for tests about close itself.
  int Close() { return ::close(std::exchange(fd_, -1)); }
  void Reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// Deterministic pseudo-random bytes: failures reproduce.
inline std::string RandomBytes(size_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string bytes(size, '\0');
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    const uint64_t word = rng();
    memcpy(&bytes[i], &word, 8);
  }
  const uint64_t tail = rng();
  memcpy(&bytes[i], &tail, size - i);
  return bytes;
}

// open(2) into *fd, explaining a failure by errno name.
inline testing::AssertionResult OpenFd(const std::string& path, int flags, Fd* fd,
                                       mode_t mode = 0644) {
  fd->Reset(open(path.c_str(), flags, mode));
  if (fd->valid()) return testing::AssertionSuccess();
  const int err = errno;
  return testing::AssertionFailure() << "open " << path << ": " << ErrnoName(err);
}

inline std::optional<struct stat> StatFd(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return std::nullopt;
  return st;
}

// `text` as one sh word.
inline std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

// "0x0a": AssertionResult's stream ignores manipulators like std::hex.
inline std::string ByteHex(char byte) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02x", static_cast<unsigned>(byte) & 0xff);
  return text;
}

// Compares byte strings without printing megabytes: reports sizes and the
// first differing offset.
inline testing::AssertionResult BytesEqual(std::string_view actual, std::string_view expected) {
  const size_t common = std::min(actual.size(), expected.size());
  for (size_t i = 0; i < common; ++i) {
    if (actual[i] != expected[i]) {
      return testing::AssertionFailure()
             << "bytes differ first at offset " << i << ": got "
             << ByteHex(actual[i]) << ", expected " << ByteHex(expected[i]) << " (sizes "
             << actual.size() << " and " << expected.size() << ")";
    }
  }
  if (actual.size() != expected.size()) {
    return testing::AssertionFailure()
           << "size " << actual.size() << ", expected " << expected.size();
  }
  return testing::AssertionSuccess();
}

inline testing::AssertionResult WriteAll(int fd, std::string_view data, off_t offset) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = pwrite(fd, data.data() + done, data.size() - done, offset + done);
    if (n < 0) {
      const int err = errno;
      return testing::AssertionFailure() << "pwrite at " << offset + done << " failed: "
                                         << ErrnoName(err);
    }
    done += n;
  }
  return testing::AssertionSuccess();
}

// Replaces (or creates) `path` with `data`.
inline testing::AssertionResult WriteFile(const std::string& path, std::string_view data,
                                          mode_t mode = 0644) {
  Fd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, mode));
  if (!fd.valid()) {
    const int err = errno;
    return testing::AssertionFailure() << "open " << path << ": " << ErrnoName(err);
  }
  return WriteAll(fd.get(), data, 0);
}

// Up to `size` bytes at `offset`; nullopt if a read fails.
inline std::optional<std::string> ReadAt(int fd, off_t offset, size_t size) {
  std::string data(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pread(fd, data.data() + done, size - done, offset + done);
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    done += n;
  }
  data.resize(done);
  return data;
}

// Drops the file's clean pages from the kernel's cache, so that the next
// read asks the filesystem. cudafs lets cached pages outlive an open
// (keep_cache), so without this a check could read back the kernel's copy
// of what was written instead of what the filesystem stored.
inline bool DropCache(int fd) { return posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0; }

// Everything up to the file's current size, as the filesystem stores it.
inline std::optional<std::string> ReadAll(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !DropCache(fd)) return std::nullopt;
  return ReadAt(fd, 0, st.st_size);
}

// The whole file at `path`, as the filesystem stores it.
inline std::optional<std::string> ReadStored(const std::string& path) {
  Fd fd(open(path.c_str(), O_RDONLY));
  if (!fd.valid()) return std::nullopt;
  return ReadAll(fd.get());
}

// The whole file through read(2); nullopt if it cannot be opened or read.
inline std::optional<std::string> ReadFile(const std::string& path) {
  Fd fd(open(path.c_str(), O_RDONLY));
  if (!fd.valid()) return std::nullopt;
  std::string data;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = read(fd.get(), buffer, sizeof buffer);
    if (n < 0) return std::nullopt;
    if (n == 0) return data;
    data.append(buffer, n);
  }
}

// Directory entry names, sorted, "." and ".." included; nullopt on error.
inline std::optional<std::vector<std::string>> ListDir(const std::string& path) {
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return std::nullopt;
  std::vector<std::string> names;
  while (const dirent* entry = readdir(dir)) names.emplace_back(entry->d_name);
  closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

inline std::optional<struct stat> StatPath(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return std::nullopt;
  return st;
}

inline std::optional<struct statvfs> StatFs(const std::string& path) {
  struct statvfs st;
  if (statvfs(path.c_str(), &st) != 0) return std::nullopt;
  return st;
}

// Free bytes as statvfs reports them (f_bfree, which root may use).
inline uint64_t FreeBytes(const std::string& path) {
  const auto st = StatFs(path);
  return st ? uint64_t{st->f_bfree} * st->f_frsize : 0;
}

// Polls `condition` until it holds or `timeout` passes. FUSE sends some
// requests asynchronously (release, forget), so effects such as freed space
// show up a moment after the system call returned.
inline bool Eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds timeout = 5s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
}

// ---------------------------------------------------------------------------
// Time

inline int64_t Nanos(const timespec& ts) { return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec; }

inline timespec WallClock() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts;
}

// Timestamps come from the kernel's coarse clock (one tick is up to 10 ms);
// sleeping past a tick makes "later" observable.
inline void SleepPastClockTick() { std::this_thread::sleep_for(30ms); }

// ---------------------------------------------------------------------------
// Processes

struct CommandResult {
  int exit_code = -1;  // -1: killed by a signal or timed out
  std::string out;
  std::string err;
};

// Waits for a child; kills it after `timeout`. Returns the wait status, or
// nullopt when it had to be killed.
inline std::optional<int> WaitForChild(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return status;
    if (done < 0 && errno != EINTR) return std::nullopt;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return std::nullopt;
    }
    std::this_thread::sleep_for(2ms);
  }
}

inline std::string ReadWholeFd(int fd) {
  std::string data;
  char buffer[4096];
  off_t offset = 0;
  ssize_t n;
  while ((n = pread(fd, buffer, sizeof buffer, offset)) > 0) {
    data.append(buffer, n);
    offset += n;
  }
  return data;
}

// Runs argv[0] (searched in PATH) with stdin from /dev/null and returns its
// exit code and output. Output goes to memory files rather than pipes: a
// daemon that keeps inherited descriptors open must not make us wait.
inline CommandResult RunCommand(const std::vector<std::string>& argv,
                                std::chrono::milliseconds timeout = 120s) {
  CommandResult result;
  Fd out(memfd_create("stdout", MFD_CLOEXEC));
  Fd err(memfd_create("stderr", MFD_CLOEXEC));
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(out.get(), 1);
    dup2(err.get(), 2);
    execvp(args[0], args.data());
    dprintf(2, "exec %s: %s\n", args[0], strerror(errno));
    _exit(127);
  }
  const std::optional<int> status = WaitForChild(pid, timeout);
  result.out = ReadWholeFd(out.get());
  result.err = ReadWholeFd(err.get());
  if (!status) {
    result.err += "(timed out)\n";
  } else if (WIFEXITED(*status)) {
    result.exit_code = WEXITSTATUS(*status);
  }
  return result;
}

inline CommandResult RunShell(const std::string& script,
                              std::chrono::milliseconds timeout = 120s) {
  return RunCommand({"/bin/sh", "-c", script}, timeout);
}

// Whether the cudafs under test was built against libfuse `major.minor` or
// newer (what `cudafs --version` says): 3.18 brings FUSE over io_uring,
// direct I/O with mmap and FUSE_HANDLE_KILLPRIV_V2 (and with it atomic
// O_TRUNC); the fallback build against Debian 12's 3.14 has none of them.
inline bool LibfuseAtLeast(int major, int minor) {
  static const std::pair<int, int> built_with = [] {
    const std::string text = RunCommand({kBinary, "--version"}).out;
    const size_t at = text.find("libfuse ");
    std::pair<int, int> version{0, 0};
    if (at != std::string::npos) {
      std::sscanf(text.c_str() + at, "libfuse %d.%d", &version.first, &version.second);
    }
    return version;
  }();
  return built_with >= std::pair(major, minor);
}

// A command run through RunShell must exit 0; its output explains failures.
inline testing::AssertionResult ShellOk(const std::string& script,
                                        std::chrono::milliseconds timeout = 120s) {
  const CommandResult result = RunShell(script, timeout);
  if (result.exit_code == 0) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "`" << script << "` exited " << result.exit_code
                                     << "\nstdout:\n" << result.out << "\nstderr:\n"
                                     << result.err;
}

inline bool HaveTool(const std::string& name) {
  return RunShell("command -v " + name + " >/dev/null").exit_code == 0;
}

// Runs `body` in a child process with the given credentials (no
// supplementary groups) and returns its result. The child reports through
// its exit code, so `body` must return an errno value that fits (0..254).
inline Errno RunAs(uid_t uid, gid_t gid, const std::function<Errno()>& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0 ||
        setresuid(uid, uid, uid) != 0) {
      _exit(255);
    }
    _exit(body().value);
  }
  const std::optional<int> status = WaitForChild(pid, 60s);
  if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) == 255) {
    return Errno{Errno::kNoResult};
  }
  return Errno{WEXITSTATUS(*status)};
}

// ---------------------------------------------------------------------------
// Mounting

inline std::string Join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string joined;
  for (const std::string& part : parts) {
    if (!joined.empty()) joined += separator;
    joined += part;
  }
  return joined;
}

// Undoes the octal escapes (\040 for space, ...) of /proc/self/mountinfo.
// The "name value" lines of cudafs's stats (cudafs --stats, or the root's
// user.cudafs.stats attribute) as a map.
inline std::map<std::string, std::string> ParseStats(const std::string& text) {
  std::map<std::string, std::string> stats;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t space = line.find(' ');
    if (space != std::string::npos) stats[line.substr(0, space)] = line.substr(space + 1);
  }
  return stats;
}

// The stats of the cudafs mount at `root`, read from its attribute.
inline std::map<std::string, std::string> MountStats(const std::string& root) {
  std::string text(4096, '\0');
  const ssize_t length = getxattr(root.c_str(), "user.cudafs.stats", text.data(), text.size());
  text.resize(length > 0 ? length : 0);
  return ParseStats(text);
}

inline std::string UnescapeMountField(std::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                               (field[i + 3] - '0'));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

struct MountEntry {
  std::string mountpoint;
  std::string fstype;
  std::string source;
  std::string options;  // per-mount options ("rw,nosuid,...")
  std::string super_options;  // the filesystem's ("rw,user_id=0,...,allow_other")
};

// The mount on `mountpoint` from /proc/self/mountinfo (the topmost one).
inline std::optional<MountEntry> FindMount(const std::string& mountpoint) {
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::optional<MountEntry> found;
  std::string line;
  while (std::getline(mountinfo, line)) {
    // id parent major:minor root mountpoint options [optional...] - fstype source superopts
    std::istringstream fields(line);
    std::string id, parent, device, root, point, options, field;
    fields >> id >> parent >> device >> root >> point >> options;
    while (fields >> field && field != "-") {
    }
    MountEntry entry;
    fields >> entry.fstype >> entry.source >> entry.super_options;
    entry.mountpoint = UnescapeMountField(point);
    if (entry.mountpoint != mountpoint) continue;
    entry.source = UnescapeMountField(entry.source);
    entry.options = options;
    found = entry;
  }
  return found;
}

inline bool IsMounted(const std::string& mountpoint) { return FindMount(mountpoint).has_value(); }

// The process running CUDAFS_BINARY with `mountpoint` on its command line
// (the daemon serving that mount), or nullopt. Root's auto_unmount watcher
// shares the command line; its name (comm) tells it apart.
inline std::optional<pid_t> FindDaemon(const std::string& mountpoint) {
  char binary[PATH_MAX];
  if (realpath(kBinary, binary) == nullptr) return std::nullopt;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return std::nullopt;
  std::optional<pid_t> found;
  while (const dirent* entry = readdir(proc)) {
    const pid_t pid = atoi(entry->d_name);
    if (pid <= 0 || pid == getpid()) continue;
    const std::string dir = std::string("/proc/") + entry->d_name;
    char exe[PATH_MAX];
    const ssize_t n = readlink((dir + "/exe").c_str(), exe, sizeof exe - 1);
    if (n < 0) continue;
    // A binary rebuilt while the daemon runs reads "... (deleted)".
    if (!std::string_view(exe, n).starts_with(binary)) continue;
    std::ifstream comm_file(dir + "/comm");
    std::string comm;
    if (std::getline(comm_file, comm) && comm == "cudafs-unmount") continue;
    // Through a stream (not istreambuf_iterator, whose read error throws):
    // another test's daemon may exit between the open and the read (ESRCH).
    std::ifstream cmdline_file(dir + "/cmdline");
    std::stringstream cmdline;
    cmdline << cmdline_file.rdbuf();
    std::istringstream args(cmdline.str());
    std::string arg;
    while (std::getline(args, arg, '\0')) {
      if (arg == mountpoint) found = pid;
    }
  }
  closedir(proc);
  return found;
}

// True while `pid` exists and is not a zombie.
// The state letter of /proc/.../stat ('R', 'S', 'T', 'Z', ...), or nothing
// when the task is gone.
inline std::optional<char> TaskState(const std::string& proc_dir) {
  std::ifstream stat_file(proc_dir + "/stat");
  std::string stat;
  if (!std::getline(stat_file, stat)) return std::nullopt;
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return std::nullopt;
  return stat[paren + 2];
}

inline bool ProcessAlive(pid_t pid) {
  const std::optional<char> state = TaskState("/proc/" + std::to_string(pid));
  return state.has_value() && *state != 'Z';
}

// True once every thread of `pid` has entered the group stop. kill(SIGSTOP)
// returns before that: the threads stop one by one as each next runs, and
// until then they go on serving requests.
inline bool AllThreadsStopped(pid_t pid) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code error;
  bool any = false;
  for (const auto& task : std::filesystem::directory_iterator(tasks, error)) {
    const std::optional<char> state = TaskState(task.path().string());
    if (state != 'T' && state != 't') return false;
    any = true;
  }
  return any && !error;
}

// A cudafs mount on a fresh temporary directory, unmounted and removed on
// destruction.
class Mount {
 public:
  Mount() = default;
  Mount(const Mount&) = delete;
  Mount& operator=(const Mount&) = delete;
  ~Mount() { Unmount(); }

  // Runs `cudafs [source] MOUNTPOINT -o options` (extra_args appended) and
  // checks that it exits 0 with the mount in place.
  testing::AssertionResult Start(const std::vector<std::string>& options,
                                 const std::string& source = "",
                                 const std::vector<std::string>& extra_args = {}) {
    Unmount();
    char path[] = "/tmp/cudafs-test-XXXXXX";
    if (mkdtemp(path) == nullptr) {
      return testing::AssertionFailure() << "mkdtemp: " << ErrnoName(errno);
    }
    path_ = path;
    std::vector<std::string> argv = {kBinary};
    if (!source.empty()) argv.push_back(source);
    argv.push_back(path_);
    if (!options.empty()) argv.insert(argv.end(), {"-o", Join(options, ",")});
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    // Starting the CUDA backend creates a context, which can take seconds.
    const CommandResult result = RunCommand(argv, 60s);
    const std::string command = Join(argv, " ");
    if (result.exit_code != 0) {
      return testing::AssertionFailure() << "`" << command << "` exited " << result.exit_code
                                         << ": " << result.err;
    }
    const std::optional<MountEntry> entry = FindMount(path_);
    if (!entry) {
      return testing::AssertionFailure()
             << "`" << command << "` exited 0 but nothing is mounted on " << path_;
    }
    if (entry->fstype != "fuse.cudafs") {
      return testing::AssertionFailure()
             << "mounted with type " << entry->fstype << ", expected fuse.cudafs";
    }
    daemon_ = FindDaemon(path_);
    return testing::AssertionSuccess();
  }

  // Unmounts (fusermount3 -u, else umount -l), waits for the daemon to exit
  // (it may hold device memory the next mount wants) and removes the
  // mountpoint. Returns whether the mount is gone.
  bool Unmount() {
    if (path_.empty()) return true;
    if (IsMounted(path_)) RunCommand({"fusermount3", "-u", path_});
    if (IsMounted(path_)) RunCommand({"umount", "-l", path_});
    const bool gone = !IsMounted(path_);
    if (daemon_) Eventually([&] { return !ProcessAlive(*daemon_); }, 10s);
    if (gone) rmdir(path_.c_str());
    path_.clear();
    daemon_.reset();
    return gone;
  }

  const std::string& path() const { return path_; }
  // The daemon found right after mounting.
  std::optional<pid_t> daemon() const { return daemon_; }

 private:
  std::string path_;
  std::optional<pid_t> daemon_;
};

// Why tests cannot mount `backend` here, or nullopt if they can try.
inline std::optional<std::string> WhyCannotMount(const std::string& backend) {
  if (access(kBinary, X_OK) != 0) return std::string("no cudafs binary at ") + kBinary;
  Fd fuse(open("/dev/fuse", O_RDWR | O_CLOEXEC));
  if (!fuse.valid()) return "cannot open /dev/fuse: " + ErrnoName(errno);
  if (backend == "cuda") {
    static const bool has_gpu = RunCommand({kBinary, "--list-devices"}, 60s).exit_code == 0;
    if (!has_gpu) return std::string("no usable GPU (cudafs --list-devices failed)");
  }
  return std::nullopt;
}

// The directory of CUDAFS_TEST_DIR, or nullopt to test real mounts.
inline std::optional<std::string> TestDirFromEnv() {
  const char* dir = getenv("CUDAFS_TEST_DIR");
  if (dir == nullptr || *dir == '\0') return std::nullopt;
  return std::string(dir);
}

// The number in environment variable `name`, or `fallback` when it is unset
// or empty.
inline uint64_t EnvOrDefault(const char* name, uint64_t fallback) {
  const char* value = getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  return std::stoull(value);
}

inline bool MountFailuresAreFatal() {
  const char* value = getenv("CUDAFS_TEST_REQUIRE_MOUNT");
  return value != nullptr && *value != '\0' && std::string_view(value) != "0";
}

// Sets the process umask for the lifetime of a test, so that the modes of
// new files are predictable.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : saved_(umask(mask)) {}
  ScopedUmask(const ScopedUmask&) = delete;
  ScopedUmask& operator=(const ScopedUmask&) = delete;
  ~ScopedUmask() { umask(saved_); }

 private:
  mode_t saved_;
};

// Base for tests parameterized by backend ("host", "cuda") that start
// cudafs themselves: skips when the backend cannot run here or
// CUDAFS_TEST_DIR is set. Mounts nothing itself.
class BackendTest : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (TestDirFromEnv()) GTEST_SKIP() << "needs a cudafs mount (CUDAFS_TEST_DIR is set)";
    if (const auto why = WhyCannotMount(backend())) GTEST_SKIP() << *why;
  }

  const std::string& backend() const { return GetParam(); }

  // -o options for this backend, then CUDAFS_TEST_MOUNT_OPTIONS (a comma
  // list, how CI runs the suite over each FUSE transport), then `extra`,
  // which wins. allow_other lets the permission tests act as other users.
  std::vector<std::string> MountOptions(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> options = {"backend=" + backend(), "allow_other"};
    if (const char* from_env = getenv("CUDAFS_TEST_MOUNT_OPTIONS")) {
      std::istringstream list(from_env);
      for (std::string option; std::getline(list, option, ',');) {
        if (!option.empty()) options.push_back(option);
      }
    }
    options.insert(options.end(), extra.begin(), extra.end());
    return options;
  }

  // Starts `mount`; skips the test when cudafs cannot mount here (see the
  // file comment). Callers return when HasFatalFailure() or IsSkipped().
  void StartOrSkip(Mount& mount, const std::vector<std::string>& options,
                   const std::string& source = "") {
    const testing::AssertionResult started = mount.Start(options, source);
    if (started) return;
    if (MountFailuresAreFatal()) FAIL() << started.message();
    GTEST_SKIP() << "cudafs cannot mount here: " << started.message();
  }

 private:
  ScopedUmask umask_{022};
};

// Base for tests that need only a directory with filesystem semantics: a
// fresh cudafs mount, or a fresh subdirectory of CUDAFS_TEST_DIR.
class FsTest : public BackendTest {
 protected:
  void SetUp() override {
    if (const auto dir = TestDirFromEnv()) {
      // One run is enough: the backends differ only on real mounts.
      if (backend() != "host") GTEST_SKIP() << "CUDAFS_TEST_DIR runs the host instance only";
      std::string pattern = *dir + "/test-XXXXXX";
      ASSERT_NE(mkdtemp(pattern.data()), nullptr)
          << "mkdtemp in " << *dir << ": " << ErrnoName(errno);
      // Like the root of a fresh mount, so other users can work in it.
      ASSERT_SYS_OK(chmod(pattern.c_str(), 01777));
      root_ = pattern;
      test_dir_ = pattern;
      return;
    }
    BackendTest::SetUp();
    if (IsSkipped()) return;
    StartOrSkip(mount_, MountOptions());
    root_ = mount_.path();
  }

  void TearDown() override {
    if (test_dir_) {
      EXPECT_TRUE(ShellOk("rm -rf '" + *test_dir_ + "'"));
      return;
    }
    // A daemon that crashed leaves the mount answering ENOTCONN; say so
    // plainly instead of leaving it to the errors that follow.
    if (const auto pid = mount_.daemon(); pid && !ProcessAlive(*pid)) {
      ADD_FAILURE() << "the cudafs daemon (pid " << *pid << ") died during the test";
    }
    mount_.Unmount();
  }

  // True on a real cudafs mount, false under CUDAFS_TEST_DIR.
  bool on_cudafs() const { return !test_dir_.has_value(); }

  // Replaces the mount with one started with MountOptions(extra) (and
  // `source`). Only on a real mount: guard with SKIP_UNLESS_CUDAFS().
  testing::AssertionResult Remount(const std::vector<std::string>& extra,
                                   const std::string& source = "") {
    mount_.Unmount();
    testing::AssertionResult started = mount_.Start(MountOptions(extra), source);
    root_ = mount_.path();
    return started;
  }

  // The root of the filesystem under test, and paths below it.
  const std::string& root() const { return root_; }
  std::string Path(std::string_view relative) const { return root_ + "/" + std::string(relative); }

  Mount& mount() { return mount_; }

 private:
  Mount mount_;
  std::string root_;
  std::optional<std::string> test_dir_;
};

inline std::string BackendName(const testing::TestParamInfo<std::string>& info) {
  return info.param;
}

}  // namespace cudafs_test

// Skips tests that make sense only on a real cudafs mount.
#define SKIP_UNLESS_CUDAFS()                                                      \
  do {                                                                            \
    if (!on_cudafs()) GTEST_SKIP() << "needs a cudafs mount (CUDAFS_TEST_DIR is set)"; \
  } while (0)

// Runs `suite` once per backend; the cuda instance skips without a GPU.
#define CUDAFS_INSTANTIATE_BACKENDS(suite)                                       \
  INSTANTIATE_TEST_SUITE_P(Backends, suite, testing::Values("host", "cuda"), \
                           ::cudafs_test::BackendName)

#endif  // CUDAFS_TESTS_MOUNT_MOUNT_FIXTURE_H_
