// Differential POSIX tests: the same system-call scripts run on a tmpfs this
// test mounts itself and on a real cudafs mount (started with the fixture's
// MountOptions(), so CI's transport variable applies), and every step's
// results must agree: return values, errno, stat fields (type and mode,
// nlink, size, uid, gid, rdev, and which of atime/mtime/ctime the step
// changed), data read back, directory listings with d_type, xattr lists and
// `ls -l` output.
//
// Not compared, on purpose:
// - st_ino and st_dev: numbers each filesystem picks. Identity is compared
//   instead (SameFile steps; "replaced" when a watched name now names
//   another inode).
// - st_blocks and st_blksize: allocation accounting and a preferred I/O
//   size, each filesystem's own. tmpfs counts pages, cudafs its arena
//   blocks (powers of two, see README "Allocation"). `ls -l`'s "total" line
//   is the sum of st_blocks, so it is left out too.
// - Timestamp values, except ones a step sets explicitly: only which of
//   them a step changed (with kTimestampGap before each step that watches
//   them).
// - statfs sizes (f_blocks, f_bfree, f_files...): each is configured on its
//   own (tmpfs here size=1g; cudafs 50% of the device), so only the fields
//   that describe behaviour are compared, and f_ffree's change.
//
// Runs happen step by step, tmpfs first, and a failure names the first
// differing step with both records, then every later step that differs.
// Each test prints how many steps and fields it compared.
//
// Accepted differences are not skipped: each is an expectation about both
// sides (DifferenceRules() for ones that recur, ExpectDifference() on one
// step), so the test fails when either side stops behaving that way.
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/mount/mount.h"
#include "tests/mount/mount_fixture.h"
#include "tests/mount/mount_table.h"
#include "tests/support/errno_check.h"
#include "tests/support/fd.h"
#include "tests/support/file_io.h"
#include "tests/support/processes.h"
#include "tests/support/timestamps.h"

namespace cudafs_test {

using namespace std::chrono_literals;

namespace {

// FS_IOC_GETFLAGS from <linux/fs.h>, which clashes with <sys/mount.h>.
constexpr unsigned long kGetInodeFlags = 0x80086601;
constexpr long kTmpfsMagic = 0x01021994;
constexpr long kFuseMagic = 0x65735546;
// A group that neither test user belongs to (as in mount_metadata_test).
constexpr gid_t kThirdGid = 4242;
// Between a step's "before" stat and the step, so that the step's
// timestamps differ from earlier ones (the kernel's coarse clock ticks every
// 4 ms at HZ=250, and tmpfs' atime comes from it).
constexpr auto kTimestampGap = 11ms;
// Why an open that reads nothing may move a small file's atime on cudafs.
constexpr char kRelatimeAtOpen[] =
    "small files are read through the kernel's page cache, whose reads never reach cudafs: "
    "relatime applies at open for reading";

// ---------------------------------------------------------------------------
// Records

// A step's observations, in order: {"ret", "-1 ENOENT"}, {"f", "mode=..."}.
using Fields = std::vector<std::pair<std::string, std::string>>;

std::string Octal(unsigned long long value) {
  char text[32];
  std::snprintf(text, sizeof text, "%llo", value);
  return text;
}

std::string Hex(unsigned long long value) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%llx", value);
  return text;
}

// Printable ASCII as is, anything else as \xNN.
std::string Escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += c;
    } else {
      char code[8];
      std::snprintf(code, sizeof code, "\\x%02x", static_cast<unsigned>(c) & 0xff);
      out += code;
    }
  }
  return out;
}

// A path for messages: long components shortened to "aaaaaaaa...[255]".
std::string ShortPath(std::string_view path) {
  std::string out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view part = path.substr(start, end - start);
    if (part.size() > 32) {
      out += Escape(part.substr(0, 8)) + "...[" + std::to_string(part.size()) + "]";
    } else {
      out += Escape(part);
    }
    if (end == path.size()) break;
    out += '/';
    start = end + 1;
  }
  return out;
}

std::string ErrorText(int err) { return "-1 " + ErrnoName(err); }

// The outcome of a call that returns -1 and sets errno on failure.
Fields Ret(long long result) {
  const int err = errno;  // before anything can change it
  return {{"ret", result == -1 ? ErrorText(err) : std::to_string(result)}};
}

// open(2) and close at once: 0, or -1 with open's errno.
long long OpenClose(const char* path, int flags, mode_t mode = 0) {
  const int fd = open(path, flags, mode);
  if (fd < 0) return -1;
  close(fd);
  return 0;
}

// openat(2) and close at once.
long long OpenAtClose(int dir_fd, const char* path, int flags, mode_t mode = 0) {
  const int fd = openat(dir_fd, path, flags, mode);
  if (fd < 0) return -1;
  close(fd);
  return 0;
}

// File data as a record: short data literally, long data as length, count
// of nonzero bytes and a hash.
std::string DataSummary(std::string_view data) {
  if (data.size() <= 48) return "\"" + Escape(data) + "\"";
  uint64_t hash = 0xcbf29ce484222325ull;
  size_t nonzero = 0;
  for (char c : data) {
    hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    nonzero += c != 0;
  }
  return "len=" + std::to_string(data.size()) + " nonzero=" + std::to_string(nonzero) +
         " fnv=" + Hex(hash);
}

// Everything from offset 0 to the file's size, through the descriptor.
Fields ReadBack(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return Ret(-1);
  std::string data(st.st_size, '\0');
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = pread(fd, data.data() + done, data.size() - done, done);
    if (n < 0) return Ret(-1);
    if (n == 0) break;
    done += n;
  }
  data.resize(done);
  return {{"ret", "0"}, {"data", DataSummary(data)}};
}

// SEEK_DATA and SEEK_HOLE from each offset.
Fields Seeks(int fd, std::initializer_list<off_t> offsets) {
  Fields fields;
  for (off_t offset : offsets) {
    for (const auto& [whence, name] :
         {std::pair{SEEK_DATA, "data"}, std::pair{SEEK_HOLE, "hole"}}) {
      const off_t result = lseek(fd, offset, whence);
      fields.emplace_back(std::string(name) + "@" + std::to_string(offset),
                          result < 0 ? ErrorText(errno) : std::to_string(result));
    }
  }
  return fields;
}

char TypeLetter(unsigned char d_type) {
  switch (d_type) {
    case DT_REG:
      return 'f';
    case DT_DIR:
      return 'd';
    case DT_LNK:
      return 'l';
    case DT_FIFO:
      return 'p';
    case DT_SOCK:
      return 's';
    case DT_CHR:
      return 'c';
    case DT_BLK:
      return 'b';
    default:
      return '?';
  }
}

// "name:type" of every entry, sorted; nullopt (errno set) when the
// directory cannot be read.
std::optional<std::vector<std::string>> Entries(const char* path) {
  DIR* dir = opendir(path);
  if (dir == nullptr) return std::nullopt;
  std::vector<std::string> entries;
  errno = 0;
  while (const dirent* entry = readdir(dir)) {
    entries.push_back(ShortPath(entry->d_name) + ":" + TypeLetter(entry->d_type));
  }
  const int err = errno;
  closedir(dir);
  if (err != 0) {
    errno = err;
    return std::nullopt;
  }
  std::sort(entries.begin(), entries.end());
  return entries;
}

Fields ListFields(const char* path) {
  const auto entries = Entries(path);
  if (!entries) return Ret(-1);
  return {{"ret", "0"}, {"entries", Join(*entries, " ")}};
}

// Extended attribute names (sorted) with their value sizes.
Fields XattrFields(const char* path, bool follow) {
  std::string names(1 << 17, '\0');
  const ssize_t size = follow ? listxattr(path, names.data(), names.size())
                              : llistxattr(path, names.data(), names.size());
  if (size < 0) return Ret(-1);
  std::vector<std::string> listed;
  for (size_t start = 0; start < static_cast<size_t>(size);) {
    const size_t end = names.find('\0', start);
    const std::string name = names.substr(start, end - start);
    const ssize_t value = follow ? getxattr(path, name.c_str(), nullptr, 0)
                                 : lgetxattr(path, name.c_str(), nullptr, 0);
    listed.push_back(ShortPath(name) + "=" +
                     (value < 0 ? ErrnoName(errno) : std::to_string(value)));
    start = end + 1;
  }
  std::sort(listed.begin(), listed.end());
  return {{"ret", std::to_string(size)}, {"xattrs", Join(listed, " ")}};
}

bool SameTime(const timespec& a, const timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

// "mode=100644 nlink=1 uid=0 gid=0 size=3": what is compared of a stat.
// Directories leave their size to DirSize (see DifferenceRules).
std::string DescribeStat(const struct stat& st) {
  std::string text = "mode=" + Octal(st.st_mode) + " nlink=" + std::to_string(st.st_nlink) +
                     " uid=" + std::to_string(st.st_uid) + " gid=" + std::to_string(st.st_gid);
  if (!S_ISDIR(st.st_mode)) text += " size=" + std::to_string(st.st_size);
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
    text += " rdev=" + std::to_string(major(st.st_rdev)) + "," + std::to_string(minor(st.st_rdev));
  }
  return text;
}

// "size=N entries=E" of a directory (entries with "." and "..").
std::string DirSize(const char* path, const struct stat& st) {
  const auto entries = Entries(path);
  return "size=" + std::to_string(st.st_size) +
         " entries=" + (entries ? std::to_string(entries->size()) : ErrnoName(errno));
}

Fields StatFields(const std::string& key, const char* path, const struct stat& st) {
  Fields fields = {{key, DescribeStat(st)}};
  if (S_ISDIR(st.st_mode)) fields.emplace_back(key + " dirsize", DirSize(path, st));
  return fields;
}

// ---------------------------------------------------------------------------
// One side of the comparison: a fresh directory on tmpfs or on cudafs, and
// what the script keeps between steps there.

class Side {
 public:
  Side(std::string name, std::string root) : name_(std::move(name)), root_(std::move(root)) {
    root_fd_.Reset(open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }

  const std::string& name() const { return name_; }
  const std::string& root() const { return root_; }
  int root_fd() const { return root_fd_.get(); }

  std::string Path(std::string_view relative) const {
    if (relative.empty() || relative == ".") return root_;
    return root_ + "/" + std::string(relative);
  }
  // Path(relative) as a C string that lives until the next step.
  const char* c(std::string_view relative) {
    scratch_.push_back(Path(relative));
    return scratch_.back().c_str();
  }

  // Descriptors kept across steps, by name (-1: none).
  int fd(const std::string& name) const {
    const auto it = fds_.find(name);
    return it == fds_.end() ? -1 : it->second.get();
  }
  // Keeps `fd` (the result of an open) as `name`; records success as "fd".
  Fields Keep(const std::string& name, int fd) {
    const int err = errno;
    if (fd < 0) return {{"ret", ErrorText(err)}};
    fds_[name].Reset(fd);
    return {{"ret", "fd"}};
  }
  Fields CloseFd(const std::string& name) {
    auto it = fds_.find(name);
    if (it == fds_.end()) return {{"ret", "no such descriptor"}};
    const int result = it->second.Close();
    const Fields fields = Ret(result);
    fds_.erase(it);
    return fields;
  }
  std::string ProcFd(const std::string& name) const {
    return "/proc/self/fd/" + std::to_string(fd(name));
  }

  void NewStep() { scratch_.clear(); }

  // Notes the state of `relative` before a step that watches it.
  void Remember(const std::string& relative) {
    struct stat st;
    if (lstat(Path(relative).c_str(), &st) == 0) {
      seen_[relative] = st;
    } else {
      seen_.erase(relative);
    }
  }

  // The stat fields of `relative` and, after Remember(), which timestamps
  // changed since ("new": it did not exist then; "replaced": the name now
  // leads to another inode).
  Fields Observe(const std::string& relative) {
    const std::string key = ShortPath(relative);
    const std::string path = Path(relative);
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) {
      seen_.erase(relative);
      return {{key, ErrorText(errno)}};
    }
    std::string times;
    const auto before = seen_.find(relative);
    if (before == seen_.end()) {
      times = "new";
    } else if (before->second.st_ino != st.st_ino || before->second.st_dev != st.st_dev) {
      times = "replaced";
    } else {
      if (!SameTime(before->second.st_atim, st.st_atim)) times += 'a';
      if (!SameTime(before->second.st_mtim, st.st_mtim)) times += 'm';
      if (!SameTime(before->second.st_ctim, st.st_ctim)) times += 'c';
      if (times.empty()) times = "-";
    }
    seen_[relative] = st;
    // lstat before reading the directory (for DirSize): the read may
    // update its atime, which belongs to no step.
    Fields fields = StatFields(key, path.c_str(), st);
    fields.front().second += " times=" + times;
    return fields;
  }

 private:
  std::string name_;
  std::string root_;
  Fd root_fd_;
  std::deque<std::string> scratch_;
  std::map<std::string, Fd> fds_;
  std::map<std::string, struct stat> seen_;
};

// ---------------------------------------------------------------------------
// Users for the steps that drop privileges

struct User {
  const char* name;
  uid_t uid;
  gid_t gid;
  std::optional<gid_t> supplementary;
};
constexpr User kNobody{"nobody", kOtherUid, kOtherGid, std::nullopt};
constexpr User kOwner{"uid1000", kOwnerUid, kOwnerGid, std::nullopt};
constexpr User kMember{"uid1000+g4242", kOwnerUid, kOwnerGid, kThirdGid};
constexpr User kRoot{"root-child", 0, 0, std::nullopt};

// Runs `body` in a forked child with `user`'s credentials (setresuid and
// setresgid; no supplementary groups but the user's one) and returns its
// fields, passed back through a memfd.
Fields RunAsUser(const User& user, Side& side, const std::function<Fields(Side&)>& body) {
  Fd out(memfd_create("fields", MFD_CLOEXEC));
  if (!out.valid()) return {{"ret", "memfd_create failed"}};
  const pid_t pid = fork();
  if (pid < 0) return {{"ret", "fork failed"}};
  if (pid == 0) {
    std::vector<gid_t> groups;
    if (user.supplementary) groups.push_back(*user.supplementary);
    if (setgroups(groups.size(), groups.data()) != 0 ||
        setresgid(user.gid, user.gid, user.gid) != 0 ||
        setresuid(user.uid, user.uid, user.uid) != 0) {
      _exit(2);
    }
    std::string blob;
    for (const auto& [key, value] : body(side)) {
      blob += key;
      blob += '\0';
      blob += value;
      blob += '\0';
    }
    _exit(write(out.get(), blob.data(), blob.size()) == static_cast<ssize_t>(blob.size()) ? 0 : 3);
  }
  const std::optional<int> status = WaitForChild(pid, 30s);
  if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    return {{"ret", "child process failed"}};
  }
  const std::string blob = ReadWholeFd(out.get());
  Fields fields;
  for (size_t start = 0; start < blob.size();) {
    const size_t key_end = blob.find('\0', start);
    const size_t value_end = blob.find('\0', key_end + 1);
    fields.emplace_back(blob.substr(start, key_end - start),
                        blob.substr(key_end + 1, value_end - key_end - 1));
    start = value_end + 1;
  }
  return fields;
}

// ---------------------------------------------------------------------------
// Scripts

// A difference that one step is known to show, with both sides' values.
struct ExpectedDifference {
  std::string key;
  std::string tmpfs;
  std::string cudafs;
  std::string reason;
};

struct Step {
  std::string call;
  std::function<Fields(Side&)> run;
  // Paths (relative to the script's directory) whose stat is recorded after
  // the step, with the timestamps the step changed.
  std::vector<std::string> watch;
  std::vector<ExpectedDifference> expected;
};

using Watch = std::vector<std::string>;

class Script {
 public:
  using Body = std::function<Fields(Side&)>;
  using SysBody = std::function<long long(Side&)>;

  // A step with any fields.
  Script& Do(std::string call, Body body, Watch watch = {}) {
    steps_.push_back(Step{std::move(call), std::move(body), std::move(watch), {}});
    return *this;
  }
  // A system call: its return value or errno.
  Script& Sys(std::string call, SysBody body, Watch watch = {}) {
    return Do(
        std::move(call), [body](Side& x) { return Ret(body(x)); }, std::move(watch));
  }
  // The same in a child process running as `user`.
  Script& DoAs(const User& user, std::string call, Body body, Watch watch = {}) {
    return Do(
        "[" + std::string(user.name) + "] " + call,
        [user, body](Side& x) { return RunAsUser(user, x, body); }, std::move(watch));
  }
  Script& SysAs(const User& user, std::string call, SysBody body, Watch watch = {}) {
    return DoAs(
        user, std::move(call), [body](Side& x) { return Ret(body(x)); }, std::move(watch));
  }

  // lstat of a path (without timestamps).
  Script& Stat(const std::string& path) {
    return Do("lstat " + ShortPath(path), [path](Side& x) {
      struct stat st;
      if (lstat(x.c(path), &st) != 0) return Ret(-1);
      Fields fields = {{"ret", "0"}};
      for (auto& field : StatFields(ShortPath(path), x.c(path), st)) fields.push_back(field);
      return fields;
    });
  }
  // fstat of a kept descriptor.
  Script& FStat(const std::string& name) {
    return Do("fstat fd " + name, [name](Side& x) {
      struct stat st;
      if (fstat(x.fd(name), &st) != 0) return Ret(-1);
      Fields fields = {{"ret", "0"}, {"fd " + name, DescribeStat(st)}};
      if (S_ISDIR(st.st_mode)) {
        fields.emplace_back("fd " + name + " dirsize", DirSize(x.ProcFd(name).c_str(), st));
      }
      return fields;
    });
  }
  // atime and mtime values, for steps that set them explicitly.
  Script& Times(const std::string& path) {
    return Do("times of " + ShortPath(path), [path](Side& x) {
      struct stat st;
      if (lstat(x.c(path), &st) != 0) return Ret(-1);
      return Fields{{"ret", "0"},
                    {"atime", std::to_string(Nanos(st.st_atim))},
                    {"mtime", std::to_string(Nanos(st.st_mtim))}};
    });
  }
  Script& List(const std::string& dir) {
    return Do("readdir " + ShortPath(dir), [dir](Side& x) { return ListFields(x.c(dir)); });
  }
  // The whole file through open and read.
  Script& Read(const std::string& path) {
    return Do("read " + ShortPath(path), [path](Side& x) {
      Fd fd(open(x.c(path), O_RDONLY));
      if (!fd.valid()) return Ret(-1);
      return ReadBack(fd.get());
    });
  }
  Script& ReadFd(const std::string& name) {
    return Do("read fd " + name, [name](Side& x) { return ReadBack(x.fd(name)); });
  }
  Script& Readlink(const std::string& path) {
    return Do("readlink " + ShortPath(path), [path](Side& x) {
      std::string target(8192, '\0');
      const ssize_t n = readlink(x.c(path), target.data(), target.size());
      if (n < 0) return Ret(-1);
      target.resize(n);
      return Fields{{"ret", std::to_string(n)}, {"target", ShortPath(target)}};
    });
  }
  Script& Xattrs(const std::string& path, bool follow = true) {
    return Do(std::string(follow ? "listxattr " : "llistxattr ") + ShortPath(path),
              [path, follow](Side& x) { return XattrFields(x.c(path), follow); });
  }
  // Whether two paths name the same inode (lstat).
  Script& SameFile(const std::string& a, const std::string& b) {
    return Do("same inode? " + ShortPath(a) + " " + ShortPath(b), [a, b](Side& x) {
      struct stat sa, sb;
      if (lstat(x.c(a), &sa) != 0 || lstat(x.c(b), &sb) != 0) return Ret(-1);
      return Fields{{"same", sa.st_ino == sb.st_ino && sa.st_dev == sb.st_dev ? "yes" : "no"}};
    });
  }
  Script& Close(const std::string& name) {
    return Do("close fd " + name, [name](Side& x) { return x.CloseFd(name); });
  }

  // The last step shows an accepted difference in field `key`.
  Script& ExpectDifference(std::string key, std::string tmpfs, std::string cudafs,
                           std::string reason) {
    steps_.back().expected.push_back(
        {std::move(key), std::move(tmpfs), std::move(cudafs), std::move(reason)});
    return *this;
  }

  const std::vector<Step>& steps() const { return steps_; }

 private:
  std::vector<Step> steps_;
};

// ---------------------------------------------------------------------------
// Accepted differences that recur in many steps, by field-name suffix. Each
// says what both sides must show.

struct DifferenceRule {
  std::string suffix;
  std::string reason;
  std::function<bool(const std::string& tmpfs, const std::string& cudafs)> holds;
};

const std::vector<DifferenceRule>& DifferenceRules() {
  static const auto* rules = new std::vector<DifferenceRule>{
      {" dirsize",
       "directory st_size: tmpfs counts 20 bytes (BOGO_DIRENT_SIZE) per entry, '.' and '..' "
       "included; cudafs reports 0 (POSIX leaves a directory's size unspecified)",
       [](const std::string& tmpfs, const std::string& cudafs) {
         long long tmpfs_size = -1, tmpfs_entries = -1, cudafs_size = -1, cudafs_entries = -2;
         return std::sscanf(tmpfs.c_str(), "size=%lld entries=%lld", &tmpfs_size, &tmpfs_entries) ==
                    2 &&
                std::sscanf(cudafs.c_str(), "size=%lld entries=%lld", &cudafs_size,
                            &cudafs_entries) == 2 &&
                // A removed directory lists nothing but keeps its 40.
                tmpfs_entries == cudafs_entries &&
                tmpfs_size == 20 * std::max(tmpfs_entries, 2LL) && cudafs_size == 0;
       }},
      {" ls-dirsize",
       "the size column of `ls -l` for directories: st_size, see above (tmpfs: 20 bytes per "
       "entry, at least 40; cudafs: 0)",
       [](const std::string& tmpfs, const std::string& cudafs) {
         const long long size = std::atoll(tmpfs.c_str());
         return size >= 40 && size % 20 == 0 && cudafs == "0";
       }},
  };
  return *rules;
}

// What is wrong with a step's records (tmpfs, cudafs); empty when they agree
// or differ only as expected. Counts the accepted differences by reason.
std::vector<std::string> Compare(const Step& step, const Fields& tmpfs, const Fields& cudafs,
                                 std::map<std::string, int>& accepted) {
  const auto value_of = [](const Fields& record, const std::string& key) {
    for (const auto& [k, v] : record) {
      if (k == key) return v;
    }
    return std::string("<missing>");
  };
  std::vector<std::string> keys;
  for (const Fields* record : {&tmpfs, &cudafs}) {
    for (const auto& [key, value] : *record) {
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    }
  }
  std::vector<std::string> problems;
  for (const ExpectedDifference& expected : step.expected) {
    if (std::find(keys.begin(), keys.end(), expected.key) == keys.end()) {
      problems.push_back("expected a difference in field " + expected.key + ", which is missing");
    }
  }
  for (const std::string& key : keys) {
    const std::string t = value_of(tmpfs, key);
    const std::string c = value_of(cudafs, key);
    const std::string both = key + ": tmpfs \"" + t + "\", cudafs \"" + c + "\"";
    const auto expected = std::find_if(step.expected.begin(), step.expected.end(),
                                       [&](const ExpectedDifference& e) { return e.key == key; });
    if (expected != step.expected.end()) {
      if (t == expected->tmpfs && c == expected->cudafs) {
        ++accepted[expected->reason];
      } else {
        problems.push_back(both + " (expected tmpfs \"" + expected->tmpfs + "\", cudafs \"" +
                           expected->cudafs + "\": " + expected->reason + ")");
      }
      continue;
    }
    const auto rule =
        std::find_if(DifferenceRules().begin(), DifferenceRules().end(),
                     [&](const DifferenceRule& r) { return key.ends_with(r.suffix); });
    if (rule == DifferenceRules().end()) {
      if (t != c) problems.push_back(both);
    } else if (t == c) {
      problems.push_back(both + " no longer differ: update the rule (" + rule->reason + ")");
    } else if (rule->holds(t, c)) {
      ++accepted[rule->reason];
    } else {
      problems.push_back(both + " (not the accepted difference: " + rule->reason + ")");
    }
  }
  return problems;
}

// ---------------------------------------------------------------------------
// The fixture: a tmpfs and a cudafs mount, each with a fresh directory.

class DifferentialTest : public BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (geteuid() != 0) GTEST_SKIP() << "needs root: mounts a tmpfs and changes credentials";
    StartOrSkip(cudafs_, MountOptions());
    if (IsSkipped() || HasFatalFailure()) return;
    // The tmpfs gets the per-mount flags the cudafs mount has (libfuse mounts
    // nosuid,nodev), so that device nodes and set-id files behave alike.
    const std::optional<MountEntry> entry = FindMount(cudafs_.path());
    ASSERT_TRUE(entry);
    unsigned long flags = 0;
    std::istringstream options(entry->options);
    for (std::string option; std::getline(options, option, ',');) {
      if (option == "nosuid") flags |= MS_NOSUID;
      if (option == "nodev") flags |= MS_NODEV;
      if (option == "noexec") flags |= MS_NOEXEC;
      if (option == "noatime") flags |= MS_NOATIME;
      if (option == "ro") flags |= MS_RDONLY;
    }
    char dir[] = "/tmp/cudafs-diff-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr) << ErrnoName(errno);
    tmpfs_ = dir;
    ASSERT_SYS_OK(mount("tmpfs", dir, "tmpfs", flags, "size=1g,mode=1777"));
    tmpfs_mounted_ = true;
    // The same fresh directory on both.
    for (const std::string& root : {tmpfs_, cudafs_.path()}) {
      ASSERT_SYS_OK(mkdir((root + "/work").c_str(), 0755));
    }
  }

  void TearDown() override {
    if (const auto pid = cudafs_.daemon(); pid && !ProcessAlive(*pid)) {
      ADD_FAILURE() << "the cudafs daemon (pid " << *pid << ") died during the test";
    }
    cudafs_.Unmount();
    if (tmpfs_mounted_ && umount2(tmpfs_.c_str(), 0) != 0) {
      EXPECT_SYS_OK(umount2(tmpfs_.c_str(), MNT_DETACH));
    }
    if (!tmpfs_.empty()) rmdir(tmpfs_.c_str());
  }

  // Runs `script` on both sides, step by step (tmpfs first), and compares
  // the records. Reports the first differing step with both records, and
  // which later steps differ too.
  void Run(const Script& script) {
    Side tmpfs("tmpfs", tmpfs_ + "/work");
    Side cudafs("cudafs", cudafs_.path() + "/work");
    ASSERT_GE(tmpfs.root_fd(), 0);
    ASSERT_GE(cudafs.root_fd(), 0);
    Side* const sides[] = {&tmpfs, &cudafs};

    int steps = 0, fields = 0;            // compared
    std::map<std::string, int> accepted;  // reason -> how many fields
    std::string first_report;
    std::vector<std::string> later;
    for (size_t i = 0; i < script.steps().size(); ++i) {
      const Step& step = script.steps()[i];
      Fields records[2];
      for (Side* side : sides) {
        side->NewStep();
        for (const std::string& path : step.watch) side->Remember(path);
      }
      if (!step.watch.empty()) std::this_thread::sleep_for(kTimestampGap);
      for (int s = 0; s < 2; ++s) {
        records[s] = step.run(*sides[s]);
        // Paths in records (readlink, ls ...) name each side's own root.
        for (auto& [key, value] : records[s]) {
          for (std::string* text : {&key, &value}) {
            for (size_t at; (at = text->find(sides[s]->root())) != std::string::npos;) {
              text->replace(at, sides[s]->root().size(), "$ROOT");
            }
          }
        }
      }
      for (int s = 0; s < 2; ++s) {
        for (const std::string& path : step.watch) {
          for (auto& field : sides[s]->Observe(path)) records[s].push_back(field);
        }
      }
      ++steps;
      fields += records[0].size();

      const std::vector<std::string> problems = Compare(step, records[0], records[1], accepted);
      if (problems.empty()) continue;
      const std::string where = "step " + std::to_string(i + 1) + " `" + step.call + "`";
      if (first_report.empty()) {
        first_report = where + " differs:\n";
        for (const std::string& problem : problems) first_report += "  " + problem + "\n";
        for (int s = 0; s < 2; ++s) {
          first_report += "  " + sides[s]->name() + " record:\n";
          for (const auto& [key, value] : records[s]) {
            first_report += "    " + key + " = " + value + "\n";
          }
        }
      } else {
        later.push_back(where + ": " + Join(problems, "; "));
      }
    }
    if (!first_report.empty()) {
      std::string message = first_report;
      if (!later.empty()) {
        message += std::to_string(later.size()) + " later steps differ too:\n";
        for (const std::string& line : later) message += "  " + line + "\n";
      }
      ADD_FAILURE() << message;
    }
    int accepted_fields = 0;
    for (const auto& [reason, count] : accepted) accepted_fields += count;
    std::printf(
        "[ %s ] %d steps compared (%d fields), %zu differing steps, %d accepted "
        "differences\n",
        testing::UnitTest::GetInstance()->current_test_info()->name(), steps, fields,
        later.size() + (first_report.empty() ? 0 : 1), accepted_fields);
    for (const auto& [reason, count] : accepted) {
      std::printf("    accepted x%d: %s\n", count, reason.c_str());
    }
    std::fflush(stdout);
  }

  Mount cudafs_;
  std::string tmpfs_;
  bool tmpfs_mounted_ = false;
};

// ---------------------------------------------------------------------------
// Step helpers

long long Rename2(Side& x, std::string_view from, std::string_view to, unsigned flags) {
  return syscall(SYS_renameat2, AT_FDCWD, x.c(from), AT_FDCWD, x.c(to), flags);
}

long long Utimes(const char* path, timespec atime, timespec mtime, int flags = 0) {
  const timespec times[2] = {atime, mtime};
  return utimensat(AT_FDCWD, path, times, flags);
}

long long WriteString(int fd, std::string_view data) { return write(fd, data.data(), data.size()); }

long long PwriteString(int fd, std::string_view data, off_t offset) {
  return pwrite(fd, data.data(), data.size(), offset);
}

// Creates `path` with `data` (mode 0644 before the umask).
long long Create(const char* path, std::string_view data, mode_t mode = 0644) {
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
  if (fd < 0) return -1;
  const ssize_t n = write(fd, data.data(), data.size());
  const int err = errno;
  close(fd);
  errno = err;
  return n == static_cast<ssize_t>(data.size()) ? 0 : -1;
}

// mkdir with an exact mode (umask 0 for the call).
long long MkdirExact(const char* path, mode_t mode) {
  const mode_t saved = umask(0);
  const int result = mkdir(path, mode);
  const int err = errno;
  umask(saved);
  errno = err;
  return result;
}

Fields GetXattr(const char* path, const std::string& name, size_t size, bool follow = true) {
  std::string value(size, '\0');
  const ssize_t n = follow ? getxattr(path, name.c_str(), size ? value.data() : nullptr, size)
                           : lgetxattr(path, name.c_str(), size ? value.data() : nullptr, size);
  if (n < 0) return Ret(-1);
  Fields fields = {{"ret", std::to_string(n)}};
  if (size > 0) fields.emplace_back("value", DataSummary(value.substr(0, n)));
  return fields;
}

// ---------------------------------------------------------------------------
// Names and limits

TEST_P(DifferentialTest, NamesAndLimits) {
  Script s;
  for (char c : {'a', 'b'}) {
    for (size_t length : {255, 256}) {
      const std::string name(length, c);
      if (c == 'a') {
        s.Sys("creat " + ShortPath(name),
              [name](Side& x) { return OpenClose(x.c(name), O_CREAT | O_WRONLY, 0644); },
              {".", name});
      } else {
        s.Sys("mkdir " + ShortPath(name), [name](Side& x) { return mkdir(x.c(name), 0755); },
              {".", name});
      }
    }
  }
  const std::string a255(255, 'a'), b255(255, 'b');
  for (size_t length : {255, 256}) {
    const std::string sym(length, 'c'), fifo(length, 'd'), hard(length, 'e'), moved(length, 'f');
    s.Sys("symlink -> " + ShortPath(sym), [sym](Side& x) { return symlink("target", x.c(sym)); },
          {".", sym});
    s.Sys("mkfifo " + ShortPath(fifo), [fifo](Side& x) { return mkfifo(x.c(fifo), 0644); },
          {".", fifo});
    s.Sys("link a255 " + ShortPath(hard),
          [a255, hard](Side& x) { return link(x.c(a255), x.c(hard)); }, {".", a255, hard});
    s.Sys("mkdir b255/" + ShortPath(moved),
          [b255, moved](Side& x) { return mkdir(x.c(b255 + "/" + moved), 0755); }, {b255});
  }
  s.Sys("rename e255 -> 256 bytes",
        [](Side& x) { return rename(x.c(std::string(255, 'e')), x.c(std::string(256, 'f'))); },
        {"."});
  s.Sys("rename e255 -> f255",
        [](Side& x) { return rename(x.c(std::string(255, 'e')), x.c(std::string(255, 'f'))); },
        {".", std::string(255, 'f')});
  // Every lookup of a 256-byte name.
  const std::string g256(256, 'g');
  s.Do("calls on a 256-byte name", [g256](Side& x) {
    struct stat st;
    const char* path = x.c(g256);
    char buffer[16];
    const auto r = [](long long result) { return Ret(result)[0].second; };
    return Fields{{"stat", r(stat(path, &st))},
                  {"lstat", r(lstat(path, &st))},
                  {"open", r(OpenClose(path, O_RDONLY))},
                  {"access", r(access(path, F_OK))},
                  {"unlink", r(unlink(path))},
                  {"rmdir", r(rmdir(path))},
                  {"chmod", r(chmod(path, 0644))},
                  {"truncate", r(truncate(path, 0))},
                  {"readlink", r(readlink(path, buffer, sizeof buffer))},
                  {"getxattr", r(getxattr(path, "user.x", buffer, sizeof buffer))},
                  {"utimensat", r(utimensat(AT_FDCWD, path, nullptr, 0))}};
  });
  // Names may hold any byte but '/' and NUL.
  const std::vector<std::string> odd = {"\x01\x02\x7f\xfe\xff",
                                        " leading space",
                                        "trailing space ",
                                        "-dash",
                                        "...",
                                        ".hidden",
                                        "new\nline",
                                        "tab\tname",
                                        "back\\slash",
                                        "\xc3\xbc\xc3\xb1\xc3\xaf",
                                        "*?[]{}$'\"",
                                        std::string(1, '\x80')};
  s.Do("create names with odd bytes",
       [odd](Side& x) {
         Fields fields;
         for (const std::string& name : odd) {
           fields.emplace_back(Escape(name),
                               Ret(OpenClose(x.c(name), O_CREAT | O_WRONLY, 0644))[0].second);
         }
         return fields;
       },
       {"."});
  s.List(".");
  s.SameFile("...", "./...");
  // Paths: PATH_MAX (4096 with the NUL) is the VFS' limit.
  s.Sys("creat short", [](Side& x) { return OpenClose(x.c("short"), O_CREAT | O_WRONLY, 0644); });
  for (size_t length : {4095, 4096}) {
    s.Sys("openat a path of " + std::to_string(length) + " bytes", [length](Side& x) {
      std::string path;
      while (path.size() + 2 + 5 <= length) path += "./";
      path += std::string(length - path.size() - 5, '/') + "short";
      return OpenAtClose(x.root_fd(), path.c_str(), O_RDONLY);
    });
  }
  s.Sys("openat empty path", [](Side& x) { return OpenAtClose(x.root_fd(), "", O_RDONLY); });
  // Deep nesting.
  s.Do("mkdir 64 levels deep",
       [](Side& x) {
         std::string path = "deep";
         for (int i = 0; i < 64; ++i) {
           if (mkdir(x.c(path), 0755) != 0) return Ret(-1);
           path += "/" + std::string(40, 'n');
         }
         return Ret(OpenClose(x.c(path), O_CREAT | O_WRONLY, 0600));
       },
       {"deep"});
  // Symlink targets: up to 4095 bytes.
  s.Sys("symlink with a 4095-byte target",
        [](Side& x) { return symlink(std::string(4095, 'x').c_str(), x.c("long-target")); },
        {".", "long-target"});
  s.Readlink("long-target");
  s.Sys("stat through it (a 4095-byte component)", [](Side& x) {
    struct stat st;
    return stat(x.c("long-target"), &st);
  });
  s.Sys("symlink with a 4096-byte target",
        [](Side& x) { return symlink(std::string(4096, 'x').c_str(), x.c("too-long-target")); },
        {"."});
  s.Sys("symlink with an empty target", [](Side& x) { return symlink("", x.c("empty-target")); });
  // Trailing slashes.
  s.Sys("stat short/", [](Side& x) {
    struct stat st;
    return stat(x.c("short/"), &st);
  });
  s.Sys("creat new/", [](Side& x) { return OpenClose(x.c("new/"), O_CREAT | O_WRONLY, 0644); });
  s.Sys("mkdir newdir/", [](Side& x) { return mkdir(x.c("newdir/"), 0755); }, {".", "newdir"});
  s.Sys("rename newdir/ renamed/", [](Side& x) { return rename(x.c("newdir/"), x.c("renamed/")); },
        {".", "renamed"});
  s.Sys("rename short short2/", [](Side& x) { return rename(x.c("short"), x.c("short2/")); });
  s.Sys("symlink x sl/", [](Side& x) { return symlink("x", x.c("sl/")); });
  s.Sys("link short hl/", [](Side& x) { return link(x.c("short"), x.c("hl/")); });
  s.Sys("rmdir renamed/", [](Side& x) { return rmdir(x.c("renamed/")); }, {"."});
  s.Sys("unlink short/", [](Side& x) { return unlink(x.c("short/")); });
  // A directory read in several getdents batches.
  s.Do("create 300 files in many/",
       [](Side& x) {
         if (mkdir(x.c("many"), 0755) != 0) return Ret(-1);
         for (int i = 0; i < 300; ++i) {
           if (OpenClose(x.c("many/file-with-a-longish-name-" + std::to_string(i)),
                         O_CREAT | O_WRONLY, 0644) != 0) {
             return Ret(-1);
           }
         }
         return Ret(0);
       },
       {"many"});
  s.List("many");
  s.Do("unlink every third, list",
       [](Side& x) {
         for (int i = 0; i < 300; i += 3) {
           if (unlink(x.c("many/file-with-a-longish-name-" + std::to_string(i))) != 0)
             return Ret(-1);
         }
         return ListFields(x.c("many"));
       },
       {"many"});
  // statfs: what describes behaviour is compared, sizes are configuration.
  s.Do("statfs",
       [](Side& x) {
         struct statfs st;
         if (statfs(x.c("."), &st) != 0) return Ret(-1);
         const long mask = ST_RDONLY | ST_NOSUID | ST_NODEV | ST_NOEXEC | ST_SYNCHRONOUS |
                           ST_MANDLOCK | ST_NOATIME | ST_NODIRATIME | ST_RELATIME;
         return Fields{{"f_type", Hex(st.f_type)},
                       {"f_bsize", std::to_string(st.f_bsize)},
                       {"f_frsize", std::to_string(st.f_frsize)},
                       {"f_namelen", std::to_string(st.f_namelen)},
                       {"f_flags", Hex(st.f_flags & mask)}};
       })
      .ExpectDifference("f_type", Hex(kTmpfsMagic), Hex(kFuseMagic),
                        "statfs f_type names the filesystem type (TMPFS_MAGIC, FUSE_SUPER_MAGIC)");
  s.Do("statfs f_ffree/f_files across creating 3 files", [](Side& x) {
    struct statfs before, after;
    if (statfs(x.c("."), &before) != 0) return Ret(-1);
    for (const char* name : {"i1", "i2", "i3"}) {
      if (OpenClose(x.c(name), O_CREAT | O_WRONLY, 0644) != 0) return Ret(-1);
    }
    if (statfs(x.c("."), &after) != 0) return Ret(-1);
    return Fields{{"f_ffree drop", std::to_string(before.f_ffree - after.f_ffree)},
                  {"f_files change", std::to_string(after.f_files - before.f_files)}};
  });
  Run(s);
}

// ---------------------------------------------------------------------------
// "." and ".."

TEST_P(DifferentialTest, DotAndDotDot) {
  Script s;
  s.Sys("mkdir d", [](Side& x) { return mkdir(x.c("d"), 0755); }, {".", "d"});
  s.Sys("creat d/f", [](Side& x) { return Create(x.c("d/f"), "data"); }, {"d", "d/f"});
  s.SameFile("d/.", "d");
  s.SameFile("d/..", ".");
  s.SameFile("d/../d/./f", "d/f");
  s.Stat("d/.");
  s.Stat("d/..");
  s.List("d");
  for (const char* name : {".", "..", "d/.", "d/.."}) {
    const std::string path = name;
    s.Sys("mkdir " + path, [path](Side& x) { return mkdir(x.c(path), 0755); }, {"."});
    s.Sys("rmdir " + path, [path](Side& x) { return rmdir(x.c(path)); }, {"."});
    s.Sys("unlink " + path, [path](Side& x) { return unlink(x.c(path)); });
    s.Sys("rename " + path + " x", [path](Side& x) { return rename(x.c(path), x.c("x")); });
    s.Sys("rename d/f " + path, [path](Side& x) { return rename(x.c("d/f"), x.c(path)); });
    s.Sys("link d/f " + path, [path](Side& x) { return link(x.c("d/f"), x.c(path)); });
    s.Sys("link " + path + " y", [path](Side& x) { return link(x.c(path), x.c("y")); });
    s.Sys("symlink t " + path, [path](Side& x) { return symlink("t", x.c(path)); });
    s.Sys("mkfifo " + path, [path](Side& x) { return mkfifo(x.c(path), 0644); });
    s.Sys("open " + path + " O_RDWR", [path](Side& x) { return OpenClose(x.c(path), O_RDWR); });
    s.Sys("open " + path + " O_WRONLY|O_CREAT",
          [path](Side& x) { return OpenClose(x.c(path), O_WRONLY | O_CREAT, 0644); });
    s.Sys("open " + path + " O_RDONLY|O_DIRECTORY",
          [path](Side& x) { return OpenClose(x.c(path), O_RDONLY | O_DIRECTORY); });
    s.Sys("open " + path + " O_CREAT|O_EXCL",
          [path](Side& x) { return OpenClose(x.c(path), O_RDONLY | O_CREAT | O_EXCL, 0644); });
  }
  s.Sys("creat d/./g", [](Side& x) { return Create(x.c("d/./g"), ""); }, {"d", "d/g"});
  s.Sys("stat d/f/.", [](Side& x) {
    struct stat st;
    return stat(x.c("d/f/."), &st);
  });
  s.Sys("stat d/f/..", [](Side& x) {
    struct stat st;
    return stat(x.c("d/f/.."), &st);
  });
  s.Sys("stat d/missing/..", [](Side& x) {
    struct stat st;
    return stat(x.c("d/missing/.."), &st);
  });
  // nlink of directories follows their subdirectories.
  s.Sys("mkdir d/s1", [](Side& x) { return mkdir(x.c("d/s1"), 0755); }, {".", "d", "d/s1"});
  s.Sys("mkdir d/s2", [](Side& x) { return mkdir(x.c("d/s2"), 0755); }, {"d", "d/s2"});
  s.Sys("mkdir d/s1/t", [](Side& x) { return mkdir(x.c("d/s1/t"), 0755); }, {"d", "d/s1"});
  s.Sys("rmdir d/s1 (not empty)", [](Side& x) { return rmdir(x.c("d/s1")); }, {"d"});
  s.Sys("rmdir d/s1/t", [](Side& x) { return rmdir(x.c("d/s1/t")); }, {"d", "d/s1"});
  s.Sys("rmdir d/s1", [](Side& x) { return rmdir(x.c("d/s1")); }, {"d"});
  s.Sys("rename d/s2 s2", [](Side& x) { return rename(x.c("d/s2"), x.c("s2")); }, {".", "d", "s2"});
  s.SameFile("s2/..", ".");
  s.Sys("chmod d/. 0700", [](Side& x) { return chmod(x.c("d/."), 0700); }, {"d"});
  // A removed directory that is still open.
  s.Sys("mkdir gone", [](Side& x) { return mkdir(x.c("gone"), 0755); });
  s.Do("open gone",
       [](Side& x) { return x.Keep("gone", open(x.c("gone"), O_RDONLY | O_DIRECTORY)); });
  s.Sys("rmdir gone", [](Side& x) { return rmdir(x.c("gone")); }, {"."});
  s.FStat("gone");
  s.Do("getdents on removed dir", [](Side& x) {
    // fdopendir takes the descriptor over: a duplicate, opened through it.
    const int dir_fd = openat(x.fd("gone"), ".", O_RDONLY | O_DIRECTORY);
    if (dir_fd < 0) return Ret(-1);
    DIR* dir = fdopendir(dir_fd);
    if (dir == nullptr) {
      close(dir_fd);
      return Ret(-1);
    }
    std::vector<std::string> names;
    while (const dirent* entry = readdir(dir)) names.emplace_back(entry->d_name);
    closedir(dir);
    return Fields{{"entries", Join(names, " ")}};
  });
  s.Sys("openat(gone, x, O_CREAT)",
        [](Side& x) { return OpenAtClose(x.fd("gone"), "x", O_CREAT | O_WRONLY, 0644); });
  s.Sys("openat(gone, ..)", [](Side& x) { return OpenAtClose(x.fd("gone"), "..", O_RDONLY); });
  s.Sys("mkdirat(gone, sub)", [](Side& x) { return mkdirat(x.fd("gone"), "sub", 0755); });
  s.Close("gone");
  s.List(".");
  Run(s);
}

// ---------------------------------------------------------------------------
// Symlinks and ELOOP

TEST_P(DifferentialTest, SymlinksAndLoops) {
  Script s;
  s.Sys("creat f", [](Side& x) { return Create(x.c("f"), "data"); }, {".", "f"});
  // Linux follows at most 40 links in one lookup (MAXSYMLINKS).
  s.Do("symlink chain l1 -> f ... l40 -> l39",
       [](Side& x) {
         for (int i = 1; i <= 40; ++i) {
           const std::string target = i == 1 ? "f" : "l" + std::to_string(i - 1);
           if (symlink(target.c_str(), x.c("l" + std::to_string(i))) != 0) return Ret(-1);
         }
         return Ret(0);
       },
       {"."});
  s.Read("l40");
  s.Sys("symlink l41 -> l40", [](Side& x) { return symlink("l40", x.c("l41")); }, {".", "l41"});
  s.Read("l41");
  s.Sys("stat l41", [](Side& x) {
    struct stat st;
    return stat(x.c("l41"), &st);
  });
  s.Stat("l41");
  s.Readlink("l41");
  s.Sys("chmod l41", [](Side& x) { return chmod(x.c("l41"), 0600); });
  s.Sys("truncate l41", [](Side& x) { return truncate(x.c("l41"), 0); });
  s.Sys("open l41 O_CREAT",
        [](Side& x) { return OpenClose(x.c("l41"), O_CREAT | O_WRONLY, 0644); });
  // Directory links in the middle of a path count too.
  s.Sys("mkdir dir", [](Side& x) { return mkdir(x.c("dir"), 0755); }, {".", "dir"});
  s.Sys("creat dir/inner", [](Side& x) { return Create(x.c("dir/inner"), "inner"); }, {"dir"});
  s.Do("symlink chain d1 -> dir ... d41 -> d40", [](Side& x) {
    for (int i = 1; i <= 41; ++i) {
      const std::string target = i == 1 ? "dir" : "d" + std::to_string(i - 1);
      if (symlink(target.c_str(), x.c("d" + std::to_string(i))) != 0) return Ret(-1);
    }
    return Ret(0);
  });
  s.Read("d40/inner");
  s.Read("d41/inner");
  s.Read("d39/../f");
  // Loops.
  s.Sys("symlink loopa -> loopb", [](Side& x) { return symlink("loopb", x.c("loopa")); });
  s.Sys("symlink loopb -> loopa", [](Side& x) { return symlink("loopa", x.c("loopb")); });
  s.Sys("symlink self -> self", [](Side& x) { return symlink("self", x.c("self")); });
  s.Sys("symlink viadir -> viadir/x", [](Side& x) { return symlink("viadir/x", x.c("viadir")); });
  for (const char* name : {"loopa", "self", "self/x", "viadir", "loopb/"}) {
    const std::string path = name;
    s.Sys("stat " + path, [path](Side& x) {
      struct stat st;
      return stat(x.c(path), &st);
    });
    s.Sys("open " + path + " O_CREAT",
          [path](Side& x) { return OpenClose(x.c(path), O_CREAT | O_WRONLY, 0644); });
    s.Sys("mkdir " + path, [path](Side& x) { return mkdir(x.c(path), 0755); });
    s.Sys("access " + path, [path](Side& x) { return access(x.c(path), F_OK); });
  }
  s.Stat("loopa");
  s.Readlink("loopb");
  s.Sys("rename loopa loopc", [](Side& x) { return rename(x.c("loopa"), x.c("loopc")); });
  s.Sys("unlink loopb", [](Side& x) { return unlink(x.c("loopb")); }, {"."});
  // Dangling links: open(O_CREAT) creates the target; O_EXCL does not follow.
  s.Sys("symlink dangling -> missing", [](Side& x) { return symlink("missing", x.c("dangling")); },
        {".", "dangling"});
  s.Sys("stat dangling", [](Side& x) {
    struct stat st;
    return stat(x.c("dangling"), &st);
  });
  s.Sys("open dangling O_RDONLY", [](Side& x) { return OpenClose(x.c("dangling"), O_RDONLY); });
  s.Sys("open dangling O_CREAT|O_EXCL",
        [](Side& x) { return OpenClose(x.c("dangling"), O_CREAT | O_EXCL | O_WRONLY, 0644); });
  s.Sys("open dangling O_CREAT",
        [](Side& x) { return OpenClose(x.c("dangling"), O_CREAT | O_WRONLY, 0600); },
        {".", "dangling", "missing"});
  s.Sys("open dangling O_CREAT|O_EXCL (target exists)",
        [](Side& x) { return OpenClose(x.c("dangling"), O_CREAT | O_EXCL | O_WRONLY, 0644); });
  s.Sys("symlink dangling-dir -> nodir/",
        [](Side& x) { return symlink("nodir/", x.c("dangling-dir")); });
  s.Sys("open dangling-dir O_CREAT",
        [](Side& x) { return OpenClose(x.c("dangling-dir"), O_CREAT | O_WRONLY, 0600); });
  s.Sys("mkdir dangling", [](Side& x) { return mkdir(x.c("dangling"), 0755); });
  // O_NOFOLLOW and O_PATH.
  s.Sys("open l1 O_NOFOLLOW", [](Side& x) { return OpenClose(x.c("l1"), O_RDONLY | O_NOFOLLOW); });
  s.Sys("open d1 O_DIRECTORY|O_NOFOLLOW",
        [](Side& x) { return OpenClose(x.c("d1"), O_RDONLY | O_DIRECTORY | O_NOFOLLOW); });
  s.Sys("open d1 O_DIRECTORY",
        [](Side& x) { return OpenClose(x.c("d1"), O_RDONLY | O_DIRECTORY); });
  s.Do("open l1 O_PATH|O_NOFOLLOW",
       [](Side& x) { return x.Keep("path", open(x.c("l1"), O_PATH | O_NOFOLLOW)); });
  s.FStat("path");
  s.Do("readlinkat(fd, \"\")", [](Side& x) {
    char target[64];
    const ssize_t n = readlinkat(x.fd("path"), "", target, sizeof target);
    if (n < 0) return Ret(-1);
    return Fields{{"target", std::string(target, n)}};
  });
  s.Close("path");
  // Through a link to a directory.
  s.Sys("symlink ld -> dir", [](Side& x) { return symlink("dir", x.c("ld")); });
  s.Sys("creat ld/new", [](Side& x) { return Create(x.c("ld/new"), "n"); }, {"dir", "dir/new"});
  s.List("ld");
  s.List("ld/");
  s.Sys("rmdir ld", [](Side& x) { return rmdir(x.c("ld")); });
  s.Sys("rmdir ld/", [](Side& x) { return rmdir(x.c("ld/")); });
  s.Sys("unlink ld/", [](Side& x) { return unlink(x.c("ld/")); });
  s.Sys("rename ld/ ld2", [](Side& x) { return rename(x.c("ld/"), x.c("ld2")); });
  s.Sys("stat l1/", [](Side& x) {
    struct stat st;
    return stat(x.c("l1/"), &st);
  });
  s.Sys("stat f/x", [](Side& x) {
    struct stat st;
    return stat(x.c("f/x"), &st);
  });
  // Relative and absolute targets.
  s.Sys("symlink up -> ../work/f", [](Side& x) { return symlink("../work/f", x.c("up")); });
  s.Read("up");
  s.Do("symlink abs -> $ROOT/f",
       [](Side& x) { return Ret(symlink(x.Path("f").c_str(), x.c("abs"))); });
  s.Read("abs");
  s.Readlink("abs");
  s.Do("readlink with a 3-byte buffer", [](Side& x) {
    char target[3];
    const ssize_t n = readlink(x.c("up"), target, sizeof target);
    if (n < 0) return Ret(-1);
    return Fields{{"ret", std::to_string(n)}, {"target", std::string(target, n)}};
  });
  s.Sys("readlink a file", [](Side& x) {
    char b[8];
    return readlink(x.c("f"), b, sizeof b);
  });
  s.Sys("readlink a directory", [](Side& x) {
    char b[8];
    return readlink(x.c("dir"), b, sizeof b);
  });
  // Calls that follow the link act on the target; l* calls on the link.
  s.Sys("chmod l1 0600", [](Side& x) { return chmod(x.c("l1"), 0600); }, {"f", "l1"});
  s.Sys("chown l1 1000:1000", [](Side& x) { return chown(x.c("l1"), kOwnerUid, kOwnerGid); },
        {"f", "l1"});
  s.Sys("lchown l1 65534:65534", [](Side& x) { return lchown(x.c("l1"), kOtherUid, kOtherGid); },
        {"f", "l1"});
  s.Sys("fchmodat l1 AT_SYMLINK_NOFOLLOW",
        [](Side& x) { return fchmodat(AT_FDCWD, x.c("l1"), 0644, AT_SYMLINK_NOFOLLOW); },
        {"f", "l1"});
  s.Sys("utimensat l1 AT_SYMLINK_NOFOLLOW",
        [](Side& x) {
          return Utimes(x.c("l1"), {100, 1}, {200, 2}, AT_SYMLINK_NOFOLLOW);
        },
        {"f", "l1"});
  s.Times("l1");
  // (Steps that follow l1 do not watch its atime: SymlinkAtime does.)
  s.Sys("utimensat l1", [](Side& x) { return Utimes(x.c("l1"), {300, 3}, {400, 4}); }, {"f"});
  s.Times("f");
  s.Sys("truncate l1 2", [](Side& x) { return truncate(x.c("l1"), 2); }, {"f", "l1"});
  s.Read("f");
  s.Sys("setxattr l1 user.a", [](Side& x) { return setxattr(x.c("l1"), "user.a", "1", 1, 0); },
        {"f", "l1"});
  s.Sys("lsetxattr l1 user.b", [](Side& x) { return lsetxattr(x.c("l1"), "user.b", "1", 1, 0); },
        {"l1"});
  s.Do("lgetxattr l1 user.a", [](Side& x) { return GetXattr(x.c("l1"), "user.a", 8, false); });
  s.Xattrs("l1", false);
  s.Xattrs("l1", true);
  // link(2) does not follow; linkat(AT_SYMLINK_FOLLOW) does.
  s.Sys("link l1 hl", [](Side& x) { return link(x.c("l1"), x.c("hl")); }, {"l1", "hl", "f"});
  s.Sys("linkat l1 hf AT_SYMLINK_FOLLOW",
        [](Side& x) { return linkat(AT_FDCWD, x.c("l1"), AT_FDCWD, x.c("hf"), AT_SYMLINK_FOLLOW); },
        {"hf", "f"});
  s.SameFile("hf", "f");
  s.SameFile("hl", "l1");
  s.Sys("rename l2 over f", [](Side& x) { return rename(x.c("l2"), x.c("f")); }, {".", "f"});
  s.Readlink("f");
  s.Read("l3");  // l3 -> l2, which is gone
  s.List(".");
  Run(s);
}

// Reading a symlink (readlink(2), or following it in a path) is an access:
// tmpfs updates the link's atime under relatime (touch_atime in
// do_readlinkat and pick_link). The kernel sends FUSE_READLINK each time
// (cudafs does not ask for FUSE_CAP_CACHE_SYMLINKS), and
// Filesystem::ReadLink applies the same rules (found by this test).
TEST_P(DifferentialTest, SymlinkAtime) {
  Script s;
  s.Sys("creat f", [](Side& x) { return Create(x.c("f"), "f"); });
  s.Sys("symlink s -> f", [](Side& x) { return symlink("f", x.c("s")); }, {"s"});
  s.Sys("readlink s",
        [](Side& x) {
          char b[8];
          return readlink(x.c("s"), b, sizeof b);
        },
        {"s"});
  s.Sys("readlink s again (relatime)",
        [](Side& x) {
          char b[8];
          return readlink(x.c("s"), b, sizeof b);
        },
        {"s"});
  s.Sys("utimensat s 1970 AT_SYMLINK_NOFOLLOW",
        [](Side& x) {
          return Utimes(x.c("s"), {1, 0}, {1, 0}, AT_SYMLINK_NOFOLLOW);
        },
        {"s"});
  s.Sys("open s (follows it)", [](Side& x) { return OpenClose(x.c("s"), O_RDONLY); }, {"s", "f"})
      .ExpectDifference("f", "mode=100644 nlink=1 uid=0 gid=0 size=1 times=-",
                        "mode=100644 nlink=1 uid=0 gid=0 size=1 times=a", kRelatimeAtOpen);
  s.Sys("lstat s",
        [](Side& x) {
          struct stat st;
          return lstat(x.c("s"), &st);
        },
        {"s"});
  Run(s);
}

// ---------------------------------------------------------------------------
// Permissions as another user

TEST_P(DifferentialTest, PermissionsAsNobody) {
  Script s;
  // Set up as root: files and directories of each mode in a 0777 directory.
  s.Do("set up pub/", [](Side& x) {
    if (MkdirExact(x.c("pub"), 0777) != 0) return Ret(-1);
    for (const auto& [name, mode] : std::initializer_list<std::pair<const char*, mode_t>>{
             {"pub/f600", 0600}, {"pub/f644", 0644}, {"pub/f666", 0666}, {"pub/f000", 0}}) {
      if (Create(x.c(name), "root's data") != 0 || chmod(x.c(name), mode) != 0) return Ret(-1);
    }
    for (const auto& [name, mode] : std::initializer_list<std::pair<const char*, mode_t>>{
             {"pub/d700", 0700}, {"pub/d755", 0755}, {"pub/d711", 0711}, {"pub/d000", 0}}) {
      if (mkdir(x.c(name), 0755) != 0 || Create(x.c(std::string(name) + "/file"), "x") != 0 ||
          mkdir(x.c(std::string(name) + "/sub"), 0755) != 0 || chmod(x.c(name), mode) != 0) {
        return Ret(-1);
      }
    }
    if (Create(x.c("pub/mine"), "nobody's") != 0 ||
        chown(x.c("pub/mine"), kOtherUid, kOtherGid) != 0 ||
        setxattr(x.c("pub/f644"), "user.root", "r", 1, 0) != 0 ||
        setxattr(x.c("pub/f644"), "trusted.t", "t", 1, 0) != 0 ||
        Create(x.c("pub/setid"), "0123456789") != 0 ||
        chown(x.c("pub/setid"), kOwnerUid, kOwnerGid) != 0 || chmod(x.c("pub/setid"), 06777) != 0 ||
        Create(x.c("pub/owned"), "o") != 0 || chown(x.c("pub/owned"), kOwnerUid, kThirdGid) != 0) {
      return Ret(-1);
    }
    return Ret(0);
  });
  s.List("pub");
  const User& nb = kNobody;
  // open
  for (const auto& [name, flags] :
       std::initializer_list<std::pair<const char*, int>>{{"pub/f600", O_RDONLY},
                                                          {"pub/f644", O_RDONLY},
                                                          {"pub/f644", O_WRONLY},
                                                          {"pub/f644", O_RDWR},
                                                          {"pub/f666", O_RDWR},
                                                          {"pub/f000", O_RDONLY},
                                                          {"pub/f644", O_WRONLY | O_CREAT},
                                                          {"pub/f644", O_RDONLY | O_CREAT},
                                                          {"pub/f644", O_RDONLY | O_TRUNC},
                                                          {"pub/d755", O_RDONLY | O_DIRECTORY},
                                                          {"pub/d700", O_RDONLY | O_DIRECTORY},
                                                          {"pub/d711", O_RDONLY | O_DIRECTORY},
                                                          {"pub/d711/file", O_RDONLY},
                                                          {"pub/d700/file", O_RDONLY},
                                                          {"pub/d000/file", O_RDONLY},
                                                          {"pub/f644", O_RDONLY | O_NOATIME},
                                                          {"pub/mine", O_RDONLY | O_NOATIME}}) {
    const std::string path = name;
    const int open_flags = flags;
    s.SysAs(nb, "open " + path + " flags " + Hex(flags),
            [path, open_flags](Side& x) { return OpenClose(x.c(path), open_flags, 0644); });
  }
  // create, remove, rename
  s.SysAs(nb, "creat pub/new", [](Side& x) { return Create(x.c("pub/new"), "n", 0666); },
          {"pub", "pub/new"});
  for (const char* dir : {"pub/d755", "pub/d700", "pub/d711", "pub/d000"}) {
    const std::string d = dir;
    s.SysAs(nb, "creat " + d + "/new", [d](Side& x) { return Create(x.c(d + "/new"), ""); }, {d});
    s.SysAs(nb, "mkdir " + d + "/newdir", [d](Side& x) { return mkdir(x.c(d + "/newdir"), 0755); });
    s.SysAs(nb, "unlink " + d + "/file", [d](Side& x) { return unlink(x.c(d + "/file")); }, {d});
    s.SysAs(nb, "rmdir " + d + "/sub", [d](Side& x) { return rmdir(x.c(d + "/sub")); });
    s.SysAs(nb, "rename " + d + "/file pub/stolen",
            [d](Side& x) { return rename(x.c(d + "/file"), x.c("pub/stolen")); });
    s.SysAs(nb, "stat " + d + "/file", [d](Side& x) {
      struct stat st;
      return stat(x.c(d + "/file"), &st);
    });
    s.DoAs(nb, "readdir " + d, [d](Side& x) { return ListFields(x.c(d)); });
    s.SysAs(nb, "symlink " + d + "/sl", [d](Side& x) { return symlink("t", x.c(d + "/sl")); });
    s.SysAs(nb, "link pub/mine " + d + "/hl",
            [d](Side& x) { return link(x.c("pub/mine"), x.c(d + "/hl")); });
  }
  s.SysAs(nb, "rename pub/f644 pub/renamed (writable parent)",
          [](Side& x) { return rename(x.c("pub/f644"), x.c("pub/renamed")); },
          {"pub", "pub/f644", "pub/renamed"});
  s.SysAs(nb, "rename it back", [](Side& x) { return rename(x.c("pub/renamed"), x.c("pub/f644")); },
          {"pub", "pub/f644"});
  // fs.protected_hardlinks (a sysctl; the same kernel serves both sides).
  s.SysAs(nb, "link pub/f644 pub/hl", [](Side& x) { return link(x.c("pub/f644"), x.c("pub/hl")); });
  s.SysAs(nb, "link pub/mine pub/mine2",
          [](Side& x) { return link(x.c("pub/mine"), x.c("pub/mine2")); }, {"pub", "pub/mine"});
  // chmod, chown
  s.SysAs(nb, "chmod pub/f644", [](Side& x) { return chmod(x.c("pub/f644"), 0666); }, {"pub/f644"});
  s.SysAs(nb, "chmod pub/mine 0600", [](Side& x) { return chmod(x.c("pub/mine"), 0600); },
          {"pub/mine"});
  s.SysAs(nb, "chmod pub/mine 02755 (own group)",
          [](Side& x) { return chmod(x.c("pub/mine"), 02755); }, {"pub/mine"});
  s.SysAs(kOwner, "chmod pub/owned 02755 (not in the file's group: setgid dropped)",
          [](Side& x) { return chmod(x.c("pub/owned"), 02755); }, {"pub/owned"});
  s.SysAs(nb, "chown pub/f644 65534",
          [](Side& x) { return chown(x.c("pub/f644"), kOtherUid, -1); });
  s.SysAs(nb, "chown pub/mine -1 -1", [](Side& x) { return chown(x.c("pub/mine"), -1, -1); },
          {"pub/mine"});
  s.SysAs(nb, "chown pub/mine 65534 65534",
          [](Side& x) { return chown(x.c("pub/mine"), kOtherUid, kOtherGid); }, {"pub/mine"});
  s.SysAs(nb, "chown pub/mine 0", [](Side& x) { return chown(x.c("pub/mine"), 0, -1); });
  s.SysAs(nb, "chown pub/mine -1 0", [](Side& x) { return chown(x.c("pub/mine"), -1, 0); });
  s.SysAs(nb, "chown pub/mine -1 4242",
          [](Side& x) { return chown(x.c("pub/mine"), -1, kThirdGid); });
  // utimensat: "now" needs write permission, values need ownership.
  s.SysAs(nb, "utimensat pub/f644 NULL",
          [](Side& x) { return utimensat(AT_FDCWD, x.c("pub/f644"), nullptr, 0); }, {"pub/f644"});
  s.SysAs(nb, "utimensat pub/f666 NULL",
          [](Side& x) { return utimensat(AT_FDCWD, x.c("pub/f666"), nullptr, 0); }, {"pub/f666"});
  s.SysAs(nb, "utimensat pub/f666 UTIME_NOW",
          [](Side& x) {
            return Utimes(x.c("pub/f666"), {0, UTIME_NOW}, {0, UTIME_NOW});
          },
          {"pub/f666"});
  s.SysAs(nb, "utimensat pub/f666 values",
          [](Side& x) {
            return Utimes(x.c("pub/f666"), {10, 0}, {20, 0});
          },
          {"pub/f666"});
  s.SysAs(nb, "utimensat pub/f666 UTIME_OMIT both",
          [](Side& x) {
            return Utimes(x.c("pub/f666"), {0, UTIME_OMIT}, {0, UTIME_OMIT});
          },
          {"pub/f666"});
  s.SysAs(nb, "utimensat pub/mine values",
          [](Side& x) {
            return Utimes(x.c("pub/mine"), {1000, 1}, {2000, 2});
          },
          {"pub/mine"});
  s.Times("pub/mine");
  // truncate
  s.SysAs(nb, "truncate pub/f644", [](Side& x) { return truncate(x.c("pub/f644"), 0); },
          {"pub/f644"});
  s.SysAs(nb, "truncate pub/f666 4", [](Side& x) { return truncate(x.c("pub/f666"), 4); },
          {"pub/f666"});
  s.SysAs(nb, "truncate pub/mine 2", [](Side& x) { return truncate(x.c("pub/mine"), 2); },
          {"pub/mine"});
  // A write by someone else drops set-id bits.
  s.SysAs(nb, "write pub/setid",
          [](Side& x) {
            Fd fd(open(x.c("pub/setid"), O_WRONLY));
            return fd.valid() ? PwriteString(fd.get(), "x", 3) : -1;
          },
          {"pub/setid"});
  s.Read("pub/setid");
  // xattrs
  s.SysAs(nb, "setxattr pub/f644 user.x",
          [](Side& x) { return setxattr(x.c("pub/f644"), "user.x", "1", 1, 0); });
  s.SysAs(nb, "setxattr pub/f666 user.x",
          [](Side& x) { return setxattr(x.c("pub/f666"), "user.x", "1", 1, 0); }, {"pub/f666"});
  s.SysAs(nb, "setxattr pub/mine user.x",
          [](Side& x) { return setxattr(x.c("pub/mine"), "user.x", "1", 1, 0); }, {"pub/mine"});
  s.DoAs(nb, "getxattr pub/f600 user.x",
         [](Side& x) { return GetXattr(x.c("pub/f600"), "user.x", 8); });
  s.DoAs(nb, "getxattr pub/f644 user.root",
         [](Side& x) { return GetXattr(x.c("pub/f644"), "user.root", 8); });
  s.DoAs(nb, "getxattr pub/f644 trusted.t",
         [](Side& x) { return GetXattr(x.c("pub/f644"), "trusted.t", 8); });
  s.SysAs(nb, "setxattr pub/f666 trusted.x",
          [](Side& x) { return setxattr(x.c("pub/f666"), "trusted.x", "1", 1, 0); });
  s.SysAs(nb, "setxattr pub/mine security.x",
          [](Side& x) { return setxattr(x.c("pub/mine"), "security.x", "1", 1, 0); });
  s.SysAs(nb, "removexattr pub/f644 user.root",
          [](Side& x) { return removexattr(x.c("pub/f644"), "user.root"); });
  s.DoAs(nb, "listxattr pub/f644", [](Side& x) { return XattrFields(x.c("pub/f644"), true); });
  s.Xattrs("pub/f644");
  // access
  for (const char* name : {"pub/f644", "pub/f600", "pub/d711", "pub/d700", "pub/mine"}) {
    const std::string path = name;
    s.DoAs(nb, "access " + path, [path](Side& x) {
      Fields fields;
      for (const auto& [mode, label] : {std::pair{F_OK, "F"}, std::pair{R_OK, "R"},
                                        std::pair{W_OK, "W"}, std::pair{X_OK, "X"}}) {
        fields.emplace_back(label, Ret(access(x.c(path), mode))[0].second);
      }
      fields.emplace_back("eaccess W",
                          Ret(faccessat(AT_FDCWD, x.c(path), W_OK, AT_EACCESS))[0].second);
      return fields;
    });
  }
  // Special files.
  s.SysAs(nb, "mknod pub/chr",
          [](Side& x) { return mknod(x.c("pub/chr"), S_IFCHR | 0644, makedev(1, 3)); });
  s.SysAs(nb, "mkfifo pub/fifo", [](Side& x) { return mkfifo(x.c("pub/fifo"), 0644); },
          {"pub", "pub/fifo"});
  // A sticky directory, created like /tmp.
  s.Sys("mkdir tmp 01777 (umask 0)", [](Side& x) { return MkdirExact(x.c("tmp"), 01777); },
        {".", "tmp"});
  s.Sys("creat tmp/rootf", [](Side& x) { return Create(x.c("tmp/rootf"), "root", 0666); }, {"tmp"});
  s.SysAs(nb, "creat tmp/nobodyf",
          [](Side& x) { return Create(x.c("tmp/nobodyf"), "nobody", 0666); },
          {"tmp", "tmp/nobodyf"});
  s.SysAs(kOwner, "creat tmp/ownerf",
          [](Side& x) { return Create(x.c("tmp/ownerf"), "owner", 0666); }, {"tmp", "tmp/ownerf"});
  s.SysAs(kOwner, "mkdir tmp/ownerd", [](Side& x) { return MkdirExact(x.c("tmp/ownerd"), 0777); },
          {"tmp", "tmp/ownerd"});
  s.SysAs(nb, "unlink tmp/rootf", [](Side& x) { return unlink(x.c("tmp/rootf")); }, {"tmp"});
  s.SysAs(nb, "unlink tmp/ownerf", [](Side& x) { return unlink(x.c("tmp/ownerf")); }, {"tmp"});
  s.SysAs(nb, "rmdir tmp/ownerd", [](Side& x) { return rmdir(x.c("tmp/ownerd")); });
  s.SysAs(nb, "rename tmp/ownerf tmp/x",
          [](Side& x) { return rename(x.c("tmp/ownerf"), x.c("tmp/x")); });
  s.SysAs(nb, "rename tmp/nobodyf over tmp/ownerf",
          [](Side& x) { return rename(x.c("tmp/nobodyf"), x.c("tmp/ownerf")); });
  s.SysAs(nb, "rename tmp/ownerd tmp/y",
          [](Side& x) { return rename(x.c("tmp/ownerd"), x.c("tmp/y")); });
  s.SysAs(nb, "write tmp/ownerf (0666)",
          [](Side& x) {
            Fd fd(open(x.c("tmp/ownerf"), O_WRONLY | O_APPEND));
            return fd.valid() ? WriteString(fd.get(), "+") : -1;
          },
          {"tmp/ownerf"});
  s.SysAs(nb, "creat tmp/ownerd/inside",
          [](Side& x) { return Create(x.c("tmp/ownerd/inside"), ""); }, {"tmp/ownerd"});
  s.SysAs(nb, "setxattr tmp user.x (sticky, not owner)",
          [](Side& x) { return setxattr(x.c("tmp"), "user.x", "1", 1, 0); });
  s.SysAs(kOwner, "unlink tmp/nobodyf", [](Side& x) { return unlink(x.c("tmp/nobodyf")); });
  s.SysAs(nb, "rename tmp/nobodyf tmp/nobody2 (own)",
          [](Side& x) { return rename(x.c("tmp/nobodyf"), x.c("tmp/nobody2")); },
          {"tmp", "tmp/nobody2"});
  s.SysAs(nb, "unlink tmp/nobody2 (own)", [](Side& x) { return unlink(x.c("tmp/nobody2")); },
          {"tmp"});
  s.Sys("unlink tmp/ownerf (root)", [](Side& x) { return unlink(x.c("tmp/ownerf")); }, {"tmp"});
  s.Sys("chown tmp 1000", [](Side& x) { return chown(x.c("tmp"), kOwnerUid, -1); }, {"tmp"});
  s.SysAs(kOwner, "unlink tmp/rootf (owner of tmp)",
          [](Side& x) { return unlink(x.c("tmp/rootf")); }, {"tmp"});
  s.List("tmp");
  s.List("pub");
  Run(s);
}

// ---------------------------------------------------------------------------
// setgid directories

TEST_P(DifferentialTest, SetgidInheritance) {
  Script s;
  s.Sys("mkdir sg 0777", [](Side& x) { return MkdirExact(x.c("sg"), 0777); }, {".", "sg"});
  s.Sys("chown sg 0:4242", [](Side& x) { return chown(x.c("sg"), 0, kThirdGid); }, {"sg"});
  s.Sys("chmod sg 02777", [](Side& x) { return chmod(x.c("sg"), 02777); }, {"sg"});
  // As root (not in group 4242, but CAP_FSETID).
  s.Sys("creat sg/rootfile 0644", [](Side& x) { return Create(x.c("sg/rootfile"), ""); },
        {"sg", "sg/rootfile"});
  s.Sys("creat sg/rootsgid 02755", [](Side& x) { return Create(x.c("sg/rootsgid"), "", 02755); },
        {"sg/rootsgid"});
  s.Sys("mkdir sg/sub 0755", [](Side& x) { return mkdir(x.c("sg/sub"), 0755); }, {"sg", "sg/sub"});
  s.Sys("mkdir sg/sub/deeper 0700", [](Side& x) { return mkdir(x.c("sg/sub/deeper"), 0700); },
        {"sg/sub", "sg/sub/deeper"});
  s.Sys("mkdir sg/zero 0", [](Side& x) { return mkdir(x.c("sg/zero"), 0); }, {"sg/zero"});
  s.Sys("mkdir sg/umask0 0777 (umask 0)",
        [](Side& x) { return MkdirExact(x.c("sg/umask0"), 0777); }, {"sg/umask0"});
  s.Sys("symlink sg/link", [](Side& x) { return symlink("rootfile", x.c("sg/link")); },
        {"sg/link"});
  s.Sys("mkfifo sg/fifo", [](Side& x) { return mkfifo(x.c("sg/fifo"), 02666); }, {"sg/fifo"});
  s.Sys("mknod sg/chr",
        [](Side& x) { return mknod(x.c("sg/chr"), S_IFCHR | 02644, makedev(1, 3)); }, {"sg/chr"});
  // As a user outside group 4242.
  s.SysAs(kNobody, "creat sg/nb 02755", [](Side& x) { return Create(x.c("sg/nb"), "", 02755); },
          {"sg", "sg/nb"});
  s.SysAs(kNobody, "creat sg/nb-plain 0644", [](Side& x) { return Create(x.c("sg/nb-plain"), ""); },
          {"sg/nb-plain"});
  s.SysAs(kNobody, "mkdir sg/nbdir 0755", [](Side& x) { return mkdir(x.c("sg/nbdir"), 0755); },
          {"sg", "sg/nbdir"});
  s.SysAs(kNobody, "mkdir sg/nbdir/inner 0777",
          [](Side& x) { return mkdir(x.c("sg/nbdir/inner"), 0777); },
          {"sg/nbdir", "sg/nbdir/inner"});
  s.SysAs(kNobody, "creat sg/nbdir/file 02777",
          [](Side& x) { return Create(x.c("sg/nbdir/file"), "", 02777); }, {"sg/nbdir/file"});
  s.SysAs(kNobody, "chmod sg/nb 02755 (not a member)",
          [](Side& x) { return chmod(x.c("sg/nb"), 02755); }, {"sg/nb"});
  s.SysAs(kNobody, "chmod sg/nbdir 0755 (clears setgid)",
          [](Side& x) { return chmod(x.c("sg/nbdir"), 0755); }, {"sg/nbdir"});
  s.SysAs(kNobody, "chmod sg/nbdir 02755 (directory, not a member)",
          [](Side& x) { return chmod(x.c("sg/nbdir"), 02755); }, {"sg/nbdir"});
  // As a member of group 4242.
  s.SysAs(kMember, "creat sg/mb 02755", [](Side& x) { return Create(x.c("sg/mb"), "", 02755); },
          {"sg", "sg/mb"});
  s.SysAs(kMember, "mkdir sg/mbdir 0750", [](Side& x) { return mkdir(x.c("sg/mbdir"), 0750); },
          {"sg/mbdir"});
  s.SysAs(kMember, "chmod sg/mb 02700", [](Side& x) { return chmod(x.c("sg/mb"), 02700); },
          {"sg/mb"});
  s.SysAs(kMember, "write sg/mb (drops setgid)",
          [](Side& x) {
            Fd fd(open(x.c("sg/mb"), O_WRONLY));
            return fd.valid() ? WriteString(fd.get(), "m") : -1;
          },
          {"sg/mb"});
  s.SysAs(kOwner, "creat sg/ow 02775 (owner, not a member)",
          [](Side& x) { return Create(x.c("sg/ow"), "", 02775); }, {"sg/ow"});
  s.SysAs(kOwner, "chown sg/ow -1 1000", [](Side& x) { return chown(x.c("sg/ow"), -1, kOwnerGid); },
          {"sg/ow"});
  // Moving and linking in keeps the group.
  s.Sys("creat outside", [](Side& x) { return Create(x.c("outside"), ""); }, {"outside"});
  s.Sys("rename outside sg/moved", [](Side& x) { return rename(x.c("outside"), x.c("sg/moved")); },
        {"sg", "sg/moved"});
  s.Sys("creat outside2", [](Side& x) { return Create(x.c("outside2"), ""); });
  s.Sys("link outside2 sg/linked", [](Side& x) { return link(x.c("outside2"), x.c("sg/linked")); },
        {"sg", "sg/linked"});
  // Without the bit, a directory hands down nothing.
  s.Sys("chmod sg/sub 0755", [](Side& x) { return chmod(x.c("sg/sub"), 0755); }, {"sg/sub"});
  s.Sys("creat sg/sub/plain", [](Side& x) { return Create(x.c("sg/sub/plain"), ""); },
        {"sg/sub", "sg/sub/plain"});
  s.Sys("mkdir sg/sub/plaindir", [](Side& x) { return mkdir(x.c("sg/sub/plaindir"), 0755); },
        {"sg/sub/plaindir"});
  // chown by root keeps a directory's setgid bit, clears a file's.
  s.Sys("chown sg/umask0 0:0", [](Side& x) { return chown(x.c("sg/umask0"), 0, 0); },
        {"sg/umask0"});
  s.Sys("chown sg/rootsgid 1000:1000",
        [](Side& x) { return chown(x.c("sg/rootsgid"), kOwnerUid, kOwnerGid); }, {"sg/rootsgid"});
  s.Sys("chmod sg/rootfile 02644 (no group exec)",
        [](Side& x) { return chmod(x.c("sg/rootfile"), 02644); }, {"sg/rootfile"});
  s.Sys("chown sg/rootfile 1000:1000",
        [](Side& x) { return chown(x.c("sg/rootfile"), kOwnerUid, kOwnerGid); }, {"sg/rootfile"});
  s.List("sg");
  Run(s);
}

// ---------------------------------------------------------------------------
// truncate, holes, fallocate, SEEK_DATA/SEEK_HOLE

long long Fallocate(int fd, int mode, off_t offset, off_t length) {
  return fallocate(fd, mode, offset, length);
}

TEST_P(DifferentialTest, TruncateExtendAndHoles) {
  constexpr off_t kMiB = 1 << 20;
  Script s;
  s.Do("open f O_RDWR|O_CREAT",
       [](Side& x) { return x.Keep("f", open(x.c("f"), O_RDWR | O_CREAT, 0644)); }, {".", "f"});
  s.Sys("pwrite abc at 0", [](Side& x) { return PwriteString(x.fd("f"), "abc", 0); }, {"f"});
  s.Sys("truncate f 1 MiB + 7", [](Side& x) { return truncate(x.c("f"), kMiB + 7); }, {"f"});
  s.ReadFd("f");
  s.Do("seeks", [](Side& x) {
    return Seeks(x.fd("f"), {0, 1, 3, 4095, 4096, kMiB, kMiB + 6, kMiB + 7, kMiB + 8});
  });
  s.Do("pread across the end", [](Side& x) {
    const auto data = ReadAt(x.fd("f"), kMiB - 2, 100);
    return data ? Fields{{"data", DataSummary(*data)}} : Ret(-1);
  });
  // Shrinking discards: the bytes do not come back when it grows again.
  s.Sys("truncate f 2", [](Side& x) { return truncate(x.c("f"), 2); }, {"f"});
  s.Sys("truncate f 8192", [](Side& x) { return truncate(x.c("f"), 8192); }, {"f"});
  s.ReadFd("f");
  s.Do("first bytes", [](Side& x) {
    const auto data = ReadAt(x.fd("f"), 0, 4);
    return data ? Fields{{"data", DataSummary(*data)}} : Ret(-1);
  });
  s.Sys("ftruncate f 8192 (same size)", [](Side& x) { return ftruncate(x.fd("f"), 8192); }, {"f"});
  s.Sys("ftruncate f 0", [](Side& x) { return ftruncate(x.fd("f"), 0); }, {"f"});
  s.Sys("ftruncate f 0 again", [](Side& x) { return ftruncate(x.fd("f"), 0); }, {"f"});
  s.Do("seeks on an empty file", [](Side& x) { return Seeks(x.fd("f"), {0, 1}); });
  // Writes past the end leave holes.
  s.Sys("pwrite y at 5000", [](Side& x) { return PwriteString(x.fd("f"), "y", 5000); }, {"f"});
  s.Sys("pwrite z at 20000", [](Side& x) { return PwriteString(x.fd("f"), "z", 20000); }, {"f"});
  s.Sys("pwrite w at 3 MiB", [](Side& x) { return PwriteString(x.fd("f"), "w", 3 * kMiB); }, {"f"});
  s.Do("seeks", [](Side& x) {
    return Seeks(x.fd("f"),
                 {0, 4096, 5000, 5001, 8192, 16384, 20001, 24576, kMiB, 3 * kMiB, 3 * kMiB + 1});
  });
  // Each of these writes leaves a hole before it, so it maps only its own
  // 4 KiB page (growth slack is for appends: ExtentMap), as tmpfs does.
  s.ReadFd("f");
  s.Sys("lseek SEEK_END +10", [](Side& x) { return lseek(x.fd("f"), 10, SEEK_END); });
  s.Sys("write v there", [](Side& x) { return WriteString(x.fd("f"), "v"); }, {"f"});
  s.Sys("lseek SEEK_CUR 0", [](Side& x) { return lseek(x.fd("f"), 0, SEEK_CUR); });
  s.Sys("lseek SEEK_SET -1", [](Side& x) { return lseek(x.fd("f"), -1, SEEK_SET); });
  s.Sys("lseek SEEK_END -(size+1)",
        [](Side& x) { return lseek(x.fd("f"), -(3 * kMiB + 13), SEEK_END); });
  s.ReadFd("f");
  // Very large sparse sizes.
  s.Sys("truncate f 1 TiB", [](Side& x) { return truncate(x.c("f"), kMiB << 20); }, {"f"});
  s.Do("seeks", [](Side& x) {
    return Seeks(x.fd("f"), {3 * kMiB, 3 * kMiB + 1, (kMiB << 20) - 1});
  });
  s.Do("pread the last bytes", [](Side& x) {
    const auto data = ReadAt(x.fd("f"), (kMiB << 20) - 4, 100);
    return data ? Fields{{"data", DataSummary(*data)}} : Ret(-1);
  });
  s.Sys("truncate f 2^62", [](Side& x) { return truncate(x.c("f"), off_t{1} << 62); }, {"f"});
  s.Sys("pwrite at 2^62 - 1",
        [](Side& x) { return PwriteString(x.fd("f"), "e", (off_t{1} << 62) - 1); }, {"f"});
  s.Sys("truncate f INT64_MAX", [](Side& x) { return truncate(x.c("f"), INT64_MAX); }, {"f"});
  s.Sys("pwrite at INT64_MAX - 1",
        [](Side& x) { return PwriteString(x.fd("f"), "ab", INT64_MAX - 1); });
  s.Sys("truncate f 12", [](Side& x) { return truncate(x.c("f"), 12); }, {"f"});
  s.ReadFd("f");
  // Errors.
  s.Sys("truncate f -1", [](Side& x) { return truncate(x.c("f"), -1); });
  s.Sys("truncate .", [](Side& x) { return truncate(x.c("."), 0); });
  s.Sys("truncate missing", [](Side& x) { return truncate(x.c("missing"), 0); });
  s.Sys("ftruncate on O_RDONLY", [](Side& x) {
    Fd fd(open(x.c("f"), O_RDONLY));
    return ftruncate(fd.get(), 0);
  });
  s.Sys("ftruncate on a directory", [](Side& x) {
    Fd fd(open(x.c("."), O_RDONLY | O_DIRECTORY));
    return ftruncate(fd.get(), 0);
  });
  s.Sys("ftruncate on O_PATH", [](Side& x) {
    Fd fd(open(x.c("f"), O_PATH));
    return ftruncate(fd.get(), 0);
  });
  // fallocate (tmpfs: default and PUNCH_HOLE|KEEP_SIZE; see below for
  // ZERO_RANGE).
  s.Do("open g, write 40000 bytes",
       [](Side& x) {
         Fields fields = x.Keep("g", open(x.c("g"), O_RDWR | O_CREAT, 0644));
         fields.emplace_back("write",
                             Ret(PwriteString(x.fd("g"), RandomBytes(40000, 7), 0))[0].second);
         return fields;
       },
       {"g"});
  s.Sys("punch 4096..12288",
        [](Side& x) {
          return Fallocate(x.fd("g"), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 8192);
        },
        {"g"});
  s.Sys("punch 100..200 (inside a page)",
        [](Side& x) {
          return Fallocate(x.fd("g"), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 100, 100);
        },
        {"g"});
  s.Sys("punch past the end",
        [](Side& x) {
          return Fallocate(x.fd("g"), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 36864, 65536);
        },
        {"g"});
  s.ReadFd("g");
  s.Do("seeks", [](Side& x) {
    return Seeks(x.fd("g"), {0, 4096, 8192, 12288, 36864, 39999, 40000});
  });
  // g is one 32 KiB block and one 8 KiB block: a punch splits the blocks it
  // covers in part and frees every 4 KiB min_block inside it
  // (ExtentMap::PunchHole), as tmpfs frees pages, so the holes agree.
  s.Sys("fallocate 0..40000 (no change)", [](Side& x) { return Fallocate(x.fd("g"), 0, 0, 40000); },
        {"g"});
  s.Sys("fallocate extends to 50000", [](Side& x) { return Fallocate(x.fd("g"), 0, 45000, 5000); },
        {"g"});
  s.Sys("fallocate KEEP_SIZE past the end",
        [](Side& x) { return Fallocate(x.fd("g"), FALLOC_FL_KEEP_SIZE, 60000, 10000); }, {"g"});
  s.ReadFd("g");
  s.Sys("ZERO_RANGE", [](Side& x) { return Fallocate(x.fd("g"), FALLOC_FL_ZERO_RANGE, 0, 4096); })
      .ExpectDifference("ret", "-1 EOPNOTSUPP", "0",
                        "cudafs implements FALLOC_FL_ZERO_RANGE (README \"Semantics\"); "
                        "shmem_fallocate does not");
  for (const auto& [mode, name] : std::initializer_list<std::pair<int, const char*>>{
           {FALLOC_FL_PUNCH_HOLE, "PUNCH_HOLE without KEEP_SIZE"},
           {FALLOC_FL_COLLAPSE_RANGE, "COLLAPSE_RANGE"},
           {FALLOC_FL_INSERT_RANGE, "INSERT_RANGE"},
           {FALLOC_FL_UNSHARE_RANGE, "UNSHARE_RANGE"},
           {0x80, "unknown mode bit"}}) {
    const int m = mode;
    s.Sys(std::string("fallocate ") + name,
          [m](Side& x) { return Fallocate(x.fd("g"), m, 0, 4096); }, {"g"});
  }
  s.Sys("fallocate length 0", [](Side& x) { return Fallocate(x.fd("g"), 0, 0, 0); });
  s.Sys("fallocate offset -1", [](Side& x) { return Fallocate(x.fd("g"), 0, -1, 10); });
  s.Sys("fallocate past INT64_MAX",
        [](Side& x) { return Fallocate(x.fd("g"), 0, INT64_MAX - 10, 100); });
  s.Sys("fallocate on O_RDONLY", [](Side& x) {
    Fd fd(open(x.c("g"), O_RDONLY));
    return Fallocate(fd.get(), 0, 0, 10);
  });
  s.Sys("fallocate on a directory", [](Side& x) {
    Fd fd(open(x.c("."), O_RDONLY | O_DIRECTORY));
    return Fallocate(fd.get(), 0, 0, 10);
  });
  s.Sys("fallocate on a fifo", [](Side& x) {
    if (mkfifo(x.c("fifo"), 0644) != 0) return -1LL;
    Fd fd(open(x.c("fifo"), O_RDWR));
    return Fallocate(fd.get(), 0, 0, 10);
  });
  s.Close("g");
  s.Close("f");
  Run(s);
}

// fallocate'd space that was never written: tmpfs calls it a hole (its
// pages are not uptodate), cudafs data (Reserve maps extents, and
// SEEK_DATA is "the first mapped offset"). Accepted and listed in the
// README: both are allowed (SEEK_DATA may report any hole as data), and the
// bytes read back are the same zeros; `cp --sparse` copies such a range as
// data from cudafs.
TEST_P(DifferentialTest, FallocatedSpaceAndSeekData) {
  const std::string reserved =
      "fallocated, never written space is data on cudafs (mapped), a hole on tmpfs";
  Script s;
  s.Do("open h", [](Side& x) { return x.Keep("h", open(x.c("h"), O_RDWR | O_CREAT, 0644)); });
  s.Sys("fallocate 0..8192", [](Side& x) { return Fallocate(x.fd("h"), 0, 0, 8192); }, {"h"});
  s.Do("seeks", [](Side& x) { return Seeks(x.fd("h"), {0, 4096}); })
      .ExpectDifference("data@0", "-1 ENXIO", "0", reserved)
      .ExpectDifference("hole@0", "0", "8192", reserved)
      .ExpectDifference("data@4096", "-1 ENXIO", "4096", reserved)
      .ExpectDifference("hole@4096", "4096", "8192", reserved);
  s.Sys("pwrite at 4096", [](Side& x) { return PwriteString(x.fd("h"), "d", 4096); }, {"h"});
  s.Do("seeks", [](Side& x) { return Seeks(x.fd("h"), {0, 4096}); })
      .ExpectDifference("data@0", "4096", "0", reserved)
      .ExpectDifference("hole@0", "0", "8192", reserved);
  s.ReadFd("h");
  s.Close("h");
  Run(s);
}

// ---------------------------------------------------------------------------
// Open flags and I/O calls

// Built against libfuse 3.14, cudafs gets no atomic O_TRUNC (see Negotiate in
// fs/fuse/negotiation.cc): the OPEN arrives without O_TRUNC, so an open for reading
// applies relatime to a file that still has data (kRelatimeAtOpen), and the
// kernel truncates with a SETATTR after it. `fields` is the watched file's
// record up to its times.
void ExpectAtimeOfNonAtomicTruncate(Script& s, const std::string& name, const std::string& fields) {
  if (LibfuseAtLeast(3, 18)) return;
  s.ExpectDifference(name, fields + "mc", fields + "amc",
                     "libfuse 3.14: no atomic O_TRUNC, and " + std::string(kRelatimeAtOpen));
}

TEST_P(DifferentialTest, AppendTruncExclAndIo) {
  Script s;
  // O_APPEND: every write goes to the end, pwrite included (Linux).
  s.Do("open a O_WRONLY|O_APPEND|O_CREAT",
       [](Side& x) { return x.Keep("a", open(x.c("a"), O_WRONLY | O_APPEND | O_CREAT, 0644)); },
       {".", "a"});
  s.Sys("write ab", [](Side& x) { return WriteString(x.fd("a"), "ab"); }, {"a"});
  s.Sys("lseek 0", [](Side& x) { return lseek(x.fd("a"), 0, SEEK_SET); });
  s.Sys("write cd", [](Side& x) { return WriteString(x.fd("a"), "cd"); }, {"a"});
  s.Sys("lseek SEEK_CUR", [](Side& x) { return lseek(x.fd("a"), 0, SEEK_CUR); });
  s.Sys("pwrite x at 0", [](Side& x) { return PwriteString(x.fd("a"), "x", 0); }, {"a"});
  s.Read("a");
  s.Do("open a again O_RDWR (no append)",
       [](Side& x) { return x.Keep("b", open(x.c("a"), O_RDWR)); });
  s.Sys("write ZZ at 0 through it", [](Side& x) { return WriteString(x.fd("b"), "ZZ"); }, {"a"});
  s.Sys("write through the append fd", [](Side& x) { return WriteString(x.fd("a"), "q"); }, {"a"});
  s.Read("a");
  s.Sys("ftruncate 1 through b", [](Side& x) { return ftruncate(x.fd("b"), 1); }, {"a"});
  s.Sys("write through the append fd", [](Side& x) { return WriteString(x.fd("a"), "r"); }, {"a"});
  s.Sys("lseek SEEK_CUR", [](Side& x) { return lseek(x.fd("a"), 0, SEEK_CUR); });
  s.Read("a");
  s.Do("F_GETFL", [](Side& x) {
    const int flags = fcntl(x.fd("a"), F_GETFL);
    return flags < 0 ? Ret(-1) : Fields{{"flags", Hex(flags & (O_ACCMODE | O_APPEND))}};
  });
  s.Sys("F_SETFL 0 (drop O_APPEND)", [](Side& x) { return fcntl(x.fd("a"), F_SETFL, 0); });
  s.Sys("pwrite P at 0", [](Side& x) { return PwriteString(x.fd("a"), "P", 0); }, {"a"});
  s.Read("a");
  s.Sys("read on O_WRONLY", [](Side& x) {
    char b[4];
    return read(x.fd("a"), b, sizeof b);
  });
  s.Close("a");
  s.Close("b");
  s.Sys("write on O_RDONLY", [](Side& x) {
    Fd fd(open(x.c("a"), O_RDONLY));
    return WriteString(fd.get(), "x");
  });
  // O_APPEND with O_RDWR: reads from the position, writes at the end.
  s.Do("open a O_RDWR|O_APPEND",
       [](Side& x) { return x.Keep("ra", open(x.c("a"), O_RDWR | O_APPEND)); });
  s.Do("read 1", [](Side& x) {
    char b[1];
    const ssize_t n = read(x.fd("ra"), b, 1);
    return n < 0 ? Ret(-1) : Fields{{"data", std::string(b, n)}};
  });
  s.Sys("write s", [](Side& x) { return WriteString(x.fd("ra"), "s"); }, {"a"});
  s.Sys("lseek SEEK_CUR", [](Side& x) { return lseek(x.fd("ra"), 0, SEEK_CUR); });
  s.Close("ra");
  s.Read("a");
  // O_TRUNC
  s.Sys("creat t", [](Side& x) { return Create(x.c("t"), "0123456789"); }, {".", "t"});
  s.Sys("open t O_WRONLY|O_TRUNC", [](Side& x) { return OpenClose(x.c("t"), O_WRONLY | O_TRUNC); },
        {"t"});
  s.Sys("open t O_WRONLY|O_TRUNC (empty)",
        [](Side& x) { return OpenClose(x.c("t"), O_WRONLY | O_TRUNC); }, {"t"});
  s.Sys("write t", [](Side& x) { return Create(x.c("t"), "0123456789"); }, {"t"});
  s.Sys("open t O_RDONLY|O_TRUNC", [](Side& x) { return OpenClose(x.c("t"), O_RDONLY | O_TRUNC); },
        {"t"});
  ExpectAtimeOfNonAtomicTruncate(s, "t", "mode=100644 nlink=1 uid=0 gid=0 size=0 times=");
  s.Sys("open . O_RDONLY|O_TRUNC", [](Side& x) { return OpenClose(x.c("."), O_RDONLY | O_TRUNC); },
        {"."});
  s.Sys("mkfifo p", [](Side& x) { return mkfifo(x.c("p"), 0644); });
  s.Sys("open p O_RDWR|O_TRUNC", [](Side& x) { return OpenClose(x.c("p"), O_RDWR | O_TRUNC); },
        {"p"});
  s.Sys("open t O_RDWR|O_TRUNC|O_CREAT",
        [](Side& x) { return OpenClose(x.c("t"), O_RDWR | O_TRUNC | O_CREAT, 0600); }, {"t"});
  ExpectAtimeOfNonAtomicTruncate(s, "t", "mode=100644 nlink=1 uid=0 gid=0 size=0 times=");
  s.Sys("chmod t 0444", [](Side& x) { return chmod(x.c("t"), 0444); });
  s.SysAs(kNobody, "open t O_RDONLY|O_TRUNC",
          [](Side& x) { return OpenClose(x.c("t"), O_RDONLY | O_TRUNC); });
  s.Sys("open t O_WRONLY|O_TRUNC as root (0444)",
        [](Side& x) { return OpenClose(x.c("t"), O_WRONLY | O_TRUNC); }, {"t"});
  // O_EXCL, O_CREAT modes
  s.Sys("open t O_CREAT|O_EXCL",
        [](Side& x) { return OpenClose(x.c("t"), O_CREAT | O_EXCL | O_WRONLY, 0644); });
  s.Sys("open . O_CREAT|O_EXCL",
        [](Side& x) { return OpenClose(x.c("."), O_CREAT | O_EXCL | O_RDONLY, 0644); });
  s.Sys("open t O_EXCL without O_CREAT",
        [](Side& x) { return OpenClose(x.c("t"), O_EXCL | O_RDONLY); });
  s.Sys("open n O_CREAT|O_EXCL 0777",
        [](Side& x) { return OpenClose(x.c("n"), O_CREAT | O_EXCL | O_WRONLY, 0777); }, {".", "n"});
  s.Sys("open n O_CREAT 0600 (exists)",
        [](Side& x) { return OpenClose(x.c("n"), O_CREAT | O_WRONLY, 0600); }, {"n"});
  s.Sys("open u O_CREAT 07777 umask 077",
        [](Side& x) {
          const mode_t saved = umask(077);
          const long long result = OpenClose(x.c("u"), O_CREAT | O_WRONLY, 07777);
          umask(saved);
          return result;
        },
        {"u"});
  s.Sys("open v O_CREAT|O_RDONLY 0",
        [](Side& x) { return OpenClose(x.c("v"), O_CREAT | O_RDONLY, 0); }, {"v"});
  s.Sys("open v O_RDONLY (mode 0, root)", [](Side& x) { return OpenClose(x.c("v"), O_RDONLY); });
  // Flags that check the type.
  s.Sys("open t O_DIRECTORY", [](Side& x) { return OpenClose(x.c("t"), O_RDONLY | O_DIRECTORY); });
  s.Sys("open new O_CREAT|O_DIRECTORY",
        [](Side& x) { return OpenClose(x.c("new"), O_CREAT | O_DIRECTORY | O_RDONLY, 0644); });
  s.Sys("open . O_WRONLY", [](Side& x) { return OpenClose(x.c("."), O_WRONLY); });
  s.Sys("open . O_RDWR|O_CREAT",
        [](Side& x) { return OpenClose(x.c("."), O_RDWR | O_CREAT, 0644); });
  s.Sys("open t O_NOATIME (owner)",
        [](Side& x) { return OpenClose(x.c("t"), O_RDONLY | O_NOATIME); });
  s.Sys("open n O_RDWR|O_DIRECT", [](Side& x) { return OpenClose(x.c("n"), O_RDWR | O_DIRECT); });
  s.Sys("open n O_RDWR|O_SYNC|O_DSYNC",
        [](Side& x) { return OpenClose(x.c("n"), O_RDWR | O_SYNC | O_DSYNC); });
  s.Sys("open missing O_RDONLY", [](Side& x) { return OpenClose(x.c("missing"), O_RDONLY); });
  s.Sys("open missing/x O_CREAT",
        [](Side& x) { return OpenClose(x.c("missing/x"), O_CREAT | O_WRONLY, 0644); });
  s.Sys("open t/x O_CREAT",
        [](Side& x) { return OpenClose(x.c("t/x"), O_CREAT | O_WRONLY, 0644); });
  // O_PATH descriptors.
  s.Do("open n O_PATH", [](Side& x) { return x.Keep("path", open(x.c("n"), O_PATH)); });
  s.Sys("read on O_PATH", [](Side& x) {
    char b[4];
    return read(x.fd("path"), b, sizeof b);
  });
  s.Sys("fchmod on O_PATH", [](Side& x) { return fchmod(x.fd("path"), 0600); });
  s.Sys("fgetxattr on O_PATH", [](Side& x) {
    char b[4];
    return fgetxattr(x.fd("path"), "user.x", b, sizeof b);
  });
  s.FStat("path");
  s.Close("path");
  // read on a directory
  s.Sys("read on a directory", [](Side& x) {
    Fd fd(open(x.c("."), O_RDONLY | O_DIRECTORY));
    char b[4];
    return read(fd.get(), b, sizeof b);
  });
  // readv, writev, pread/pwrite at odd offsets
  s.Do("open io", [](Side& x) { return x.Keep("io", open(x.c("io"), O_RDWR | O_CREAT, 0644)); });
  s.Sys("writev 3 buffers",
        [](Side& x) {
          char a[] = "first,", b[] = "", c[] = "third";
          iovec iov[3] = {{a, 6}, {b, 0}, {c, 5}};
          return writev(x.fd("io"), iov, 3);
        },
        {"io"});
  s.Do("preadv", [](Side& x) {
    char a[3], b[20];
    iovec iov[2] = {{a, 3}, {b, 20}};
    const ssize_t n = preadv(x.fd("io"), iov, 2, 1);
    if (n < 0) return Ret(-1);
    return Fields{
        {"ret", std::to_string(n)}, {"a", std::string(a, 3)}, {"b", std::string(b, n - 3)}};
  });
  s.Do("pread past the end", [](Side& x) {
    char b[8];
    return Ret(pread(x.fd("io"), b, sizeof b, 1000));
  });
  s.Sys("fsync", [](Side& x) { return fsync(x.fd("io")); });
  s.Sys("fdatasync", [](Side& x) { return fdatasync(x.fd("io")); });
  s.Sys("syncfs", [](Side& x) { return syncfs(x.fd("io")); });
  // copy_file_range and sendfile.
  s.Sys("creat dst", [](Side& x) { return Create(x.c("dst"), "0123456789"); });
  s.Sys("copy_file_range io[2..7) -> dst@4",
        [](Side& x) {
          Fd dst(open(x.c("dst"), O_WRONLY));
          loff_t in = 2, out = 4;
          return copy_file_range(x.fd("io"), &in, dst.get(), &out, 5, 0);
        },
        {"dst", "io"});
  s.Sys("copy_file_range from past the end",
        [](Side& x) {
          Fd dst(open(x.c("dst"), O_WRONLY));
          loff_t in = 100, out = 0;
          return copy_file_range(x.fd("io"), &in, dst.get(), &out, 5, 0);
        },
        {"dst"});
  s.Sys("copy_file_range to 20 (hole)",
        [](Side& x) {
          Fd dst(open(x.c("dst"), O_WRONLY));
          loff_t in = 0, out = 20;
          return copy_file_range(x.fd("io"), &in, dst.get(), &out, 100, 0);
        },
        {"dst"});
  s.Read("dst");
  s.Sys("sendfile io -> snd",
        [](Side& x) {
          Fd out(open(x.c("snd"), O_WRONLY | O_CREAT, 0644));
          off_t offset = 3;
          return sendfile(out.get(), x.fd("io"), &offset, 100);
        },
        {"snd"});
  s.Read("snd");
  // mmap: MAP_SHARED writes reach the file, MAP_PRIVATE ones do not.
  s.Sys("ftruncate io 8192", [](Side& x) { return ftruncate(x.fd("io"), 8192); }, {"io"});
  s.Sys("mmap shared, store, msync",
        [](Side& x) {
          void* map = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, x.fd("io"), 0);
          if (map == MAP_FAILED) return -1LL;
          memcpy(static_cast<char*>(map) + 4000, "MAPPED", 6);
          const int result = msync(map, 8192, MS_SYNC);
          munmap(map, 8192);
          return static_cast<long long>(result);
        },
        {"io"});
  s.Sys("mmap private, store",
        [](Side& x) {
          void* map = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE, x.fd("io"), 0);
          if (map == MAP_FAILED) return -1LL;
          memcpy(static_cast<char*>(map), "PRIVATE", 7);
          munmap(map, 8192);
          return 0LL;
        },
        {"io"});
  s.ReadFd("io");
  s.Do("mmap shared, load", [](Side& x) {
    void* map = mmap(nullptr, 8192, PROT_READ, MAP_SHARED, x.fd("io"), 0);
    if (map == MAP_FAILED) return Ret(-1);
    const std::string data(static_cast<char*>(map) + 3998, 10);
    munmap(map, 8192);
    return Fields{{"data", Escape(data)}};
  });
  // Locks: the kernel keeps them for both.
  s.Do("open io twice more", [](Side& x) {
    Fields fields = x.Keep("l1", open(x.c("io"), O_RDWR));
    fields.push_back(x.Keep("l2", open(x.c("io"), O_RDWR))[0]);
    return fields;
  });
  s.Sys("flock l1 LOCK_EX", [](Side& x) { return flock(x.fd("l1"), LOCK_EX); });
  s.Sys("flock l2 LOCK_EX|LOCK_NB", [](Side& x) { return flock(x.fd("l2"), LOCK_EX | LOCK_NB); });
  s.Sys("flock l2 LOCK_SH|LOCK_NB", [](Side& x) { return flock(x.fd("l2"), LOCK_SH | LOCK_NB); });
  s.Sys("flock l1 LOCK_UN", [](Side& x) { return flock(x.fd("l1"), LOCK_UN); });
  s.Sys("flock l2 LOCK_EX|LOCK_NB", [](Side& x) { return flock(x.fd("l2"), LOCK_EX | LOCK_NB); });
  s.Sys("F_SETLK write lock 0..10 on l1", [](Side& x) {
    struct flock lock = {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    lock.l_len = 10;
    return fcntl(x.fd("l1"), F_SETLK, &lock);
  });
  s.DoAs(kRoot, "F_GETLK 5..6 and F_SETLK from another process", [](Side& x) {
    struct flock lock = {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    lock.l_start = 5;
    lock.l_len = 1;
    if (fcntl(x.fd("l2"), F_GETLK, &lock) != 0) return Ret(-1);
    Fields fields = {{"l_type", std::to_string(lock.l_type)},
                     {"l_start", std::to_string(lock.l_start)},
                     {"l_len", std::to_string(lock.l_len)}};
    lock.l_type = F_RDLCK;
    lock.l_start = 5;
    lock.l_len = 1;
    fields.emplace_back("F_SETLK", Ret(fcntl(x.fd("l2"), F_SETLK, &lock))[0].second);
    return fields;
  });
  s.Close("l1");
  s.Close("l2");
  s.Close("io");
  s.List(".");
  Run(s);
}

// ---------------------------------------------------------------------------
// Access times (relatime: updated when older than mtime or ctime, or than a
// day). Small files are read through the kernel's page cache, whose reads
// never reach cudafs, so relatime applies when such a file is opened for
// reading (kRelatimeAtOpen); the steps here read what they open, where both
// agree.

TEST_P(DifferentialTest, AccessTimesRelatime) {
  Script s;
  const auto read_some = [](const std::string& path, int flags) {
    return [path, flags](Side& x) -> long long {
      Fd fd(open(x.c(path), O_RDONLY | flags));
      if (!fd.valid()) return -1;
      char b[4];
      return read(fd.get(), b, sizeof b);
    };
  };
  s.Sys("creat r", [](Side& x) { return Create(x.c("r"), "data"); }, {".", "r"});
  s.Sys("read r", read_some("r", 0), {"r"});
  s.Sys("read r again", read_some("r", 0), {"r"});
  s.Sys("open and close r without reading", [](Side& x) { return OpenClose(x.c("r"), O_RDONLY); },
        {"r"});
  s.Sys("write r",
        [](Side& x) {
          Fd fd(open(x.c("r"), O_WRONLY));
          return PwriteString(fd.get(), "D", 0);
        },
        {"r"});
  s.Sys("read r O_NOATIME", read_some("r", O_NOATIME), {"r"});
  s.Sys("write r",
        [](Side& x) {
          Fd fd(open(x.c("r"), O_WRONLY));
          return PwriteString(fd.get(), "d", 0);
        },
        {"r"});
  s.Sys("read r", read_some("r", 0), {"r"});
  s.Sys("chmod r (ctime)", [](Side& x) { return chmod(x.c("r"), 0640); }, {"r"});
  s.Sys("read r", read_some("r", 0), {"r"});
  s.Sys("utimensat r to 1970", [](Side& x) { return Utimes(x.c("r"), {1, 0}, {2, 0}); }, {"r"});
  s.Sys("read r (atime a day old)", read_some("r", 0), {"r"});
  s.Sys("utimensat r atime 1970",
        [](Side& x) {
          return Utimes(x.c("r"), {1, 0}, {0, UTIME_OMIT});
        },
        {"r"});
  s.Sys("read 0 bytes at the end",
        [](Side& x) {
          Fd fd(open(x.c("r"), O_RDONLY));
          char b[4];
          return pread(fd.get(), b, sizeof b, 100);
        },
        {"r"});
  s.Sys("utimensat r atime 1970",
        [](Side& x) {
          return Utimes(x.c("r"), {1, 0}, {0, UTIME_OMIT});
        },
        {"r"});
  s.Sys("sendfile from r",
        [](Side& x) {
          Fd in(open(x.c("r"), O_RDONLY));
          Fd out(open(x.c("sent"), O_WRONLY | O_CREAT, 0644));
          return sendfile(out.get(), in.get(), nullptr, 4);
        },
        {"r", "sent"});
  s.Sys("utimensat r atime 1970",
        [](Side& x) {
          return Utimes(x.c("r"), {1, 0}, {0, UTIME_OMIT});
        },
        {"r"});
  // The kernel refreshes only the target's attributes after
  // copy_file_range: cudafs tells it that the source's atime moved.
  s.Sys("copy_file_range from r",
        [](Side& x) {
          Fd in(open(x.c("r"), O_RDONLY));
          Fd out(open(x.c("copy"), O_WRONLY | O_CREAT, 0644));
          return copy_file_range(in.get(), nullptr, out.get(), nullptr, 4, 0);
        },
        {"r", "copy"});
  // Directories: readdir is their read.
  s.Sys("mkdir d", [](Side& x) { return mkdir(x.c("d"), 0755); }, {".", "d"});
  s.Do("readdir d", [](Side& x) { return ListFields(x.c("d")); }, {"d"});
  s.Do("readdir d again", [](Side& x) { return ListFields(x.c("d")); }, {"d"});
  s.Sys("lookup in d",
        [](Side& x) {
          struct stat st;
          return stat(x.c("d/none"), &st);
        },
        {"d"});
  s.Sys("creat d/f", [](Side& x) { return Create(x.c("d/f"), ""); }, {"d"});
  s.Do("readdir d", [](Side& x) { return ListFields(x.c("d")); }, {"d"});
  Run(s);
}

// ---------------------------------------------------------------------------
// rename

TEST_P(DifferentialTest, RenameVariants) {
  Script s;
  s.Do("set up",
       [](Side& x) {
         for (const char* dir : {"d1", "d2", "empty", "full", "empty2", "a", "a/b", "a/b/c"}) {
           if (mkdir(x.c(dir), 0755) != 0) return Ret(-1);
         }
         for (const char* file : {"f1", "f2", "f3", "full/x", "d1/in1", "d2/in2", "g"}) {
           if (Create(x.c(file), file) != 0) return Ret(-1);
         }
         return Ret(link(x.c("f3"), x.c("f3-link")));
       },
       {".", "d1", "d2", "f1", "f2", "f3"});
  // Files.
  s.Sys("rename f1 f1 (itself)", [](Side& x) { return rename(x.c("f1"), x.c("f1")); }, {".", "f1"});
  s.Sys("rename f3 f3-link (the same inode)",
        [](Side& x) { return rename(x.c("f3"), x.c("f3-link")); }, {".", "f3", "f3-link"});
  s.Sys("rename f1 f2 (over a file)", [](Side& x) { return rename(x.c("f1"), x.c("f2")); },
        {".", "f1", "f2"});
  s.Read("f2");
  s.Sys("rename f2 d1/f (across)", [](Side& x) { return rename(x.c("f2"), x.c("d1/f")); },
        {".", "d1", "d1/f"});
  s.Sys("rename d1/f d2/in2 (over, across)",
        [](Side& x) { return rename(x.c("d1/f"), x.c("d2/in2")); }, {"d1", "d2", "d2/in2"});
  s.Sys("rename missing x", [](Side& x) { return rename(x.c("missing"), x.c("x")); });
  s.Sys("rename g missing/x", [](Side& x) { return rename(x.c("g"), x.c("missing/x")); });
  s.Sys("rename g g/x", [](Side& x) { return rename(x.c("g"), x.c("g/x")); });
  s.Sys("rename g/ h", [](Side& x) { return rename(x.c("g/"), x.c("h")); });
  s.Sys("rename g h/", [](Side& x) { return rename(x.c("g"), x.c("h/")); });
  // Files and directories over each other.
  s.Sys("rename g empty (file over dir)", [](Side& x) { return rename(x.c("g"), x.c("empty")); });
  s.Sys("rename empty g (dir over file)", [](Side& x) { return rename(x.c("empty"), x.c("g")); });
  s.Sys("rename empty full (over non-empty)",
        [](Side& x) { return rename(x.c("empty"), x.c("full")); });
  s.Sys("rename empty empty2 (over empty)",
        [](Side& x) { return rename(x.c("empty"), x.c("empty2")); }, {".", "empty", "empty2"});
  s.Sys("rename empty2 d1/moved (dir across)",
        [](Side& x) { return rename(x.c("empty2"), x.c("d1/moved")); }, {".", "d1", "d1/moved"});
  s.SameFile("d1/moved/..", "d1");
  s.Sys("rename d1/moved d2/ (trailing slash)",
        [](Side& x) { return rename(x.c("d1/moved/"), x.c("d2/moved/")); },
        {"d1", "d2", "d2/moved"});
  // Into its own subtree, onto its ancestor.
  s.Sys("rename a a/b/c/a", [](Side& x) { return rename(x.c("a"), x.c("a/b/c/a")); });
  s.Sys("rename a a/b/c", [](Side& x) { return rename(x.c("a"), x.c("a/b/c")); });
  s.Sys("rename a a/b", [](Side& x) { return rename(x.c("a"), x.c("a/b")); });
  s.Sys("rename a/b/c a (onto an ancestor)",
        [](Side& x) { return rename(x.c("a/b/c"), x.c("a")); });
  s.Sys("rename a/b/c a/b/c (itself)", [](Side& x) { return rename(x.c("a/b/c"), x.c("a/b/c")); },
        {"a/b", "a/b/c"});
  s.Sys("rename a/b/c a/c (up)", [](Side& x) { return rename(x.c("a/b/c"), x.c("a/c")); },
        {"a", "a/b", "a/c"});
  // Symlinks are renamed, not followed.
  s.Sys("symlink sl -> f3", [](Side& x) { return symlink("f3", x.c("sl")); });
  s.Sys("rename sl d1/in1 (over a file)", [](Side& x) { return rename(x.c("sl"), x.c("d1/in1")); },
        {"d1", "d1/in1"});
  s.Readlink("d1/in1");
  s.Sys("symlink sd -> d2", [](Side& x) { return symlink("d2", x.c("sd")); });
  s.Sys("rename full sd (dir over symlink)",
        [](Side& x) { return rename(x.c("full"), x.c("sd")); });
  s.Sys("rename sd full (symlink over dir)",
        [](Side& x) { return rename(x.c("sd"), x.c("full")); });
  // renameat2 flags.
  s.Sys("RENAME_NOREPLACE onto f3",
        [](Side& x) { return Rename2(x, "f3-link", "f3", RENAME_NOREPLACE); }, {"f3"});
  s.Sys("RENAME_NOREPLACE to a new name",
        [](Side& x) { return Rename2(x, "f3-link", "f4", RENAME_NOREPLACE); }, {".", "f4"});
  s.Sys("RENAME_NOREPLACE onto itself",
        [](Side& x) { return Rename2(x, "f4", "f4", RENAME_NOREPLACE); });
  s.Sys("RENAME_NOREPLACE|RENAME_EXCHANGE",
        [](Side& x) { return Rename2(x, "f3", "f4", RENAME_NOREPLACE | RENAME_EXCHANGE); });
  s.Sys("RENAME_EXCHANGE f4 <-> full (file and dir)",
        [](Side& x) { return Rename2(x, "f4", "full", RENAME_EXCHANGE); }, {".", "f4", "full"});
  s.List("f4");
  s.Sys("RENAME_EXCHANGE d1/in1 <-> f4 (across, dir moves)",
        [](Side& x) { return Rename2(x, "d1/in1", "f4", RENAME_EXCHANGE); },
        {".", "d1", "f4", "d1/in1"});
  s.SameFile("d1/in1/..", "d1");
  s.Sys("RENAME_EXCHANGE with a missing name",
        [](Side& x) { return Rename2(x, "f3", "nothing", RENAME_EXCHANGE); });
  s.Sys("RENAME_EXCHANGE with itself",
        [](Side& x) { return Rename2(x, "f3", "f3", RENAME_EXCHANGE); }, {"f3"});
  s.Sys("RENAME_EXCHANGE a <-> a/b (own subtree)",
        [](Side& x) { return Rename2(x, "a", "a/b", RENAME_EXCHANGE); });
  s.Sys("RENAME_EXCHANGE d2 <-> a/b (dirs)",
        [](Side& x) { return Rename2(x, "d2", "a/b", RENAME_EXCHANGE); }, {".", "a", "d2", "a/b"});
  s.Sys("renameat2 flags 0x8 (unknown)", [](Side& x) { return Rename2(x, "f3", "f9", 0x8); });
  s.Sys("RENAME_WHITEOUT", [](Side& x) { return Rename2(x, "f3", "f9", RENAME_WHITEOUT); })
      .ExpectDifference("ret", "0", "-1 EINVAL",
                        "RENAME_WHITEOUT (for overlayfs' upper layer) is not among the rename "
                        "flags cudafs documents (README \"Semantics\": NOREPLACE and EXCHANGE); "
                        "Filesystem::Rename refuses it");
  s.Do("undo the whiteout", [](Side& x) {
    // tmpfs left a 0:0 character device named f3 and moved f3 to f9.
    struct stat st;
    if (lstat(x.c("f9"), &st) == 0) {
      if (unlink(x.c("f3")) != 0 || rename(x.c("f9"), x.c("f3")) != 0) return Ret(-1);
    }
    return Ret(0);
  });
  s.List(".");
  s.List("a");
  s.List("d1");
  s.List("d2");
  Run(s);
}

// ---------------------------------------------------------------------------
// Open files that lose their names

TEST_P(DifferentialTest, RenameAndUnlinkOpenFiles) {
  Script s;
  s.Sys("creat old", [](Side& x) { return Create(x.c("old"), "old contents"); });
  s.Sys("creat new", [](Side& x) { return Create(x.c("new"), "new"); });
  s.Do("open old O_RDWR", [](Side& x) { return x.Keep("old", open(x.c("old"), O_RDWR)); });
  s.Sys("rename new over old", [](Side& x) { return rename(x.c("new"), x.c("old")); },
        {".", "old"});
  s.FStat("old");
  s.ReadFd("old");
  s.Sys("pwrite through the replaced fd",
        [](Side& x) { return PwriteString(x.fd("old"), "OLD", 0); });
  s.ReadFd("old");
  s.Read("old");
  s.Sys("fchmod the replaced fd 0600", [](Side& x) { return fchmod(x.fd("old"), 0600); });
  s.Sys("fchown the replaced fd",
        [](Side& x) { return fchown(x.fd("old"), kOwnerUid, kOwnerGid); });
  s.Sys("fsetxattr on it", [](Side& x) { return fsetxattr(x.fd("old"), "user.k", "v", 1, 0); });
  s.Do("fgetxattr", [](Side& x) {
    char value[8];
    const ssize_t n = fgetxattr(x.fd("old"), "user.k", value, sizeof value);
    return n < 0 ? Ret(-1) : Fields{{"value", std::string(value, n)}};
  });
  s.Sys("ftruncate it to 100", [](Side& x) { return ftruncate(x.fd("old"), 100); });
  s.Sys("futimens it", [](Side& x) {
    const timespec times[2] = {{5, 5}, {6, 6}};
    return futimens(x.fd("old"), times);
  });
  s.FStat("old");
  s.ReadFd("old");
  s.Read("old");
  s.Sys("linkat /proc/self/fd of the replaced file",
        [](Side& x) {
          return linkat(AT_FDCWD, x.ProcFd("old").c_str(), AT_FDCWD, x.c("revived"),
                        AT_SYMLINK_FOLLOW);
        },
        {"."});
  s.Close("old");
  // Unlinked while open, by two descriptors.
  s.Sys("creat u", [](Side& x) { return Create(x.c("u"), "unlinked"); });
  s.Do("open u twice", [](Side& x) {
    Fields fields = x.Keep("u1", open(x.c("u"), O_RDWR));
    fields.push_back(x.Keep("u2", open(x.c("u"), O_RDONLY))[0]);
    return fields;
  });
  s.Sys("unlink u", [](Side& x) { return unlink(x.c("u")); }, {".", "u"});
  s.FStat("u1");
  s.Sys("write through u1",
        [](Side& x) { return PwriteString(x.fd("u1"), "UNLINKED-AND-LONGER", 0); });
  s.ReadFd("u2");
  s.Sys("lseek u2 SEEK_END", [](Side& x) { return lseek(x.fd("u2"), 0, SEEK_END); });
  s.Sys("fallocate PUNCH on u1", [](Side& x) {
    return fallocate(x.fd("u1"), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4);
  });
  s.ReadFd("u2");
  s.Sys("ftruncate u1 extend 10000", [](Side& x) { return ftruncate(x.fd("u1"), 10000); });
  s.ReadFd("u2");
  s.Sys("creat u again", [](Side& x) { return Create(x.c("u"), "fresh"); }, {".", "u"});
  s.ReadFd("u2");
  s.Read("u");
  s.Sys("mmap the unlinked file", [](Side& x) {
    void* map = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, x.fd("u1"), 0);
    if (map == MAP_FAILED) return -1LL;
    memcpy(map, "MAP", 3);
    munmap(map, 4096);
    return 0LL;
  });
  s.ReadFd("u2");
  s.Close("u1");
  s.FStat("u2");
  s.Close("u2");
  // An open directory renamed and removed.
  s.Sys("mkdir dir", [](Side& x) { return mkdir(x.c("dir"), 0755); });
  s.Do("open dir", [](Side& x) { return x.Keep("dir", open(x.c("dir"), O_RDONLY | O_DIRECTORY)); });
  s.Sys("rename dir moved", [](Side& x) { return rename(x.c("dir"), x.c("moved")); },
        {".", "moved"});
  s.Sys("openat(dir, f, O_CREAT)",
        [](Side& x) { return OpenAtClose(x.fd("dir"), "f", O_CREAT | O_WRONLY, 0644); },
        {"moved", "moved/f"});
  s.Sys("unlinkat(dir, f)", [](Side& x) { return unlinkat(x.fd("dir"), "f", 0); }, {"moved"});
  s.Sys("rmdir moved", [](Side& x) { return rmdir(x.c("moved")); }, {"."});
  s.FStat("dir");
  s.Sys("openat(dir, g, O_CREAT) after rmdir",
        [](Side& x) { return OpenAtClose(x.fd("dir"), "g", O_CREAT | O_WRONLY, 0644); });
  s.Sys("fchmod the removed dir", [](Side& x) { return fchmod(x.fd("dir"), 0700); });
  s.FStat("dir");
  s.Close("dir");
  // An open file moved to another directory.
  s.Sys("mkdir other", [](Side& x) { return mkdir(x.c("other"), 0755); });
  s.Sys("creat m", [](Side& x) { return Create(x.c("m"), "moving"); });
  s.Do("open m O_WRONLY|O_APPEND",
       [](Side& x) { return x.Keep("m", open(x.c("m"), O_WRONLY | O_APPEND)); });
  s.Sys("rename m other/m", [](Side& x) { return rename(x.c("m"), x.c("other/m")); },
        {".", "other", "other/m"});
  s.Sys("append through the fd", [](Side& x) { return WriteString(x.fd("m"), "+appended"); },
        {"other/m"});
  s.Read("other/m");
  s.Close("m");
  s.List(".");
  Run(s);
}

// ---------------------------------------------------------------------------
// Hard links, also to files that are open but unlinked

TEST_P(DifferentialTest, HardLinksToOpenFiles) {
  Script s;
  s.Sys("creat a", [](Side& x) { return Create(x.c("a"), "data"); }, {".", "a"});
  s.Sys("link a b", [](Side& x) { return link(x.c("a"), x.c("b")); }, {".", "a", "b"});
  s.SameFile("a", "b");
  s.Sys("link a b (exists)", [](Side& x) { return link(x.c("a"), x.c("b")); });
  s.Sys("link missing c", [](Side& x) { return link(x.c("missing"), x.c("c")); });
  s.Sys("link a nodir/c", [](Side& x) { return link(x.c("a"), x.c("nodir/c")); });
  s.Sys("link . dirlink", [](Side& x) { return link(x.c("."), x.c("dirlink")); });
  s.Sys("mkdir sub", [](Side& x) { return mkdir(x.c("sub"), 0755); });
  s.Sys("link a sub/c", [](Side& x) { return link(x.c("a"), x.c("sub/c")); },
        {"a", "sub", "sub/c"});
  s.Sys("unlink a", [](Side& x) { return unlink(x.c("a")); }, {".", "b"});
  s.Sys("chmod b 0600", [](Side& x) { return chmod(x.c("b"), 0600); }, {"b", "sub/c"});
  // The last name goes while the file is open.
  s.Do("open b O_RDWR", [](Side& x) { return x.Keep("f", open(x.c("b"), O_RDWR)); });
  s.Sys("unlink b", [](Side& x) { return unlink(x.c("b")); }, {".", "sub/c"});
  s.Sys("unlink sub/c", [](Side& x) { return unlink(x.c("sub/c")); }, {"sub"});
  s.FStat("f");
  s.Sys("linkat /proc/self/fd/N new AT_SYMLINK_FOLLOW (nlink 0)",
        [](Side& x) {
          return linkat(AT_FDCWD, x.ProcFd("f").c_str(), AT_FDCWD, x.c("new"), AT_SYMLINK_FOLLOW);
        },
        {"."});
  s.Sys("linkat fd \"\" AT_EMPTY_PATH (nlink 0, root)",
        [](Side& x) { return linkat(x.fd("f"), "", AT_FDCWD, x.c("new"), AT_EMPTY_PATH); }, {"."});
  s.Sys("link /proc/self/fd/N new (no follow: the magic link itself)",
        [](Side& x) { return link(x.ProcFd("f").c_str(), x.c("new")); });
  s.Sys("write through it", [](Side& x) { return PwriteString(x.fd("f"), "DATA-MORE", 0); });
  s.ReadFd("f");
  s.FStat("f");
  s.Close("f");
  // A file that still has a name can be linked through its descriptor.
  s.Sys("creat x", [](Side& x) { return Create(x.c("x"), "x"); });
  s.Do("open x", [](Side& x) { return x.Keep("x", open(x.c("x"), O_RDONLY)); });
  s.Sys("linkat /proc/self/fd/N y AT_SYMLINK_FOLLOW",
        [](Side& x) {
          return linkat(AT_FDCWD, x.ProcFd("x").c_str(), AT_FDCWD, x.c("y"), AT_SYMLINK_FOLLOW);
        },
        {".", "x", "y"});
  s.Sys("linkat fd \"\" z AT_EMPTY_PATH",
        [](Side& x) { return linkat(x.fd("x"), "", AT_FDCWD, x.c("z"), AT_EMPTY_PATH); },
        {".", "x", "z"});
  s.SameFile("x", "z");
  s.SysAs(kNobody, "linkat AT_EMPTY_PATH as nobody",
          [](Side& x) { return linkat(x.fd("x"), "", AT_FDCWD, x.c("w"), AT_EMPTY_PATH); });
  s.Sys("unlink x", [](Side& x) { return unlink(x.c("x")); }, {"y"});
  s.Sys("linkat /proc/self/fd/N x again",
        [](Side& x) {
          return linkat(AT_FDCWD, x.ProcFd("x").c_str(), AT_FDCWD, x.c("x"), AT_SYMLINK_FOLLOW);
        },
        {".", "x", "y"});
  s.FStat("x");
  s.Close("x");
  // A directory descriptor cannot be linked.
  s.Do("open sub", [](Side& x) { return x.Keep("sub", open(x.c("sub"), O_RDONLY | O_DIRECTORY)); });
  s.Sys("linkat dir fd AT_EMPTY_PATH",
        [](Side& x) { return linkat(x.fd("sub"), "", AT_FDCWD, x.c("sublink"), AT_EMPTY_PATH); });
  s.Close("sub");
  // Many links.
  s.Do("link y 100 times",
       [](Side& x) {
         for (int i = 0; i < 100; ++i) {
           if (link(x.c("y"), x.c("many-" + std::to_string(i))) != 0) return Ret(-1);
         }
         return Ret(0);
       },
       {"y"});
  s.Do("unlink 99 of them",
       [](Side& x) {
         for (int i = 0; i < 99; ++i) {
           if (unlink(x.c("many-" + std::to_string(i))) != 0) return Ret(-1);
         }
         return Ret(0);
       },
       {"y", "many-99"});
  s.List(".");
  Run(s);
}

// ---------------------------------------------------------------------------
// Extended attributes: sizes, names, namespaces

TEST_P(DifferentialTest, XattrLimits) {
  Script s;
  s.Sys("creat f", [](Side& x) { return Create(x.c("f"), "x"); }, {"f"});
  s.Sys("mkdir d", [](Side& x) { return mkdir(x.c("d"), 0755); });
  for (const char* target : {"f", "d"}) {
    const std::string path = target;
    for (size_t size : {0, 1, 65535, 65536, 65537, 1 << 20}) {
      s.Sys("setxattr " + path + " user.v" + std::to_string(size) + " of " + std::to_string(size) +
                " bytes",
            [path, size](Side& x) {
              const std::string value = RandomBytes(size, size);
              return setxattr(x.c(path), ("user.v" + std::to_string(size)).c_str(), value.data(),
                              value.size(), 0);
            },
            {path});
    }
    s.Do("getxattr " + path + " user.v65536 size probe",
         [path](Side& x) { return GetXattr(x.c(path), "user.v65536", 0); });
    s.Do("getxattr " + path + " user.v65536 into 65536",
         [path](Side& x) { return GetXattr(x.c(path), "user.v65536", 65536); });
    s.Do("getxattr " + path + " user.v65536 into 65535",
         [path](Side& x) { return GetXattr(x.c(path), "user.v65536", 65535); });
    s.Do("getxattr " + path + " user.v65536 into 1 MiB",
         [path](Side& x) { return GetXattr(x.c(path), "user.v65536", 1 << 20); });
    s.Do("getxattr " + path + " user.v0",
         [path](Side& x) { return GetXattr(x.c(path), "user.v0", 16); });
    // Names: 255 bytes in all.
    for (size_t length : {255, 256}) {
      const std::string name = "user." + std::string(length - 5, 'n');
      s.Sys("setxattr " + path + " name of " + std::to_string(length) + " bytes",
            [path, name](Side& x) { return setxattr(x.c(path), name.c_str(), "v", 1, 0); }, {path});
      s.Do("getxattr " + path + " name of " + std::to_string(length) + " bytes",
           [path, name](Side& x) { return GetXattr(x.c(path), name, 8); });
      s.Sys("removexattr " + path + " name of " + std::to_string(length) + " bytes",
            [path, name](Side& x) { return removexattr(x.c(path), name.c_str()); });
    }
    s.Sys("setxattr " + path + " name \"\"",
          [path](Side& x) { return setxattr(x.c(path), "", "v", 1, 0); });
    s.Sys("getxattr " + path + " name \"\"", [path](Side& x) {
      char b[4];
      return getxattr(x.c(path), "", b, sizeof b);
    });
    s.Sys("setxattr " + path + " unknown namespace",
          [path](Side& x) { return setxattr(x.c(path), "nonsense.name", "v", 1, 0); });
    s.Sys("setxattr " + path + " no namespace",
          [path](Side& x) { return setxattr(x.c(path), "plain", "v", 1, 0); });
    // Flags.
    s.Sys("setxattr " + path + " XATTR_CREATE on existing",
          [path](Side& x) { return setxattr(x.c(path), "user.v1", "v", 1, XATTR_CREATE); });
    s.Sys("setxattr " + path + " XATTR_REPLACE on missing",
          [path](Side& x) { return setxattr(x.c(path), "user.none", "v", 1, XATTR_REPLACE); });
    s.Sys("setxattr " + path + " both flags", [path](Side& x) {
      return setxattr(x.c(path), "user.v1", "w", 1, XATTR_CREATE | XATTR_REPLACE);
    });
    s.Sys("setxattr " + path + " unknown flag",
          [path](Side& x) { return setxattr(x.c(path), "user.v1", "w", 1, 0x4); });
    s.Sys("setxattr " + path + " XATTR_REPLACE on existing",
          [path](Side& x) { return setxattr(x.c(path), "user.v1", "w", 1, XATTR_REPLACE); },
          {path});
    s.Do("getxattr " + path + " user.v1",
         [path](Side& x) { return GetXattr(x.c(path), "user.v1", 16); });
    s.Sys("removexattr " + path + " missing",
          [path](Side& x) { return removexattr(x.c(path), "user.none"); }, {path});
    // Other namespaces root may use.
    s.Sys("setxattr " + path + " trusted 64 KiB",
          [path](Side& x) {
            const std::string value(65536, 't');
            return setxattr(x.c(path), "trusted.big", value.data(), value.size(), 0);
          },
          {path});
    s.Sys("setxattr " + path + " security.x",
          [path](Side& x) { return setxattr(x.c(path), "security.x", "s", 1, 0); }, {path});
    s.Xattrs(path);
    // listxattr with short buffers.
    s.Do("listxattr " + path + " size probe and short buffer", [path](Side& x) {
      const ssize_t size = listxattr(x.c(path), nullptr, 0);
      if (size < 0) return Ret(-1);
      std::string list(size, '\0');
      return Fields{{"size", std::to_string(size)},
                    {"short", Ret(listxattr(x.c(path), list.data(), size - 1))[0].second}};
    });
  }
  // POSIX ACLs: tmpfs keeps them, cudafs refuses the system.* namespace.
  s.Do("getxattr f system.posix_acl_access",
       [](Side& x) { return GetXattr(x.c("f"), "system.posix_acl_access", 64); })
      .ExpectDifference("ret", "-1 ENODATA", "-1 EOPNOTSUPP",
                        "no POSIX ACLs on cudafs: system.* is refused with EOPNOTSUPP (README "
                        "\"Semantics\")");
  // Lists longer than XATTR_LIST_MAX (64 KiB).
  s.Do("setxattr 270 names of 250 bytes on g", [](Side& x) {
    if (Create(x.c("g"), "") != 0) return Ret(-1);
    for (int i = 0; i < 270; ++i) {
      char prefix[16];
      std::snprintf(prefix, sizeof prefix, "user.%03d", i);
      const std::string name = prefix + std::string(250 - 8, 'n');
      if (setxattr(x.c("g"), name.c_str(), "", 0, 0) != 0) return Ret(-1);
    }
    return Ret(0);
  });
  s.Do("listxattr g",
       [](Side& x) {
         std::string list(1 << 17, '\0');
         return Fields{
             {"probe", Ret(listxattr(x.c("g"), nullptr, 0))[0].second},
             {"64 KiB buffer", Ret(listxattr(x.c("g"), list.data(), 65536))[0].second},
             {"128 KiB buffer", Ret(listxattr(x.c("g"), list.data(), list.size()))[0].second}};
       })
      .ExpectDifference("probe", "67770", "65536",
                        "the FUSE kernel module caps listxattr's size probe at XATTR_LIST_MAX "
                        "(fuse_listxattr: min(outarg.size, XATTR_LIST_MAX)); cudafs answers 67770");
  // Many large values on one file.
  s.Do("8 values of 64 KiB on h",
       [](Side& x) {
         if (Create(x.c("h"), "") != 0) return Ret(-1);
         for (int i = 0; i < 8; ++i) {
           const std::string value = RandomBytes(65536, 100 + i);
           if (setxattr(x.c("h"), ("user.big" + std::to_string(i)).c_str(), value.data(),
                        value.size(), 0) != 0) {
             return Ret(-1);
           }
         }
         return Ret(0);
       },
       {"h"});
  s.Xattrs("h");
  s.Do("getxattr h user.big7", [](Side& x) { return GetXattr(x.c("h"), "user.big7", 65536); });
  // Where user.* is not allowed.
  s.Sys("symlink l", [](Side& x) { return symlink("f", x.c("l")); });
  s.Sys("lsetxattr l user.x", [](Side& x) { return lsetxattr(x.c("l"), "user.x", "1", 1, 0); });
  s.Sys("lsetxattr l trusted.x",
        [](Side& x) { return lsetxattr(x.c("l"), "trusted.x", "1", 1, 0); }, {"l"});
  s.Xattrs("l", false);
  s.Sys("mkfifo p", [](Side& x) { return mkfifo(x.c("p"), 0644); });
  s.Sys("setxattr p user.x", [](Side& x) { return setxattr(x.c("p"), "user.x", "1", 1, 0); });
  s.Do("getxattr p user.x", [](Side& x) { return GetXattr(x.c("p"), "user.x", 8); });
  s.Sys("setxattr p trusted.x", [](Side& x) { return setxattr(x.c("p"), "trusted.x", "1", 1, 0); });
  Run(s);
}

// A namespace prefix with nothing after it ("user."): the VFS refuses it
// with EINVAL (xattr_resolve_name) for filesystems with per-namespace
// handlers like tmpfs; FUSE registers one handler for every name, so the
// check is the daemon's.
//
// cudafs used to store and list "user.", "trusted." and "security."
// (found by this test; CheckXattrAccess now refuses them).
TEST_P(DifferentialTest, XattrEmptyNameInNamespace) {
  Script s;
  s.Sys("creat f", [](Side& x) { return Create(x.c("f"), "x"); });
  for (const char* name : {"user.", "trusted.", "security."}) {
    const std::string n = name;
    s.Sys("setxattr f \"" + n + "\"",
          [n](Side& x) { return setxattr(x.c("f"), n.c_str(), "v", 1, 0); });
    s.Sys("getxattr f \"" + n + "\"", [n](Side& x) {
      char b[4];
      return getxattr(x.c("f"), n.c_str(), b, sizeof b);
    });
  }
  s.Xattrs("f");
  Run(s);
}

// ---------------------------------------------------------------------------
// FIFOs, sockets, device nodes

TEST_P(DifferentialTest, SpecialFiles) {
  Script s;
  s.Sys("mknod fifo", [](Side& x) { return mknod(x.c("fifo"), S_IFIFO | 0666, 0); }, {".", "fifo"});
  s.Sys("mknod sock", [](Side& x) { return mknod(x.c("sock"), S_IFSOCK | 0600, 0); },
        {".", "sock"});
  s.Sys("mknod chr 1,3", [](Side& x) { return mknod(x.c("chr"), S_IFCHR | 0666, makedev(1, 3)); },
        {".", "chr"});
  s.Sys("mknod blk 7,0", [](Side& x) { return mknod(x.c("blk"), S_IFBLK | 0660, makedev(7, 0)); },
        {".", "blk"});
  s.Sys("mknod big 4095,1048575",
        [](Side& x) { return mknod(x.c("big"), S_IFCHR | 0600, makedev(4095, 1048575)); }, {"big"});
  s.Sys("mknod reg (S_IFREG)", [](Side& x) { return mknod(x.c("reg"), S_IFREG | 0640, 0); },
        {"reg"});
  s.Sys("mknod plain (mode 0)", [](Side& x) { return mknod(x.c("plain"), 0, 0); }, {"plain"});
  s.Sys("mknod dir (S_IFDIR)", [](Side& x) { return mknod(x.c("dir"), S_IFDIR | 0755, 0); });
  s.Sys("mknod bad type", [](Side& x) { return mknod(x.c("bad"), 0170000 | 0644, 0); });
  s.Sys("mknod fifo (exists)", [](Side& x) { return mknod(x.c("fifo"), S_IFIFO | 0666, 0); });
  s.SysAs(kNobody, "mknod chr as nobody",
          [](Side& x) { return mknod(x.c("chr2"), S_IFCHR | 0666, makedev(1, 3)); });
  s.List(".");
  // Opening them: the mounts are nodev.
  s.Sys("open chr", [](Side& x) { return OpenClose(x.c("chr"), O_RDWR); });
  s.Sys("open blk", [](Side& x) { return OpenClose(x.c("blk"), O_RDONLY); });
  s.Sys("open sock", [](Side& x) { return OpenClose(x.c("sock"), O_RDONLY); });
  s.Sys("open fifo O_WRONLY|O_NONBLOCK (no reader)",
        [](Side& x) { return OpenClose(x.c("fifo"), O_WRONLY | O_NONBLOCK); });
  s.Do("open fifo O_RDONLY|O_NONBLOCK",
       [](Side& x) { return x.Keep("r", open(x.c("fifo"), O_RDONLY | O_NONBLOCK)); }, {"fifo"});
  s.Do("open fifo O_WRONLY|O_NONBLOCK",
       [](Side& x) { return x.Keep("w", open(x.c("fifo"), O_WRONLY | O_NONBLOCK)); }, {"fifo"});
  // FIFO data goes through the kernel's pipe code, which updates the
  // inode's times in memory; FUSE never tells the filesystem, and the next
  // stat asks cudafs, whose times are unchanged.
  const std::string fifo_times =
      "FIFO reads and writes never reach a FUSE filesystem (the kernel's pipe code serves "
      "them), so cudafs cannot update the FIFO's timestamps";
  s.Sys("write to the fifo", [](Side& x) { return WriteString(x.fd("w"), "through"); }, {"fifo"})
      .ExpectDifference("fifo", "mode=10644 nlink=1 uid=0 gid=0 size=0 times=mc",
                        "mode=10644 nlink=1 uid=0 gid=0 size=0 times=-", fifo_times);
  s.Do("read from the fifo",
       [](Side& x) {
         char b[16];
         const ssize_t n = read(x.fd("r"), b, sizeof b);
         return n < 0 ? Ret(-1) : Fields{{"data", std::string(b, n)}};
       },
       {"fifo"})
      .ExpectDifference("fifo", "mode=10644 nlink=1 uid=0 gid=0 size=0 times=a",
                        "mode=10644 nlink=1 uid=0 gid=0 size=0 times=-", fifo_times);
  s.Sys("lseek on the fifo", [](Side& x) { return lseek(x.fd("r"), 0, SEEK_SET); });
  s.Sys("ftruncate the fifo", [](Side& x) { return ftruncate(x.fd("w"), 0); });
  s.FStat("w");
  s.Close("w");
  s.Close("r");
  s.Sys("truncate fifo", [](Side& x) { return truncate(x.c("fifo"), 0); });
  s.Sys("truncate chr", [](Side& x) { return truncate(x.c("chr"), 0); });
  // A socket made by bind(2), and a connection through it.
  s.Do("bind, listen, connect on sock2",
       [](Side& x) {
         sockaddr_un address = {};
         address.sun_family = AF_UNIX;
         const std::string path = x.Path("sock2");
         if (path.size() >= sizeof address.sun_path) return Fields{{"ret", "path too long"}};
         memcpy(address.sun_path, path.c_str(), path.size() + 1);
         Fd server(socket(AF_UNIX, SOCK_STREAM, 0));
         Fd client(socket(AF_UNIX, SOCK_STREAM, 0));
         const auto addr = reinterpret_cast<const sockaddr*>(&address);
         Fields fields;
         fields.emplace_back("bind", Ret(bind(server.get(), addr, sizeof address))[0].second);
         fields.emplace_back("listen", Ret(listen(server.get(), 1))[0].second);
         fields.emplace_back("connect", Ret(connect(client.get(), addr, sizeof address))[0].second);
         Fd accepted(accept(server.get(), nullptr, nullptr));
         fields.emplace_back("send", Ret(send(client.get(), "hi", 2, 0))[0].second);
         char b[4] = {};
         fields.emplace_back("recv", Ret(recv(accepted.get(), b, sizeof b, 0))[0].second);
         fields.emplace_back("data", b);
         Fd again(socket(AF_UNIX, SOCK_STREAM, 0));
         fields.emplace_back("bind again", Ret(bind(again.get(), addr, sizeof address))[0].second);
         return fields;
       },
       {".", "sock2"});
  s.Sys("connect to mknod'ed sock (no listener)", [](Side& x) {
    sockaddr_un address = {};
    address.sun_family = AF_UNIX;
    const std::string path = x.Path("sock");
    memcpy(address.sun_path, path.c_str(), std::min(path.size() + 1, sizeof address.sun_path - 1));
    Fd client(socket(AF_UNIX, SOCK_STREAM, 0));
    return connect(client.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address);
  });
  // Metadata calls on special files.
  s.Sys("chmod chr 0600", [](Side& x) { return chmod(x.c("chr"), 0600); }, {"chr"});
  s.Sys("chown fifo 1000:1000", [](Side& x) { return chown(x.c("fifo"), kOwnerUid, kOwnerGid); },
        {"fifo"});
  s.Sys("utimensat sock", [](Side& x) { return Utimes(x.c("sock"), {7, 7}, {8, 8}); }, {"sock"});
  s.Times("sock");
  s.Sys("link chr chr-link", [](Side& x) { return link(x.c("chr"), x.c("chr-link")); },
        {"chr", "chr-link"});
  s.Sys("rename blk blk2", [](Side& x) { return rename(x.c("blk"), x.c("blk2")); }, {".", "blk2"});
  s.Sys("unlink sock2", [](Side& x) { return unlink(x.c("sock2")); }, {"."});
  s.List(".");
  Run(s);
}

// ---------------------------------------------------------------------------
// `ls -l` of a prepared tree

// `ls -la --time-style=+` output as fields: one per entry, keyed by name,
// with the columns joined by single spaces (column widths follow the widest
// value, which differs with the directory sizes). A directory's size column
// goes to its own field (see DifferenceRules), and the "total" line (the sum
// of st_blocks) is left out.
Fields LsFields(const CommandResult& result) {
  Fields fields = {{"exit", std::to_string(result.exit_code)}, {"stderr", result.err}};
  std::istringstream lines(result.out);
  std::vector<std::string> order;
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("total ")) continue;
    std::vector<std::string> columns;
    size_t at = 0;
    const size_t count = (line[0] == 'c' || line[0] == 'b') ? 6 : 5;
    while (columns.size() < count) {
      const size_t start = line.find_first_not_of(' ', at);
      if (start == std::string::npos) break;
      at = line.find(' ', start);
      if (at == std::string::npos) at = line.size();
      columns.push_back(line.substr(start, at - start));
    }
    const size_t name_start = line.find_first_not_of(' ', at);
    const std::string name = name_start == std::string::npos ? "" : line.substr(name_start);
    order.push_back(name);
    if (line[0] == 'd' && columns.size() == 5) {
      fields.emplace_back("ls " + name + " ls-dirsize", columns[4]);
      columns.pop_back();
    }
    fields.emplace_back("ls " + name, Join(columns, " "));
  }
  fields.emplace_back("order", Join(order, " | "));
  return fields;
}

TEST_P(DifferentialTest, LsLongOutput) {
  if (!HaveTool("ls")) GTEST_SKIP() << "no ls";
  Script s;
  s.Do("prepare the tree", [](Side& x) {
    const auto check = [](long long result) { return result == 0; };
    bool ok =
        check(Create(x.c("file"), "hello")) && check(chmod(x.c("file"), 0644)) &&
        check(Create(x.c("exe"), "#!/bin/sh\n")) && check(chmod(x.c("exe"), 0755)) &&
        check(Create(x.c("suid"), "s")) && check(chmod(x.c("suid"), 04755)) &&
        check(Create(x.c("sgid"), "s")) && check(chmod(x.c("sgid"), 02755)) &&
        check(Create(x.c("sgid-noexec"), "s")) && check(chmod(x.c("sgid-noexec"), 02644)) &&
        check(Create(x.c("none"), "")) && check(chmod(x.c("none"), 0)) &&
        check(Create(x.c("all"), "")) && check(chmod(x.c("all"), 07777)) &&
        check(Create(x.c("with space"), "sp")) &&
        check(Create(x.c("big"), std::string(123457, 'b'))) && check(Create(x.c("sparse"), "")) &&
        check(truncate(x.c("sparse"), 5 << 20)) && check(MkdirExact(x.c("dir"), 0755)) &&
        check(Create(x.c("dir/inner"), "i")) && check(mkdir(x.c("dir/sub"), 0755)) &&
        check(MkdirExact(x.c("sticky"), 01777)) && check(MkdirExact(x.c("setgid-dir"), 02775)) &&
        check(MkdirExact(x.c("empty"), 0700)) && check(symlink("file", x.c("link"))) &&
        check(symlink("missing", x.c("dangling"))) && check(mkfifo(x.c("fifo"), 0644)) &&
        check(mknod(x.c("sock"), S_IFSOCK | 0755, 0)) &&
        check(mknod(x.c("chr"), S_IFCHR | 0666, makedev(1, 3))) &&
        check(mknod(x.c("blk"), S_IFBLK | 0660, makedev(7, 12))) &&
        check(Create(x.c("hard1"), "h")) && check(link(x.c("hard1"), x.c("hard2"))) &&
        check(Create(x.c("owned"), "o")) && check(chown(x.c("owned"), kOwnerUid, kOwnerGid)) &&
        check(Create(x.c("nobodys"), "n")) && check(chown(x.c("nobodys"), kOtherUid, kOtherGid)) &&
        check(Create(x.c("numeric"), "n")) && check(chown(x.c("numeric"), 4321, kThirdGid)) &&
        check(Create(x.c(std::string(255, 'L')), "long")) &&
        check(setxattr(x.c("file"), "user.x", "1", 1, 0)) &&
        check(lchown(x.c("link"), kOwnerUid, kOwnerGid));
    return Ret(ok ? 0 : -1);
  });
  for (const char* dir : {".", "dir", "empty"}) {
    const std::string d = dir;
    s.Do("ls -la --time-style=+ " + d, [d](Side& x) {
      return LsFields(
          RunCommand({"env", "LC_ALL=C", "TZ=UTC", "ls", "-la", "--time-style=+", x.Path(d)}));
    });
  }
  s.Do("ls -ld --time-style=+ (the directory itself)", [](Side& x) {
    return LsFields(RunCommand({"env", "LC_ALL=C", "ls", "-ld", "--time-style=+", x.Path(".")}));
  });
  s.Do("ls -lL --time-style=+ link dangling", [](Side& x) {
    return LsFields(RunCommand(
        {"env", "LC_ALL=C", "ls", "-lL", "--time-style=+", x.Path("link"), x.Path("dangling")}));
  });
  s.Do("ls -lnR --time-style=+ dir", [](Side& x) {
    const CommandResult result =
        RunCommand({"env", "LC_ALL=C", "ls", "-lnR", "--time-style=+", x.Path("dir")});
    // Headers name each side's paths.
    CommandResult normalized = result;
    normalized.out.clear();
    std::istringstream lines(result.out);
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with(x.root())) line = "$ROOT" + line.substr(x.root().size());
      if (line.empty() || line.ends_with(":")) continue;
      normalized.out += line + "\n";
    }
    return LsFields(normalized);
  });
  Run(s);
}

// ---------------------------------------------------------------------------
// Interfaces tmpfs offers that cudafs does not (yet), listed in the
// README: O_TMPFILE (no tmpfile operation; libfuse 3.18 has one), statx's
// birth time and attribute flags (no statx operation), FS_IOC_GETFLAGS
// (lsattr/chattr). Each is an expected difference, so the test fails once
// one of them is implemented and the README needs updating.
TEST_P(DifferentialTest, OptionalInterfaces) {
  Script s;
  s.Do("open . O_TMPFILE|O_RDWR 0600",
       [](Side& x) { return x.Keep("tmp", open(x.c("."), O_TMPFILE | O_RDWR, 0600)); }, {"."})
      .ExpectDifference("ret", "fd", "-1 EOPNOTSUPP", "no O_TMPFILE");
  s.Sys("creat f", [](Side& x) { return Create(x.c("f"), "f"); });
  s.Do("statx f", [](Side& x) {
     struct statx stx;
     if (statx(AT_FDCWD, x.c("f"), 0, STATX_BASIC_STATS | STATX_BTIME, &stx) != 0) return Ret(-1);
     return Fields{{"stx_mask", Hex(stx.stx_mask & (STATX_BASIC_STATS | STATX_BTIME))},
                   {"stx_attributes_mask", Hex(stx.stx_attributes_mask)},
                   {"stx_attributes", Hex(stx.stx_attributes)}};
   })
      .ExpectDifference("stx_mask", "0xfff", "0x7ff", "no birth time")
      .ExpectDifference("stx_attributes_mask", "0x203070", "0x203000", "no statx attributes");
  s.Do("ioctl FS_IOC_GETFLAGS", [](Side& x) {
     Fd fd(open(x.c("f"), O_RDONLY));
     int flags = 0;
     if (ioctl(fd.get(), kGetInodeFlags, &flags) != 0) return Ret(-1);
     return Fields{{"flags", Hex(flags)}};
   })
      .ExpectDifference("flags", "0x0", "<missing>", "no FS_IOC_GETFLAGS")
      .ExpectDifference("ret", "<missing>", "-1 ENOTTY", "no FS_IOC_GETFLAGS");
  s.List(".");
  Run(s);
}

CUDAFS_INSTANTIATE_BACKENDS(DifferentialTest);

}  // namespace
}  // namespace cudafs_test
