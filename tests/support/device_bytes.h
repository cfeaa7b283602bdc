// Bytes in and out of a Device at an arena offset, for the devices' tests
// (which link the device library this header does not).
#ifndef CUDAFS_TESTS_SUPPORT_DEVICE_BYTES_H_
#define CUDAFS_TESTS_SUPPORT_DEVICE_BYTES_H_

#include <cstdint>
#include <string>

#include "alloc/devices/device.h"
#include "gtest/gtest.h"

namespace cudafs {

// `length` bytes read at `offset` (a failed read fails the test).
inline std::string ReadBack(Device& device, uint64_t offset, size_t length) {
  std::string bytes(length, '\0');
  const DeviceToHost read{bytes.data(), offset, length};
  EXPECT_TRUE(device.Read({&read, 1}).ok());
  return bytes;
}

// Writes `bytes` at `offset`, which must be committed.
inline void WriteAt(Device& device, uint64_t offset, const std::string& bytes) {
  const HostToDevice write{offset, bytes.data(), bytes.size()};
  ASSERT_TRUE(device.Write({&write, 1}).ok());
}

}  // namespace cudafs

#endif  // CUDAFS_TESTS_SUPPORT_DEVICE_BYTES_H_
