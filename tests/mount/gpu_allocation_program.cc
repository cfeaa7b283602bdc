// A GPU program as the allocation interposer meets them: it loads the
// driver at run time (libcuda.so.1, the fake one in CI) and allocates
// once, without retrying, reaching cuMemAlloc_v2 as MODE says: "dlsym"
// (dlsym on libcuda's handle) or "proc" (cuGetProcAddress, as the CUDA
// runtime does; at the version of its _v2 ABI, the one the fake driver
// hands out).
//
//   gpu_allocation_program MODE BYTES
//
// Prints "allocated BYTES in MS ms", or "failed RESULT in MS ms"; exits 0,
// or 3 on CUDA_ERROR_OUT_OF_MEMORY, 1 on any other failure.
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "alloc/devices/cuda_api.h"

namespace cu = cudafs::cu;

namespace {

template <typename Fn>
Fn Symbol(void* library, const char* name) {
  return reinterpret_cast<Fn>(dlsym(library, name));
}

int Fail(const char* what) {
  std::fprintf(stderr, "gpu_allocation_program: %s\n", what);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return Fail("usage: gpu_allocation_program dlsym|proc BYTES");
  const bool by_proc = std::strcmp(argv[1], "proc") == 0;
  const size_t bytes = std::strtoull(argv[2], nullptr, 10);
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return Fail(dlerror());
  const auto init = Symbol<cu::cuInit_t>(library, "cuInit");
  const auto device_get = Symbol<cu::cuDeviceGet_t>(library, "cuDeviceGet");
  const auto retain = Symbol<cu::cuDevicePrimaryCtxRetain_t>(library, "cuDevicePrimaryCtxRetain");
  const auto set_current = Symbol<cu::cuCtxSetCurrent_t>(library, "cuCtxSetCurrent");
  using MemAlloc = cu::CUresult (*)(cu::CUdeviceptr*, size_t);
  MemAlloc allocate = nullptr;
  if (by_proc) {
    const auto get_proc = Symbol<cu::cuGetProcAddress_t>(library, "cuGetProcAddress_v2");
    void* found = nullptr;
    cu::CUdriverProcAddressQueryResult status = cu::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (get_proc == nullptr ||
        get_proc("cuMemAlloc", &found, 3020, cu::CU_GET_PROC_ADDRESS_DEFAULT, &status) !=
            cu::CUDA_SUCCESS) {
      return Fail("cuGetProcAddress(cuMemAlloc) failed");
    }
    allocate = reinterpret_cast<MemAlloc>(found);
  } else {
    allocate = Symbol<MemAlloc>(library, "cuMemAlloc_v2");
  }
  if (init == nullptr || device_get == nullptr || retain == nullptr || set_current == nullptr ||
      allocate == nullptr) {
    return Fail("the driver lacks an entry point");
  }
  cu::CUdevice device = 0;
  cu::CUcontext context = nullptr;
  if (init(0) != cu::CUDA_SUCCESS || device_get(&device, 0) != cu::CUDA_SUCCESS ||
      retain(&context, device) != cu::CUDA_SUCCESS || set_current(context) != cu::CUDA_SUCCESS) {
    return Fail("no CUDA context");
  }
  const auto start = std::chrono::steady_clock::now();
  cu::CUdeviceptr pointer = 0;
  const cu::CUresult result = allocate(&pointer, bytes);
  const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - start)
                           .count();
  if (result == cu::CUDA_SUCCESS) {
    std::printf("allocated %zu in %lld ms\n", bytes, ms);
    return 0;
  }
  std::printf("failed %d in %lld ms\n", static_cast<int>(result), ms);
  return result == cu::CUDA_ERROR_OUT_OF_MEMORY ? 3 : 1;
}
