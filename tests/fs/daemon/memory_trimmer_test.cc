#include "fs/daemon/memory_trimmer.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace cudafs {
namespace {

uint64_t ResidentKiB() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10);
  }
  return 0;
}

// What the daemon does with a tree of files: many small allocations from
// several threads (several malloc arenas), all freed later.
std::vector<void*> AllocateFromThreads(int threads, size_t bytes_per_thread) {
  std::vector<std::vector<void*>> blocks(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&blocks, t, bytes_per_thread] {
      for (size_t done = 0; done < bytes_per_thread; done += 200) {
        void* block = std::malloc(200);
        static_cast<char*>(block)[0] = 1;  // resident
        blocks[t].push_back(block);
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  std::vector<void*> all;
  for (const auto& some : blocks) all.insert(all.end(), some.begin(), some.end());
  return all;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kGlibcMalloc = false;
#else
constexpr bool kGlibcMalloc = true;
#endif

TEST(MemoryTrimmerTest, GivesBackWhatABurstFreedOnceAndThenRests) {
  if (!kGlibcMalloc) GTEST_SKIP() << "the sanitizer's allocator is not glibc's";
  MemoryTrimmer trimmer{MemoryTrimmer::NoThread{}};
  trimmer.TrimIfWorthIt();  // start from a trimmed heap
  std::vector<void*> blocks = AllocateFromThreads(4, 32 << 20);
  const uint64_t allocated = ResidentKiB();
  // A few survivors (a file here and there that was not removed) keep the
  // freed memory from falling back to the top of its heap, where free()
  // would have given it back by itself.
  std::vector<void*> survivors;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (i % 64 == 0) {
      survivors.push_back(blocks[i]);
    } else {
      std::free(blocks[i]);
    }
  }
  blocks = {};
  EXPECT_GT(ResidentKiB() + 16 * 1024, allocated) << "free() gave the memory back by itself";
  EXPECT_TRUE(trimmer.TrimIfWorthIt());
  const uint64_t trimmed = ResidentKiB();
  EXPECT_LT(trimmed + 64 * 1024, allocated) << "KiB resident: " << allocated << " allocated, "
                                           << trimmed << " after the trim";
  // Nothing freed since: no second trim.
  EXPECT_FALSE(trimmer.TrimIfWorthIt());
  // A small burst is not worth one either.
  std::vector<void*> few = AllocateFromThreads(1, 1 << 20);
  for (void* block : few) std::free(block);
  EXPECT_FALSE(trimmer.TrimIfWorthIt());
  for (void* block : survivors) std::free(block);
}

TEST(MemoryTrimmerTest, ThreadStopsWhenDestroyed) {
  const auto start = std::chrono::steady_clock::now();
  { MemoryTrimmer trimmer(absl::Hours(1)); }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace cudafs
