#include "alloc/devices/device_hand_over.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "alloc/base/coding.h"
#include "alloc/base/status_macros.h"
#include "alloc/devices/cuda_device.h"
#include "alloc/devices/cuda_driver.h"
#include "alloc/devices/host_device.h"
#include "alloc/devices/pooled_device.h"
#include "alloc/devices/spill_device.h"

namespace cudafs {
namespace {

// What each device of the layout is.
constexpr char kHost = 'H';
constexpr char kGpu = 'C';
constexpr char kPool = 'P';

absl::Status CannotPass(const Device& device) {
  return absl::FailedPreconditionError(
      absl::StrCat("the memory of ", device.Describe(), " cannot pass to another process"));
}

absl::Status Malformed() {
  return absl::InvalidArgumentError("the memory handed over is laid out as this build cannot read");
}

// A GPU of the layout: its identity, size and options, and its pieces,
// whose descriptors are the holder's.
struct GpuLayout {
  std::string pci_bus_id;
  uint64_t arena_size = 0;
  uint64_t reserve = 0;
  uint64_t idle = 0;  // milliseconds plus one; 0: never released
  std::vector<CudaDevice::HandedPiece> pieces;  // in arena order
};

// The layout read: host memory (its memfd), one GPU, or a pool of GPUs
// and the size of the host memory they spill to.
struct Layout {
  char kind = 0;
  int host_fd = -1;
  std::vector<GpuLayout> gpus;
  uint64_t spill_bytes = 0;
};

void PutGpu(const GpuLayout& gpu, std::string* out, std::vector<int>* fds) {
  out->push_back(kGpu);
  PutBytes(out, gpu.pci_bus_id);
  PutVarint(out, gpu.arena_size);
  PutVarint(out, gpu.reserve);
  PutVarint(out, gpu.idle);
  PutVarint(out, gpu.pieces.size());
  for (const CudaDevice::HandedPiece& piece : gpu.pieces) {
    PutVarint(out, piece.offset);
    PutVarint(out, piece.length);
    PutVarint(out, piece.committed);
    PutVarint(out, piece.exported ? 1 : 0);
    fds->push_back(piece.fd);
  }
}

// The bytes of `layout`, and its descriptors in the order they name them.
void PutLayout(const Layout& layout, std::string* out, std::vector<int>* fds) {
  switch (layout.kind) {
    case kHost:
      out->push_back(kHost);
      fds->push_back(layout.host_fd);
      break;
    case kGpu:
      PutGpu(layout.gpus.front(), out, fds);
      break;
    default:
      out->push_back(kPool);
      PutVarint(out, layout.gpus.size());
      for (const GpuLayout& gpu : layout.gpus) PutGpu(gpu, out, fds);
      PutVarint(out, layout.spill_bytes);
  }
}

// Reads layout bytes whose descriptors are `fds`, in order; false for bytes
// that are none or a count of descriptors that does not match.
class LayoutParser {
 public:
  LayoutParser(absl::string_view in, const std::vector<int>& fds) : in_(in), fds_(fds) {}

  bool Parse(Layout* layout) {
    if (in_.empty()) return false;
    layout->kind = in_.front();
    in_.remove_prefix(1);
    bool ok = false;
    switch (layout->kind) {
      case kHost:
        ok = Take(&layout->host_fd);
        break;
      case kGpu:
        ok = Gpu(&layout->gpus.emplace_back());
        break;
      case kPool: {
        uint64_t count = 0;
        ok = GetVarintUpTo(&in_, 64, &count) && count > 0;
        for (uint64_t i = 0; ok && i < count; ++i) {
          ok = !in_.empty() && in_.front() == kGpu;
          if (ok) {
            in_.remove_prefix(1);
            ok = Gpu(&layout->gpus.emplace_back());
          }
        }
        ok = ok && GetVarint(&in_, &layout->spill_bytes);
        break;
      }
      default:
        break;
    }
    return ok && in_.empty() && next_ == fds_.size();
  }

 private:
  bool Take(int* fd) {
    if (next_ >= fds_.size()) return false;
    *fd = fds_[next_++];
    return true;
  }

  bool Gpu(GpuLayout* gpu) {
    absl::string_view pci_bus_id;
    uint64_t count = 0;
    if (!GetBytes(&in_, &pci_bus_id) || !GetVarint(&in_, &gpu->arena_size) ||
        !GetVarint(&in_, &gpu->reserve) || !GetVarint(&in_, &gpu->idle) ||
        !GetVarintUpTo(&in_, fds_.size() - next_, &count)) {
      return false;
    }
    gpu->pci_bus_id = std::string(pci_bus_id);
    gpu->pieces.resize(count);
    for (CudaDevice::HandedPiece& piece : gpu->pieces) {
      uint64_t exported = 0;
      if (!GetVarint(&in_, &piece.offset) || !GetVarint(&in_, &piece.length) ||
          !GetVarint(&in_, &piece.committed) || !GetVarintUpTo(&in_, 1, &exported) ||
          !Take(&piece.fd)) {
        return false;
      }
      piece.exported = exported != 0;
    }
    return true;
  }

  absl::string_view in_;
  const std::vector<int>& fds_;
  size_t next_ = 0;
};

absl::StatusOr<GpuLayout> GpuOf(CudaDevice& gpu) {
  absl::StatusOr<std::vector<CudaDevice::HandedPiece>> pieces = gpu.HandOverPieces();
  if (!pieces.ok()) return pieces.status();
  const absl::Duration idle = gpu.options().idle_release;
  return GpuLayout{
      .pci_bus_id = gpu.pci_bus_id(),
      .arena_size = gpu.arena_size(),
      .reserve = gpu.options().reserve_bytes,
      .idle = idle == absl::InfiniteDuration()
                  ? 0
                  : static_cast<uint64_t>(absl::ToInt64Milliseconds(idle)) + 1,
      .pieces = *std::move(pieces)};
}

// The GPUs of `device` in layout order (one, or a pool's members), and the
// pool's spill member if it has one; FailedPrecondition for a device that
// is neither host memory nor made of GPUs.
absl::Status GpusOf(Device& device, std::vector<CudaDevice*>* gpus, SpillDevice** spill) {
  if (auto* gpu = dynamic_cast<CudaDevice*>(&device); gpu != nullptr) {
    gpus->push_back(gpu);
    return absl::OkStatus();
  }
  auto* pool = dynamic_cast<PooledDevice*>(&device);
  if (pool == nullptr) return CannotPass(device);
  const std::vector<DevicePart> parts = pool->parts();
  const size_t count = !parts.empty() && parts.back().spill ? parts.size() - 1 : parts.size();
  for (size_t i = 0; i < count; ++i) {
    auto* gpu = dynamic_cast<CudaDevice*>(&pool->member(i));
    if (gpu == nullptr) return CannotPass(pool->member(i));
    gpus->push_back(gpu);
  }
  if (count < parts.size()) {
    *spill = dynamic_cast<SpillDevice*>(&pool->member(count));
    if (*spill == nullptr) return CannotPass(pool->member(count));
  }
  return absl::OkStatus();
}

void CloseGpu(const GpuLayout& gpu) {
  for (const CudaDevice::HandedPiece& piece : gpu.pieces) close(piece.fd);
}

// GPU `gpu` of a layout as a device of this process, through `driver`
// (null: the process's). Takes the pieces' descriptors, adopted or not.
absl::StatusOr<std::unique_ptr<CudaDevice>> AdoptGpu(const GpuLayout& gpu,
                                                     const CudaDriver* driver) {
  absl::StatusOr<const CudaDriver*> loaded =
      driver != nullptr ? absl::StatusOr<const CudaDriver*>(driver) : CudaDriver::Load();
  absl::StatusOr<std::vector<int>> index =
      loaded.ok() ? ResolveCudaDevices(**loaded, gpu.pci_bus_id)
                  : absl::StatusOr<std::vector<int>>(loaded.status());
  if (!index.ok() || index->size() != 1) {
    CloseGpu(gpu);
    return absl::UnavailableError(absl::StrCat("the GPU at ", gpu.pci_bus_id,
                                               " that holds the files: ",
                                               index.ok() ? "ambiguous" : index.status().message()));
  }
  CudaDeviceOptions options{.idle_release = gpu.idle == 0 ? absl::InfiniteDuration()
                                                          : absl::Milliseconds(gpu.idle - 1),
                            .reserve_bytes = gpu.reserve};
  absl::StatusOr<std::unique_ptr<CudaDevice>> made =
      CudaDevice::Create(**loaded, index->front(), gpu.arena_size, options);
  if (!made.ok()) {
    CloseGpu(gpu);
    return made.status();
  }
  if ((*made)->arena_size() != gpu.arena_size) {
    CloseGpu(gpu);
    return absl::FailedPreconditionError(absl::StrCat(
        (*made)->Describe(), " lays its arena out otherwise than the daemon that held the files"));
  }
  if (absl::Status s = (*made)->AdoptPieces(gpu.pieces); !s.ok()) return s;
  return made;
}

// The device `layout` makes, taking every descriptor it names.
absl::StatusOr<std::unique_ptr<Device>> AdoptLayout(const Layout& layout,
                                                    const CudaDriver* driver) {
  if (layout.kind == kHost) {
    absl::StatusOr<std::unique_ptr<HostDevice>> host = HostDevice::Adopt(layout.host_fd);
    if (!host.ok()) return host.status();
    return std::unique_ptr<Device>(*std::move(host));
  }
  std::vector<std::unique_ptr<Device>> gpus;
  for (size_t i = 0; i < layout.gpus.size(); ++i) {
    absl::StatusOr<std::unique_ptr<CudaDevice>> gpu = AdoptGpu(layout.gpus[i], driver);
    if (!gpu.ok()) {
      for (size_t j = i + 1; j < layout.gpus.size(); ++j) CloseGpu(layout.gpus[j]);
      return gpu.status();
    }
    gpus.push_back(*std::move(gpu));
  }
  if (layout.kind == kGpu) return std::move(gpus.front());
  std::unique_ptr<Device> spill;
  if (layout.spill_bytes > 0) {
    absl::StatusOr<std::unique_ptr<HostDevice>> host =
        HostDevice::Create(layout.spill_bytes, HostDevice::Backing::kHugePages);
    if (!host.ok()) return host.status();
    spill = *std::move(host);
  }
  absl::StatusOr<std::unique_ptr<PooledDevice>> pool =
      PooledDevice::Create(std::move(gpus), std::move(spill));
  if (!pool.ok()) return pool.status();
  return std::unique_ptr<Device>(*std::move(pool));
}

}  // namespace

absl::StatusOr<DeviceHandOver> DeviceHandOver::Of(Device& device) {
  Layout layout;
  if (auto* host = dynamic_cast<HostDevice*>(&device); host != nullptr) {
    if (host->memory() < 0) return CannotPass(device);
    layout.kind = kHost;
    layout.host_fd = dup(host->memory());
    if (layout.host_fd < 0) return absl::ErrnoToStatus(errno, "dup");
  } else {
    std::vector<CudaDevice*> gpus;
    SpillDevice* spill = nullptr;
    CUDAFS_RETURN_IF_ERROR(GpusOf(device, &gpus, &spill));
    layout.kind = dynamic_cast<CudaDevice*>(&device) != nullptr ? kGpu : kPool;
    for (CudaDevice* gpu : gpus) {
      absl::StatusOr<GpuLayout> passed = GpuOf(*gpu);
      if (!passed.ok()) {
        for (const GpuLayout& done : layout.gpus) CloseGpu(done);
        return passed.status();
      }
      layout.gpus.push_back(*std::move(passed));
    }
    if (spill != nullptr && spill->committed_bytes() > 0) {
      for (const GpuLayout& done : layout.gpus) CloseGpu(done);
      return absl::FailedPreconditionError(
          "some files are in the host memory the GPUs spilled to, which cannot pass to another "
          "process; they return to the GPUs once these have room (cudafs --stats shows where "
          "the files are): upgrade then");
    }
    if (spill != nullptr) layout.spill_bytes = spill->arena_size();
  }
  DeviceHandOver handed("", {});
  PutLayout(layout, &handed.layout_, &handed.fds_);
  return handed;
}

absl::Status DeviceHandOver::WatchPieces(Device& device,
                                         std::function<void(const PieceChange&)> watcher) {
  std::vector<CudaDevice*> gpus;
  SpillDevice* spill = nullptr;
  CUDAFS_RETURN_IF_ERROR(GpusOf(device, &gpus, &spill));
  if (spill != nullptr) {
    return absl::FailedPreconditionError(
        "files the GPUs spill to host memory would not outlive the daemon: add spill=0");
  }
  for (CudaDevice* gpu : gpus) CUDAFS_RETURN_IF_ERROR(gpu->CanHandOver());
  for (size_t i = 0; i < gpus.size(); ++i) {
    gpus[i]->WatchPieces([watcher, i](bool mapped, const CudaDevice::HandedPiece& piece) {
      watcher(PieceChange{.gpu = i, .mapped = mapped, .piece = piece});
    });
  }
  return absl::OkStatus();
}

absl::Status DeviceHandOver::Apply(const PieceChange& change) {
  const auto refuse = [&](absl::string_view why) {
    if (change.mapped) close(change.piece.fd);
    return absl::InvalidArgumentError(why);
  };
  Layout layout;
  if (!LayoutParser(layout_, fds_).Parse(&layout)) return refuse("a layout this build cannot read");
  if (change.gpu >= layout.gpus.size()) return refuse("a piece of a GPU the mount lacks");
  std::vector<CudaDevice::HandedPiece>& pieces = layout.gpus[change.gpu].pieces;
  const uint64_t end = change.piece.offset + (change.mapped ? change.piece.length : 1);
  // Those it overlaps (a mapped piece), or the one at its offset.
  auto first = std::find_if(pieces.begin(), pieces.end(), [&](const auto& piece) {
    return piece.offset + piece.length > change.piece.offset;
  });
  auto last = first;
  while (last != pieces.end() && last->offset < end &&
         (change.mapped || last->offset == change.piece.offset)) {
    close(last->fd);
    ++last;
  }
  first = pieces.erase(first, last);
  if (change.mapped) pieces.insert(first, change.piece);
  std::string written;
  std::vector<int> fds;
  PutLayout(layout, &written, &fds);
  layout_ = std::move(written);
  fds_ = std::move(fds);
  return absl::OkStatus();
}

DeviceHandOver::DeviceHandOver(DeviceHandOver&& other) noexcept
    : layout_(std::move(other.layout_)), fds_(std::exchange(other.fds_, {})) {}

DeviceHandOver& DeviceHandOver::operator=(DeviceHandOver&& other) noexcept {
  if (this != &other) {
    Close();
    layout_ = std::move(other.layout_);
    fds_ = std::exchange(other.fds_, {});
  }
  return *this;
}

DeviceHandOver::~DeviceHandOver() { Close(); }

void DeviceHandOver::Close() {
  for (const int fd : fds_) close(fd);
  fds_.clear();
}

bool DeviceHandOver::on_gpus() const {
  return !layout_.empty() && (layout_.front() == kGpu || layout_.front() == kPool);
}

absl::StatusOr<std::unique_ptr<Device>> DeviceHandOver::Adopt(const CudaDriver* driver) {
  // Every descriptor is the adopted device's from here on, or closed.
  const std::vector<int> fds = std::exchange(fds_, {});
  Layout layout;
  if (!LayoutParser(layout_, fds).Parse(&layout)) {
    for (const int fd : fds) close(fd);
    return Malformed();
  }
  return AdoptLayout(layout, driver);
}

}  // namespace cudafs
