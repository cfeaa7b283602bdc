// FaultyDevice and its plan's text form.
#include "alloc/devices/faulty_device.h"

#include <memory>
#include <string>

#include "alloc/devices/host_device.h"
#include "gtest/gtest.h"

namespace cudafs {
namespace {

TEST(FaultPlanTest, ParsesEveryItem) {
  absl::StatusOr<FaultPlan> plan = ParseFaultPlan("probability=0.25,seed=9,ops=write+commit");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->probability, 0.25);
  EXPECT_EQ(plan->seed, 9u);
  EXPECT_EQ(plan->ops, uint32_t{kFaultWrite | kFaultCommit});
  plan = ParseFaultPlan("off");
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->probability, 0);
  plan = ParseFaultPlan("probability=1");
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->ops, uint32_t{kFaultAll});
  EXPECT_EQ(plan->delay, absl::ZeroDuration());
  plan = ParseFaultPlan("delay=250,ops=copy");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->delay, absl::Milliseconds(250));
  EXPECT_EQ(plan->probability, 0) << "a delay alone fails nothing";
}

TEST(FaultPlanTest, RefusesMalformedPlansNamingTheItem) {
  for (const char* text : {"", "probability", "probability=1.5", "probability=-0.1",
                           "probability=nan", "seed=x", "ops=write+erase", "often=1",
                           "delay=-1", "delay=x", "delay=60001"}) {
    const absl::StatusOr<FaultPlan> plan = ParseFaultPlan(text);
    EXPECT_TRUE(absl::IsInvalidArgument(plan.status())) << text;
  }
  EXPECT_NE(ParseFaultPlan("ops=write+erase").status().message().find("erase"), std::string::npos);
}

TEST(FaultyDeviceTest, FailsTheChosenCallsAndCountsThem) {
  std::unique_ptr<HostDevice> host = std::move(HostDevice::Create(4 << 20).value());
  FaultyDevice device(host.get());
  ASSERT_TRUE(device.Commit(0, device.granule_size()).ok());
  char byte = 'x';
  device.SetPlan(FaultPlan{1, kFaultWrite, 1});
  EXPECT_TRUE(absl::IsInternal(device.Write({{0, &byte, 1}})));
  EXPECT_TRUE(device.Read({{&byte, 0, 1}}).ok()) << "reads are not in the plan";
  device.SetPlan(FaultPlan{1, kFaultCommit, 1});
  EXPECT_TRUE(absl::IsResourceExhausted(device.Commit(device.granule_size(), device.granule_size())));
  EXPECT_EQ(device.injected(), 2u);
  device.SetProbability(0);
  EXPECT_TRUE(device.Write({{0, &byte, 1}}).ok());
  EXPECT_EQ(device.injected(), 2u);
}

// A delay makes the planned calls slow, failing none of them by itself.
TEST(FaultyDeviceTest, ADelayedCallWaitsAndSucceeds) {
  std::unique_ptr<HostDevice> host = std::move(HostDevice::Create(4 << 20).value());
  FaultyDevice device(host.get());
  ASSERT_TRUE(device.Commit(0, device.granule_size()).ok());
  FaultPlan plan;
  plan.ops = kFaultRead;
  plan.delay = absl::Milliseconds(200);
  device.SetPlan(plan);
  char byte = 'x';
  const absl::Time start = absl::Now();
  EXPECT_TRUE(device.Read({{&byte, 0, 1}}).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  EXPECT_EQ(device.injected(), 0u);
}

}  // namespace
}  // namespace cudafs
