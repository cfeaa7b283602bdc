// Files through system calls, for tests that check a filesystem from the
// outside: whole files written and read back, reads that bypass the
// kernel's page cache, directory listings, stat and statvfs, and byte
// strings compared without printing megabytes.
#ifndef CUDAFS_TESTS_SUPPORT_FILE_IO_H_
#define CUDAFS_TESTS_SUPPORT_FILE_IO_H_

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/fd.h"

namespace cudafs_test {

// Deterministic pseudo-random bytes: failures reproduce.
std::string RandomBytes(size_t size, uint64_t seed);

// open(2) into *fd, explaining a failure by errno name.
testing::AssertionResult OpenFd(const std::string& path, int flags, Fd* fd, mode_t mode = 0644);

std::optional<struct stat> StatFd(int fd);
// lstat(2).
std::optional<struct stat> StatPath(const std::string& path);
std::optional<struct statvfs> StatFs(const std::string& path);
// Free bytes as statvfs reports them (f_bfree, which root may use).
uint64_t FreeBytes(const std::string& path);

// Compares byte strings without printing megabytes: reports sizes and the
// first differing offset.
testing::AssertionResult BytesEqual(std::string_view actual, std::string_view expected);

// pwrite(2) of all of `data` at `offset`.
testing::AssertionResult WriteAll(int fd, std::string_view data, off_t offset);
// Replaces (or creates) `path` with `data`.
testing::AssertionResult WriteFile(const std::string& path, std::string_view data,
                                   mode_t mode = 0644);

// Up to `size` bytes at `offset`; nullopt if a read fails.
std::optional<std::string> ReadAt(int fd, off_t offset, size_t size);

// Drops the file's clean pages from the kernel's cache, so that the next
// read asks the filesystem. cudafs lets cached pages outlive an open
// (keep_cache), so without this a check could read back the kernel's copy
// of what was written instead of what the filesystem stored.
bool DropCache(int fd);
// Everything up to the file's current size, as the filesystem stores it.
std::optional<std::string> ReadAll(int fd);
// The whole file at `path`, as the filesystem stores it.
std::optional<std::string> ReadStored(const std::string& path);
// The whole file through read(2); nullopt if it cannot be opened or read.
std::optional<std::string> ReadFile(const std::string& path);
// All of `fd` from offset 0 on, through pread(2) (a memfd's output).
std::string ReadWholeFd(int fd);

// Directory entry names, sorted, "." and ".." included; nullopt on error.
std::optional<std::vector<std::string>> ListDir(const std::string& path);

}  // namespace cudafs_test

#endif  // CUDAFS_TESTS_SUPPORT_FILE_IO_H_
