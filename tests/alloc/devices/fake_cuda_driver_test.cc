// FakeCudaDriver through its entry points, as CudaDevice calls them.
#include "tests/support/fake_cuda_driver.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "alloc/devices/scatter_kernel.h"
#include "gtest/gtest.h"
#include "tests/support/fake_cuda_program_api.h"
#include "tests/support/fake_cuda_shared_budget.h"
#include "tests/support/temp_dir.h"

namespace cudafs {
namespace {

constexpr size_t kGranule = size_t{2} << 20;

class FakeCudaDriverTest : public testing::Test {
 protected:
  explicit FakeCudaDriverTest(FakeGpuOptions options = {})
      : fake_(std::move(options)), cu_(fake_.driver()) {}
  explicit FakeCudaDriverTest(std::vector<FakeGpuOptions> gpus)
      : fake_(std::move(gpus)), cu_(fake_.driver()) {}

  // Leaves no context current for the next test's fake.
  ~FakeCudaDriverTest() override { cu_.cuCtxSetCurrent(nullptr); }

  // Retains the device's primary context and makes it current.
  cu::CUcontext Enter(cu::CUdevice device = 0) {
    cu::CUcontext context = nullptr;
    EXPECT_EQ(cu_.cuDevicePrimaryCtxRetain(&context, device), cu::CUDA_SUCCESS);
    EXPECT_EQ(cu_.cuCtxSetCurrent(context), cu::CUDA_SUCCESS);
    return context;
  }

  static cu::CUmemAllocationProp DeviceProp(int device = 0) {
    cu::CUmemAllocationProp prop = {};
    prop.type = cu::CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = cu::CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    return prop;
  }

  cu::CUmemGenericAllocationHandle Create(size_t size = kGranule, int device = 0) {
    const cu::CUmemAllocationProp prop = DeviceProp(device);
    cu::CUmemGenericAllocationHandle handle = 0;
    EXPECT_EQ(cu_.cuMemCreate(&handle, size, &prop, 0), cu::CUDA_SUCCESS);
    return handle;
  }

  // Maps one granule and lets `device` read and write it.
  cu::CUresult MapReadWrite(cu::CUdeviceptr address, cu::CUmemGenericAllocationHandle handle,
                            size_t offset = 0, int device = 0) {
    if (cu::CUresult r = cu_.cuMemMap(address, kGranule, offset, handle, 0);
        r != cu::CUDA_SUCCESS) {
      return r;
    }
    return SetAccess(address, device, cu::CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  }

  cu::CUresult SetAccess(cu::CUdeviceptr address, int device, cu::CUmemAccess_flags flags) {
    cu::CUmemAccessDesc access = {};
    access.location = DeviceProp(device).location;
    access.flags = flags;
    return cu_.cuMemSetAccess(address, kGranule, &access, 1);
  }

  cu::CUdeviceptr Reserve(size_t size) {
    cu::CUdeviceptr base = 0;
    EXPECT_EQ(cu_.cuMemAddressReserve(&base, size, kGranule, 0, 0), cu::CUDA_SUCCESS);
    return base;
  }

  FakeCudaDriver fake_;
  const CudaDriver& cu_;
};

cu::CUdeviceptr Ptr(const void* p) { return reinterpret_cast<cu::CUdeviceptr>(p); }

TEST_F(FakeCudaDriverTest, AnswersDeviceQueriesWithoutAContext) {
#define CUDAFS_EXPECT_SET(name) EXPECT_NE(cu_.name, nullptr) << #name;
  CUDAFS_CUDA_ENTRY_POINTS(CUDAFS_EXPECT_SET)
  CUDAFS_CUDA_OPTIONAL_ENTRY_POINTS(CUDAFS_EXPECT_SET)
#undef CUDAFS_EXPECT_SET
  int version = 0;
  EXPECT_EQ(cu_.cuDriverGetVersion(&version), cu::CUDA_SUCCESS);
  EXPECT_EQ(version, FakeCudaDriver::kDriverVersion);
  int count = 0;
  EXPECT_EQ(cu_.cuDeviceGetCount(&count), cu::CUDA_SUCCESS);
  EXPECT_EQ(count, 1);
  cu::CUdevice device = -1;
  EXPECT_EQ(cu_.cuDeviceGet(&device, 1), cu::CUDA_ERROR_INVALID_DEVICE);
  ASSERT_EQ(cu_.cuDeviceGet(&device, 0), cu::CUDA_SUCCESS);
  char text[64];
  ASSERT_EQ(cu_.cuDeviceGetName(text, sizeof text, device), cu::CUDA_SUCCESS);
  EXPECT_STREQ(text, "Fake GPU");
  ASSERT_EQ(cu_.cuDeviceGetPCIBusId(text, sizeof text, device), cu::CUDA_SUCCESS);
  EXPECT_STREQ(text, "0000:65:00.0");
  EXPECT_EQ(cu_.cuDeviceGetByPCIBusId(&device, "65:00.0"), cu::CUDA_SUCCESS);
  EXPECT_EQ(cu_.cuDeviceGetByPCIBusId(&device, "0000:66:00.0"), cu::CUDA_ERROR_INVALID_DEVICE);
  size_t total = 0;
  EXPECT_EQ(cu_.cuDeviceTotalMem(&total, device), cu::CUDA_SUCCESS);
  EXPECT_EQ(total, size_t{8} << 30);
  int value = 0;
  EXPECT_EQ(cu_.cuDeviceGetAttribute(
                &value, cu::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device),
            cu::CUDA_SUCCESS);
  EXPECT_EQ(value, 1);
  EXPECT_EQ(cu_.cuDeviceGetAttribute(&value, cu::CU_DEVICE_ATTRIBUTE_ECC_ENABLED, device),
            cu::CUDA_SUCCESS);
  EXPECT_EQ(value, 0);
  const cu::CUmemAllocationProp prop = DeviceProp();
  size_t granule = 0;
  EXPECT_EQ(
      cu_.cuMemGetAllocationGranularity(&granule, &prop, cu::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
      cu::CUDA_SUCCESS);
  EXPECT_EQ(granule, kGranule);
  EXPECT_EQ(cu_.Describe("cuMemCreate", cu::CUDA_ERROR_OUT_OF_MEMORY),
            "cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY (out of memory)");
  EXPECT_EQ(fake_.stats().contexts_created, 0);
}

TEST_F(FakeCudaDriverTest, PrimaryContextLivesFromFirstRetainToLastRelease) {
  cu::CUcontext first = nullptr, again = nullptr;
  ASSERT_EQ(cu_.cuDevicePrimaryCtxRetain(&first, 0), cu::CUDA_SUCCESS);
  ASSERT_EQ(cu_.cuDevicePrimaryCtxRetain(&again, 0), cu::CUDA_SUCCESS);
  EXPECT_EQ(first, again);
  EXPECT_EQ(fake_.stats().contexts_created, 1);
  EXPECT_EQ(fake_.stats().live_contexts, 1);
  EXPECT_EQ(cu_.cuDevicePrimaryCtxRelease(0), cu::CUDA_SUCCESS);
  EXPECT_EQ(fake_.stats().live_contexts, 1);
  EXPECT_EQ(cu_.cuDevicePrimaryCtxRelease(0), cu::CUDA_SUCCESS);
  EXPECT_EQ(fake_.stats().live_contexts, 0);
  EXPECT_EQ(cu_.cuDevicePrimaryCtxRelease(0), cu::CUDA_ERROR_INVALID_CONTEXT);
  cu::CUcontext second = nullptr;
  ASSERT_EQ(cu_.cuDevicePrimaryCtxRetain(&second, 0), cu::CUDA_SUCCESS);
  EXPECT_NE(second, first);
  EXPECT_EQ(fake_.stats().contexts_created, 2);
  EXPECT_EQ(fake_.stats().leaked_at_destroy, 0);
  // Left retained: the fake's destruction frees it.
}

TEST_F(FakeCudaDriverTest, CallsNeedTheirContextCurrentAndAlive) {
  size_t free = 0, total = 0;
  cu::CUstream stream = nullptr;
  EXPECT_EQ(cu_.cuMemGetInfo(&free, &total), cu::CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cu_.cuStreamCreate(&stream, 0), cu::CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cu_.cuCtxSetCurrent(reinterpret_cast<cu::CUcontext>(0x1234)),
            cu::CUDA_ERROR_INVALID_CONTEXT);
  const cu::CUcontext old = Enter();
  ASSERT_EQ(cu_.cuStreamCreate(&stream, cu::CU_STREAM_NON_BLOCKING), cu::CUDA_SUCCESS);
  ASSERT_EQ(cu_.cuMemGetInfo(&free, &total), cu::CUDA_SUCCESS);
  EXPECT_EQ(free, total);
  // Current per thread: another thread has none.
  std::thread([&] {
    size_t f, t;
    EXPECT_EQ(cu_.cuMemGetInfo(&f, &t), cu::CUDA_ERROR_INVALID_CONTEXT);
  }).join();

  ASSERT_EQ(cu_.cuDevicePrimaryCtxRelease(0), cu::CUDA_SUCCESS);
  EXPECT_EQ(fake_.stats().leaked_at_destroy, 1);  // the stream
  EXPECT_EQ(cu_.cuMemGetInfo(&free, &total), cu::CUDA_ERROR_CONTEXT_IS_DESTROYED);
  // A new context does not revive the old handle, nor what was made in it.
  cu::CUcontext fresh = nullptr;
  ASSERT_EQ(cu_.cuDevicePrimaryCtxRetain(&fresh, 0), cu::CUDA_SUCCESS);
  EXPECT_EQ(cu_.cuMemGetInfo(&free, &total), cu::CUDA_ERROR_CONTEXT_IS_DESTROYED);
  EXPECT_EQ(cu_.cuCtxSetCurrent(old), cu::CUDA_SUCCESS);  // allowed, useless
  EXPECT_EQ(cu_.cuStreamSynchronize(stream), cu::CUDA_ERROR_CONTEXT_IS_DESTROYED);
  ASSERT_EQ(cu_.cuCtxSetCurrent(fresh), cu::CUDA_SUCCESS);
  EXPECT_EQ(cu_.cuStreamSynchronize(stream), cu::CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cu_.cuStreamDestroy(stream), cu::CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cu_.cuMemGetInfo(&free, &total), cu::CUDA_SUCCESS);
}

TEST_F(FakeCudaDriverTest, DeviceMemoryKeepsItsBytesAcrossUnmapAndRemap) {
  Enter();
  const cu::CUdeviceptr base = Reserve(4 * kGranule);
  ASSERT_EQ(base % kGranule, 0u);
  const cu::CUmemGenericAllocationHandle handle = Create();
  EXPECT_EQ(cu_.cuMemMap(base + 4096, kGranule, 0, handle, 0), cu::CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu_.cuMemMap(base + 3 * kGranule, 2 * kGranule, 0, handle, 0),
            cu::CUDA_ERROR_INVALID_VALUE);  // past the allocation and the reservation
  ASSERT_EQ(MapReadWrite(base, handle), cu::CUDA_SUCCESS);
  EXPECT_EQ(cu_.cuMemMap(base, kGranule, 0, handle, 0), cu::CUDA_ERROR_INVALID_VALUE);  // mapped

  std::string data(kGranule, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  cu::CUstream stream;
  ASSERT_EQ(cu_.cuStreamCreate(&stream, cu::CU_STREAM_NON_BLOCKING), cu::CUDA_SUCCESS);
  ASSERT_EQ(cu_.cuMemcpyAsync(base, Ptr(data.data()), data.size(), stream), cu::CUDA_SUCCESS);
  ASSERT_EQ(cu_.cuStreamSynchronize(stream), cu::CUDA_SUCCESS);
  // Device addresses are host addresses.
  EXPECT_EQ(std::memcmp(reinterpret_cast<const void*>(base), data.data(), data.size()), 0);
  EXPECT_EQ(fake_.stats().mapped_bytes, kGranule);
  EXPECT_EQ(fake_.stats().reserved_bytes, 4 * kGranule);

  ASSERT_EQ(cu_.cuMemUnmap(base, kGranule), cu::CUDA_SUCCESS);
  EXPECT_EQ(fake_.stats().mapped_bytes, 0u);
  ASSERT_EQ(MapReadWrite(base + 2 * kGranule, handle), cu::CUDA_SUCCESS);
  std::string back(kGranule, '\0');
  ASSERT_EQ(cu_.cuMemcpyAsync(Ptr(back.data()), base + 2 * kGranule, back.size(), stream),
            cu::CUDA_SUCCESS);
  EXPECT_EQ(back, data);

  // Released while mapped: freed at the unmap.
  ASSERT_EQ(cu_.cuMemRelease(handle), cu::CUDA_SUCCESS);
  EXPECT_EQ(cu_.cuMemRelease(handle), cu::CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(fake_.stats().live_physical_allocations, 1);
  EXPECT_EQ(cu_.cuMemAddressFree(base, 4 * kGranule), cu::CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu_.cuMemUnmap(base + 2 * kGranule, kGranule / 2), cu::CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cu_.cuMemUnmap(base + 2 * kGranule, kGranule), cu::CUDA_SUCCESS);
  EXPECT_EQ(fake_.stats().live_physical_allocations, 0);
  EXPECT_EQ(fake_.stats().physical_bytes, 0u);
  EXPECT_EQ(cu_.cuMemAddressFree(base, kGranule), cu::CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cu_.cuMemAddressFree(base, 4 * kGranule), cu::CUDA_SUCCESS);
  ASSERT_EQ(cu_.cuStreamDestroy(stream), cu::CUDA_SUCCESS);
  ASSERT_EQ(cu_.cuDevicePrimaryCtxRelease(0), cu::CUDA_SUCCESS);
  EXPECT_EQ(fake_.stats().leaked_at_destroy, 0);
}

// An exported allocation is a descriptor of its very memory, which an
// importer cannot resize, as VRAM cannot be (the daemon maps it too).
TEST_F(FakeCudaDriverTest, ExportedMemoryCannotBeResized) {
  Enter();
  cu::CUmemAllocationProp prop = DeviceProp();
  prop.requestedHandleTypes = cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  cu::CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cu_.cuMemCreate(&handle, kGranule, &prop, 0), cu::CUDA_SUCCESS);
  int exported = -1;
  ASSERT_EQ(cu_.cuMemExportToShareableHandle(&exported, handle,
                                             cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
            cu::CUDA_SUCCESS);
  EXPECT_NE(ftruncate(exported, 0), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(ftruncate(exported, 2 * kGranule), 0);
  close(exported);
  ASSERT_EQ(cu_.cuMemRelease(handle), cu::CUDA_SUCCESS);
  ASSERT_EQ(cu_.cuDevicePrimaryCtxRelease(0), cu::CUDA_SUCCESS);
}

class SmallFakeCudaDriverTest : public FakeCudaDriverTest {
 protected:
  SmallFakeCudaDriverTest() : FakeCudaDriverTest(FakeGpuOptions{.vram_limit = 3 * kGranule}) {}
};

TEST_F(SmallFakeCudaDriverTest, CreateFailsBeyondTheLimit) {
  Enter();
  const cu::CUmemAllocationProp prop = DeviceProp();
  cu::CUmemGenericAllocationHandle handles[3];
  for (auto& handle : handles) handle = Create();
  cu::CUmemGenericAllocationHandle more;
  EXPECT_EQ(cu_.cuMemCreate(&more, kGranule, &prop, 0), cu::CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cu_.cuMemCreate(&more, 4 * kGranule, &prop, 0), cu::CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(fake_.stats().largest_create, 4 * kGranule);
  size_t free = 1, total = 0;
  ASSERT_EQ(cu_.cuMemGetInfo(&free, &total), cu::CUDA_SUCCESS);
  EXPECT_EQ(free, 0u);
  ASSERT_EQ(cu_.cuMemRelease(handles[0]), cu::CUDA_SUCCESS);
  handles[0] = Create();
  fake_.set_vram_limit(4 * kGranule);
  const cu::CUmemGenericAllocationHandle fourth = Create();
  EXPECT_EQ(fake_.stats().physical_bytes, 4 * kGranule);
  for (auto handle : handles) EXPECT_EQ(cu_.cuMemRelease(handle), cu::CUDA_SUCCESS);
  EXPECT_EQ(cu_.cuMemRelease(fourth), cu::CUDA_SUCCESS);
  EXPECT_EQ(fake_.stats().live_physical_allocations, 0);
}

TEST_F(FakeCudaDriverTest, HostRegistrationsMayNotOverlap) {
  Enter();
  std::vector<char> buffer(64 << 10);
  ASSERT_EQ(cu_.cuMemHostRegister(buffer.data(), 32 << 10, cu::CU_MEMHOSTREGISTER_PORTABLE),
            cu::CUDA_SUCCESS);
  EXPECT_EQ(cu_.cuMemHostRegister(buffer.data() + 4096, 64 << 10, 0),
            cu::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  ASSERT_EQ(cu_.cuMemHostRegister(buffer.data() + (32 << 10), 32 << 10, 0), cu::CUDA_SUCCESS);
  EXPECT_EQ(fake_.stats().registered_host_bytes, 64u << 10);
  EXPECT_EQ(cu_.cuMemHostUnregister(buffer.data() + 1), cu::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  void* pinned = nullptr;
  ASSERT_EQ(cu_.cuMemHostAlloc(&pinned, 8192, cu::CU_MEMHOSTALLOC_PORTABLE), cu::CUDA_SUCCESS);
  EXPECT_EQ(fake_.stats().pinned_host_bytes, 8192u);
  EXPECT_EQ(cu_.cuMemHostRegister(pinned, 4096, 0), cu::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  EXPECT_EQ(cu_.cuMemFreeHost(buffer.data()), cu::CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu_.cuMemFreeHost(pinned), cu::CUDA_SUCCESS);
  EXPECT_EQ(cu_.cuMemHostUnregister(buffer.data()), cu::CUDA_SUCCESS);
  EXPECT_EQ(cu_.cuMemHostUnregister(buffer.data()), cu::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  EXPECT_EQ(cu_.cuMemHostUnregister(buffer.data() + (32 << 10)), cu::CUDA_SUCCESS);
  EXPECT_EQ(fake_.stats().registered_host_bytes, 0u);
  EXPECT_EQ(fake_.stats().pinned_host_bytes, 0u);
}

TEST_F(FakeCudaDriverTest, CopiesTouchingUnmappedDeviceMemoryFaultTheContext) {
  Enter();
  const cu::CUdeviceptr base = Reserve(2 * kGranule);
  const cu::CUmemGenericAllocationHandle handle = Create();
  ASSERT_EQ(cu_.cuMemMap(base, kGranule, 0, handle, 0), cu::CUDA_SUCCESS);
  cu::CUstream stream;
  ASSERT_EQ(cu_.cuStreamCreate(&stream, cu::CU_STREAM_NON_BLOCKING), cu::CUDA_SUCCESS);
  std::vector<char> host(4096, 'x');
  // Batches and memset work on accessible memory; host memory is any other.
  cu::CUmemAccessDesc access = {};
  access.location = DeviceProp().location;
  access.flags = cu::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_EQ(cu_.cuMemSetAccess(base, kGranule, &access, 1), cu::CUDA_SUCCESS);
  ASSERT_EQ(cu_.cuMemsetD8Async(base, 0xab, 4096, stream), cu::CUDA_SUCCESS);
  cu::CUdeviceptr to[] = {Ptr(host.data()), base + 8192};
  cu::CUdeviceptr from[] = {base, Ptr(host.data())};
  size_t lengths[] = {4096, 4096};
  cu::CUmemcpyAttributes attributes = {};
  attributes.srcAccessOrder = cu::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  size_t first = 0;
  EXPECT_EQ(cu_.cuMemcpyBatchAsync(to, from, lengths, 2, &attributes, &first, 1, nullptr),
            cu::CUDA_ERROR_INVALID_VALUE);  // not on the legacy stream
  ASSERT_EQ(cu_.cuMemcpyBatchAsync(to, from, lengths, 2, &attributes, &first, 1, stream),
            cu::CUDA_SUCCESS);
  EXPECT_EQ(host, std::vector<char>(4096, static_cast<char>(0xab)));
  EXPECT_EQ(reinterpret_cast<const char*>(base)[8192], static_cast<char>(0xab));

  // Past the mapping, into the bare reservation: a fault, then every call
  // in the context fails.
  EXPECT_EQ(cu_.cuMemcpyAsync(base + kGranule - 100, Ptr(host.data()), 200, stream),
            cu::CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(cu_.cuStreamSynchronize(stream), cu::CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(cu_.cuMemcpyAsync(Ptr(host.data()), base, 100, stream), cu::CUDA_ERROR_ILLEGAL_ADDRESS);
  // Only a new context recovers.
  ASSERT_EQ(cu_.cuDevicePrimaryCtxRelease(0), cu::CUDA_SUCCESS);
  EXPECT_EQ(fake_.stats().leaked_at_destroy, 3);  // stream, allocation, reservation
  Enter();
  ASSERT_EQ(cu_.cuStreamCreate(&stream, 0), cu::CUDA_SUCCESS);
  EXPECT_EQ(cu_.cuStreamDestroy(stream), cu::CUDA_SUCCESS);
}

TEST_F(FakeCudaDriverTest, MappedButInaccessibleMemoryFaults) {
  Enter();
  const cu::CUdeviceptr base = Reserve(kGranule);
  const cu::CUmemGenericAllocationHandle handle = Create();
  ASSERT_EQ(cu_.cuMemMap(base, kGranule, 0, handle, 0), cu::CUDA_SUCCESS);
  char byte = 0;
  EXPECT_EQ(cu_.cuMemcpyAsync(Ptr(&byte), base, 1, nullptr), cu::CUDA_ERROR_ILLEGAL_ADDRESS);
}

TEST_F(FakeCudaDriverTest, ScatterKernelCopiesPinnedPiecesOnTheCpu) {
  Enter();
  cu::CUmodule module;
  ASSERT_EQ(cu_.cuModuleLoadData(&module, kScatterKernelPtx), cu::CUDA_SUCCESS);
  cu::CUfunction kernel;
  EXPECT_EQ(cu_.cuModuleGetFunction(&kernel, module, "other"), cu::CUDA_ERROR_NOT_FOUND);
  ASSERT_EQ(cu_.cuModuleGetFunction(&kernel, module, kScatterKernelName), cu::CUDA_SUCCESS);
  const cu::CUdeviceptr base = Reserve(kGranule);
  const cu::CUmemGenericAllocationHandle handle = Create();
  ASSERT_EQ(MapReadWrite(base, handle), cu::CUDA_SUCCESS);
  void* table_memory;
  void* source_memory;
  ASSERT_EQ(cu_.cuMemHostAlloc(&table_memory, 3 * sizeof(ScatterPiece), 0), cu::CUDA_SUCCESS);
  ASSERT_EQ(cu_.cuMemHostAlloc(&source_memory, 300, 0), cu::CUDA_SUCCESS);
  auto* source = static_cast<char*>(source_memory);
  for (int i = 0; i < 300; ++i) source[i] = static_cast<char>(i);
  auto* pieces = static_cast<ScatterPiece*>(table_memory);
  pieces[0] = {base + 1000, Ptr(source), 100};
  pieces[1] = {base + 5, Ptr(source + 100), 100};
  pieces[2] = {base + 70000, Ptr(source + 200), 100};
  cu::CUdeviceptr table = Ptr(pieces);
  unsigned count = 3;
  void* arguments[] = {&table, &count};
  cu::CUstream stream;
  ASSERT_EQ(cu_.cuStreamCreate(&stream, cu::CU_STREAM_NON_BLOCKING), cu::CUDA_SUCCESS);
  ASSERT_EQ(cu_.cuLaunchKernel(kernel, count, 1, 1, kScatterThreadsPerBlock, 1, 1, 0, stream,
                               arguments, nullptr),
            cu::CUDA_SUCCESS);
  const auto* device = reinterpret_cast<const char*>(base);
  EXPECT_EQ(std::memcmp(device + 1000, source, 100), 0);
  EXPECT_EQ(std::memcmp(device + 5, source + 100, 100), 0);
  EXPECT_EQ(std::memcmp(device + 70000, source + 200, 100), 0);

  // The GPU cannot read pageable memory.
  std::vector<char> pageable(100);
  pieces[1].source = Ptr(pageable.data());
  EXPECT_EQ(cu_.cuLaunchKernel(kernel, count, 1, 1, kScatterThreadsPerBlock, 1, 1, 0, stream,
                               arguments, nullptr),
            cu::CUDA_ERROR_ILLEGAL_ADDRESS);
  // The faulted context still frees what it holds when it goes.
  ASSERT_EQ(cu_.cuDevicePrimaryCtxRelease(0), cu::CUDA_SUCCESS);
  EXPECT_EQ(fake_.stats().leaked_at_destroy, 6);
  EXPECT_EQ(fake_.stats().live_modules, 0);
  EXPECT_EQ(fake_.stats().pinned_host_bytes, 0u);
}

TEST_F(FakeCudaDriverTest, InjectedFailuresComeInTheNumberAsked) {
  fake_.FailNext("cuDevicePrimaryCtxRetain", cu::CUDA_ERROR_OUT_OF_MEMORY);
  cu::CUcontext context = nullptr;
  EXPECT_EQ(cu_.cuDevicePrimaryCtxRetain(&context, 0), cu::CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(fake_.stats().contexts_created, 0);
  Enter();
  EXPECT_EQ(fake_.calls("cuDevicePrimaryCtxRetain"), 2);

  fake_.FailNext("cuMemCreate", cu::CUDA_ERROR_OUT_OF_MEMORY, 2);
  const cu::CUmemAllocationProp prop = DeviceProp();
  cu::CUmemGenericAllocationHandle handle;
  EXPECT_EQ(cu_.cuMemCreate(&handle, kGranule, &prop, 0), cu::CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cu_.cuMemCreate(&handle, kGranule, &prop, 0), cu::CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(cu_.cuMemCreate(&handle, kGranule, &prop, 0), cu::CUDA_SUCCESS);
  EXPECT_EQ(cu_.cuMemRelease(handle), cu::CUDA_SUCCESS);
  EXPECT_EQ(fake_.calls("cuMemCreate"), 3);
  EXPECT_EQ(fake_.stats().live_physical_allocations, 0);

  fake_.FailNext("cuStreamCreate", cu::CUDA_ERROR_INVALID_VALUE, FakeCudaDriver::kAlways);
  cu::CUstream stream;
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(cu_.cuStreamCreate(&stream, 0), cu::CUDA_ERROR_INVALID_VALUE);
  fake_.FailNext("cuStreamCreate", cu::CUDA_SUCCESS, 0);
  ASSERT_EQ(cu_.cuStreamCreate(&stream, 0), cu::CUDA_SUCCESS);
  EXPECT_EQ(cu_.cuStreamDestroy(stream), cu::CUDA_SUCCESS);

  std::vector<char> buffer(4096);
  fake_.FailNext("cuMemHostRegister", cu::CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(cu_.cuMemHostRegister(buffer.data(), buffer.size(), 0), cu::CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(fake_.stats().registered_host_bytes, 0u);
}

TEST_F(FakeCudaDriverTest, DestroyingTheContextFreesAndCountsWhatItHeld) {
  Enter();
  cu::CUstream stream;
  ASSERT_EQ(cu_.cuStreamCreate(&stream, 0), cu::CUDA_SUCCESS);
  cu::CUmodule module;
  ASSERT_EQ(cu_.cuModuleLoadData(&module, kScatterKernelPtx), cu::CUDA_SUCCESS);
  cu::CUfunction kernel;
  ASSERT_EQ(cu_.cuModuleGetFunction(&kernel, module, kScatterKernelName), cu::CUDA_SUCCESS);
  const cu::CUdeviceptr base = Reserve(2 * kGranule);
  ASSERT_EQ(MapReadWrite(base, Create()), cu::CUDA_SUCCESS);
  void* pinned;
  ASSERT_EQ(cu_.cuMemHostAlloc(&pinned, 4096, 0), cu::CUDA_SUCCESS);
  std::vector<char> buffer(4096);
  ASSERT_EQ(cu_.cuMemHostRegister(buffer.data(), buffer.size(), 0), cu::CUDA_SUCCESS);
  FakeCudaDriver::Stats held = fake_.stats();
  EXPECT_EQ(held.live_streams, 1);
  EXPECT_EQ(held.live_modules, 1);
  EXPECT_EQ(held.live_physical_allocations, 1);
  EXPECT_EQ(held.mapped_bytes, kGranule);

  ASSERT_EQ(cu_.cuDevicePrimaryCtxRelease(0), cu::CUDA_SUCCESS);
  const FakeCudaDriver::Stats after = fake_.stats();
  EXPECT_EQ(after.leaked_at_destroy, 6);
  EXPECT_EQ(after.live_contexts, 0);
  EXPECT_EQ(after.live_streams, 0);
  EXPECT_EQ(after.live_modules, 0);
  EXPECT_EQ(after.live_physical_allocations, 0);
  EXPECT_EQ(after.physical_bytes + after.mapped_bytes + after.reserved_bytes +
                after.pinned_host_bytes + after.registered_host_bytes,
            0u);
  // Whatever was made in it is gone for good.
  Enter();
  EXPECT_EQ(cu_.cuModuleUnload(module), cu::CUDA_ERROR_INVALID_HANDLE);
  cu::CUdeviceptr table = Ptr(pinned);
  unsigned count = 0;
  void* arguments[] = {&table, &count};
  EXPECT_EQ(cu_.cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, nullptr, arguments, nullptr),
            cu::CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cu_.cuStreamDestroy(stream), cu::CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cu_.cuMemHostUnregister(buffer.data()), cu::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  EXPECT_EQ(cu_.cuMemAddressFree(base, 2 * kGranule), cu::CUDA_ERROR_INVALID_VALUE);
}

// Two GPUs; the second has 4 GiB.
class FakeCudaDriverTwoGpusTest : public FakeCudaDriverTest {
 protected:
  FakeCudaDriverTwoGpusTest()
      : FakeCudaDriverTest(std::vector<FakeGpuOptions>{
            {.name = "Fake GPU A", .pci_bus_id = "0000:65:00.0"},
            {.name = "Fake GPU B", .pci_bus_id = "0000:66:00.0", .total_bytes = size_t{4} << 30},
        }) {}
};

TEST_F(FakeCudaDriverTwoGpusTest, EnumerateWithTheirNamesAndBusIds) {
  int count = 0;
  ASSERT_EQ(cu_.cuDeviceGetCount(&count), cu::CUDA_SUCCESS);
  EXPECT_EQ(count, 2);
  cu::CUdevice device = -1;
  EXPECT_EQ(cu_.cuDeviceGet(&device, 2), cu::CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cu_.cuDeviceGet(&device, -1), cu::CUDA_ERROR_INVALID_DEVICE);
  const char* const names[] = {"Fake GPU A", "Fake GPU B"};
  const char* const bus_ids[] = {"0000:65:00.0", "0000:66:00.0"};
  const size_t totals[] = {size_t{8} << 30, size_t{4} << 30};
  for (int ordinal = 0; ordinal < 2; ++ordinal) {
    ASSERT_EQ(cu_.cuDeviceGet(&device, ordinal), cu::CUDA_SUCCESS);
    EXPECT_EQ(device, ordinal);
    char text[64];
    ASSERT_EQ(cu_.cuDeviceGetName(text, sizeof text, device), cu::CUDA_SUCCESS);
    EXPECT_STREQ(text, names[ordinal]);
    ASSERT_EQ(cu_.cuDeviceGetPCIBusId(text, sizeof text, device), cu::CUDA_SUCCESS);
    EXPECT_STREQ(text, bus_ids[ordinal]);
    cu::CUdevice found = -1;
    ASSERT_EQ(cu_.cuDeviceGetByPCIBusId(&found, bus_ids[ordinal]), cu::CUDA_SUCCESS);
    EXPECT_EQ(found, ordinal);
    ASSERT_EQ(cu_.cuDeviceGetByPCIBusId(&found, bus_ids[ordinal] + 5), cu::CUDA_SUCCESS);
    EXPECT_EQ(found, ordinal);
    size_t total = 0;
    ASSERT_EQ(cu_.cuDeviceTotalMem(&total, device), cu::CUDA_SUCCESS);
    EXPECT_EQ(total, totals[ordinal]);
    int value = 0;
    ASSERT_EQ(cu_.cuDeviceGetAttribute(
                  &value, cu::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device),
              cu::CUDA_SUCCESS);
    EXPECT_EQ(value, 1);
    const cu::CUmemAllocationProp prop = DeviceProp(ordinal);
    size_t granule = 0;
    EXPECT_EQ(
        cu_.cuMemGetAllocationGranularity(&granule, &prop, cu::CU_MEM_ALLOC_GRANULARITY_MINIMUM),
        cu::CUDA_SUCCESS);
  }
  cu::CUdevice found = -1;
  EXPECT_EQ(cu_.cuDeviceGetByPCIBusId(&found, "0000:67:00.0"), cu::CUDA_ERROR_INVALID_DEVICE);
  char text[64];
  EXPECT_EQ(cu_.cuDeviceGetName(text, sizeof text, 2), cu::CUDA_ERROR_INVALID_DEVICE);
  size_t total = 0;
  EXPECT_EQ(cu_.cuDeviceTotalMem(&total, 2), cu::CUDA_ERROR_INVALID_DEVICE);
  int value = 0;
  EXPECT_EQ(cu_.cuDeviceGetAttribute(&value, cu::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 2),
            cu::CUDA_ERROR_INVALID_DEVICE);
  const cu::CUmemAllocationProp prop = DeviceProp(2);
  size_t granule = 0;
  EXPECT_EQ(
      cu_.cuMemGetAllocationGranularity(&granule, &prop, cu::CU_MEM_ALLOC_GRANULARITY_MINIMUM),
      cu::CUDA_ERROR_INVALID_DEVICE);
  cu::CUcontext context = nullptr;
  EXPECT_EQ(cu_.cuDevicePrimaryCtxRetain(&context, 2), cu::CUDA_ERROR_INVALID_DEVICE);
}

TEST_F(FakeCudaDriverTwoGpusTest, EachDeviceHasItsOwnPrimaryContext) {
  const cu::CUcontext first = Enter(0);
  const cu::CUcontext second = Enter(1);
  EXPECT_NE(first, second);
  cu::CUcontext again = nullptr;
  ASSERT_EQ(cu_.cuDevicePrimaryCtxRetain(&again, 1), cu::CUDA_SUCCESS);
  EXPECT_EQ(again, second);
  EXPECT_EQ(fake_.stats().live_contexts, 2);
  EXPECT_EQ(fake_.stats(1).contexts_created, 1);

  // Device 1's context holds memory with data and a stream.
  const cu::CUdeviceptr base = Reserve(kGranule);
  ASSERT_EQ(MapReadWrite(base, Create(kGranule, 1), 0, 1), cu::CUDA_SUCCESS);
  const std::string data(4096, 'b');
  cu::CUstream stream;
  ASSERT_EQ(cu_.cuStreamCreate(&stream, 0), cu::CUDA_SUCCESS);
  ASSERT_EQ(cu_.cuMemcpyAsync(base, Ptr(data.data()), data.size(), stream), cu::CUDA_SUCCESS);
  // Device 0's context, a stream.
  ASSERT_EQ(cu_.cuCtxSetCurrent(first), cu::CUDA_SUCCESS);
  cu::CUstream other;
  ASSERT_EQ(cu_.cuStreamCreate(&other, 0), cu::CUDA_SUCCESS);
  EXPECT_EQ(cu_.cuStreamSynchronize(stream), cu::CUDA_ERROR_INVALID_HANDLE);  // device 1's
  EXPECT_EQ(fake_.stats(0).live_streams, 1);
  EXPECT_EQ(fake_.stats().live_streams, 2);

  // Destroying device 0's frees only its own.
  ASSERT_EQ(cu_.cuDevicePrimaryCtxRelease(0), cu::CUDA_SUCCESS);
  EXPECT_EQ(fake_.stats(0).live_contexts, 0);
  EXPECT_EQ(fake_.stats(0).leaked_at_destroy, 1);
  EXPECT_EQ(fake_.stats(1).leaked_at_destroy, 0);
  EXPECT_EQ(fake_.stats(1).live_contexts, 1);
  EXPECT_EQ(fake_.stats(1).live_streams, 1);
  EXPECT_EQ(fake_.stats(1).physical_bytes, kGranule);
  EXPECT_EQ(fake_.stats(1).mapped_bytes, kGranule);
  size_t free = 0, total = 0;
  EXPECT_EQ(cu_.cuMemGetInfo(&free, &total), cu::CUDA_ERROR_CONTEXT_IS_DESTROYED);
  ASSERT_EQ(cu_.cuCtxSetCurrent(second), cu::CUDA_SUCCESS);
  std::string back(data.size(), '\0');
  ASSERT_EQ(cu_.cuMemcpyAsync(Ptr(back.data()), base, back.size(), stream), cu::CUDA_SUCCESS);
  EXPECT_EQ(back, data);

  // Two references: the first release leaves it.
  ASSERT_EQ(cu_.cuDevicePrimaryCtxRelease(1), cu::CUDA_SUCCESS);
  EXPECT_EQ(fake_.stats(1).live_contexts, 1);
  ASSERT_EQ(cu_.cuDevicePrimaryCtxRelease(1), cu::CUDA_SUCCESS);
  EXPECT_EQ(fake_.stats(1).leaked_at_destroy, 3);  // stream, allocation, reservation
  EXPECT_EQ(fake_.stats().live_contexts, 0);
  EXPECT_EQ(fake_.stats().leaked_at_destroy, 4);
  EXPECT_EQ(fake_.stats().physical_bytes + fake_.stats().reserved_bytes, 0u);
}

TEST_F(FakeCudaDriverTwoGpusTest, CreateCountsAgainstItsDevicesLimitOnly) {
  fake_.set_vram_limit(1, 2 * kGranule);
  Enter(1);
  const cu::CUmemAllocationProp on_second = DeviceProp(1);
  const cu::CUmemGenericAllocationHandle second[] = {Create(kGranule, 1), Create(kGranule, 1)};
  cu::CUmemGenericAllocationHandle more = 0;
  EXPECT_EQ(cu_.cuMemCreate(&more, kGranule, &on_second, 0), cu::CUDA_ERROR_OUT_OF_MEMORY);
  // Device 0 still has room, even made from device 1's context.
  const cu::CUmemGenericAllocationHandle first[] = {Create(kGranule, 0), Create(4 * kGranule, 0)};
  const cu::CUmemAllocationProp nowhere = DeviceProp(2);
  EXPECT_EQ(cu_.cuMemCreate(&more, kGranule, &nowhere, 0), cu::CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(fake_.stats(0).physical_bytes, 5 * kGranule);
  EXPECT_EQ(fake_.stats(0).largest_create, 4 * kGranule);
  EXPECT_EQ(fake_.stats(1).physical_bytes, 2 * kGranule);
  EXPECT_EQ(fake_.stats(1).largest_create, kGranule);
  EXPECT_EQ(fake_.stats().physical_bytes, 7 * kGranule);
  EXPECT_EQ(fake_.stats().live_physical_allocations, 4);

  fake_.set_vram_limit(1, 4 * kGranule);
  const cu::CUmemGenericAllocationHandle third = Create(kGranule, 1);
  // Another program takes the rest.
  fake_.set_used_by_others(1, kGranule);
  EXPECT_EQ(cu_.cuMemCreate(&more, kGranule, &on_second, 0), cu::CUDA_ERROR_OUT_OF_MEMORY);
  fake_.set_used_by_others(1, 0);
  const cu::CUmemGenericAllocationHandle fourth = Create(kGranule, 1);
  for (auto handle : {second[0], second[1], first[0], first[1], third, fourth}) {
    EXPECT_EQ(cu_.cuMemRelease(handle), cu::CUDA_SUCCESS);
  }
  EXPECT_EQ(fake_.stats().live_physical_allocations, 0);
}

TEST_F(FakeCudaDriverTwoGpusTest, MemGetInfoIsPerDevice) {
  const cu::CUcontext first = Enter(0);
  const cu::CUcontext second = Enter(1);
  const cu::CUmemGenericAllocationHandle handle = Create(kGranule, 1);
  size_t free = 0, total = 0;
  ASSERT_EQ(cu_.cuMemGetInfo(&free, &total), cu::CUDA_SUCCESS);
  EXPECT_EQ(total, size_t{4} << 30);
  EXPECT_EQ(free, (size_t{4} << 30) - kGranule);
  fake_.set_used_by_others(1, size_t{1} << 30);
  ASSERT_EQ(cu_.cuMemGetInfo(&free, &total), cu::CUDA_SUCCESS);
  EXPECT_EQ(free, (size_t{3} << 30) - kGranule);
  // Never below 0.
  fake_.set_vram_limit(1, size_t{1} << 30);
  ASSERT_EQ(cu_.cuMemGetInfo(&free, &total), cu::CUDA_SUCCESS);
  EXPECT_EQ(free, 0u);
  EXPECT_EQ(total, size_t{4} << 30);

  ASSERT_EQ(cu_.cuCtxSetCurrent(first), cu::CUDA_SUCCESS);
  ASSERT_EQ(cu_.cuMemGetInfo(&free, &total), cu::CUDA_SUCCESS);
  EXPECT_EQ(total, size_t{8} << 30);
  EXPECT_EQ(free, total);
  fake_.set_used_by_others(0, size_t{3} << 30);
  fake_.set_vram_limit(0, size_t{7} << 30);
  ASSERT_EQ(cu_.cuMemGetInfo(&free, &total), cu::CUDA_SUCCESS);
  EXPECT_EQ(free, size_t{4} << 30);
  EXPECT_EQ(total, size_t{8} << 30);
  ASSERT_EQ(cu_.cuCtxSetCurrent(second), cu::CUDA_SUCCESS);
  EXPECT_EQ(cu_.cuMemRelease(handle), cu::CUDA_SUCCESS);
}

TEST_F(FakeCudaDriverTwoGpusTest, FailuresOnOneDeviceLeaveTheOtherWorking) {
  const cu::CUcontext first = Enter(0);
  const cu::CUcontext second = Enter(1);
  // Named by location, whichever context is current.
  fake_.FailNext("cuMemCreate", cu::CUDA_ERROR_OUT_OF_MEMORY, FakeCudaDriver::kAlways, 1);
  const cu::CUmemAllocationProp on_second = DeviceProp(1);
  cu::CUmemGenericAllocationHandle handle = 0;
  EXPECT_EQ(cu_.cuMemCreate(&handle, kGranule, &on_second, 0), cu::CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cu_.cuMemRelease(Create(kGranule, 0)), cu::CUDA_SUCCESS);
  ASSERT_EQ(cu_.cuCtxSetCurrent(first), cu::CUDA_SUCCESS);
  EXPECT_EQ(cu_.cuMemCreate(&handle, kGranule, &on_second, 0), cu::CUDA_ERROR_OUT_OF_MEMORY);
  fake_.FailNext("cuMemCreate", cu::CUDA_SUCCESS, 0, 1);
  EXPECT_EQ(cu_.cuMemRelease(Create(kGranule, 1)), cu::CUDA_SUCCESS);

  // Named by ordinal.
  fake_.FailNext("cuDeviceTotalMem", cu::CUDA_ERROR_UNKNOWN, 1, 1);
  size_t total = 0;
  EXPECT_EQ(cu_.cuDeviceTotalMem(&total, 0), cu::CUDA_SUCCESS);
  EXPECT_EQ(cu_.cuDeviceTotalMem(&total, 1), cu::CUDA_ERROR_UNKNOWN);
  EXPECT_EQ(cu_.cuDeviceTotalMem(&total, 1), cu::CUDA_SUCCESS);
  EXPECT_EQ(fake_.calls("cuDeviceTotalMem"), 3);

  // By the current context; a sticky error makes that context unusable.
  fake_.FailNext("cuStreamCreate", cu::CUDA_ERROR_ILLEGAL_ADDRESS, 1, 1);
  cu::CUstream stream;
  ASSERT_EQ(cu_.cuStreamCreate(&stream, 0), cu::CUDA_SUCCESS);  // device 0's
  ASSERT_EQ(cu_.cuCtxSetCurrent(second), cu::CUDA_SUCCESS);
  cu::CUstream lost;
  EXPECT_EQ(cu_.cuStreamCreate(&lost, 0), cu::CUDA_ERROR_ILLEGAL_ADDRESS);
  size_t free = 0;
  EXPECT_EQ(cu_.cuMemGetInfo(&free, &total), cu::CUDA_ERROR_ILLEGAL_ADDRESS);
  ASSERT_EQ(cu_.cuCtxSetCurrent(first), cu::CUDA_SUCCESS);
  EXPECT_EQ(cu_.cuMemGetInfo(&free, &total), cu::CUDA_SUCCESS);
  EXPECT_EQ(cu_.cuStreamDestroy(stream), cu::CUDA_SUCCESS);
  // Only a new context recovers.
  ASSERT_EQ(cu_.cuDevicePrimaryCtxRelease(1), cu::CUDA_SUCCESS);
  Enter(1);
  EXPECT_EQ(cu_.cuMemGetInfo(&free, &total), cu::CUDA_SUCCESS);

  // The three-argument form still fails calls on any device.
  fake_.FailNext("cuDeviceGetName", cu::CUDA_ERROR_UNKNOWN, 2);
  char name[64];
  EXPECT_EQ(cu_.cuDeviceGetName(name, sizeof name, 0), cu::CUDA_ERROR_UNKNOWN);
  EXPECT_EQ(cu_.cuDeviceGetName(name, sizeof name, 1), cu::CUDA_ERROR_UNKNOWN);
  EXPECT_EQ(cu_.cuDeviceGetName(name, sizeof name, 1), cu::CUDA_SUCCESS);
}

// Memory of device 1, in a reservation of device 0's context, copied under
// device 0's context once device 0 may access it.
TEST_F(FakeCudaDriverTwoGpusTest, PeerMemoryCopiesUnderTheOtherContext) {
  const cu::CUcontext first = Enter(0);
  const cu::CUdeviceptr base = Reserve(2 * kGranule);
  cu::CUstream stream;
  ASSERT_EQ(cu_.cuStreamCreate(&stream, cu::CU_STREAM_NON_BLOCKING), cu::CUDA_SUCCESS);
  const cu::CUcontext second = Enter(1);
  const cu::CUmemGenericAllocationHandle handle = Create(kGranule, 1);
  ASSERT_EQ(cu_.cuMemMap(base, kGranule, 0, handle, 0), cu::CUDA_SUCCESS);
  cu::CUmemAccessDesc access[2] = {};
  for (int device = 0; device < 2; ++device) {
    access[device].location = DeviceProp(device).location;
    access[device].flags = cu::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  }
  access[1].location.id = 2;
  EXPECT_EQ(cu_.cuMemSetAccess(base, kGranule, access, 2), cu::CUDA_ERROR_INVALID_DEVICE);
  access[1].location.id = 1;
  ASSERT_EQ(cu_.cuMemSetAccess(base, kGranule, access, 2), cu::CUDA_SUCCESS);
  EXPECT_EQ(fake_.stats(1).mapped_bytes, kGranule);
  EXPECT_EQ(fake_.stats(0).mapped_bytes, 0u);
  EXPECT_EQ(fake_.stats(0).reserved_bytes, 2 * kGranule);

  ASSERT_EQ(cu_.cuCtxSetCurrent(first), cu::CUDA_SUCCESS);
  const std::string data(8192, 'p');
  ASSERT_EQ(cu_.cuMemcpyAsync(base + 100, Ptr(data.data()), data.size(), stream), cu::CUDA_SUCCESS);
  std::string back(data.size(), '\0');
  ASSERT_EQ(cu_.cuMemcpyAsync(Ptr(back.data()), base + 100, back.size(), stream), cu::CUDA_SUCCESS);
  EXPECT_EQ(back, data);
  ASSERT_EQ(cu_.cuCtxSetCurrent(second), cu::CUDA_SUCCESS);
  back.assign(data.size(), '\0');
  ASSERT_EQ(cu_.cuMemcpyAsync(Ptr(back.data()), base + 100, back.size(), nullptr),
            cu::CUDA_SUCCESS);
  EXPECT_EQ(back, data);

  // Access taken back from device 0: its copies fault, device 1's go on.
  ASSERT_EQ(SetAccess(base, 0, cu::CU_MEM_ACCESS_FLAGS_PROT_NONE), cu::CUDA_SUCCESS);
  ASSERT_EQ(cu_.cuCtxSetCurrent(first), cu::CUDA_SUCCESS);
  EXPECT_EQ(cu_.cuMemcpyAsync(Ptr(back.data()), base, 1, stream), cu::CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(cu_.cuStreamSynchronize(stream), cu::CUDA_ERROR_ILLEGAL_ADDRESS);
  ASSERT_EQ(cu_.cuCtxSetCurrent(second), cu::CUDA_SUCCESS);
  EXPECT_EQ(cu_.cuMemcpyAsync(Ptr(back.data()), base, 1, nullptr), cu::CUDA_SUCCESS);

  // Device 1's context goes with its memory: device 0's reservation stays,
  // bare.
  ASSERT_EQ(cu_.cuDevicePrimaryCtxRelease(1), cu::CUDA_SUCCESS);
  EXPECT_EQ(fake_.stats(1).leaked_at_destroy, 1);  // the allocation
  EXPECT_EQ(fake_.stats().mapped_bytes, 0u);
  EXPECT_EQ(fake_.stats(0).reserved_bytes, 2 * kGranule);
  EXPECT_EQ(cu_.cuMemUnmap(base, kGranule), cu::CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu_.cuMemAddressFree(base, 2 * kGranule), cu::CUDA_SUCCESS);
  ASSERT_EQ(cu_.cuDevicePrimaryCtxRelease(0), cu::CUDA_SUCCESS);
  EXPECT_EQ(fake_.stats(0).leaked_at_destroy, 1);  // the stream
}

// Copies count as staged where the copying context does not hold the host
// memory pinned: pageable, or registered without PORTABLE by another
// context. A registration goes with the context that made it.
TEST_F(FakeCudaDriverTwoGpusTest, CopiesFromHostMemoryNotPinnedForTheirContextAreCounted) {
  const cu::CUcontext second = Enter(1);
  const cu::CUdeviceptr base = Reserve(kGranule);
  ASSERT_EQ(MapReadWrite(base, Create(kGranule, 1), 0, 1), cu::CUDA_SUCCESS);
  ASSERT_EQ(SetAccess(base, 0, cu::CU_MEM_ACCESS_FLAGS_PROT_READWRITE), cu::CUDA_SUCCESS);
  Enter(0);
  std::vector<char> portable(8192), own(8192), pageable(8192);
  ASSERT_EQ(
      cu_.cuMemHostRegister(portable.data(), portable.size(), cu::CU_MEMHOSTREGISTER_PORTABLE),
      cu::CUDA_SUCCESS);
  ASSERT_EQ(cu_.cuMemHostRegister(own.data(), own.size(), 0), cu::CUDA_SUCCESS);
  for (const std::vector<char>* host : {&portable, &own, &pageable}) {
    ASSERT_EQ(cu_.cuMemcpyAsync(base, Ptr(host->data()), host->size(), nullptr), cu::CUDA_SUCCESS);
  }
  EXPECT_EQ(fake_.stats(0).pageable_host_copies, 1);
  ASSERT_EQ(cu_.cuCtxSetCurrent(second), cu::CUDA_SUCCESS);
  for (const std::vector<char>* host : {&portable, &own, &pageable}) {
    ASSERT_EQ(cu_.cuMemcpyAsync(Ptr(host->data()), base, host->size(), nullptr), cu::CUDA_SUCCESS);
  }
  EXPECT_EQ(fake_.stats(1).pageable_host_copies, 2) << "device 0's own, and the pageable";

  ASSERT_EQ(cu_.cuDevicePrimaryCtxRelease(0), cu::CUDA_SUCCESS);
  ASSERT_EQ(cu_.cuMemcpyAsync(base, Ptr(portable.data()), portable.size(), nullptr),
            cu::CUDA_SUCCESS);
  EXPECT_EQ(fake_.stats(1).pageable_host_copies, 3);
  ASSERT_EQ(cu_.cuDevicePrimaryCtxRelease(1), cu::CUDA_SUCCESS);
}

// An entry point of fake_cuda_program_api.h, as a program finds it.
template <typename Function>
Function ProgramEntryPoint(const char* name, int version) {
  void* function = nullptr;
  cu::CUdriverProcAddressQueryResult found = cu::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  EXPECT_EQ(FakeCudaDriver::get_proc_address()(name, &function, version,
                                               cu::CU_GET_PROC_ADDRESS_DEFAULT, &found),
            cu::CUDA_SUCCESS);
  EXPECT_EQ(found, cu::CU_GET_PROC_ADDRESS_SUCCESS) << name;
  return reinterpret_cast<Function>(function);
}
#define CUDAFS_PROGRAM_ENTRY_POINT(name) ProgramEntryPoint<cu::name##_t>(#name, cu::name##_version)

TEST_F(SmallFakeCudaDriverTest, ProgramAllocationsCountAgainstTheDevice) {
  const auto mem_alloc = CUDAFS_PROGRAM_ENTRY_POINT(cuMemAlloc);
  const auto mem_free = CUDAFS_PROGRAM_ENTRY_POINT(cuMemFree);
  const auto alloc_pitch = CUDAFS_PROGRAM_ENTRY_POINT(cuMemAllocPitch);
  const auto alloc_managed = CUDAFS_PROGRAM_ENTRY_POINT(cuMemAllocManaged);
  const auto alloc_async = CUDAFS_PROGRAM_ENTRY_POINT(cuMemAllocAsync);
  const auto free_async = CUDAFS_PROGRAM_ENTRY_POINT(cuMemFreeAsync);
  const auto alloc_from_pool = CUDAFS_PROGRAM_ENTRY_POINT(cuMemAllocFromPoolAsync);
  const auto default_pool = CUDAFS_PROGRAM_ENTRY_POINT(cuDeviceGetDefaultMemPool);
  const auto get_device =
      ProgramEntryPoint<cu::cuCtxGetDevice_t>("cuCtxGetDevice", cu::cuCtxGetDevice_version);
  const auto get_current =
      ProgramEntryPoint<cu::cuCtxGetCurrent_t>("cuCtxGetCurrent", cu::cuCtxGetCurrent_version);
  const auto synchronize = CUDAFS_PROGRAM_ENTRY_POINT(cuCtxSynchronize);

  cu::CUdeviceptr pointer = 0;
  EXPECT_EQ(mem_alloc(&pointer, kGranule), cu::CUDA_ERROR_INVALID_CONTEXT);
  cu::CUcontext current = reinterpret_cast<cu::CUcontext>(1);
  ASSERT_EQ(get_current(&current), cu::CUDA_SUCCESS);
  EXPECT_EQ(current, nullptr);
  const cu::CUcontext context = Enter();
  ASSERT_EQ(get_current(&current), cu::CUDA_SUCCESS);
  EXPECT_EQ(current, context);
  cu::CUdevice device = -1;
  ASSERT_EQ(get_device(&device), cu::CUDA_SUCCESS);
  EXPECT_EQ(device, 0);
  EXPECT_EQ(synchronize(), cu::CUDA_SUCCESS);

  ASSERT_EQ(mem_alloc(&pointer, kGranule), cu::CUDA_SUCCESS);
  cu::CUdeviceptr managed = 0;
  EXPECT_EQ(alloc_managed(&managed, kGranule, 0), cu::CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(alloc_managed(&managed, kGranule, cu::CU_MEM_ATTACH_GLOBAL), cu::CUDA_SUCCESS);
  cu::CUdeviceptr pitched = 0;
  size_t pitch = 0;
  EXPECT_EQ(alloc_pitch(&pitched, &pitch, 1000, 100, 3), cu::CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(alloc_pitch(&pitched, &pitch, 1000, 100, 4), cu::CUDA_SUCCESS);
  EXPECT_EQ(pitch, 1024u);
  EXPECT_EQ(fake_.stats().live_linear_allocations, 3);
  EXPECT_EQ(fake_.stats().linear_bytes, 2 * kGranule + 1024 * 100);
  // All of it is memory, and device memory for copies and kernels.
  cu::CUstream stream = nullptr;
  ASSERT_EQ(cu_.cuStreamCreate(&stream, 0), cu::CUDA_SUCCESS);
  ASSERT_EQ(cu_.cuMemsetD8Async(pointer, 7, kGranule, stream), cu::CUDA_SUCCESS);
  ASSERT_EQ(cu_.cuMemcpyAsync(managed, pointer, kGranule, stream), cu::CUDA_SUCCESS);
  EXPECT_EQ(reinterpret_cast<const char*>(managed)[kGranule - 1], 7);

  // The device's limit counts them with cuMemCreate's memory.
  size_t free = 0, total = 0;
  ASSERT_EQ(cu_.cuMemGetInfo(&free, &total), cu::CUDA_SUCCESS);
  EXPECT_EQ(free, kGranule - 1024 * 100);
  cu::CUdeviceptr more = 0;
  EXPECT_EQ(alloc_async(&more, kGranule, stream), cu::CUDA_ERROR_OUT_OF_MEMORY);
  const cu::CUmemAllocationProp prop = DeviceProp();
  cu::CUmemGenericAllocationHandle handle = 0;
  EXPECT_EQ(cu_.cuMemCreate(&handle, kGranule, &prop, 0), cu::CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(mem_free(pointer + 1), cu::CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(mem_free(pointer), cu::CUDA_SUCCESS);
  EXPECT_EQ(mem_free(pointer), cu::CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(alloc_async(&more, kGranule / 2, stream), cu::CUDA_SUCCESS);
  ASSERT_EQ(free_async(more, stream), cu::CUDA_SUCCESS);

  cu::CUmemoryPool pool = nullptr;
  EXPECT_EQ(default_pool(&pool, 1), cu::CUDA_ERROR_INVALID_DEVICE);
  ASSERT_EQ(default_pool(&pool, 0), cu::CUDA_SUCCESS);
  EXPECT_EQ(alloc_from_pool(&more, kGranule, reinterpret_cast<cu::CUmemoryPool>(8), stream),
            cu::CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(alloc_from_pool(&more, kGranule, pool, stream), cu::CUDA_SUCCESS);
  EXPECT_EQ(alloc_from_pool(&more, kGranule, pool, stream), cu::CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(cu_.cuStreamDestroy(stream), cu::CUDA_SUCCESS);

  // What is left goes with the context: the managed, pitched and pooled.
  ASSERT_EQ(cu_.cuDevicePrimaryCtxRelease(0), cu::CUDA_SUCCESS);
  EXPECT_EQ(fake_.stats().leaked_at_destroy, 3);
  EXPECT_EQ(fake_.stats().linear_bytes, 0u);
}

// Memory another process takes through the same state is not free here.
TEST_F(SmallFakeCudaDriverTest, SharedMemoryCountsOtherProcesses) {
  cudafs_test::TempDir dir;
  const std::string state = dir.path() + "/state";
  absl::StatusOr<std::unique_ptr<FakeCudaSharedBudget>> budget =
      FakeCudaSharedBudget::Open(state, {uint64_t{8} << 30});
  ASSERT_TRUE(budget.ok()) << budget.status();
  fake_.ShareMemory(*std::move(budget));
  Enter();
  const cu::CUmemGenericAllocationHandle mine = Create();
  int to_child[2], from_child[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(from_child), 0);
  const pid_t child = fork();
  if (child == 0) {
    absl::StatusOr<std::unique_ptr<FakeCudaSharedBudget>> theirs =
        FakeCudaSharedBudget::Open(state, {uint64_t{8} << 30});
    // This process's granule is in use: one of the limit's three is left.
    const bool ok = theirs.ok() && (*theirs)->Used(0) == kGranule &&
                    !(*theirs)->Take(0, 3 * kGranule, 3 * kGranule) &&
                    (*theirs)->Take(0, kGranule, 3 * kGranule);
    char byte = ok ? 'y' : 'n';
    if (write(from_child[1], &byte, 1) != 1 || read(to_child[0], &byte, 1) != 1) _exit(1);
    _exit(0);  // holding it: gone with the process
  }
  char answer = 0;
  ASSERT_EQ(read(from_child[0], &answer, 1), 1);
  EXPECT_EQ(answer, 'y');
  size_t free = 0, total = 0;
  ASSERT_EQ(cu_.cuMemGetInfo(&free, &total), cu::CUDA_SUCCESS);
  EXPECT_EQ(free, kGranule);
  const cu::CUmemGenericAllocationHandle last = Create();
  cu::CUmemGenericAllocationHandle more = 0;
  const cu::CUmemAllocationProp prop = DeviceProp();
  EXPECT_EQ(cu_.cuMemCreate(&more, kGranule, &prop, 0), cu::CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(write(to_child[1], "g", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(status, 0);
  more = Create();
  for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) close(fd);
  for (auto handle : {mine, last, more}) EXPECT_EQ(cu_.cuMemRelease(handle), cu::CUDA_SUCCESS);
  ASSERT_EQ(cu_.cuMemGetInfo(&free, &total), cu::CUDA_SUCCESS);
  EXPECT_EQ(free, 3 * kGranule);
}

}  // namespace
}  // namespace cudafs
