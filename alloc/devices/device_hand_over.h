// DeviceHandOver: the memory behind a mount as it passes to a successor
// process (cudafs --upgrade): a layout (which devices, their sizes and
// options, where each physical allocation sits) and the descriptors that
// hold the memory, which the successor maps at the same arena offsets, so
// that every block the predecessor handed out holds the same bytes there.
//
// Host memory passes as the host arena's memfd; a GPU's as one descriptor
// per physical allocation (CudaDevice::HandOverPieces), found again by its
// PCI bus id. The host memory a pool spills to is anonymous: it passes
// only while it holds no data, and the successor makes its own.
#ifndef CUDAFS_ALLOC_DEVICES_DEVICE_HAND_OVER_H_
#define CUDAFS_ALLOC_DEVICES_DEVICE_HAND_OVER_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "alloc/devices/cuda_device.h"
#include "alloc/devices/device.h"

namespace cudafs {

class DeviceHandOver {
 public:
  // `device`'s memory, for a successor. FailedPrecondition where it cannot
  // pass (a null or fault-injecting device, a GPU that cannot export its
  // memory, data in spilled host memory), saying why.
  static absl::StatusOr<DeviceHandOver> Of(Device& device);

  // As received: owns `fds`, closing those not adopted.
  DeviceHandOver(std::string layout, std::vector<int> fds)
      : layout_(std::move(layout)), fds_(std::move(fds)) {}
  DeviceHandOver(DeviceHandOver&& other) noexcept;
  DeviceHandOver& operator=(DeviceHandOver&& other) noexcept;
  ~DeviceHandOver();

  const std::string& layout() const { return layout_; }
  const std::vector<int>& fds() const { return fds_; }
  // Whether the memory is on GPUs (else in host memory).
  bool on_gpus() const;

  // A keeper's (survive=on, fs/daemon/keeper.h), whose hold must be all of
  // the memory whenever the daemon dies: a GPU's pieces change as the
  // daemon maps and releases them. `gpu` is the GPU's place in the layout
  // (a pool's member).
  struct PieceChange {
    size_t gpu = 0;
    bool mapped = false;  // else released
    CudaDevice::HandedPiece piece;  // released: its offset alone
  };
  // Calls `watcher` with each change of the pieces of `device`'s GPUs (of
  // one, or a pool's), a mapped piece exported (its descriptor the
  // watcher's to close). FailedPrecondition where the memory cannot pass
  // (as Of), and for a pool that spills to host memory.
  static absl::Status WatchPieces(Device& device,
                                  std::function<void(const PieceChange&)> watcher);
  // Applies a change to what this holds, taking a mapped piece's
  // descriptor: a piece mapped replaces any it overlaps (released by a
  // daemon that died before saying so). InvalidArgument for a GPU the
  // layout lacks.
  absl::Status Apply(const PieceChange& change);

  // The device again, in this process, its GPUs reached through `driver`
  // (null: the process's). InvalidArgument for a layout this build does
  // not read or descriptors that do not match it; a GPU that is gone or
  // refuses the memory fails with its error. Takes the descriptors.
  absl::StatusOr<std::unique_ptr<Device>> Adopt(const CudaDriver* driver = nullptr);

 private:
  void Close();

  std::string layout_;
  std::vector<int> fds_;
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_DEVICE_HAND_OVER_H_
