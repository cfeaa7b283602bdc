// Micro-benchmarks of the write-back cache's own paths, over the host device
// (so that they measure the cache, not a GPU): a write into a cached page,
// a read of one, the insert of a new page, and flushing N dirty pages that
// are contiguous (one copy) or scattered (N copies in one batch).
//
//   build/page_cache_benchmark
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "alloc/devices/host_device.h"
#include "alloc/storage/arena.h"
#include "cache/cached_file.h"
#include "cache/page_cache.h"

namespace cudafs {
namespace {

constexpr uint64_t kPage = PageCache::kPageSize;

// A file over a 1 GiB host arena and a 64 MiB cache.
struct Fixture {
  Fixture()
      : device(std::move(HostDevice::Create(uint64_t{1} << 30).value())),
        arena(device.get(), 4096),
        cache(device.get(), uint64_t{64} << 20),
        space(&cache, &arena, uint64_t{1} << 20),
        file(&space, 2) {}
  std::unique_ptr<HostDevice> device;
  Arena arena;
  PageCache cache;
  CachedFile::Space space;
  CachedFile file;
};

void BM_WriteIntoCachedPage(benchmark::State& state) {
  Fixture f;
  const std::string data(state.range(0), 'x');
  if (!f.file.Write(0, data.data(), data.size(), 0).ok()) state.SkipWithError("write");
  for (auto _ : state) {
    if (!f.file.Write(0, data.data(), data.size(), kPage).ok()) state.SkipWithError("write");
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_WriteIntoCachedPage)->Arg(512)->Arg(4096);

void BM_ReadCachedPage(benchmark::State& state) {
  Fixture f;
  std::string data(kPage, 'x');
  if (!f.file.Write(0, data.data(), data.size(), 0).ok()) state.SkipWithError("write");
  for (auto _ : state) {
    if (!f.file.Read(0, kPage, data.data(), kPage).ok()) state.SkipWithError("read");
  }
  state.SetBytesProcessed(state.iterations() * kPage);
}
BENCHMARK(BM_ReadCachedPage);

// A new page per write: frame taken, arena block mapped, page inserted.
void BM_InsertNewPage(benchmark::State& state) {
  Fixture f;
  const std::string data(kPage, 'x');
  uint64_t size = 0;
  for (auto _ : state) {
    if (!f.file.Write(size, data.data(), kPage, size).ok()) state.SkipWithError("write");
    size += kPage;
    if (size == (uint64_t{48} << 20)) {  // stay below the budget
      state.PauseTiming();
      if (!f.file.Truncate(0).ok()) state.SkipWithError("truncate");
      size = 0;
      state.ResumeTiming();
    }
  }
}
BENCHMARK(BM_InsertNewPage);

// Flushing N dirty pages: range(1) 1 = contiguous (one copy), 0 = every
// other page (N copies in one batch).
void BM_Flush(benchmark::State& state) {
  Fixture f;
  const uint64_t pages = state.range(0);
  const uint64_t stride = state.range(1) ? 1 : 2;
  const std::string data(kPage, 'x');
  for (auto _ : state) {
    state.PauseTiming();
    for (uint64_t i = 0; i < pages; ++i) {
      const uint64_t offset = i * stride * kPage;
      if (!f.file.Write(offset, data.data(), kPage, pages * stride * kPage).ok()) {
        state.SkipWithError("write");
      }
    }
    state.ResumeTiming();
    if (!f.file.Flush().ok()) state.SkipWithError("flush");
  }
  state.SetBytesProcessed(state.iterations() * pages * kPage);
  state.counters["copies_per_flush"] = static_cast<double>(f.cache.Stats().flush_copies) /
                                       static_cast<double>(f.cache.Stats().flush_batches);
}
BENCHMARK(BM_Flush)->Args({16, 1})->Args({16, 0})->Args({256, 1})->Args({256, 0});

}  // namespace
}  // namespace cudafs
