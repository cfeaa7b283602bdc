// RoomAsker: what the allocation interposer does when a GPU allocation
// fails for want of memory: asks every cudafs mount this process sees (or
// those CUDAFS_ROOM_MOUNTS names) to make the room on that GPU, and says
// whether the allocation is worth trying again.
//
// It never hangs the program: each mount is asked on a thread of its own,
// waited for at most `bound`, so that a hung daemon keeps neither the
// program nor the other mounts waiting longer; a daemon that does not
// answer in time is not asked again while its earlier request is still
// out. It never
// touches a process without a cudafs mount beyond reading its mount table.
//
// Thread-safe. It must outlive every request it sent, answered or not
// (the interposer's lives as long as the process).
#ifndef CUDAFS_FS_CLIENT_INTERPOSER_ROOM_ASKER_H_
#define CUDAFS_FS_CLIENT_INTERPOSER_ROOM_ASKER_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "fs/client/mount_table.h"
#include "fs/client/room_request.h"

namespace cudafs::client {

class RoomAsker {
 public:
  // Asks one mount (MakeRoomOn, by default): 0 or a negative errno.
  using Ask = std::function<int(const CudafsMount&, const RoomRequest&)>;
  // The cudafs mounts to ask (this process's mount table, by default).
  using Mounts = std::function<std::vector<CudafsMount>()>;

  RoomAsker();
  RoomAsker(Ask ask, Mounts mounts);

  // The room to ask for an allocation of `bytes`: those bytes and the
  // slack an allocator and the driver need beside them.
  static uint64_t RoomFor(uint64_t bytes);

  // A GPU whose allocations failed again within this long of the last
  // request is asked for twice the room asked then (or RoomFor, if more):
  // a program taking the GPU step by step (PyTorch's and JAX's pools, a
  // loop of cudaMalloc) then costs a few round trips rather than one a
  // step, and never moves more than about twice what it takes.
  static constexpr std::chrono::seconds kBurst{5};

  // After an allocation of `bytes` on the GPU `pci_bus_id` failed for want
  // of memory: whether some mount made room (or made what it could), so
  // that one more try may succeed. Waits `bound` at most; 0: as long as
  // RoomBoundSeconds says for the room.
  bool MakeRoomFor(const std::string& pci_bus_id, uint64_t bytes,
                   std::chrono::seconds bound = std::chrono::seconds(0));

 private:
  const Ask ask_;
  const Mounts mounts_;
  std::mutex mu_;
  // Mounts (by device) whose daemon has a request of ours out past its
  // bound: not asked again until it answers.
  std::set<dev_t> stuck_;
  // By GPU: the room last asked for, and when.
  struct LastAsk {
    uint64_t bytes = 0;
    std::chrono::steady_clock::time_point when;
  };
  std::map<std::string, LastAsk> last_;
};

// Whether the environment turns the interposer off (CUDAFS_MAKE_ROOM=0):
// the cudafs daemon sets it for itself, which must never wait on its own
// room.
bool InterposerDisabled();

// How long CUDAFS_ROOM_TIMEOUT (whole seconds, > 0) says to wait for
// room, or 0 when it is unset or no such count.
std::chrono::seconds RoomTimeout();

// The mounts CUDAFS_ROOM_MOUNTS names (colon-separated mount points) among
// `mounts`, or all of them when it is unset.
std::vector<CudafsMount> ChosenMounts(std::vector<CudafsMount> mounts);

}  // namespace cudafs::client

#endif  // CUDAFS_FS_CLIENT_INTERPOSER_ROOM_ASKER_H_
