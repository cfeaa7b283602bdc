// CudaDriver::Resolve through the fake driver's cuGetProcAddress, which
// dies when asked for an entry point at another version than cuda_api.h
// declares: each entry point is asked for at its own version, and only of
// drivers new enough to have it in that form.
#include "alloc/devices/cuda_driver.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "alloc/devices/cuda_api.h"
#include "gtest/gtest.h"
#include "tests/support/fake_cuda_driver.h"

namespace cudafs {
namespace {

TEST(CudaDriverTest, ResolvesEveryEntryPointOnTheNewestDriver) {
  FakeCudaDriver fake;
  absl::StatusOr<CudaDriver> driver =
      CudaDriver::Resolve(FakeCudaDriver::get_proc_address(), FakeCudaDriver::kDriverVersion);
  ASSERT_TRUE(driver.ok()) << driver.status();
  EXPECT_EQ(driver->version, FakeCudaDriver::kDriverVersion);
#define CUDAFS_EXPECT_SET(name) EXPECT_NE(driver->name, nullptr) << #name;
  CUDAFS_CUDA_ENTRY_POINTS(CUDAFS_EXPECT_SET)
  CUDAFS_CUDA_OPTIONAL_ENTRY_POINTS(CUDAFS_EXPECT_SET)
#undef CUDAFS_EXPECT_SET
  int version = 0;
  ASSERT_EQ(driver->cuDriverGetVersion(&version), cu::CUDA_SUCCESS);
  EXPECT_EQ(version, FakeCudaDriver::kDriverVersion);
}

TEST(CudaDriverTest, LeavesOutBatchCopiesOnDriversBeforeTheirCuda13Form) {
  FakeCudaDriver fake;
  // CUDA 12.8 had cuMemcpyBatchAsync with another argument list.
  for (const int version : {cu::kOldestDriverVersion, 12080}) {
    fake.set_driver_version(version);
    absl::StatusOr<CudaDriver> driver =
        CudaDriver::Resolve(FakeCudaDriver::get_proc_address(), version);
    ASSERT_TRUE(driver.ok()) << driver.status();
    EXPECT_EQ(driver->cuMemcpyBatchAsync, nullptr) << version;
    EXPECT_NE(driver->cuMemCreate, nullptr) << version;
  }
}

// Hides cuMemCreate from the fake's answers, as a driver without it would.
cu::CUresult WithoutMemCreate(const char* symbol, void** function, int cuda_version,
                              cu::cuuint64_t flags, cu::CUdriverProcAddressQueryResult* found) {
  if (std::strcmp(symbol, "cuMemCreate") == 0) {
    *function = nullptr;
    *found = cu::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return cu::CUDA_SUCCESS;
  }
  return FakeCudaDriver::get_proc_address()(symbol, function, cuda_version, flags, found);
}

TEST(CudaDriverTest, AMissingEntryPointIsNamed) {
  FakeCudaDriver fake;
  absl::StatusOr<CudaDriver> driver =
      CudaDriver::Resolve(WithoutMemCreate, FakeCudaDriver::kDriverVersion);
  EXPECT_EQ(driver.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(driver.status().message(),
            "the NVIDIA driver (CUDA 13.0) lacks cuMemCreate (CUDA 10.2)");
}

TEST(CudaDriverTest, TheFakeAnswersAsTheDriverDocuments) {
  FakeCudaDriver fake;
  fake.set_driver_version(12080);
  cu::cuGetProcAddress_t get_proc_address = FakeCudaDriver::get_proc_address();
  void* function = nullptr;
  cu::CUdriverProcAddressQueryResult found = cu::CU_GET_PROC_ADDRESS_SUCCESS;
  EXPECT_EQ(get_proc_address("cuMemcpyBatchAsync", &function, 13000, 0, &found),
            cu::CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(get_proc_address("cuNoSuchCall", &function, 2000, 0, &found), cu::CUDA_SUCCESS);
  EXPECT_EQ(found, cu::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  EXPECT_EQ(function, nullptr);
  EXPECT_EQ(get_proc_address("cuMemGetInfo", &function, cu::cuMemGetInfo_version, 0, &found),
            cu::CUDA_SUCCESS);
  EXPECT_EQ(found, cu::CU_GET_PROC_ADDRESS_SUCCESS);
  EXPECT_NE(function, nullptr);
}

TEST(CudaDriverDeathTest, TheFakeRefusesAnotherVersionThanDeclared) {
  EXPECT_DEATH(
      {
        FakeCudaDriver fake;
        void* function = nullptr;
        cu::CUdriverProcAddressQueryResult found;
        // cuMemGetInfo's 32-bit form, before CUDA 3.2.
        FakeCudaDriver::get_proc_address()("cuMemGetInfo", &function, 2000, 0, &found);
      },
      "cuMemGetInfo at CUDA 2000, declared at 3020");
}

}  // namespace
}  // namespace cudafs
