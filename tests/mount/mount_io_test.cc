// Data path of a mounted cudafs through real system calls: open flags,
// reads and writes at any offset and length, sparse files, truncation,
// copy_file_range, SEEK_DATA/SEEK_HOLE, sync calls, mmap, file locks and
// concurrent I/O. Space accounting (statfs, fallocate, ENOSPC) is in
// mount_space_test.cc.
//
// Every expectation also holds on tmpfs: run with CUDAFS_TEST_DIR=/dev/shm
// to check them against the kernel's own implementation.
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <random>
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

namespace cudafs_test {

using namespace std::chrono_literals;

namespace {

// Decrements a count of running writers however the writer's thread ends
// (an ASSERT returns early), so that readers waiting for it always stop.
struct CountDown {
  std::atomic<int>& left;
  ~CountDown() { --left; }
};

constexpr size_t kKiB = 1 << 10;
constexpr size_t kMiB = 1 << 20;

using IoTest = FsTest;

off_t SizeOf(int fd) {
  const auto st = StatFd(fd);
  return st ? st->st_size : -1;
}

// The model of a file's content after writing `data` at `offset`.
void ApplyWrite(std::string& model, off_t offset, std::string_view data) {
  const size_t end = offset + data.size();
  if (model.size() < end) model.resize(end, '\0');
  model.replace(offset, data.size(), data);
}

// Copies all `length` bytes (copy_file_range may copy less per call).
testing::AssertionResult CopyRange(int in, off_t in_offset, int out, off_t out_offset,
                                   size_t length) {
  while (length > 0) {
    const ssize_t n = copy_file_range(in, &in_offset, out, &out_offset, length, 0);
    if (n < 0) {
      const int err = errno;
      return testing::AssertionFailure() << "copy_file_range: " << ErrnoName(err);
    }
    if (n == 0) return testing::AssertionFailure() << "copy_file_range hit the end early";
    length -= n;
  }
  return testing::AssertionSuccess();
}

// ---------------------------------------------------------------------------
// Open flags

TEST_P(IoTest, CreateWriteReleaseReopen) {
  const std::string data = RandomBytes(100 * kKiB + 3, 1);
  Fd fd;
  ASSERT_TRUE(OpenFd(Path("f"), O_WRONLY | O_CREAT | O_EXCL, &fd, 0666));
  ASSERT_TRUE(WriteAll(fd.get(), data, 0));
  EXPECT_SYS_OK(fd.Close());

  const auto st = StatPath(Path("f"));
  ASSERT_TRUE(st);
  EXPECT_TRUE(S_ISREG(st->st_mode));
  EXPECT_EQ(st->st_mode & 07777, 0644u) << "0666 less the umask 022";
  EXPECT_EQ(st->st_size, static_cast<off_t>(data.size()));
  const auto read_back = ReadStored(Path("f"));
  ASSERT_TRUE(read_back);
  EXPECT_TRUE(BytesEqual(*read_back, data));
}

TEST_P(IoTest, OpenWithTruncDiscardsContent) {
  ASSERT_TRUE(WriteFile(Path("f"), RandomBytes(2 * kMiB + 5, 2)));
  Fd fd;
  ASSERT_TRUE(OpenFd(Path("f"), O_RDWR | O_TRUNC, &fd));
  auto st = StatFd(fd.get());
  ASSERT_TRUE(st);
  EXPECT_EQ(st->st_size, 0);
  EXPECT_EQ(st->st_blocks, 0) << "truncated data must give its blocks back";
  char byte;
  EXPECT_EQ(pread(fd.get(), &byte, 1, 0), 0);

  // Regrowing must not bring the old bytes back.
  ASSERT_SYS_OK(ftruncate(fd.get(), 2 * kMiB));
  const auto regrown = ReadAll(fd.get());
  ASSERT_TRUE(regrown);
  EXPECT_TRUE(BytesEqual(*regrown, std::string(2 * kMiB, '\0')));

  // O_TRUNC with O_CREAT on an existing file truncates as well.
  ASSERT_TRUE(WriteAll(fd.get(), "abc", 0));
  fd.Reset();
  ASSERT_TRUE(OpenFd(Path("f"), O_WRONLY | O_CREAT | O_TRUNC, &fd));
  EXPECT_EQ(SizeOf(fd.get()), 0);
}

TEST_P(IoTest, CreateOnExistingFileKeepsContentAndMode) {
  const std::string data = RandomBytes(5000, 3);
  ASSERT_TRUE(WriteFile(Path("f"), data, 0640));
  Fd fd;
  ASSERT_TRUE(OpenFd(Path("f"), O_RDWR | O_CREAT, &fd, 0600));
  EXPECT_EQ(SizeOf(fd.get()), static_cast<off_t>(data.size()));
  const auto st = StatFd(fd.get());
  ASSERT_TRUE(st);
  EXPECT_EQ(st->st_mode & 07777, 0640u) << "the mode of O_CREAT applies to new files only";
  const auto content = ReadAll(fd.get());
  ASSERT_TRUE(content);
  EXPECT_TRUE(BytesEqual(*content, data));
}

TEST_P(IoTest, ExclusiveCreateOfExistingNameFails) {
  ASSERT_TRUE(WriteFile(Path("file"), "x"));
  ASSERT_SYS_OK(mkdir(Path("dir").c_str(), 0755));
  ASSERT_SYS_OK(symlink("missing", Path("dangling").c_str()));
  for (const char* name : {"file", "dir", "dangling"}) {
    SCOPED_TRACE(name);
    EXPECT_ERRNO(open(Path(name).c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644), EEXIST);
  }
  // O_EXCL does not follow the dangling link: nothing was created.
  EXPECT_FALSE(StatPath(Path("missing")));
  EXPECT_EQ(ReadStored(Path("file")), "x");

  Fd fd;
  EXPECT_TRUE(OpenFd(Path("new"), O_WRONLY | O_CREAT | O_EXCL, &fd));
}

TEST_P(IoTest, DirectoryFlagOnFileFails) {
  ASSERT_TRUE(WriteFile(Path("f"), "data"));
  EXPECT_ERRNO(open(Path("f").c_str(), O_RDONLY | O_DIRECTORY), ENOTDIR);
  EXPECT_ERRNO(open(Path("f/").c_str(), O_RDONLY), ENOTDIR);
  Fd fd;
  EXPECT_TRUE(OpenFd(root(), O_RDONLY | O_DIRECTORY, &fd));
}

TEST_P(IoTest, OpeningDirectoryForWritingFails) {
  ASSERT_SYS_OK(mkdir(Path("d").c_str(), 0755));
  EXPECT_ERRNO(open(Path("d").c_str(), O_WRONLY), EISDIR);
  EXPECT_ERRNO(open(Path("d").c_str(), O_RDWR), EISDIR);
  EXPECT_ERRNO(open(Path("d").c_str(), O_WRONLY | O_CREAT, 0644), EISDIR);
  EXPECT_ERRNO(open(Path("d").c_str(), O_RDONLY | O_TRUNC), EISDIR);
  Fd fd;
  ASSERT_TRUE(OpenFd(Path("d"), O_RDONLY, &fd));
  char byte;
  EXPECT_ERRNO(read(fd.get(), &byte, 1), EISDIR);
}

TEST_P(IoTest, AppendWritesGoToTheCurrentEnd) {
  Fd plain, append;
  ASSERT_TRUE(OpenFd(Path("f"), O_WRONLY | O_CREAT, &plain));
  ASSERT_TRUE(OpenFd(Path("f"), O_WRONLY | O_APPEND, &append));
  std::string model;

  const std::string first = RandomBytes(100, 4);
  ASSERT_TRUE(WriteAll(plain.get(), first, 0));
  ApplyWrite(model, 0, first);

  // The other descriptor grew the file: the append lands after its bytes.
  const std::string second = RandomBytes(3000, 5);
  ASSERT_EQ(write(append.get(), second.data(), second.size()), static_cast<ssize_t>(second.size()));
  ApplyWrite(model, model.size(), second);
  EXPECT_EQ(lseek(append.get(), 0, SEEK_CUR), static_cast<off_t>(model.size()));

  // Rewinding an O_APPEND descriptor does not make it overwrite.
  const std::string third = RandomBytes(1 * kMiB + 17, 6);
  ASSERT_TRUE(WriteAll(plain.get(), third, 5 * kMiB));
  ApplyWrite(model, 5 * kMiB, third);
  ASSERT_SYS_OK(lseek(append.get(), 0, SEEK_SET));
  const std::string fourth = RandomBytes(2 * kMiB, 7);
  ASSERT_EQ(write(append.get(), fourth.data(), fourth.size()), static_cast<ssize_t>(fourth.size()));
  ApplyWrite(model, model.size(), fourth);

  const auto content = ReadStored(Path("f"));
  ASSERT_TRUE(content);
  EXPECT_TRUE(BytesEqual(*content, model));
}

// Appenders with their own open file descriptions never overwrite each
// other: every record survives whole, in each writer's order.
TEST_P(IoTest, ConcurrentAppendersNeverOverwriteEachOther) {
  constexpr int kWriters = 4;
  constexpr int kRecords = 150;
  constexpr size_t kRecordSize = 1000;  // not page aligned on purpose
  {
    Fd create;
    ASSERT_TRUE(OpenFd(Path("log"), O_WRONLY | O_CREAT, &create));
  }

  auto record = [](int writer, int sequence) {
    std::string bytes = RandomBytes(kRecordSize, writer * 100000 + sequence);
    memcpy(bytes.data(), &writer, sizeof writer);
    memcpy(bytes.data() + sizeof writer, &sequence, sizeof sequence);
    return bytes;
  };
  std::vector<std::thread> threads;
  for (int writer = 0; writer < kWriters; ++writer) {
    threads.emplace_back([&, writer] {
      Fd fd;
      ASSERT_TRUE(OpenFd(Path("log"), O_WRONLY | O_APPEND, &fd));
      for (int sequence = 0; sequence < kRecords; ++sequence) {
        const std::string bytes = record(writer, sequence);
        ASSERT_EQ(write(fd.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  const auto content = ReadStored(Path("log"));
  ASSERT_TRUE(content);
  ASSERT_EQ(content->size(), kWriters * kRecords * kRecordSize);
  std::vector<int> next(kWriters, 0);
  for (size_t offset = 0; offset < content->size(); offset += kRecordSize) {
    int writer, sequence;
    memcpy(&writer, content->data() + offset, sizeof writer);
    memcpy(&sequence, content->data() + offset + sizeof writer, sizeof sequence);
    ASSERT_TRUE(writer >= 0 && writer < kWriters) << "garbage record at " << offset;
    ASSERT_EQ(sequence, next[writer]) << "writer " << writer << " at offset " << offset;
    ASSERT_TRUE(BytesEqual(std::string_view(*content).substr(offset, kRecordSize),
                           record(writer, sequence)))
        << "record at " << offset;
    ++next[writer];
  }
}

// ---------------------------------------------------------------------------
// Reads and writes

// Writes at offsets and lengths of every kind, many of them straddling the
// 1 MiB extent boundaries, checked against an in-memory model.
TEST_P(IoTest, ReadsAndWritesAtArbitraryOffsetsMatchModel) {
  Fd fd;
  ASSERT_TRUE(OpenFd(Path("f"), O_RDWR | O_CREAT, &fd));
  std::string model;
  uint64_t seed = 100;
  auto write_and_record = [&](off_t offset, size_t length) {
    const std::string data = RandomBytes(length, ++seed);
    ApplyWrite(model, offset, data);
    return WriteAll(fd.get(), data, offset);
  };

  // Boundary cases first: single bytes, page and extent edges.
  const std::vector<std::pair<off_t, size_t>> edges = {
      {0, 1},
      {1, 4095},
      {kMiB - 1, 2},
      {kMiB - 4096, 8192},
      {2 * kMiB - 7, kMiB + 14},
      {3 * kMiB + 1, 3 * kMiB - 1},
      {4096 * 3 + 5, 1},
      {7 * kMiB - 1, 1},
  };
  for (const auto& [offset, length] : edges) {
    ASSERT_TRUE(write_and_record(offset, length)) << offset << "+" << length;
  }

  std::mt19937_64 rng(42);
  constexpr off_t kSpan = 8 * kMiB;
  // Tiny, medium and large writes in equal shares.
  constexpr size_t kMaxLengths[] = {100, 64 * kKiB, 2 * kMiB + kMiB / 2};
  for (int i = 0; i < 150; ++i) {
    const size_t length = 1 + rng() % kMaxLengths[rng() % 3];
    off_t offset = rng() % kSpan;
    // Every other write is centred on a 1 MiB boundary.
    if (i % 2 == 0) {
      const off_t boundary = (1 + rng() % 8) * kMiB;
      offset = std::max<off_t>(
          0, boundary - static_cast<off_t>(length / 2) - static_cast<off_t>(rng() % 3));
    }
    ASSERT_TRUE(write_and_record(offset, length)) << offset << "+" << length;

    if (i % 10 == 0) {
      const off_t read_offset = rng() % (model.size() + 100);
      const size_t read_length = 1 + rng() % (3 * kMiB);
      ASSERT_TRUE(DropCache(fd.get()));
      const auto got = ReadAt(fd.get(), read_offset, read_length);
      ASSERT_TRUE(got);
      const std::string_view expected =
          read_offset < static_cast<off_t>(model.size())
              ? std::string_view(model).substr(read_offset, read_length)
              : std::string_view();
      ASSERT_TRUE(BytesEqual(*got, expected)) << "read " << read_offset << "+" << read_length;
    }
  }
  EXPECT_EQ(SizeOf(fd.get()), static_cast<off_t>(model.size()));
  fd.Reset();
  const auto content = ReadStored(Path("f"));
  ASSERT_TRUE(content);
  EXPECT_TRUE(BytesEqual(*content, model));
}

TEST_P(IoTest, ReadsStopAtEndOfFile) {
  const std::string data = RandomBytes(kMiB + 10, 8);
  ASSERT_TRUE(WriteFile(Path("f"), data));
  Fd fd;
  ASSERT_TRUE(OpenFd(Path("f"), O_RDONLY, &fd));
  std::string buffer(2 * kMiB, 'x');
  EXPECT_EQ(pread(fd.get(), buffer.data(), 100, kMiB), 10) << "a read straddling the end is short";
  EXPECT_TRUE(
      BytesEqual(std::string_view(buffer).substr(0, 10), std::string_view(data).substr(kMiB)));
  EXPECT_EQ(pread(fd.get(), buffer.data(), 100, data.size()), 0);
  EXPECT_EQ(pread(fd.get(), buffer.data(), 100, 10 * kMiB), 0);
  // A zero-length write changes nothing, even far past the end.
  Fd writer;
  ASSERT_TRUE(OpenFd(Path("f"), O_WRONLY, &writer));
  EXPECT_EQ(pwrite(writer.get(), buffer.data(), 0, 10 * kMiB), 0);
  EXPECT_EQ(SizeOf(fd.get()), static_cast<off_t>(data.size()));
}

// 64 MiB in one write() and one read() each way (the kernel splits them
// into many requests), once aligned and once at an odd offset.
TEST_P(IoTest, LargeTransfersRoundTripByteForByte) {
  const std::string data = RandomBytes(64 * kMiB, 9);
  Fd fd;
  ASSERT_TRUE(OpenFd(Path("aligned"), O_RDWR | O_CREAT, &fd));
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd.get(), data.data() + done, data.size() - done);
    ASSERT_SYS_OK(n);
    done += n;
  }
  ASSERT_SYS_OK(lseek(fd.get(), 0, SEEK_SET));
  ASSERT_TRUE(DropCache(fd.get()));
  std::string read_back(data.size(), '\0');
  done = 0;
  while (done < read_back.size()) {
    const ssize_t n = read(fd.get(), read_back.data() + done, read_back.size() - done);
    ASSERT_SYS_OK(n);
    ASSERT_GT(n, 0) << "early end of file at " << done;
    done += n;
  }
  EXPECT_TRUE(BytesEqual(read_back, data));

  constexpr off_t kOddOffset = kMiB - 3;
  ASSERT_TRUE(OpenFd(Path("odd"), O_RDWR | O_CREAT, &fd));
  ASSERT_TRUE(WriteAll(fd.get(), data, kOddOffset));
  EXPECT_EQ(SizeOf(fd.get()), static_cast<off_t>(kOddOffset + data.size()));
  const auto odd = ReadAll(fd.get());
  ASSERT_TRUE(odd);
  EXPECT_TRUE(
      BytesEqual(std::string_view(*odd).substr(0, kOddOffset), std::string(kOddOffset, '\0')));
  EXPECT_TRUE(BytesEqual(std::string_view(*odd).substr(kOddOffset), data));
}

// Requests larger than 1 MiB (max_request=8m): whether the kernel sends
// them whole (/proc/sys/fs/fuse/max_pages_limit raised, as root) or splits
// them at what it allows, 4 MiB written and read in single system calls,
// through the page cache and direct I/O and mmap, come back byte for byte.
class LargeRequestTest : public BackendTest {};

TEST_P(LargeRequestTest, FourMiBReadsAndWritesRoundTrip) {
  Mount mount;
  StartOrSkip(mount, MountOptions({"max_request=8m"}));
  if (HasFatalFailure() || IsSkipped()) return;
  const std::map<std::string, std::string> stats = MountStats(mount.path());
  ASSERT_TRUE(stats.contains("max_request"));
  const uint64_t granted = std::stoull(stats.at("max_request"));
  EXPECT_GE(granted, 1 * kMiB);  // 256 pages, the least any kernel allows
  EXPECT_LE(granted, 8 * kMiB);

  const std::string data = RandomBytes(4 * kMiB + 3 * kKiB, 21);
  const std::string path = mount.path() + "/big";
  Fd fd;
  // A new file gets direct I/O: 4 MiB at an odd offset.
  ASSERT_TRUE(OpenFd(path, O_RDWR | O_CREAT, &fd));
  ASSERT_EQ(pwrite(fd.get(), data.data(), data.size(), 4095),
            static_cast<ssize_t>(data.size()));
  ASSERT_SYS_OK(fsync(fd.get()));
  ASSERT_TRUE(DropCache(fd.get()));
  std::string back(data.size(), '\0');
  ASSERT_EQ(pread(fd.get(), back.data(), back.size(), 4095), static_cast<ssize_t>(back.size()));
  EXPECT_TRUE(BytesEqual(back, data));
  fd = Fd();
  // Reopened at more than direct_io_min: direct I/O again, one request each
  // where the kernel allows 4 MiB.
  ASSERT_TRUE(OpenFd(path, O_RDWR, &fd));
  const std::string other = RandomBytes(4 * kMiB, 22);
  ASSERT_EQ(pwrite(fd.get(), other.data(), other.size(), 0), static_cast<ssize_t>(other.size()));
  back.assign(other.size(), '\0');
  ASSERT_EQ(pread(fd.get(), back.data(), back.size(), 0), static_cast<ssize_t>(back.size()));
  EXPECT_TRUE(BytesEqual(back, other));
  // mmap readers get the same bytes through the page cache's readahead.
  void* map = mmap(nullptr, other.size(), PROT_READ, MAP_SHARED, fd.get(), 0);
  ASSERT_NE(map, MAP_FAILED) << ErrnoName(errno);
  EXPECT_TRUE(BytesEqual(std::string_view(static_cast<const char*>(map), other.size()), other));
  munmap(map, other.size());
}

CUDAFS_INSTANTIATE_BACKENDS(LargeRequestTest);

TEST_P(IoTest, SparseFileHolesReadAsZeros) {
  constexpr off_t kFarOffset = 64 * kMiB;
  const std::string head = RandomBytes(4 * kKiB, 10);
  const std::string tail = RandomBytes(4 * kKiB, 11);
  Fd fd;
  ASSERT_TRUE(OpenFd(Path("sparse"), O_RDWR | O_CREAT, &fd));
  ASSERT_TRUE(WriteAll(fd.get(), head, 0));
  ASSERT_TRUE(WriteAll(fd.get(), tail, kFarOffset));

  const auto st = StatFd(fd.get());
  ASSERT_TRUE(st);
  EXPECT_EQ(st->st_size, static_cast<off_t>(kFarOffset + tail.size()));
  EXPECT_LT(st->st_blocks * 512, st->st_size);
  EXPECT_LE(st->st_blocks * 512, static_cast<off_t>(4 * kMiB))
      << "the hole must not be backed by storage";

  const auto content = ReadAll(fd.get());
  ASSERT_TRUE(content);
  std::string expected(kFarOffset + tail.size(), '\0');
  expected.replace(0, head.size(), head);
  expected.replace(kFarOffset, tail.size(), tail);
  EXPECT_TRUE(BytesEqual(*content, expected));

  // Extending with ftruncate leaves a hole too.
  ASSERT_SYS_OK(ftruncate(fd.get(), kFarOffset + 32 * kMiB));
  const auto extended = StatFd(fd.get());
  ASSERT_TRUE(extended);
  EXPECT_EQ(extended->st_blocks, st->st_blocks);
  ASSERT_TRUE(DropCache(fd.get()));
  const auto beyond = ReadAt(fd.get(), kFarOffset + tail.size(), 32 * kMiB - tail.size());
  ASSERT_TRUE(beyond);
  EXPECT_TRUE(BytesEqual(*beyond, std::string(32 * kMiB - tail.size(), '\0')));
}

// Offsets far beyond the end (1 TiB and more) cost only the blocks written.
TEST_P(IoTest, WritesFarBeyondTheEndStaySparse) {
  constexpr off_t kTiB = off_t{1} << 40;
  const std::string data = RandomBytes(5000, 28);
  Fd fd;
  ASSERT_TRUE(OpenFd(Path("f"), O_RDWR | O_CREAT, &fd));
  ASSERT_TRUE(WriteAll(fd.get(), data, kTiB - 2000));
  ASSERT_TRUE(WriteAll(fd.get(), "z", 64 * kTiB));
  const auto st = StatFd(fd.get());
  ASSERT_TRUE(st);
  EXPECT_EQ(st->st_size, 64 * kTiB + 1);
  EXPECT_LE(st->st_blocks * 512, static_cast<off_t>(4 * kMiB));

  ASSERT_TRUE(DropCache(fd.get()));
  const auto around = ReadAt(fd.get(), kTiB - kMiB, 2 * kMiB);
  ASSERT_TRUE(around);
  std::string expected(2 * kMiB, '\0');
  expected.replace(kMiB - 2000, data.size(), data);
  EXPECT_TRUE(BytesEqual(*around, expected));
  const auto last = ReadAt(fd.get(), 64 * kTiB - 10, 100);
  ASSERT_TRUE(last);
  EXPECT_TRUE(BytesEqual(*last, std::string(10, '\0') + "z"));

  // A write ending past the largest possible offset is refused.
  EXPECT_ERRNO(pwrite(fd.get(), "x", 1, std::numeric_limits<off_t>::max()), EINVAL, EFBIG);
  EXPECT_EQ(SizeOf(fd.get()), 64 * kTiB + 1);
}

// ---------------------------------------------------------------------------
// Truncation

TEST_P(IoTest, FtruncateDownAndUpReadsZerosInRegrownPart) {
  const std::string data = RandomBytes(3 * kMiB, 12);
  Fd fd;
  ASSERT_TRUE(OpenFd(Path("f"), O_RDWR | O_CREAT, &fd));
  ASSERT_TRUE(WriteAll(fd.get(), data, 0));
  const auto full = StatFd(fd.get());
  ASSERT_TRUE(full);

  // Cut inside a page and inside an extent, then grow past the old size.
  constexpr off_t kCut = kMiB + kMiB / 2 + 123;
  ASSERT_SYS_OK(ftruncate(fd.get(), kCut));
  const auto cut = StatFd(fd.get());
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->st_size, kCut);
  EXPECT_LT(cut->st_blocks, full->st_blocks) << "blocks past the new end are given back";
  auto content = ReadAll(fd.get());
  ASSERT_TRUE(content);
  EXPECT_TRUE(BytesEqual(*content, std::string_view(data).substr(0, kCut)));

  ASSERT_SYS_OK(ftruncate(fd.get(), 4 * kMiB));
  EXPECT_EQ(SizeOf(fd.get()), static_cast<off_t>(4 * kMiB));
  content = ReadAll(fd.get());
  ASSERT_TRUE(content);
  std::string expected(data.substr(0, kCut));
  expected.resize(4 * kMiB, '\0');
  EXPECT_TRUE(BytesEqual(*content, expected)) << "the regrown part must read as zeros";

  // Writing after the regrown zeros keeps them zero.
  const std::string more = RandomBytes(1000, 13);
  ASSERT_TRUE(WriteAll(fd.get(), more, 5 * kMiB));
  ApplyWrite(expected, 5 * kMiB, more);
  content = ReadAll(fd.get());
  ASSERT_TRUE(content);
  EXPECT_TRUE(BytesEqual(*content, expected));

  ASSERT_SYS_OK(ftruncate(fd.get(), 0));
  const auto empty = StatFd(fd.get());
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->st_size, 0);
  EXPECT_EQ(empty->st_blocks, 0);
}

TEST_P(IoTest, TruncateByPathDownAndUp) {
  const std::string data = RandomBytes(2 * kMiB + 100, 14);
  ASSERT_TRUE(WriteFile(Path("f"), data));
  ASSERT_SYS_OK(truncate(Path("f").c_str(), 4097));
  auto content = ReadStored(Path("f"));
  ASSERT_TRUE(content);
  EXPECT_TRUE(BytesEqual(*content, std::string_view(data).substr(0, 4097)));

  ASSERT_SYS_OK(truncate(Path("f").c_str(), kMiB + 1));
  content = ReadStored(Path("f"));
  ASSERT_TRUE(content);
  std::string expected = data.substr(0, 4097);
  expected.resize(kMiB + 1, '\0');
  EXPECT_TRUE(BytesEqual(*content, expected));

  EXPECT_ERRNO(truncate(Path("missing").c_str(), 0), ENOENT);
  EXPECT_ERRNO(truncate(Path("f").c_str(), -1), EINVAL);
  ASSERT_SYS_OK(mkdir(Path("d").c_str(), 0755));
  EXPECT_ERRNO(truncate(Path("d").c_str(), 0), EISDIR);
  Fd read_only;
  ASSERT_TRUE(OpenFd(Path("f"), O_RDONLY, &read_only));
  EXPECT_ERRNO(ftruncate(read_only.get(), 0), EINVAL, EBADF);
  EXPECT_EQ(SizeOf(read_only.get()), static_cast<off_t>(kMiB + 1));
}

// ---------------------------------------------------------------------------
// Unlinked but open

TEST_P(IoTest, UnlinkedOpenFileStaysReadableAndWritable) {
  const std::string data = RandomBytes(3 * kMiB + 1, 15);
  Fd fd, second;
  ASSERT_TRUE(OpenFd(Path("f"), O_RDWR | O_CREAT, &fd));
  ASSERT_TRUE(WriteAll(fd.get(), data, 0));
  ASSERT_TRUE(OpenFd(Path("f"), O_RDONLY, &second));
  ASSERT_SYS_OK(unlink(Path("f").c_str()));
  EXPECT_FALSE(StatPath(Path("f")));

  const auto st = StatFd(fd.get());
  ASSERT_TRUE(st);
  EXPECT_EQ(st->st_nlink, 0u);
  std::string model = data;
  const std::string more = RandomBytes(kMiB, 16);
  ASSERT_TRUE(WriteAll(fd.get(), more, 2 * kMiB));
  ApplyWrite(model, 2 * kMiB, more);
  for (int reader : {fd.get(), second.get()}) {
    const auto content = ReadAll(reader);
    ASSERT_TRUE(content);
    EXPECT_TRUE(BytesEqual(*content, model));
  }
  // The name is free for a new, unrelated file.
  ASSERT_TRUE(WriteFile(Path("f"), "new"));
  EXPECT_EQ(ReadStored(Path("f")), "new");
  const auto still = ReadAll(second.get());
  ASSERT_TRUE(still);
  EXPECT_TRUE(BytesEqual(*still, model));
}

// ---------------------------------------------------------------------------
// copy_file_range

TEST_P(IoTest, CopyFileRangeBetweenFiles) {
  const std::string source_data = RandomBytes(3 * kMiB + 333, 17);
  std::string model = RandomBytes(kMiB, 18);
  ASSERT_TRUE(WriteFile(Path("src"), source_data));
  ASSERT_TRUE(WriteFile(Path("dst"), model));
  Fd in, out;
  ASSERT_TRUE(OpenFd(Path("src"), O_RDONLY, &in));
  ASSERT_TRUE(OpenFd(Path("dst"), O_RDWR, &out));

  // Unaligned on both sides, crossing extent boundaries, overlapping the
  // destination's existing data and extending it.
  constexpr off_t kInOffset = kMiB - 100;
  constexpr off_t kOutOffset = 500000;
  constexpr size_t kLength = 2 * kMiB + 77;
  ASSERT_TRUE(CopyRange(in.get(), kInOffset, out.get(), kOutOffset, kLength));
  ApplyWrite(model, kOutOffset, std::string_view(source_data).substr(kInOffset, kLength));
  auto content = ReadAll(out.get());
  ASSERT_TRUE(content);
  EXPECT_TRUE(BytesEqual(*content, model));

  // Past the source's end nothing is copied; at the end only what exists.
  off_t in_offset = source_data.size();
  off_t out_offset = 0;
  EXPECT_EQ(copy_file_range(in.get(), &in_offset, out.get(), &out_offset, 100, 0), 0);
  in_offset = source_data.size() - 10;
  out_offset = 10 * kMiB;
  EXPECT_EQ(copy_file_range(in.get(), &in_offset, out.get(), &out_offset, 100, 0), 10);
  ApplyWrite(model, 10 * kMiB, std::string_view(source_data).substr(source_data.size() - 10));
  content = ReadAll(out.get());
  ASSERT_TRUE(content);
  EXPECT_TRUE(BytesEqual(*content, model));

  const auto unchanged = ReadAll(in.get());
  ASSERT_TRUE(unchanged);
  EXPECT_TRUE(BytesEqual(*unchanged, source_data));
  EXPECT_ERRNO(copy_file_range(out.get(), nullptr, in.get(), nullptr, 10, 0), EBADF);
}

TEST_P(IoTest, CopyFileRangeWithinOneFile) {
  std::string model = RandomBytes(3 * kMiB, 19);
  Fd fd;
  ASSERT_TRUE(OpenFd(Path("f"), O_RDWR | O_CREAT, &fd));
  ASSERT_TRUE(WriteAll(fd.get(), model, 0));

  ASSERT_TRUE(CopyRange(fd.get(), 10, fd.get(), 2 * kMiB + 5, kMiB + 100));
  ApplyWrite(model, 2 * kMiB + 5, model.substr(10, kMiB + 100));
  const auto content = ReadAll(fd.get());
  ASSERT_TRUE(content);
  EXPECT_TRUE(BytesEqual(*content, model));

  off_t in_offset = 0, out_offset = 1000;
  EXPECT_ERRNO(copy_file_range(fd.get(), &in_offset, fd.get(), &out_offset, 2000, 0), EINVAL)
      << "overlapping ranges of one file";
}

// ---------------------------------------------------------------------------
// SEEK_DATA / SEEK_HOLE

// Data only in whole, aligned megabytes, so every implementation that
// tracks holes at any granularity up to 1 MiB gives the same answers.
TEST_P(IoTest, SeekDataAndHoleFindTheWrittenRegions) {
  Fd fd;
  ASSERT_TRUE(OpenFd(Path("f"), O_RDWR | O_CREAT, &fd));
  ASSERT_TRUE(WriteAll(fd.get(), RandomBytes(kMiB, 20), 4 * kMiB));
  ASSERT_TRUE(WriteAll(fd.get(), RandomBytes(kMiB, 21), 8 * kMiB));
  ASSERT_SYS_OK(ftruncate(fd.get(), 12 * kMiB));
  const int f = fd.get();

  EXPECT_EQ(lseek(f, 0, SEEK_DATA), static_cast<off_t>(4 * kMiB));
  EXPECT_EQ(lseek(f, 0, SEEK_HOLE), 0);
  EXPECT_EQ(lseek(f, 4 * kMiB + 12345, SEEK_DATA), static_cast<off_t>(4 * kMiB + 12345));
  EXPECT_EQ(lseek(f, 4 * kMiB, SEEK_HOLE), static_cast<off_t>(5 * kMiB));
  EXPECT_EQ(lseek(f, 5 * kMiB, SEEK_DATA), static_cast<off_t>(8 * kMiB));
  EXPECT_EQ(lseek(f, 8 * kMiB, SEEK_HOLE), static_cast<off_t>(9 * kMiB));
  EXPECT_EQ(lseek(f, 10 * kMiB, SEEK_HOLE), static_cast<off_t>(10 * kMiB));
  EXPECT_ERRNO(lseek(f, 9 * kMiB, SEEK_DATA), ENXIO) << "only a hole up to the end";
  EXPECT_ERRNO(lseek(f, 12 * kMiB, SEEK_DATA), ENXIO);
  EXPECT_ERRNO(lseek(f, 12 * kMiB, SEEK_HOLE), ENXIO);
  EXPECT_ERRNO(lseek(f, 20 * kMiB, SEEK_HOLE), ENXIO);
  EXPECT_ERRNO(lseek(f, -1, SEEK_DATA), ENXIO, EINVAL);

  // With data up to the end, the end itself is the hole.
  ASSERT_SYS_OK(ftruncate(f, 9 * kMiB));
  EXPECT_EQ(lseek(f, 8 * kMiB, SEEK_HOLE), static_cast<off_t>(9 * kMiB));

  ASSERT_SYS_OK(ftruncate(f, 0));
  EXPECT_ERRNO(lseek(f, 0, SEEK_DATA), ENXIO);
  EXPECT_ERRNO(lseek(f, 0, SEEK_HOLE), ENXIO);
}

// ---------------------------------------------------------------------------
// Sync

TEST_P(IoTest, SyncCallsSucceed) {
  Fd fd;
  ASSERT_TRUE(OpenFd(Path("f"), O_RDWR | O_CREAT, &fd));
  ASSERT_TRUE(WriteAll(fd.get(), RandomBytes(100 * kKiB, 22), 0));
  EXPECT_SYS_OK(fsync(fd.get()));
  EXPECT_SYS_OK(fdatasync(fd.get()));
  EXPECT_SYS_OK(syncfs(fd.get()));
  Fd read_only;
  ASSERT_TRUE(OpenFd(Path("f"), O_RDONLY, &read_only));
  EXPECT_SYS_OK(fsync(read_only.get()));
  EXPECT_SYS_OK(read_only.Close());
  // close() is the flush request.
  EXPECT_SYS_OK(fd.Close());
  Fd directory;
  ASSERT_TRUE(OpenFd(root(), O_RDONLY | O_DIRECTORY, &directory));
  EXPECT_SYS_OK(fsync(directory.get()));
}

// ---------------------------------------------------------------------------
// mmap

TEST_P(IoTest, SharedMappingWritesReachTheFile) {
  constexpr size_t kSize = 3 * kMiB + 100;
  Fd fd;
  ASSERT_TRUE(OpenFd(Path("f"), O_RDWR | O_CREAT, &fd));
  ASSERT_SYS_OK(ftruncate(fd.get(), kSize));
  void* map = mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  ASSERT_NE(map, MAP_FAILED) << ErrnoName(errno);
  std::string model(kSize, '\0');
  // Scattered writes: a span across the 1 MiB boundary, a single byte, the
  // last bytes.
  const std::string span = RandomBytes(200 * kKiB, 23);
  memcpy(static_cast<char*>(map) + kMiB - 100 * kKiB, span.data(), span.size());
  ApplyWrite(model, kMiB - 100 * kKiB, span);
  static_cast<char*>(map)[2 * kMiB + 1] = 'x';
  model[2 * kMiB + 1] = 'x';
  memcpy(static_cast<char*>(map) + kSize - 50, span.data(), 50);
  ApplyWrite(model, kSize - 50, std::string_view(span).substr(0, 50));
  EXPECT_SYS_OK(msync(map, kSize, MS_SYNC));
  EXPECT_SYS_OK(munmap(map, kSize));
  EXPECT_SYS_OK(fd.Close());

  // Through read() with the cached pages dropped, and through a copy the
  // filesystem makes from what it stores.
  const auto content = ReadStored(Path("f"));
  ASSERT_TRUE(content);
  EXPECT_TRUE(BytesEqual(*content, model));
  Fd in, out;
  ASSERT_TRUE(OpenFd(Path("f"), O_RDONLY, &in));
  ASSERT_TRUE(OpenFd(Path("copy"), O_WRONLY | O_CREAT, &out));
  ASSERT_TRUE(CopyRange(in.get(), 0, out.get(), 0, kSize));
  const auto copied = ReadStored(Path("copy"));
  ASSERT_TRUE(copied);
  EXPECT_TRUE(BytesEqual(*copied, model));
}

TEST_P(IoTest, MappingSeesDataWrittenWithWrite) {
  const std::string data = RandomBytes(2 * kMiB + 77, 24);
  Fd fd;
  ASSERT_TRUE(OpenFd(Path("f"), O_RDWR | O_CREAT, &fd));
  ASSERT_TRUE(WriteAll(fd.get(), data, 0));
  const size_t page = sysconf(_SC_PAGESIZE);
  const size_t mapped = (data.size() + page - 1) / page * page;
  // Page faults then read what the filesystem stored.
  ASSERT_TRUE(DropCache(fd.get()));
  void* map = mmap(nullptr, mapped, PROT_READ, MAP_SHARED, fd.get(), 0);
  ASSERT_NE(map, MAP_FAILED) << ErrnoName(errno);
  const char* bytes = static_cast<const char*>(map);
  EXPECT_TRUE(BytesEqual(std::string_view(bytes, data.size()), data));
  EXPECT_TRUE(BytesEqual(std::string_view(bytes + data.size(), mapped - data.size()),
                         std::string(mapped - data.size(), '\0')))
      << "the last page beyond the end reads as zeros";

  // A write() while mapped shows through the mapping.
  const std::string update = RandomBytes(10000, 25);
  ASSERT_TRUE(WriteAll(fd.get(), update, kMiB - 5000));
  std::string model = data;
  ApplyWrite(model, kMiB - 5000, update);
  EXPECT_TRUE(BytesEqual(std::string_view(bytes, model.size()), model));
  EXPECT_SYS_OK(munmap(map, mapped));
}

// ---------------------------------------------------------------------------
// Locks

TEST_P(IoTest, FlockExclusiveConflictsAcrossOpenFileDescriptions) {
  ASSERT_TRUE(WriteFile(Path("f"), "data"));
  Fd first, second;
  ASSERT_TRUE(OpenFd(Path("f"), O_RDONLY, &first));
  ASSERT_TRUE(OpenFd(Path("f"), O_RDONLY, &second));

  ASSERT_SYS_OK(flock(first.get(), LOCK_EX | LOCK_NB));
  EXPECT_ERRNO(flock(second.get(), LOCK_EX | LOCK_NB), EWOULDBLOCK);
  EXPECT_ERRNO(flock(second.get(), LOCK_SH | LOCK_NB), EWOULDBLOCK);

  // A blocking request waits for the holder to unlock.
  std::atomic<bool> acquired = false;
  std::thread waiter([&] {
    EXPECT_SYS_OK(flock(second.get(), LOCK_EX));
    acquired = true;
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(acquired) << "the lock was granted while held";
  ASSERT_SYS_OK(flock(first.get(), LOCK_UN));
  EXPECT_TRUE(Eventually([&] { return acquired.load(); }));
  waiter.join();
  EXPECT_ERRNO(flock(first.get(), LOCK_SH | LOCK_NB), EWOULDBLOCK);

  // Shared locks coexist; closing a description drops its lock.
  ASSERT_SYS_OK(flock(second.get(), LOCK_SH));
  EXPECT_SYS_OK(flock(first.get(), LOCK_SH | LOCK_NB));
  EXPECT_SYS_OK(flock(first.get(), LOCK_UN));
  second.Reset();
  EXPECT_SYS_OK(flock(first.get(), LOCK_EX | LOCK_NB));
}

TEST_P(IoTest, PosixRecordLocksConflictAcrossProcesses) {
  ASSERT_TRUE(WriteFile(Path("f"), RandomBytes(4096, 26)));
  Fd fd;
  ASSERT_TRUE(OpenFd(Path("f"), O_RDWR, &fd));
  struct flock held = {};
  held.l_type = F_WRLCK;
  held.l_whence = SEEK_SET;
  held.l_start = 100;
  held.l_len = 200;
  ASSERT_SYS_OK(fcntl(fd.get(), F_SETLK, &held));

  // POSIX locks belong to the process: a child using the same descriptor
  // conflicts with its parent.
  auto child_lock = [&](short type, off_t start, off_t length) {
    return RunAs(getuid(), getgid(), [&] {
      struct flock wanted = {};
      wanted.l_type = type;
      wanted.l_whence = SEEK_SET;
      wanted.l_start = start;
      wanted.l_len = length;
      return ResultErrno(fcntl(fd.get(), F_SETLK, &wanted));
    });
  };
  const Errno overlapping = child_lock(F_WRLCK, 250, 10);
  EXPECT_TRUE(overlapping == Errno{EAGAIN} || overlapping == Errno{EACCES})
      << testing::PrintToString(overlapping);
  const Errno reading = child_lock(F_RDLCK, 0, 101);
  EXPECT_TRUE(reading == Errno{EAGAIN} || reading == Errno{EACCES})
      << testing::PrintToString(reading);
  EXPECT_EQ(child_lock(F_WRLCK, 300, 10), Errno{0}) << "the range right after the lock is free";

  // F_GETLK in the child names the parent as the holder; the answer comes
  // back through shared memory.
  auto* reported = static_cast<struct flock*>(mmap(
      nullptr, sizeof(struct flock), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(reported, MAP_FAILED);
  const Errno query = RunAs(getuid(), getgid(), [&] {
    *reported = {};
    reported->l_type = F_WRLCK;
    reported->l_whence = SEEK_SET;
    reported->l_start = 0;
    reported->l_len = 0;
    return ResultErrno(fcntl(fd.get(), F_GETLK, reported));
  });
  EXPECT_EQ(query, Errno{0});
  EXPECT_EQ(reported->l_type, F_WRLCK);
  EXPECT_EQ(reported->l_pid, getpid());
  EXPECT_EQ(reported->l_start, 100);
  EXPECT_EQ(reported->l_len, 200);
  munmap(reported, sizeof(struct flock));

  held.l_type = F_UNLCK;
  ASSERT_SYS_OK(fcntl(fd.get(), F_SETLK, &held));
  EXPECT_EQ(child_lock(F_WRLCK, 250, 10), Errno{0});
}

// ---------------------------------------------------------------------------
// Concurrency

// Writers each fill their own file in uneven chunks and overwrite parts of
// it while readers keep reading a shared file; every byte is checked.
TEST_P(IoTest, ConcurrentReadersAndWritersOnDifferentFiles) {
  constexpr int kWriters = 4;
  constexpr int kReaders = 2;
  constexpr size_t kFileSize = 6 * kMiB + 1234;
  const std::string shared = RandomBytes(4 * kMiB + 1, 27);
  ASSERT_TRUE(WriteFile(Path("shared"), shared));
  std::atomic<int> writers_left = kWriters;

  std::vector<std::thread> threads;
  for (int writer = 0; writer < kWriters; ++writer) {
    threads.emplace_back([&, writer] {
      CountDown count_down{writers_left};
      const std::string path = Path("file" + std::to_string(writer));
      std::string model = RandomBytes(kFileSize, 1000 + writer);
      std::mt19937_64 rng(writer);
      Fd fd;
      ASSERT_TRUE(OpenFd(path, O_RDWR | O_CREAT, &fd));
      for (size_t offset = 0; offset < model.size();) {
        const size_t length = std::min<size_t>(1 + rng() % (300 * kKiB), model.size() - offset);
        ASSERT_TRUE(WriteAll(fd.get(), std::string_view(model).substr(offset, length), offset));
        offset += length;
      }
      for (int i = 0; i < 20; ++i) {
        const off_t offset = rng() % model.size();
        const std::string patch =
            RandomBytes(std::min<size_t>(1 + rng() % (512 * kKiB), model.size() - offset),
                        2000 + writer * 100 + i);
        ASSERT_TRUE(WriteAll(fd.get(), patch, offset));
        ApplyWrite(model, offset, patch);
      }
      ASSERT_TRUE(DropCache(fd.get()));
      const auto content = ReadAt(fd.get(), 0, model.size() + 1);
      ASSERT_TRUE(content);
      EXPECT_TRUE(BytesEqual(*content, model)) << path;
    });
  }
  for (int reader = 0; reader < kReaders; ++reader) {
    threads.emplace_back([&] {
      Fd fd;
      ASSERT_TRUE(OpenFd(Path("shared"), O_RDONLY, &fd));
      int rounds = 0;
      // At least two full reads, and more while writers are busy.
      while (rounds < 2 || writers_left > 0) {
        ASSERT_TRUE(DropCache(fd.get()));
        const auto content = ReadAt(fd.get(), 0, shared.size());
        ASSERT_TRUE(content);
        ASSERT_TRUE(BytesEqual(*content, shared)) << "round " << rounds;
        ++rounds;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
}

// POSIX: a write is atomic with respect to reads of the same file. Writers
// fill whole 64 KiB records of one shared file with a token of their own
// while readers read whole records concurrently (O_DIRECT, so each read and
// write is one request to cudafs, through its cache or not): a record never
// shows two tokens, and at the end each holds the last token written to it.
TEST_P(IoTest, ConcurrentWritesToOneFileAreNeverTorn) {
  constexpr size_t kRecord = 64 * kKiB;
  constexpr int kRecords = 64;
  constexpr int kWriters = 4;
  constexpr int kReaders = 2;
  constexpr int kWritesEach = 400;
  const std::string path = Path("shared");
  ASSERT_TRUE(WriteFile(path, std::string(kRecord * kRecords, '\0')));
  std::vector<std::mutex> record_locks(kRecords);  // orders the writes of one record
  std::vector<uint64_t> last_token(kRecords, 0);
  std::atomic<int> writers_left = kWriters;
  std::atomic<uint64_t> torn = 0, reads = 0;
  const auto aligned_buffer = [] {
    void* memory = nullptr;
    EXPECT_EQ(posix_memalign(&memory, 4096, kRecord), 0);
    return std::unique_ptr<uint64_t, decltype(&free)>(static_cast<uint64_t*>(memory), &free);
  };
  std::vector<std::thread> threads;
  for (int writer = 0; writer < kWriters; ++writer) {
    threads.emplace_back([&, writer] {
      CountDown count_down{writers_left};
      Fd fd(open(path.c_str(), O_WRONLY | O_DIRECT));
      ASSERT_TRUE(fd.valid()) << ErrnoName(errno);
      auto buffer = aligned_buffer();
      std::mt19937_64 rng(writer);
      for (int i = 0; i < kWritesEach; ++i) {
        const int record = static_cast<int>(rng() % kRecords);
        const uint64_t token = (static_cast<uint64_t>(writer + 1) << 32) | static_cast<uint64_t>(i + 1);
        std::fill(buffer.get(), buffer.get() + kRecord / 8, token);
        std::lock_guard<std::mutex> lock(record_locks[record]);
        ASSERT_EQ(pwrite(fd.get(), buffer.get(), kRecord, off_t(record) * kRecord),
                  static_cast<ssize_t>(kRecord))
            << ErrnoName(errno);
        last_token[record] = token;
      }
    });
  }
  for (int reader = 0; reader < kReaders; ++reader) {
    threads.emplace_back([&, reader] {
      Fd fd(open(path.c_str(), O_RDONLY | O_DIRECT));
      ASSERT_TRUE(fd.valid()) << ErrnoName(errno);
      auto buffer = aligned_buffer();
      std::mt19937_64 rng(100 + reader);
      // At least some reads, however fast the writers are.
      for (int done = 0; writers_left > 0 || done < 200; ++done) {
        const int record = static_cast<int>(rng() % kRecords);
        ASSERT_EQ(pread(fd.get(), buffer.get(), kRecord, off_t(record) * kRecord),
                  static_cast<ssize_t>(kRecord))
            << ErrnoName(errno);
        ++reads;
        const uint64_t first = buffer.get()[0];
        if (!std::all_of(buffer.get(), buffer.get() + kRecord / 8,
                         [first](uint64_t word) { return word == first; })) {
          ++torn;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(torn.load(), 0u) << "of " << reads.load() << " reads";
  const std::optional<std::string> content = ReadFile(path);
  ASSERT_TRUE(content.has_value());
  ASSERT_EQ(content->size(), kRecord * kRecords);
  for (int record = 0; record < kRecords; ++record) {
    uint64_t word;
    std::memcpy(&word, content->data() + record * kRecord, sizeof(word));
    EXPECT_EQ(word, last_token[record]) << "record " << record;
  }
}

// A word of the tearing race: every byte has its top bit set (never 0),
// and the word carries its own index and the write that made it, checked,
// so that a mix of two writes' bytes or of a word and zeros is no word.
uint64_t RaceWord(uint64_t index, uint64_t write) {
  const uint64_t check = ((index * 2654435761u) ^ (write * 40503u)) & 0xfffffff;
  const uint64_t payload = ((write & 0xfffffff) << 28) | check;
  uint64_t word = 0;
  for (int i = 0; i < 8; ++i) word |= (0x80 | ((payload >> (7 * i)) & 0x7f)) << (8 * i);
  return word;
}

// All zero, or a whole word some write put at `index`.
bool WholeWord(uint64_t index, uint64_t word) {
  if (word == 0) return true;
  uint64_t payload = 0;
  for (int i = 0; i < 8; ++i) {
    const uint64_t byte = (word >> (8 * i)) & 0xff;
    if (!(byte & 0x80)) return false;
    payload |= (byte & 0x7f) << (7 * i);
  }
  return RaceWord(index, payload >> 28) == word;
}

struct TearCount {
  uint64_t reads = 0;
  uint64_t torn = 0;
  std::string first;  // the first torn word, described
};

// Readers of `path` check every word they read while writers rewrite runs
// of whole words and a truncater shrinks the file to a random multiple of
// 8 and extends it back, each on O_DIRECT descriptors of its own, for
// `duration`.
TearCount RaceReadsAgainstTruncation(const std::string& path, std::chrono::milliseconds duration) {
  constexpr size_t kFileBytes = 64 * kKiB;
  constexpr size_t kWords = kFileBytes / 8;
  TearCount count;
  {
    Fd create(open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600));
    EXPECT_TRUE(create.valid()) << ErrnoName(errno);
    EXPECT_SYS_OK(ftruncate(create.get(), kFileBytes));
  }
  std::atomic<bool> stop = false;
  std::atomic<uint64_t> next_write = 1;
  std::mutex report;
  std::vector<std::thread> threads;
  for (int writer = 0; writer < 2; ++writer) {
    threads.emplace_back([&, writer] {
      Fd fd(open(path.c_str(), O_WRONLY | O_DIRECT));
      ASSERT_TRUE(fd.valid()) << ErrnoName(errno);
      std::mt19937_64 rng(writer);
      std::vector<uint64_t> words(kWords);
      while (!stop) {
        const size_t first = rng() % kWords;
        const size_t n = 1 + rng() % std::min<size_t>(2048, kWords - first);
        const uint64_t write = next_write++;
        for (size_t i = 0; i < n; ++i) words[i] = RaceWord(first + i, write);
        ASSERT_EQ(pwrite(fd.get(), words.data(), n * 8, off_t(first * 8)), ssize_t(n * 8))
            << ErrnoName(errno);
      }
    });
  }
  threads.emplace_back([&] {
    Fd fd(open(path.c_str(), O_WRONLY | O_DIRECT));
    ASSERT_TRUE(fd.valid()) << ErrnoName(errno);
    std::mt19937_64 rng(7);
    while (!stop) {
      ASSERT_SYS_OK(ftruncate(fd.get(), off_t(rng() % kWords * 8)));
      ASSERT_SYS_OK(ftruncate(fd.get(), kFileBytes));
    }
  });
  for (int reader = 0; reader < 2; ++reader) {
    threads.emplace_back([&, reader] {
      Fd fd(open(path.c_str(), O_RDONLY | O_DIRECT));
      ASSERT_TRUE(fd.valid()) << ErrnoName(errno);
      std::mt19937_64 rng(100 + reader);
      std::vector<uint64_t> words(kWords);
      while (!stop) {
        const size_t first = rng() % kWords;
        const ssize_t got = pread(fd.get(), words.data(), (kWords - first) * 8, off_t(first * 8));
        ASSERT_GE(got, 0) << ErrnoName(errno);
        std::lock_guard<std::mutex> lock(report);
        ++count.reads;
        bool torn = false;
        for (size_t i = 0; i < size_t(got) / 8; ++i) {
          if (WholeWord(first + i, words[i])) continue;
          if (count.first.empty()) {
            char described[64];
            std::snprintf(described, sizeof described, "%#018lx at offset %zu", words[i],
                          (first + i) * 8);
            count.first = described;
          }
          torn = true;
        }
        count.torn += torn;
      }
    });
  }
  std::this_thread::sleep_for(duration);
  stop = true;
  for (std::thread& thread : threads) thread.join();
  return count;
}

// POSIX makes read(2) atomic with respect to write(2) and ftruncate(2)
// (XSH 2.9.7). What the daemon answers is: a read racing writes and
// truncation returns, in each aligned word, zeros (a hole, or bytes a
// shrink cut off and the extension brought back) or a whole word a write
// put there. Truncation is to multiples of 8, so no other word is
// legitimate. O_DIRECT, so that every read is the daemon's: the kernel's
// page cache tears such reads itself, on tmpfs too (its copy to the reader
// races the copy of a write and the zeroing of a shrink).
TEST_P(IoTest, DirectReadsRacingWritesAndTruncationNeverTearWords) {
  const TearCount count = RaceReadsAgainstTruncation(Path("race"), 3s);
  EXPECT_GT(count.reads, 100u);
  EXPECT_EQ(count.torn, 0u) << "of " << count.reads << " reads; first " << count.first;
}

CUDAFS_INSTANTIATE_BACKENDS(IoTest);

}  // namespace
}  // namespace cudafs_test
