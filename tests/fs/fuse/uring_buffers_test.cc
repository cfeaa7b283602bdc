#include "fs/fuse/uring_buffers.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "alloc/devices/device_wrapper.h"
#include "alloc/devices/null_device.h"

namespace cudafs {
namespace {

// Stores nothing (a null device); counts how often each address is
// registered and unregistered.
class RegistrationCountingDevice final : public DeviceWrapper {
 public:
  RegistrationCountingDevice() : DeviceWrapper(std::make_unique<NullDevice>(0)) {}

  void RegisterHostMemory(void* memory, size_t length) override {
    absl::MutexLock lock(&mu_);
    ++registered_[memory];
    lengths_[memory] = length;
  }
  void UnregisterHostMemory(void* memory) override {
    absl::MutexLock lock(&mu_);
    ++unregistered_[memory];
  }

  int registered(void* memory) {
    absl::MutexLock lock(&mu_);
    return registered_[memory];
  }
  int unregistered(void* memory) {
    absl::MutexLock lock(&mu_);
    return unregistered_[memory];
  }
  size_t length(void* memory) {
    absl::MutexLock lock(&mu_);
    return lengths_[memory];
  }

 private:
  absl::Mutex mu_;
  std::map<void*, int> registered_ ABSL_GUARDED_BY(mu_);
  std::map<void*, int> unregistered_ ABSL_GUARDED_BY(mu_);
  std::map<void*, size_t> lengths_ ABSL_GUARDED_BY(mu_);
};

TEST(UringBuffersTest, EachBufferIsRegisteredOnceWithItsLength) {
  RegistrationCountingDevice device;
  char first[64], second[64];
  UringBuffers buffers(&device);
  for (int i = 0; i < 3; ++i) {
    buffers.Prepare(first, sizeof(first));
    buffers.Prepare(second, 32);
  }
  EXPECT_EQ(device.registered(first), 1);
  EXPECT_EQ(device.registered(second), 1);
  EXPECT_EQ(device.length(first), sizeof(first));
  EXPECT_EQ(device.length(second), 32u);
  EXPECT_EQ(device.unregistered(first), 0);
}

TEST(UringBuffersTest, ConcurrentFirstUsesRegisterOnce) {
  RegistrationCountingDevice device;
  std::vector<char> memory(16);
  UringBuffers buffers(&device);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 1000; ++round) {
        for (char& byte : memory) buffers.Prepare(&byte, 1);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (char& byte : memory) EXPECT_EQ(device.registered(&byte), 1);
}

TEST(UringBuffersTest, UnregisterAllUndoesEachRegistrationForGood) {
  RegistrationCountingDevice device;
  char first[8], second[8];
  {
    UringBuffers buffers(&device);
    buffers.Prepare(first, sizeof(first));
    buffers.Prepare(second, sizeof(second));
    buffers.UnregisterAll();
    EXPECT_EQ(device.unregistered(first), 1);
    EXPECT_EQ(device.unregistered(second), 1);
    // A ring thread finishing late must not pin memory that is about to be
    // freed.
    buffers.Prepare(first, sizeof(first));
    EXPECT_EQ(device.registered(first), 1);
  }
  EXPECT_EQ(device.unregistered(first), 1) << "the destructor unregisters nothing twice";
}

TEST(UringBuffersTest, DestructorUnregisters) {
  RegistrationCountingDevice device;
  char buffer[8];
  {
    UringBuffers buffers(&device);
    buffers.Prepare(buffer, sizeof(buffer));
  }
  EXPECT_EQ(device.unregistered(buffer), 1);
}

}  // namespace
}  // namespace cudafs
