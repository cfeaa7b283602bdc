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
#include <functional>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "alloc/devices/scatter_kernel.h"
#include "tests/support/fake_cuda_program_api.h"

namespace cudafs {
namespace fake_cuda_internal {
namespace {

constexpr uint64_t kGranule = uint64_t{2} << 20;

// The name of a device's memfds, its ordinal appended: another process
// importing one learns the device from it.
constexpr absl::string_view kVramName = "cudafs-fake-vram-";

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
thread_local cu::CUcontext current_context = nullptr;

// Errors after which the driver refuses all work in the context.
bool IsSticky(cu::CUresult result) {
  switch (result) {
    case cu::CUDA_ERROR_ILLEGAL_ADDRESS:
    case cu::CUDA_ERROR_LAUNCH_TIMEOUT:
    case cu::CUDA_ERROR_ASSERT:
    case cu::CUDA_ERROR_HARDWARE_STACK_ERROR:
    case cu::CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case cu::CUDA_ERROR_MISALIGNED_ADDRESS:
    case cu::CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case cu::CUDA_ERROR_INVALID_PC:
    case cu::CUDA_ERROR_LAUNCH_FAILED:
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
  cu::CUcontext context = nullptr;
  int context_references = 0;
  cu::CUresult sticky = cu::CUDA_SUCCESS;  // set: the context is unusable
  int contexts_created = 0;
  int leaked_at_destroy = 0;
  uint64_t largest_create = 0;
  int pageable_host_copies = 0;
  // cuDeviceGetDefaultMemPool's handle, fixed for the fake's lifetime.
  uintptr_t default_pool = 0;
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
  cu::CUmemGenericAllocationHandle handle;
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
  cu::CUresult result;
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
    for (FakeGpuOptions& gpu : options) {
      gpus_.emplace_back(std::move(gpu));
      gpus_.back().default_pool = NewHandle();
    }
#define CUDAFS_FAKE_KNOWN(name) calls_[#name] = 0;
    CUDAFS_CUDA_ENTRY_POINTS(CUDAFS_FAKE_KNOWN)
    CUDAFS_CUDA_OPTIONAL_ENTRY_POINTS(CUDAFS_FAKE_KNOWN)
    CUDAFS_FAKE_KNOWN(cuCtxGetCurrent)
    CUDAFS_FAKE_KNOWN(cuCtxGetDevice)
    CUDAFS_FAKE_KNOWN(cuDeviceCanAccessPeer)
#undef CUDAFS_FAKE_KNOWN
#define CUDAFS_FAKE_KNOWN_PROGRAM(name, version) calls_[#name] = 0;
    CUDAFS_FAKE_PROGRAM_ENTRY_POINTS(CUDAFS_FAKE_KNOWN_PROGRAM)
#undef CUDAFS_FAKE_KNOWN_PROGRAM
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
  cu::CUresult Begin(absl::string_view entry_point, int device) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    ++calls_.find(entry_point)->second;
    cu::CUresult result = ValidDevice(device) ? TakeFailure(entry_point, device) : cu::CUDA_SUCCESS;
    if (result == cu::CUDA_SUCCESS) result = TakeFailure(entry_point, kNoDevice);
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
  int DeviceOf(cu::CUcontext context) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = contexts_made.find(context);
    return it == contexts_made.end() ? kNoDevice : it->second;
  }

  // The device of the thread's current context, live or not.
  int CurrentDevice() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return DeviceOf(current_context); }

  // For calls that need a current context: sets `*device` to its device.
  cu::CUresult NeedContext(int* device) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (current_context == nullptr) return cu::CUDA_ERROR_INVALID_CONTEXT;
    const int made_on = CurrentDevice();
    // Not ours: a context of an earlier fake, long destroyed.
    if (made_on == kNoDevice) return cu::CUDA_ERROR_CONTEXT_IS_DESTROYED;
    const Gpu& made_by = gpus_[made_on];
    if (current_context != made_by.context) return cu::CUDA_ERROR_CONTEXT_IS_DESTROYED;
    if (made_by.sticky != cu::CUDA_SUCCESS) return made_by.sticky;
    *device = made_on;
    return cu::CUDA_SUCCESS;
  }

  // A device fault: the context is unusable from now on.
  cu::CUresult Fault(int device) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    gpus_[device].sticky = cu::CUDA_ERROR_ILLEGAL_ADDRESS;
    return cu::CUDA_ERROR_ILLEGAL_ADDRESS;
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
  cu::CUresult CheckStream(cu::CUstream stream, int device) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (stream == nullptr || stream == cu::CU_STREAM_LEGACY || stream == cu::CU_STREAM_PER_THREAD) {
      return cu::CUDA_SUCCESS;
    }
    auto it = streams.find(reinterpret_cast<uintptr_t>(stream));
    return it != streams.end() && it->second == device ? cu::CUDA_SUCCESS
                                                       : cu::CUDA_ERROR_INVALID_HANDLE;
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
    for (const Ranges* host : {&pinned, &registered, &linear}) {
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
    const cu::CUmemGenericAllocationHandle handle = it->second.handle;
    MakeBare(start, it->second.size);
    mappings.erase(it);
    --physical.at(handle).mappings;
    FreePhysicalIfUnused(handle);
  }

  void FreePhysicalIfUnused(cu::CUmemGenericAllocationHandle handle)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = physical.find(handle);
    if (!it->second.released || it->second.mappings != 0) return;
    ErasePhysical(it);
  }

  // Frees a physical allocation's memory, which must be unmapped.
  void ErasePhysical(absl::flat_hash_map<cu::CUmemGenericAllocationHandle, Physical>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (it->second.imported) {
      --imports;
    } else {
      // An import of the same memory in this process keeps it, as the
      // driver keeps an allocation while any handle holds it.
      Physical* heir = nullptr;
      struct stat freed;
      if (imports > 0 && fstat(it->second.fd, &freed) == 0) {
        for (auto& [handle, allocation] : physical) {
          struct stat other;
          if (allocation.imported && fstat(allocation.fd, &other) == 0 &&
              other.st_ino == freed.st_ino && other.st_dev == freed.st_dev) {
            heir = &allocation;
          }
        }
      }
      if (heir != nullptr) {
        heir->imported = false;
        --imports;
      } else {
        GiveMemory(it->second.device, it->second.size);
      }
    }
    close(it->second.fd);
    physical.erase(it);
  }

  // Books `size` bytes on `device` for an allocation, or says there is no
  // room: within the device's limit, with what other programs hold (and,
  // shared, what other processes hold).
  bool TakeMemory(int device, uint64_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const uint64_t limit = VramLimit(device);
    if (budget != nullptr) {
      const uint64_t others = gpus_[device].used_by_others;
      return others <= limit && budget->Take(device, size, limit - others);
    }
    const uint64_t used = UsedOn(device);
    return used <= limit && size <= limit - used;
  }

  void GiveMemory(int device, uint64_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (budget != nullptr) budget->Give(device, size);
  }

  // Frees a cuMemAlloc-like allocation; returns the next one.
  Ranges::iterator EraseLinear(Ranges::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    munmap(reinterpret_cast<void*>(it->first), it->second.size);
    GiveMemory(it->second.device, it->second.size);
    return linear.erase(it);
  }

  void DestroyContext(int device) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Gpu& destroyed = gpus_[device];
    destroyed.leaked_at_destroy += FreeMadeUnder(device);
    destroyed.context = nullptr;
    destroyed.sticky = cu::CUDA_SUCCESS;
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
    for (const auto& [start, range] : linear) {
      if (range.device != device) continue;
      ++stats.live_linear_allocations;
      stats.linear_bytes += range.size;
    }
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

  // What the device's memory holds, ours and the other programs' (and
  // processes', shared).
  uint64_t UsedOn(int device) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const uint64_t ours = budget != nullptr
                              ? budget->Used(device)
                              : PhysicalBytesOn(device) + BytesMadeUnder(linear, device);
    const uint64_t others = gpus_[device].used_by_others;
    return others > UINT64_MAX - ours ? UINT64_MAX : ours + others;
  }

  uint64_t VramLimit(int device) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return std::min(gpus_[device].options.total_bytes, gpus_[device].vram_limit);
  }

  void FailNext(absl::string_view entry_point, cu::CUresult result, int count, int device)
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

  void SetHook(absl::string_view entry_point, std::function<void()> hook) {
    {
      absl::MutexLock lock(&mu);
      CheckKnown(entry_point);
    }
    absl::MutexLock lock(&hooks_mu_);
    if (hook) {
      hooks_.insert_or_assign(std::string(entry_point), std::move(hook));
    } else {
      hooks_.erase(entry_point);
    }
    any_hooks_.store(!hooks_.empty());
  }

  // Before mu is taken, so that a hook may block the call.
  void RunHook(absl::string_view entry_point) {
    if (!any_hooks_.load()) return;
    std::function<void()> hook;
    {
      absl::MutexLock lock(&hooks_mu_);
      const auto it = hooks_.find(entry_point);
      if (it == hooks_.end()) return;
      hook = it->second;
    }
    hook();
  }

  mutable absl::Mutex mu;

  // What cuDriverGetVersion says and cuGetProcAddress serves up to.
  int driver_version ABSL_GUARDED_BY(mu) = FakeCudaDriver::kDriverVersion;

  // Every context this fake made, with its device, for cuCtxSetCurrent to
  // tell its own (destroyed ones included) from garbage.
  absl::flat_hash_map<cu::CUcontext, int> contexts_made ABSL_GUARDED_BY(mu);

  // What the live contexts hold, each with the device whose context made
  // it. Addresses are unified, so one map of each for all devices.
  absl::flat_hash_map<uintptr_t, int> streams ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<uintptr_t, int> modules ABSL_GUARDED_BY(mu);
  Ranges reservations ABSL_GUARDED_BY(mu);
  absl::btree_map<uintptr_t, Mapping> mappings ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<cu::CUmemGenericAllocationHandle, Physical> physical ABSL_GUARDED_BY(mu);
  // Of them, imports: what a freed allocation looks for an heir among.
  int imports ABSL_GUARDED_BY(mu) = 0;
  Ranges pinned ABSL_GUARDED_BY(mu);
  Ranges registered ABSL_GUARDED_BY(mu);
  // cuMemAlloc and its kind, by device address (a host address), with the
  // device it is on.
  Ranges linear ABSL_GUARDED_BY(mu);
  // Set: the devices' memory is shared with other processes.
  std::unique_ptr<FakeCudaSharedBudget> budget ABSL_GUARDED_BY(mu);

 private:
  cu::CUresult TakeFailure(absl::string_view entry_point, int device)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = failures_.find(std::make_pair(std::string(entry_point), device));
    if (it == failures_.end()) return cu::CUDA_SUCCESS;
    const cu::CUresult result = it->second.result;
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
        const cu::CUmemGenericAllocationHandle handle = mapping->second.handle;
        mapping = mappings.erase(mapping);
        --physical.at(handle).mappings;
        FreePhysicalIfUnused(handle);
      }
      munmap(reinterpret_cast<void*>(start), size);
      it = reservations.erase(it);
      ++freed;
    }
    std::vector<cu::CUmemGenericAllocationHandle> handles;
    for (const auto& [handle, allocation] : physical) {
      if (allocation.owner == device) handles.push_back(handle);
    }
    for (cu::CUmemGenericAllocationHandle handle : handles) {
      for (auto mapping = mappings.begin(); mapping != mappings.end();) {
        if (mapping->second.handle != handle) {
          ++mapping;
          continue;
        }
        MakeBare(mapping->first, mapping->second.size);
        mapping = mappings.erase(mapping);
      }
      ErasePhysical(physical.find(handle));
    }
    freed += static_cast<int>(handles.size());
    for (auto it = linear.begin(); it != linear.end();) {
      if (it->second.device != device) {
        ++it;
        continue;
      }
      it = EraseLinear(it);
      ++freed;
    }
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
  // OnCall's, apart from mu: a hook runs before the call takes it.
  absl::Mutex hooks_mu_;
  absl::flat_hash_map<std::string, std::function<void()>> hooks_ ABSL_GUARDED_BY(hooks_mu_);
  std::atomic<bool> any_hooks_{false};  // whether hooks_ has any, read without hooks_mu_
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
#define CUDAFS_FAKE_ENTER_ON(name, device) \
  State& s = Installed();                  \
  s.RunHook(name);                         \
  absl::MutexLock lock(&s.mu);             \
  if (cu::CUresult injected = s.Begin(name, (device)); injected != cu::CUDA_SUCCESS) return injected

// A call naming no device is made on its current context's.
#define CUDAFS_FAKE_ENTER(name) CUDAFS_FAKE_ENTER_ON(name, s.CurrentDevice())

// Sets `current`, the device of the current context.
#define CUDAFS_FAKE_NEED_CONTEXT()                                                       \
  int current = kNoDevice;                                                               \
  if (cu::CUresult no_context = s.NeedContext(&current); no_context != cu::CUDA_SUCCESS) \
  return no_context

cu::CUresult FakeDriverGetVersion(int* version) {
  CUDAFS_FAKE_ENTER("cuDriverGetVersion");
  if (version == nullptr) return cu::CUDA_ERROR_INVALID_VALUE;
  *version = s.driver_version;
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeDeviceGetCount(int* count) {
  CUDAFS_FAKE_ENTER("cuDeviceGetCount");
  if (count == nullptr) return cu::CUDA_ERROR_INVALID_VALUE;
  *count = s.DeviceCount();
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeDeviceGet(cu::CUdevice* device, int ordinal) {
  CUDAFS_FAKE_ENTER_ON("cuDeviceGet", ordinal);
  if (device == nullptr) return cu::CUDA_ERROR_INVALID_VALUE;
  if (!s.ValidDevice(ordinal)) return cu::CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return cu::CUDA_SUCCESS;
}

// Writes `text` as the driver writes strings: cut to fit, NUL-terminated.
// No text: no such device.
cu::CUresult WriteString(const std::string* text, char* out, int length) {
  if (out == nullptr || length <= 0) return cu::CUDA_ERROR_INVALID_VALUE;
  if (text == nullptr) return cu::CUDA_ERROR_INVALID_DEVICE;
  const size_t n = std::min(text->size(), static_cast<size_t>(length) - 1);
  std::memcpy(out, text->data(), n);
  out[n] = '\0';
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeDeviceGetName(char* name, int length, cu::CUdevice device) {
  CUDAFS_FAKE_ENTER_ON("cuDeviceGetName", device);
  return WriteString(s.ValidDevice(device) ? &s.gpu(device).options.name : nullptr, name, length);
}

cu::CUresult FakeDeviceGetPCIBusId(char* bus_id, int length, cu::CUdevice device) {
  CUDAFS_FAKE_ENTER_ON("cuDeviceGetPCIBusId", device);
  return WriteString(s.ValidDevice(device) ? &s.gpu(device).options.pci_bus_id : nullptr, bus_id,
                     length);
}

cu::CUresult FakeDeviceGetByPCIBusId(cu::CUdevice* device, const char* bus_id) {
  CUDAFS_FAKE_ENTER_ON("cuDeviceGetByPCIBusId", s.FindBusId(bus_id));
  if (device == nullptr || bus_id == nullptr) return cu::CUDA_ERROR_INVALID_VALUE;
  const int found = s.FindBusId(bus_id);
  if (found == kNoDevice) return cu::CUDA_ERROR_INVALID_DEVICE;
  *device = found;
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeDeviceTotalMem(size_t* bytes, cu::CUdevice device) {
  CUDAFS_FAKE_ENTER_ON("cuDeviceTotalMem", device);
  if (bytes == nullptr) return cu::CUDA_ERROR_INVALID_VALUE;
  if (!s.ValidDevice(device)) return cu::CUDA_ERROR_INVALID_DEVICE;
  *bytes = s.gpu(device).options.total_bytes;
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeDeviceGetAttribute(int* value, cu::CUdevice_attribute attribute,
                                    cu::CUdevice device) {
  CUDAFS_FAKE_ENTER_ON("cuDeviceGetAttribute", device);
  if (value == nullptr) return cu::CUDA_ERROR_INVALID_VALUE;
  if (!s.ValidDevice(device)) return cu::CUDA_ERROR_INVALID_DEVICE;
  switch (attribute) {
    case cu::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case cu::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
    case cu::CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
    case cu::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
      *value = 1;
      break;
    default:
      *value = 0;
  }
  return cu::CUDA_SUCCESS;
}

// Peer access is always possible here, between two devices.
cu::CUresult FakeDeviceCanAccessPeer(int* can_access, cu::CUdevice device, cu::CUdevice peer) {
  CUDAFS_FAKE_ENTER_ON("cuDeviceCanAccessPeer", device);
  if (can_access == nullptr) return cu::CUDA_ERROR_INVALID_VALUE;
  if (!s.ValidDevice(device) || !s.ValidDevice(peer)) return cu::CUDA_ERROR_INVALID_DEVICE;
  *can_access = device != peer ? 1 : 0;
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeDevicePrimaryCtxRetain(cu::CUcontext* context, cu::CUdevice device) {
  CUDAFS_FAKE_ENTER_ON("cuDevicePrimaryCtxRetain", device);
  if (context == nullptr) return cu::CUDA_ERROR_INVALID_VALUE;
  if (!s.ValidDevice(device)) return cu::CUDA_ERROR_INVALID_DEVICE;
  Gpu& gpu = s.gpu(device);
  if (gpu.context == nullptr) {
    gpu.context = reinterpret_cast<cu::CUcontext>(NewHandle());
    s.contexts_made.emplace(gpu.context, device);
    ++gpu.contexts_created;
  }
  ++gpu.context_references;
  *context = gpu.context;
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeDevicePrimaryCtxRelease(cu::CUdevice device) {
  CUDAFS_FAKE_ENTER_ON("cuDevicePrimaryCtxRelease", device);
  if (!s.ValidDevice(device)) return cu::CUDA_ERROR_INVALID_DEVICE;
  Gpu& gpu = s.gpu(device);
  // As documented: releasing what was not retained.
  if (gpu.context_references == 0) return cu::CUDA_ERROR_INVALID_CONTEXT;
  if (--gpu.context_references == 0) s.DestroyContext(device);
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeCtxSetCurrent(cu::CUcontext context) {
  CUDAFS_FAKE_ENTER_ON("cuCtxSetCurrent", s.DeviceOf(context));
  // A destroyed context may be made current (the driver allows it); calls
  // through it then fail.
  if (context != nullptr && s.DeviceOf(context) == kNoDevice) return cu::CUDA_ERROR_INVALID_CONTEXT;
  current_context = context;
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeMemGetInfo(size_t* free, size_t* total) {
  CUDAFS_FAKE_ENTER("cuMemGetInfo");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (free == nullptr || total == nullptr) return cu::CUDA_ERROR_INVALID_VALUE;
  const uint64_t used = s.UsedOn(current);
  const uint64_t limit = s.VramLimit(current);
  *free = used < limit ? limit - used : 0;
  *total = s.gpu(current).options.total_bytes;
  return cu::CUDA_SUCCESS;
}

// The device a CUmemLocation names, or kNoDevice.
int LocationDevice(const State& s, const cu::CUmemLocation& location) {
  return location.type == cu::CU_MEM_LOCATION_TYPE_DEVICE && s.ValidDevice(location.id)
             ? location.id
             : kNoDevice;
}

cu::CUresult FakeMemGetAllocationGranularity(size_t* granularity,
                                             const cu::CUmemAllocationProp* prop,
                                             cu::CUmemAllocationGranularity_flags option) {
  CUDAFS_FAKE_ENTER_ON("cuMemGetAllocationGranularity",
                       prop != nullptr ? LocationDevice(s, prop->location) : s.CurrentDevice());
  if (granularity == nullptr || prop == nullptr ||
      prop->location.type != cu::CU_MEM_LOCATION_TYPE_DEVICE ||
      (option != cu::CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
       option != cu::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)) {
    return cu::CUDA_ERROR_INVALID_VALUE;
  }
  if (!s.ValidDevice(prop->location.id)) return cu::CUDA_ERROR_INVALID_DEVICE;
  *granularity = kGranule;
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeMemAddressReserve(cu::CUdeviceptr* address, size_t size, size_t alignment,
                                   cu::CUdeviceptr hint, unsigned long long flags) {
  CUDAFS_FAKE_ENTER("cuMemAddressReserve");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (address == nullptr || size == 0 || size % kGranule != 0 || flags != 0 ||
      (alignment & (alignment - 1)) != 0) {
    return cu::CUDA_ERROR_INVALID_VALUE;
  }
  // The hint is only a hint: the address is the system's choice.
  alignment = std::max<size_t>(alignment, kGranule);
  // Over-reserve, then trim to the alignment.
  void* mapped = mmap(nullptr, size + alignment, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapped == MAP_FAILED) return cu::CUDA_ERROR_OUT_OF_MEMORY;
  const auto raw = reinterpret_cast<uintptr_t>(mapped);
  const uintptr_t start = (raw + alignment - 1) / alignment * alignment;
  if (start != raw) munmap(mapped, start - raw);
  if (const uintptr_t tail = raw + size + alignment - (start + size); tail != 0) {
    munmap(reinterpret_cast<void*>(start + size), tail);
  }
  s.reservations.emplace(start, Range{size, current});
  *address = start;
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeMemAddressFree(cu::CUdeviceptr address, size_t size) {
  CUDAFS_FAKE_ENTER("cuMemAddressFree");
  auto it = s.reservations.find(address);
  if (it == s.reservations.end() || it->second.size != size) return cu::CUDA_ERROR_INVALID_VALUE;
  auto mapping = s.mappings.lower_bound(address);
  if (mapping != s.mappings.end() && mapping->first < address + size) {
    return cu::CUDA_ERROR_INVALID_VALUE;  // still mapped
  }
  munmap(reinterpret_cast<void*>(address), size);
  s.reservations.erase(it);
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeMemCreate(cu::CUmemGenericAllocationHandle* handle, size_t size,
                           const cu::CUmemAllocationProp* prop, unsigned long long flags) {
  CUDAFS_FAKE_ENTER_ON("cuMemCreate",
                       prop != nullptr ? LocationDevice(s, prop->location) : s.CurrentDevice());
  const int device = prop != nullptr ? LocationDevice(s, prop->location) : kNoDevice;
  if (device != kNoDevice) {
    s.gpu(device).largest_create = std::max<uint64_t>(s.gpu(device).largest_create, size);
  }
  CUDAFS_FAKE_NEED_CONTEXT();
  if (handle == nullptr || prop == nullptr || size == 0 || size % kGranule != 0 || flags != 0 ||
      prop->type != cu::CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != cu::CU_MEM_LOCATION_TYPE_DEVICE ||
      (prop->requestedHandleTypes != cu::CU_MEM_HANDLE_TYPE_NONE &&
       prop->requestedHandleTypes != cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
    return cu::CUDA_ERROR_INVALID_VALUE;
  }
  if (device == kNoDevice) return cu::CUDA_ERROR_INVALID_DEVICE;
  if (!s.TakeMemory(device, size)) return cu::CUDA_ERROR_OUT_OF_MEMORY;
  // A memfd keeps the bytes while nothing maps them, as VRAM does.
  // Sealed against resizing, as VRAM cannot be: an importer holds this
  // very file.
  const int fd =
      memfd_create(absl::StrCat(kVramName, device).c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    if (fd >= 0) close(fd);
    s.GiveMemory(device, size);
    return cu::CUDA_ERROR_OUT_OF_MEMORY;
  }
  const cu::CUmemGenericAllocationHandle made = NewHandle();
  s.physical.emplace(
      made, Physical{fd, size, device, current,
                     prop->requestedHandleTypes == cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR});
  *handle = made;
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeMemRelease(cu::CUmemGenericAllocationHandle handle) {
  CUDAFS_FAKE_ENTER("cuMemRelease");
  auto it = s.physical.find(handle);
  if (it == s.physical.end() || it->second.released) return cu::CUDA_ERROR_INVALID_VALUE;
  it->second.released = true;
  s.FreePhysicalIfUnused(handle);
  return cu::CUDA_SUCCESS;
}

// The handle is the memfd itself, duplicated: an importer maps it.
cu::CUresult FakeMemExportToShareableHandle(void* shareable,
                                            cu::CUmemGenericAllocationHandle handle,
                                            cu::CUmemAllocationHandleType type,
                                            unsigned long long flags) {
  CUDAFS_FAKE_ENTER("cuMemExportToShareableHandle");
  auto it = s.physical.find(handle);
  if (shareable == nullptr || it == s.physical.end() || it->second.released || flags != 0 ||
      type != cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || !it->second.exportable) {
    return cu::CUDA_ERROR_INVALID_VALUE;
  }
  const int fd = fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return cu::CUDA_ERROR_OUT_OF_MEMORY;
  *static_cast<int*>(shareable) = fd;
  return cu::CUDA_SUCCESS;
}

// The device of fake VRAM exported by another process (the fake as
// libcuda.so.1 in the daemon and in its clients), which its memfd's name
// says; kNoDevice for any other file.
int ExportedDevice(const State& s, int fd) {
  char link[128] = {};
  const std::string path = absl::StrCat("/proc/self/fd/", fd);
  if (readlink(path.c_str(), link, sizeof link - 1) < 0) return kNoDevice;
  absl::string_view name = link;
  int device = kNoDevice;
  if (!absl::ConsumePrefix(&name, "/memfd:") || !absl::ConsumePrefix(&name, kVramName) ||
      !absl::SimpleAtoi(name.substr(0, name.find(' ')), &device) || !s.ValidDevice(device)) {
    return kNoDevice;
  }
  return device;
}

// Only the fake's own exports import: their memfd names the allocation
// (or, another process's, its device).
cu::CUresult FakeMemImportFromShareableHandle(cu::CUmemGenericAllocationHandle* handle,
                                              void* shareable, cu::CUmemAllocationHandleType type) {
  CUDAFS_FAKE_ENTER("cuMemImportFromShareableHandle");
  CUDAFS_FAKE_NEED_CONTEXT();
  const int given = static_cast<int>(reinterpret_cast<intptr_t>(shareable));
  struct stat theirs;
  if (handle == nullptr || type != cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
      fstat(given, &theirs) != 0) {
    return cu::CUDA_ERROR_INVALID_VALUE;
  }
  const Physical* made = nullptr;
  for (const auto& [h, allocation] : s.physical) {
    struct stat ours;
    if (!allocation.imported && fstat(allocation.fd, &ours) == 0 && ours.st_ino == theirs.st_ino &&
        ours.st_dev == theirs.st_dev) {
      made = &allocation;
      break;
    }
  }
  const int device = made != nullptr ? made->device : ExportedDevice(s, given);
  const uint64_t size = made != nullptr ? made->size : theirs.st_size;
  if (device == kNoDevice || size == 0 || size % kGranule != 0) return cu::CUDA_ERROR_INVALID_VALUE;
  const int fd = fcntl(given, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return cu::CUDA_ERROR_OUT_OF_MEMORY;
  // Not exportable again, as the driver refuses (found on an H200).
  Physical imported{fd, size, device, current, false};
  imported.imported = true;
  const cu::CUmemGenericAllocationHandle handle_made = NewHandle();
  s.physical.emplace(handle_made, imported);
  ++s.imports;
  *handle = handle_made;
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeMemMap(cu::CUdeviceptr address, size_t size, size_t offset,
                        cu::CUmemGenericAllocationHandle handle, unsigned long long flags) {
  CUDAFS_FAKE_ENTER("cuMemMap");
  auto allocation = s.physical.find(handle);
  if (allocation == s.physical.end() || allocation->second.released || flags != 0 || size == 0 ||
      address % kGranule != 0 || size % kGranule != 0 || offset % kGranule != 0 ||
      offset > allocation->second.size || size > allocation->second.size - offset) {
    return cu::CUDA_ERROR_INVALID_VALUE;
  }
  if (Containing(s.reservations, address, size) == nullptr) return cu::CUDA_ERROR_INVALID_VALUE;
  auto next = s.mappings.lower_bound(address);
  if (next != s.mappings.end() && next->first < address + size) return cu::CUDA_ERROR_INVALID_VALUE;
  if (next != s.mappings.begin() &&
      std::prev(next)->first + std::prev(next)->second.size > address) {
    return cu::CUDA_ERROR_INVALID_VALUE;
  }
  // No access until cuMemSetAccess, as on the GPU.
  if (mmap(reinterpret_cast<void*>(address), size, PROT_NONE, MAP_SHARED | MAP_FIXED,
           allocation->second.fd, static_cast<off_t>(offset)) == MAP_FAILED) {
    return cu::CUDA_ERROR_OUT_OF_MEMORY;
  }
  s.mappings.emplace(address, Mapping{size, handle, std::vector<int>(s.DeviceCount(), PROT_NONE)});
  ++allocation->second.mappings;
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeMemUnmap(cu::CUdeviceptr address, size_t size) {
  CUDAFS_FAKE_ENTER("cuMemUnmap");
  // Only whole mappings, as the driver requires.
  const std::vector<uintptr_t> unmapped = s.WholeMappings(address, size);
  if (unmapped.empty()) return cu::CUDA_ERROR_INVALID_VALUE;
  for (uintptr_t start : unmapped) s.Unmap(start);
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeMemSetAccess(cu::CUdeviceptr address, size_t size, const cu::CUmemAccessDesc* desc,
                              size_t count) {
  CUDAFS_FAKE_ENTER_ON("cuMemSetAccess", desc != nullptr && count != 0
                                             ? LocationDevice(s, desc[0].location)
                                             : s.CurrentDevice());
  if (desc == nullptr || count == 0) return cu::CUDA_ERROR_INVALID_VALUE;
  // One entry a device, any device: peer access is always possible here.
  std::vector<int> prot(count);
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != cu::CU_MEM_LOCATION_TYPE_DEVICE)
      return cu::CUDA_ERROR_INVALID_VALUE;
    if (!s.ValidDevice(desc[i].location.id)) return cu::CUDA_ERROR_INVALID_DEVICE;
    switch (desc[i].flags) {
      case cu::CU_MEM_ACCESS_FLAGS_PROT_NONE:
        prot[i] = PROT_NONE;
        break;
      case cu::CU_MEM_ACCESS_FLAGS_PROT_READ:
        prot[i] = PROT_READ;
        break;
      case cu::CU_MEM_ACCESS_FLAGS_PROT_READWRITE:
        prot[i] = PROT_READ | PROT_WRITE;
        break;
      default:
        return cu::CUDA_ERROR_INVALID_VALUE;
    }
  }
  // Whole mappings only: the fake keeps access per mapping.
  const std::vector<uintptr_t> changed = s.WholeMappings(address, size);
  if (changed.empty()) return cu::CUDA_ERROR_INVALID_VALUE;
  for (uintptr_t start : changed) {
    Mapping& mapping = s.mappings.at(start);
    for (size_t i = 0; i < count; ++i) mapping.access[desc[i].location.id] = prot[i];
    // The host sees what some device may do.
    int host = PROT_NONE;
    for (int device_prot : mapping.access) host |= device_prot;
    mprotect(reinterpret_cast<void*>(start), mapping.size, host);
  }
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeMemHostAlloc(void** memory, size_t size, unsigned int flags) {
  CUDAFS_FAKE_ENTER("cuMemHostAlloc");
  CUDAFS_FAKE_NEED_CONTEXT();
  constexpr unsigned kKnownFlags = cu::CU_MEMHOSTALLOC_PORTABLE | cu::CU_MEMHOSTALLOC_DEVICEMAP |
                                   cu::CU_MEMHOSTALLOC_WRITECOMBINED;
  if (memory == nullptr || size == 0 || (flags & ~kKnownFlags) != 0) {
    return cu::CUDA_ERROR_INVALID_VALUE;
  }
  void* mapped = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return cu::CUDA_ERROR_OUT_OF_MEMORY;
  s.pinned.emplace(reinterpret_cast<uintptr_t>(mapped),
                   Range{size, current, (flags & cu::CU_MEMHOSTALLOC_PORTABLE) != 0});
  *memory = mapped;
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeMemFreeHost(void* memory) {
  CUDAFS_FAKE_ENTER("cuMemFreeHost");
  CUDAFS_FAKE_NEED_CONTEXT();
  auto it = s.pinned.find(reinterpret_cast<uintptr_t>(memory));
  if (it == s.pinned.end()) return cu::CUDA_ERROR_INVALID_VALUE;
  munmap(memory, it->second.size);
  s.pinned.erase(it);
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeMemHostRegister(void* memory, size_t size, unsigned int flags) {
  CUDAFS_FAKE_ENTER("cuMemHostRegister");
  CUDAFS_FAKE_NEED_CONTEXT();
  const auto start = reinterpret_cast<uintptr_t>(memory);
  if (memory == nullptr || size == 0 || size > UINTPTR_MAX - start) {
    return cu::CUDA_ERROR_INVALID_VALUE;
  }
  // Whichever context registered it, in the whole process.
  if (Overlaps(s.registered, start, size) || Overlaps(s.pinned, start, size)) {
    return cu::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  }
  s.registered.emplace(start, Range{size, current, (flags & cu::CU_MEMHOSTREGISTER_PORTABLE) != 0});
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeMemHostUnregister(void* memory) {
  CUDAFS_FAKE_ENTER("cuMemHostUnregister");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (s.registered.erase(reinterpret_cast<uintptr_t>(memory)) == 0) {
    return cu::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  }
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeStreamCreate(cu::CUstream* stream, unsigned int flags) {
  CUDAFS_FAKE_ENTER("cuStreamCreate");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (stream == nullptr || (flags & ~unsigned{cu::CU_STREAM_NON_BLOCKING}) != 0) {
    return cu::CUDA_ERROR_INVALID_VALUE;
  }
  const uintptr_t made = NewHandle();
  s.streams.emplace(made, current);
  *stream = reinterpret_cast<cu::CUstream>(made);
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeStreamDestroy(cu::CUstream stream) {
  CUDAFS_FAKE_ENTER("cuStreamDestroy");
  CUDAFS_FAKE_NEED_CONTEXT();
  auto it = s.streams.find(reinterpret_cast<uintptr_t>(stream));
  if (it == s.streams.end() || it->second != current) return cu::CUDA_ERROR_INVALID_HANDLE;
  s.streams.erase(it);
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeStreamSynchronize(cu::CUstream stream) {
  CUDAFS_FAKE_ENTER("cuStreamSynchronize");
  CUDAFS_FAKE_NEED_CONTEXT();
  // Work ran at enqueue: nothing to wait for.
  return s.CheckStream(stream, current);
}

cu::CUresult FakeStreamQuery(cu::CUstream stream) {
  CUDAFS_FAKE_ENTER("cuStreamQuery");
  CUDAFS_FAKE_NEED_CONTEXT();
  // Work ran at enqueue: always done (FailNext with CUDA_ERROR_NOT_READY
  // makes it busy).
  return s.CheckStream(stream, current);
}

cu::CUresult FakeMemcpyAsync(cu::CUdeviceptr to, cu::CUdeviceptr from, size_t length,
                             cu::CUstream stream) {
  CUDAFS_FAKE_ENTER("cuMemcpyAsync");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (cu::CUresult r = s.CheckStream(stream, current); r != cu::CUDA_SUCCESS) return r;
  if (!s.CopyOperandOk(from, length, PROT_READ, current) ||
      !s.CopyOperandOk(to, length, PROT_READ | PROT_WRITE, current)) {
    return s.Fault(current);
  }
  s.CountPageableCopy(to, from, length, current);
  if (length != 0) {
    std::memmove(reinterpret_cast<void*>(to), reinterpret_cast<const void*>(from), length);
  }
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeMemsetD8Async(cu::CUdeviceptr to, unsigned char value, size_t length,
                               cu::CUstream stream) {
  CUDAFS_FAKE_ENTER("cuMemsetD8Async");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (cu::CUresult r = s.CheckStream(stream, current); r != cu::CUDA_SUCCESS) return r;
  if (length == 0) return cu::CUDA_SUCCESS;
  if (!s.KernelOperandOk(to, length, PROT_READ | PROT_WRITE, current)) {
    // Pageable host memory is no device pointer; a device address that is
    // not mapped faults.
    return Overlaps(s.reservations, to, length) ? s.Fault(current) : cu::CUDA_ERROR_INVALID_VALUE;
  }
  std::memset(reinterpret_cast<void*>(to), value, length);
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeMemcpyBatchAsync(cu::CUdeviceptr* to, cu::CUdeviceptr* from, size_t* lengths,
                                  size_t count, cu::CUmemcpyAttributes* attributes,
                                  size_t* attribute_indices, size_t attribute_count,
                                  cu::CUstream stream) {
  CUDAFS_FAKE_ENTER("cuMemcpyBatchAsync");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (cu::CUresult r = s.CheckStream(stream, current); r != cu::CUDA_SUCCESS) return r;
  if (stream == nullptr || stream == cu::CU_STREAM_LEGACY || to == nullptr || from == nullptr ||
      lengths == nullptr || count == 0 || attributes == nullptr || attribute_indices == nullptr ||
      attribute_count == 0 || attribute_count > count || attribute_indices[0] != 0) {
    return cu::CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t k = 0; k < attribute_count; ++k) {
    if (attributes[k].srcAccessOrder == cu::CU_MEMCPY_SRC_ACCESS_ORDER_INVALID ||
        attribute_indices[k] >= count ||
        (k > 0 && attribute_indices[k] <= attribute_indices[k - 1])) {
      return cu::CUDA_ERROR_INVALID_VALUE;
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
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeGetErrorText(cu::CUresult error, const char** text, bool name) {
  struct Known {
    cu::CUresult code;
    const char* name;
    const char* text;
  };
  static constexpr Known kKnown[] = {
      {cu::CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
      {cu::CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
      {cu::CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
      {cu::CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
      {cu::CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
      {cu::CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
      {cu::CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
      {cu::CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
      {cu::CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
      {cu::CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
      {cu::CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
      {cu::CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
       "an illegal memory access was encountered"},
      {cu::CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
      {cu::CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED",
       "context is destroyed"},
      {cu::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
       "part or all of the requested memory range is already mapped"},
      {cu::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
       "pointer does not correspond to a registered memory region"},
      {cu::CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
  };
  if (text == nullptr) return cu::CUDA_ERROR_INVALID_VALUE;
  for (const Known& known : kKnown) {
    if (known.code == error) {
      *text = name ? known.name : known.text;
      return cu::CUDA_SUCCESS;
    }
  }
  // As the driver answers for codes it does not know.
  *text = nullptr;
  return cu::CUDA_ERROR_INVALID_VALUE;
}

cu::CUresult FakeGetErrorName(cu::CUresult error, const char** name) {
  CUDAFS_FAKE_ENTER("cuGetErrorName");
  return FakeGetErrorText(error, name, /*name=*/true);
}

cu::CUresult FakeGetErrorString(cu::CUresult error, const char** text) {
  CUDAFS_FAKE_ENTER("cuGetErrorString");
  return FakeGetErrorText(error, text, /*name=*/false);
}

cu::CUresult FakeModuleLoadData(cu::CUmodule* module, const void* image) {
  CUDAFS_FAKE_ENTER("cuModuleLoadData");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (module == nullptr || image == nullptr) return cu::CUDA_ERROR_INVALID_VALUE;
  const uintptr_t made = NewHandle();
  s.modules.emplace(made, current);
  *module = reinterpret_cast<cu::CUmodule>(made);
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeModuleUnload(cu::CUmodule module) {
  CUDAFS_FAKE_ENTER("cuModuleUnload");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (!s.HasModule(reinterpret_cast<uintptr_t>(module), current)) {
    return cu::CUDA_ERROR_INVALID_HANDLE;
  }
  s.modules.erase(reinterpret_cast<uintptr_t>(module));
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeModuleGetFunction(cu::CUfunction* function, cu::CUmodule module,
                                   const char* name) {
  CUDAFS_FAKE_ENTER("cuModuleGetFunction");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (function == nullptr || name == nullptr) return cu::CUDA_ERROR_INVALID_VALUE;
  if (!s.HasModule(reinterpret_cast<uintptr_t>(module), current)) {
    return cu::CUDA_ERROR_INVALID_HANDLE;
  }
  if (std::strcmp(name, kScatterKernelName) != 0) return cu::CUDA_ERROR_NOT_FOUND;
  *function = reinterpret_cast<cu::CUfunction>(reinterpret_cast<uintptr_t>(module) + kFunctionTag);
  return cu::CUDA_SUCCESS;
}

// Runs the scatter kernel (scatter_kernel.h): pieces = {table, count}.
cu::CUresult FakeLaunchKernel(cu::CUfunction function, unsigned grid_x, unsigned grid_y,
                              unsigned grid_z, unsigned block_x, unsigned block_y, unsigned block_z,
                              unsigned shared_bytes, cu::CUstream stream, void** parameters,
                              void** extra) {
  CUDAFS_FAKE_ENTER("cuLaunchKernel");
  CUDAFS_FAKE_NEED_CONTEXT();
  const auto id = reinterpret_cast<uintptr_t>(function);
  if ((id & 15) != kFunctionTag || !s.HasModule(id - kFunctionTag, current)) {
    return cu::CUDA_ERROR_INVALID_HANDLE;
  }
  if (cu::CUresult r = s.CheckStream(stream, current); r != cu::CUDA_SUCCESS) return r;
  if (grid_x == 0 || grid_y == 0 || grid_z == 0 || block_x == 0 || block_y == 0 || block_z == 0 ||
      uint64_t{block_x} * block_y * block_z > 1024 || parameters == nullptr || extra != nullptr) {
    return cu::CUDA_ERROR_INVALID_VALUE;
  }
  const cu::CUdeviceptr table = *static_cast<const cu::CUdeviceptr*>(parameters[0]);
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
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeCtxGetCurrent(cu::CUcontext* context) {
  CUDAFS_FAKE_ENTER("cuCtxGetCurrent");
  if (context == nullptr) return cu::CUDA_ERROR_INVALID_VALUE;
  *context = current_context;
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeCtxGetDevice(cu::CUdevice* device) {
  CUDAFS_FAKE_ENTER("cuCtxGetDevice");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (device == nullptr) return cu::CUDA_ERROR_INVALID_VALUE;
  *device = current;
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeCtxSynchronize() {
  CUDAFS_FAKE_ENTER("cuCtxSynchronize");
  CUDAFS_FAKE_NEED_CONTEXT();
  // Work ran at enqueue.
  return cu::CUDA_SUCCESS;
}

// cuMemAlloc and its kind: `size` bytes on `device`, host memory at the
// device address, counted against the device's memory. CUresult as the
// driver's.
cu::CUresult AllocateLinear(State& s, int device, size_t size, cu::CUdeviceptr* pointer)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  if (pointer == nullptr || size == 0) return cu::CUDA_ERROR_INVALID_VALUE;
  if (!s.TakeMemory(device, size)) return cu::CUDA_ERROR_OUT_OF_MEMORY;
  void* mapped = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapped == MAP_FAILED) {
    s.GiveMemory(device, size);
    return cu::CUDA_ERROR_OUT_OF_MEMORY;
  }
  s.linear.emplace(reinterpret_cast<uintptr_t>(mapped), Range{size, device});
  *pointer = reinterpret_cast<uintptr_t>(mapped);
  return cu::CUDA_SUCCESS;
}

// Only the start of an allocation frees it, from any context.
cu::CUresult FreeLinear(State& s, cu::CUdeviceptr pointer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  auto it = s.linear.find(pointer);
  if (it == s.linear.end()) return cu::CUDA_ERROR_INVALID_VALUE;
  s.EraseLinear(it);
  return cu::CUDA_SUCCESS;
}

cu::CUresult FakeMemAlloc(cu::CUdeviceptr* pointer, size_t size) {
  CUDAFS_FAKE_ENTER("cuMemAlloc");
  CUDAFS_FAKE_NEED_CONTEXT();
  return AllocateLinear(s, current, size, pointer);
}

cu::CUresult FakeMemFree(cu::CUdeviceptr pointer) {
  CUDAFS_FAKE_ENTER("cuMemFree");
  CUDAFS_FAKE_NEED_CONTEXT();
  return FreeLinear(s, pointer);
}

// Rows padded to the driver's pitch alignment.
cu::CUresult FakeMemAllocPitch(cu::CUdeviceptr* pointer, size_t* pitch, size_t width, size_t height,
                               unsigned int element_size) {
  CUDAFS_FAKE_ENTER("cuMemAllocPitch");
  CUDAFS_FAKE_NEED_CONTEXT();
  constexpr size_t kPitchAlignment = 512;
  if (pitch == nullptr || width == 0 || height == 0 ||
      (element_size != 4 && element_size != 8 && element_size != 16) ||
      width > SIZE_MAX - kPitchAlignment) {
    return cu::CUDA_ERROR_INVALID_VALUE;
  }
  const size_t padded = (width + kPitchAlignment - 1) / kPitchAlignment * kPitchAlignment;
  if (height > SIZE_MAX / padded) return cu::CUDA_ERROR_OUT_OF_MEMORY;
  const cu::CUresult result = AllocateLinear(s, current, padded * height, pointer);
  if (result == cu::CUDA_SUCCESS) *pitch = padded;
  return result;
}

cu::CUresult FakeMemAllocManaged(cu::CUdeviceptr* pointer, size_t size, unsigned int flags) {
  CUDAFS_FAKE_ENTER("cuMemAllocManaged");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (flags != cu::CU_MEM_ATTACH_GLOBAL && flags != cu::CU_MEM_ATTACH_HOST) {
    return cu::CUDA_ERROR_INVALID_VALUE;
  }
  return AllocateLinear(s, current, size, pointer);
}

cu::CUresult FakeMemAllocAsync(cu::CUdeviceptr* pointer, size_t size, cu::CUstream stream) {
  CUDAFS_FAKE_ENTER("cuMemAllocAsync");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (cu::CUresult r = s.CheckStream(stream, current); r != cu::CUDA_SUCCESS) return r;
  return AllocateLinear(s, current, size, pointer);
}

cu::CUresult FakeMemFreeAsync(cu::CUdeviceptr pointer, cu::CUstream stream) {
  CUDAFS_FAKE_ENTER("cuMemFreeAsync");
  CUDAFS_FAKE_NEED_CONTEXT();
  if (cu::CUresult r = s.CheckStream(stream, current); r != cu::CUDA_SUCCESS) return r;
  return FreeLinear(s, pointer);
}

// The device whose default pool `pool` is, or kNoDevice.
int PoolDevice(const State& s, cu::CUmemoryPool pool) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  for (int device = 0; device < s.DeviceCount(); ++device) {
    if (s.gpu(device).default_pool == reinterpret_cast<uintptr_t>(pool)) return device;
  }
  return kNoDevice;
}

cu::CUresult FakeDeviceGetDefaultMemPool(cu::CUmemoryPool* pool, cu::CUdevice device) {
  CUDAFS_FAKE_ENTER_ON("cuDeviceGetDefaultMemPool", device);
  if (pool == nullptr) return cu::CUDA_ERROR_INVALID_VALUE;
  if (!s.ValidDevice(device)) return cu::CUDA_ERROR_INVALID_DEVICE;
  *pool = reinterpret_cast<cu::CUmemoryPool>(s.gpu(device).default_pool);
  return cu::CUDA_SUCCESS;
}

// Only the devices' default pools: memory on the pool's device.
cu::CUresult FakeMemAllocFromPoolAsync(cu::CUdeviceptr* pointer, size_t size, cu::CUmemoryPool pool,
                                       cu::CUstream stream) {
  CUDAFS_FAKE_ENTER_ON("cuMemAllocFromPoolAsync", PoolDevice(s, pool));
  CUDAFS_FAKE_NEED_CONTEXT();
  if (cu::CUresult r = s.CheckStream(stream, current); r != cu::CUDA_SUCCESS) return r;
  const int device = PoolDevice(s, pool);
  if (device == kNoDevice) return cu::CUDA_ERROR_INVALID_VALUE;
  return AllocateLinear(s, device, size, pointer);
}

// An entry point as the fake's cuGetProcAddress hands it out: the fake's
// function, checked by the compiler to have cuda_api.h's type, and the
// version of that declaration.
struct EntryPoint {
  const char* name;
  void* function;
  int version;
};

template <typename Pointer>
void* Erase(Pointer function) {
  return reinterpret_cast<void*>(function);
}

#define CUDAFS_FAKE_ENTRY(name, fake) \
  EntryPoint { #name, Erase < cu::name##_t>(fake), cu::name##_version }

const EntryPoint* FindEntryPoint(absl::string_view name) {
  // A new entry point in cuda_driver.h needs its fake here.
  static const EntryPoint kEntryPoints[] = {
      CUDAFS_FAKE_ENTRY(cuDriverGetVersion, FakeDriverGetVersion),
      CUDAFS_FAKE_ENTRY(cuDeviceGetCount, FakeDeviceGetCount),
      CUDAFS_FAKE_ENTRY(cuDeviceGet, FakeDeviceGet),
      CUDAFS_FAKE_ENTRY(cuDeviceGetName, FakeDeviceGetName),
      CUDAFS_FAKE_ENTRY(cuDeviceGetPCIBusId, FakeDeviceGetPCIBusId),
      CUDAFS_FAKE_ENTRY(cuDeviceGetByPCIBusId, FakeDeviceGetByPCIBusId),
      CUDAFS_FAKE_ENTRY(cuDeviceTotalMem, FakeDeviceTotalMem),
      CUDAFS_FAKE_ENTRY(cuDeviceGetAttribute, FakeDeviceGetAttribute),
      CUDAFS_FAKE_ENTRY(cuDevicePrimaryCtxRetain, FakeDevicePrimaryCtxRetain),
      CUDAFS_FAKE_ENTRY(cuDevicePrimaryCtxRelease, FakeDevicePrimaryCtxRelease),
      CUDAFS_FAKE_ENTRY(cuCtxSetCurrent, FakeCtxSetCurrent),
      CUDAFS_FAKE_ENTRY(cuMemGetInfo, FakeMemGetInfo),
      CUDAFS_FAKE_ENTRY(cuMemGetAllocationGranularity, FakeMemGetAllocationGranularity),
      CUDAFS_FAKE_ENTRY(cuMemAddressReserve, FakeMemAddressReserve),
      CUDAFS_FAKE_ENTRY(cuMemAddressFree, FakeMemAddressFree),
      CUDAFS_FAKE_ENTRY(cuMemCreate, FakeMemCreate),
      CUDAFS_FAKE_ENTRY(cuMemRelease, FakeMemRelease),
      CUDAFS_FAKE_ENTRY(cuMemExportToShareableHandle, FakeMemExportToShareableHandle),
      CUDAFS_FAKE_ENTRY(cuMemImportFromShareableHandle, FakeMemImportFromShareableHandle),
      CUDAFS_FAKE_ENTRY(cuMemMap, FakeMemMap),
      CUDAFS_FAKE_ENTRY(cuMemUnmap, FakeMemUnmap),
      CUDAFS_FAKE_ENTRY(cuMemSetAccess, FakeMemSetAccess),
      CUDAFS_FAKE_ENTRY(cuMemHostAlloc, FakeMemHostAlloc),
      CUDAFS_FAKE_ENTRY(cuMemFreeHost, FakeMemFreeHost),
      CUDAFS_FAKE_ENTRY(cuMemHostRegister, FakeMemHostRegister),
      CUDAFS_FAKE_ENTRY(cuMemHostUnregister, FakeMemHostUnregister),
      CUDAFS_FAKE_ENTRY(cuStreamCreate, FakeStreamCreate),
      CUDAFS_FAKE_ENTRY(cuStreamDestroy, FakeStreamDestroy),
      CUDAFS_FAKE_ENTRY(cuStreamSynchronize, FakeStreamSynchronize),
      CUDAFS_FAKE_ENTRY(cuStreamQuery, FakeStreamQuery),
      CUDAFS_FAKE_ENTRY(cuMemcpyAsync, FakeMemcpyAsync),
      CUDAFS_FAKE_ENTRY(cuMemsetD8Async, FakeMemsetD8Async),
      CUDAFS_FAKE_ENTRY(cuGetErrorName, FakeGetErrorName),
      CUDAFS_FAKE_ENTRY(cuGetErrorString, FakeGetErrorString),
      CUDAFS_FAKE_ENTRY(cuModuleLoadData, FakeModuleLoadData),
      CUDAFS_FAKE_ENTRY(cuModuleUnload, FakeModuleUnload),
      CUDAFS_FAKE_ENTRY(cuModuleGetFunction, FakeModuleGetFunction),
      CUDAFS_FAKE_ENTRY(cuLaunchKernel, FakeLaunchKernel),
      CUDAFS_FAKE_ENTRY(cuMemcpyBatchAsync, FakeMemcpyBatchAsync),
      // Not used by the daemon: for the client library and GPU programs
      // (fake_cuda_program_api.h).
      CUDAFS_FAKE_ENTRY(cuCtxGetCurrent, FakeCtxGetCurrent),
      CUDAFS_FAKE_ENTRY(cuCtxGetDevice, FakeCtxGetDevice),
      CUDAFS_FAKE_ENTRY(cuDeviceCanAccessPeer, FakeDeviceCanAccessPeer),
      CUDAFS_FAKE_ENTRY(cuCtxSynchronize, FakeCtxSynchronize),
      CUDAFS_FAKE_ENTRY(cuMemAlloc, FakeMemAlloc),
      CUDAFS_FAKE_ENTRY(cuMemFree, FakeMemFree),
      CUDAFS_FAKE_ENTRY(cuMemAllocPitch, FakeMemAllocPitch),
      CUDAFS_FAKE_ENTRY(cuMemAllocManaged, FakeMemAllocManaged),
      CUDAFS_FAKE_ENTRY(cuMemAllocAsync, FakeMemAllocAsync),
      CUDAFS_FAKE_ENTRY(cuMemFreeAsync, FakeMemFreeAsync),
      CUDAFS_FAKE_ENTRY(cuMemAllocFromPoolAsync, FakeMemAllocFromPoolAsync),
      CUDAFS_FAKE_ENTRY(cuDeviceGetDefaultMemPool, FakeDeviceGetDefaultMemPool),
  };
  for (const EntryPoint& entry : kEntryPoints) {
    if (name == entry.name) return &entry;
  }
  return nullptr;
}

#undef CUDAFS_FAKE_ENTRY

// A real driver hands back, under the name asked for, the newest ABI not
// newer than the version asked for: asked for any other version than the
// one cudafs declares, it could hand back a function of another type, so
// the fake dies rather than answer.
cu::CUresult FakeGetProcAddress(const char* symbol, void** function, int cuda_version,
                                cu::cuuint64_t flags, cu::CUdriverProcAddressQueryResult* found) {
  if (symbol == nullptr || function == nullptr) return cu::CUDA_ERROR_INVALID_VALUE;
  if (flags != cu::CU_GET_PROC_ADDRESS_DEFAULT) Die("cuGetProcAddress with flags: ", symbol);
  *function = nullptr;
  State& s = Installed();
  {
    absl::MutexLock lock(&s.mu);
    // As documented: no version beyond the driver's own.
    if (cuda_version > s.driver_version) return cu::CUDA_ERROR_INVALID_VALUE;
  }
  const EntryPoint* entry = FindEntryPoint(symbol);
  if (entry == nullptr) {
    if (found != nullptr) *found = cu::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return cu::CUDA_SUCCESS;
  }
  if (cuda_version != entry->version) {
    Die("cuGetProcAddress for another ABI than cuda_api.h declares: ",
        absl::StrCat(symbol, " at CUDA ", cuda_version, ", declared at ", entry->version));
  }
  *function = entry->function;
  if (found != nullptr) *found = cu::CU_GET_PROC_ADDRESS_SUCCESS;
  return cu::CUDA_SUCCESS;
}

CudaDriver MakeDriver(int version) {
  absl::StatusOr<CudaDriver> driver = CudaDriver::Resolve(FakeGetProcAddress, version);
  if (!driver.ok()) Die("", driver.status().message());
#define CUDAFS_FAKE_CHECK_SET(name) \
  if (driver->name == nullptr) Die("no fake for ", #name);
  CUDAFS_CUDA_OPTIONAL_ENTRY_POINTS(CUDAFS_FAKE_CHECK_SET)
#undef CUDAFS_FAKE_CHECK_SET
  return *std::move(driver);
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
  driver_ = fake_cuda_internal::MakeDriver(kDriverVersion);
}

FakeCudaDriver::~FakeCudaDriver() {
  fake_cuda_internal::installed.store(nullptr, std::memory_order_release);
}

void FakeCudaDriver::FailNext(absl::string_view entry_point, cu::CUresult result, int count) {
  absl::MutexLock lock(&state_->mu);
  state_->FailNext(entry_point, result, count, fake_cuda_internal::kNoDevice);
}

void FakeCudaDriver::FailNext(absl::string_view entry_point, cu::CUresult result, int count,
                              int device) {
  state_->CheckDevice(device);
  absl::MutexLock lock(&state_->mu);
  state_->FailNext(entry_point, result, count, device);
}

void FakeCudaDriver::set_driver_version(int version) {
  absl::MutexLock lock(&state_->mu);
  state_->driver_version = version;
}

cu::cuGetProcAddress_t FakeCudaDriver::get_proc_address() {
  return fake_cuda_internal::FakeGetProcAddress;
}

void FakeCudaDriver::ShareMemory(std::unique_ptr<FakeCudaSharedBudget> budget) {
  if (budget->gpus() != state_->DeviceCount()) {
    fake_cuda_internal::Die("a shared state made for another number of GPUs");
  }
  absl::MutexLock lock(&state_->mu);
  state_->budget = std::move(budget);
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
    sum.live_linear_allocations += one.live_linear_allocations;
    sum.linear_bytes += one.linear_bytes;
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

void FakeCudaDriver::OnCall(absl::string_view entry_point, std::function<void()> hook) {
  state_->SetHook(entry_point, std::move(hook));
}

int FakeCudaDriver::calls(absl::string_view entry_point) const {
  absl::MutexLock lock(&state_->mu);
  return state_->Calls(entry_point);
}

}  // namespace cudafs
