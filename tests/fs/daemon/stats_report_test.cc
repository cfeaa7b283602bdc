#include "fs/daemon/stats_report.h"

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"

namespace cudafs {
namespace {

constexpr char kCounters[] =
    "device host memory\n"
    "device_bytes 2097152\n"
    "transport io_uring\n"
    "cache_budget_bytes 67108864\n"
    "hits 3\n"
    "misses 1\n"
    "requests_read 7\n"
    "malformed\n";

TEST(StatsReportTest, ParsesNameValueLines) {
  const StatsReport report = StatsReport::Parse(kCounters);
  EXPECT_EQ(report.Get("device"), "host memory") << "values may hold spaces";
  EXPECT_EQ(report.Number("requests_read"), 7u);
  EXPECT_EQ(report.Get("malformed"), std::nullopt);
  EXPECT_EQ(report.Number("missing"), 0u);
}

TEST(StatsReportTest, SummaryIsOneLineOfWhatPeopleAsk) {
  const StatsReport report = StatsReport::Parse(kCounters);
  EXPECT_EQ(report.Summary("/mnt/gpu", {64 << 20, 3 << 20, 5}),
            "/mnt/gpu: 3.0 MiB of 64.0 MiB used (5%), 5 files, 2.0 MiB held on host memory, "
            "io_uring, cache hit rate 75% of 4 small reads");
  EXPECT_NE(StatsReport::Parse("cache_budget_bytes 0\n")
                .Summary("/m", {}).find("no write-back cache"),
            std::string::npos);
  EXPECT_NE(StatsReport::Parse("cache_budget_bytes 1\n").Summary("/m", {}).find("no small reads"),
            std::string::npos);
}

// With places (a pool, or a GPU with host memory to spill to), each says
// what it holds, and moves off the GPUs show once there were any.
TEST(StatsReportTest, SummaryNamesEachPlaceAndTheMoves) {
  const StatsReport report = StatsReport::Parse(
      "device 2 devices: GPU 0; host memory\ndevice_bytes 3145728\ndevice0 GPU 0\n"
      "device0_place gpu0\ndevice0_bytes 2097152\ndevice1 host memory\ndevice1_place host\n"
      "device1_bytes 1048576\ntransport io_uring\ncache_budget_bytes 0\nmoved_out_bytes 0\n"
      "moved_back_bytes 0\n");
  EXPECT_EQ(report.Summary("/mnt/gpu", {64 << 20, 3 << 20, 5}),
            "/mnt/gpu: 3.0 MiB of 64.0 MiB used (5%), 5 files, held: gpu0 2.0 MiB, host 1.0 MiB, "
            "io_uring, no write-back cache");
  const StatsReport moved =
      StatsReport::Parse("device0_place gpu0\nmoved_out_bytes 2097152\nmoved_back_bytes 1024\n");
  EXPECT_NE(moved.Summary("/m", {}).find("moved off the GPUs 2.0 MiB and back 1.0 KiB"),
            std::string::npos)
      << moved.Summary("/m", {});
  // Host memory kept ready is the daemon's too (its resident memory):
  // said beside what the places hold, and only when there is some.
  const StatsReport ready = StatsReport::Parse(
      "device0_place gpu0\ndevice0_bytes 1024\ndevice1_place host\ndevice1_bytes 0\n"
      "spill_ready_bytes 8589934592\n");
  EXPECT_NE(ready.Summary("/m", {}).find("held: gpu0 1.0 KiB, host 0 B (and host 8.0 GiB kept "
                                         "ready for moves)"),
            std::string::npos)
      << ready.Summary("/m", {});
}

TEST(StatsReportTest, JsonHasEveryCounterNumbersAsNumbers) {
  const nlohmann::json json =
      nlohmann::json::parse(StatsReport::Parse(kCounters).Json({64 << 20, 3 << 20, 5}));
  EXPECT_EQ(json["size_bytes"], 64 << 20);
  EXPECT_EQ(json["used_bytes"], 3 << 20);
  EXPECT_EQ(json["files"], 5);
  EXPECT_EQ(json["requests_read"], 7);
  EXPECT_EQ(json["device"], "host memory");
  EXPECT_EQ(json.size(), 10u);
}

TEST(StatsReportTest, HumanBytes) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(HumanBytes(uint64_t{80} << 30), "80.0 GiB");
}

}  // namespace
}  // namespace cudafs
