#include "alloc/devices/pooled_device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "alloc/base/status_macros.h"
#include "alloc/devices/spill_device.h"

namespace cudafs {

namespace {

// Exports of several members, one after another.
class PooledExport final : public ExportedMemory {
 public:
  PooledExport(uint64_t size, std::vector<std::unique_ptr<ExportedMemory>> parts)
      : size_(size), parts_(std::move(parts)) {
    for (const auto& part : parts_) {
      pieces_.insert(pieces_.end(), part->pieces().begin(), part->pieces().end());
    }
  }
  Kind kind() const override { return parts_.front()->kind(); }
  uint64_t size() const override { return size_; }
  absl::Span<const ExportedPiece> pieces() const override { return pieces_; }

 private:
  const uint64_t size_;
  const std::vector<std::unique_ptr<ExportedMemory>> parts_;  // own the fds
  std::vector<ExportedPiece> pieces_;
};

absl::StatusOr<std::unique_ptr<ExportedMemory>> Combine(
    uint64_t size, std::vector<std::unique_ptr<ExportedMemory>> parts) {
  if (parts.size() == 1) return std::move(parts.front());
  return std::make_unique<PooledExport>(size, std::move(parts));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PooledDevice>> PooledDevice::Create(
    std::vector<std::unique_ptr<Device>> devices, std::unique_ptr<Device> spill) {
  if (devices.empty()) return absl::InvalidArgumentError("a pool needs at least one device");
  const uint64_t granule = devices.front()->granule_size();
  const std::string first = devices.front()->Describe();
  const bool has_spill = spill != nullptr;
  if (has_spill) {
    if (spill->HostView(0) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(spill->Describe(), " is no host memory: it cannot take spilled data"));
    }
    std::vector<Device*> gpus;
    for (const auto& device : devices) gpus.push_back(device.get());
    devices.push_back(std::make_unique<SpillDevice>(std::move(spill), std::move(gpus)));
  }
  std::vector<Member> members;
  uint64_t base = 0;
  for (auto& device : devices) {
    if (device->granule_size() != granule) {
      return absl::InvalidArgumentError(absl::StrCat(
          device->Describe(), " backs memory in units of ", device->granule_size(),
          " bytes where ", first, " uses ", granule));
    }
    const uint64_t size = device->arena_size();
    members.push_back({std::move(device), base, false});
    base = (base + size + kMemberAlignment - 1) / kMemberAlignment * kMemberAlignment;
  }
  members.back().spill = has_spill;
  const uint64_t end = members.back().base + members.back().device->arena_size();
  return std::unique_ptr<PooledDevice>(new PooledDevice(std::move(members), end, granule));
}

PooledDevice::~PooledDevice() {
  staging_.reset();
  while (!members_.empty()) members_.pop_back();
}

std::string PooledDevice::Describe() const {
  std::vector<std::string> names;
  for (const Member& m : members_) names.push_back(m.device->Describe());
  return absl::StrCat(members_.size(), " devices: ", absl::StrJoin(names, "; "));
}

std::string PooledDevice::place() const {
  std::vector<std::string> places;
  for (const Member& m : members_) places.push_back(m.device->place());
  return absl::StrJoin(places, ",");
}

std::vector<DevicePart> PooledDevice::parts() const {
  std::vector<DevicePart> parts;
  for (const Member& m : members_) {
    parts.push_back({{m.base, m.device->arena_size()}, m.device->Describe(), m.device->place(),
                     m.spill});
  }
  return parts;
}

std::optional<Device::GpuMemory> PooledDevice::PartMemory(size_t part) const {
  return members_.at(part).device->PartMemory(0);
}

SpillReadiness* PooledDevice::spill_readiness() {
  return members_.back().spill ? this : nullptr;
}

bool PooledDevice::KeepReady(uint64_t bytes) {
  return members_.back().device->spill_readiness()->KeepReady(bytes);
}

uint64_t PooledDevice::ready_bytes() const {
  return members_.back().device->spill_readiness()->ready_bytes();
}

bool PooledDevice::IsReady(uint64_t offset, uint64_t length) const {
  const size_t m = MemberOf(offset, length);
  return m + 1 == members_.size() && members_[m].spill &&
         members_[m].device->spill_readiness()->IsReady(offset - members_[m].base, length);
}

size_t PooledDevice::MemberOf(uint64_t offset, uint64_t length) const {
  auto it = std::upper_bound(members_.begin(), members_.end(), offset,
                             [](uint64_t o, const Member& m) { return o < m.base; });
  if (it == members_.begin()) return members_.size();
  --it;
  const uint64_t local = offset - it->base;
  const uint64_t size = it->device->arena_size();
  if (local > size || length > size - local) return members_.size();
  return static_cast<size_t>(it - members_.begin());
}

absl::Status PooledDevice::Straddles(uint64_t offset, uint64_t length) const {
  return absl::InternalError(absl::StrFormat(
      "arena range [%d, +%d) does not lie within one device of the pool", offset, length));
}

template <typename T>
absl::Status PooledDevice::Route(
    absl::Span<const T> items, uint64_t T::*offset, size_t T::*length,
    absl::FunctionRef<absl::Status(Device&, absl::Span<const T>)> run) const {
  // Most requests touch one member: no copy for the first (its offsets are
  // the pool's), one small rebased copy for another.
  if (items.empty()) return absl::OkStatus();
  const size_t first = MemberOf(items.front().*offset, items.front().*length);
  const bool one = first < members_.size() && absl::c_all_of(items, [&](const T& item) {
    return MemberOf(item.*offset, item.*length) == first;
  });
  if (one && members_[first].base == 0) return run(*members_[first].device, items);
  if (one) {
    absl::InlinedVector<T, 16> local(items.begin(), items.end());
    for (T& item : local) item.*offset -= members_[first].base;
    return run(*members_[first].device, local);
  }
  std::vector<std::vector<T>> shares(members_.size());
  for (const T& item : items) {
    const size_t m = MemberOf(item.*offset, item.*length);
    if (m == members_.size()) return Straddles(item.*offset, item.*length);
    T local = item;
    local.*offset -= members_[m].base;
    shares[m].push_back(local);
  }
  absl::Status status = absl::OkStatus();
  for (size_t m = 0; m < members_.size(); ++m) {
    if (shares[m].empty()) continue;
    // One member's failure leaves the others' copies done: the caller
    // fails the request either way.
    status.Update(run(*members_[m].device, shares[m]));
  }
  return status;
}

absl::Status PooledDevice::Commit(uint64_t offset, uint64_t length) {
  const size_t m = MemberOf(offset, length);
  if (m == members_.size()) return Straddles(offset, length);
  return members_[m].device->Commit(offset - members_[m].base, length);
}

absl::Status PooledDevice::Decommit(uint64_t offset, uint64_t length) {
  const size_t m = MemberOf(offset, length);
  if (m == members_.size()) return Straddles(offset, length);
  return members_[m].device->Decommit(offset - members_[m].base, length);
}

absl::Status PooledDevice::Write(absl::Span<const HostToDevice> copies) {
  return Route<HostToDevice>(
      copies, &HostToDevice::device_offset, &HostToDevice::length,
      [](Device& d, absl::Span<const HostToDevice> c) { return d.Write(c); });
}

absl::Status PooledDevice::Read(absl::Span<const DeviceToHost> copies) {
  return Route<DeviceToHost>(
      copies, &DeviceToHost::device_offset, &DeviceToHost::length,
      [](Device& d, absl::Span<const DeviceToHost> c) { return d.Read(c); });
}

absl::Status PooledDevice::Zero(absl::Span<const DeviceRange> ranges) {
  return Route<DeviceRange>(ranges, &DeviceRange::offset, &DeviceRange::length,
                            [](Device& d, absl::Span<const DeviceRange> r) { return d.Zero(r); });
}

absl::Status PooledDevice::Copy(absl::Span<const DeviceToDevice> copies) {
  std::vector<std::vector<DeviceToDevice>> within(members_.size());
  std::vector<DeviceToDevice> across;
  for (const DeviceToDevice& c : copies) {
    const size_t to = MemberOf(c.destination_offset, c.length);
    const size_t from = MemberOf(c.source_offset, c.length);
    if (to == members_.size()) return Straddles(c.destination_offset, c.length);
    if (from == members_.size()) return Straddles(c.source_offset, c.length);
    if (to != from) {
      across.push_back(c);
      continue;
    }
    within[to].push_back({c.destination_offset - members_[to].base,
                          c.source_offset - members_[to].base, c.length});
  }
  absl::Status status = absl::OkStatus();
  for (size_t m = 0; m < members_.size(); ++m) {
    if (!within[m].empty()) status.Update(members_[m].device->Copy(within[m]));
  }
  if (across.empty()) return status;
  for (const DeviceToDevice& c : across) status.Update(CopyAcross(c));
  return status;
}

absl::Status PooledDevice::CopyAcross(const DeviceToDevice& copy) const {
  const size_t from = MemberOf(copy.source_offset, copy.length);
  const size_t to = MemberOf(copy.destination_offset, copy.length);
  const uint64_t source = copy.source_offset - members_[from].base;
  const uint64_t destination = copy.destination_offset - members_[to].base;
  char* to_view = members_[to].device->HostView(destination);
  const char* from_view = members_[from].device->HostView(source);
  if (to_view != nullptr && from_view != nullptr) {
    std::memcpy(to_view, from_view, copy.length);
    return absl::OkStatus();
  }
  // Host memory the GPUs have pinned (SpillDevice) takes their DMA as is;
  // any other host memory works too, through the driver's own staging.
  if (to_view != nullptr) {
    const DeviceToHost read{to_view, source, copy.length};
    return members_[from].device->Read({&read, 1});
  }
  if (from_view != nullptr) {
    const HostToDevice write{destination, from_view, copy.length};
    return members_[to].device->Write({&write, 1});
  }
  // GPU to GPU: pinned staging, as a GPU copies at link speed only to and
  // from pinned memory, and pinning memory as it comes costs more than
  // the copy.
  char* staging = staging_->Acquire();
  std::unique_ptr<char, decltype(&std::free)> heap(nullptr, &std::free);
  if (staging == nullptr) {
    heap.reset(static_cast<char*>(std::aligned_alloc(4096, kStagingBytes)));
    if (heap == nullptr) return absl::ResourceExhaustedError("no memory to copy between devices");
    staging = heap.get();
  }
  absl::Status status = absl::OkStatus();
  for (size_t done = 0; done < copy.length && status.ok(); done += kStagingBytes) {
    const size_t n = std::min(kStagingBytes, copy.length - done);
    const DeviceToHost read{staging, source + done, n};
    status = members_[from].device->Read({&read, 1});
    if (!status.ok()) break;
    const HostToDevice write{destination + done, staging, n};
    status = members_[to].device->Write({&write, 1});
  }
  if (heap == nullptr) staging_->Release(staging);
  return status;
}

size_t PooledDevice::max_batch_copies() const {
  size_t most = members_.front().device->max_batch_copies();
  for (const Member& m : members_) most = std::min(most, m.device->max_batch_copies());
  return most;
}

// The first member maps host buffers; every other one holds them too.
void* PooledDevice::AllocateHostBuffer(size_t length) {
  void* buffer = members_.front().device->AllocateHostBuffer(length);
  if (buffer == nullptr) return nullptr;
  for (size_t m = 1; m < members_.size(); ++m) {
    members_[m].device->RegisterHostMemory(buffer, length);
  }
  return buffer;
}

void PooledDevice::FreeHostBuffer(void* buffer, size_t length) {
  for (size_t m = 1; m < members_.size(); ++m) members_[m].device->UnregisterHostMemory(buffer);
  members_.front().device->FreeHostBuffer(buffer, length);
}

void PooledDevice::RegisterHostMemory(void* memory, size_t length) {
  for (const Member& m : members_) m.device->RegisterHostMemory(memory, length);
}

void PooledDevice::UnregisterHostMemory(void* memory) {
  for (const Member& m : members_) m.device->UnregisterHostMemory(memory);
}

absl::StatusOr<std::vector<PooledDevice::CopyRun>> PooledDevice::CopyRuns(
    absl::Span<const DeviceToDevice> copies) const {
  std::vector<DeviceToDevice> sorted(copies.begin(), copies.end());
  std::sort(sorted.begin(), sorted.end(), [](const DeviceToDevice& a, const DeviceToDevice& b) {
    return a.destination_offset < b.destination_offset;
  });
  std::vector<CopyRun> runs(1);
  uint64_t copied_to = 0;  // end of the last copy placed
  for (const DeviceToDevice& c : sorted) {
    const size_t m = MemberOf(c.source_offset, c.length);
    if (m == members_.size()) return Straddles(c.source_offset, c.length);
    if (runs.back().copies.empty()) {
      runs.back().member = m;
    } else if (runs.back().member != m) {
      const uint64_t cut = c.destination_offset / granule_ * granule_;
      if (cut < copied_to) {
        return absl::UnimplementedError(
            "the file's bytes on two GPUs meet inside one granule: map it writable, or read it");
      }
      runs.push_back(CopyRun{cut, m, {}});
    }
    CopyRun& run = runs.back();
    run.copies.push_back(
        {c.destination_offset - run.start, c.source_offset - members_[m].base, c.length});
    copied_to = c.destination_offset + c.length;
  }
  return runs;
}

absl::StatusOr<Exporter*> PooledDevice::MemberExporter(size_t member) const {
  Exporter* exporter = members_[member].device->exporter();
  if (exporter == nullptr) {
    return absl::UnimplementedError(members_[member].device->Describe() +
                                    " cannot hand its memory to other processes");
  }
  return exporter;
}

absl::StatusOr<std::vector<Exporter::CopyPiece>> PooledDevice::PlanCopy(
    uint64_t size, absl::Span<const DeviceToDevice> copies) const {
  absl::StatusOr<std::vector<CopyRun>> runs = CopyRuns(copies);
  if (!runs.ok()) return runs.status();
  std::vector<CopyPiece> pieces;
  for (size_t i = 0; i < runs->size(); ++i) {
    const CopyRun& run = (*runs)[i];
    const uint64_t end = i + 1 < runs->size() ? (*runs)[i + 1].start : size;
    CUDAFS_ASSIGN_OR_RETURN(Exporter * exporter, MemberExporter(run.member));
    absl::StatusOr<std::vector<CopyPiece>> piece = exporter->PlanCopy(end - run.start, run.copies);
    if (!piece.ok()) return piece.status();
    pieces.insert(pieces.end(), piece->begin(), piece->end());
  }
  return pieces;
}

absl::Status PooledDevice::FillCopy(absl::Span<const CopyMemory> memory,
                                    absl::Span<const DeviceToDevice> copies) {
  absl::StatusOr<std::vector<CopyRun>> runs = CopyRuns(copies);
  if (!runs.ok()) return runs.status();
  if (runs->size() != memory.size()) {
    return absl::FailedPreconditionError("the file's bytes moved between GPUs since the plan");
  }
  uint64_t start = 0;
  for (size_t i = 0; i < runs->size(); ++i) {
    const CopyRun& run = (*runs)[i];
    if (run.start != start) {
      return absl::FailedPreconditionError("the file's bytes moved between GPUs since the plan");
    }
    CUDAFS_ASSIGN_OR_RETURN(Exporter * exporter, MemberExporter(run.member));
    if (absl::Status s = exporter->FillCopy({&memory[i], 1}, run.copies); !s.ok()) return s;
    start += memory[i].bytes;
  }
  return absl::OkStatus();
}

bool PooledDevice::can_share() const {
  for (size_t m = 0; m < members_.size(); ++m) {
    absl::StatusOr<Exporter*> exporter = MemberExporter(m);
    if (!exporter.ok() || !(*exporter)->can_share()) return false;
  }
  return true;
}

bool PooledDevice::Exclusive(DeviceRange range) const {
  const size_t m = MemberOf(range.offset, range.length);
  if (m == members_.size()) return false;
  absl::StatusOr<Exporter*> exporter = MemberExporter(m);
  return exporter.ok() && (*exporter)->Exclusive({range.offset - members_[m].base, range.length});
}

absl::StatusOr<std::unique_ptr<ExportedMemory>> PooledDevice::ExportShared(
    uint64_t size, absl::Span<const DeviceRange> ranges) {
  // Each member exports its run of consecutive ranges.
  std::vector<std::unique_ptr<ExportedMemory>> parts;
  uint64_t exported = 0;  // bytes of the file the parts so far map
  size_t i = 0;
  while (i < ranges.size()) {
    const size_t m = MemberOf(ranges[i].offset, ranges[i].length);
    if (m == members_.size()) return Straddles(ranges[i].offset, ranges[i].length);
    std::vector<DeviceRange> local;
    uint64_t bytes = 0;
    for (; i < ranges.size() && MemberOf(ranges[i].offset, ranges[i].length) == m; ++i) {
      local.push_back({ranges[i].offset - members_[m].base, ranges[i].length});
      bytes += ranges[i].length;
    }
    const uint64_t data = std::min(bytes, size - std::min(size, exported));
    CUDAFS_ASSIGN_OR_RETURN(Exporter * exporter, MemberExporter(m));
    absl::StatusOr<std::unique_ptr<ExportedMemory>> part = exporter->ExportShared(data, local);
    if (!part.ok()) return part.status();
    parts.push_back(std::move(*part));
    exported += bytes;
  }
  if (parts.empty()) return absl::InvalidArgumentError("nothing to share");
  return Combine(size, std::move(parts));
}

}  // namespace cudafs
