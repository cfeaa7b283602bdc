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

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "alloc/devices/device.h"

namespace cudafs {

struct CudaDriver;

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
