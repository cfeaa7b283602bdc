#include "fs/fuse/io_mode.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include "alloc/base/sizes.h"

namespace cudafs {
namespace {

Negotiated WithDirectIoMin(uint64_t direct_io_min) {
  Negotiated negotiated;
  negotiated.direct_io_min = direct_io_min;
  return negotiated;
}

TEST(IoModeTest, LargeFilesNewFilesAndODirectGetDirectIo) {
  const Negotiated negotiated = WithDirectIoMin(kMiB);
  EXPECT_FALSE(ChooseDirectIo(negotiated, O_RDONLY, 0));
  EXPECT_FALSE(ChooseDirectIo(negotiated, O_RDWR, kMiB - 1));
  EXPECT_TRUE(ChooseDirectIo(negotiated, O_RDONLY, kMiB));
  EXPECT_TRUE(ChooseDirectIo(negotiated, O_WRONLY, 8 * kMiB));
  EXPECT_TRUE(ChooseDirectIo(negotiated, O_RDONLY | O_DIRECT, 0));
  EXPECT_TRUE(ChooseDirectIo(negotiated, O_WRONLY | O_CREAT, std::nullopt));
}

TEST(IoModeTest, DirectIoMinZeroServesEveryOpenDirectly) {
  EXPECT_TRUE(ChooseDirectIo(WithDirectIoMin(0), O_RDONLY, 0));
}

// nodirect_io, or a kernel without direct-I/O mmap: not even O_DIRECT.
TEST(IoModeTest, NeverDirectIoServesEveryOpenFromThePageCache) {
  const Negotiated negotiated = WithDirectIoMin(kNeverDirectIo);
  EXPECT_FALSE(ChooseDirectIo(negotiated, O_RDONLY, 8 * kMiB));
  EXPECT_FALSE(ChooseDirectIo(negotiated, O_RDONLY | O_DIRECT, 0));
  EXPECT_FALSE(ChooseDirectIo(negotiated, O_WRONLY | O_CREAT, std::nullopt));
}

TEST(IoModeTest, DirectIoOpensAreMarkedAndWriteInParallel) {
  fuse_file_info fi{};
  SetCaching(/*direct_io=*/true, &fi);
  EXPECT_TRUE(fi.direct_io);
  EXPECT_FALSE(fi.keep_cache);
  EXPECT_TRUE(IsDirectIoOpen(&fi));
#if FUSE_VERSION >= FUSE_MAKE_VERSION(3, 18)
  EXPECT_TRUE(fi.parallel_direct_writes);
#endif
}

TEST(IoModeTest, PageCacheOpensKeepTheCache) {
  fuse_file_info fi{};
  SetCaching(/*direct_io=*/false, &fi);
  EXPECT_FALSE(fi.direct_io);
  EXPECT_TRUE(fi.keep_cache);
  EXPECT_FALSE(IsDirectIoOpen(&fi));
#if FUSE_VERSION >= FUSE_MAKE_VERSION(3, 18)
  EXPECT_FALSE(fi.parallel_direct_writes);
#endif
}

TEST(IoModeTest, OnlyReadingPageCacheOpensMoveTheAtime) {
  EXPECT_TRUE(MarksAccessAtOpen(O_RDONLY, /*direct_io=*/false));
  EXPECT_TRUE(MarksAccessAtOpen(O_RDWR, /*direct_io=*/false));
  EXPECT_FALSE(MarksAccessAtOpen(O_RDONLY, /*direct_io=*/true));
  EXPECT_FALSE(MarksAccessAtOpen(O_WRONLY, /*direct_io=*/false));
  EXPECT_FALSE(MarksAccessAtOpen(O_RDWR | O_TRUNC, /*direct_io=*/false));
  EXPECT_FALSE(MarksAccessAtOpen(O_RDONLY | O_NOATIME, /*direct_io=*/false));
}

#ifdef FUSE_CAP_HANDLE_KILLPRIV_V2
TEST(IoModeTest, KernelKillsIsTheRequestsFlag) {
  fuse_file_info fi{};
  EXPECT_FALSE(KernelKills(&fi));
  fi.kill_suidgid = 1;
  EXPECT_TRUE(KernelKills(&fi));
}
#endif

}  // namespace
}  // namespace cudafs
