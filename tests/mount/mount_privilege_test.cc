// Privilege on a mounted cudafs: what a process may do follows its
// capabilities, as on tmpfs, not its uid; and what an unprivileged user can
// make the daemon hold is bounded by the mount's limits. Each case runs in
// a child with an exact set of effective capabilities (capset(2)).
// Expectations are tmpfs' (the suite passes with CUDAFS_TEST_DIR on a
// tmpfs), except where a test says cudafs differs on purpose.
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>

#include "tests/mount/mount_fixture.h"
#include "tests/support/errno_check.h"
#include "tests/support/file_io.h"
#include "tests/support/processes.h"

namespace cudafs_test {

using namespace std::chrono_literals;

namespace {

using PrivilegeTest = FsTest;

constexpr Errno kOk{0};
// A group neither test user belongs to.
constexpr gid_t kThirdGid = 4242;

// Runs `call` in a child with the given credentials, no supplementary
// groups, and exactly `capabilities` permitted and effective; its errno.
Errno WithCapabilities(uid_t uid, gid_t gid, std::initializer_list<int> capabilities,
                       const std::function<long long()>& call) {
  const pid_t pid = fork();
  if (pid == 0) {
    // Keep the permitted set across the change of uid, then narrow it.
    if (prctl(PR_SET_KEEPCAPS, 1) != 0 || setgroups(0, nullptr) != 0 ||
        setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0) {
      _exit(255);
    }
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    for (int capability : capabilities) {
      data[capability / 32].effective |= 1u << (capability % 32);
      data[capability / 32].permitted |= 1u << (capability % 32);
    }
    if (syscall(SYS_capset, &header, data) != 0) _exit(255);
    _exit(ResultErrno(call()).value);
  }
  const std::optional<int> status = WaitForChild(pid, 60s);
  if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) == 255) {
    return Errno{Errno::kNoResult};
  }
  return Errno{WEXITSTATUS(*status)};
}

Errno AsNobody(std::initializer_list<int> capabilities, const std::function<long long()>& call) {
  return WithCapabilities(kOtherUid, kOtherGid, capabilities, call);
}
// uid 0 without a single capability.
Errno AsPowerlessRoot(const std::function<long long()>& call) {
  return WithCapabilities(0, 0, {}, call);
}

// open(2), closing at once: 0, or -1 with open's errno.
int OpenAndClose(const std::string& path, int flags, mode_t mode = 0) {
  const int fd = open(path.c_str(), flags, mode);
  if (fd < 0) return -1;
  close(fd);
  return 0;
}

// Appends one byte: a write(2) that changes the file's data.
int AppendByte(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_APPEND);
  if (fd < 0) return -1;
  const ssize_t written = write(fd, "x", 1);
  close(fd);
  return written == 1 ? 0 : -1;
}

mode_t PermissionsOf(const std::string& path) {
  const auto st = StatPath(path);
  return st ? st->st_mode & 07777 : 0;
}

TEST_P(PrivilegeTest, DacOverrideOpensAndCreatesWhatPermissionBitsRefuse) {
  ASSERT_TRUE(WriteFile(Path("private"), "secret"));
  ASSERT_TRUE(SysOk(chmod(Path("private").c_str(), 0600), "chmod"));
  ASSERT_TRUE(SysOk(mkdir(Path("locked").c_str(), 0700), "mkdir"));
  const std::string private_path = Path("private"), inside = Path("locked/new");

  EXPECT_EQ(AsNobody({}, [&] { return OpenAndClose(private_path, O_RDONLY); }), Errno{EACCES});
  EXPECT_EQ(AsNobody({}, [&] { return OpenAndClose(inside, O_CREAT | O_WRONLY, 0644); }),
            Errno{EACCES});
  EXPECT_EQ(AsNobody({CAP_DAC_OVERRIDE}, [&] { return OpenAndClose(private_path, O_RDWR); }),
            kOk);
  EXPECT_EQ(AsNobody({CAP_DAC_OVERRIDE},
                     [&] { return OpenAndClose(inside, O_CREAT | O_WRONLY, 0644); }),
            kOk);
  // Reading needs only CAP_DAC_READ_SEARCH.
  EXPECT_EQ(AsNobody({CAP_DAC_READ_SEARCH}, [&] { return OpenAndClose(private_path, O_RDONLY); }),
            kOk);
  EXPECT_EQ(AsNobody({CAP_DAC_READ_SEARCH}, [&] { return OpenAndClose(private_path, O_WRONLY); }),
            Errno{EACCES});
  // And root without capabilities is just another user.
  ASSERT_TRUE(SysOk(chown(private_path.c_str(), kOwnerUid, kOwnerGid), "chown"));
  EXPECT_EQ(AsPowerlessRoot([&] { return OpenAndClose(private_path, O_RDONLY); }),
            Errno{EACCES});
  EXPECT_EQ(ReadFile(private_path), "secret");
}

TEST_P(PrivilegeTest, FownerChangesModesTimesAndStickyEntriesOfOthers) {
  ASSERT_TRUE(WriteFile(Path("roots"), "r"));
  ASSERT_TRUE(SysOk(chmod(Path("roots").c_str(), 0644), "chmod"));
  const std::string path = Path("roots");
  const timespec times[2] = {{1000, 1}, {2000, 2}};
  EXPECT_EQ(AsNobody({}, [&] { return chmod(path.c_str(), 0600); }), Errno{EPERM});
  EXPECT_EQ(AsNobody({}, [&] { return utimensat(AT_FDCWD, path.c_str(), times, 0); }),
            Errno{EPERM});
  EXPECT_EQ(AsNobody({CAP_FOWNER}, [&] { return chmod(path.c_str(), 0600); }), kOk);
  EXPECT_EQ(PermissionsOf(path), 0600u);
  EXPECT_EQ(AsNobody({CAP_FOWNER}, [&] { return utimensat(AT_FDCWD, path.c_str(), times, 0); }),
            kOk);
  const auto st = StatPath(path);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->st_mtim.tv_sec, 2000);

  // A sticky directory lets the owner of an entry or of the directory
  // remove it, and CAP_FOWNER.
  ASSERT_TRUE(SysOk(mkdir(Path("sticky").c_str(), 01777), "mkdir"));
  ASSERT_TRUE(SysOk(chown(Path("sticky").c_str(), kOwnerUid, kOwnerGid), "chown"));
  ASSERT_TRUE(SysOk(chmod(Path("sticky").c_str(), 01777), "chmod"));
  ASSERT_TRUE(WriteFile(Path("sticky/roots"), "r"));
  const std::string entry = Path("sticky/roots");
  EXPECT_EQ(AsNobody({}, [&] { return unlink(entry.c_str()); }), Errno{EPERM});
  EXPECT_EQ(AsNobody({CAP_FOWNER}, [&] { return unlink(entry.c_str()); }), kOk);
  EXPECT_FALSE(StatPath(entry));
  // Root without CAP_FOWNER may not.
  ASSERT_TRUE(WriteFile(entry, "r"));
  ASSERT_TRUE(SysOk(chown(entry.c_str(), kOwnerUid, kOwnerGid), "chown"));
  EXPECT_EQ(AsPowerlessRoot([&] { return unlink(entry.c_str()); }), Errno{EPERM});
}

TEST_P(PrivilegeTest, ChownNeedsCapChownNotUidZero) {
  ASSERT_TRUE(WriteFile(Path("f"), "x"));
  const std::string path = Path("f");
  EXPECT_EQ(AsNobody({}, [&] { return chown(path.c_str(), kOtherUid, kOtherGid); }),
            Errno{EPERM});
  EXPECT_EQ(AsNobody({CAP_CHOWN}, [&] { return chown(path.c_str(), kOtherUid, kOtherGid); }),
            kOk);
  EXPECT_EQ(StatPath(path)->st_uid, kOtherUid);
  EXPECT_EQ(AsPowerlessRoot([&] { return chown(path.c_str(), 0, 0); }), Errno{EPERM});
  EXPECT_EQ(StatPath(path)->st_uid, kOtherUid);
}

TEST_P(PrivilegeTest, DeviceNodesNeedCapMknod) {
  const std::string device = Path("null");
  EXPECT_EQ(AsNobody({}, [&] { return mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 3)); }),
            Errno{EPERM});
  EXPECT_EQ(AsPowerlessRoot([&] { return mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 3)); }),
            Errno{EPERM});
  EXPECT_EQ(
      AsNobody({CAP_MKNOD}, [&] { return mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 3)); }),
      kOk);
  const auto st = StatPath(device);
  ASSERT_TRUE(st);
  EXPECT_TRUE(S_ISCHR(st->st_mode));
  EXPECT_EQ(st->st_uid, kOtherUid);
}

TEST_P(PrivilegeTest, TrustedAttributesNeedCapSysAdmin) {
  ASSERT_TRUE(WriteFile(Path("f"), "x"));
  const std::string path = Path("f");
  auto set = [&](const char* name) {
    return [&path, name] { return setxattr(path.c_str(), name, "v", 1, 0); };
  };
  auto get = [&](const char* name) {
    return [&path, name] {
      char value[8];
      return static_cast<long long>(getxattr(path.c_str(), name, value, sizeof value));
    };
  };
  EXPECT_EQ(AsNobody({}, set("trusted.a")), Errno{EPERM});
  EXPECT_EQ(AsPowerlessRoot(set("trusted.a")), Errno{EPERM});
  EXPECT_EQ(AsNobody({CAP_SYS_ADMIN}, set("trusted.a")), kOk);
  EXPECT_EQ(AsNobody({CAP_SYS_ADMIN}, get("trusted.a")), kOk);
  EXPECT_EQ(AsPowerlessRoot(get("trusted.a")), Errno{ENODATA});
  EXPECT_EQ(AsNobody({}, get("trusted.a")), Errno{ENODATA});
  // security.* is written with CAP_SYS_ADMIN too, read by anyone.
  EXPECT_EQ(AsPowerlessRoot(set("security.s")), Errno{EPERM});
  EXPECT_EQ(AsNobody({CAP_SYS_ADMIN}, set("security.s")), kOk);
  EXPECT_EQ(AsNobody({}, get("security.s")), kOk);
}

// listxattr(2) reaches a FUSE filesystem without a capability check and a
// FUSE request carries no capabilities: cudafs reads the caller's from
// /proc and lists trusted.* names to CAP_SYS_ADMIN, as tmpfs does, whatever
// the uid. Values stay guarded by the kernel (above).
TEST_P(PrivilegeTest, TrustedNamesAreListedToCapSysAdmin) {
  SKIP_UNLESS_CUDAFS();
  ASSERT_TRUE(WriteFile(Path("f"), "x"));
  const std::string path = Path("f");
  ASSERT_TRUE(SysOk(setxattr(path.c_str(), "trusted.t", "v", 1, 0), "setxattr"));
  ASSERT_TRUE(SysOk(setxattr(path.c_str(), "user.u", "v", 1, 0), "setxattr"));
  auto lists_trusted = [&path] {
    char names[256];
    const ssize_t size = listxattr(path.c_str(), names, sizeof names);
    if (size < 0) return -1LL;
    const bool trusted = std::string(names, size).find("trusted.t") != std::string::npos;
    errno = trusted ? EEXIST : 0;  // reported through the exit code
    return trusted ? -1LL : 0LL;
  };
  EXPECT_EQ(AsNobody({CAP_SYS_ADMIN}, lists_trusted), Errno{EEXIST}) << "listed";
  EXPECT_EQ(AsPowerlessRoot(lists_trusted), kOk) << "not listed";
  EXPECT_EQ(AsNobody({}, lists_trusted), kOk) << "not listed";
}

// Writes, truncates and O_TRUNC opens clear set-user-ID (and set-group-ID
// with group execute) unless the writer has CAP_FSETID, whatever its uid;
// the next stat(2) shows it at once. (Against libfuse 3.14, without
// HANDLE_KILLPRIV_V2, the kernel clears them with a SETATTR of its own:
// see DataChangerOf in fs/fuse/fuse_replies.h.)
TEST_P(PrivilegeTest, DataChangesClearSetIdBitsWithoutCapFsetid) {
  ASSERT_TRUE(WriteFile(Path("f"), "data"));
  const std::string path = Path("f");
  ASSERT_TRUE(SysOk(chown(path.c_str(), kOwnerUid, kOwnerGid), "chown"));
  struct Case {
    const char* what;
    std::function<long long()> change;
  };
  const Case cases[] = {
      {"write", [&] { return AppendByte(path); }},
      {"truncate", [&] { return truncate(path.c_str(), 2); }},
      {"O_TRUNC", [&] { return OpenAndClose(path, O_WRONLY | O_TRUNC); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto reset = [&] { ASSERT_TRUE(SysOk(chmod(path.c_str(), 06777), "chmod")); };
    reset();
    EXPECT_EQ(AsPowerlessRoot(c.change), kOk);
    EXPECT_EQ(PermissionsOf(path), 0777u);
    reset();
    EXPECT_EQ(AsNobody({}, c.change), kOk);
    EXPECT_EQ(PermissionsOf(path), 0777u);
    reset();
    EXPECT_EQ(AsNobody({CAP_FSETID}, c.change), kOk);
    EXPECT_EQ(PermissionsOf(path), 06777u);
    reset();
    ASSERT_TRUE(SysOk(c.change(), c.what));  // root with every capability
    EXPECT_EQ(PermissionsOf(path), 06777u);
  }
  // Without group execute, setgid stays for a member of the file's group
  // only.
  ASSERT_TRUE(SysOk(chmod(path.c_str(), 06766), "chmod"));
  EXPECT_EQ(WithCapabilities(kOtherUid, kOwnerGid, {}, [&] { return AppendByte(path); }), kOk);
  EXPECT_EQ(PermissionsOf(path), 02766u);
  EXPECT_EQ(AsNobody({}, [&] { return AppendByte(path); }), kOk);
  EXPECT_EQ(PermissionsOf(path), 0766u);
}

// fallocate(2) and copy_file_range(2) clear them too, by the same rule.
TEST_P(PrivilegeTest, FallocateAndCopyClearSetIdBitsWithoutCapFsetid) {
  ASSERT_TRUE(WriteFile(Path("src"), "abc"));
  ASSERT_TRUE(WriteFile(Path("f"), "data"));
  const std::string path = Path("f"), source = Path("src");
  auto allocate = [&] {
    const int fd = open(path.c_str(), O_WRONLY);
    const int result = fd < 0 ? -1 : fallocate(fd, 0, 0, 8192);
    if (fd >= 0) close(fd);
    return result;
  };
  auto copy = [&] {
    const int in = open(source.c_str(), O_RDONLY);
    const int out = open(path.c_str(), O_WRONLY);
    const long long result =
        in < 0 || out < 0 ? -1 : copy_file_range(in, nullptr, out, nullptr, 3, 0);
    if (in >= 0) close(in);
    if (out >= 0) close(out);
    return result < 0 ? -1 : 0;
  };
  for (const auto& change : {std::function<long long()>(allocate), std::function<long long()>(copy)}) {
    ASSERT_TRUE(SysOk(chmod(path.c_str(), 06777), "chmod"));
    EXPECT_EQ(AsNobody({}, change), kOk);
    EXPECT_EQ(PermissionsOf(path), 0777u);
    ASSERT_TRUE(SysOk(chmod(path.c_str(), 06777), "chmod"));
    EXPECT_EQ(AsPowerlessRoot(change), kOk);
    EXPECT_EQ(PermissionsOf(path), 0777u);
    ASSERT_TRUE(SysOk(chmod(path.c_str(), 06777), "chmod"));
    EXPECT_EQ(AsNobody({CAP_FSETID}, change), kOk);
    EXPECT_EQ(PermissionsOf(path), 06777u);
  }
}

// chown(f, -1, -1) changes nothing but still clears set-user-ID.
TEST_P(PrivilegeTest, ChownToTheSameOwnerClearsSetUserId) {
  ASSERT_TRUE(WriteFile(Path("f"), "data"));
  const std::string path = Path("f");
  ASSERT_TRUE(SysOk(chown(path.c_str(), kOtherUid, kOtherGid), "chown"));
  ASSERT_TRUE(SysOk(chmod(path.c_str(), 06755), "chmod"));
  EXPECT_EQ(AsNobody({}, [&] { return chown(path.c_str(), -1, -1); }), kOk);
  EXPECT_EQ(PermissionsOf(path), 0755u);
}

// A new file in a setgid directory keeps its own setgid bit only if its
// creator is in the group or has CAP_FSETID.
TEST_P(PrivilegeTest, SetgidOfNewFilesFollowsCapFsetid) {
  ASSERT_TRUE(SysOk(mkdir(Path("shared").c_str(), 0777), "mkdir"));
  ASSERT_TRUE(SysOk(chown(Path("shared").c_str(), 0, kThirdGid), "chown"));
  ASSERT_TRUE(SysOk(chmod(Path("shared").c_str(), 02777), "chmod"));
  const std::string by_root = Path("shared/root"), by_nobody = Path("shared/nobody");
  auto create = [](const std::string& path) {
    return [path] {
      umask(0);
      return OpenAndClose(path, O_CREAT | O_WRONLY, 02775);
    };
  };
  EXPECT_EQ(AsPowerlessRoot(create(by_root)), kOk);
  EXPECT_EQ(PermissionsOf(by_root), 0775u);
  EXPECT_EQ(AsNobody({CAP_FSETID}, create(by_nobody)), kOk);
  EXPECT_EQ(PermissionsOf(by_nobody), 02775u);
  EXPECT_EQ(StatPath(by_nobody)->st_gid, kThirdGid);
}

// ---------------------------------------------------------------------------
// What an unprivileged user can make the daemon hold

// Hard links take inode slots, as on tmpfs: `df -i` counts them and a user
// meets ENOSPC, not the daemon's memory.
TEST_P(PrivilegeTest, HardLinksCountAgainstNrInodes) {
  SKIP_UNLESS_CUDAFS();
  ASSERT_TRUE(Remount({"nr_inodes=100"}));
  ASSERT_TRUE(WriteFile(Path("f"), "x"));
  ASSERT_TRUE(SysOk(chmod(Path("f").c_str(), 0666), "chmod"));
  const uint64_t free_before = StatFs(root())->f_ffree;
  ASSERT_GT(free_before, 90u);
  const Errno stopped = AsNobody({}, [&] {
    for (int links = 0;; ++links) {
      const std::string name = Path("l" + std::to_string(links));
      if (link(Path("f").c_str(), name.c_str()) != 0) return -1;
      if (links > 1000) return 0;
    }
  });
  EXPECT_EQ(stopped, Errno{ENOSPC});
  EXPECT_EQ(StatFs(root())->f_ffree, 0u);
  EXPECT_EQ(StatPath(Path("f"))->st_nlink, free_before + 1);
  for (uint64_t i = 0; i < free_before; ++i) {
    ASSERT_TRUE(SysOk(unlink(Path("l" + std::to_string(i)).c_str()), "unlink"));
  }
  EXPECT_EQ(StatFs(root())->f_ffree, free_before);
}

// Extended attributes take inode space by their bytes.
TEST_P(PrivilegeTest, ExtendedAttributesCountAgainstNrInodes) {
  SKIP_UNLESS_CUDAFS();
  ASSERT_TRUE(Remount({"nr_inodes=100"}));
  ASSERT_TRUE(WriteFile(Path("f"), "x"));
  ASSERT_TRUE(SysOk(chown(Path("f").c_str(), kOtherUid, kOtherGid), "chown"));
  const uint64_t free_before = StatFs(root())->f_ffree;
  const std::string path = Path("f");
  const std::string value(65536, 'v');
  const Errno stopped = AsNobody({}, [&] {
    for (int stored = 0;; ++stored) {
      const std::string name = "user.a" + std::to_string(stored);
      if (setxattr(path.c_str(), name.c_str(), value.data(), value.size(), 0) != 0) return -1;
      if (stored > 2000) return 0;
    }
  });
  EXPECT_EQ(stopped, Errno{ENOSPC});
  // About 98 KiB of inode space: one 64 KiB value fits, two do not.
  EXPECT_EQ(getxattr(path.c_str(), "user.a1", nullptr, 0), -1);
  EXPECT_EQ(getxattr(path.c_str(), "user.a0", nullptr, 0), 65536);
  EXPECT_LE(StatFs(root())->f_ffree, free_before - 64);
  ASSERT_TRUE(SysOk(removexattr(path.c_str(), "user.a0"), "removexattr"));
  EXPECT_EQ(StatFs(root())->f_ffree, free_before);
}

CUDAFS_INSTANTIATE_BACKENDS(PrivilegeTest);

}  // namespace
}  // namespace cudafs_test
