// What the metadata journal (survive=on: fs/core/journal_scope.h) adds to
// the core's operations, without FUSE: the same operation on a Filesystem
// with a MetadataLog and without one, on host memory. Arg 0: no log, 1: a
// log. The checkpoint is left out (a pause every so many megabytes of
// journal; see docs/DESIGN.md).
#include <fcntl.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "alloc/devices/host_device.h"
#include "alloc/storage/arena.h"
#include "benchmark/benchmark.h"
#include "fs/core/filesystem.h"
#include "fs/core/metadata_log.h"

namespace cudafs {
namespace {

constexpr uint64_t kArenaBytes = uint64_t{1} << 30;

struct Mount {
  explicit Mount(bool journaled) {
    device = *HostDevice::Create(kArenaBytes);
    arena = std::make_unique<Arena>(device.get(), 4096);
    FilesystemConfig config;
    if (journaled) {
      log = *MetadataLog::Create();
      config.metadata_log = log.get();
    }
    fs = std::make_unique<Filesystem>(arena.get(), config);
    if (journaled) (void)fs->CheckpointLog();
  }
  std::unique_ptr<HostDevice> device;
  std::unique_ptr<Arena> arena;
  std::unique_ptr<MetadataLog> log;
  std::unique_ptr<Filesystem> fs;
};

// Appends of a counts record's size from several threads at once (a
// request's transaction and the FORGETs the kernel sends beside it).
void BM_Append(benchmark::State& state) {
  static std::unique_ptr<MetadataLog> log;
  if (state.thread_index() == 0) log = *MetadataLog::Create();
  const std::string record(24, 'c');
  for (auto _ : state) benchmark::DoNotOptimize(log->Append(record));
  if (state.thread_index() == 0) state.SetItemsProcessed(state.iterations() * state.threads());
}
BENCHMARK(BM_Append)->ThreadRange(1, 2)->UseRealTime();

// A lookup and its forget (what stat of a path costs the core).
void BM_LookupForget(benchmark::State& state) {
  Mount mount(state.range(0) != 0);
  (void)mount.fs->MakeNode(kRootInode, "f", S_IFREG | 0644, 0, Caller::Root());
  for (auto _ : state) {
    absl::StatusOr<struct stat> st = mount.fs->Lookup(kRootInode, "f");
    mount.fs->Forget(st->st_ino, 1);
  }
}
BENCHMARK(BM_LookupForget)->Arg(0)->Arg(1);

// Create + write 4 KiB + release + unlink + forget (a small file's life),
// beside a file kept all along: alone in the arena, each file would
// commit a granule and give it back, which costs far more than the rest.
void BM_SmallFileLife(benchmark::State& state) {
  Mount mount(state.range(0) != 0);
  const std::string bytes(4096, 'x');
  absl::StatusOr<struct stat> kept =
      mount.fs->Create(kRootInode, "kept", 0644, O_WRONLY, Caller::Root());
  (void)mount.fs->Write(kept->st_ino, 0, bytes.data(), bytes.size(), false, Caller::Root());
  for (auto _ : state) {
    absl::StatusOr<struct stat> st =
        mount.fs->Create(kRootInode, "f", 0644, O_WRONLY, Caller::Root());
    (void)mount.fs->Write(st->st_ino, 0, bytes.data(), bytes.size(), false, Caller::Root());
    mount.fs->Release(st->st_ino);
    (void)mount.fs->Unlink(kRootInode, "f");
    mount.fs->Forget(st->st_ino, 1);
  }
}
BENCHMARK(BM_SmallFileLife)->Arg(0)->Arg(1);

// 4 KiB overwrites in a 256 MiB file of 1 MiB writes.
void BM_Overwrite4K(benchmark::State& state) {
  Mount mount(state.range(0) != 0);
  absl::StatusOr<struct stat> st =
      mount.fs->Create(kRootInode, "f", 0644, O_WRONLY, Caller::Root());
  const std::string chunk(1 << 20, 'y');
  for (uint64_t offset = 0; offset < (256 << 20); offset += chunk.size()) {
    (void)mount.fs->Write(st->st_ino, offset, chunk.data(), chunk.size(), false, Caller::Root());
  }
  const std::string bytes(4096, 'z');
  uint64_t offset = 0;
  for (auto _ : state) {
    (void)mount.fs->Write(st->st_ino, offset, bytes.data(), bytes.size(), false, Caller::Root());
    offset = (offset + 7 * 4096 + 4096) % (255 << 20);
  }
}
BENCHMARK(BM_Overwrite4K)->Arg(0)->Arg(1);

// A 64 MiB file written 4 KiB at a time in random order (16,384 extents),
// then overwritten 4 KiB at a time: the fill, and the overwrites.
void BM_Fragmented4K(benchmark::State& state) {
  constexpr uint64_t kPages = 16384;
  const std::string bytes(4096, 'f');
  std::vector<uint64_t> order(kPages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(1));
  const bool fill = state.range(1) != 0;
  std::unique_ptr<Mount> mount;
  InodeNumber ino = 0;
  const auto create = [&] {
    mount.reset();
    mount = std::make_unique<Mount>(state.range(0) != 0);
    ino = mount->fs->Create(kRootInode, "f", 0644, O_WRONLY, Caller::Root())->st_ino;
  };
  const auto write = [&](uint64_t page) {
    (void)mount->fs->Write(ino, page * 4096, bytes.data(), bytes.size(), false, Caller::Root());
  };
  create();
  if (!fill) {
    for (const uint64_t page : order) write(page);
  }
  size_t next = 0;
  for (auto _ : state) {
    if (fill && next == kPages) {
      state.PauseTiming();
      create();
      next = 0;
      state.ResumeTiming();
    }
    write(fill ? order[next] : order[(next * 7919) % kPages]);
    ++next;
  }
}
BENCHMARK(BM_Fragmented4K)->ArgNames({"log", "fill"})->ArgsProduct({{0, 1}, {1, 0}});

}  // namespace
}  // namespace cudafs
