// Metadata on a mounted cudafs, through real system calls: modes and
// owners, timestamps, permission checks (the mount uses
// default_permissions), sticky and setgid directories, set-id bits and
// extended attributes. Expectations are tmpfs' (the suite passes with
// CUDAFS_TEST_DIR=/dev/shm); the timestamp rules are also checked against
// /dev/shm in the same run.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tests/mount/mount_fixture.h"
#include "tests/support/errno_check.h"
#include "tests/support/fd.h"
#include "tests/support/file_io.h"
#include "tests/support/processes.h"
#include "tests/support/timestamps.h"

namespace cudafs_test {
namespace {

using MetadataTest = FsTest;

// A group that neither test user belongs to.
constexpr gid_t kThirdGid = 4242;

mode_t ModeOf(const std::string& path) {
  const auto st = StatPath(path);
  return st ? st->st_mode : 0;
}

// Runs `call` as the given user in a child process; its errno.
Errno As(uid_t uid, gid_t gid, const std::function<long long()>& call) {
  return RunAs(uid, gid, [&] { return ResultErrno(call()); });
}
Errno AsOwner(const std::function<long long()>& call) { return As(kOwnerUid, kOwnerGid, call); }
Errno AsOther(const std::function<long long()>& call) { return As(kOtherUid, kOtherGid, call); }

constexpr Errno kOk{0};

// open(2), closing at once: 0, or -1 with open's errno.
int OpenAndClose(const std::string& path, int flags, mode_t mode = 0) {
  const int fd = open(path.c_str(), flags, mode);
  if (fd < 0) return -1;
  close(fd);
  return 0;
}

bool SameTime(const timespec& a, const timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

// Which of atime, mtime and ctime differ between two stats: a subset of
// "amc", in that order.
std::string ChangedTimes(const struct stat& before, const struct stat& after) {
  std::string changed;
  if (!SameTime(before.st_atim, after.st_atim)) changed += 'a';
  if (!SameTime(before.st_mtim, after.st_mtim)) changed += 'm';
  if (!SameTime(before.st_ctim, after.st_ctim)) changed += 'c';
  return changed;
}

// ---------------------------------------------------------------------------
// chmod / chown

TEST_P(MetadataTest, ChmodChangesPermissionBitsOnly) {
  ASSERT_TRUE(WriteFile(Path("file"), "x"));
  ASSERT_SYS_OK(mkdir(Path("dir").c_str(), 0755));
  for (mode_t mode : {0u, 0644u, 0777u, 04755u, 02750u, 01777u, 07777u}) {
    ASSERT_SYS_OK(chmod(Path("file").c_str(), mode));
    EXPECT_EQ(ModeOf(Path("file")), S_IFREG | mode) << std::oct << mode;
    ASSERT_SYS_OK(chmod(Path("dir").c_str(), mode));
    EXPECT_EQ(ModeOf(Path("dir")), S_IFDIR | mode) << std::oct << mode;
  }
  // Through a descriptor too, and a symlink's own mode is not changed.
  ASSERT_SYS_OK(symlink("file", Path("link").c_str()));
  ASSERT_SYS_OK(chmod(Path("link").c_str(), 0600));
  EXPECT_EQ(ModeOf(Path("file")), S_IFREG | 0600);
  EXPECT_EQ(ModeOf(Path("link")), S_IFLNK | 0777);
  Fd fd(open(Path("file").c_str(), O_RDONLY));
  ASSERT_SYS_OK(fchmod(fd.get(), 0640));
  EXPECT_EQ(ModeOf(Path("file")), S_IFREG | 0640);
}

TEST_P(MetadataTest, NewInodesTakeModeMinusUmask) {
  ASSERT_SYS_OK(OpenAndClose(Path("file"), O_CREAT | O_WRONLY, 0666));
  EXPECT_EQ(ModeOf(Path("file")), S_IFREG | 0644);
  // Set-id and sticky bits survive on files; mkdir keeps only sticky.
  ASSERT_SYS_OK(OpenAndClose(Path("setid"), O_CREAT | O_WRONLY, 07777));
  EXPECT_EQ(ModeOf(Path("setid")), S_IFREG | 07755);
  ASSERT_SYS_OK(mkdir(Path("dir").c_str(), 07777));
  EXPECT_EQ(ModeOf(Path("dir")), S_IFDIR | 01755);
  ASSERT_SYS_OK(mknod(Path("fifo").c_str(), S_IFIFO | 0666, 0));
  EXPECT_EQ(ModeOf(Path("fifo")), S_IFIFO | 0644);
  ASSERT_SYS_OK(symlink("file", Path("link").c_str()));
  EXPECT_EQ(ModeOf(Path("link")), S_IFLNK | 0777);
  {
    ScopedUmask umask(077);
    ASSERT_SYS_OK(OpenAndClose(Path("private"), O_CREAT | O_WRONLY, 0666));
    EXPECT_EQ(ModeOf(Path("private")), S_IFREG | 0600);
  }
  // An existing file keeps its mode whatever open asks for.
  ASSERT_SYS_OK(OpenAndClose(Path("file"), O_CREAT | O_WRONLY, 0600));
  EXPECT_EQ(ModeOf(Path("file")), S_IFREG | 0644);
  // New inodes belong to the creator.
  EXPECT_EQ(AsOwner([&] { return mkdir(Path("owners").c_str(), 0755); }), kOk);
  const auto st = StatPath(Path("owners"));
  ASSERT_TRUE(st);
  EXPECT_EQ(st->st_uid, kOwnerUid);
  EXPECT_EQ(st->st_gid, kOwnerGid);
}

TEST_P(MetadataTest, OnlyOwnerOrRootMayChmodAndChown) {
  ASSERT_TRUE(WriteFile(Path("file"), "x"));
  ASSERT_SYS_OK(chown(Path("file").c_str(), kOwnerUid, kOwnerGid));
  ASSERT_SYS_OK(chmod(Path("file").c_str(), 0644));
  const std::string file = Path("file");

  EXPECT_EQ(AsOther([&] { return chmod(file.c_str(), 0666); }), Errno{EPERM});
  EXPECT_EQ(AsOther([&] { return chown(file.c_str(), kOtherUid, -1); }), Errno{EPERM});
  EXPECT_EQ(AsOther([&] { return chown(file.c_str(), -1, kOtherGid); }), Errno{EPERM});
  // The owner may change the mode and move the file to a group it is in,
  // but not give it away or move it to another group.
  EXPECT_EQ(AsOwner([&] { return chmod(file.c_str(), 0600); }), kOk);
  EXPECT_EQ(ModeOf(file), S_IFREG | 0600);
  EXPECT_EQ(AsOwner([&] { return chown(file.c_str(), kOtherUid, -1); }), Errno{EPERM});
  EXPECT_EQ(AsOwner([&] { return chown(file.c_str(), -1, kThirdGid); }), Errno{EPERM});
  EXPECT_EQ(AsOwner([&] { return chown(file.c_str(), kOwnerUid, kOwnerGid); }), kOk);
  EXPECT_EQ(AsOwner([&] { return chown(file.c_str(), -1, -1); }), kOk);

  // Root may do anything.
  ASSERT_SYS_OK(chown(file.c_str(), kOtherUid, kThirdGid));
  auto st = StatPath(file);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->st_uid, kOtherUid);
  EXPECT_EQ(st->st_gid, kThirdGid);
  ASSERT_SYS_OK(chown(file.c_str(), -1, kOwnerGid));
  st = StatPath(file);
  EXPECT_EQ(st->st_uid, kOtherUid);
  EXPECT_EQ(st->st_gid, kOwnerGid);
  // lchown changes the link, not its target.
  ASSERT_SYS_OK(symlink("file", Path("link").c_str()));
  ASSERT_SYS_OK(lchown(Path("link").c_str(), kOwnerUid, kOwnerGid));
  EXPECT_EQ(StatPath(Path("link"))->st_uid, kOwnerUid);
  EXPECT_EQ(StatPath(file)->st_uid, kOtherUid);
}

TEST_P(MetadataTest, ChownClearsSetIdBitsOfFiles) {
  ASSERT_TRUE(WriteFile(Path("suid"), "x"));
  ASSERT_SYS_OK(chmod(Path("suid").c_str(), 06755));
  ASSERT_SYS_OK(chown(Path("suid").c_str(), kOwnerUid, kOwnerGid));
  EXPECT_EQ(ModeOf(Path("suid")), S_IFREG | 0755);

  // setgid without group execute is not a set-id bit (it asks for
  // mandatory locking), and stays for root.
  ASSERT_TRUE(WriteFile(Path("sgid-noexec"), "x"));
  ASSERT_SYS_OK(chmod(Path("sgid-noexec").c_str(), 02644));
  ASSERT_SYS_OK(chown(Path("sgid-noexec").c_str(), kOwnerUid, kOwnerGid));
  EXPECT_EQ(ModeOf(Path("sgid-noexec")), S_IFREG | 02644);

  // Directories keep setgid: it is what makes them setgid directories.
  ASSERT_SYS_OK(mkdir(Path("dir").c_str(), 0755));
  ASSERT_SYS_OK(chmod(Path("dir").c_str(), 02755));
  ASSERT_SYS_OK(chown(Path("dir").c_str(), kOwnerUid, kOwnerGid));
  EXPECT_EQ(ModeOf(Path("dir")), S_IFDIR | 02755);

  // The owner's chgrp clears them too.
  ASSERT_SYS_OK(chmod(Path("suid").c_str(), 06755));
  const std::string suid = Path("suid");
  EXPECT_EQ(AsOwner([&] { return chown(suid.c_str(), -1, kOwnerGid); }), kOk);
  EXPECT_EQ(ModeOf(suid), S_IFREG | 0755);
}

// ---------------------------------------------------------------------------
// utimensat

TEST_P(MetadataTest, ExplicitTimesKeepNanoseconds) {
  ASSERT_TRUE(WriteFile(Path("file"), "x"));
  const std::vector<std::pair<timespec, timespec>> cases = {
      {{1'000'000'000, 123'456'789}, {1'500'000'000, 987'654'321}},
      {{0, 0}, {1, 1}},
      {{4'102'444'800, 999'999'999}, {2'000'000'000, 500}},  // 2100
      {{-1'000'000, 5}, {-1, 999'999'999}},                  // before 1970
  };
  for (const auto& [atime, mtime] : cases) {
    const timespec times[2] = {atime, mtime};
    const timespec before = WallClock();
    ASSERT_SYS_OK(utimensat(AT_FDCWD, Path("file").c_str(), times, 0));
    const auto st = StatPath(Path("file"));
    ASSERT_TRUE(st);
    EXPECT_EQ(st->st_atim.tv_sec, atime.tv_sec);
    EXPECT_EQ(st->st_atim.tv_nsec, atime.tv_nsec);
    EXPECT_EQ(st->st_mtim.tv_sec, mtime.tv_sec);
    EXPECT_EQ(st->st_mtim.tv_nsec, mtime.tv_nsec);
    // Setting times is a change: ctime is now (the kernel's clock may lag
    // the wall clock by a tick).
    EXPECT_GE(Nanos(st->st_ctim), Nanos(before) - 20'000'000);
    EXPECT_LE(Nanos(st->st_ctim), Nanos(WallClock()));
  }
  // On directories and symlinks (AT_SYMLINK_NOFOLLOW) as well.
  ASSERT_SYS_OK(mkdir(Path("dir").c_str(), 0755));
  ASSERT_SYS_OK(symlink("file", Path("link").c_str()));
  const timespec times[2] = {{111, 222}, {333, 444}};
  ASSERT_SYS_OK(utimensat(AT_FDCWD, Path("dir").c_str(), times, 0));
  ASSERT_SYS_OK(utimensat(AT_FDCWD, Path("link").c_str(), times, AT_SYMLINK_NOFOLLOW));
  for (const char* name : {"dir", "link"}) {
    const auto st = StatPath(Path(name));
    EXPECT_EQ(Nanos(st->st_atim), 111'000'000'222) << name;
    EXPECT_EQ(Nanos(st->st_mtim), 333'000'000'444) << name;
  }
  // The link's target kept its own times.
  EXPECT_NE(Nanos(StatPath(Path("file"))->st_mtim), 333'000'000'444);
}

TEST_P(MetadataTest, UtimeNowAndOmit) {
  ASSERT_TRUE(WriteFile(Path("file"), "x"));
  const std::string file = Path("file");
  const timespec old_times[2] = {{1000, 1}, {2000, 2}};
  ASSERT_SYS_OK(utimensat(AT_FDCWD, file.c_str(), old_times, 0));

  // NOW for atime, OMIT for mtime.
  const timespec before = WallClock();
  const timespec now_omit[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
  ASSERT_SYS_OK(utimensat(AT_FDCWD, file.c_str(), now_omit, 0));
  auto st = StatPath(file);
  ASSERT_TRUE(st);
  EXPECT_GE(Nanos(st->st_atim), Nanos(before) - 20'000'000);
  EXPECT_LE(Nanos(st->st_atim), Nanos(WallClock()));
  EXPECT_EQ(Nanos(st->st_mtim), 2000'000'000'002);

  // OMIT for atime, an explicit mtime.
  const timespec omit_set[2] = {{0, UTIME_OMIT}, {3000, 3}};
  const int64_t atime = Nanos(st->st_atim);
  ASSERT_SYS_OK(utimensat(AT_FDCWD, file.c_str(), omit_set, 0));
  st = StatPath(file);
  EXPECT_EQ(Nanos(st->st_atim), atime);
  EXPECT_EQ(Nanos(st->st_mtim), 3000'000'000'003);

  // Both OMIT: nothing changes, not even ctime.
  const int64_t ctime = Nanos(st->st_ctim);
  SleepPastClockTick();
  const timespec omit_omit[2] = {{0, UTIME_OMIT}, {0, UTIME_OMIT}};
  ASSERT_SYS_OK(utimensat(AT_FDCWD, file.c_str(), omit_omit, 0));
  st = StatPath(file);
  EXPECT_EQ(Nanos(st->st_atim), atime);
  EXPECT_EQ(Nanos(st->st_mtim), 3000'000'000'003);
  EXPECT_EQ(Nanos(st->st_ctim), ctime);

  // NULL times: both now, equal to each other.
  ASSERT_SYS_OK(utimensat(AT_FDCWD, file.c_str(), nullptr, 0));
  st = StatPath(file);
  EXPECT_EQ(Nanos(st->st_atim), Nanos(st->st_mtim));
  EXPECT_GT(Nanos(st->st_mtim), 3000'000'000'003);
}

TEST_P(MetadataTest, WhoMaySetTimes) {
  ASSERT_TRUE(WriteFile(Path("writable"), "x"));
  ASSERT_SYS_OK(chown(Path("writable").c_str(), kOwnerUid, kOwnerGid));
  ASSERT_SYS_OK(chmod(Path("writable").c_str(), 0666));
  ASSERT_TRUE(WriteFile(Path("readonly"), "x"));
  ASSERT_SYS_OK(chown(Path("readonly").c_str(), kOwnerUid, kOwnerGid));
  ASSERT_SYS_OK(chmod(Path("readonly").c_str(), 0644));
  const std::string writable = Path("writable");
  const std::string readonly = Path("readonly");
  const timespec explicit_times[2] = {{10, 0}, {20, 0}};
  const timespec now_times[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};

  // Anyone who may write may set "now"; only the owner may set a value.
  EXPECT_EQ(AsOther([&] { return utimensat(AT_FDCWD, writable.c_str(), nullptr, 0); }), kOk);
  EXPECT_EQ(AsOther([&] { return utimensat(AT_FDCWD, writable.c_str(), now_times, 0); }), kOk);
  EXPECT_EQ(AsOther([&] { return utimensat(AT_FDCWD, writable.c_str(), explicit_times, 0); }),
            Errno{EPERM});
  EXPECT_EQ(AsOther([&] { return utimensat(AT_FDCWD, readonly.c_str(), nullptr, 0); }),
            Errno{EACCES});
  EXPECT_EQ(AsOwner([&] { return utimensat(AT_FDCWD, readonly.c_str(), explicit_times, 0); }), kOk);
  EXPECT_EQ(Nanos(StatPath(readonly)->st_mtim), 20'000'000'000);
}

// ---------------------------------------------------------------------------
// Timestamp rules

// One operation and which timestamps it changes: `file` is a regular file
// with data (with a second name, "file-link", so it stays observable after
// it loses the first), `dir` the directory holding it, `other` an empty
// directory.
struct TimestampCase {
  const char* name;
  std::function<int(const std::string& dir, const std::string& other)> operation;
  const char* file_changes;  // of "amc"
  const char* dir_changes;
  const char* other_changes;
  const char* file_contents = "0123456789";
};

const std::vector<TimestampCase>& TimestampCases() {
  static const auto* cases = new std::vector<TimestampCase>{
      {"write",
       [](const std::string& dir, const std::string&) {
         Fd fd(open((dir + "/file").c_str(), O_WRONLY));
         return pwrite(fd.get(), "new", 3, 1) == 3 ? 0 : -1;
       },
       "mc", "", ""},
      {"append",
       [](const std::string& dir, const std::string&) {
         Fd fd(open((dir + "/file").c_str(), O_WRONLY | O_APPEND));
         return write(fd.get(), "more", 4) == 4 ? 0 : -1;
       },
       "mc", "", ""},
      {"truncate-shrink",
       [](const std::string& dir, const std::string&) {
         return truncate((dir + "/file").c_str(), 2);
       },
       "mc", "", ""},
      {"truncate-same-size",
       [](const std::string& dir, const std::string&) {
         return truncate((dir + "/file").c_str(), 10);
       },
       "mc", "", ""},
      {"open-o-trunc",
       [](const std::string& dir, const std::string&) {
         Fd fd(open((dir + "/file").c_str(), O_WRONLY | O_TRUNC));
         return fd.valid() ? 0 : -1;
       },
       "mc", "", ""},
      {"ftruncate-same-size",
       [](const std::string& dir, const std::string&) {
         Fd fd(open((dir + "/file").c_str(), O_WRONLY));
         return ftruncate(fd.get(), 10);
       },
       "mc", "", ""},
      {"open-o-trunc-empty",
       [](const std::string& dir, const std::string&) {
         return OpenAndClose(dir + "/file", O_WRONLY | O_TRUNC);
       },
       "mc", "", "", ""},
      {"write-nothing",
       [](const std::string& dir, const std::string&) {
         Fd fd(open((dir + "/file").c_str(), O_WRONLY));
         return static_cast<int>(pwrite(fd.get(), "", 0, 0));
       },
       "", "", ""},
      {"chmod",
       [](const std::string& dir, const std::string&) {
         return chmod((dir + "/file").c_str(), 0600);
       },
       "c", "", ""},
      {"chown",
       [](const std::string& dir, const std::string&) {
         return chown((dir + "/file").c_str(), kOwnerUid, kOwnerGid);
       },
       "c", "", ""},
      {"setxattr",
       [](const std::string& dir, const std::string&) {
         return setxattr((dir + "/file").c_str(), "user.k", "v", 1, 0);
       },
       "c", "", ""},
      {"link",
       [](const std::string& dir, const std::string& other) {
         return link((dir + "/file").c_str(), (other + "/new-link").c_str());
       },
       "c", "", "mc"},
      {"unlink-one-of-two-names",
       [](const std::string& dir, const std::string&) { return unlink((dir + "/file").c_str()); },
       "c", "mc", ""},
      {"rename-within",
       [](const std::string& dir, const std::string&) {
         return rename((dir + "/file").c_str(), (dir + "/renamed").c_str());
       },
       "c", "mc", ""},
      {"rename-across",
       [](const std::string& dir, const std::string& other) {
         return rename((dir + "/file").c_str(), (other + "/moved").c_str());
       },
       "c", "mc", "mc"},
      {"rename-over-file",
       [](const std::string& dir, const std::string& other) {
         if (!WriteFile(other + "/victim", "v")) return -1;
         SleepPastClockTick();  // so that only the rename itself counts
         return rename((other + "/victim").c_str(), (dir + "/file").c_str());
       },
       "c", "mc", "mc"},
      {"create",
       [](const std::string& dir, const std::string&) {
         Fd fd(open((dir + "/created").c_str(), O_CREAT | O_WRONLY, 0644));
         return fd.valid() ? 0 : -1;
       },
       "", "mc", ""},
      {"mkdir",
       [](const std::string& dir, const std::string&) {
         return mkdir((dir + "/sub").c_str(), 0755);
       },
       "", "mc", ""},
      {"rmdir",
       [](const std::string&, const std::string& other) {
         if (mkdir((other + "/sub").c_str(), 0755) != 0) return -1;
         SleepPastClockTick();
         return rmdir((other + "/sub").c_str());
       },
       "", "", "mc"},
      {"symlink",
       [](const std::string& dir, const std::string&) {
         return symlink("file", (dir + "/symlink").c_str());
       },
       "", "mc", ""},
      {"mknod",
       [](const std::string& dir, const std::string&) {
         return mknod((dir + "/fifo").c_str(), S_IFIFO | 0644, 0);
       },
       "", "mc", ""},
      {"chmod-dir",
       [](const std::string& dir, const std::string&) { return chmod(dir.c_str(), 0700); }, "", "c",
       ""},
      {"failed-mkdir",
       [](const std::string& dir, const std::string&) {
         return mkdir((dir + "/file").c_str(), 0755) == -1 && errno == EEXIST ? 0 : -1;
       },
       "", "", ""},
      {"read",
       [](const std::string& dir, const std::string&) { return ReadFile(dir + "/file") ? 0 : -1; },
       "a", "", ""},
      {"readdir", [](const std::string& dir, const std::string&) { return ListDir(dir) ? 0 : -1; },
       "", "a", ""},
      {"stat",
       [](const std::string& dir, const std::string&) {
         struct stat st;
         return stat((dir + "/file").c_str(), &st);
       },
       "", "", ""},
  };
  return *cases;
}

// What `test_case` changes under `base`, as "file:amc dir:mc other:".
std::string RunTimestampCase(const std::string& base, const TimestampCase& test_case) {
  const std::string dir = base + "/" + test_case.name;
  const std::string other = dir + "-other";
  if (mkdir(dir.c_str(), 0755) != 0 || mkdir(other.c_str(), 0755) != 0) return "setup failed";
  if (!WriteFile(dir + "/file", test_case.file_contents)) return "setup failed";
  if (link((dir + "/file").c_str(), (dir + "/file-link").c_str()) != 0) return "setup failed";
  // Past times leave no doubt that "now" is a change, also for atime under
  // relatime.
  const timespec past[2] = {{1'000'000, 0}, {1'000'000, 0}};
  if (utimensat(AT_FDCWD, (dir + "/file").c_str(), past, 0) != 0) return "setup failed";
  SleepPastClockTick();
  const auto file_before = StatPath(dir + "/file-link");
  const auto dir_before = StatPath(dir);
  const auto other_before = StatPath(other);
  if (!file_before || !dir_before || !other_before) return "setup failed";
  SleepPastClockTick();
  if (test_case.operation(dir, other) != 0) return "operation failed: " + ErrnoName(errno);
  const auto file_after = StatPath(dir + "/file-link");
  const auto dir_after = StatPath(dir);
  const auto other_after = StatPath(other);
  if (!file_after || !dir_after || !other_after) return "stat failed";
  return "file:" + ChangedTimes(*file_before, *file_after) +
         " dir:" + ChangedTimes(*dir_before, *dir_after) +
         " other:" + ChangedTimes(*other_before, *other_after);
}

TEST_P(MetadataTest, TimestampRulesMatchTmpfs) {
  // The expectations are checked on /dev/shm too, when it is a tmpfs, so
  // that the table itself is known to be right.
  std::optional<std::string> reference;
  struct statfs shm;
  if (statfs("/dev/shm", &shm) == 0 && shm.f_type == 0x01021994 /* TMPFS_MAGIC */) {
    std::string pattern = "/dev/shm/cudafs-times-XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) reference = pattern;
  }
  for (const TimestampCase& test_case : TimestampCases()) {
    const std::string expected = std::string("file:") + test_case.file_changes +
                                 " dir:" + test_case.dir_changes +
                                 " other:" + test_case.other_changes;
    EXPECT_EQ(RunTimestampCase(root(), test_case), expected) << test_case.name;
    if (reference) {
      EXPECT_EQ(RunTimestampCase(*reference, test_case), expected)
          << test_case.name << " on /dev/shm (the expectation is wrong)";
    }
  }
  if (reference) {
    EXPECT_TRUE(ShellOk("rm -rf '" + *reference + "'"));
  }
}

TEST_P(MetadataTest, NewInodesGetTheCurrentTimeEverywhere) {
  const timespec before = WallClock();
  ASSERT_TRUE(WriteFile(Path("file"), ""));
  ASSERT_SYS_OK(mkdir(Path("dir").c_str(), 0755));
  ASSERT_SYS_OK(symlink("file", Path("link").c_str()));
  const timespec after = WallClock();
  for (const char* name : {"file", "dir", "link"}) {
    const auto st = StatPath(Path(name));
    ASSERT_TRUE(st);
    EXPECT_EQ(Nanos(st->st_atim), Nanos(st->st_mtim)) << name;
    EXPECT_EQ(Nanos(st->st_mtim), Nanos(st->st_ctim)) << name;
    EXPECT_GE(Nanos(st->st_mtim), Nanos(before) - 20'000'000) << name;
    EXPECT_LE(Nanos(st->st_mtim), Nanos(after)) << name;
  }
}

// ---------------------------------------------------------------------------
// Permissions (default_permissions: the kernel checks, like on tmpfs)

TEST_P(MetadataTest, NonOwnerCannotWriteA0644File) {
  ASSERT_TRUE(WriteFile(Path("file"), "owned"));
  ASSERT_SYS_OK(chown(Path("file").c_str(), kOwnerUid, kOwnerGid));
  ASSERT_SYS_OK(chmod(Path("file").c_str(), 0644));
  const std::string file = Path("file");
  EXPECT_EQ(AsOther([&] { return OpenAndClose(file, O_WRONLY); }), Errno{EACCES});
  EXPECT_EQ(AsOther([&] { return OpenAndClose(file, O_RDWR); }), Errno{EACCES});
  EXPECT_EQ(AsOther([&] { return truncate(file.c_str(), 0); }), Errno{EACCES});
  EXPECT_EQ(AsOther([&] { return OpenAndClose(file, O_RDONLY); }), kOk);
  EXPECT_EQ(AsOwner([&] { return OpenAndClose(file, O_RDWR); }), kOk);
  // Group permission applies to group members who are not the owner.
  ASSERT_SYS_OK(chown(file.c_str(), kOwnerUid, kOtherGid));
  ASSERT_SYS_OK(chmod(file.c_str(), 0464));
  EXPECT_EQ(AsOther([&] { return OpenAndClose(file, O_WRONLY); }), kOk);
  // ... and the owner gets the owner bits even when others get more.
  EXPECT_EQ(AsOwner([&] { return OpenAndClose(file, O_WRONLY); }), Errno{EACCES});
  ASSERT_SYS_OK(chmod(file.c_str(), 0000));
  EXPECT_EQ(AsOwner([&] { return OpenAndClose(file, O_RDONLY); }), Errno{EACCES});
  EXPECT_SYS_OK(OpenAndClose(file, O_RDWR));  // root
  EXPECT_EQ(ReadFile(file), "owned");
}

TEST_P(MetadataTest, NonOwnerCannotChangeARootDirectory) {
  ASSERT_SYS_OK(mkdir(Path("dir").c_str(), 0755));
  ASSERT_TRUE(WriteFile(Path("dir/file"), "root's"));
  ASSERT_SYS_OK(mkdir(Path("dir/sub").c_str(), 0755));
  const std::string dir = Path("dir");
  EXPECT_EQ(AsOwner([&] { return OpenAndClose(dir + "/new", O_CREAT | O_WRONLY, 0644); }),
            Errno{EACCES});
  EXPECT_EQ(AsOwner([&] { return mkdir((dir + "/new").c_str(), 0755); }), Errno{EACCES});
  EXPECT_EQ(AsOwner([&] { return symlink("x", (dir + "/new").c_str()); }), Errno{EACCES});
  EXPECT_EQ(AsOwner([&] { return mknod((dir + "/new").c_str(), S_IFIFO | 0644, 0); }),
            Errno{EACCES});
  EXPECT_EQ(AsOwner([&] { return unlink((dir + "/file").c_str()); }), Errno{EACCES});
  EXPECT_EQ(AsOwner([&] { return rmdir((dir + "/sub").c_str()); }), Errno{EACCES});
  EXPECT_EQ(AsOwner([&] { return rename((dir + "/file").c_str(), (dir + "/x").c_str()); }),
            Errno{EACCES});
  // Reading and searching are allowed.
  EXPECT_EQ(AsOwner([&] { return OpenAndClose(dir + "/file", O_RDONLY); }), kOk);
  EXPECT_EQ(AsOwner([&] { return OpenAndClose(dir, O_RDONLY | O_DIRECTORY); }), kOk);
  EXPECT_EQ(ListDir(dir), (std::vector<std::string>{".", "..", "file", "sub"}));

  // Without search permission nothing inside can be reached; without read
  // permission it cannot be listed.
  ASSERT_SYS_OK(chmod(dir.c_str(), 0750));
  EXPECT_EQ(AsOther([&] {
              struct stat st;
              return stat((dir + "/file").c_str(), &st);
            }),
            Errno{EACCES});
  EXPECT_EQ(AsOther([&] { return OpenAndClose(dir, O_RDONLY | O_DIRECTORY); }), Errno{EACCES});
  ASSERT_SYS_OK(chmod(dir.c_str(), 0711));
  EXPECT_EQ(AsOther([&] { return OpenAndClose(dir + "/file", O_RDONLY); }), kOk);
  EXPECT_EQ(AsOther([&] { return OpenAndClose(dir, O_RDONLY | O_DIRECTORY); }), Errno{EACCES});
}

TEST_P(MetadataTest, AccessReportsPermissions) {
  ASSERT_TRUE(WriteFile(Path("file"), "x"));
  ASSERT_SYS_OK(chown(Path("file").c_str(), kOwnerUid, kOwnerGid));
  ASSERT_SYS_OK(chmod(Path("file").c_str(), 0644));
  const std::string file = Path("file");
  EXPECT_EQ(AsOther([&] { return access(file.c_str(), F_OK); }), kOk);
  EXPECT_EQ(AsOther([&] { return access(file.c_str(), R_OK); }), kOk);
  EXPECT_EQ(AsOther([&] { return access(file.c_str(), W_OK); }), Errno{EACCES});
  EXPECT_EQ(AsOther([&] { return access(file.c_str(), X_OK); }), Errno{EACCES});
  EXPECT_EQ(AsOther([&] { return access(file.c_str(), R_OK | W_OK); }), Errno{EACCES});
  EXPECT_EQ(AsOwner([&] { return access(file.c_str(), R_OK | W_OK); }), kOk);
  EXPECT_EQ(AsOwner([&] { return access(file.c_str(), X_OK); }), Errno{EACCES});
  EXPECT_EQ(AsOther([&] { return access(Path("missing").c_str(), F_OK); }), Errno{ENOENT});

  // Root reads and writes anything, but executes only what someone may.
  ASSERT_SYS_OK(chmod(file.c_str(), 0000));
  EXPECT_SYS_OK(access(file.c_str(), R_OK | W_OK));
  EXPECT_ERRNO(access(file.c_str(), X_OK), EACCES);
  ASSERT_SYS_OK(chmod(file.c_str(), 0010));
  EXPECT_SYS_OK(access(file.c_str(), X_OK));
  EXPECT_EQ(AsOwner([&] { return access(file.c_str(), X_OK); }), Errno{EACCES});
  // Directories: root may always search.
  ASSERT_SYS_OK(mkdir(Path("dir").c_str(), 0));
  EXPECT_SYS_OK(access(Path("dir").c_str(), R_OK | W_OK | X_OK));
  EXPECT_EQ(AsOther([&] { return access(Path("dir").c_str(), X_OK); }), Errno{EACCES});
}

TEST_P(MetadataTest, StickyDirectoryProtectsOthersFiles) {
  ASSERT_SYS_OK(mkdir(Path("tmp").c_str(), 0755));
  ASSERT_SYS_OK(chmod(Path("tmp").c_str(), 01777));
  const std::string tmp = Path("tmp");
  ASSERT_EQ(AsOwner([&] { return OpenAndClose(tmp + "/mine", O_CREAT | O_WRONLY, 0666); }), kOk);
  ASSERT_EQ(AsOwner([&] { return mkdir((tmp + "/mydir").c_str(), 0777); }), kOk);
  ASSERT_EQ(AsOther([&] { return OpenAndClose(tmp + "/theirs", O_CREAT | O_WRONLY, 0666); }), kOk);

  EXPECT_EQ(AsOther([&] { return unlink((tmp + "/mine").c_str()); }), Errno{EPERM});
  EXPECT_EQ(AsOther([&] { return rmdir((tmp + "/mydir").c_str()); }), Errno{EPERM});
  EXPECT_EQ(AsOther([&] { return rename((tmp + "/mine").c_str(), (tmp + "/stolen").c_str()); }),
            Errno{EPERM});
  // Replacing it by a rename is removing it too.
  EXPECT_EQ(AsOther([&] { return rename((tmp + "/theirs").c_str(), (tmp + "/mine").c_str()); }),
            Errno{EPERM});
  EXPECT_EQ(ReadFile(tmp + "/mine"), "");
  // Without the sticky bit the same unlink is allowed.
  EXPECT_EQ(AsOther([&] { return unlink((tmp + "/theirs").c_str()); }), kOk);
  EXPECT_EQ(AsOwner([&] { return unlink((tmp + "/mine").c_str()); }), kOk);
  ASSERT_EQ(AsOwner([&] { return OpenAndClose(tmp + "/mine", O_CREAT | O_WRONLY, 0666); }), kOk);
  ASSERT_SYS_OK(chmod(tmp.c_str(), 0777));
  EXPECT_EQ(AsOther([&] { return unlink((tmp + "/mine").c_str()); }), kOk);
  EXPECT_EQ(AsOther([&] { return rmdir((tmp + "/mydir").c_str()); }), kOk);
  EXPECT_EQ(ListDir(tmp), (std::vector<std::string>{".", ".."}));
}

TEST_P(MetadataTest, StickyDirectoryOwnerAndRootMayRemove) {
  ASSERT_SYS_OK(mkdir(Path("tmp").c_str(), 0755));
  ASSERT_SYS_OK(chmod(Path("tmp").c_str(), 01777));
  ASSERT_SYS_OK(chown(Path("tmp").c_str(), kOwnerUid, kOwnerGid));
  const std::string tmp = Path("tmp");
  for (const char* name : {"a", "b"}) {
    ASSERT_EQ(AsOther([&] { return OpenAndClose(tmp + "/" + name, O_CREAT | O_WRONLY, 0666); }),
              kOk);
  }
  EXPECT_EQ(AsOwner([&] { return unlink((tmp + "/a").c_str()); }), kOk);
  EXPECT_SYS_OK(unlink((tmp + "/b").c_str()));
}

TEST_P(MetadataTest, SetgidDirectoryHandsDownGroup) {
  ScopedUmask umask(0);
  ASSERT_SYS_OK(mkdir(Path("shared").c_str(), 0777));
  ASSERT_SYS_OK(chown(Path("shared").c_str(), 0, kThirdGid));
  ASSERT_SYS_OK(chmod(Path("shared").c_str(), 02777));
  const std::string shared = Path("shared");

  ASSERT_TRUE(WriteFile(shared + "/file", ""));
  EXPECT_EQ(StatPath(shared + "/file")->st_gid, kThirdGid);
  EXPECT_EQ(ModeOf(shared + "/file"), S_IFREG | 0644);
  ASSERT_SYS_OK(mkdir((shared + "/sub").c_str(), 0755));
  EXPECT_EQ(StatPath(shared + "/sub")->st_gid, kThirdGid);
  EXPECT_EQ(ModeOf(shared + "/sub"), S_IFDIR | 02755);
  // ... and on down.
  ASSERT_SYS_OK(mkdir((shared + "/sub/deeper").c_str(), 0700));
  EXPECT_EQ(StatPath(shared + "/sub/deeper")->st_gid, kThirdGid);
  EXPECT_EQ(ModeOf(shared + "/sub/deeper"), S_IFDIR | 02700);
  ASSERT_SYS_OK(symlink("x", (shared + "/link").c_str()));
  EXPECT_EQ(StatPath(shared + "/link")->st_gid, kThirdGid);

  // Another user's files get the directory's group too; one who is not in
  // that group cannot make them setgid.
  EXPECT_EQ(AsOwner([&] { return OpenAndClose(shared + "/owners", O_CREAT | O_WRONLY, 02755); }),
            kOk);
  auto st = StatPath(shared + "/owners");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->st_uid, kOwnerUid);
  EXPECT_EQ(st->st_gid, kThirdGid);
  EXPECT_EQ(st->st_mode, S_IFREG | 0755);
  EXPECT_EQ(AsOwner([&] { return mkdir((shared + "/owners-dir").c_str(), 0755); }), kOk);
  st = StatPath(shared + "/owners-dir");
  EXPECT_EQ(st->st_gid, kThirdGid);
  EXPECT_EQ(st->st_mode, S_IFDIR | 02755);

  // Outside, files get the creator's group.
  ASSERT_SYS_OK(mkdir(Path("plain").c_str(), 0777));
  const std::string plain = Path("plain");
  EXPECT_EQ(AsOwner([&] { return mkdir((plain + "/d").c_str(), 0755); }), kOk);
  EXPECT_EQ(StatPath(plain + "/d")->st_gid, kOwnerGid);
  EXPECT_EQ(ModeOf(plain + "/d"), S_IFDIR | 0755);
}

// ---------------------------------------------------------------------------
// Set-id bits and writes

TEST_P(MetadataTest, WriteByNonRootClearsSetIdBits) {
  const auto make = [&](const std::string& name, uid_t uid, gid_t gid, mode_t mode) {
    EXPECT_TRUE(WriteFile(Path(name), "0123456789"));
    EXPECT_SYS_OK(chown(Path(name).c_str(), uid, gid));
    EXPECT_SYS_OK(chmod(Path(name).c_str(), mode));
  };
  const auto write_as = [&](uid_t uid, gid_t gid, const std::string& name) {
    const std::string path = Path(name);
    return As(uid, gid, [&] {
      Fd fd(open(path.c_str(), O_WRONLY));
      return fd.valid() ? pwrite(fd.get(), "x", 1, 3) : -1;
    });
  };

  // A non-owner who may write.
  make("other-writes", kOwnerUid, kOwnerGid, 06777);
  EXPECT_EQ(write_as(kOtherUid, kOtherGid, "other-writes"), kOk);
  EXPECT_EQ(ModeOf(Path("other-writes")), S_IFREG | 0777);
  EXPECT_EQ(ReadFile(Path("other-writes")), "012x456789");

  // The owner's writes clear them as well.
  make("owner-writes", kOwnerUid, kOwnerGid, 06755);
  EXPECT_EQ(write_as(kOwnerUid, kOwnerGid, "owner-writes"), kOk);
  EXPECT_EQ(ModeOf(Path("owner-writes")), S_IFREG | 0755);

  // setgid without group execute is a locking hint, not a set-id bit.
  make("lock-hint", kOwnerUid, kOtherGid, 02666);
  EXPECT_EQ(write_as(kOtherUid, kOtherGid, "lock-hint"), kOk);
  EXPECT_EQ(ModeOf(Path("lock-hint")), S_IFREG | 02666);

  // Root's writes keep them.
  make("root-writes", kOwnerUid, kOwnerGid, 06777);
  EXPECT_EQ(write_as(0, 0, "root-writes"), kOk);
  EXPECT_EQ(ModeOf(Path("root-writes")), S_IFREG | 06777);

  // Truncation is a write.
  make("other-truncates", kOwnerUid, kOwnerGid, 06777);
  const std::string truncated = Path("other-truncates");
  EXPECT_EQ(AsOther([&] { return truncate(truncated.c_str(), 4); }), kOk);
  EXPECT_EQ(ModeOf(truncated), S_IFREG | 0777);
  EXPECT_EQ(StatPath(truncated)->st_size, 4);
}

// ---------------------------------------------------------------------------
// Extended attributes

TEST_P(MetadataTest, UserXattrsOnFilesAndDirectories) {
  ASSERT_TRUE(WriteFile(Path("file"), "x"));
  ASSERT_SYS_OK(mkdir(Path("dir").c_str(), 0755));
  for (const char* name : {"file", "dir"}) {
    const std::string path = Path(name);
    const std::string binary("\0\x01\xff value\0", 10);
    ASSERT_SYS_OK(setxattr(path.c_str(), "user.binary", binary.data(), binary.size(), 0)) << name;
    ASSERT_SYS_OK(setxattr(path.c_str(), "user.empty", "", 0, 0)) << name;
    ASSERT_SYS_OK(setxattr(path.c_str(), "user.text", "hello", 5, 0)) << name;

    // Size probes, then the values.
    EXPECT_EQ(getxattr(path.c_str(), "user.binary", nullptr, 0), 10) << name;
    EXPECT_EQ(getxattr(path.c_str(), "user.empty", nullptr, 0), 0) << name;
    char value[64];
    ASSERT_EQ(getxattr(path.c_str(), "user.binary", value, sizeof value), 10) << name;
    EXPECT_EQ(std::string(value, 10), binary) << name;
    ASSERT_EQ(getxattr(path.c_str(), "user.text", value, sizeof value), 5) << name;
    EXPECT_EQ(std::string(value, 5), "hello") << name;
    EXPECT_ERRNO(getxattr(path.c_str(), "user.text", value, 4), ERANGE);

    const std::string expected_list("user.binary\0user.empty\0user.text\0",
                                    sizeof "user.binary\0user.empty\0user.text");
    const ssize_t list_size = listxattr(path.c_str(), nullptr, 0);
    ASSERT_EQ(list_size, static_cast<ssize_t>(expected_list.size())) << name;
    std::string list(list_size, '\0');
    ASSERT_EQ(listxattr(path.c_str(), list.data(), list.size()), list_size);
    // The order is the filesystem's: compare as sets.
    std::vector<std::string> names;
    for (size_t start = 0; start < list.size();) {
      const size_t end = list.find('\0', start);
      names.push_back(list.substr(start, end - start));
      start = end + 1;
    }
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"user.binary", "user.empty", "user.text"}));
    EXPECT_ERRNO(listxattr(path.c_str(), list.data(), list.size() - 1), ERANGE);

    // Replace, create-only, replace-only.
    ASSERT_SYS_OK(setxattr(path.c_str(), "user.text", "bye", 3, 0));
    ASSERT_EQ(getxattr(path.c_str(), "user.text", value, sizeof value), 3);
    EXPECT_EQ(std::string(value, 3), "bye");
    EXPECT_ERRNO(setxattr(path.c_str(), "user.text", "x", 1, XATTR_CREATE), EEXIST);
    EXPECT_ERRNO(setxattr(path.c_str(), "user.absent", "x", 1, XATTR_REPLACE), ENODATA);
    EXPECT_SYS_OK(setxattr(path.c_str(), "user.text", "again", 5, XATTR_REPLACE));
    EXPECT_SYS_OK(setxattr(path.c_str(), "user.fresh", "new", 3, XATTR_CREATE));
    EXPECT_ERRNO(getxattr(path.c_str(), "user.absent", value, sizeof value), ENODATA);
    EXPECT_ERRNO(getxattr(path.c_str(), "user.absent", nullptr, 0), ENODATA);

    // Remove.
    for (const char* attr : {"user.binary", "user.empty", "user.text", "user.fresh"}) {
      EXPECT_SYS_OK(removexattr(path.c_str(), attr));
    }
    EXPECT_ERRNO(removexattr(path.c_str(), "user.text"), ENODATA);
    EXPECT_EQ(listxattr(path.c_str(), nullptr, 0), 0) << name;
  }
}

TEST_P(MetadataTest, XattrThroughDescriptorsAndLinks) {
  ASSERT_TRUE(WriteFile(Path("file"), "x"));
  ASSERT_SYS_OK(symlink("file", Path("link").c_str()));
  Fd fd(open(Path("file").c_str(), O_RDONLY));
  ASSERT_SYS_OK(fsetxattr(fd.get(), "user.fd", "1", 1, 0));
  // The path through a symlink reaches the file.
  ASSERT_SYS_OK(setxattr(Path("link").c_str(), "user.followed", "2", 1, 0));
  char value[8];
  EXPECT_EQ(fgetxattr(fd.get(), "user.followed", value, sizeof value), 1);
  EXPECT_EQ(getxattr(Path("file").c_str(), "user.fd", value, sizeof value), 1);
  // The symlink itself takes no user.* attributes, like on tmpfs.
  EXPECT_ERRNO(lsetxattr(Path("link").c_str(), "user.own", "3", 1, 0), EPERM);
  EXPECT_ERRNO(lgetxattr(Path("link").c_str(), "user.fd", value, sizeof value), ENODATA);
  EXPECT_EQ(llistxattr(Path("link").c_str(), nullptr, 0), 0);
  // Nor do special files.
  ASSERT_SYS_OK(mkfifo(Path("fifo").c_str(), 0666));
  EXPECT_ERRNO(setxattr(Path("fifo").c_str(), "user.x", "1", 1, 0), EPERM);
  // Attributes go with the inode: a hard link sees them, a removed file's
  // attributes are gone with it.
  ASSERT_SYS_OK(link(Path("file").c_str(), Path("hard").c_str()));
  EXPECT_EQ(getxattr(Path("hard").c_str(), "user.fd", value, sizeof value), 1);
  ASSERT_SYS_OK(unlink(Path("file").c_str()));
  ASSERT_SYS_OK(unlink(Path("hard").c_str()));
  ASSERT_TRUE(WriteFile(Path("file"), "new"));
  EXPECT_ERRNO(getxattr(Path("file").c_str(), "user.fd", value, sizeof value), ENODATA);
}

TEST_P(MetadataTest, XattrSizeLimits) {
  ASSERT_TRUE(WriteFile(Path("file"), "x"));
  const std::string path = Path("file");
  const std::string largest = RandomBytes(65536, 3);
  ASSERT_SYS_OK(setxattr(path.c_str(), "user.large", largest.data(), largest.size(), 0));
  EXPECT_EQ(getxattr(path.c_str(), "user.large", nullptr, 0), 65536);
  std::string value(65536, '\0');
  ASSERT_EQ(getxattr(path.c_str(), "user.large", value.data(), value.size()), 65536);
  EXPECT_TRUE(BytesEqual(value, largest));
  const std::string too_large(65537, 'x');
  EXPECT_ERRNO(setxattr(path.c_str(), "user.larger", too_large.data(), too_large.size(), 0), E2BIG);
  // Names: 255 bytes in all is the most.
  const std::string longest_name = "user." + std::string(250, 'n');
  EXPECT_SYS_OK(setxattr(path.c_str(), longest_name.c_str(), "v", 1, 0));
  EXPECT_EQ(getxattr(path.c_str(), longest_name.c_str(), nullptr, 0), 1);
  const std::string too_long_name = "user." + std::string(251, 'n');
  EXPECT_ERRNO(setxattr(path.c_str(), too_long_name.c_str(), "v", 1, 0), ERANGE);
  EXPECT_ERRNO(setxattr(path.c_str(), "", "v", 1, 0), ERANGE);
  // Namespaces the filesystem does not keep.
  EXPECT_ERRNO(setxattr(path.c_str(), "nonsense.name", "v", 1, 0), EOPNOTSUPP);
}

TEST_P(MetadataTest, XattrPermissions) {
  ASSERT_TRUE(WriteFile(Path("file"), "x"));
  ASSERT_SYS_OK(chown(Path("file").c_str(), kOwnerUid, kOwnerGid));
  ASSERT_SYS_OK(chmod(Path("file").c_str(), 0644));
  const std::string file = Path("file");
  EXPECT_EQ(AsOwner([&] { return setxattr(file.c_str(), "user.owner", "o", 1, 0); }), kOk);
  // Reading needs read permission, writing needs write permission.
  EXPECT_EQ(AsOther([&] {
              char value[4];
              return getxattr(file.c_str(), "user.owner", value, sizeof value);
            }),
            kOk);
  EXPECT_EQ(AsOther([&] { return setxattr(file.c_str(), "user.other", "x", 1, 0); }),
            Errno{EACCES});
  EXPECT_EQ(AsOther([&] { return removexattr(file.c_str(), "user.owner"); }), Errno{EACCES});
  ASSERT_SYS_OK(chmod(file.c_str(), 0600));
  EXPECT_EQ(AsOther([&] {
              char value[4];
              return getxattr(file.c_str(), "user.owner", value, sizeof value);
            }),
            Errno{EACCES});
}

TEST_P(MetadataTest, TrustedXattrsAreForRootOnly) {
  ASSERT_TRUE(WriteFile(Path("file"), "x"));
  ASSERT_SYS_OK(chmod(Path("file").c_str(), 0666));
  const std::string file = Path("file");
  ASSERT_SYS_OK(setxattr(file.c_str(), "trusted.secret", "root", 4, 0));
  ASSERT_SYS_OK(setxattr(file.c_str(), "user.public", "all", 3, 0));
  char value[8];
  ASSERT_EQ(getxattr(file.c_str(), "trusted.secret", value, sizeof value), 4);
  EXPECT_EQ(std::string(value, 4), "root");
  EXPECT_EQ(listxattr(file.c_str(), nullptr, 0),
            static_cast<ssize_t>(sizeof "trusted.secret" + sizeof "user.public"));

  // Others neither see nor change it.
  EXPECT_EQ(AsOther([&] { return getxattr(file.c_str(), "trusted.secret", value, sizeof value); }),
            Errno{ENODATA});
  EXPECT_EQ(AsOther([&] { return setxattr(file.c_str(), "trusted.secret", "x", 1, 0); }),
            Errno{EPERM});
  EXPECT_EQ(AsOther([&] { return setxattr(file.c_str(), "trusted.new", "x", 1, 0); }),
            Errno{EPERM});
  EXPECT_EQ(AsOther([&] { return removexattr(file.c_str(), "trusted.secret"); }), Errno{EPERM});
  // The child reports the listing through its exit code: 0 when it is
  // exactly "user.public".
  EXPECT_EQ(
      RunAs(kOtherUid, kOtherGid,
            [&] {
              char list[256];
              const ssize_t size = listxattr(file.c_str(), list, sizeof list);
              if (size < 0) return Errno{errno};
              return Errno{std::string(list, size) == std::string("user.public", 12) ? 0 : EBADMSG};
            }),
      kOk);
  ASSERT_EQ(getxattr(file.c_str(), "trusted.secret", value, sizeof value), 4);
  EXPECT_EQ(std::string(value, 4), "root");
}

CUDAFS_INSTANTIATE_BACKENDS(MetadataTest);

}  // namespace
}  // namespace cudafs_test
