// File handles (name_to_handle_at, open_by_handle_at): the kernel's path
// for NFS servers, kernel nfsd and NFS-Ganesha's VFS export alike. A handle
// must open its file after the kernel forgot the inode (FUSE then looks up
// "." in the inode, which cudafs answers), and must never open another
// file: a removed file's handle is stale, and so is one from an earlier
// mount, whose inode numbers this mount hands out again.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tests/mount/mount_fixture.h"
#include "tests/support/errno_check.h"
#include "tests/support/fd.h"
#include "tests/support/file_io.h"

namespace cudafs_test {
namespace {

class HandleTest : public FsTest {
 protected:
  void SetUp() override {
    FsTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    // open_by_handle_at needs CAP_DAC_READ_SEARCH, as an NFS server has.
    if (geteuid() != 0) GTEST_SKIP() << "open_by_handle_at needs root";
  }

  // The handle of `path`, or an empty one (the test has failed) when the
  // filesystem gives none.
  std::shared_ptr<file_handle> HandleOf(const std::string& path) {
    std::shared_ptr<file_handle> handle(
        static_cast<file_handle*>(operator new(sizeof(file_handle) + MAX_HANDLE_SZ)),
        [](file_handle* h) { operator delete(h); });
    handle->handle_bytes = MAX_HANDLE_SZ;
    int mount_id = 0;
    EXPECT_SYS_OK(name_to_handle_at(AT_FDCWD, path.c_str(), handle.get(), &mount_id, 0));
    return handle;
  }

  // Opens by handle on the mount under test.
  int OpenByHandle(const std::shared_ptr<file_handle>& handle, int flags) {
    Fd mount_fd(open(root().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    return open_by_handle_at(mount_fd.get(), handle.get(), flags | O_CLOEXEC);
  }

  // The kernel forgets every unused inode and dentry, so that a handle
  // reaches the filesystem instead of the inode cache.
  static void DropCaches() {
    sync();
    std::ofstream("/proc/sys/vm/drop_caches") << "3\n";
  }
};

TEST_P(HandleTest, OpensFilesAndDirectoriesAfterTheKernelForgetsThem) {
  ASSERT_SYS_OK(mkdir(Path("dir").c_str(), 0755));
  const std::string data = RandomBytes(100000, 1);
  ASSERT_TRUE(WriteFile(Path("dir/file"), data));
  const auto file_handle = HandleOf(Path("dir/file"));
  const auto dir_handle = HandleOf(Path("dir"));
  const auto file_stat = StatPath(Path("dir/file"));
  ASSERT_TRUE(file_stat.has_value());
  DropCaches();

  Fd file(OpenByHandle(file_handle, O_RDONLY));
  ASSERT_SYS_OK(file.get());
  EXPECT_EQ(StatFd(file.get())->st_ino, file_stat->st_ino);
  const std::optional<std::string> read = ReadAll(file.get());
  ASSERT_TRUE(read.has_value());
  EXPECT_TRUE(BytesEqual(*read, data));
  Fd dir(OpenByHandle(dir_handle, O_RDONLY | O_DIRECTORY));
  ASSERT_SYS_OK(dir.get());
  EXPECT_TRUE(S_ISDIR(StatFd(dir.get())->st_mode));
  // Names resolve under the directory found by handle.
  EXPECT_SYS_OK(faccessat(dir.get(), "file", R_OK, 0));
}

TEST_P(HandleTest, RemovedFileOrDirectoryIsStale) {
  ASSERT_SYS_OK(mkdir(Path("dir").c_str(), 0755));
  ASSERT_TRUE(WriteFile(Path("victim"), "victim"));
  const auto file_handle = HandleOf(Path("victim"));
  const auto dir_handle = HandleOf(Path("dir"));
  ASSERT_SYS_OK(unlink(Path("victim").c_str()));
  ASSERT_SYS_OK(rmdir(Path("dir").c_str()));
  // New files, one under the old name, could take a freed inode number.
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(WriteFile(Path("new" + std::to_string(i)), "new"));
  ASSERT_TRUE(WriteFile(Path("victim"), "successor"));
  ASSERT_SYS_OK(mkdir(Path("dir").c_str(), 0755));
  DropCaches();

  EXPECT_ERRNO(OpenByHandle(file_handle, O_RDONLY), ESTALE);
  EXPECT_ERRNO(OpenByHandle(dir_handle, O_RDONLY | O_DIRECTORY), ESTALE);
}

// A removed file that is still open stays the file its handle names until
// it is closed; after, the handle is stale.
TEST_P(HandleTest, RemovedFileIsStaleOnceClosed) {
  ASSERT_TRUE(WriteFile(Path("victim"), "victim"));
  const auto handle = HandleOf(Path("victim"));
  Fd open_file(open(Path("victim").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_SYS_OK(open_file.get());
  ASSERT_SYS_OK(unlink(Path("victim").c_str()));
  ASSERT_TRUE(WriteFile(Path("victim"), "successor"));
  DropCaches();
  {
    Fd by_handle(OpenByHandle(handle, O_RDONLY));
    ASSERT_SYS_OK(by_handle.get());
    EXPECT_EQ(ReadAll(by_handle.get()), "victim");
  }
  open_file.Reset();
  DropCaches();
  EXPECT_ERRNO(OpenByHandle(handle, O_RDONLY), ESTALE);
}

// Inode numbers start again with each mount; the generation, drawn for each
// mount, tells the kernel that a handle of the earlier mount names none of
// this one's files.
TEST_P(HandleTest, HandleFromAnEarlierMountIsStale) {
  SKIP_UNLESS_CUDAFS();
  constexpr int kFiles = 10;
  std::vector<std::shared_ptr<file_handle>> handles;
  std::vector<ino_t> numbers;
  for (int i = 0; i < kFiles; ++i) {
    const std::string path = Path("f" + std::to_string(i));
    ASSERT_TRUE(WriteFile(path, "first mount"));
    handles.push_back(HandleOf(path));
    numbers.push_back(StatPath(path)->st_ino);
  }
  ASSERT_TRUE(Remount({}));
  for (int i = 0; i < kFiles; ++i) {
    const std::string path = Path("f" + std::to_string(i));
    ASSERT_TRUE(WriteFile(path, "second mount"));
    ASSERT_EQ(StatPath(path)->st_ino, numbers[i]) << "the numbers must repeat for the test to mean "
                                                     "anything";
  }
  DropCaches();
  for (int i = 0; i < kFiles; ++i) {
    EXPECT_ERRNO(OpenByHandle(handles[i], O_RDONLY), ESTALE) << "f" << i;
  }
}

CUDAFS_INSTANTIATE_BACKENDS(HandleTest);

}  // namespace
}  // namespace cudafs_test
