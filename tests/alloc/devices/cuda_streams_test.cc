// CudaStreams on the fake driver: request threads wait in the driver
// (cuStreamSynchronize), background threads poll (cuStreamQuery) between
// sleeps, and every wait returns only once the stream is done, with its
// error.
#include "alloc/devices/cuda_streams.h"

#include <memory>
#include <thread>
#include <vector>

#include "alloc/base/sizes.h"
#include "alloc/devices/cuda_context.h"
#include "alloc/devices/device.h"
#include "gtest/gtest.h"
#include "tests/support/fake_cuda_driver.h"

namespace cudafs {
namespace {

class CudaStreamsTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(context_.Retain().ok());
    streams_ = std::make_unique<CudaStreams>(context_);
    ASSERT_TRUE(streams_->Create(2).ok());
  }
  void TearDown() override {
    context_.MakeCurrent();
    streams_->Destroy();
    context_.Release();
  }

  // Copies `bytes` between two host buffers; checks they arrived.
  absl::Status CopyBytes(size_t bytes) {
    std::vector<char> from(bytes, 'x'), to(bytes, 0);
    absl::Status status = streams_->Copy(1, [&](size_t) {
      return CudaStreams::Transfer{reinterpret_cast<unsigned long long>(to.data()),
                                   reinterpret_cast<unsigned long long>(from.data()), bytes};
    });
    if (status.ok()) {
      EXPECT_EQ(to, from);
    }
    return status;
  }

  int Spins() const { return fake_.calls("cuStreamSynchronize"); }
  int Polls() const { return fake_.calls("cuStreamQuery"); }

  FakeCudaDriver fake_;
  CudaContext context_{fake_.driver(), 0, "fake GPU 0"};
  std::unique_ptr<CudaStreams> streams_;
};

TEST_F(CudaStreamsTest, RequestThreadsWaitInTheDriver) {
  ASSERT_TRUE(CopyBytes(4 * kKiB).ok());
  ASSERT_TRUE(CopyBytes(1 * kMiB).ok());
  EXPECT_EQ(Spins(), 2);
  EXPECT_EQ(Polls(), 0);
}

TEST_F(CudaStreamsTest, BackgroundThreadsPollUntilDoneAndNeverSpin) {
  std::thread background([&] {
    MarkBackgroundThread();
    EXPECT_TRUE(CopyBytes(1 * kMiB).ok());
    fake_.FailNext("cuStreamQuery", cu::CUDA_ERROR_NOT_READY, 3);
    EXPECT_TRUE(CopyBytes(4 * kKiB).ok());
  });
  background.join();
  EXPECT_EQ(Spins(), 0);
  EXPECT_EQ(Polls(), 5);
}

TEST_F(CudaStreamsTest, AStreamErrorFailsTheWaitAndLosesTheContext) {
  fake_.FailNext("cuStreamSynchronize", cu::CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_TRUE(absl::IsInternal(CopyBytes(4 * kKiB)));
  EXPECT_TRUE(context_.lost());
  EXPECT_TRUE(absl::IsInternal(CopyBytes(4 * kKiB)));
}

TEST_F(CudaStreamsTest, AStreamErrorFailsABackgroundWaitToo) {
  std::thread background([&] {
    MarkBackgroundThread();
    fake_.FailNext("cuStreamQuery", cu::CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT_TRUE(absl::IsInternal(CopyBytes(1 * kMiB)));
  });
  background.join();
  EXPECT_TRUE(context_.lost());
}

}  // namespace
}  // namespace cudafs
