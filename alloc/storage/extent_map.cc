#include "alloc/storage/extent_map.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <iterator>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "alloc/base/coding.h"
#include "alloc/base/status_macros.h"
#include "alloc/devices/exporter.h"

namespace cudafs {

// Three words, then one extent in place with shared_, home_ and generation_ in
// the set's tail padding: a million small files are a million maps.
static_assert(sizeof(ExtentMap) <= 56, "ExtentMap grew past its small-file size");

ExtentMap::~ExtentMap() {
  for (const auto& [file_offset, block] : extents_) arena()->Free(block);
}

namespace {

// The record's layout, for EncodeTo, EncodeRangeTo and PutRecord.
void PutRecordHead(uint64_t data_end, uint64_t reserved_end, uint64_t home, uint64_t count,
                   std::string* out) {
  PutVarints(out, {data_end, reserved_end, home, count});
}

void PutExtent(uint64_t start, const Block& block, std::string* out) {
  PutVarints(out, {start, block.offset, block.size});
}

}  // namespace

void ExtentMap::EncodeTo(std::string* out) const {
  PutRecordHead(data_end_, reserved_end_, home_, extents_.size(), out);
  for (const auto& [start, block] : extents_) PutExtent(start, block, out);
}

void ExtentMap::EncodeRangeTo(uint64_t offset, uint64_t end, std::string* out) const {
  auto first = Find(offset);
  if (first == extents_.end()) first = extents_.lower_bound(offset);
  uint64_t count = 0;
  for (auto it = first; it != extents_.end() && it->start < end; ++it) ++count;
  PutRecordHead(data_end_, reserved_end_, home_, count, out);
  for (auto it = first; it != extents_.end() && it->start < end; ++it) {
    PutExtent(it->start, it->block, out);
  }
}

bool ExtentMap::ParseRecord(absl::string_view* in, Record* record) {
  uint64_t count = 0;
  if (!GetVarint(in, &record->data_end) || !GetVarint(in, &record->reserved_end) ||
      !GetVarintUpTo(in, kNoHome, &record->home) || !GetVarintUpTo(in, in->size() / 3, &count)) {
    return false;
  }
  record->extents.resize(count);
  for (Extent& extent : record->extents) {
    if (!GetVarint(in, &extent.start) || !GetVarint(in, &extent.block.offset) ||
        !GetVarint(in, &extent.block.size)) {
      return false;
    }
  }
  return true;
}

void ExtentMap::PutRecord(const Record& record, std::string* out) {
  PutRecordHead(record.data_end, record.reserved_end, record.home, record.extents.size(), out);
  for (const Extent& extent : record.extents) PutExtent(extent.start, extent.block, out);
}

absl::Status ExtentMap::DecodeFrom(absl::string_view* in) {
  const auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("file extents: ", what));
  };
  uint64_t home = 0;
  uint64_t count = 0;
  if (!extents_.empty() || !GetVarint(in, &data_end_) || !GetVarint(in, &reserved_end_) ||
      !GetVarintUpTo(in, kNoHome, &home) || !GetVarint(in, &count)) {
    return bad("a record cut short");
  }
  // Only a preference: a part this arena lacks is none.
  home_ = home < arena()->part_count() ? static_cast<uint16_t>(home) : kNoHome;
  uint64_t end = 0;  // of the previous extent
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t start = 0;
    Block block;
    if (!GetVarint(in, &start) || !GetVarint(in, &block.offset) || !GetVarint(in, &block.size)) {
      return bad("a record cut short");
    }
    // The layout (see the top of the header): aligned by file offset to
    // their size, in order, apart.
    if (block.size == 0 || start % block.size != 0 || start < end ||
        start > ~uint64_t{0} - block.size) {
      return bad(absl::StrFormat("extent at %d of %d bytes breaks the layout", start, block.size));
    }
    CUDAFS_RETURN_IF_ERROR(arena()->Claim(block));
    extents_.emplace(start, block);
    end = start + block.size;
  }
  return absl::OkStatus();
}

ExtentSet::const_iterator ExtentMap::Find(uint64_t offset) const {
  auto it = extents_.upper_bound(offset);
  if (it == extents_.begin()) return extents_.end();
  --it;
  return offset < it->start + it->block.size ? it : extents_.end();
}

uint64_t ExtentMap::FitBlock(uint64_t offset, uint64_t wanted) const {
  // Halving always terminates: at min_block the aligned slot around an
  // unmapped offset cannot overlap an extent (extents are aligned to sizes
  // >= min_block, so one overlapping the slot would contain the offset).
  for (uint64_t size = wanted;; size /= 2) {
    const uint64_t start = offset & ~(size - 1);
    const uint64_t end = start + size;
    auto next = extents_.lower_bound(start);
    if (next != extents_.end() && next->start < end) continue;
    if (next != extents_.begin()) {
      auto previous = std::prev(next);
      if (previous->start + previous->block.size > start) continue;
    }
    return size;
  }
}

bool ExtentMap::Appends(uint64_t offset, uint64_t end) const {
  // Blocks are at least min_block, so the data is mapped up to the end of
  // the min_block holding its last byte (unless punched since): a write
  // starting there or before leaves no unmapped hole behind it.
  const uint64_t min_block = arena()->min_block();
  const uint64_t data_blocks_end = (data_end_ + min_block - 1) / min_block * min_block;
  return offset <= data_blocks_end && end > data_end_;
}

absl::Status ExtentMap::MapRange(uint64_t offset, uint64_t end, bool grow,
                                 std::vector<uint64_t>* added) {
  const uint64_t min_block = arena()->min_block();
  uint64_t position = offset;
  while (position < end) {
    if (auto it = Find(position); it != extents_.end()) {
      position = it->start + it->block.size;
      continue;
    }
    uint64_t wanted;
    if (grow) {
      // As large as what the file holds so far (its offset, for a file
      // without holes), so that growth slack stays below its size even for
      // data far into a sparse file.
      wanted = std::clamp(
          std::bit_floor(std::max(std::min(position, extents_.bytes()), end - position)),
          min_block, max_extent());
    } else {
      // The largest block, aligned to its size, that starts at the
      // min_block holding `position` and ends by `end` rounded up to
      // min_block.
      const uint64_t start = position & ~(min_block - 1);
      wanted = std::clamp(std::bit_floor(end - start), min_block, max_extent());
      if (start != 0) wanted = std::min(wanted, start & (~start + 1));  // start's alignment
    }
    uint64_t size = FitBlock(position, wanted);
    absl::StatusOr<Block> block = arena()->Allocate(size, PartFor(position, size));
    // A fragmented arena may lack a block this large; smaller ones still
    // fit the file, so fall back before reporting ENOSPC.
    while (!block.ok() && absl::IsResourceExhausted(block.status()) && size > min_block) {
      size /= 2;
      block = arena()->Allocate(size, PartFor(position, size));
    }
    if (!block.ok()) {
      for (uint64_t start : *added) Release(extents_.find(start));
      added->clear();
      return block.status();
    }
    const uint64_t start = position & ~(size - 1);
    extents_.emplace(start, *block);
    added->push_back(start);
    position = start + size;
  }
  return absl::OkStatus();
}

size_t ExtentMap::PartFor(uint64_t offset, uint64_t size) {
  if (arena()->part_count() == 1) return 0;
  if (home_ == kNoHome) {
    assert(arena()->part_count() < kNoHome);
    home_ = static_cast<uint16_t>(placement::Home(arena()->Places()));
  }
  return placement::Stripe(home_, offset, size, max_extent(), arena()->leading_parts());
}

void ExtentMap::Release(ExtentSet::iterator it) {
  arena()->Free(it->block);
  extents_.erase(it);
}

absl::Status ExtentMap::Read(uint64_t offset, size_t length, char* out) const {
  // Bytes past the end of the data may hold anything (see the class
  // comment): they read as zeros without a device call.
  const uint64_t end = std::min(offset + length, std::max(offset, data_end_));
  std::fill(out + (end - offset), out + length, 0);
  length = end - offset;
  std::vector<DeviceToHost> copies;
  auto it = Find(offset);
  if (it == extents_.end()) it = extents_.upper_bound(offset);
  uint64_t position = offset;
  while (position < end) {
    if (it == extents_.end() || it->start >= end) {
      std::fill(out + (position - offset), out + length, 0);
      break;
    }
    if (it->start > position) {  // a hole
      std::fill(out + (position - offset), out + (it->start - offset), 0);
      position = it->start;
    }
    const uint64_t piece_end = std::min(end, it->start + it->block.size);
    copies.push_back(DeviceToHost{out + (position - offset),
                                  it->block.offset + (position - it->start),
                                  piece_end - position});
    position = piece_end;
    ++it;
  }
  if (copies.empty()) return absl::OkStatus();
  return arena()->device().Read(copies);
}

std::vector<DeviceToDevice> ExtentMap::CopiesOut(uint64_t size) const {
  const uint64_t end = std::min(size, data_end_);
  std::vector<DeviceToDevice> copies;
  for (auto it = extents_.begin(); it != extents_.end() && it->start < end; ++it) {
    const uint64_t piece_end = std::min(end, it->start + it->block.size);
    copies.push_back({it->start, it->block.offset, piece_end - it->start});
  }
  return copies;
}

void ExtentMap::AppendMapped(uint64_t offset, uint64_t end,
                             std::vector<DeviceRange>* ranges) const {
  auto it = Find(offset);
  if (it == extents_.end()) it = extents_.upper_bound(offset);
  for (; it != extents_.end() && it->start < end; ++it) {
    const uint64_t piece_start = std::max(offset, it->start);
    const uint64_t piece_end = std::min(end, it->start + it->block.size);
    ranges->push_back({it->block.offset + (piece_start - it->start), piece_end - piece_start});
  }
}

std::vector<DeviceRange> ExtentMap::ZerosFor(const std::vector<uint64_t>& added, uint64_t offset,
                                             uint64_t end) const {
  // File ranges to zero, below the data's new end only.
  const uint64_t data_end = std::max(data_end_, end);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  const auto add = [&](uint64_t from, uint64_t to) {
    to = std::min(to, data_end);
    if (from < to) ranges.emplace_back(from, to);
  };
  for (uint64_t start : added) {
    add(start, std::min(offset, start + extents_.at(start).size));
    add(std::max(end, start), start + extents_.at(start).size);
  }
  // Older blocks' bytes between the old end of the data and the write.
  add(data_end_, offset);
  return MappedZeros(std::move(ranges));
}

std::vector<DeviceRange> ExtentMap::MappedZeros(
    std::vector<std::pair<uint64_t, uint64_t>> ranges) const {
  std::sort(ranges.begin(), ranges.end());
  std::vector<DeviceRange> zeros;
  uint64_t covered = 0;  // merged: a batch's ranges must not overlap
  for (auto [from, to] : ranges) {
    from = std::max(from, covered);
    if (from >= to) continue;
    AppendMapped(from, to, &zeros);
    covered = to;
  }
  return zeros;
}

absl::Status ExtentMap::Write(uint64_t offset, const char* data, size_t length) {
  ++generation_;
  if (length == 0) return absl::OkStatus();
  const uint64_t end = offset + length;
  std::vector<uint64_t> added;
  CUDAFS_RETURN_IF_ERROR(MapRange(offset, end, Appends(offset, end), &added));

  // Bytes of new blocks outside the write, and of older ones up to it, would
  // otherwise show whatever the arena held before.
  const std::vector<DeviceRange> zeros = ZerosFor(added, offset, end);
  std::vector<HostToDevice> copies;
  AppendCopies(offset, end, data, &copies);
  absl::Status status = arena()->device().Zero(zeros);
  if (status.ok()) status = arena()->device().Write(copies);
  if (!status.ok()) {
    // Never keep a new block whose zeroing may not have happened.
    for (uint64_t start : added) Release(extents_.find(start));
    return status;
  }
  data_end_ = std::max(data_end_, end);
  return status;
}

void ExtentMap::AppendCopies(uint64_t offset, uint64_t end, const char* data,
                             std::vector<HostToDevice>* copies) const {
  for (auto it = Find(offset); it != extents_.end() && it->start < end; ++it) {
    const uint64_t piece_start = std::max(offset, it->start);
    const uint64_t piece_end = std::min(end, it->start + it->block.size);
    copies->push_back(HostToDevice{it->block.offset + (piece_start - it->start),
                                   data + (piece_start - offset), piece_end - piece_start});
  }
}

absl::Status ExtentMap::MapForWriteBack(uint64_t offset, uint64_t length) {
  ++generation_;
  if (length == 0) return absl::OkStatus();
  const uint64_t end = offset + length;
  std::vector<uint64_t> added;
  CUDAFS_RETURN_IF_ERROR(MapRange(offset, end, Appends(offset, end), &added));
  absl::Status status = arena()->device().Zero(ZerosFor(added, offset, end));
  if (!status.ok()) {
    for (uint64_t start : added) Release(extents_.find(start));
    return status;
  }
  data_end_ = std::max(data_end_, end);
  return status;
}

absl::Status ExtentMap::WriteMapped(absl::Span<const Run> runs) {
  ++generation_;
  std::vector<HostToDevice> copies;
  for (const Run& run : runs) {
    const uint64_t end = run.offset + run.length;
    uint64_t mapped = 0;
    for (auto it = Find(run.offset); it != extents_.end() && it->start < end; ++it) {
      mapped += std::min(end, it->start + it->block.size) - std::max(run.offset, it->start);
    }
    if (mapped != run.length) {
      return absl::InternalError("write-back of a range that is not mapped");
    }
    AppendCopies(run.offset, end, run.data, &copies);
  }
  return arena()->device().Write(copies);
}

absl::Status ExtentMap::CopyFrom(const ExtentMap& source, uint64_t source_offset,
                                 uint64_t offset, uint64_t length) {
  ++generation_;
  if (length == 0) return absl::OkStatus();
  const uint64_t end = offset + length;
  std::vector<uint64_t> added;
  CUDAFS_RETURN_IF_ERROR(MapRange(offset, end, Appends(offset, end), &added));
  std::vector<DeviceRange> zeros = ZerosFor(added, offset, end);
  std::vector<DeviceToDevice> copies;
  // Walk the range in pieces that lie in one destination extent and in one
  // source extent (copied on the device) or one source hole (zeroed).
  for (uint64_t done = 0; done < length;) {
    const auto to = Find(offset + done);  // mapped above
    const uint64_t to_left = to->start + to->block.size - (offset + done);
    const uint64_t from_position = source_offset + done;
    const auto from = source.Find(from_position);
    uint64_t piece = std::min(to_left, length - done);
    const uint64_t to_address = to->block.offset + (offset + done - to->start);
    if (from == source.extents_.end() || from_position >= source.data_end_) {
      // A hole, or past the end of the source's data: zeros.
      const uint64_t hole_end = from_position >= source.data_end_
                                    ? UINT64_MAX
                                    : source.NextData(from_position).value_or(UINT64_MAX);
      piece = std::min(piece, hole_end - from_position);
      zeros.push_back({to_address, piece});
    } else {
      piece = std::min({piece, from->start + from->block.size - from_position,
                        source.data_end_ - from_position});
      copies.push_back(DeviceToDevice{
          to_address, from->block.offset + (from_position - from->start), piece});
    }
    done += piece;
  }
  absl::Status status = arena()->device().Zero(zeros);
  if (status.ok()) status = arena()->device().Copy(copies);
  if (!status.ok()) {
    for (uint64_t start : added) Release(extents_.find(start));
    return status;
  }
  data_end_ = std::max(data_end_, end);
  return status;
}

absl::Status ExtentMap::Reserve(uint64_t offset, uint64_t length) {
  ++generation_;
  if (length == 0) return absl::OkStatus();
  std::vector<uint64_t> added;
  // fallocate asks for exactly this range: no growth slack.
  CUDAFS_RETURN_IF_ERROR(MapRange(offset, offset + length, /*grow=*/false, &added));
  // The range becomes data: new blocks are zeroed whole (a reservation
  // reads as zeros), older ones from the old end of the data.
  std::vector<std::pair<uint64_t, uint64_t>> ranges = {{data_end_, offset + length}};
  for (uint64_t start : added) ranges.emplace_back(start, start + extents_.at(start).size);
  absl::Status status = arena()->device().Zero(MappedZeros(std::move(ranges)));
  if (!status.ok()) {
    for (uint64_t start : added) Release(extents_.find(start));
    return status;
  }
  reserved_end_ = std::max(reserved_end_, offset + length);
  data_end_ = std::max(data_end_, offset + length);
  return status;
}

absl::StatusOr<std::vector<DeviceRange>> ExtentMap::Share(uint64_t size) {
  ++generation_;
  // One block for one first: that needs no room past the capacity, which
  // the fresh windows below do.
  CUDAFS_RETURN_IF_ERROR(LeaveSpill());
  Device& device = arena()->device();
  const uint64_t granule = std::max(device.granule_size(), arena()->min_block());
  const uint64_t end = (size + granule - 1) / granule * granule;
  const uint64_t largest = std::max(max_extent(), granule);
  const auto has_large = [&](uint64_t from, uint64_t to) {
    for (auto it = extents_.lower_bound(from); it != extents_.end() && it->start < to; ++it) {
      if (it->block.size >= granule) return true;
    }
    return false;
  };
  // Windows tiling [0, end) (and on to the end of a block kept there):
  // blocks kept as they are, or fresh ones taking what lies in them. A
  // block in host memory (a spill part) comes back to a GPU.
  std::vector<Window> windows;
  absl::Status status;
  for (uint64_t at = 0; at < end;) {
    auto it = extents_.find(at);
    uint64_t window = granule;
    if (it != extents_.end() && it->block.size >= granule) {
      if (arena()->Exclusive(it->block)) {
        windows.push_back({at, it->block, false});
        at += it->block.size;
        continue;
      }
      window = it->block.size;
    } else {
      // Small blocks and holes: as few fresh blocks as fit between the
      // large ones (each is a piece the importer maps).
      while (window * 2 <= largest && at % (window * 2) == 0 && at + window * 2 <= end &&
             !has_large(at + window, at + window * 2)) {
        window *= 2;
      }
    }
    absl::StatusOr<Block> block = arena()->AllocateExclusive(window, PartFor(at, window));
    if (!block.ok()) {
      status = block.status();
      break;
    }
    windows.push_back({at, *block, true});
    at += window;
  }
  if (!status.ok()) {
    for (const Window& w : windows) {
      if (w.fresh) arena()->Free(w.block);
    }
    return status;
  }
  // Kept blocks are zeroed past the end of the data, fresh ones but for
  // the data of the blocks they replace: a mapping shows all of them.
  std::vector<DeviceRange> zeros;
  for (const Window& w : windows) {
    const uint64_t window_end = w.start + w.block.size;
    const uint64_t from = std::max(w.start, data_end_);
    if (!w.fresh && from < window_end) {
      zeros.push_back({w.block.offset + (from - w.start), window_end - from});
    }
  }
  if (absl::Status s = device.Zero(zeros); !s.ok()) {
    for (const Window& w : windows) {
      if (w.fresh) arena()->Free(w.block);
    }
    return s;
  }
  const uint64_t mapped_end = windows.back().start + windows.back().block.size;
  if (absl::Status s = Relocate(windows, mapped_end); !s.ok()) return s;
  std::vector<DeviceRange> ranges;
  for (const Window& w : windows) ranges.push_back({w.block.offset, w.block.size});
  shared_ = true;
  // Zero or the file's: all of it is data now.
  data_end_ = std::max(data_end_, mapped_end);
  return ranges;
}

absl::Status ExtentMap::Fill(absl::Span<const Window> windows, uint64_t zero_end) const {
  std::vector<DeviceRange> zeros;
  std::vector<DeviceToDevice> copies;
  for (const Window& w : windows) {
    if (!w.fresh) continue;
    const uint64_t window_end = w.start + w.block.size;
    const uint64_t fill_end = std::min(window_end, zero_end);
    uint64_t at = w.start;  // what lies below is filled
    for (auto it = extents_.lower_bound(w.start); it != extents_.end() && it->start < window_end;
         ++it) {
      if (at < std::min(it->start, fill_end)) {
        zeros.push_back({w.block.offset + (at - w.start), std::min(it->start, fill_end) - at});
      }
      const uint64_t to = std::min(it->start + it->block.size, data_end_);
      if (it->start < to) {
        copies.push_back(
            {w.block.offset + (it->start - w.start), it->block.offset, to - it->start});
      }
      at = std::max(it->start, std::min(it->start + it->block.size, data_end_));
      if (at < std::min(it->start + it->block.size, fill_end)) {
        zeros.push_back({w.block.offset + (at - w.start),
                         std::min(it->start + it->block.size, fill_end) - at});
      }
      at = it->start + it->block.size;
    }
    if (at < fill_end) zeros.push_back({w.block.offset + (at - w.start), fill_end - at});
  }
  Device& device = arena()->device();
  absl::Status status = device.Zero(zeros);
  if (status.ok()) status = device.Copy(copies);
  if (!status.ok()) {
    for (const Window& w : windows) {
      if (w.fresh) arena()->Free(w.block);
    }
    return status;
  }
  return absl::OkStatus();
}

void ExtentMap::Install(absl::Span<const Window> windows) {
  ++generation_;
  for (const Window& w : windows) {
    if (!w.fresh) continue;
    const uint64_t window_end = w.start + w.block.size;
    for (auto it = extents_.lower_bound(w.start); it != extents_.end() && it->start < window_end;) {
      arena()->Free(it->block);
      it = extents_.erase(it);
    }
    extents_.emplace(w.start, w.block);
  }
}

absl::Status ExtentMap::Relocate(absl::Span<const Window> windows, uint64_t zero_end) {
  CUDAFS_RETURN_IF_ERROR(Fill(windows, zero_end));
  Install(windows);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ExportedMemory>> ExtentMap::Export(uint64_t size) {
  Device& device = arena()->device();
  Exporter* exporter = device.exporter();
  if (exporter == nullptr || !exporter->can_share()) {
    return absl::UnimplementedError(absl::StrCat(device.Describe(), " cannot share memory"));
  }
  if (size < device.granule_size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("files under %d KiB are copied, never shared: map it without writing",
                        device.granule_size() / 1024));
  }
  CUDAFS_ASSIGN_OR_RETURN(std::vector<DeviceRange> ranges, Share(size));
  return exporter->ExportShared(size, ranges);
}

absl::StatusOr<Exporter*> ExtentMap::CopyExporter() const {
  Device& device = arena()->device();
  if (device.exporter() == nullptr) {
    return absl::UnimplementedError(device.Describe() +
                                    " cannot copy into other processes' memory");
  }
  return device.exporter();
}

absl::StatusOr<std::vector<Exporter::CopyPiece>> ExtentMap::PlanCopy(uint64_t size) const {
  CUDAFS_ASSIGN_OR_RETURN(Exporter * exporter, CopyExporter());
  return exporter->PlanCopy(size, CopiesOut(size));
}

absl::Status ExtentMap::CopyInto(absl::Span<const Exporter::CopyMemory> memory,
                                 uint64_t size) const {
  CUDAFS_ASSIGN_OR_RETURN(Exporter * exporter, CopyExporter());
  return exporter->FillCopy(memory, CopiesOut(size));
}

ExtentMap::PreparedMove::~PreparedMove() {
  for (const Window& w : windows_) arena_->Free(w.block);
}

ExtentMap::PreparedMove& ExtentMap::PreparedMove::operator=(PreparedMove&& other) noexcept {
  // `other` leaves with the blocks this held, and frees them.
  std::swap(arena_, other.arena_);
  std::swap(generation_, other.generation_);
  std::swap(bytes_, other.bytes_);
  windows_.swap(other.windows_);
  return *this;
}

absl::StatusOr<ExtentMap::PreparedMove> ExtentMap::PrepareMove(
    absl::FunctionRef<bool(size_t part)> leave, absl::Span<const size_t> to,
    uint64_t budget) const {
  if (shared_) return absl::FailedPreconditionError("a mapping holds the file's memory");
  PreparedMove move(arena(), generation_);
  absl::Status status;
  for (const Extent& extent : extents_) {
    if (move.bytes_ >= budget) break;
    if (!leave(arena()->PartOf(extent.block.offset))) continue;
    absl::StatusOr<Block> block = arena()->AllocateForMove(extent.block.size, to);
    if (!block.ok()) {
      status = block.status();
      break;
    }
    move.windows_.push_back({extent.start, *block, true});
    move.bytes_ += extent.block.size;
  }
  if (move.windows_.empty() && !status.ok()) return status;
  // What lies past the end of the data may hold anything (see above).
  absl::Status filled = Fill(move.windows_, data_end_);
  if (!filled.ok()) {
    move.windows_.clear();  // Fill gave the blocks back
    return filled;
  }
  return move;
}

uint64_t ExtentMap::FinishMove(PreparedMove move) {
  if (move.generation_ != generation_) return 0;  // the blocks go back with `move`
  Install(move.windows_);
  move.windows_.clear();
  return move.bytes_;
}

absl::StatusOr<uint64_t> ExtentMap::Move(absl::FunctionRef<bool(size_t part)> leave,
                                         absl::Span<const size_t> to, uint64_t budget) {
  CUDAFS_ASSIGN_OR_RETURN(PreparedMove move, PrepareMove(leave, to, budget));
  return FinishMove(std::move(move));
}

absl::StatusOr<uint64_t> ExtentMap::Compact(const CompactionPlan& plan) {
  if (shared_) return absl::FailedPreconditionError("a mapping holds the file's memory");
  std::vector<Extent> pending;
  for (const Extent& extent : extents_) {
    if (plan.Empties(extent.block.offset, extent.block.size)) pending.push_back(extent);
  }
  std::vector<Window> windows;
  uint64_t bytes = 0;
  while (!pending.empty()) {
    const Extent extent = pending.back();
    pending.pop_back();
    absl::StatusOr<Block> block = arena()->AllocateForCompaction(
        extent.block.size, arena()->PartOf(extent.block.offset), plan);
    if (block.ok()) {
      windows.push_back({extent.start, *block, true});
      bytes += extent.block.size;
      continue;
    }
    if (extent.block.size <= arena()->min_block()) continue;
    // The granules being filled have holes, not room this large: the
    // halves move apart (a file may hold blocks of any size at aligned
    // offsets, so it only costs an extent more).
    extents_.erase(extents_.find(extent.start));
    const auto [lower, upper] = arena()->Split(extent.block);
    extents_.emplace(extent.start, lower);
    extents_.emplace(extent.start + lower.size, upper);
    pending.push_back({extent.start + lower.size, upper});
    pending.push_back({extent.start, lower});
  }
  if (windows.empty()) return 0;
  // What lies past the end of the data may hold anything (see above).
  CUDAFS_RETURN_IF_ERROR(Relocate(windows, data_end_));
  return bytes;
}

uint64_t ExtentMap::BytesIn(const CompactionPlan& plan) const {
  uint64_t bytes = 0;
  for (const Extent& extent : extents_) {
    if (plan.Empties(extent.block.offset, extent.block.size)) bytes += extent.block.size;
  }
  return bytes;
}

absl::Status ExtentMap::LeaveSpill() {
  if (arena()->leading_parts() == arena()->part_count() || shared_) return absl::OkStatus();
  const std::vector<size_t> to = placement::ReturnDestinations(arena()->Places(), home_);
  const auto spill = [this](size_t part) { return arena()->IsSpillPart(part); };
  for (;;) {
    CUDAFS_ASSIGN_OR_RETURN(const uint64_t moved,
                            Move(spill, to, std::numeric_limits<uint64_t>::max()));
    if (moved == 0) return absl::OkStatus();
  }
}

uint64_t ExtentMap::BytesIn(size_t part) const {
  uint64_t bytes = 0;
  for (const Extent& extent : extents_) {
    if (arena()->PartOf(extent.block.offset) == part) bytes += extent.block.size;
  }
  return bytes;
}

void ExtentMap::Carve(uint64_t start, Block block, uint64_t offset, uint64_t end,
                      uint64_t zero_end, bool free_shared, std::vector<DeviceRange>* zeros,
                      std::vector<Extent>* freed) {
  const uint64_t block_end = start + block.size;
  // A shared file's large blocks may be mapped elsewhere: never split, and
  // freed only by Truncate (free_shared).
  const bool whole = shared_ && block.size >= arena()->device().granule_size();
  if (start >= offset && block_end <= end && (free_shared || !whole)) {
    freed->push_back({start, block});
    return;
  }
  if (block_end <= offset || start >= end || block.size <= arena()->min_block() || whole) {
    const uint64_t from = std::max(offset, start);
    const uint64_t to = std::min(zero_end, block_end);
    if (from < to) zeros->push_back({block.offset + (from - start), to - from});
    extents_.emplace(start, block);
    return;
  }
  const auto [lower, upper] = arena()->Split(block);
  Carve(start, lower, offset, end, zero_end, free_shared, zeros, freed);
  Carve(start + lower.size, upper, offset, end, zero_end, free_shared, zeros, freed);
}

absl::Status ExtentMap::PunchHole(uint64_t offset, uint64_t length) {
  const uint64_t end = length > std::numeric_limits<uint64_t>::max() - offset
                           ? std::numeric_limits<uint64_t>::max()
                           : offset + length;
  return Cut(offset, end, /*free_shared=*/false);
}

absl::Status ExtentMap::Cut(uint64_t offset, uint64_t end, bool free_shared) {
  ++generation_;
  std::vector<std::pair<uint64_t, Block>> touched;
  auto it = extents_.upper_bound(offset);
  if (it != extents_.begin() && std::prev(it)->start + std::prev(it)->block.size > offset) --it;
  for (; it != extents_.end() && it->start < end; it = extents_.erase(it)) {
    touched.emplace_back(it->start, it->block);
  }
  // A block partly in the range is split into aligned halves down to
  // min_block, so that the range gives back all its whole min_blocks
  // however large the blocks (a punch or truncate inside a 32 MiB block).
  std::vector<DeviceRange> zeros;
  std::vector<Extent> freed;
  // Bytes past the end of the data read as zeros already, but for a
  // shared file, where a mapping sees them.
  const uint64_t zero_end = shared_ ? end : std::min(end, std::max(offset, data_end_));
  for (const auto& [start, block] : touched) {
    Carve(start, block, offset, end, zero_end, free_shared, &zeros, &freed);
  }
  // Zero first: if the device fails, the blocks are still all there (split
  // or not, the same bytes) and the caller sees EIO with the file as it was
  // outside the range.
  if (absl::Status status = arena()->device().Zero(zeros); !status.ok()) {
    for (const Extent& extent : freed) extents_.emplace(extent.start, extent.block);
    return status;
  }
  for (const Extent& extent : freed) arena()->Free(extent.block);
  return absl::OkStatus();
}

absl::Status ExtentMap::Truncate(uint64_t size) {
  ++generation_;
  reserved_end_ = std::min(reserved_end_, size);
  data_end_ = std::min(data_end_, size);
  // Past the new end a mapping is the file's no longer: its blocks go, as
  // tmpfs drops a mapped file's pages past its end.
  absl::Status status = Cut(size, std::numeric_limits<uint64_t>::max(), /*free_shared=*/true);
  // A shared file's kept blocks are zero past `size`: data a mapping may
  // write, and read(2) must then see.
  if (status.ok() && shared_ && !extents_.empty()) {
    const Extent& last = *std::prev(extents_.end());
    data_end_ = std::max(size, last.start + last.block.size);
  }
  return status;
}

void ExtentMap::TrimTail(uint64_t size) {
  ++generation_;
  if (shared_) return;  // its blocks stay whole
  const uint64_t min_block = arena()->min_block();
  const uint64_t keep = std::max(size, reserved_end_);
  if (keep > std::numeric_limits<uint64_t>::max() - min_block) return;
  const uint64_t limit = (keep + min_block - 1) / min_block * min_block;
  auto it = Find(limit);
  if (it == extents_.end() || it->start == limit) return;  // nothing hangs over
  uint64_t start = it->start;
  Block block = it->block;
  extents_.erase(it);
  // Blocks are aligned and limit is a multiple of min_block, so halving
  // ends with a block that stops exactly at limit.
  while (start + block.size > limit) {
    const auto [lower, upper] = arena()->Split(block);
    if (limit <= start + lower.size) {
      arena()->Free(upper);
      block = lower;
    } else {
      extents_.emplace(start, lower);
      start += lower.size;
      block = upper;
    }
  }
  extents_.emplace(start, block);
}

std::optional<uint64_t> ExtentMap::NextData(uint64_t offset) const {
  if (Find(offset) != extents_.end()) return offset;
  auto it = extents_.upper_bound(offset);
  if (it == extents_.end()) return std::nullopt;
  return it->start;
}

uint64_t ExtentMap::NextHole(uint64_t offset) const {
  uint64_t position = offset;
  for (auto it = Find(position); it != extents_.end(); it = Find(position)) {
    position = it->start + it->block.size;
  }
  return position;
}

}  // namespace cudafs
