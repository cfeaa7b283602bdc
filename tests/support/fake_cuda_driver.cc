#include "tests/support/fake_cuda_driver.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "alloc/devices/scatter_kernel.h"

namespace cudafs {
namespace fake_cuda_internal {
namespace {

constexpr uint64_t kGranule = uint64_t{2} << 20;

// A call made on no device in particular, or a failure for any device.
constexpr int kNoDevice = -1;

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

// Errors after which the driver refuses all work in the context.
bool IsSticky(CUresult result) {
  switch (result) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
      return true;
    default:
      return false;
  }
}

// One fake GPU.
struct Gpu {
  explicit Gpu(FakeGpuOptions given) : options(std::move(given)), vram_limit(options.vram_limit) {}

  FakeGpuOptions options;
  uint64_t vram_limit;
  uint64_t used_by_others = 0;
  // The primary context: null while it does not exist.
  CUcontext context = nullptr;
  int context_references = 0;
  CUresult sticky = CUDA_SUCCESS;  // set: the context is unusable
  int contexts_created = 0;
  int leaked_at_destroy = 0;
  uint64_t largest_create = 0;
  int pageable_host_copies = 0;
};

// A reservation or a range of host memory, and the device whose context
// made it (and frees it with itself).
struct Range {
  uint64_t size;
  int device;
  bool portable = true;  // host memory every context's kernels may address
};

// Ranges by start address.
using Ranges = absl::btree_map<uintptr_t, Range>;

struct Mapping {
  uint64_t size;
  CUmemGenericAllocationHandle handle;
  std::vector<int> access;  // by device; PROT_NONE until cuMemSetAccess
};

struct Physical {
  int fd;
  uint64_t size;
  int device;               // where it is: counts against this device's memory
  int owner;                // whose context made it, and frees it
  bool exportable = false;  // made for POSIX file-descriptor handles
  int mappings = 0;
  bool released = false;  // freed once released and unmapped
  // Another handle of memory made elsewhere (an importer's): counts on the
  // maker's side only.
  bool imported = false;
};

struct Failure {
  CUresult result;
  int remaining;  // or FakeCudaDriver::kAlways
};

bool Overlaps(const Ranges& ranges, uintptr_t start, uint64_t length) {
  auto it = ranges.upper_bound(start);
  if (it != ranges.end() && it->first < start + length) return true;
  if (it == ranges.begin()) return false;
  --it;
  return start < it->first + it->second.size;
}

// The range holding all of [start, +length), or null.
const Range* Containing(const Ranges& ranges, uintptr_t start, uint64_t length) {
  auto it = ranges.upper_bound(start);
  if (it == ranges.begin()) return nullptr;
  --it;
  return start + length <= it->first + it->second.size ? &it->second : nullptr;
}

// Gives a mapped range back to its bare reservation.
void MakeBare(uintptr_t start, uint64_t size) {
  mmap(reinterpret_cast<void*>(start), size, PROT_NONE,
       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

}  // namespace

class State {
 public:
  explicit State(std::vector<FakeGpuOptions> options)
      : device_count_(static_cast<int>(options.size())) {
    if (options.empty()) Die("a FakeCudaDriver needs at least one GPU");
    for (size_t i = 0; i < options.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        // cuDeviceGetByPCIBusId could not tell them apart.
        if (absl::EqualsIgnoreCase(options[i].pci_bus_id, options[j].pci_bus_id)) {
          Die("two fake GPUs with PCI bus id ", options[i].pci_bus_id);
        }
      }
    }
    for (FakeGpuOptions& gpu : options) gpus_.emplace_back(std::move(gpu));
#define CUDAFS_FAKE_KNOWN(name) calls_[#name] = 0;
    CUDAFS_CUDA_ENTRY_POINTS(CUDAFS_FAKE_KNOWN)
    CUDAFS_CUDA_OPTIONAL_ENTRY_POINTS(CUDAFS_FAKE_KNOWN)
#undef CUDAFS_FAKE_KNOWN
  }

  ~State() {
    absl::MutexLock lock(&mu);
    for (int device = 0; device < DeviceCount(); ++device) FreeMadeUnder(device);
  }

  int DeviceCount() const { return device_count_; }
  bool ValidDevice(int device) const { return device >= 0 && device < DeviceCount(); }

  // A device the caller has checked.
  Gpu& gpu(int device) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return gpus_[device]; }
  const Gpu& gpu(int device) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return gpus_[device]; }

  // For the test's own calls: a bad device is a bug in the test.
  void CheckDevice(int device) const {
    if (!ValidDevice(device)) Die("no such device: ", std::to_string(device));
  }

  // Counts a call made on `device` (or kNoDevice) and says whether a
  // failure was injected for it.
  CUresult Begin(absl::string_view entry_point, int device) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    ++calls_.find(entry_point)->second;
    CUresult result = ValidDevice(device) ? TakeFailure(entry_point, device) : CUDA_SUCCESS;
    if (result == CUDA_SUCCESS) result = TakeFailure(entry_point, kNoDevice);
    // As if the device had faulted in the call.
    if (IsSticky(result) && ValidDevice(device) && gpus_[device].context != nullptr) {
      gpus_[device].sticky = result;
    }
    return result;
  }

  void CheckKnown(absl::string_view entry_point) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (!calls_.contains(entry_point)) Die("no such entry point: ", entry_point);
  }

  // The device of `context` if this fake made it (destroyed or not), else
  // kNoDevice.
  int DeviceOf(CUcontext context) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = contexts_made.find(context);
    return it == contexts_made.end() ? kNoDevice : it->second;
  }

  // The device of the thread's current context, live or not.
  int CurrentDevice() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return DeviceOf(current_context); }

  // For calls that need a current context: sets `*device` to its device.
  CUresult NeedContext(int* device) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (current_context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    const int made_on = CurrentDevice();
    // Not ours: a context of an earlier fake, long destroyed.
    if (made_on == kNoDevice) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    const Gpu& made_by = gpus_[made_on];
    if (current_context != made_by.context) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    if (made_by.sticky != CUDA_SUCCESS) return made_by.sticky;
    *device = made_on;
    return CUDA_SUCCESS;
  }

  // A device fault: the context is unusable from now on.
  CUresult Fault(int device) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    gpus_[device].sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
    return CUDA_ERROR_ILLEGAL_ADDRESS;
  }

  // "domain:bus:device.function", or without the domain; kNoDevice when no
  // device has it.
  int FindBusId(const char* bus_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (bus_id == nullptr) return kNoDevice;
    const absl::string_view theirs = bus_id;
    const bool short_form = std::count(theirs.begin(), theirs.end(), ':') == 1;
    for (int device = 0; device < DeviceCount(); ++device) {
      absl::string_view ours = gpus_[device].options.pci_bus_id;
      if (short_form) ours = ours.substr(ours.find(':') + 1);
      if (absl::EqualsIgnoreCase(ours, theirs)) return device;
    }
    return kNoDevice;
  }

  // Streams and modules work only in the context that made them.
  CUresult CheckStream(CUstream stream, int device) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) {
      return CUDA_SUCCESS;
    }
    auto it = streams.find(reinterpret_cast<uintptr_t>(stream));
    return it != streams.end() && it->second == device ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
  }

  bool HasModule(uintptr_t module, int device) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = modules.find(module);
    return it != modules.end() && it->second == device;
  }

  // Whether [start, +length) lies in mapped device memory whose access
  // allows `prot` to `device`.
  bool DeviceAccessible(uintptr_t start, uint64_t length, int prot, int device) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (uintptr_t at = start; at < start + length;) {
      auto it = mappings.upper_bound(at);
      if (it == mappings.begin()) return false;
      --it;
      if (at >= it->first + it->second.size || (it->second.access[device] & prot) != prot) {
        return false;
      }
      at = it->first + it->second.size;
    }
    return true;
  }

  // A copy's operand: an address in a reservation is device memory, which
  // must be accessible to the copying device; any other is host memory
  // (pageable or not).
  bool CopyOperandOk(uintptr_t start, uint64_t length, int prot, int device) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (length > UINTPTR_MAX - start) return false;
    if (!Overlaps(reservations, start, length)) return true;
    return DeviceAccessible(start, length, prot, device);
  }

  // What a kernel on `device` may touch: accessible device memory, or host
  // memory the GPU can address (pinned or registered, by its context or as
  // portable).
  bool KernelOperandOk(uintptr_t start, uint64_t length, int prot, int device) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (length > UINTPTR_MAX - start) return false;
    if (Overlaps(reservations, start, length)) {
      return DeviceAccessible(start, length, prot, device);
    }
    for (const Ranges* host : {&pinned, &registered}) {
      const Range* range = Containing(*host, start, length);
      if (range != nullptr && (range->portable || range->device == device)) return true;
    }
    return false;
  }

  // Counts a copy on `device` between `to` and `from` that the driver
  // would stage through pinned memory of its own: one whose host operand
  // the device's context does not hold pinned.
  void CountPageableCopy(uintptr_t to, uintptr_t from, uint64_t length, int device)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (const uintptr_t start : {to, from}) {
      if (length != 0 && !Overlaps(reservations, start, length) &&
          !KernelOperandOk(start, length, PROT_READ, device)) {
        ++gpus_[device].pageable_host_copies;
        return;
      }
    }
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

  // Drops the mapping at `start`, leaving the bare reservation.
  void Unmap(uintptr_t start) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = mappings.find(start);
    const CUmemGenericAllocationHandle handle = it->second.handle;
    MakeBare(start, it->second.size);
    mappings.erase(it);
    --physical.at(handle).mappings;
    FreePhysicalIfUnused(handle);
  }

  void FreePhysicalIfUnused(CUmemGenericAllocationHandle handle)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = physical.find(handle);
    if (!it->second.released || it->second.mappings != 0) return;
    close(it->second.fd);
    physical.erase(it);
  }

  void DestroyContext(int device) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Gpu& destroyed = gpus_[device];
    destroyed.leaked_at_destroy += FreeMadeUnder(device);
    destroyed.context = nullptr;
    destroyed.sticky = CUDA_SUCCESS;
  }

  FakeCudaDriver::Stats Snapshot(int device) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const Gpu& of = gpus_[device];
    FakeCudaDriver::Stats stats;
    stats.contexts_created = of.contexts_created;
    stats.live_contexts = of.context != nullptr ? 1 : 0;
    for (const auto& [stream, made_on] : streams) stats.live_streams += made_on == device;
    for (const auto& [module, made_on] : modules) stats.live_modules += made_on == device;
    for (const auto& [handle, allocation] : physical) {
      if (allocation.device != device) continue;
      ++stats.live_physical_allocations;
      stats.physical_bytes += allocation.size;
    }
    for (const auto& [start, mapping] : mappings) {
      if (physical.at(mapping.handle).device == device) stats.mapped_bytes += mapping.size;
    }
    stats.reserved_bytes = BytesMadeUnder(reservations, device);
    stats.pinned_host_bytes = BytesMadeUnder(pinned, device);
    stats.registered_host_bytes = BytesMadeUnder(registered, device);
    stats.leaked_at_destroy = of.leaked_at_destroy;
    stats.largest_create = of.largest_create;
    stats.pageable_host_copies = of.pageable_host_copies;
    return stats;
  }

  uint64_t PhysicalBytesOn(int device) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    uint64_t bytes = 0;
    for (const auto& [handle, allocation] : physical) {
      if (allocation.device == device && !allocation.imported) bytes += allocation.size;
    }
    return bytes;
  }

  // What the device's memory holds, ours and the other programs'.
  uint64_t UsedOn(int device) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const uint64_t ours = PhysicalBytesOn(device);
    const uint64_t others = gpus_[device].used_by_others;
    return others > UINT64_MAX - ours ? UINT64_MAX : ours + others;
  }

  uint64_t VramLimit(int device) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return std::min(gpus_[device].options.total_bytes, gpus_[device].vram_limit);
  }

  void FailNext(absl::string_view entry_point, CUresult result, int count, int device)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    CheckKnown(entry_point);
    auto key = std::make_pair(std::string(entry_point), device);
    if (count == 0) {
      failures_.erase(key);
    } else {
      failures_.insert_or_assign(std::move(key), Failure{result, count});
    }
  }

  int Calls(absl::string_view entry_point) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    CheckKnown(entry_point);
    return calls_.find(entry_point)->second;
  }

  mutable absl::Mutex mu;

  // Every context this fake made, with its device, for cuCtxSetCurrent to
  // tell its own (destroyed ones included) from garbage.
  absl::flat_hash_map<CUcontext, int> contexts_made ABSL_GUARDED_BY(mu);

  // What the live contexts hold, each with the device whose context made
  // it. Addresses are unified, so one map of each for all devices.
  absl::flat_hash_map<uintptr_t, int> streams ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<uintptr_t, int> modules ABSL_GUARDED_BY(mu);
  Ranges reservations ABSL_GUARDED_BY(mu);
  absl::btree_map<uintptr_t, Mapping> mappings ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<CUmemGenericAllocationHandle, Physical> physical ABSL_GUARDED_BY(mu);
  Ranges pinned ABSL_GUARDED_BY(mu);
  Ranges registered ABSL_GUARDED_BY(mu);

 private:
  CUresult TakeFailure(absl::string_view entry_point, int device)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = failures_.find(std::make_pair(std::string(entry_point), device));
    if (it == failures_.end()) return CUDA_SUCCESS;
    const CUresult result = it->second.result;
    if (it->second.remaining != FakeCudaDriver::kAlways && --it->second.remaining == 0) {
      failures_.erase(it);
    }
    return result;
  }

  static uint64_t BytesMadeUnder(const Ranges& ranges, int device) {
    uint64_t bytes = 0;
    for (const auto& [start, range] : ranges) {
      if (range.device == device) bytes += range.size;
    }
    return bytes;
  }

  // Gives back to the system what the device's context made and says how
  // many things that was. Memory of another device mapped in its
  // reservations stays; its own memory mapped in another context's
  // reservation is unmapped there, so that touching it faults.
  int FreeMadeUnder(int device) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    int freed = 0;
    // Unmapping a reservation drops its mappings with it.
    for (auto it = reservations.begin(); it != reservations.end();) {
      if (it->second.device != device) {
        ++it;
        continue;
      }
      const uintptr_t start = it->first;
      const uint64_t size = it->second.size;
      for (auto mapping = mappings.lower_bound(start);
           mapping != mappings.end() && mapping->first < start + size;) {
        const CUmemGenericAllocationHandle handle = mapping->second.handle;
        mapping = mappings.erase(mapping);
        --physical.at(handle).mappings;
        FreePhysicalIfUnused(handle);
      }
      munmap(reinterpret_cast<void*>(start), size);
      it = reservations.erase(it);
      ++freed;
    }
    std::vector<CUmemGenericAllocationHandle> handles;
    for (const auto& [handle, allocation] : physical) {
      if (allocation.owner == device) handles.push_back(handle);
    }
    for (CUmemGenericAllocationHandle handle : handles) {
      for (auto mapping = mappings.begin(); mapping != mappings.end();) {
        if (mapping->second.handle != handle) {
          ++mapping;
          continue;
        }
        MakeBare(mapping->first, mapping->second.size);
        mapping = mappings.erase(mapping);
      }
      close(physical.at(handle).fd);
      physical.erase(handle);
    }
    freed += static_cast<int>(handles.size());
    for (Ranges* host : {&pinned, &registered}) {
      for (auto it = host->begin(); it != host->end();) {
        if (it->second.device != device) {
          ++it;
          continue;
        }
        if (host == &pinned) munmap(reinterpret_cast<void*>(it->first), it->second.size);
        it = host->erase(it);
        ++freed;
      }
    }
    for (absl::flat_hash_map<uintptr_t, int>* made : {&streams, &modules}) {
      std::vector<uintptr_t> gone;
      for (const auto& [handle, made_on] : *made) {
        if (made_on == device) gone.push_back(handle);
      }
      for (uintptr_t handle : gone) made->erase(handle);
      freed += static_cast<int>(gone.size());
    }
    return freed;
  }

  const int device_count_;  // gpus_.size(), fixed
  std::vector<Gpu> gpus_ ABSL_GUARDED_BY(mu);
  // Keyed by entry point name; every known name is present.
  absl::flat_hash_map<std::string, int> calls_ ABSL_GUARDED_BY(mu);
  // By entry point name and device, kNoDevice for any.
  absl::flat_hash_map<std::pair<std::string, int>, Failure> failures_ ABSL_GUARDED_BY(mu);
};

namespace {

std::atomic<State*> installed{nullptr};

State& Installed() {
  State* state = installed.load(std::memory_order_acquire);
  if (state == nullptr) Die("a CUDA entry point was called with no FakeCudaDriver alive");
  return *state;
}

// Every fake starts so: find the state, lock it, count the call as made on
// `device` (kNoDevice for none), and return an injected failure if there is
// one. `device` may use `s`.
#define CUDAFS_FAKE_ENTER_ON(name, device)                                    \
  State& s = Installed();                                                     \
  absl::MutexLock lock(&s.mu);                                                \
  if (CUresult injected = s.Begin(name, (device)); injected != CUDA_SUCCESS) \
  return injected

// A call naming no device is made on its current context's.
#define CUDAFS_FAKE_ENTER(name) CUDAFS_FAKE_ENTER_ON(name, s.CurrentDevice())

// Sets `current`, the device of the current context.
#define CUDAFS_FAKE_NEED_CONTEXT()                                                     \
  int current = kNoDevice;                                                             \
  if (CUresult no_context = s.NeedContext(&current); no_context != CUDA_SUCCESS) \
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
  *count = s.DeviceCount();
  return CUDA_SUCCESS;
}

CUresult FakeDeviceGet(CUdevice* device, int ordinal) {
  CUDAFS_FAKE_ENTER_ON("cuDeviceGet", ordinal);
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!s.ValidDevice(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

// Writes `text` as the driver writes strings: cut to fit, NUL-terminated.
// No text: no such device.
CUresult WriteString(const std::string* text, char* out, int length) {
  if (out == nullptr || length <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (text == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  const size_t n = std::min(text->size(), static_cast<size_t>(length) - 1);
  std::memcpy(out, text->data(), n);
  out[n] = '\0';
  return CUDA_SUCCESS;
}

CUresult FakeDeviceGetName(char* name, int length, CUdevice device) {
  CUDAFS_FAKE_ENTER_ON("cuDeviceGetName", device);
  return WriteString(s.ValidDevice(device) ? &s.gpu(device).options.name : nullptr, name, length);
}

CUresult FakeDeviceGetPCIBusId(char* bus_id, int length, CUdevice device) {
  CUDAFS_FAKE_ENTER_ON("cuDeviceGetPCIBusId", device);
  return WriteString(s.ValidDevice(device) ? &s.gpu(device).options.pci_bus_id : nullptr, bus_id,
                     length);
}

CUresult FakeDeviceGetByPCIBusId(CUdevice* device, const char* bus_id) {
  CUDAFS_FAKE_ENTER_ON("cuDeviceGetByPCIBusId", s.FindBusId(bus_id));
  if (device == nullptr || bus_id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const int found = s.FindBusId(bus_id);
  if (found == kNoDevice) return CUDA_ERROR_INVALID_DEVICE;
  *device = found;
  return CUDA_SUCCESS;
}

CUresult FakeDeviceTotalMem(size_t* bytes, CUdevice device) {
  CUDAFS_FAKE_ENTER_ON("cuDeviceTotalMem", device);
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!s.ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = s.gpu(device).options.total_bytes;
  return CUDA_SUCCESS;
}

CUresult FakeDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  CUDAFS_FAKE_ENTER_ON("cuDeviceGetAttribute", device);
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!s.ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
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
  CUDAFS_FAKE_ENTER_ON("cuDevicePrimaryCtxRetain", device);
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!s.ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  Gpu& gpu = s.gpu(device);
  if (gpu.context == nullptr) {
    gpu.context = reinterpret_cast<CUcontext>(NewHandle());
    s.contexts_made.emplace(gpu.context, device);
    ++gpu.contexts_created;
  }
  ++gpu.context_references;
  *context = gpu.context;
  return CUDA_SUCCESS;
}

CUresult FakeDevicePrimaryCtxRelease(CUdevice device) {
  CUDAFS_FAKE_ENTER_ON("cuDevicePrimaryCtxRelease", device);
  if (!s.ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  Gpu& gpu = s.gpu(device);
  // As documented: releasing what was not retained.
  if (gpu.context_references == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--gpu.context_references == 0) s.DestroyContext(device);
  return CUDA_SUCCESS;
}

CUresult FakeCtxSetCurrent(CUcontext context) {
  CUDAFS_FAKE_ENTER_ON("cuCtxSetCurrent", s.DeviceOf(context));
  // A destroyed context may be made current (the driver allows it); calls
  // through it then fail.
  if (context != nullptr && s.DeviceOf(context) == kNoDevice) return CUDA_ERROR_INVALID_CONTEXT;
  current_context = context;
  return CUDA_SUCCESS;
}

CUresult FakeMemGetInfo(size_t* free, size_t* total) {
  CUDAFS_FAKE_ENTER("cuMemGetInfo");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t used = s.UsedOn(current);
  const uint64_t limit = s.VramLimit(current);
  *free = used < limit ? limit - used : 0;
  *total = s.gpu(current).options.total_bytes;
  return CUDA_SUCCESS;
}

// The device a CUmemLocation names, or kNoDevice.
int LocationDevice(const State& s, const CUmemLocation& location) {
  return location.type == CU_MEM_LOCATION_TYPE_DEVICE && s.ValidDevice(location.id)
             ? location.id
             : kNoDevice;
}

CUresult FakeMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                         CUmemAllocationGranularity_flags option) {
  CUDAFS_FAKE_ENTER_ON("cuMemGetAllocationGranularity",
                       prop != nullptr ? LocationDevice(s, prop->location) : s.CurrentDevice());
  if (granularity == nullptr || prop == nullptr ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
       option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!s.ValidDevice(prop->location.id)) return CUDA_ERROR_INVALID_DEVICE;
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
  s.reservations.emplace(start, Range{size, current});
  *address = start;
  return CUDA_SUCCESS;
}

CUresult FakeMemAddressFree(CUdeviceptr address, size_t size) {
  CUDAFS_FAKE_ENTER("cuMemAddressFree");
  auto it = s.reservations.find(address);
  if (it == s.reservations.end() || it->second.size != size) return CUDA_ERROR_INVALID_VALUE;
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
  CUDAFS_FAKE_ENTER_ON("cuMemCreate",
                       prop != nullptr ? LocationDevice(s, prop->location) : s.CurrentDevice());
  const int device = prop != nullptr ? LocationDevice(s, prop->location) : kNoDevice;
  if (device != kNoDevice) {
    s.gpu(device).largest_create = std::max<uint64_t>(s.gpu(device).largest_create, size);
  }
  CUDAFS_FAKE_NEED_CONTEXT();
  if (handle == nullptr || prop == nullptr || size == 0 || size % kGranule != 0 || flags != 0 ||
      prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE &&
       prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (device == kNoDevice) return CUDA_ERROR_INVALID_DEVICE;
  const uint64_t used = s.UsedOn(device);
  const uint64_t limit = s.VramLimit(device);
  if (used > limit || size > limit - used) return CUDA_ERROR_OUT_OF_MEMORY;
  // A memfd keeps the bytes while nothing maps them, as VRAM does.
  const int fd = memfd_create("cudafs-fake-vram", MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const CUmemGenericAllocationHandle made = NewHandle();
  s.physical.emplace(
      made, Physical{fd, size, device, current,
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

// Only the fake's own exports import: their memfd names the allocation.
CUresult FakeMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* shareable,
                                          CUmemAllocationHandleType type) {
  CUDAFS_FAKE_ENTER("cuMemImportFromShareableHandle");
  CUDAFS_FAKE_NEED_CONTEXT();
  const int given = static_cast<int>(reinterpret_cast<intptr_t>(shareable));
  struct stat theirs;
  if (handle == nullptr || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
      fstat(given, &theirs) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const Physical* made = nullptr;
  for (const auto& [h, allocation] : s.physical) {
    struct stat ours;
    if (!allocation.imported && fstat(allocation.fd, &ours) == 0 &&
        ours.st_ino == theirs.st_ino && ours.st_dev == theirs.st_dev) {
      made = &allocation;
      break;
    }
  }
  if (made == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const int fd = fcntl(given, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  Physical imported{fd, made->size, made->device, current, false};
  imported.imported = true;
  const CUmemGenericAllocationHandle handle_made = NewHandle();
  s.physical.emplace(handle_made, imported);
  *handle = handle_made;
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
  if (Containing(s.reservations, address, size) == nullptr) return CUDA_ERROR_INVALID_VALUE;
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
  s.mappings.emplace(address, Mapping{size, handle, std::vector<int>(s.DeviceCount(), PROT_NONE)});
  ++allocation->second.mappings;
  return CUDA_SUCCESS;
}

CUresult FakeMemUnmap(CUdeviceptr address, size_t size) {
  CUDAFS_FAKE_ENTER("cuMemUnmap");
  // Only whole mappings, as the driver requires.
  const std::vector<uintptr_t> unmapped = s.WholeMappings(address, size);
  if (unmapped.empty()) return CUDA_ERROR_INVALID_VALUE;
  for (uintptr_t start : unmapped) s.Unmap(start);
  return CUDA_SUCCESS;
}

CUresult FakeMemSetAccess(CUdeviceptr address, size_t size, const CUmemAccessDesc* desc,
                          size_t count) {
  CUDAFS_FAKE_ENTER_ON("cuMemSetAccess", desc != nullptr && count != 0
                                             ? LocationDevice(s, desc[0].location)
                                             : s.CurrentDevice());
  if (desc == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  // One entry a device, any device: peer access is always possible here.
  std::vector<int> prot(count);
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (!s.ValidDevice(desc[i].location.id)) return CUDA_ERROR_INVALID_DEVICE;
    switch (desc[i].flags) {
      case CU_MEM_ACCESS_FLAGS_PROT_NONE: prot[i] = PROT_NONE; break;
      case CU_MEM_ACCESS_FLAGS_PROT_READ: prot[i] = PROT_READ; break;
      case CU_MEM_ACCESS_FLAGS_PROT_READWRITE: prot[i] = PROT_READ | PROT_WRITE; break;
      default: return CUDA_ERROR_INVALID_VALUE;
    }
  }
  // Whole mappings only: the fake keeps access per mapping.
  const std::vector<uintptr_t> changed = s.WholeMappings(address, size);
  if (changed.empty()) return CUDA_ERROR_INVALID_VALUE;
  for (uintptr_t start : changed) {
    Mapping& mapping = s.mappings.at(start);
    for (size_t i = 0; i < count; ++i) mapping.access[desc[i].location.id] = prot[i];
    // The host sees what some device may do.
    int host = PROT_NONE;
    for (int device_prot : mapping.access) host |= device_prot;
    mprotect(reinterpret_cast<void*>(start), mapping.size, host);
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
  s.pinned.emplace(reinterpret_cast<uintptr_t>(mapped),
                   Range{size, current, (flags & CU_MEMHOSTALLOC_PORTABLE) != 0});
  *memory = mapped;
  return CUDA_SUCCESS;
}

CUresult FakeMemFreeHost(void* memory) {
  CUDAFS_FAKE_ENTER("cuMemFreeHost");
  CUDAFS_FAKE_NEED_CONTEXT();
  auto it = s.pinned.find(reinterpret_cast<uintptr_t>(memory));
  if (it == s.pinned.end()) return CUDA_ERROR_INVALID_VALUE;
  munmap(memory, it->second.size);
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
  // Whichever context registered it, in the whole process.
  if (Overlaps(s.registered, start, size) || Overlaps(s.pinned, start, size)) {
    return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  }
  s.registered.emplace(start, Range{size, current, (flags & CU_MEMHOSTREGISTER_PORTABLE) != 0});
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
  s.streams.emplace(made, current);
  *stream = reinterpret_cast<CUstream>(made);
  return CUDA_SUCCESS;
}

CUresult FakeStreamDestroy(CUstream stream) {
  CUDAFS_FAKE_ENTER("cuStreamDestroy");
  CUDAFS_FAKE_NEED_CONTEXT();
  auto it = s.streams.find(reinterpret_cast<uintptr_t>(stream));
  if (it == s.streams.end() || it->second != current) return CUDA_ERROR_INVALID_HANDLE;
  s.streams.erase(it);
  return CUDA_SUCCESS;
}

CUresult FakeStreamSynchronize(CUstream stream) {
  CUDAFS_FAKE_ENTER("cuStreamSynchronize");
  CUDAFS_FAKE_NEED_CONTEXT();
  // Work ran at enqueue: nothing to wait for.
  return s.CheckStream(stream, current);
}

CUresult FakeStreamQuery(CUstream stream) {
  CUDAFS_FAKE_ENTER("cuStreamQuery");
  CUDAFS_FAKE_NEED_CONTEXT();
  // Work ran at enqueue: always done (FailNext with CUDA_ERROR_NOT_READY
  // makes it busy).
  return s.CheckStream(stream, current);
}

CUresult FakeMemcpyAsync(CUdeviceptr to, CUdeviceptr from, size_t length, CUstream stream) {
  CUDAFS_FAKE_ENTER("cuMemcpyAsync");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (CUresult r = s.CheckStream(stream, current); r != CUDA_SUCCESS) return r;
  if (!s.CopyOperandOk(from, length, PROT_READ, current) ||
      !s.CopyOperandOk(to, length, PROT_READ | PROT_WRITE, current)) {
    return s.Fault(current);
  }
  s.CountPageableCopy(to, from, length, current);
  if (length != 0) {
    std::memmove(reinterpret_cast<void*>(to), reinterpret_cast<const void*>(from), length);
  }
  return CUDA_SUCCESS;
}

CUresult FakeMemsetD8Async(CUdeviceptr to, unsigned char value, size_t length, CUstream stream) {
  CUDAFS_FAKE_ENTER("cuMemsetD8Async");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (CUresult r = s.CheckStream(stream, current); r != CUDA_SUCCESS) return r;
  if (length == 0) return CUDA_SUCCESS;
  if (!s.KernelOperandOk(to, length, PROT_READ | PROT_WRITE, current)) {
    // Pageable host memory is no device pointer; a device address that is
    // not mapped faults.
    return Overlaps(s.reservations, to, length) ? s.Fault(current) : CUDA_ERROR_INVALID_VALUE;
  }
  std::memset(reinterpret_cast<void*>(to), value, length);
  return CUDA_SUCCESS;
}

CUresult FakeMemcpyBatchAsync(CUdeviceptr* to, CUdeviceptr* from, size_t* lengths, size_t count,
                              CUmemcpyAttributes* attributes, size_t* attribute_indices,
                              size_t attribute_count, CUstream stream) {
  CUDAFS_FAKE_ENTER("cuMemcpyBatchAsync");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (CUresult r = s.CheckStream(stream, current); r != CUDA_SUCCESS) return r;
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
    if (!s.CopyOperandOk(from[i], lengths[i], PROT_READ, current) ||
        !s.CopyOperandOk(to[i], lengths[i], PROT_READ | PROT_WRITE, current)) {
      return s.Fault(current);
    }
  }
  for (size_t i = 0; i < count; ++i) {
    s.CountPageableCopy(to[i], from[i], lengths[i], current);
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
  s.modules.emplace(made, current);
  *module = reinterpret_cast<CUmodule>(made);
  return CUDA_SUCCESS;
}

CUresult FakeModuleUnload(CUmodule module) {
  CUDAFS_FAKE_ENTER("cuModuleUnload");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (!s.HasModule(reinterpret_cast<uintptr_t>(module), current)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  s.modules.erase(reinterpret_cast<uintptr_t>(module));
  return CUDA_SUCCESS;
}

CUresult FakeModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  CUDAFS_FAKE_ENTER("cuModuleGetFunction");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (function == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!s.HasModule(reinterpret_cast<uintptr_t>(module), current)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
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
  if ((id & 15) != kFunctionTag || !s.HasModule(id - kFunctionTag, current)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (CUresult r = s.CheckStream(stream, current); r != CUDA_SUCCESS) return r;
  if (grid_x == 0 || grid_y == 0 || grid_z == 0 || block_x == 0 || block_y == 0 ||
      block_z == 0 || uint64_t{block_x} * block_y * block_z > 1024 || parameters == nullptr ||
      extra != nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const CUdeviceptr table = *static_cast<const CUdeviceptr*>(parameters[0]);
  const unsigned count = *static_cast<const unsigned*>(parameters[1]);
  // The GPU reads the table and every source through its own addressing:
  // device memory, or pinned or registered host memory.
  if (!s.KernelOperandOk(table, uint64_t{count} * sizeof(ScatterPiece), PROT_READ, current)) {
    return s.Fault(current);
  }
  std::vector<ScatterPiece> pieces(count);
  if (count != 0) {
    std::memcpy(pieces.data(), reinterpret_cast<const void*>(table), count * sizeof(ScatterPiece));
  }
  for (const ScatterPiece& piece : pieces) {
    if (!s.KernelOperandOk(piece.source, piece.length, PROT_READ, current) ||
        !s.KernelOperandOk(piece.destination, piece.length, PROT_READ | PROT_WRITE, current)) {
      return s.Fault(current);
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
  driver.cuMemImportFromShareableHandle = FakeMemImportFromShareableHandle;
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
  driver.cuStreamQuery = FakeStreamQuery;
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
#undef CUDAFS_FAKE_ENTER_ON

}  // namespace
}  // namespace fake_cuda_internal

FakeCudaDriver::FakeCudaDriver(FakeGpuOptions options)
    : FakeCudaDriver(std::vector<FakeGpuOptions>{std::move(options)}) {}

FakeCudaDriver::FakeCudaDriver(std::vector<FakeGpuOptions> gpus)
    : state_(std::make_unique<fake_cuda_internal::State>(std::move(gpus))) {
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
  state_->FailNext(entry_point, result, count, fake_cuda_internal::kNoDevice);
}

void FakeCudaDriver::FailNext(absl::string_view entry_point, CUresult result, int count,
                              int device) {
  state_->CheckDevice(device);
  absl::MutexLock lock(&state_->mu);
  state_->FailNext(entry_point, result, count, device);
}

void FakeCudaDriver::set_vram_limit(uint64_t bytes) { set_vram_limit(0, bytes); }

void FakeCudaDriver::set_vram_limit(int device, uint64_t bytes) {
  state_->CheckDevice(device);
  absl::MutexLock lock(&state_->mu);
  state_->gpu(device).vram_limit = bytes;
}

void FakeCudaDriver::set_used_by_others(int device, uint64_t bytes) {
  state_->CheckDevice(device);
  absl::MutexLock lock(&state_->mu);
  state_->gpu(device).used_by_others = bytes;
}

FakeCudaDriver::Stats FakeCudaDriver::stats() const {
  absl::MutexLock lock(&state_->mu);
  Stats sum;
  for (int device = 0; device < state_->DeviceCount(); ++device) {
    const Stats one = state_->Snapshot(device);
    sum.contexts_created += one.contexts_created;
    sum.live_contexts += one.live_contexts;
    sum.live_streams += one.live_streams;
    sum.live_modules += one.live_modules;
    sum.live_physical_allocations += one.live_physical_allocations;
    sum.physical_bytes += one.physical_bytes;
    sum.mapped_bytes += one.mapped_bytes;
    sum.reserved_bytes += one.reserved_bytes;
    sum.pinned_host_bytes += one.pinned_host_bytes;
    sum.registered_host_bytes += one.registered_host_bytes;
    sum.leaked_at_destroy += one.leaked_at_destroy;
    sum.largest_create = std::max(sum.largest_create, one.largest_create);
    sum.pageable_host_copies += one.pageable_host_copies;
  }
  return sum;
}

FakeCudaDriver::Stats FakeCudaDriver::stats(int device) const {
  state_->CheckDevice(device);
  absl::MutexLock lock(&state_->mu);
  return state_->Snapshot(device);
}

int FakeCudaDriver::calls(absl::string_view entry_point) const {
  absl::MutexLock lock(&state_->mu);
  return state_->Calls(entry_point);
}

}  // namespace cudafs
