// libcuda.so.1's exported symbols (fake_libcuda_config.h), each forwarding
// to the fake driver's entry point of the same name, which the fake's own
// cuGetProcAddress hands out: one implementation, in and out of process.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "alloc/devices/cuda_api.h"
#include "tests/fake_libcuda/fake_libcuda_config.h"
#include "tests/support/fake_cuda_driver.h"
#include "tests/support/fake_cuda_program_api.h"
#include "tests/support/fake_cuda_shared_budget.h"

namespace cudafs {
namespace {

// cuGetProcAddress before CUDA 12.0, still exported by the driver.
using cuGetProcAddressV1_t = cu::CUresult (*)(const char* symbol, void** function, int cuda_version,
                                              cu::cuuint64_t flags);

// The process's fake, made from the environment on first use and never
// destroyed (the program may call the driver from its static destructors);
// null, with why, when the configuration is bad.
struct Loaded {
  FakeCudaDriver* fake = nullptr;
  std::string error;
};

Loaded Make() {
  Loaded loaded;
  absl::StatusOr<FakeLibcudaConfig> config = FakeLibcudaConfigFromEnvironment();
  if (!config.ok()) {
    loaded.error = std::string(config.status().message());
    return loaded;
  }
  std::unique_ptr<FakeCudaSharedBudget> budget;
  if (!config->state_path.empty()) {
    std::vector<uint64_t> totals;
    for (const FakeGpuOptions& gpu : config->gpus) totals.push_back(gpu.total_bytes);
    absl::StatusOr<std::unique_ptr<FakeCudaSharedBudget>> opened =
        FakeCudaSharedBudget::Open(config->state_path, totals);
    if (!opened.ok()) {
      loaded.error =
          std::string("CUDAFS_FAKE_CUDA_STATE: ") + std::string(opened.status().message());
      return loaded;
    }
    budget = *std::move(opened);
  }
  loaded.fake = new FakeCudaDriver(std::move(config->gpus));
  if (budget != nullptr) loaded.fake->ShareMemory(std::move(budget));
  return loaded;
}

const Loaded& Load() {
  static const Loaded* const loaded = new Loaded(Make());
  return *loaded;
}

std::atomic<bool> initialized{false};

// The fake's entry point `name`, once cuInit has succeeded; null before.
template <typename Function>
Function FakeEntryPoint(std::atomic<Function>* cached, const char* name, int version) {
  Function function = cached->load(std::memory_order_acquire);
  if (function != nullptr) return function;
  if (!initialized.load(std::memory_order_acquire)) return nullptr;
  void* found = nullptr;
  cu::CUdriverProcAddressQueryResult status = cu::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (FakeCudaDriver::get_proc_address()(name, &found, version, cu::CU_GET_PROC_ADDRESS_DEFAULT,
                                         &status) != cu::CUDA_SUCCESS ||
      status != cu::CU_GET_PROC_ADDRESS_SUCCESS) {
    std::fprintf(stderr, "fake libcuda.so.1: the fake driver has no %s\n", name);
    std::abort();
  }
  function = reinterpret_cast<Function>(found);
  cached->store(function, std::memory_order_release);
  return function;
}

}  // namespace
}  // namespace cudafs

namespace cu = cudafs::cu;

#define CUDAFS_EXPORTED extern "C" __attribute__((visibility("default")))

// X(exported symbol, entry point name, (parameters), (arguments)). Entry
// points that work before cuInit are defined apart, below.
#define CUDAFS_FAKE_LIBCUDA_EXPORTS(X)                                                             \
  X(cuDeviceGetCount, cuDeviceGetCount, (int* count), (count))                                     \
  X(cuDeviceGet, cuDeviceGet, (cu::CUdevice * device, int ordinal), (device, ordinal))             \
  X(cuDeviceGetName, cuDeviceGetName, (char* name, int length, cu::CUdevice device),               \
    (name, length, device))                                                                        \
  X(cuDeviceGetPCIBusId, cuDeviceGetPCIBusId, (char* bus_id, int length, cu::CUdevice device),     \
    (bus_id, length, device))                                                                      \
  X(cuDeviceGetByPCIBusId, cuDeviceGetByPCIBusId, (cu::CUdevice * device, const char* bus_id),     \
    (device, bus_id))                                                                              \
  X(cuDeviceTotalMem_v2, cuDeviceTotalMem, (size_t * bytes, cu::CUdevice device), (bytes, device)) \
  X(cuDeviceGetAttribute, cuDeviceGetAttribute,                                                    \
    (int* value, cu::CUdevice_attribute attribute, cu::CUdevice device),                           \
    (value, attribute, device))                                                                    \
  X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain,                                            \
    (cu::CUcontext * context, cu::CUdevice device), (context, device))                             \
  X(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease, (cu::CUdevice device), (device))      \
  X(cuDeviceCanAccessPeer, cuDeviceCanAccessPeer,                                                  \
    (int* can_access, cu::CUdevice device, cu::CUdevice peer), (can_access, device, peer))         \
  X(cuCtxSetCurrent, cuCtxSetCurrent, (cu::CUcontext context), (context))                          \
  X(cuCtxGetCurrent, cuCtxGetCurrent, (cu::CUcontext * context), (context))                        \
  X(cuCtxGetDevice, cuCtxGetDevice, (cu::CUdevice * device), (device))                             \
  X(cuCtxSynchronize, cuCtxSynchronize, (), ())                                                    \
  X(cuMemGetInfo_v2, cuMemGetInfo, (size_t * free, size_t * total), (free, total))                 \
  X(cuMemGetAllocationGranularity, cuMemGetAllocationGranularity,                                  \
    (size_t * granularity, const cu::CUmemAllocationProp* prop,                                    \
     cu::CUmemAllocationGranularity_flags option),                                                 \
    (granularity, prop, option))                                                                   \
  X(cuMemAddressReserve, cuMemAddressReserve,                                                      \
    (cu::CUdeviceptr * address, size_t size, size_t alignment, cu::CUdeviceptr wanted,             \
     unsigned long long flags),                                                                    \
    (address, size, alignment, wanted, flags))                                                     \
  X(cuMemAddressFree, cuMemAddressFree, (cu::CUdeviceptr address, size_t size), (address, size))   \
  X(cuMemCreate, cuMemCreate,                                                                      \
    (cu::CUmemGenericAllocationHandle * handle, size_t size, const cu::CUmemAllocationProp* prop,  \
     unsigned long long flags),                                                                    \
    (handle, size, prop, flags))                                                                   \
  X(cuMemRelease, cuMemRelease, (cu::CUmemGenericAllocationHandle handle), (handle))               \
  X(cuMemMap, cuMemMap,                                                                            \
    (cu::CUdeviceptr address, size_t size, size_t offset, cu::CUmemGenericAllocationHandle handle, \
     unsigned long long flags),                                                                    \
    (address, size, offset, handle, flags))                                                        \
  X(cuMemUnmap, cuMemUnmap, (cu::CUdeviceptr address, size_t size), (address, size))               \
  X(cuMemSetAccess, cuMemSetAccess,                                                                \
    (cu::CUdeviceptr address, size_t size, const cu::CUmemAccessDesc* descriptors, size_t count),  \
    (address, size, descriptors, count))                                                           \
  X(cuMemExportToShareableHandle, cuMemExportToShareableHandle,                                    \
    (void* shareable, cu::CUmemGenericAllocationHandle handle, cu::CUmemAllocationHandleType type, \
     unsigned long long flags),                                                                    \
    (shareable, handle, type, flags))                                                              \
  X(cuMemImportFromShareableHandle, cuMemImportFromShareableHandle,                                \
    (cu::CUmemGenericAllocationHandle * handle, void* shareable,                                   \
     cu::CUmemAllocationHandleType type),                                                          \
    (handle, shareable, type))                                                                     \
  X(cuMemHostAlloc, cuMemHostAlloc, (void** pointer, size_t size, unsigned int flags),             \
    (pointer, size, flags))                                                                        \
  X(cuMemFreeHost, cuMemFreeHost, (void* pointer), (pointer))                                      \
  X(cuMemHostRegister_v2, cuMemHostRegister, (void* pointer, size_t size, unsigned int flags),     \
    (pointer, size, flags))                                                                        \
  X(cuMemHostUnregister, cuMemHostUnregister, (void* pointer), (pointer))                          \
  X(cuStreamCreate, cuStreamCreate, (cu::CUstream * stream, unsigned int flags), (stream, flags))  \
  X(cuStreamDestroy_v2, cuStreamDestroy, (cu::CUstream stream), (stream))                          \
  X(cuStreamSynchronize, cuStreamSynchronize, (cu::CUstream stream), (stream))                     \
  X(cuStreamQuery, cuStreamQuery, (cu::CUstream stream), (stream))                                 \
  X(cuMemcpyAsync, cuMemcpyAsync,                                                                  \
    (cu::CUdeviceptr destination, cu::CUdeviceptr source, size_t size, cu::CUstream stream),       \
    (destination, source, size, stream))                                                           \
  X(cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync,                                                     \
    (cu::CUdeviceptr * destinations, cu::CUdeviceptr * sources, size_t * sizes, size_t count,      \
     cu::CUmemcpyAttributes * attributes, size_t * attribute_indices, size_t attribute_count,      \
     cu::CUstream stream),                                                                         \
    (destinations, sources, sizes, count, attributes, attribute_indices, attribute_count, stream)) \
  X(cuMemsetD8Async, cuMemsetD8Async,                                                              \
    (cu::CUdeviceptr destination, unsigned char value, size_t count, cu::CUstream stream),         \
    (destination, value, count, stream))                                                           \
  X(cuModuleLoadData, cuModuleLoadData, (cu::CUmodule * module, const void* image),                \
    (module, image))                                                                               \
  X(cuModuleUnload, cuModuleUnload, (cu::CUmodule module), (module))                               \
  X(cuModuleGetFunction, cuModuleGetFunction,                                                      \
    (cu::CUfunction * function, cu::CUmodule module, const char* name), (function, module, name))  \
  X(cuLaunchKernel, cuLaunchKernel,                                                                \
    (cu::CUfunction function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,       \
     unsigned int block_x, unsigned int block_y, unsigned int block_z, unsigned int shared_bytes,  \
     cu::CUstream stream, void** parameters, void** extra),                                        \
    (function, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes, stream,            \
     parameters, extra))                                                                           \
  X(cuMemAlloc_v2, cuMemAlloc, (cu::CUdeviceptr * pointer, size_t size), (pointer, size))          \
  X(cuMemFree_v2, cuMemFree, (cu::CUdeviceptr pointer), (pointer))                                 \
  X(cuMemAllocPitch_v2, cuMemAllocPitch,                                                           \
    (cu::CUdeviceptr * pointer, size_t * pitch, size_t width_bytes, size_t height,                 \
     unsigned int element_size),                                                                   \
    (pointer, pitch, width_bytes, height, element_size))                                           \
  X(cuMemAllocManaged, cuMemAllocManaged,                                                          \
    (cu::CUdeviceptr * pointer, size_t size, unsigned int flags), (pointer, size, flags))          \
  X(cuMemAllocAsync, cuMemAllocAsync,                                                              \
    (cu::CUdeviceptr * pointer, size_t size, cu::CUstream stream), (pointer, size, stream))        \
  X(cuMemFreeAsync, cuMemFreeAsync, (cu::CUdeviceptr pointer, cu::CUstream stream),                \
    (pointer, stream))                                                                             \
  X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync,                                              \
    (cu::CUdeviceptr * pointer, size_t size, cu::CUmemoryPool pool, cu::CUstream stream),          \
    (pointer, size, pool, stream))                                                                 \
  X(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool,                                          \
    (cu::CUmemoryPool * pool, cu::CUdevice device), (pool, device))

#define CUDAFS_DEFINE_EXPORT(exported, name, parameters, arguments)                       \
  CUDAFS_EXPORTED cu::CUresult exported parameters {                                      \
    static_assert(std::is_same_v<decltype(&exported), cu::name##_t>, #exported);          \
    static std::atomic<cu::name##_t> cached{nullptr};                                     \
    const cu::name##_t fake = cudafs::FakeEntryPoint(&cached, #name, cu::name##_version); \
    if (fake == nullptr) return cu::CUDA_ERROR_NOT_INITIALIZED;                           \
    return fake arguments;                                                                \
  }
CUDAFS_FAKE_LIBCUDA_EXPORTS(CUDAFS_DEFINE_EXPORT)
#undef CUDAFS_DEFINE_EXPORT

// These answer before cuInit, as the driver's do: they make the fake.
#define CUDAFS_DEFINE_EARLY_EXPORT(exported, name, parameters, arguments)        \
  CUDAFS_EXPORTED cu::CUresult exported parameters {                             \
    static_assert(std::is_same_v<decltype(&exported), cu::name##_t>, #exported); \
    if (cudafs::Load().fake == nullptr) return cu::CUDA_ERROR_NOT_INITIALIZED;   \
    return cudafs::Load().fake->driver().name arguments;                         \
  }
CUDAFS_DEFINE_EARLY_EXPORT(cuDriverGetVersion, cuDriverGetVersion, (int* version), (version))
CUDAFS_DEFINE_EARLY_EXPORT(cuGetErrorName, cuGetErrorName, (cu::CUresult error, const char** name),
                           (error, name))
CUDAFS_DEFINE_EARLY_EXPORT(cuGetErrorString, cuGetErrorString,
                           (cu::CUresult error, const char** text), (error, text))
#undef CUDAFS_DEFINE_EARLY_EXPORT

CUDAFS_EXPORTED cu::CUresult cuInit(unsigned int flags) {
  static_assert(std::is_same_v<decltype(&cuInit), cu::cuInit_t>);
  if (flags != 0) return cu::CUDA_ERROR_INVALID_VALUE;
  const cudafs::Loaded& loaded = cudafs::Load();
  if (loaded.fake == nullptr) {
    std::fprintf(stderr, "fake libcuda.so.1: %s\n", loaded.error.c_str());
    return cu::CUDA_ERROR_INVALID_VALUE;
  }
  cudafs::initialized.store(true, std::memory_order_release);
  return cu::CUDA_SUCCESS;
}

CUDAFS_EXPORTED cu::CUresult cuGetProcAddress(const char* symbol, void** function, int cuda_version,
                                              cu::cuuint64_t flags);

// The fake's cuGetProcAddress decides (and dies when asked for another ABI
// than it has); what it finds is handed out as our export of that name,
// which waits for cuInit.
CUDAFS_EXPORTED cu::CUresult cuGetProcAddress_v2(const char* symbol, void** function,
                                                 int cuda_version, cu::cuuint64_t flags,
                                                 cu::CUdriverProcAddressQueryResult* status) {
  static_assert(std::is_same_v<decltype(&cuGetProcAddress_v2), cu::cuGetProcAddress_t>);
  if (symbol == nullptr || function == nullptr) return cu::CUDA_ERROR_INVALID_VALUE;
  if (cudafs::Load().fake == nullptr) return cu::CUDA_ERROR_NOT_INITIALIZED;
  struct Export {
    const char* name;
    void* function;
  };
#define CUDAFS_EXPORT_ENTRY(exported, name, parameters, arguments) \
  Export{#name, reinterpret_cast<void*>(&exported)},
  static const Export kExports[] = {
      CUDAFS_FAKE_LIBCUDA_EXPORTS(CUDAFS_EXPORT_ENTRY)
          Export{"cuDriverGetVersion", reinterpret_cast<void*>(&cuDriverGetVersion)},
      Export{"cuGetErrorName", reinterpret_cast<void*>(&cuGetErrorName)},
      Export{"cuGetErrorString", reinterpret_cast<void*>(&cuGetErrorString)},
  };
#undef CUDAFS_EXPORT_ENTRY
  // The two the fake does not serve itself.
  const absl::string_view name = symbol;
  if (name == "cuInit" || name == "cuGetProcAddress") {
    *function = name == "cuInit" ? reinterpret_cast<void*>(&cuInit)
                : cuda_version >= cu::cuGetProcAddress_version
                    ? reinterpret_cast<void*>(&cuGetProcAddress_v2)
                    : reinterpret_cast<void*>(&cuGetProcAddress);
    if (status != nullptr) *status = cu::CU_GET_PROC_ADDRESS_SUCCESS;
    return cu::CUDA_SUCCESS;
  }
  const cu::CUresult result =
      cudafs::FakeCudaDriver::get_proc_address()(symbol, function, cuda_version, flags, status);
  if (result != cu::CUDA_SUCCESS || *function == nullptr) return result;
  for (const Export& entry : kExports) {
    if (name == entry.name) {
      *function = entry.function;
      return cu::CUDA_SUCCESS;
    }
  }
  std::fprintf(stderr, "fake libcuda.so.1: %s is served but not exported\n", symbol);
  std::abort();
}

CUDAFS_EXPORTED cu::CUresult cuGetProcAddress(const char* symbol, void** function, int cuda_version,
                                              cu::cuuint64_t flags) {
  static_assert(std::is_same_v<decltype(&cuGetProcAddress), cudafs::cuGetProcAddressV1_t>);
  return cuGetProcAddress_v2(symbol, function, cuda_version, flags, nullptr);
}
