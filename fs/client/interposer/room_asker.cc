#include "fs/client/interposer/room_asker.h"

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <utility>

namespace cudafs::client {
namespace {

std::vector<CudafsMount> TableMounts() {
  std::ifstream mountinfo("/proc/self/mountinfo");
  return ChosenMounts(CudafsMounts(mountinfo));
}

// What the askers and the waiting thread share: the waiter may be gone
// when an asker finishes.
struct Outcome {
  std::mutex mu;
  std::condition_variable done_cv;
  size_t remaining = 0;   // mounts not answered yet
  bool answered = false;  // some mount made room, or what it could
  std::set<dev_t> done;   // mounts that answered
};

}  // namespace

bool InterposerDisabled() {
  const char* setting = std::getenv("CUDAFS_MAKE_ROOM");
  return setting != nullptr && std::strcmp(setting, "0") == 0;
}

std::chrono::seconds RoomTimeout() {
  const char* setting = std::getenv("CUDAFS_ROOM_TIMEOUT");
  if (setting == nullptr) return std::chrono::seconds(0);
  char* end = nullptr;
  errno = 0;
  const long seconds = std::strtol(setting, &end, 10);
  if (errno != 0 || end == setting || *end != '\0' || seconds <= 0 || seconds > 86400) {
    return std::chrono::seconds(0);
  }
  return std::chrono::seconds(seconds);
}

std::vector<CudafsMount> ChosenMounts(std::vector<CudafsMount> mounts) {
  const char* chosen = std::getenv("CUDAFS_ROOM_MOUNTS");
  if (chosen == nullptr || *chosen == '\0') return mounts;
  std::vector<std::string> points;
  std::istringstream list(chosen);
  for (std::string point; std::getline(list, point, ':');) {
    while (point.size() > 1 && point.back() == '/') point.pop_back();
    if (!point.empty()) points.push_back(point);
  }
  mounts.erase(std::remove_if(mounts.begin(), mounts.end(),
                              [&](const CudafsMount& mount) {
                                return std::find(points.begin(), points.end(),
                                                 mount.mountpoint) == points.end();
                              }),
               mounts.end());
  return mounts;
}

RoomAsker::RoomAsker() : RoomAsker(MakeRoomOn, TableMounts) {}

RoomAsker::RoomAsker(Ask ask, Mounts mounts) : ask_(std::move(ask)), mounts_(std::move(mounts)) {}

uint64_t RoomAsker::RoomFor(uint64_t bytes) {
  // An allocator rounds up and the driver maps in 2 MiB pages with page
  // tables beside them; 1/64 more covers PyTorch's and XLA's rounding.
  constexpr uint64_t kSlack = uint64_t{64} << 20;
  return bytes + bytes / 64 + kSlack;
}

bool RoomAsker::MakeRoomFor(const std::string& pci_bus_id, uint64_t bytes,
                            std::chrono::seconds bound) {
  std::vector<CudafsMount> mounts = mounts_();
  RoomRequest request;
  request.bytes = RoomFor(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    mounts.erase(std::remove_if(mounts.begin(), mounts.end(),
                                [&](const CudafsMount& mount) {
                                  return stuck_.count(mount.device) != 0;
                                }),
                 mounts.end());
    if (mounts.empty()) return false;
    const auto now = std::chrono::steady_clock::now();
    LastAsk& last = last_[pci_bus_id];
    if (last.bytes > 0 && now - last.when < kBurst) {
      request.bytes = std::max(*request.bytes, 2 * last.bytes);
    }
    last = {*request.bytes, now};
  }
  const std::chrono::seconds wait =
      bound.count() > 0 ? bound : std::chrono::seconds(RoomBoundSeconds(request.bytes));
  request.bound_seconds = static_cast<int>(wait.count());
  auto outcome = std::make_shared<Outcome>();
  outcome->remaining = mounts.size();
  // Each mount on a thread of its own: reaching a daemon reads its
  // mount's root through FUSE, which a hung daemon never answers, and one
  // hung daemon (another user's mount) must not keep the others from
  // being asked.
  for (const CudafsMount& mount : mounts) {
    std::thread([this, outcome, mount, request, pci_bus_id] {
      RoomRequest on_gpu = request;
      on_gpu.gpu = pci_bus_id.c_str();
      const int result = ask_(mount, on_gpu);
      std::lock_guard<std::mutex> lock(outcome->mu);
      // ENOSPC: the daemon moved what it could; a try may still fit.
      if (result == 0 || result == -ENOSPC) outcome->answered = true;
      outcome->done.insert(mount.device);
      if (--outcome->remaining == 0) outcome->done_cv.notify_all();
      // One that was given up on may be asked again from now on.
      std::lock_guard<std::mutex> stuck_lock(mu_);
      stuck_.erase(mount.device);
    }).detach();
  }
  std::unique_lock<std::mutex> lock(outcome->mu);
  outcome->done_cv.wait_for(lock, wait + std::chrono::seconds(1),
                            [&] { return outcome->remaining == 0; });
  if (outcome->remaining > 0) {
    std::lock_guard<std::mutex> stuck_lock(mu_);
    for (const CudafsMount& mount : mounts) {
      if (outcome->done.count(mount.device) == 0) stuck_.insert(mount.device);
    }
  }
  return outcome->answered;
}

}  // namespace cudafs::client
