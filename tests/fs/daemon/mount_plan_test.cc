#include "fs/daemon/mount_plan.h"

#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace cudafs {
namespace {

MountOptions Options(const char* option_list = nullptr) {
  std::vector<const char*> argv = {"cudafs", "/mnt/x"};
  if (option_list != nullptr) argv.insert(argv.end(), {"-o", option_list});
  absl::StatusOr<MountOptions> options = ParseCommandLine(argv);
  EXPECT_TRUE(options.ok()) << options.status();
  return options.ok() ? *options : MountOptions();
}

MachineFacts Facts() {
  MachineFacts facts;
  facts.host_memory = 64 * kGiB;
  facts.uid = 1000;
  facts.gid = 100;
  return facts;
}

TEST(MountPlanTest, CapacityIsSizeRoundedToMinBlockWithinTheDevice) {
  absl::StatusOr<MountPlan> plan = MountPlan::Make(Options("size=10000"), Facts());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->Capacity(kGiB).value(), 12288u);
  plan = MountPlan::Make(Options(), Facts());
  EXPECT_EQ(plan->Capacity(8 * kGiB).value(), 4 * kGiB) << "half the device by default";
  plan = MountPlan::Make(Options("size=2g"), Facts());
  EXPECT_TRUE(absl::StrContains(plan->Capacity(kGiB).status().message(), "exceeds"));
  plan = MountPlan::Make(Options("size=2g,backend=null"), Facts());
  EXPECT_EQ(plan->Capacity(kGiB).value(), 2 * kGiB) << "the null device stores nothing";
  plan = MountPlan::Make(Options("size=4k,min_block=64k"), Facts());
  EXPECT_TRUE(absl::StrContains(plan->Capacity(kGiB).status().message(), "min_block"));
}

TEST(MountPlanTest, FilesystemSettingsFollowTheCapacity) {
  absl::StatusOr<MountPlan> plan = MountPlan::Make(Options(), Facts());
  ASSERT_TRUE(plan.ok()) << plan.status();
  FilesystemConfig config = plan->FilesystemConfigFor(64 * kGiB);
  EXPECT_EQ(config.max_inodes, 16u << 20);
  EXPECT_EQ(config.max_extent, 32 * kMiB) << "a 128th of the capacity, at most 32 MiB";
  EXPECT_EQ(config.root_uid, 1000u);
  EXPECT_EQ(config.root_gid, 100u);
  EXPECT_EQ(config.cache_bytes, 64 * kMiB);
  EXPECT_FALSE(config.trim_growth_when_idle);
  config = plan->FilesystemConfigFor(256 * kMiB);
  EXPECT_EQ(config.max_extent, 2 * kMiB);
  config = plan->FilesystemConfigFor(4096);
  EXPECT_EQ(config.max_extent, kMiB) << "at least 1 MiB";
  EXPECT_EQ(config.max_inodes, MountPlan::kLeastDefaultInodes) << "a tiny mount still has inodes";

  plan = MountPlan::Make(Options("nr_inodes=7,min_block=64m,uid=5,zero_message_open"), Facts());
  ASSERT_TRUE(plan.ok()) << plan.status();
  config = plan->FilesystemConfigFor(kGiB);
  EXPECT_EQ(config.max_inodes, 7u);
  EXPECT_EQ(config.max_extent, 64 * kMiB) << "never below min_block";
  EXPECT_EQ(config.root_uid, 5u);
  EXPECT_TRUE(config.trim_growth_when_idle) << "no RELEASE says when a writer is done";
}

TEST(MountPlanTest, CacheBeyondHalfTheMachinesMemoryIsRefused) {
  MachineFacts facts = Facts();
  facts.host_memory = 1 * kGiB;
  absl::StatusOr<MountPlan> plan = MountPlan::Make(Options("cache=600m"), facts);
  ASSERT_FALSE(plan.ok());
  EXPECT_TRUE(absl::StrContains(plan.status().message(), "cache=")) << plan.status();
  EXPECT_TRUE(MountPlan::Make(Options("cache=512m"), facts).ok());
}

TEST(MountPlanTest, ReserveIsForGpus) {
  EXPECT_TRUE(MountPlan::Make(Options("reserve=1g"), Facts()).ok());
  EXPECT_TRUE(MountPlan::Make(Options("reserve=1g,backend=cuda"), Facts()).ok());
  for (const char* options : {"reserve=1g,backend=host", "reserve=5%,backend=null"}) {
    SCOPED_TRACE(options);
    EXPECT_TRUE(absl::IsInvalidArgument(MountPlan::Make(Options(options), Facts()).status()));
  }
}

TEST(MountPlanTest, IoUringWhereOfferedAndRequiredByUringOn) {
  MachineFacts facts = Facts();
  absl::StatusOr<MountPlan> plan = MountPlan::Make(Options(), facts);
  EXPECT_TRUE(plan->fuse().uring);
  plan = MountPlan::Make(Options("uring=off"), facts);
  EXPECT_FALSE(plan->fuse().uring);
  facts.no_uring_reason = "no io_uring here";
  plan = MountPlan::Make(Options(), facts);
  EXPECT_FALSE(plan->fuse().uring) << "auto falls back to /dev/fuse";
  plan = MountPlan::Make(Options("uring=on"), facts);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(), "uring=on: no io_uring here");
}

TEST(MountPlanTest, GlueSettings) {
  MachineFacts facts = Facts();
  facts.allowed_max_request = kMiB;
  facts.request_limit_note = "capped";
  absl::StatusOr<MountPlan> plan =
      MountPlan::Make(Options("max_request=4m,cache=0,direct_io_min=2m"), facts);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const FuseSettings& fuse = plan->fuse();
  EXPECT_EQ(fuse.max_request, kMiB) << "what the kernel allows";
  EXPECT_EQ(fuse.request_limit_note, "capped");
  EXPECT_EQ(fuse.uring_depth, 2u) << "the default for the 4 MiB asked for";
  EXPECT_EQ(fuse.workers, MountPlan::kWorkerThreads);
  EXPECT_FALSE(fuse.cache);
  EXPECT_EQ(fuse.requested_direct_io_min, 2 * kMiB);
  EXPECT_FALSE(fuse.zero_message_open);
  std::vector<const char*> argv = {"cudafs", "/mnt/x", "-s"};
  plan = MountPlan::Make(ParseCommandLine(argv).value(), facts);
  EXPECT_EQ(plan->fuse().workers, 1u);
  EXPECT_TRUE(plan->fuse().cache);
}

}  // namespace
}  // namespace cudafs
