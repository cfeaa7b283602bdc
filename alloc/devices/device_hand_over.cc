#include "alloc/devices/device_hand_over.h"

#include <unistd.h>

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "alloc/base/coding.h"
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

// A GPU: its identity, size and options, then its pieces; their
// descriptors go to `fds` in order.
absl::Status PutGpu(CudaDevice& gpu, std::string* layout, std::vector<int>* fds) {
  absl::StatusOr<std::vector<CudaDevice::HandedPiece>> pieces = gpu.HandOverPieces();
  if (!pieces.ok()) return pieces.status();
  layout->push_back(kGpu);
  PutBytes(layout, gpu.pci_bus_id());
  PutVarint(layout, gpu.arena_size());
  PutVarint(layout, gpu.options().reserve_bytes);
  // Milliseconds plus one; 0: never released.
  const absl::Duration idle = gpu.options().idle_release;
  PutVarint(layout, idle == absl::InfiniteDuration()
                        ? 0
                        : static_cast<uint64_t>(absl::ToInt64Milliseconds(idle)) + 1);
  PutVarint(layout, pieces->size());
  for (const CudaDevice::HandedPiece& piece : *pieces) {
    PutVarint(layout, piece.offset);
    PutVarint(layout, piece.length);
    PutVarint(layout, piece.committed);
    PutVarint(layout, piece.exported ? 1 : 0);
    fds->push_back(piece.fd);
  }
  return absl::OkStatus();
}

// Reads a layout, taking descriptors from the front of those handed over.
class LayoutReader {
 public:
  LayoutReader(absl::string_view layout, const std::vector<int>& fds, const CudaDriver* driver)
      : in_(layout), fds_(fds), driver_(driver) {}

  absl::StatusOr<std::unique_ptr<Device>> Next() {
    if (in_.empty()) return Malformed();
    const char kind = in_.front();
    in_.remove_prefix(1);
    switch (kind) {
      case kHost: {
        if (!TakeFd()) return Malformed();
        Give(next_ - 1);
        absl::StatusOr<std::unique_ptr<HostDevice>> host = HostDevice::Adopt(Taken());
        if (!host.ok()) return host.status();
        return std::unique_ptr<Device>(*std::move(host));
      }
      case kGpu: {
        absl::StatusOr<std::unique_ptr<CudaDevice>> gpu = Gpu();
        if (!gpu.ok()) return gpu.status();
        return std::unique_ptr<Device>(*std::move(gpu));
      }
      case kPool:
        return Pool();
      default:
        return Malformed();
    }
  }

  bool done() const { return in_.empty() && next_ == fds_.size(); }
  // Whether descriptor `i` went to a device, which closes it.
  bool given(size_t i) const { return i < given_.size() && given_[i]; }

 private:
  static absl::Status Malformed() {
    return absl::InvalidArgumentError("the memory handed over is laid out as this build cannot read");
  }
  bool TakeFd() {
    if (next_ >= fds_.size()) return false;
    ++next_;
    return true;
  }
  int Taken() const { return fds_[next_ - 1]; }
  void Give(size_t i) {
    if (given_.size() <= i) given_.resize(i + 1);
    given_[i] = true;
  }

  absl::StatusOr<const CudaDriver*> Driver() {
    if (driver_ != nullptr) return driver_;
    return CudaDriver::Load();
  }

  absl::StatusOr<std::unique_ptr<CudaDevice>> Gpu() {
    absl::string_view pci_bus_id;
    uint64_t arena_size = 0, reserve = 0, idle = 0, count = 0;
    if (!GetBytes(&in_, &pci_bus_id) || !GetVarint(&in_, &arena_size) ||
        !GetVarint(&in_, &reserve) || !GetVarint(&in_, &idle) ||
        !GetVarintUpTo(&in_, fds_.size() - next_, &count)) {
      return Malformed();
    }
    std::vector<CudaDevice::HandedPiece> pieces(count);
    for (CudaDevice::HandedPiece& piece : pieces) {
      uint64_t exported = 0;
      if (!GetVarint(&in_, &piece.offset) || !GetVarint(&in_, &piece.length) ||
          !GetVarint(&in_, &piece.committed) || !GetVarintUpTo(&in_, 1, &exported) || !TakeFd()) {
        return Malformed();
      }
      piece.exported = exported != 0;
      piece.fd = Taken();
    }
    // From here on they are closed below or by the device, adopted or not.
    for (size_t i = next_ - pieces.size(); i < next_; ++i) Give(i);
    const auto close_pieces = [&] {
      for (const CudaDevice::HandedPiece& piece : pieces) close(piece.fd);
    };
    absl::StatusOr<const CudaDriver*> driver = Driver();
    absl::StatusOr<std::vector<int>> index =
        driver.ok() ? ResolveCudaDevices(**driver, pci_bus_id)
                    : absl::StatusOr<std::vector<int>>(driver.status());
    if (!index.ok() || index->size() != 1) {
      close_pieces();
      return absl::UnavailableError(absl::StrCat("the GPU at ", pci_bus_id, " that holds the files: ",
                                                 index.ok() ? "ambiguous" : index.status().message()));
    }
    CudaDeviceOptions options{.idle_release = idle == 0 ? absl::InfiniteDuration()
                                                        : absl::Milliseconds(idle - 1),
                              .reserve_bytes = reserve};
    absl::StatusOr<std::unique_ptr<CudaDevice>> gpu =
        CudaDevice::Create(**driver, index->front(), arena_size, options);
    if (!gpu.ok()) {
      close_pieces();
      return gpu.status();
    }
    if ((*gpu)->arena_size() != arena_size) {
      close_pieces();
      return absl::FailedPreconditionError(absl::StrCat(
          (*gpu)->Describe(), " lays its arena out otherwise than the daemon that held the files"));
    }
    if (absl::Status s = (*gpu)->AdoptPieces(pieces); !s.ok()) return s;
    return gpu;
  }

  absl::StatusOr<std::unique_ptr<Device>> Pool() {
    uint64_t count = 0, spill_bytes = 0;
    if (!GetVarintUpTo(&in_, 64, &count) || count == 0) return Malformed();
    std::vector<std::unique_ptr<Device>> gpus;
    for (uint64_t i = 0; i < count; ++i) {
      if (in_.empty() || in_.front() != kGpu) return Malformed();
      in_.remove_prefix(1);
      absl::StatusOr<std::unique_ptr<CudaDevice>> gpu = Gpu();
      if (!gpu.ok()) return gpu.status();
      gpus.push_back(*std::move(gpu));
    }
    if (!GetVarint(&in_, &spill_bytes)) return Malformed();
    std::unique_ptr<Device> spill;
    if (spill_bytes > 0) {
      absl::StatusOr<std::unique_ptr<HostDevice>> host =
          HostDevice::Create(spill_bytes, HostDevice::Backing::kHugePages);
      if (!host.ok()) return host.status();
      spill = *std::move(host);
    }
    absl::StatusOr<std::unique_ptr<PooledDevice>> pool =
        PooledDevice::Create(std::move(gpus), std::move(spill));
    if (!pool.ok()) return pool.status();
    return std::unique_ptr<Device>(*std::move(pool));
  }

  absl::string_view in_;
  const std::vector<int>& fds_;
  const CudaDriver* driver_;
  size_t next_ = 0;
  std::vector<bool> given_;
};

}  // namespace

absl::StatusOr<DeviceHandOver> DeviceHandOver::Of(Device& device) {
  DeviceHandOver handed("", {});
  if (auto* host = dynamic_cast<HostDevice*>(&device); host != nullptr) {
    if (host->memory() < 0) return CannotPass(device);
    const int fd = dup(host->memory());
    if (fd < 0) return absl::ErrnoToStatus(errno, "dup");
    handed.layout_.push_back(kHost);
    handed.fds_.push_back(fd);
    return handed;
  }
  if (auto* gpu = dynamic_cast<CudaDevice*>(&device); gpu != nullptr) {
    if (absl::Status s = PutGpu(*gpu, &handed.layout_, &handed.fds_); !s.ok()) return s;
    return handed;
  }
  auto* pool = dynamic_cast<PooledDevice*>(&device);
  if (pool == nullptr) return CannotPass(device);
  const std::vector<DevicePart> parts = pool->parts();
  handed.layout_.push_back(kPool);
  const size_t gpus = !parts.empty() && parts.back().spill ? parts.size() - 1 : parts.size();
  PutVarint(&handed.layout_, gpus);
  for (size_t i = 0; i < gpus; ++i) {
    auto* gpu = dynamic_cast<CudaDevice*>(&pool->member(i));
    if (gpu == nullptr) return CannotPass(pool->member(i));
    if (absl::Status s = PutGpu(*gpu, &handed.layout_, &handed.fds_); !s.ok()) return s;
  }
  uint64_t spill_bytes = 0;
  if (gpus < parts.size()) {
    auto* spill = dynamic_cast<SpillDevice*>(&pool->member(gpus));
    if (spill == nullptr) return CannotPass(pool->member(gpus));
    if (spill->committed_bytes() > 0) {
      return absl::FailedPreconditionError(
          "some files are in the host memory the GPUs spilled to, which cannot pass to another "
          "process; they return to the GPUs once these have room (cudafs --stats shows where "
          "the files are): upgrade then");
    }
    spill_bytes = spill->arena_size();
  }
  PutVarint(&handed.layout_, spill_bytes);
  return handed;
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
  LayoutReader reader(layout_, fds, driver);
  absl::StatusOr<std::unique_ptr<Device>> device = reader.Next();
  for (size_t i = 0; i < fds.size(); ++i) {
    if (!reader.given(i)) close(fds[i]);
  }
  if (!device.ok()) return device.status();
  if (!reader.done()) {
    return absl::InvalidArgumentError("the memory handed over does not match its layout");
  }
  return device;
}

}  // namespace cudafs
