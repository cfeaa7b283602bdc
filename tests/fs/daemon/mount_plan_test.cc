#include "fs/daemon/mount_plan.h"

#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "fs/daemon/command_line.h"
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
  // A limit past the device is taken, as tmpfs takes one past RAM; the
  // device bounds it, and df shows that.
  for (const char* size : {"size=2g", "size=99999t", "size=150%"}) {
    SCOPED_TRACE(size);
    plan = MountPlan::Make(Options(size), Facts());
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->Capacity(kGiB).value(), kGiB);
  }
  plan = MountPlan::Make(Options("size=2g,backend=null"), Facts());
  EXPECT_EQ(plan->Capacity(kGiB).value(), 2 * kGiB) << "the null device stores nothing";
  plan = MountPlan::Make(Options("size=4k,min_block=64k"), Facts());
  EXPECT_TRUE(absl::StrContains(plan->Capacity(kGiB).status().message(), "min_block"));
}

TEST(MountPlanTest, FilesystemSettingsFollowTheCapacity) {
  absl::StatusOr<MountPlan> plan = MountPlan::Make(Options(), Facts());
  ASSERT_TRUE(plan.ok()) << plan.status();
  FilesystemConfig config = plan->FilesystemConfigFor(64 * kGiB, BackendKind::kCuda);
  EXPECT_EQ(config.max_inodes, 16u << 20);
  EXPECT_EQ(config.max_extent, 32 * kMiB) << "a 128th of the capacity, at most 32 MiB";
  EXPECT_EQ(config.root_uid, 1000u);
  EXPECT_EQ(config.root_gid, 100u);
  EXPECT_EQ(config.cache_bytes, 64 * kMiB);
  EXPECT_FALSE(config.trim_growth_when_idle);
  config = plan->FilesystemConfigFor(256 * kMiB, BackendKind::kCuda);
  EXPECT_EQ(config.max_extent, 2 * kMiB);
  config = plan->FilesystemConfigFor(4096, BackendKind::kCuda);
  EXPECT_EQ(config.max_extent, kMiB) << "at least 1 MiB";
  EXPECT_EQ(config.max_inodes, MountPlan::kLeastDefaultInodes) << "a tiny mount still has inodes";

  plan = MountPlan::Make(Options("nr_inodes=7,min_block=64m,uid=5,zero_message_open"), Facts());
  ASSERT_TRUE(plan.ok()) << plan.status();
  config = plan->FilesystemConfigFor(kGiB, BackendKind::kCuda);
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

TEST(MountPlanTest, SpillIsForGpus) {
  EXPECT_TRUE(MountPlan::Make(Options("spill=1g"), Facts()).ok());
  EXPECT_TRUE(MountPlan::Make(Options("spill=0,backend=cuda"), Facts()).ok());
  EXPECT_TRUE(MountPlan::Make(Options("spill_ready=16g"), Facts()).ok());
  for (const char* options : {"spill=1g,backend=host", "spill=5%,backend=null",
                              "spill_ready=1g,backend=host", "spill_ready=0,backend=null"}) {
    SCOPED_TRACE(options);
    EXPECT_TRUE(absl::IsInvalidArgument(MountPlan::Make(Options(options), Facts()).status()));
  }
}

TEST(MountPlanTest, DeviceIsForGpus) {
  EXPECT_TRUE(MountPlan::Make(Options("device=1"), Facts()).ok());
  EXPECT_TRUE(MountPlan::Make(Options("device=all,backend=cuda"), Facts()).ok());
  for (const char* options : {"device=0,backend=host", "device=all,backend=null"}) {
    SCOPED_TRACE(options);
    const absl::Status status = MountPlan::Make(Options(options), Facts()).status();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_EQ(status.message(), "device= picks GPUs: this backend has no GPU");
  }
}

TEST(MountPlanTest, GpuIdleIsForGpus) {
  EXPECT_TRUE(MountPlan::Make(Options("gpu_idle=1"), Facts()).ok());
  EXPECT_TRUE(MountPlan::Make(Options("gpu_idle=never,backend=cuda"), Facts()).ok());
  for (const char* options : {"gpu_idle=1,backend=host", "gpu_idle=5,backend=null"}) {
    SCOPED_TRACE(options);
    const absl::Status status = MountPlan::Make(Options(options), Facts()).status();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "gpu_idle=")) << status;
  }
}

// backend=auto cannot refuse GPU options before it knows there is no GPU:
// once it fell back to host memory, it names those it ignores.
TEST(MountPlanTest, AutoInHostMemoryNamesTheGpuOptionsItIgnores) {
  absl::StatusOr<MountPlan> plan =
      MountPlan::Make(Options("reserve=1g,spill=2g,spill_ready=0,device=1,gpu_idle=5"), Facts());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->UnusedOptionsNotice(BackendKind::kHost),
            "cudafs: reserve=, spill=, spill_ready=, device=, gpu_idle= have no effect: "
            "without a GPU the files are in host memory");
  EXPECT_EQ(plan->UnusedOptionsNotice(BackendKind::kCuda), "") << "the GPU was found";
  plan = MountPlan::Make(Options("reserve=0"), Facts());
  EXPECT_EQ(plan->UnusedOptionsNotice(BackendKind::kHost),
            "cudafs: reserve= has no effect: without a GPU the files are in host memory");
  plan = MountPlan::Make(Options("size=1g,cache=8m"), Facts());
  EXPECT_EQ(plan->UnusedOptionsNotice(BackendKind::kHost), "") << "no GPU option given";
}

// In host memory the cache is one more copy (and measured slower): none
// unless asked for. On a GPU, and on null, which stands in for one, 64 MiB.
TEST(MountPlanTest, CacheByDefaultOnlyWhereTheDataIsOnAGpu) {
  absl::StatusOr<MountPlan> plan = MountPlan::Make(Options(), Facts());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->FilesystemConfigFor(kGiB, BackendKind::kCuda).cache_bytes, 64 * kMiB);
  EXPECT_TRUE(plan->FuseSettingsFor(BackendKind::kCuda).cache);
  EXPECT_EQ(plan->FilesystemConfigFor(kGiB, BackendKind::kNull).cache_bytes, 64 * kMiB);
  EXPECT_EQ(plan->FilesystemConfigFor(kGiB, BackendKind::kHost).cache_bytes, 0u)
      << "backend=host, or auto without a GPU";
  EXPECT_FALSE(plan->FuseSettingsFor(BackendKind::kHost).cache);

  plan = MountPlan::Make(Options("backend=host,cache=8m"), Facts());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->FilesystemConfigFor(kGiB, BackendKind::kHost).cache_bytes, 8 * kMiB);
  EXPECT_TRUE(plan->FuseSettingsFor(BackendKind::kHost).cache);
  plan = MountPlan::Make(Options("cache=0"), Facts());
  EXPECT_EQ(plan->FilesystemConfigFor(kGiB, BackendKind::kCuda).cache_bytes, 0u);
  EXPECT_FALSE(plan->FuseSettingsFor(BackendKind::kCuda).cache);
}

TEST(MountPlanTest, IoUringWhereOfferedAndRequiredByUringOn) {
  MachineFacts facts = Facts();
  absl::StatusOr<MountPlan> plan = MountPlan::Make(Options(), facts);
  EXPECT_TRUE(plan->FuseSettingsFor(BackendKind::kCuda).uring);
  plan = MountPlan::Make(Options("uring=off"), facts);
  EXPECT_FALSE(plan->FuseSettingsFor(BackendKind::kCuda).uring);
  facts.no_uring_reason = "no io_uring here";
  plan = MountPlan::Make(Options(), facts);
  EXPECT_FALSE(plan->FuseSettingsFor(BackendKind::kCuda).uring) << "auto falls back to /dev/fuse";
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
  const FuseSettings fuse = plan->FuseSettingsFor(BackendKind::kCuda);
  EXPECT_EQ(fuse.max_request, kMiB) << "what the kernel allows";
  EXPECT_EQ(fuse.request_limit_note, "capped");
  EXPECT_EQ(fuse.uring_depth, 2u) << "the default for the 4 MiB asked for";
  EXPECT_EQ(fuse.workers, MountPlan::kWorkerThreads);
  EXPECT_FALSE(fuse.cache);
  EXPECT_EQ(fuse.requested_direct_io_min, 2 * kMiB);
  EXPECT_FALSE(fuse.zero_message_open);
  std::vector<const char*> argv = {"cudafs", "/mnt/x", "-s"};
  plan = MountPlan::Make(ParseCommandLine(argv).value(), facts);
  EXPECT_EQ(plan->FuseSettingsFor(BackendKind::kCuda).workers, 1u);
  EXPECT_TRUE(plan->FuseSettingsFor(BackendKind::kCuda).cache);
}

std::vector<std::string> FuseOptionsOf(const char* option_list, const MachineFacts& facts) {
  absl::StatusOr<MountPlan> plan = MountPlan::Make(Options(option_list), facts);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? plan->options().fuse_options : std::vector<std::string>{"failed"};
}

// A root mount is for everyone, as tmpfs is: the modes decide.
TEST(MountPlanTest, RootMountsAllowOthers) {
  MachineFacts root = Facts();
  root.uid = 0;
  using V = std::vector<std::string>;
  EXPECT_EQ(FuseOptionsOf("ro", root), (V{"ro", "allow_other"}));
  EXPECT_EQ(FuseOptionsOf("allow_other", root), (V{"allow_other"}));
  EXPECT_EQ(FuseOptionsOf("allow_root", root), (V{"allow_root"})) << "libfuse refuses both";
  EXPECT_EQ(FuseOptionsOf("noallow_other", root), V{});
  EXPECT_EQ(FuseOptionsOf("ro", Facts()), (V{"ro"})) << "a user's mount stays the user's";
}

// mount.fuse3 appends dev,suid to every list not saying nodev or nosuid:
// those words are dropped, so that an fstab mount is nosuid,nodev as a
// command-line one is; the same words written by the user stay.
TEST(MountPlanTest, MountHelpersDevAndSuidAreNotAsked) {
  MachineFacts helper = Facts();
  helper.started_by_mount = true;
  using V = std::vector<std::string>;
  EXPECT_EQ(FuseOptionsOf("size=1g,dev,suid", helper), V{});
  EXPECT_EQ(FuseOptionsOf("nodev,suid", helper), (V{"nodev"}));
  EXPECT_EQ(FuseOptionsOf("nosuid,dev", helper), (V{"nosuid"}));
  EXPECT_EQ(FuseOptionsOf("nosuid,nodev", helper), (V{"nosuid", "nodev"}));
  EXPECT_EQ(FuseOptionsOf("suid,dev,suid", helper), (V{"suid"})) << "the line said suid";
  EXPECT_EQ(FuseOptionsOf("dev,noexec,dev,suid", helper), (V{"dev", "noexec"}));
  EXPECT_EQ(FuseOptionsOf("dev,suid", Facts()), (V{"dev", "suid"})) << "a command line's own";
}

}  // namespace
}  // namespace cudafs
