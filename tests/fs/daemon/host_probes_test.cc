// The host probes' rules, fed what /proc and /sys would say; a raise is a
// function that records what it was asked to write.
#include "fs/daemon/host_probes.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "alloc/base/sizes.h"
#include "gtest/gtest.h"

namespace cudafs {
namespace {

constexpr char kParameter[] = "/sys/module/fuse/parameters/enable_uring";
constexpr char kLimit[] = "/proc/sys/fs/fuse/max_pages_limit";
constexpr char kWindow[] = "/sys/class/bdi/0:42/read_ahead_kb";

// Records each value it is asked to write; answers `result`.
struct Raise {
  absl::Status result = absl::OkStatus();
  std::vector<uint64_t> written;
  absl::Status operator()(uint64_t value) {
    written.push_back(value);
    return result;
  }
};

TEST(HostProbeTest, ParsesNumbersAsTheKernelPrintsThem) {
  EXPECT_EQ(ParseHostNumber("256\n"), 256u);
  EXPECT_EQ(ParseHostNumber("128"), 128u);
  EXPECT_EQ(ParseHostNumber(""), std::nullopt);
  EXPECT_EQ(ParseHostNumber("Y\n"), std::nullopt);
  EXPECT_EQ(ParseHostNumber("-1\n"), std::nullopt);
  EXPECT_EQ(ParseHostNumber("1 2\n"), std::nullopt);
}

TEST(HostProbeTest, UringOnlyWhenTheParameterIsY) {
  EXPECT_EQ(KernelUringRule(kParameter, "Y\n"), "");
  EXPECT_EQ(KernelUringRule(kParameter, std::nullopt),
            "this kernel has no FUSE over io_uring "
            "(no /sys/module/fuse/parameters/enable_uring)");
  const std::string off =
      "FUSE over io_uring is off: /sys/module/fuse/parameters/enable_uring is not Y "
      "(as root: echo Y > /sys/module/fuse/parameters/enable_uring)";
  EXPECT_EQ(KernelUringRule(kParameter, "N\n"), off);
  EXPECT_EQ(KernelUringRule(kParameter, ""), off);
}

RequestLimitFacts Facts(std::optional<uint64_t> limit, bool root) {
  return RequestLimitFacts{.page_size = 4096,
                           .old_libfuse = "",
                           .limit_path = kLimit,
                           .max_pages_limit = limit,
                           .root = root};
}

TEST(HostProbeTest, RequestWithinTheKernelsLimitIsTakenAsItIs) {
  Raise raise;
  std::string note;
  EXPECT_EQ(RequestLimitRule(kMiB, Facts(256, true), std::ref(raise), note), kMiB);
  EXPECT_EQ(RequestLimitRule(kMiB, Facts(std::nullopt, false), std::ref(raise), note), kMiB);
  EXPECT_TRUE(raise.written.empty());
  EXPECT_EQ(note, "");
}

TEST(HostProbeTest, RootRaisesTheKernelsLimitToTheRequest) {
  Raise raise;
  std::string note;
  EXPECT_EQ(RequestLimitRule(4 * kMiB, Facts(256, true), std::ref(raise), note), 4 * kMiB);
  EXPECT_EQ(raise.written, std::vector<uint64_t>{1024});
  EXPECT_EQ(note,
            "raised /proc/sys/fs/fuse/max_pages_limit from 256 to 1024 (host-wide) for "
            "max_request=4096k");
}

TEST(HostProbeTest, RequestsOfPartPagesAskForWholeOnes) {
  Raise raise;
  std::string note;
  EXPECT_EQ(RequestLimitRule(kMiB + 1, Facts(256, true), std::ref(raise), note), kMiB + 1);
  EXPECT_EQ(raise.written, std::vector<uint64_t>{257});
}

TEST(HostProbeTest, WithoutRootTheMountTakesWhatTheKernelAllows) {
  Raise raise;
  std::string note;
  EXPECT_EQ(RequestLimitRule(4 * kMiB, Facts(512, false), std::ref(raise), note), 2 * kMiB);
  EXPECT_TRUE(raise.written.empty());
  EXPECT_EQ(note,
            "max_request=4096k: the kernel allows 2048k "
            "(/proc/sys/fs/fuse/max_pages_limit is 512; root may raise it)");
}

TEST(HostProbeTest, KernelsBeforeTheSettingAllowTheirCompiledLimit) {
  Raise raise;
  std::string note;
  EXPECT_EQ(RequestLimitRule(4 * kMiB, Facts(std::nullopt, true), std::ref(raise), note), kMiB);
  EXPECT_TRUE(raise.written.empty()) << "nothing to raise";
  EXPECT_EQ(note,
            "max_request=4096k: the kernel allows 1024k "
            "(no /proc/sys/fs/fuse/max_pages_limit: a kernel before 6.13)");
}

TEST(HostProbeTest, AFailedRaiseSaysWhyAndTakesTheKernelsLimit) {
  Raise raise;
  raise.result = absl::PermissionDeniedError("Permission denied");
  std::string note;
  EXPECT_EQ(RequestLimitRule(4 * kMiB, Facts(256, true), std::ref(raise), note), kMiB);
  EXPECT_EQ(note,
            "max_request=4096k: the kernel allows 1024k (cannot raise "
            "/proc/sys/fs/fuse/max_pages_limit from 256: Permission denied)");
}

TEST(HostProbeTest, OldLibfuseCapsTheRequestAtItsBuffer) {
  Raise raise;
  std::string note;
  RequestLimitFacts facts = Facts(4096, true);
  facts.old_libfuse = "3.16";
  EXPECT_EQ(RequestLimitRule(4 * kMiB, facts, std::ref(raise), note), kMiB);
  EXPECT_TRUE(raise.written.empty());
  EXPECT_EQ(note, "max_request=4096k: libfuse 3.16 reads requests of at most 1024k");
  note.clear();
  EXPECT_EQ(RequestLimitRule(kMiB, facts, std::ref(raise), note), kMiB);
  EXPECT_EQ(note, "");
}

TEST(HostProbeTest, ReadaheadIsRaisedAsRootNeverLowered) {
  Raise raise;
  EXPECT_EQ(ReadaheadRule(kWindow, 128, 4 * kMiB, true, std::ref(raise)),
            "readahead raised from 128 to 4096 KiB (/sys/class/bdi/0:42/read_ahead_kb)");
  EXPECT_EQ(raise.written, std::vector<uint64_t>{4096});
  EXPECT_EQ(ReadaheadRule(kWindow, 8192, 4 * kMiB, true, std::ref(raise)), "");
  EXPECT_EQ(ReadaheadRule(kWindow, 4096, 4 * kMiB, true, std::ref(raise)), "");
  EXPECT_EQ(raise.written.size(), 1u);
}

TEST(HostProbeTest, ReadaheadWithoutRootOrWindowSaysSo) {
  Raise raise;
  EXPECT_EQ(ReadaheadRule(kWindow, 128, 4 * kMiB, false, std::ref(raise)),
            "readahead: 128 KiB (root may raise /sys/class/bdi/0:42/read_ahead_kb to 4096)");
  EXPECT_EQ(ReadaheadRule(kWindow, std::nullopt, 4 * kMiB, true, std::ref(raise)),
            "readahead: cannot read /sys/class/bdi/0:42/read_ahead_kb; left as is");
  EXPECT_TRUE(raise.written.empty());
  raise.result = absl::PermissionDeniedError("Read-only file system");
  EXPECT_EQ(ReadaheadRule(kWindow, 128, 4 * kMiB, true, std::ref(raise)),
            "readahead: cannot raise /sys/class/bdi/0:42/read_ahead_kb: Read-only file system");
}

}  // namespace
}  // namespace cudafs
