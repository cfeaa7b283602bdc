#include "tests/support/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <random>

#include "tests/support/errno_check.h"

namespace cudafs_test {
namespace {

// "0x0a": AssertionResult's stream ignores manipulators like std::hex.
std::string ByteHex(char byte) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02x", static_cast<unsigned>(byte) & 0xff);
  return text;
}

}  // namespace

std::string RandomBytes(size_t size, uint64_t seed) {
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

testing::AssertionResult OpenFd(const std::string& path, int flags, Fd* fd, mode_t mode) {
  fd->Reset(open(path.c_str(), flags, mode));
  if (fd->valid()) return testing::AssertionSuccess();
  const int err = errno;
  return testing::AssertionFailure() << "open " << path << ": " << ErrnoName(err);
}

std::optional<struct stat> StatFd(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return std::nullopt;
  return st;
}

std::optional<struct stat> StatPath(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return std::nullopt;
  return st;
}

std::optional<struct statvfs> StatFs(const std::string& path) {
  struct statvfs st;
  if (statvfs(path.c_str(), &st) != 0) return std::nullopt;
  return st;
}

uint64_t FreeBytes(const std::string& path) {
  const auto st = StatFs(path);
  return st ? uint64_t{st->f_bfree} * st->f_frsize : 0;
}

testing::AssertionResult BytesEqual(std::string_view actual, std::string_view expected) {
  const size_t common = std::min(actual.size(), expected.size());
  for (size_t i = 0; i < common; ++i) {
    if (actual[i] != expected[i]) {
      return testing::AssertionFailure()
             << "bytes differ first at offset " << i << ": got " << ByteHex(actual[i])
             << ", expected " << ByteHex(expected[i]) << " (sizes " << actual.size() << " and "
             << expected.size() << ")";
    }
  }
  if (actual.size() != expected.size()) {
    return testing::AssertionFailure()
           << "size " << actual.size() << ", expected " << expected.size();
  }
  return testing::AssertionSuccess();
}

testing::AssertionResult WriteAll(int fd, std::string_view data, off_t offset) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = pwrite(fd, data.data() + done, data.size() - done, offset + done);
    if (n < 0) {
      const int err = errno;
      return testing::AssertionFailure()
             << "pwrite at " << offset + done << " failed: " << ErrnoName(err);
    }
    done += n;
  }
  return testing::AssertionSuccess();
}

testing::AssertionResult WriteFile(const std::string& path, std::string_view data, mode_t mode) {
  Fd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, mode));
  if (!fd.valid()) {
    const int err = errno;
    return testing::AssertionFailure() << "open " << path << ": " << ErrnoName(err);
  }
  return WriteAll(fd.get(), data, 0);
}

std::optional<std::string> ReadAt(int fd, off_t offset, size_t size) {
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

bool DropCache(int fd) { return posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0; }

std::optional<std::string> ReadAll(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !DropCache(fd)) return std::nullopt;
  return ReadAt(fd, 0, st.st_size);
}

std::optional<std::string> ReadStored(const std::string& path) {
  Fd fd(open(path.c_str(), O_RDONLY));
  if (!fd.valid()) return std::nullopt;
  return ReadAll(fd.get());
}

std::optional<std::string> ReadFile(const std::string& path) {
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

std::string ReadWholeFd(int fd) {
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

std::optional<std::vector<std::string>> ListDir(const std::string& path) {
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return std::nullopt;
  std::vector<std::string> names;
  while (const dirent* entry = readdir(dir)) names.emplace_back(entry->d_name);
  closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace cudafs_test
