// cudafs::cu: the part of the CUDA Driver API that cudafs uses, declared by
// the project itself, so that the CUDA device is built everywhere, with or
// without the CUDA toolkit. Written from NVIDIA's Driver API reference;
// where the toolkit is installed, tests/alloc/devices/cuda_api_abi_test.cc
// checks every declaration here against its cuda.h and cudaTypedefs.h.
//
// Declarations, and the one look-up the daemon and the client library
// share (ProcAddress): cudafs never links libcuda but resolves each entry
// point with cuGetProcAddress. `<name>_t` is the entry point's pointer type,
// the ABI it has had since the CUDA version `<name>_version`, which is what
// cudafs asks cuGetProcAddress for: a newer driver hands back that same ABI;
// a driver older than that version is not asked.
//
// Drivers supported: CUDA 12.0 (NVIDIA driver 525) and newer. 12.0 brought
// cuGetProcAddress_v2, which tells a missing entry point from a failed
// look-up; every required entry point below is older. cuMemcpyBatchAsync is
// optional, used in its CUDA 13.0 form on drivers of 13.0 and newer.
//
// Header-only and dependency-free: the client library includes it too.
#ifndef CUDAFS_ALLOC_DEVICES_CUDA_API_H_
#define CUDAFS_ALLOC_DEVICES_CUDA_API_H_

#include <cstddef>
#include <cstdint>

namespace cudafs::cu {

// The oldest driver cudafs drives, as cuDriverGetVersion says it
// (1000 * major + 10 * minor).
inline constexpr int kOldestDriverVersion = 12000;

enum CUresult {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEINITIALIZED = 4,
  CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_ECC_UNCORRECTABLE = 214,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_LAUNCH_TIMEOUT = 702,
  CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
  CUDA_ERROR_ASSERT = 710,
  CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
  CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
  CUDA_ERROR_HARDWARE_STACK_ERROR = 714,
  CUDA_ERROR_ILLEGAL_INSTRUCTION = 715,
  CUDA_ERROR_MISALIGNED_ADDRESS = 716,
  CUDA_ERROR_INVALID_ADDRESS_SPACE = 717,
  CUDA_ERROR_INVALID_PC = 718,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_UNKNOWN = 999,
};

// Plain values: a device ordinal, a device address, a physical allocation.
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUmemGenericAllocationHandle = unsigned long long;
using cuuint64_t = uint64_t;

// Opaque handles, never dereferenced.
struct CUctx_st;
struct CUstream_st;
struct CUmod_st;
struct CUfunc_st;
using CUcontext = CUctx_st*;
using CUstream = CUstream_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;

// The streams every context has without creating them.
inline CUstream const CU_STREAM_LEGACY = reinterpret_cast<CUstream>(uintptr_t{1});
inline CUstream const CU_STREAM_PER_THREAD = reinterpret_cast<CUstream>(uintptr_t{2});

enum CUstream_flags {
  CU_STREAM_NON_BLOCKING = 1,
};

enum CUdevice_attribute {
  CU_DEVICE_ATTRIBUTE_ECC_ENABLED = 32,
  CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
  CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM = 91,
  CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
  CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 103,
};

// cuGetProcAddress's flags and what it found.
enum CUdriverProcAddress_flags {
  CU_GET_PROC_ADDRESS_DEFAULT = 0,
};
enum CUdriverProcAddressQueryResult {
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
};

// cuMemHostAlloc's and cuMemHostRegister's flags.
inline constexpr unsigned int CU_MEMHOSTALLOC_PORTABLE = 0x01;
inline constexpr unsigned int CU_MEMHOSTALLOC_DEVICEMAP = 0x02;
inline constexpr unsigned int CU_MEMHOSTALLOC_WRITECOMBINED = 0x04;
inline constexpr unsigned int CU_MEMHOSTREGISTER_PORTABLE = 0x01;

// Virtual memory management.
enum CUmemAllocationType {
  CU_MEM_ALLOCATION_TYPE_PINNED = 1,
};
enum CUmemAllocationHandleType {
  CU_MEM_HANDLE_TYPE_NONE = 0,
  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1,
};
enum CUmemLocationType {
  CU_MEM_LOCATION_TYPE_DEVICE = 1,
};
enum CUmemAccess_flags {
  CU_MEM_ACCESS_FLAGS_PROT_NONE = 0,
  CU_MEM_ACCESS_FLAGS_PROT_READ = 1,
  CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3,
};
enum CUmemAllocationGranularity_flags {
  CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0,
  CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1,
};

struct CUmemLocation {
  CUmemLocationType type;
  int id;  // the device ordinal, for CU_MEM_LOCATION_TYPE_DEVICE
};

struct CUmemAllocationProp {
  CUmemAllocationType type;
  CUmemAllocationHandleType requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData;  // Windows only: null here
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};

struct CUmemAccessDesc {
  CUmemLocation location;
  CUmemAccess_flags flags;
};

// cuMemcpyBatchAsync's attributes of a group of copies.
enum CUmemcpySrcAccessOrder {
  CU_MEMCPY_SRC_ACCESS_ORDER_INVALID = 0,
  CU_MEMCPY_SRC_ACCESS_ORDER_STREAM = 1,
};
struct CUmemcpyAttributes {
  CUmemcpySrcAccessOrder srcAccessOrder;
  CUmemLocation srcLocHint;
  CUmemLocation dstLocHint;
  unsigned int flags;
};

// The entry points, grouped as the reference groups them.
using cuInit_t = CUresult (*)(unsigned int flags);
using cuDriverGetVersion_t = CUresult (*)(int* version);
using cuGetProcAddress_t = CUresult (*)(const char* symbol, void** function, int cuda_version,
                                        cuuint64_t flags,
                                        CUdriverProcAddressQueryResult* symbol_status);
using cuGetErrorName_t = CUresult (*)(CUresult error, const char** name);
using cuGetErrorString_t = CUresult (*)(CUresult error, const char** text);

using cuDeviceGetCount_t = CUresult (*)(int* count);
using cuDeviceGet_t = CUresult (*)(CUdevice* device, int ordinal);
using cuDeviceGetName_t = CUresult (*)(char* name, int length, CUdevice device);
using cuDeviceGetPCIBusId_t = CUresult (*)(char* bus_id, int length, CUdevice device);
using cuDeviceGetByPCIBusId_t = CUresult (*)(CUdevice* device, const char* bus_id);
using cuDeviceTotalMem_t = CUresult (*)(size_t* bytes, CUdevice device);
using cuDeviceGetAttribute_t = CUresult (*)(int* value, CUdevice_attribute attribute,
                                            CUdevice device);
using cuDeviceCanAccessPeer_t = CUresult (*)(int* can_access, CUdevice device, CUdevice peer);

using cuDevicePrimaryCtxRetain_t = CUresult (*)(CUcontext* context, CUdevice device);
using cuDevicePrimaryCtxRelease_t = CUresult (*)(CUdevice device);
using cuCtxSetCurrent_t = CUresult (*)(CUcontext context);
using cuCtxGetCurrent_t = CUresult (*)(CUcontext* context);
using cuCtxGetDevice_t = CUresult (*)(CUdevice* device);

using cuMemGetInfo_t = CUresult (*)(size_t* free, size_t* total);
using cuMemGetAllocationGranularity_t = CUresult (*)(size_t* granularity,
                                                     const CUmemAllocationProp* prop,
                                                     CUmemAllocationGranularity_flags option);
using cuMemAddressReserve_t = CUresult (*)(CUdeviceptr* address, size_t size, size_t alignment,
                                           CUdeviceptr wanted, unsigned long long flags);
using cuMemAddressFree_t = CUresult (*)(CUdeviceptr address, size_t size);
using cuMemCreate_t = CUresult (*)(CUmemGenericAllocationHandle* handle, size_t size,
                                   const CUmemAllocationProp* prop, unsigned long long flags);
using cuMemRelease_t = CUresult (*)(CUmemGenericAllocationHandle handle);
using cuMemMap_t = CUresult (*)(CUdeviceptr address, size_t size, size_t offset,
                                CUmemGenericAllocationHandle handle, unsigned long long flags);
using cuMemUnmap_t = CUresult (*)(CUdeviceptr address, size_t size);
using cuMemSetAccess_t = CUresult (*)(CUdeviceptr address, size_t size,
                                      const CUmemAccessDesc* descriptors, size_t count);
using cuMemExportToShareableHandle_t = CUresult (*)(void* shareable,
                                                    CUmemGenericAllocationHandle handle,
                                                    CUmemAllocationHandleType type,
                                                    unsigned long long flags);
using cuMemImportFromShareableHandle_t = CUresult (*)(CUmemGenericAllocationHandle* handle,
                                                      void* shareable,
                                                      CUmemAllocationHandleType type);

using cuMemHostAlloc_t = CUresult (*)(void** pointer, size_t size, unsigned int flags);
using cuMemFreeHost_t = CUresult (*)(void* pointer);
using cuMemHostRegister_t = CUresult (*)(void* pointer, size_t size, unsigned int flags);
using cuMemHostUnregister_t = CUresult (*)(void* pointer);

using cuStreamCreate_t = CUresult (*)(CUstream* stream, unsigned int flags);
using cuStreamDestroy_t = CUresult (*)(CUstream stream);
using cuStreamSynchronize_t = CUresult (*)(CUstream stream);
using cuStreamQuery_t = CUresult (*)(CUstream stream);

using cuMemcpyAsync_t = CUresult (*)(CUdeviceptr destination, CUdeviceptr source, size_t size,
                                     CUstream stream);
// CUDA 13.0's form, without the index of the failed copy that 12.8's had.
using cuMemcpyBatchAsync_t = CUresult (*)(CUdeviceptr* destinations, CUdeviceptr* sources,
                                          size_t* sizes, size_t count,
                                          CUmemcpyAttributes* attributes, size_t* attribute_indices,
                                          size_t attribute_count, CUstream stream);
using cuMemsetD8Async_t = CUresult (*)(CUdeviceptr destination, unsigned char value, size_t count,
                                       CUstream stream);

using cuModuleLoadData_t = CUresult (*)(CUmodule* module, const void* image);
using cuModuleUnload_t = CUresult (*)(CUmodule module);
using cuModuleGetFunction_t = CUresult (*)(CUfunction* function, CUmodule module, const char* name);
using cuLaunchKernel_t = CUresult (*)(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                                      unsigned int grid_z, unsigned int block_x,
                                      unsigned int block_y, unsigned int block_z,
                                      unsigned int shared_bytes, CUstream stream, void** parameters,
                                      void** extra);

// X(name, version) for every entry point above: the CUDA version whose ABI
// its declaration is (the one after an older ABI changed: cuMemGetInfo's
// sizes became size_t in 3.2, cuDevicePrimaryCtxRelease changed in 11.0,
// cuMemcpyBatchAsync in 13.0). A literal, so that the ABI test can name
// cudaTypedefs.h's PFN_<name>_v<version>.
#define CUDAFS_CU_ENTRY_POINTS(X)          \
  X(cuInit, 2000)                          \
  X(cuDriverGetVersion, 2020)              \
  X(cuGetProcAddress, 12000)               \
  X(cuGetErrorName, 6000)                  \
  X(cuGetErrorString, 6000)                \
  X(cuDeviceGetCount, 2000)                \
  X(cuDeviceGet, 2000)                     \
  X(cuDeviceGetName, 2000)                 \
  X(cuDeviceGetPCIBusId, 4010)             \
  X(cuDeviceGetByPCIBusId, 4010)           \
  X(cuDeviceTotalMem, 3020)                \
  X(cuDeviceGetAttribute, 2000)            \
  X(cuDeviceCanAccessPeer, 4000)           \
  X(cuDevicePrimaryCtxRetain, 7000)        \
  X(cuDevicePrimaryCtxRelease, 11000)      \
  X(cuCtxSetCurrent, 4000)                 \
  X(cuCtxGetCurrent, 4000)                 \
  X(cuCtxGetDevice, 2000)                  \
  X(cuMemGetInfo, 3020)                    \
  X(cuMemGetAllocationGranularity, 10020)  \
  X(cuMemAddressReserve, 10020)            \
  X(cuMemAddressFree, 10020)               \
  X(cuMemCreate, 10020)                    \
  X(cuMemRelease, 10020)                   \
  X(cuMemMap, 10020)                       \
  X(cuMemUnmap, 10020)                     \
  X(cuMemSetAccess, 10020)                 \
  X(cuMemExportToShareableHandle, 10020)   \
  X(cuMemImportFromShareableHandle, 10020) \
  X(cuMemHostAlloc, 2020)                  \
  X(cuMemFreeHost, 2000)                   \
  X(cuMemHostRegister, 6050)               \
  X(cuMemHostUnregister, 4000)             \
  X(cuStreamCreate, 2000)                  \
  X(cuStreamDestroy, 4000)                 \
  X(cuStreamSynchronize, 2000)             \
  X(cuStreamQuery, 2000)                   \
  X(cuMemcpyAsync, 4000)                   \
  X(cuMemcpyBatchAsync, 13000)             \
  X(cuMemsetD8Async, 3020)                 \
  X(cuModuleLoadData, 2000)                \
  X(cuModuleUnload, 2000)                  \
  X(cuModuleGetFunction, 2000)             \
  X(cuLaunchKernel, 4000)

#define CUDAFS_CU_DECLARE_VERSION(name, version) inline constexpr int name##_version = version;
CUDAFS_CU_ENTRY_POINTS(CUDAFS_CU_DECLARE_VERSION)
#undef CUDAFS_CU_DECLARE_VERSION

// Entry point `name` as declared at CUDA `version` (its `<name>_version`),
// from a driver of CUDA `driver_version`; null where the driver lacks it.
// A driver older than the declaration is not asked: it would hand back an
// older ABI under the same name (cuMemcpyBatchAsync's before 13.0), or none.
inline void* ProcAddress(cuGetProcAddress_t get_proc_address, int driver_version, const char* name,
                         int version) {
  void* symbol = nullptr;
  CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (version > driver_version ||
      get_proc_address(name, &symbol, version, CU_GET_PROC_ADDRESS_DEFAULT, &found) !=
          CUDA_SUCCESS ||
      found != CU_GET_PROC_ADDRESS_SUCCESS) {
    return nullptr;
  }
  return symbol;
}

}  // namespace cudafs::cu

#endif  // CUDAFS_ALLOC_DEVICES_CUDA_API_H_
