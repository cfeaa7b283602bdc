#include "tests/support/fake_cuda_driver.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "alloc/devices/scatter_kernel.h"

namespace cudafs {
namespace fake_cuda_internal {
namespace {

constexpr uint64_t kGranule = uint64_t{2} << 20;

[[noreturn]] void Die(const char* what, absl::string_view detail = "") {
  std::fprintf(stderr, "FakeCudaDriver: %s%.*s\n", what, static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

// Handles are never dereferenced, only looked up, and never reused in the
// process (not even by a later fake), so a stale one is always caught. They
// are multiples of 16: not null, not CU_STREAM_LEGACY (1) nor
// CU_STREAM_PER_THREAD (2), and a module's function is the module's handle
// + 8.
std::atomic<uintptr_t> next_handle{1};
uintptr_t NewHandle() { return next_handle.fetch_add(1, std::memory_order_relaxed) << 4; }
constexpr uintptr_t kFunctionTag = 8;

// The context current to this thread, as the driver keeps it: per thread,
// and left in place when the context is destroyed.
thread_local CUcontext current_context = nullptr;

struct Mapping {
  uint64_t size;
  CUmemGenericAllocationHandle handle;
  int prot;  // PROT_NONE until cuMemSetAccess
};

struct Physical {
  int fd;
  uint64_t size;
  bool exportable = false;  // made for POSIX file-descriptor handles
  int mappings = 0;
  bool released = false;  // freed once released and unmapped
};

struct Failure {
  CUresult result;
  int remaining;  // or FakeCudaDriver::kAlways
};

// Ranges by start address.
using Ranges = absl::btree_map<uintptr_t, uint64_t>;

bool Overlaps(const Ranges& ranges, uintptr_t start, uint64_t length) {
  auto it = ranges.upper_bound(start);
  if (it != ranges.end() && it->first < start + length) return true;
  if (it == ranges.begin()) return false;
  --it;
  return start < it->first + it->second;
}

bool Contains(const Ranges& ranges, uintptr_t start, uint64_t length) {
  auto it = ranges.upper_bound(start);
  if (it == ranges.begin()) return false;
  --it;
  return start + length <= it->first + it->second;
}

}  // namespace

class State {
 public:
  explicit State(FakeGpuOptions options) : options_(std::move(options)) {
    vram_limit_ = options_.vram_limit;
#define CUDAFS_FAKE_KNOWN(name) calls_[#name] = 0;
    CUDAFS_CUDA_ENTRY_POINTS(CUDAFS_FAKE_KNOWN)
    CUDAFS_CUDA_OPTIONAL_ENTRY_POINTS(CUDAFS_FAKE_KNOWN)
#undef CUDAFS_FAKE_KNOWN
  }

  ~State() {
    absl::MutexLock lock(&mu);
    FreeContextResources();
  }

  const FakeGpuOptions& options() const { return options_; }

  // Counts a call and says whether a failure was injected for it.
  CUresult Begin(absl::string_view entry_point) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    ++calls_.find(entry_point)->second;
    auto it = failures_.find(entry_point);
    if (it == failures_.end()) return CUDA_SUCCESS;
    const CUresult result = it->second.result;
    if (it->second.remaining != FakeCudaDriver::kAlways && --it->second.remaining == 0) {
      failures_.erase(it);
    }
    return result;
  }

  void CheckKnown(absl::string_view entry_point) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (!calls_.contains(entry_point)) Die("no such entry point: ", entry_point);
  }

  // For calls that need a current context.
  CUresult NeedContext() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (current_context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    if (current_context != context) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    if (faulted) return CUDA_ERROR_ILLEGAL_ADDRESS;
    return CUDA_SUCCESS;
  }

  // A device fault: the context is unusable from now on.
  CUresult Fault() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    faulted = true;
    return CUDA_ERROR_ILLEGAL_ADDRESS;
  }

  CUresult CheckStream(CUstream stream) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) {
      return CUDA_SUCCESS;
    }
    return streams.contains(reinterpret_cast<uintptr_t>(stream)) ? CUDA_SUCCESS
                                                                  : CUDA_ERROR_INVALID_HANDLE;
  }

  // Whether [start, +length) lies in mapped device memory whose access
  // allows `prot`.
  bool DeviceAccessible(uintptr_t start, uint64_t length, int prot) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (uintptr_t at = start; at < start + length;) {
      auto it = mappings.upper_bound(at);
      if (it == mappings.begin()) return false;
      --it;
      if (at >= it->first + it->second.size || (it->second.prot & prot) != prot) return false;
      at = it->first + it->second.size;
    }
    return true;
  }

  // A copy's operand: an address in a reservation is device memory, which
  // must be accessible; any other is host memory (pageable or not).
  bool CopyOperandOk(uintptr_t start, uint64_t length, int prot) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (length > UINTPTR_MAX - start) return false;
    if (!Overlaps(reservations, start, length)) return true;
    return DeviceAccessible(start, length, prot);
  }

  // What a kernel may touch: accessible device memory, or host memory the
  // GPU can address (pinned or registered).
  bool KernelOperandOk(uintptr_t start, uint64_t length, int prot) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (length > UINTPTR_MAX - start) return false;
    if (Overlaps(reservations, start, length)) return DeviceAccessible(start, length, prot);
    return Contains(pinned, start, length) || Contains(registered, start, length);
  }

  // The mappings making up exactly [start, +length), or nothing when the
  // range is not whole mappings end to end.
  std::vector<uintptr_t> WholeMappings(uintptr_t start, uint64_t length) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::vector<uintptr_t> found;
    for (uintptr_t at = start; at < start + length;) {
      auto it = mappings.find(at);
      if (it == mappings.end()) return {};
      found.push_back(at);
      at += it->second.size;
    }
    if (length == 0 || found.empty()) return {};
    const Mapping& last = mappings.at(found.back());
    if (found.back() + last.size != start + length) return {};
    return found;
  }

  void FreePhysicalIfUnused(CUmemGenericAllocationHandle handle)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = physical.find(handle);
    if (!it->second.released || it->second.mappings != 0) return;
    close(it->second.fd);
    physical.erase(it);
  }

  void DestroyContext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    leaked_at_destroy += static_cast<int>(streams.size() + modules.size() + physical.size() +
                                          reservations.size() + pinned.size() +
                                          registered.size());
    FreeContextResources();
    context = nullptr;
    faulted = false;
  }

  FakeCudaDriver::Stats Snapshot() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    FakeCudaDriver::Stats stats;
    stats.contexts_created = contexts_created;
    stats.live_contexts = context != nullptr ? 1 : 0;
    stats.live_streams = static_cast<int>(streams.size());
    stats.live_modules = static_cast<int>(modules.size());
    stats.live_physical_allocations = static_cast<int>(physical.size());
    stats.physical_bytes = PhysicalBytes();
    for (const auto& [start, mapping] : mappings) stats.mapped_bytes += mapping.size;
    for (const auto& [start, size] : reservations) stats.reserved_bytes += size;
    for (const auto& [start, size] : pinned) stats.pinned_host_bytes += size;
    for (const auto& [start, size] : registered) stats.registered_host_bytes += size;
    stats.leaked_at_destroy = leaked_at_destroy;
    stats.largest_create = largest_create;
    return stats;
  }

  uint64_t PhysicalBytes() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    uint64_t bytes = 0;
    for (const auto& [handle, allocation] : physical) bytes += allocation.size;
    return bytes;
  }

  uint64_t VramLimit() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return std::min(options_.total_bytes, vram_limit_);
  }

  void FailNext(absl::string_view entry_point, CUresult result, int count)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    CheckKnown(entry_point);
    if (count == 0) {
      failures_.erase(entry_point);
    } else {
      failures_.insert_or_assign(std::string(entry_point), Failure{result, count});
    }
  }

  int Calls(absl::string_view entry_point) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    CheckKnown(entry_point);
    return calls_.find(entry_point)->second;
  }

  void SetVramLimit(uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { vram_limit_ = bytes; }

  mutable absl::Mutex mu;

  // The primary context: null while it does not exist.
  CUcontext context ABSL_GUARDED_BY(mu) = nullptr;
  int context_references ABSL_GUARDED_BY(mu) = 0;
  bool faulted ABSL_GUARDED_BY(mu) = false;  // a sticky CUDA_ERROR_ILLEGAL_ADDRESS
  // Every context this fake made, for cuCtxSetCurrent to tell its own
  // (destroyed ones included) from garbage.
  absl::flat_hash_set<CUcontext> contexts_made ABSL_GUARDED_BY(mu);
  int contexts_created ABSL_GUARDED_BY(mu) = 0;
  int leaked_at_destroy ABSL_GUARDED_BY(mu) = 0;
  uint64_t largest_create ABSL_GUARDED_BY(mu) = 0;

  // What the live context holds.
  absl::flat_hash_set<uintptr_t> streams ABSL_GUARDED_BY(mu);
  absl::flat_hash_set<uintptr_t> modules ABSL_GUARDED_BY(mu);
  Ranges reservations ABSL_GUARDED_BY(mu);
  absl::btree_map<uintptr_t, Mapping> mappings ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<CUmemGenericAllocationHandle, Physical> physical ABSL_GUARDED_BY(mu);
  Ranges pinned ABSL_GUARDED_BY(mu);
  Ranges registered ABSL_GUARDED_BY(mu);

 private:
  // Gives back to the system what the context held: unmapping a
  // reservation drops its mappings with it.
  void FreeContextResources() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (const auto& [start, size] : reservations) munmap(reinterpret_cast<void*>(start), size);
    for (const auto& [handle, allocation] : physical) close(allocation.fd);
    for (const auto& [start, size] : pinned) munmap(reinterpret_cast<void*>(start), size);
    reservations.clear();
    mappings.clear();
    physical.clear();
    pinned.clear();
    registered.clear();
    streams.clear();
    modules.clear();
  }

  const FakeGpuOptions options_;
  uint64_t vram_limit_ ABSL_GUARDED_BY(mu);
  // Keyed by entry point name; every known name is present.
  absl::flat_hash_map<std::string, int> calls_ ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, Failure> failures_ ABSL_GUARDED_BY(mu);
};

namespace {

std::atomic<State*> installed{nullptr};

State& Installed() {
  State* state = installed.load(std::memory_order_acquire);
  if (state == nullptr) Die("a CUDA entry point was called with no FakeCudaDriver alive");
  return *state;
}

// Every fake starts so: find the state, lock it, count the call, and return
// an injected failure if there is one.
#define CUDAFS_FAKE_ENTER(name)                                   \
  State& s = Installed();                                         \
  absl::MutexLock lock(&s.mu);                                    \
  if (CUresult injected = s.Begin(name); injected != CUDA_SUCCESS) \
  return injected

#define CUDAFS_FAKE_NEED_CONTEXT()                                 \
  if (CUresult no_context = s.NeedContext(); no_context != CUDA_SUCCESS) \
  return no_context

CUresult FakeDriverGetVersion(int* version) {
  CUDAFS_FAKE_ENTER("cuDriverGetVersion");
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = CUDA_VERSION;
  return CUDA_SUCCESS;
}

CUresult FakeDeviceGetCount(int* count) {
  CUDAFS_FAKE_ENTER("cuDeviceGetCount");
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = 1;
  return CUDA_SUCCESS;
}

CUresult FakeDeviceGet(CUdevice* device, int ordinal) {
  CUDAFS_FAKE_ENTER("cuDeviceGet");
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}

// Writes `text` as the driver writes strings: cut to fit, NUL-terminated.
CUresult WriteString(absl::string_view text, char* out, int length, CUdevice device) {
  if (out == nullptr || length <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (device != 0) return CUDA_ERROR_INVALID_DEVICE;
  const size_t n = std::min(text.size(), static_cast<size_t>(length) - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
  return CUDA_SUCCESS;
}

CUresult FakeDeviceGetName(char* name, int length, CUdevice device) {
  CUDAFS_FAKE_ENTER("cuDeviceGetName");
  return WriteString(s.options().name, name, length, device);
}

CUresult FakeDeviceGetPCIBusId(char* bus_id, int length, CUdevice device) {
  CUDAFS_FAKE_ENTER("cuDeviceGetPCIBusId");
  return WriteString(s.options().pci_bus_id, bus_id, length, device);
}

CUresult FakeDeviceGetByPCIBusId(CUdevice* device, const char* bus_id) {
  CUDAFS_FAKE_ENTER("cuDeviceGetByPCIBusId");
  if (device == nullptr || bus_id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // "domain:bus:device.function", or without the domain.
  absl::string_view ours = s.options().pci_bus_id;
  absl::string_view theirs = bus_id;
  if (std::count(theirs.begin(), theirs.end(), ':') == 1) ours = ours.substr(ours.find(':') + 1);
  if (!absl::EqualsIgnoreCase(ours, theirs)) return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}

CUresult FakeDeviceTotalMem(size_t* bytes, CUdevice device) {
  CUDAFS_FAKE_ENTER("cuDeviceTotalMem");
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device != 0) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = s.options().total_bytes;
  return CUDA_SUCCESS;
}

CUresult FakeDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  CUDAFS_FAKE_ENTER("cuDeviceGetAttribute");
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device != 0) return CUDA_ERROR_INVALID_DEVICE;
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
      *value = 1;
      break;
    default:
      *value = 0;
  }
  return CUDA_SUCCESS;
}

CUresult FakeDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  CUDAFS_FAKE_ENTER("cuDevicePrimaryCtxRetain");
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (s.context == nullptr) {
    s.context = reinterpret_cast<CUcontext>(NewHandle());
    s.contexts_made.insert(s.context);
    ++s.contexts_created;
  }
  ++s.context_references;
  *context = s.context;
  return CUDA_SUCCESS;
}

CUresult FakeDevicePrimaryCtxRelease(CUdevice device) {
  CUDAFS_FAKE_ENTER("cuDevicePrimaryCtxRelease");
  if (device != 0) return CUDA_ERROR_INVALID_DEVICE;
  // As documented: releasing what was not retained.
  if (s.context_references == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--s.context_references == 0) s.DestroyContext();
  return CUDA_SUCCESS;
}

CUresult FakeCtxSetCurrent(CUcontext context) {
  CUDAFS_FAKE_ENTER("cuCtxSetCurrent");
  // A destroyed context may be made current (the driver allows it); calls
  // through it then fail.
  if (context != nullptr && !s.contexts_made.contains(context)) return CUDA_ERROR_INVALID_CONTEXT;
  current_context = context;
  return CUDA_SUCCESS;
}

CUresult FakeMemGetInfo(size_t* free, size_t* total) {
  CUDAFS_FAKE_ENTER("cuMemGetInfo");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t used = s.PhysicalBytes();
  *free = used < s.VramLimit() ? s.VramLimit() - used : 0;
  *total = s.options().total_bytes;
  return CUDA_SUCCESS;
}

CUresult FakeMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                         CUmemAllocationGranularity_flags option) {
  CUDAFS_FAKE_ENTER("cuMemGetAllocationGranularity");
  if (granularity == nullptr || prop == nullptr ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
       option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (prop->location.id != 0) return CUDA_ERROR_INVALID_DEVICE;
  *granularity = kGranule;
  return CUDA_SUCCESS;
}

CUresult FakeMemAddressReserve(CUdeviceptr* address, size_t size, size_t alignment,
                               CUdeviceptr hint, unsigned long long flags) {
  CUDAFS_FAKE_ENTER("cuMemAddressReserve");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (address == nullptr || size == 0 || size % kGranule != 0 || flags != 0 ||
      (alignment & (alignment - 1)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // The hint is only a hint: the address is the system's choice.
  alignment = std::max<size_t>(alignment, kGranule);
  // Over-reserve, then trim to the alignment.
  void* mapped = mmap(nullptr, size + alignment, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapped == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  const auto raw = reinterpret_cast<uintptr_t>(mapped);
  const uintptr_t start = (raw + alignment - 1) / alignment * alignment;
  if (start != raw) munmap(mapped, start - raw);
  if (const uintptr_t tail = raw + size + alignment - (start + size); tail != 0) {
    munmap(reinterpret_cast<void*>(start + size), tail);
  }
  s.reservations.emplace(start, size);
  *address = start;
  return CUDA_SUCCESS;
}

CUresult FakeMemAddressFree(CUdeviceptr address, size_t size) {
  CUDAFS_FAKE_ENTER("cuMemAddressFree");
  auto it = s.reservations.find(address);
  if (it == s.reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  auto mapping = s.mappings.lower_bound(address);
  if (mapping != s.mappings.end() && mapping->first < address + size) {
    return CUDA_ERROR_INVALID_VALUE;  // still mapped
  }
  munmap(reinterpret_cast<void*>(address), size);
  s.reservations.erase(it);
  return CUDA_SUCCESS;
}

CUresult FakeMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                       const CUmemAllocationProp* prop, unsigned long long flags) {
  CUDAFS_FAKE_ENTER("cuMemCreate");
  s.largest_create = std::max<uint64_t>(s.largest_create, size);
  CUDAFS_FAKE_NEED_CONTEXT();
  if (handle == nullptr || prop == nullptr || size == 0 || size % kGranule != 0 || flags != 0 ||
      prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE &&
       prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (prop->location.id != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (size > s.VramLimit() || s.PhysicalBytes() > s.VramLimit() - size) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  // A memfd keeps the bytes while nothing maps them, as VRAM does.
  const int fd = memfd_create("cudafs-fake-vram", MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const CUmemGenericAllocationHandle made = NewHandle();
  s.physical.emplace(
      made, Physical{fd, size,
                     prop->requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR});
  *handle = made;
  return CUDA_SUCCESS;
}

CUresult FakeMemRelease(CUmemGenericAllocationHandle handle) {
  CUDAFS_FAKE_ENTER("cuMemRelease");
  auto it = s.physical.find(handle);
  if (it == s.physical.end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
  it->second.released = true;
  s.FreePhysicalIfUnused(handle);
  return CUDA_SUCCESS;
}

// The handle is the memfd itself, duplicated: an importer maps it.
CUresult FakeMemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle,
                                        CUmemAllocationHandleType type,
                                        unsigned long long flags) {
  CUDAFS_FAKE_ENTER("cuMemExportToShareableHandle");
  auto it = s.physical.find(handle);
  if (shareable == nullptr || it == s.physical.end() || it->second.released || flags != 0 ||
      type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || !it->second.exportable) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const int fd = fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  *static_cast<int*>(shareable) = fd;
  return CUDA_SUCCESS;
}

CUresult FakeMemMap(CUdeviceptr address, size_t size, size_t offset,
                    CUmemGenericAllocationHandle handle, unsigned long long flags) {
  CUDAFS_FAKE_ENTER("cuMemMap");
  auto allocation = s.physical.find(handle);
  if (allocation == s.physical.end() || allocation->second.released || flags != 0 ||
      size == 0 || address % kGranule != 0 || size % kGranule != 0 || offset % kGranule != 0 ||
      offset > allocation->second.size || size > allocation->second.size - offset) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!Contains(s.reservations, address, size)) return CUDA_ERROR_INVALID_VALUE;
  auto next = s.mappings.lower_bound(address);
  if (next != s.mappings.end() && next->first < address + size) return CUDA_ERROR_INVALID_VALUE;
  if (next != s.mappings.begin() &&
      std::prev(next)->first + std::prev(next)->second.size > address) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // No access until cuMemSetAccess, as on the GPU.
  if (mmap(reinterpret_cast<void*>(address), size, PROT_NONE, MAP_SHARED | MAP_FIXED,
           allocation->second.fd, static_cast<off_t>(offset)) == MAP_FAILED) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  s.mappings.emplace(address, Mapping{size, handle, PROT_NONE});
  ++allocation->second.mappings;
  return CUDA_SUCCESS;
}

CUresult FakeMemUnmap(CUdeviceptr address, size_t size) {
  CUDAFS_FAKE_ENTER("cuMemUnmap");
  // Only whole mappings, as the driver requires.
  const std::vector<uintptr_t> unmapped = s.WholeMappings(address, size);
  if (unmapped.empty()) return CUDA_ERROR_INVALID_VALUE;
  for (uintptr_t start : unmapped) {
    const Mapping mapping = s.mappings.at(start);
    // Back to a bare reservation.
    mmap(reinterpret_cast<void*>(start), mapping.size, PROT_NONE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    s.mappings.erase(start);
    --s.physical.at(mapping.handle).mappings;
    s.FreePhysicalIfUnused(mapping.handle);
  }
  return CUDA_SUCCESS;
}

CUresult FakeMemSetAccess(CUdeviceptr address, size_t size, const CUmemAccessDesc* desc,
                          size_t count) {
  CUDAFS_FAKE_ENTER("cuMemSetAccess");
  if (desc == nullptr || count != 1 || desc->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (desc->location.id != 0) return CUDA_ERROR_INVALID_DEVICE;
  int prot;
  switch (desc->flags) {
    case CU_MEM_ACCESS_FLAGS_PROT_NONE: prot = PROT_NONE; break;
    case CU_MEM_ACCESS_FLAGS_PROT_READ: prot = PROT_READ; break;
    case CU_MEM_ACCESS_FLAGS_PROT_READWRITE: prot = PROT_READ | PROT_WRITE; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  // Whole mappings only: the fake keeps access per mapping.
  const std::vector<uintptr_t> changed = s.WholeMappings(address, size);
  if (changed.empty()) return CUDA_ERROR_INVALID_VALUE;
  for (uintptr_t start : changed) {
    Mapping& mapping = s.mappings.at(start);
    mprotect(reinterpret_cast<void*>(start), mapping.size, prot);
    mapping.prot = prot;
  }
  return CUDA_SUCCESS;
}

CUresult FakeMemHostAlloc(void** memory, size_t size, unsigned int flags) {
  CUDAFS_FAKE_ENTER("cuMemHostAlloc");
  CUDAFS_FAKE_NEED_CONTEXT();
  constexpr unsigned kKnownFlags =
      CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
  if (memory == nullptr || size == 0 || (flags & ~kKnownFlags) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  void* mapped = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  s.pinned.emplace(reinterpret_cast<uintptr_t>(mapped), size);
  *memory = mapped;
  return CUDA_SUCCESS;
}

CUresult FakeMemFreeHost(void* memory) {
  CUDAFS_FAKE_ENTER("cuMemFreeHost");
  CUDAFS_FAKE_NEED_CONTEXT();
  auto it = s.pinned.find(reinterpret_cast<uintptr_t>(memory));
  if (it == s.pinned.end()) return CUDA_ERROR_INVALID_VALUE;
  munmap(memory, it->second);
  s.pinned.erase(it);
  return CUDA_SUCCESS;
}

CUresult FakeMemHostRegister(void* memory, size_t size, unsigned int flags) {
  CUDAFS_FAKE_ENTER("cuMemHostRegister");
  CUDAFS_FAKE_NEED_CONTEXT();
  const auto start = reinterpret_cast<uintptr_t>(memory);
  if (memory == nullptr || size == 0 || size > UINTPTR_MAX - start) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (Overlaps(s.registered, start, size) || Overlaps(s.pinned, start, size)) {
    return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  }
  s.registered.emplace(start, size);
  return CUDA_SUCCESS;
}

CUresult FakeMemHostUnregister(void* memory) {
  CUDAFS_FAKE_ENTER("cuMemHostUnregister");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (s.registered.erase(reinterpret_cast<uintptr_t>(memory)) == 0) {
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  }
  return CUDA_SUCCESS;
}

CUresult FakeStreamCreate(CUstream* stream, unsigned int flags) {
  CUDAFS_FAKE_ENTER("cuStreamCreate");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (stream == nullptr || (flags & ~unsigned{CU_STREAM_NON_BLOCKING}) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const uintptr_t made = NewHandle();
  s.streams.insert(made);
  *stream = reinterpret_cast<CUstream>(made);
  return CUDA_SUCCESS;
}

CUresult FakeStreamDestroy(CUstream stream) {
  CUDAFS_FAKE_ENTER("cuStreamDestroy");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (s.streams.erase(reinterpret_cast<uintptr_t>(stream)) == 0) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}

CUresult FakeStreamSynchronize(CUstream stream) {
  CUDAFS_FAKE_ENTER("cuStreamSynchronize");
  CUDAFS_FAKE_NEED_CONTEXT();
  // Work ran at enqueue: nothing to wait for.
  return s.CheckStream(stream);
}

CUresult FakeMemcpyAsync(CUdeviceptr to, CUdeviceptr from, size_t length, CUstream stream) {
  CUDAFS_FAKE_ENTER("cuMemcpyAsync");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (CUresult r = s.CheckStream(stream); r != CUDA_SUCCESS) return r;
  if (!s.CopyOperandOk(from, length, PROT_READ) ||
      !s.CopyOperandOk(to, length, PROT_READ | PROT_WRITE)) {
    return s.Fault();
  }
  if (length != 0) {
    std::memmove(reinterpret_cast<void*>(to), reinterpret_cast<const void*>(from), length);
  }
  return CUDA_SUCCESS;
}

CUresult FakeMemsetD8Async(CUdeviceptr to, unsigned char value, size_t length, CUstream stream) {
  CUDAFS_FAKE_ENTER("cuMemsetD8Async");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (CUresult r = s.CheckStream(stream); r != CUDA_SUCCESS) return r;
  if (length == 0) return CUDA_SUCCESS;
  if (!s.KernelOperandOk(to, length, PROT_READ | PROT_WRITE)) {
    // Pageable host memory is no device pointer; a device address that is
    // not mapped faults.
    return Overlaps(s.reservations, to, length) ? s.Fault() : CUDA_ERROR_INVALID_VALUE;
  }
  std::memset(reinterpret_cast<void*>(to), value, length);
  return CUDA_SUCCESS;
}

CUresult FakeMemcpyBatchAsync(CUdeviceptr* to, CUdeviceptr* from, size_t* lengths, size_t count,
                              CUmemcpyAttributes* attributes, size_t* attribute_indices,
                              size_t attribute_count, CUstream stream) {
  CUDAFS_FAKE_ENTER("cuMemcpyBatchAsync");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (CUresult r = s.CheckStream(stream); r != CUDA_SUCCESS) return r;
  if (stream == nullptr || stream == CU_STREAM_LEGACY || to == nullptr || from == nullptr ||
      lengths == nullptr || count == 0 || attributes == nullptr || attribute_indices == nullptr ||
      attribute_count == 0 || attribute_count > count || attribute_indices[0] != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t k = 0; k < attribute_count; ++k) {
    if (attributes[k].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_INVALID ||
        attribute_indices[k] >= count ||
        (k > 0 && attribute_indices[k] <= attribute_indices[k - 1])) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  for (size_t i = 0; i < count; ++i) {
    if (!s.CopyOperandOk(from[i], lengths[i], PROT_READ) ||
        !s.CopyOperandOk(to[i], lengths[i], PROT_READ | PROT_WRITE)) {
      return s.Fault();
    }
  }
  for (size_t i = 0; i < count; ++i) {
    if (lengths[i] == 0) continue;
    std::memmove(reinterpret_cast<void*>(to[i]), reinterpret_cast<const void*>(from[i]),
                 lengths[i]);
  }
  return CUDA_SUCCESS;
}

CUresult FakeGetErrorText(CUresult error, const char** text, bool name) {
  struct Known {
    CUresult code;
    const char* name;
    const char* text;
  };
  static constexpr Known kKnown[] = {
      {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
      {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
      {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
      {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
      {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
      {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
      {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
      {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
      {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
      {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
      {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
      {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
       "an illegal memory access was encountered"},
      {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
      {CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED",
       "context is destroyed"},
      {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
       "part or all of the requested memory range is already mapped"},
      {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
       "pointer does not correspond to a registered memory region"},
      {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
  };
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (const Known& known : kKnown) {
    if (known.code == error) {
      *text = name ? known.name : known.text;
      return CUDA_SUCCESS;
    }
  }
  // As the driver answers for codes it does not know.
  *text = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult FakeGetErrorName(CUresult error, const char** name) {
  CUDAFS_FAKE_ENTER("cuGetErrorName");
  return FakeGetErrorText(error, name, /*name=*/true);
}

CUresult FakeGetErrorString(CUresult error, const char** text) {
  CUDAFS_FAKE_ENTER("cuGetErrorString");
  return FakeGetErrorText(error, text, /*name=*/false);
}

CUresult FakeModuleLoadData(CUmodule* module, const void* image) {
  CUDAFS_FAKE_ENTER("cuModuleLoadData");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const uintptr_t made = NewHandle();
  s.modules.insert(made);
  *module = reinterpret_cast<CUmodule>(made);
  return CUDA_SUCCESS;
}

CUresult FakeModuleUnload(CUmodule module) {
  CUDAFS_FAKE_ENTER("cuModuleUnload");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (s.modules.erase(reinterpret_cast<uintptr_t>(module)) == 0) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}

CUresult FakeModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  CUDAFS_FAKE_ENTER("cuModuleGetFunction");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (function == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!s.modules.contains(reinterpret_cast<uintptr_t>(module))) return CUDA_ERROR_INVALID_HANDLE;
  if (std::strcmp(name, kScatterKernelName) != 0) return CUDA_ERROR_NOT_FOUND;
  *function = reinterpret_cast<CUfunction>(reinterpret_cast<uintptr_t>(module) + kFunctionTag);
  return CUDA_SUCCESS;
}

// Runs the scatter kernel (scatter_kernel.h): pieces = {table, count}.
CUresult FakeLaunchKernel(CUfunction function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                          unsigned block_x, unsigned block_y, unsigned block_z,
                          unsigned shared_bytes, CUstream stream, void** parameters,
                          void** extra) {
  CUDAFS_FAKE_ENTER("cuLaunchKernel");
  CUDAFS_FAKE_NEED_CONTEXT();
  const auto id = reinterpret_cast<uintptr_t>(function);
  if ((id & 15) != kFunctionTag || !s.modules.contains(id - kFunctionTag)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (CUresult r = s.CheckStream(stream); r != CUDA_SUCCESS) return r;
  if (grid_x == 0 || grid_y == 0 || grid_z == 0 || block_x == 0 || block_y == 0 ||
      block_z == 0 || uint64_t{block_x} * block_y * block_z > 1024 || parameters == nullptr ||
      extra != nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const CUdeviceptr table = *static_cast<const CUdeviceptr*>(parameters[0]);
  const unsigned count = *static_cast<const unsigned*>(parameters[1]);
  // The GPU reads the table and every source through its own addressing:
  // device memory, or pinned or registered host memory.
  if (!s.KernelOperandOk(table, uint64_t{count} * sizeof(ScatterPiece), PROT_READ)) {
    return s.Fault();
  }
  std::vector<ScatterPiece> pieces(count);
  if (count != 0) {
    std::memcpy(pieces.data(), reinterpret_cast<const void*>(table), count * sizeof(ScatterPiece));
  }
  for (const ScatterPiece& piece : pieces) {
    if (!s.KernelOperandOk(piece.source, piece.length, PROT_READ) ||
        !s.KernelOperandOk(piece.destination, piece.length, PROT_READ | PROT_WRITE)) {
      return s.Fault();
    }
  }
  for (const ScatterPiece& piece : pieces) {
    if (piece.length == 0) continue;
    std::memmove(reinterpret_cast<void*>(piece.destination),
                 reinterpret_cast<const void*>(piece.source), piece.length);
  }
  return CUDA_SUCCESS;
}

CudaDriver MakeDriver() {
  CudaDriver driver;
  driver.version = CUDA_VERSION;
  driver.cuDriverGetVersion = FakeDriverGetVersion;
  driver.cuDeviceGetCount = FakeDeviceGetCount;
  driver.cuDeviceGet = FakeDeviceGet;
  driver.cuDeviceGetName = FakeDeviceGetName;
  driver.cuDeviceGetPCIBusId = FakeDeviceGetPCIBusId;
  driver.cuDeviceGetByPCIBusId = FakeDeviceGetByPCIBusId;
  driver.cuDeviceTotalMem = FakeDeviceTotalMem;
  driver.cuDeviceGetAttribute = FakeDeviceGetAttribute;
  driver.cuDevicePrimaryCtxRetain = FakeDevicePrimaryCtxRetain;
  driver.cuDevicePrimaryCtxRelease = FakeDevicePrimaryCtxRelease;
  driver.cuCtxSetCurrent = FakeCtxSetCurrent;
  driver.cuMemGetInfo = FakeMemGetInfo;
  driver.cuMemGetAllocationGranularity = FakeMemGetAllocationGranularity;
  driver.cuMemAddressReserve = FakeMemAddressReserve;
  driver.cuMemAddressFree = FakeMemAddressFree;
  driver.cuMemCreate = FakeMemCreate;
  driver.cuMemRelease = FakeMemRelease;
  driver.cuMemExportToShareableHandle = FakeMemExportToShareableHandle;
  driver.cuMemMap = FakeMemMap;
  driver.cuMemUnmap = FakeMemUnmap;
  driver.cuMemSetAccess = FakeMemSetAccess;
  driver.cuMemHostAlloc = FakeMemHostAlloc;
  driver.cuMemFreeHost = FakeMemFreeHost;
  driver.cuMemHostRegister = FakeMemHostRegister;
  driver.cuMemHostUnregister = FakeMemHostUnregister;
  driver.cuStreamCreate = FakeStreamCreate;
  driver.cuStreamDestroy = FakeStreamDestroy;
  driver.cuStreamSynchronize = FakeStreamSynchronize;
  driver.cuMemcpyAsync = FakeMemcpyAsync;
  driver.cuMemsetD8Async = FakeMemsetD8Async;
  driver.cuGetErrorName = FakeGetErrorName;
  driver.cuGetErrorString = FakeGetErrorString;
  driver.cuModuleLoadData = FakeModuleLoadData;
  driver.cuModuleUnload = FakeModuleUnload;
  driver.cuModuleGetFunction = FakeModuleGetFunction;
  driver.cuLaunchKernel = FakeLaunchKernel;
  driver.cuMemcpyBatchAsync = FakeMemcpyBatchAsync;
  // A new entry point in cuda_driver.h needs its fake here.
#define CUDAFS_FAKE_CHECK_SET(name) \
  if (driver.name == nullptr) Die("no fake for ", #name);
  CUDAFS_CUDA_ENTRY_POINTS(CUDAFS_FAKE_CHECK_SET)
  CUDAFS_CUDA_OPTIONAL_ENTRY_POINTS(CUDAFS_FAKE_CHECK_SET)
#undef CUDAFS_FAKE_CHECK_SET
  return driver;
}

#undef CUDAFS_FAKE_NEED_CONTEXT
#undef CUDAFS_FAKE_ENTER

}  // namespace
}  // namespace fake_cuda_internal

FakeCudaDriver::FakeCudaDriver(FakeGpuOptions options)
    : state_(std::make_unique<fake_cuda_internal::State>(std::move(options))) {
  fake_cuda_internal::State* expected = nullptr;
  if (!fake_cuda_internal::installed.compare_exchange_strong(expected, state_.get())) {
    fake_cuda_internal::Die("a second FakeCudaDriver while one is alive");
  }
  driver_ = fake_cuda_internal::MakeDriver();
}

FakeCudaDriver::~FakeCudaDriver() {
  fake_cuda_internal::installed.store(nullptr, std::memory_order_release);
}

void FakeCudaDriver::FailNext(absl::string_view entry_point, CUresult result, int count) {
  absl::MutexLock lock(&state_->mu);
  state_->FailNext(entry_point, result, count);
}

void FakeCudaDriver::set_vram_limit(uint64_t bytes) {
  absl::MutexLock lock(&state_->mu);
  state_->SetVramLimit(bytes);
}

FakeCudaDriver::Stats FakeCudaDriver::stats() const {
  absl::MutexLock lock(&state_->mu);
  return state_->Snapshot();
}

int FakeCudaDriver::calls(absl::string_view entry_point) const {
  absl::MutexLock lock(&state_->mu);
  return state_->Calls(entry_point);
}

}  // namespace cudafs
