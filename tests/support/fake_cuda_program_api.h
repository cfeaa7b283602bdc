// The Driver API entry points that GPU programs allocate and find their
// context with, beyond the part cudafs uses (alloc/devices/cuda_api.h): the
// fake driver serves them too, so that a program other than cudafs (a test
// standing for PyTorch, which holds memory on the same GPU) runs on it.
// Declared as cuda_api.h declares, each at the CUDA version of its ABI,
// written from NVIDIA's Driver API reference; tests only.
#ifndef CUDAFS_TESTS_SUPPORT_FAKE_CUDA_PROGRAM_API_H_
#define CUDAFS_TESTS_SUPPORT_FAKE_CUDA_PROGRAM_API_H_

#include "alloc/devices/cuda_api.h"

namespace cudafs::cu {

struct CUmemPoolHandle_st;
using CUmemoryPool = CUmemPoolHandle_st*;

// cuMemAllocManaged's flags.
inline constexpr unsigned int CU_MEM_ATTACH_GLOBAL = 0x1;
inline constexpr unsigned int CU_MEM_ATTACH_HOST = 0x2;

using cuMemAlloc_t = CUresult (*)(CUdeviceptr* pointer, size_t size);
using cuMemFree_t = CUresult (*)(CUdeviceptr pointer);
using cuMemAllocPitch_t = CUresult (*)(CUdeviceptr* pointer, size_t* pitch, size_t width_bytes,
                                       size_t height, unsigned int element_size);
using cuMemAllocManaged_t = CUresult (*)(CUdeviceptr* pointer, size_t size, unsigned int flags);
using cuMemAllocAsync_t = CUresult (*)(CUdeviceptr* pointer, size_t size, CUstream stream);
using cuMemFreeAsync_t = CUresult (*)(CUdeviceptr pointer, CUstream stream);
using cuMemAllocFromPoolAsync_t = CUresult (*)(CUdeviceptr* pointer, size_t size, CUmemoryPool pool,
                                               CUstream stream);
using cuDeviceGetDefaultMemPool_t = CUresult (*)(CUmemoryPool* pool, CUdevice device);
using cuCtxSynchronize_t = CUresult (*)();

// X(name, version), as CUDAFS_CU_ENTRY_POINTS.
#define CUDAFS_FAKE_PROGRAM_ENTRY_POINTS(X) \
  X(cuMemAlloc, 3020)                       \
  X(cuMemFree, 3020)                        \
  X(cuMemAllocPitch, 3020)                  \
  X(cuMemAllocManaged, 6000)                \
  X(cuMemAllocAsync, 11020)                 \
  X(cuMemFreeAsync, 11020)                  \
  X(cuMemAllocFromPoolAsync, 11020)         \
  X(cuDeviceGetDefaultMemPool, 11020)       \
  X(cuCtxSynchronize, 2000)

#define CUDAFS_FAKE_DECLARE_VERSION(name, version) inline constexpr int name##_version = version;
CUDAFS_FAKE_PROGRAM_ENTRY_POINTS(CUDAFS_FAKE_DECLARE_VERSION)
#undef CUDAFS_FAKE_DECLARE_VERSION

}  // namespace cudafs::cu

#endif  // CUDAFS_TESTS_SUPPORT_FAKE_CUDA_PROGRAM_API_H_
