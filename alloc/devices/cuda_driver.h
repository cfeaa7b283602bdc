// CudaDriver: the CUDA Driver API, loaded at run time.
//
// cudafs never links libcuda: the same binary must start on machines without
// the NVIDIA driver (and fall back to host memory there). Load() dlopens
// libcuda.so.1 once per process, calls cuInit, and resolves every entry point
// cudafs uses with cuGetProcAddress, each at the CUDA version of its
// declaration in cuda_api.h (our own: no toolkit needed to build). Each
// member has that declaration's type, so calls are checked by the compiler
// as if we had linked.
//
// Only the CUDA device's .cc files and the tests' fake driver include this
// header.
#ifndef CUDAFS_ALLOC_DEVICES_CUDA_DRIVER_H_
#define CUDAFS_ALLOC_DEVICES_CUDA_DRIVER_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "alloc/devices/cuda_api.h"

namespace cudafs {

// X(name) for every entry point; `name` is the unversioned name, as
// cuGetProcAddress takes it.
#define CUDAFS_CUDA_ENTRY_POINTS(X)                                                  \
  X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)        \
  X(cuDeviceGetPCIBusId) X(cuDeviceGetByPCIBusId) X(cuDeviceTotalMem)                \
  X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)   \
  X(cuCtxSetCurrent) X(cuMemGetInfo) X(cuMemGetAllocationGranularity)                \
  X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemCreate) X(cuMemRelease)          \
  X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess) X(cuMemHostAlloc) X(cuMemFreeHost)     \
  X(cuMemHostRegister) X(cuMemHostUnregister)                                      \
  X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamQuery)        \
  X(cuMemcpyAsync)                                                                 \
  X(cuMemsetD8Async) X(cuGetErrorName) X(cuGetErrorString)                          \
  X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuLaunchKernel)   \
  X(cuMemExportToShareableHandle) X(cuMemImportFromShareableHandle)
// Entry points cudafs uses when the driver has them in the version
// cuda_api.h declares (null otherwise).
#define CUDAFS_CUDA_OPTIONAL_ENTRY_POINTS(X) X(cuMemcpyBatchAsync)

struct CudaDriver {
  // The process-wide driver, loaded and initialised on first use. Fails with
  // Unavailable (and a message saying why: no libcuda, too old, cuInit
  // failed such as "no CUDA-capable device") when cudafs cannot use a GPU.
  static absl::StatusOr<const CudaDriver*> Load();

  // The entry points that `get_proc_address` (the driver's cuGetProcAddress,
  // or a fake's) hands out for a driver of `version` (cuDriverGetVersion's),
  // each asked for at its version in cuda_api.h. Fails with Unavailable,
  // naming what is missing, when a required one is; an optional one stays
  // null where the driver is older than its declaration (it would hand back
  // another ABI, or none).
  static absl::StatusOr<CudaDriver> Resolve(cu::cuGetProcAddress_t get_proc_address, int version);

  // "13.0" for 13000.
  static std::string VersionName(int version);

  // "cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
  std::string Describe(absl::string_view call, cu::CUresult result) const;

  // "NVIDIA H100 80GB HBM3" and "0000:65:00.0" of a CUdevice; "?" when
  // the driver will not say.
  std::string DeviceName(int device) const;
  std::string PciBusId(int device) const;

  // absl::OkStatus() for CUDA_SUCCESS; ResourceExhausted for out-of-memory
  // results; Internal (an I/O error for the filesystem) otherwise.
  absl::Status Check(absl::string_view call, cu::CUresult result) const;

  int version = 0;  // cuDriverGetVersion, e.g. 13000

#define CUDAFS_DECLARE_ENTRY_POINT(name) cu::name##_t name = nullptr;
  CUDAFS_CUDA_ENTRY_POINTS(CUDAFS_DECLARE_ENTRY_POINT)
  CUDAFS_CUDA_OPTIONAL_ENTRY_POINTS(CUDAFS_DECLARE_ENTRY_POINT)
#undef CUDAFS_DECLARE_ENTRY_POINT
};

// True for errors after which the context is unusable ("sticky" errors):
// every later call in the process fails the same way.
bool IsStickyCudaError(cu::CUresult result);

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_CUDA_DRIVER_H_
