// libcudafs_preload.so: a GPU program's allocations wait for cudafs rather
// than fail. Loaded with LD_PRELOAD (cudafs run, a profile, a unit's
// Environment=, /etc/ld.so.preload), it stands between the program and
// the driver's entry points that take GPU memory; when one fails with
// CUDA_ERROR_OUT_OF_MEMORY it has the cudafs mounts make that room on the
// GPU (RoomAsker) and tries once more, else returns the driver's error.
//
// Programs reach the driver three ways, and each is covered: by linking
// libcuda (our exported symbols come first), by dlsym on libcuda's handle
// (our dlsym hands back our wrappers), and through cuGetProcAddress, which
// the CUDA runtime and PyTorch use for every entry point (our
// cuGetProcAddress wraps what it hands back). Everything else passes
// through untouched; success costs one indirect call.
#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <string>

#include "alloc/devices/cuda_api.h"
#include "fs/client/interposer/room_asker.h"

namespace cu = cudafs::cu;

#define CUDAFS_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using cu::CUresult;
using Dlsym = void* (*)(void*, const char*);
using GetProcAddressV1 = CUresult (*)(const char*, void**, int, cu::cuuint64_t);

// glibc's dlsym, past ours. A caller's dlsym(RTLD_NEXT, ...) is answered
// as if asked from this library, preloaded before the rest: what other
// interposers that hook dlsym (HAMi-core's) do too.
Dlsym RealDlsym() {
  static const Dlsym real = [] {
    void* found = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (found == nullptr) found = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    return reinterpret_cast<Dlsym>(found);
  }();
  return real;
}

// The entry points wrapped, each with the real one it stands for.
enum Slot {
  kMemAlloc,
  kMemAllocPitch,
  kMemAllocManaged,
  kMemAllocAsync,
  kMemAllocAsyncPtsz,
  kMemAllocFromPoolAsync,
  kMemAllocFromPoolAsyncPtsz,
  kMemCreate,
  kGetProcAddress,
  kGetProcAddressV1,
  kSlotCount
};

struct Entry {
  const char* exported;  // libcuda's symbol
  void* wrapper;
  std::atomic<void*> real{nullptr};
};

Entry& EntryOf(Slot slot);

// The real entry point of `slot`: the last one handed out (by dlsym or
// cuGetProcAddress), else libcuda's exported symbol.
template <typename Fn>
Fn Real(Slot slot) {
  Entry& entry = EntryOf(slot);
  void* real = entry.real.load(std::memory_order_acquire);
  if (real == nullptr) {
    if (void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) {
      real = RealDlsym()(library, entry.exported);
      dlclose(library);
      if (real == entry.wrapper) real = nullptr;
      if (real != nullptr) entry.real.store(real, std::memory_order_release);
    }
  }
  return reinterpret_cast<Fn>(real);
}

// A driver entry point of libcuda's, not wrapped, for our own questions.
template <typename Fn>
Fn Driver(const char* name) {
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (library == nullptr) return nullptr;
  void* found = RealDlsym()(library, name);
  dlclose(library);
  return reinterpret_cast<Fn>(found);
}

// The PCI bus id of CUDA device `device`, or of the calling thread's
// context's when -1; empty when the driver will not say.
std::string BusIdOf(int device) {
  if (device < 0) {
    const auto get_device = Driver<cu::cuCtxGetDevice_t>("cuCtxGetDevice");
    cu::CUdevice current = 0;
    if (get_device == nullptr || get_device(&current) != cu::CUDA_SUCCESS) return "";
    device = current;
  }
  const auto bus_id = Driver<cu::cuDeviceGetPCIBusId_t>("cuDeviceGetPCIBusId");
  char name[32] = {};
  if (bus_id == nullptr || bus_id(name, sizeof name, device) != cu::CUDA_SUCCESS) return "";
  return name;
}

cudafs::client::RoomAsker& Asker() {
  // Never destroyed: requests it left waiting on a slow daemon may finish
  // after exit begins.
  static auto* asker = new cudafs::client::RoomAsker();
  return *asker;
}

// Runs `allocate`; on out-of-memory, has the mounts make room for `bytes`
// on `device` (-1: the current context's) and runs it once more.
template <typename Allocate>
CUresult WithRoom(uint64_t bytes, int device, Allocate allocate) {
  const CUresult result = allocate();
  if (result != cu::CUDA_ERROR_OUT_OF_MEMORY || cudafs::client::InterposerDisabled()) {
    return result;
  }
  const std::string bus_id = BusIdOf(device);
  if (bus_id.empty() || !Asker().MakeRoomFor(bus_id, bytes, cudafs::client::RoomTimeout())) {
    return result;
  }
  return allocate();
}

// cuGetProcAddress found `function` for `symbol`: ours in its place where
// we wrap that symbol at that version (the ABI our wrapper has).
void* InterposeProc(const char* symbol, void* function, int version, cu::cuuint64_t flags);

// dlsym found `function` for `symbol`: ours where we wrap it.
void* InterposeSymbol(const char* symbol, void* function) {
  for (int slot = 0; slot < kSlotCount; ++slot) {
    Entry& entry = EntryOf(static_cast<Slot>(slot));
    if (std::strcmp(symbol, entry.exported) != 0) continue;
    if (function != entry.wrapper) entry.real.store(function, std::memory_order_release);
    return entry.wrapper;
  }
  return function;
}

}  // namespace

CUDAFS_EXPORT CUresult cuMemAlloc_v2(cu::CUdeviceptr* pointer, size_t bytes) {
  const auto real = Real<CUresult (*)(cu::CUdeviceptr*, size_t)>(kMemAlloc);
  if (real == nullptr) return cu::CUDA_ERROR_NOT_INITIALIZED;
  return WithRoom(bytes, -1, [&] { return real(pointer, bytes); });
}

CUDAFS_EXPORT CUresult cuMemAllocPitch_v2(cu::CUdeviceptr* pointer, size_t* pitch, size_t width,
                                          size_t height, unsigned int element_bytes) {
  const auto real = Real<CUresult (*)(cu::CUdeviceptr*, size_t*, size_t, size_t, unsigned int)>(
      kMemAllocPitch);
  if (real == nullptr) return cu::CUDA_ERROR_NOT_INITIALIZED;
  return WithRoom(uint64_t{width} * height, -1,
                  [&] { return real(pointer, pitch, width, height, element_bytes); });
}

CUDAFS_EXPORT CUresult cuMemAllocManaged(cu::CUdeviceptr* pointer, size_t bytes,
                                         unsigned int flags) {
  const auto real = Real<CUresult (*)(cu::CUdeviceptr*, size_t, unsigned int)>(kMemAllocManaged);
  if (real == nullptr) return cu::CUDA_ERROR_NOT_INITIALIZED;
  return WithRoom(bytes, -1, [&] { return real(pointer, bytes, flags); });
}

#define CUDAFS_ALLOC_ASYNC(name, slot)                                                     \
  CUDAFS_EXPORT CUresult name(cu::CUdeviceptr* pointer, size_t bytes, cu::CUstream stream) { \
    const auto real = Real<CUresult (*)(cu::CUdeviceptr*, size_t, cu::CUstream)>(slot);      \
    if (real == nullptr) return cu::CUDA_ERROR_NOT_INITIALIZED;                              \
    return WithRoom(bytes, -1, [&] { return real(pointer, bytes, stream); });                \
  }
CUDAFS_ALLOC_ASYNC(cuMemAllocAsync, kMemAllocAsync)
CUDAFS_ALLOC_ASYNC(cuMemAllocAsync_ptsz, kMemAllocAsyncPtsz)
#undef CUDAFS_ALLOC_ASYNC

#define CUDAFS_ALLOC_FROM_POOL(name, slot)                                                   \
  CUDAFS_EXPORT CUresult name(cu::CUdeviceptr* pointer, size_t bytes, void* pool,            \
                              cu::CUstream stream) {                                         \
    const auto real =                                                                        \
        Real<CUresult (*)(cu::CUdeviceptr*, size_t, void*, cu::CUstream)>(slot);             \
    if (real == nullptr) return cu::CUDA_ERROR_NOT_INITIALIZED;                              \
    return WithRoom(bytes, -1, [&] { return real(pointer, bytes, pool, stream); });          \
  }
CUDAFS_ALLOC_FROM_POOL(cuMemAllocFromPoolAsync, kMemAllocFromPoolAsync)
CUDAFS_ALLOC_FROM_POOL(cuMemAllocFromPoolAsync_ptsz, kMemAllocFromPoolAsyncPtsz)
#undef CUDAFS_ALLOC_FROM_POOL

CUDAFS_EXPORT CUresult cuMemCreate(cu::CUmemGenericAllocationHandle* handle, size_t bytes,
                                   const cu::CUmemAllocationProp* prop, unsigned long long flags) {
  const auto real = Real<cu::cuMemCreate_t>(kMemCreate);
  if (real == nullptr) return cu::CUDA_ERROR_NOT_INITIALIZED;
  const int device = prop != nullptr && prop->location.type == cu::CU_MEM_LOCATION_TYPE_DEVICE
                         ? prop->location.id
                         : -1;
  return WithRoom(bytes, device, [&] { return real(handle, bytes, prop, flags); });
}

CUDAFS_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** function, int version,
                                           cu::cuuint64_t flags,
                                           cu::CUdriverProcAddressQueryResult* status) {
  const auto real = Real<cu::cuGetProcAddress_t>(kGetProcAddress);
  if (real == nullptr) return cu::CUDA_ERROR_NOT_INITIALIZED;
  const CUresult result = real(symbol, function, version, flags, status);
  if (result == cu::CUDA_SUCCESS && symbol != nullptr && function != nullptr &&
      *function != nullptr) {
    *function = InterposeProc(symbol, *function, version, flags);
  }
  return result;
}

CUDAFS_EXPORT CUresult cuGetProcAddress(const char* symbol, void** function, int version,
                                        cu::cuuint64_t flags) {
  const auto real = Real<GetProcAddressV1>(kGetProcAddressV1);
  if (real == nullptr) return cu::CUDA_ERROR_NOT_INITIALIZED;
  const CUresult result = real(symbol, function, version, flags);
  if (result == cu::CUDA_SUCCESS && symbol != nullptr && function != nullptr &&
      *function != nullptr) {
    *function = InterposeProc(symbol, *function, version, flags);
  }
  return result;
}

CUDAFS_EXPORT void* dlsym(void* handle, const char* symbol) noexcept {
  void* found = RealDlsym()(handle, symbol);
  if (found == nullptr || std::strncmp(symbol, "cu", 2) != 0) return found;
  return InterposeSymbol(symbol, found);
}

namespace {

Entry& EntryOf(Slot slot) {
  static Entry entries[kSlotCount] = {
      {"cuMemAlloc_v2", reinterpret_cast<void*>(&cuMemAlloc_v2)},
      {"cuMemAllocPitch_v2", reinterpret_cast<void*>(&cuMemAllocPitch_v2)},
      {"cuMemAllocManaged", reinterpret_cast<void*>(&cuMemAllocManaged)},
      {"cuMemAllocAsync", reinterpret_cast<void*>(&cuMemAllocAsync)},
      {"cuMemAllocAsync_ptsz", reinterpret_cast<void*>(&cuMemAllocAsync_ptsz)},
      {"cuMemAllocFromPoolAsync", reinterpret_cast<void*>(&cuMemAllocFromPoolAsync)},
      {"cuMemAllocFromPoolAsync_ptsz", reinterpret_cast<void*>(&cuMemAllocFromPoolAsync_ptsz)},
      {"cuMemCreate", reinterpret_cast<void*>(&cuMemCreate)},
      {"cuGetProcAddress_v2", reinterpret_cast<void*>(&cuGetProcAddress_v2)},
      {"cuGetProcAddress", reinterpret_cast<void*>(&cuGetProcAddress)},
  };
  return entries[slot];
}

void* InterposeProc(const char* symbol, void* function, int version, cu::cuuint64_t flags) {
  // cuGetProcAddress names entry points without their _v2 and picks the
  // ABI by version: we stand in only for the ABI each wrapper has.
  constexpr cu::cuuint64_t kPerThreadDefaultStream = 1u << 1;
  const bool per_thread = flags & kPerThreadDefaultStream;
  Slot slot = kSlotCount;
  if (std::strcmp(symbol, "cuGetProcAddress") == 0) {
    slot = version >= 12000 ? kGetProcAddress : kGetProcAddressV1;
  } else if (std::strcmp(symbol, "cuMemAlloc") == 0 && version >= 3020) {
    slot = kMemAlloc;
  } else if (std::strcmp(symbol, "cuMemAllocPitch") == 0 && version >= 3020) {
    slot = kMemAllocPitch;
  } else if (std::strcmp(symbol, "cuMemAllocManaged") == 0) {
    slot = kMemAllocManaged;
  } else if (std::strcmp(symbol, "cuMemAllocAsync") == 0) {
    slot = per_thread ? kMemAllocAsyncPtsz : kMemAllocAsync;
  } else if (std::strcmp(symbol, "cuMemAllocFromPoolAsync") == 0) {
    slot = per_thread ? kMemAllocFromPoolAsyncPtsz : kMemAllocFromPoolAsync;
  } else if (std::strcmp(symbol, "cuMemCreate") == 0) {
    slot = kMemCreate;
  }
  if (slot == kSlotCount) return function;
  Entry& entry = EntryOf(slot);
  if (function != entry.wrapper) entry.real.store(function, std::memory_order_release);
  return entry.wrapper;
}

}  // namespace
