#include "alloc/devices/pinned_host_ranges.h"

#include <sys/mman.h>

#include "absl/container/flat_hash_map.h"
#include "alloc/devices/containing.h"
#include "alloc/devices/cuda_context.h"
#include "alloc/devices/cuda_driver.h"

namespace cudafs {

// The host ranges handed to the devices of one driver, each pinned at most
// once (pinned_host_ranges.h says why). A device holds a range from Allocate
// or Register to Remove, and uses it while its context lives: only a device
// that uses a range may copy from it.
class HostPins {
 public:
  explicit HostPins(const CudaDriver& driver) : cu_(driver) {}

  // The table of `driver`'s devices, made for the first of them.
  static std::shared_ptr<HostPins> Of(const CudaDriver& driver);

  // A device holds [start, +length) (`owned`: mapped by Allocate, unmapped
  // once no device holds it).
  void Hold(uintptr_t start, size_t length, bool owned);
  enum class PinnedBy { kNone, kThis, kOther };
  // The device of `context`, held and current, uses a range it holds:
  // pins it unless pinned, and says under whose context it is.
  PinnedBy Use(uintptr_t start, const CudaContext& context);
  // It stops: once no device uses the range, unpins it, leaving `context`
  // current.
  void Unuse(uintptr_t start, const CudaContext& context);
  // It lets go of a range it does not use.
  void Drop(uintptr_t start);

 private:
  static constexpr int kNobody = -1;
  struct Range {
    size_t length = 0;
    bool owned = false;
    int holders = 0;
    int users = 0;
    int pinned_by = kNobody;  // the CUdevice whose primary context pinned it
  };
  // A primary context retained while ranges are pinned under it, so that
  // its device releasing it leaves them pinned for the others.
  struct Retained {
    cu::CUcontext context = nullptr;
    int ranges = 0;
  };

  void Pin(uintptr_t start, Range& range, const CudaContext& context)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unpin(uintptr_t start, Range& range, const CudaContext& context)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CudaDriver& cu_;
  absl::Mutex mu_;
  absl::btree_map<uintptr_t, Range> ranges_ ABSL_GUARDED_BY(mu_);
  // By CUdevice.
  absl::flat_hash_map<int, Retained> retained_ ABSL_GUARDED_BY(mu_);
};

namespace {

ABSL_CONST_INIT absl::Mutex tables_mu(absl::kConstInit);
using Tables = absl::flat_hash_map<const CudaDriver*, std::weak_ptr<HostPins>>;
// Never destroyed: a device may outlive static destruction.
Tables* tables ABSL_GUARDED_BY(tables_mu) = nullptr;

}  // namespace

std::shared_ptr<HostPins> HostPins::Of(const CudaDriver& driver) {
  absl::MutexLock lock(&tables_mu);
  if (tables == nullptr) tables = new Tables;
  // A test's fake driver may come back at the address of one gone.
  absl::erase_if(*tables, [](const auto& table) { return table.second.expired(); });
  std::weak_ptr<HostPins>& table = (*tables)[&driver];
  std::shared_ptr<HostPins> pins = table.lock();
  if (pins == nullptr) {
    pins = std::make_shared<HostPins>(driver);
    table = pins;
  }
  return pins;
}

void HostPins::Hold(uintptr_t start, size_t length, bool owned) {
  absl::MutexLock lock(&mu_);
  Range& range = ranges_[start];
  if (range.holders++ > 0) return;
  range.length = length;
  range.owned = owned;
}

HostPins::PinnedBy HostPins::Use(uintptr_t start, const CudaContext& context) {
  absl::MutexLock lock(&mu_);
  Range& range = ranges_.at(start);
  ++range.users;
  if (range.pinned_by == kNobody) Pin(start, range, context);
  if (range.pinned_by == kNobody) return PinnedBy::kNone;
  return range.pinned_by == context.device() ? PinnedBy::kThis : PinnedBy::kOther;
}

void HostPins::Unuse(uintptr_t start, const CudaContext& context) {
  absl::MutexLock lock(&mu_);
  Range& range = ranges_.at(start);
  if (--range.users == 0 && range.pinned_by != kNobody) Unpin(start, range, context);
}

void HostPins::Drop(uintptr_t start) {
  absl::MutexLock lock(&mu_);
  auto it = ranges_.find(start);
  if (--it->second.holders > 0) return;
  if (it->second.owned) munmap(reinterpret_cast<void*>(start), it->second.length);
  ranges_.erase(it);
}

void HostPins::Pin(uintptr_t start, Range& range, const CudaContext& context) {
  const int device = context.device();
  Retained& retained = retained_[device];
  if (retained.ranges == 0 &&
      !context
           .Check("cuDevicePrimaryCtxRetain",
                  cu_.cuDevicePrimaryCtxRetain(&retained.context, device))
           .ok()) {
    retained_.erase(device);
    return;
  }
  // Portable: every context's copies take it as pinned; a failure only
  // costs speed (the driver stages pageable memory).
  const cu::CUresult result = cu_.cuMemHostRegister(reinterpret_cast<void*>(start), range.length,
                                                    cu::CU_MEMHOSTREGISTER_PORTABLE);
  if (result == cu::CUDA_SUCCESS) {
    range.pinned_by = device;
    ++retained.ranges;
    return;
  }
  // Already registered: by other means than this table (a range
  // overlapping one here), so nothing here counts on it.
  if (result != cu::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
    context.Check("cuMemHostRegister", result).IgnoreError();
  }
  if (retained.ranges > 0) return;
  cu_.cuDevicePrimaryCtxRelease(device);
  retained_.erase(device);
}

void HostPins::Unpin(uintptr_t start, Range& range, const CudaContext& context) {
  const int device = range.pinned_by;
  Retained& retained = retained_.at(device);
  // Under the context that pinned it, which may be another GPU's.
  cu_.cuCtxSetCurrent(retained.context);
  (void)cu_.cuMemHostUnregister(reinterpret_cast<void*>(start));
  context.MakeCurrent();
  range.pinned_by = kNobody;
  if (--retained.ranges > 0) return;
  cu_.cuDevicePrimaryCtxRelease(device);
  retained_.erase(device);
}

PinnedHostRanges::PinnedHostRanges(const CudaContext& context)
    : context_(context), pins_(HostPins::Of(context.driver())) {}

PinnedHostRanges::~PinnedHostRanges() {
  absl::MutexLock lock(&mu_);
  for (const auto& [start, range] : ranges_) pins_->Drop(start);
}

void* PinnedHostRanges::Allocate(size_t length, bool pin) {
  void* buffer = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buffer == MAP_FAILED) return nullptr;
  Add(buffer, length, /*owned=*/true, pin);
  return buffer;
}

void PinnedHostRanges::Register(void* memory, size_t length, bool pin) {
  Add(memory, length, /*owned=*/false, pin);
}

void PinnedHostRanges::Add(void* memory, size_t length, bool owned, bool pin) {
  const auto start = reinterpret_cast<uintptr_t>(memory);
  absl::MutexLock lock(&mu_);
  auto [it, added] = ranges_.emplace(start, Range{length});
  if (!added) return;
  pins_->Hold(start, length, owned);
  if (pin) Use(start, it->second);
}

bool PinnedHostRanges::Use(uintptr_t start, Range& range) {
  const HostPins::PinnedBy by = pins_->Use(start, context_);
  range.used = true;
  range.pinned = by == HostPins::PinnedBy::kThis;
  return by != HostPins::PinnedBy::kNone;
}

void PinnedHostRanges::Remove(void* memory) {
  const auto start = reinterpret_cast<uintptr_t>(memory);
  absl::MutexLock lock(&mu_);
  auto it = ranges_.find(start);
  if (it == ranges_.end()) return;
  if (it->second.used) pins_->Unuse(start, context_);
  pins_->Drop(start);
  ranges_.erase(it);
}

PinnedHostRanges::Pinned PinnedHostRanges::PinAll() {
  Pinned pinned;
  absl::MutexLock lock(&mu_);
  for (auto& [start, range] : ranges_) {
    if (!Use(start, range)) continue;
    ++pinned.ranges;
    pinned.bytes += range.length;
  }
  return pinned;
}

void PinnedHostRanges::UnpinAll() {
  absl::MutexLock lock(&mu_);
  for (auto& [start, range] : ranges_) {
    if (range.used) pins_->Unuse(start, context_);
    range.used = false;
    range.pinned = false;
  }
}

bool PinnedHostRanges::AllPinned(absl::Span<const HostToDevice> copies) const {
  absl::ReaderMutexLock lock(&mu_);
  for (const HostToDevice& c : copies) {
    const auto start = reinterpret_cast<uintptr_t>(c.source);
    auto it = Containing(ranges_, start, [](const Range& range) { return range.length; });
    if (it == ranges_.end() || !it->second.pinned ||
        start + c.length > it->first + it->second.length) {
      return false;
    }
  }
  return true;
}

}  // namespace cudafs
