// Micro-benchmarks of the Device layer: what one request costs below FUSE.
// Runs against the host device always and the CUDA device where a GPU is
// usable (the CUDA cases report an error and skip elsewhere).
//
//   build/device_benchmark --benchmark_filter=Cuda
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "alloc/devices/cuda_device.h"
#include "alloc/devices/host_device.h"
#include "alloc/storage/arena.h"

namespace cudafs {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kArenaSize = 64 * kGiB;

enum Backend { kHost, kCuda };

std::unique_ptr<Device> OpenDevice(Backend backend, benchmark::State& state) {
  if (backend == kHost) {
    absl::StatusOr<std::unique_ptr<HostDevice>> device = HostDevice::Create(kArenaSize);
    if (device.ok()) return std::move(*device);
    state.SkipWithError(std::string(device.status().message()).c_str());
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<CudaDevice>> device = CudaDevice::Create(0, kArenaSize);
  if (device.ok()) return std::move(*device);
  state.SkipWithError(std::string(device.status().message()).c_str());
  return nullptr;
}

// Commit + decommit of one granule while `range(0)` granules stay
// committed: does mapping cost grow with the number of mappings?
void BM_CommitGranule(benchmark::State& state, Backend backend) {
  std::unique_ptr<Device> device = OpenDevice(backend, state);
  if (!device) return;
  const uint64_t granule = device->granule_size();
  const uint64_t held = state.range(0);
  if (!device->Commit(0, held * granule).ok()) return state.SkipWithError("commit failed");
  for (auto _ : state) {
    if (!device->Commit(held * granule, granule).ok()) return state.SkipWithError("commit");
    if (!device->Decommit(held * granule, granule).ok()) return state.SkipWithError("decommit");
  }
  device->Decommit(0, held * granule).IgnoreError();
}
BENCHMARK_CAPTURE(BM_CommitGranule, Host, kHost)->Arg(0)->Arg(256);
BENCHMARK_CAPTURE(BM_CommitGranule, Cuda, kCuda)->Arg(0)->Arg(1024)->Arg(8192);

// One Write or Read batch of `range(0)` bytes from a host buffer made by the
// device (pinned on CUDA) or from the heap.
void BM_Transfer(benchmark::State& state, Backend backend, bool write, bool device_buffer) {
  std::unique_ptr<Device> device = OpenDevice(backend, state);
  if (!device) return;
  const size_t length = state.range(0);
  const uint64_t span = 256 * kMiB;
  if (!device->Commit(0, span).ok()) return state.SkipWithError("commit failed");
  std::vector<char> heap;
  char* buffer;
  if (device_buffer) {
    buffer = static_cast<char*>(device->AllocateHostBuffer(length));
  } else {
    heap.resize(length);
    buffer = heap.data();
  }
  std::memset(buffer, 1, length);
  uint64_t offset = 0;
  for (auto _ : state) {
    absl::Status status = write ? device->Write({{offset, buffer, length}})
                                : device->Read({{buffer, offset, length}});
    if (!status.ok()) return state.SkipWithError("transfer failed");
    offset = (offset + length) % (span - length + 1) / length * length;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * length);
  if (device_buffer) device->FreeHostBuffer(buffer, length);
}
BENCHMARK_CAPTURE(BM_Transfer, CudaWritePinned, kCuda, true, true)->Arg(4096)->Arg(kMiB);
BENCHMARK_CAPTURE(BM_Transfer, CudaWriteHeap, kCuda, true, false)->Arg(4096)->Arg(kMiB);
BENCHMARK_CAPTURE(BM_Transfer, CudaReadPinned, kCuda, false, true)->Arg(4096)->Arg(kMiB);
BENCHMARK_CAPTURE(BM_Transfer, CudaReadHeap, kCuda, false, false)->Arg(4096)->Arg(kMiB);
BENCHMARK_CAPTURE(BM_Transfer, HostWrite, kHost, true, true)->Arg(4096)->Arg(kMiB);
BENCHMARK_CAPTURE(BM_Transfer, HostRead, kHost, false, true)->Arg(4096)->Arg(kMiB);

// One CUDA device for every thread of a multi-threaded case, made once.
Device* SharedCudaDevice() {
  static Device* const device = []() -> Device* {
    absl::StatusOr<std::unique_ptr<CudaDevice>> made = CudaDevice::Create(0, kArenaSize);
    return made.ok() ? made->release() : nullptr;
  }();
  return device;
}

// 4 MiB transfers (a FUSE request's largest) from `threads` threads at
// once, each on its own 256 MiB and its own pinned buffer: the device
// layer's ceiling for N cold readers or writers, FUSE left out. With
// `host_copy`, the CPU also copies each transfer's bytes between the
// pinned buffer and 256 MiB of other memory (after a read, before a
// write), as the kernel copies a request's payload between the reader's or
// writer's memory and the request buffer.
void BM_ParallelTransfer(benchmark::State& state, bool write, bool host_copy) {
  Device* device = SharedCudaDevice();
  if (device == nullptr) return state.SkipWithError("no CUDA device");
  const size_t length = 4 * kMiB;
  const uint64_t span = 256 * kMiB;
  const uint64_t base = state.thread_index() * span;
  if (!device->Commit(base, span).ok()) return state.SkipWithError("commit failed");
  char* buffer = static_cast<char*>(device->AllocateHostBuffer(length));
  std::memset(buffer, 1, length);
  std::vector<char> user_memory(host_copy ? span : 0, 1);
  uint64_t offset = 0;
  for (auto _ : state) {
    if (host_copy && write) std::memcpy(buffer, user_memory.data() + offset, length);
    absl::Status status = write ? device->Write({{base + offset, buffer, length}})
                                : device->Read({{buffer, base + offset, length}});
    if (!status.ok()) return state.SkipWithError("transfer failed");
    if (host_copy && !write) std::memcpy(user_memory.data() + offset, buffer, length);
    offset = (offset + length) % span;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * length);
  device->FreeHostBuffer(buffer, length);
  device->Decommit(base, span).IgnoreError();
}
BENCHMARK_CAPTURE(BM_ParallelTransfer, CudaRead, false, false)
    ->Threads(1)->Threads(8)->Threads(16)->UseRealTime();
BENCHMARK_CAPTURE(BM_ParallelTransfer, CudaReadAndCopy, false, true)
    ->Threads(1)->Threads(8)->Threads(16)->UseRealTime();
BENCHMARK_CAPTURE(BM_ParallelTransfer, CudaWrite, true, false)
    ->Threads(1)->Threads(8)->Threads(16)->UseRealTime();
BENCHMARK_CAPTURE(BM_ParallelTransfer, CudaCopyAndWrite, true, true)
    ->Threads(1)
    ->Threads(8)
    ->Threads(16)
    ->UseRealTime();

// A cache flush's pattern: `range(0)` 4 KiB pages of one pinned staging
// buffer written to scattered page offsets in one Write batch.
void BM_ScatteredWrite(benchmark::State& state, Backend backend) {
  std::unique_ptr<Device> device = OpenDevice(backend, state);
  if (!device) return;
  constexpr uint64_t kPage = 4096;
  const uint64_t pages = state.range(0);
  const uint64_t span = 256 * kMiB;
  if (!device->Commit(0, span).ok()) return state.SkipWithError("commit failed");
  char* staging = static_cast<char*>(device->AllocateHostBuffer(pages * kPage));
  std::memset(staging, 1, pages * kPage);
  std::mt19937_64 rng(1);
  std::vector<HostToDevice> copies(pages);
  for (auto _ : state) {
    state.PauseTiming();
    for (uint64_t i = 0; i < pages; ++i) {
      copies[i] = {rng() % (span / kPage) * kPage, staging + i * kPage, kPage};
    }
    state.ResumeTiming();
    if (!device->Write(copies).ok()) return state.SkipWithError("write failed");
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * pages));
  device->FreeHostBuffer(staging, pages * kPage);
}
BENCHMARK_CAPTURE(BM_ScatteredWrite, Host, kHost)->Arg(1)->Arg(16)->Arg(256);
BENCHMARK_CAPTURE(BM_ScatteredWrite, Cuda, kCuda)->Arg(1)->Arg(16)->Arg(256);

// A sequential writer's pattern in the arena: allocate a 1 MiB block
// (committing a granule every other time), write it; free all at the end.
void BM_AllocateAndWrite(benchmark::State& state, Backend backend) {
  std::unique_ptr<Device> device = OpenDevice(backend, state);
  if (!device) return;
  Arena arena(device.get(), 4096);
  char* buffer = static_cast<char*>(device->AllocateHostBuffer(kMiB));
  std::memset(buffer, 1, kMiB);
  std::vector<Block> blocks;
  for (auto _ : state) {
    absl::StatusOr<Block> block = arena.Allocate(kMiB);
    if (!block.ok()) {
      state.PauseTiming();
      for (const Block& b : blocks) arena.Free(b);
      blocks.clear();
      state.ResumeTiming();
      continue;
    }
    blocks.push_back(*block);
    if (!device->Write({{block->offset, buffer, kMiB}}).ok()) return state.SkipWithError("write");
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kMiB);
  for (const Block& b : blocks) arena.Free(b);
  device->FreeHostBuffer(buffer, kMiB);
}
BENCHMARK_CAPTURE(BM_AllocateAndWrite, Host, kHost)->Iterations(4096);
BENCHMARK_CAPTURE(BM_AllocateAndWrite, Cuda, kCuda)->Iterations(4096);

}  // namespace
}  // namespace cudafs
