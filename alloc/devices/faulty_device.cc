#include "alloc/devices/faulty_device.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace cudafs {
namespace {

absl::StatusOr<uint32_t> ParseFaultOps(absl::string_view text) {
  uint32_t ops = 0;
  for (absl::string_view name : absl::StrSplit(text, '+')) {
    if (name == "commit") {
      ops |= kFaultCommit;
    } else if (name == "write") {
      ops |= kFaultWrite;
    } else if (name == "read") {
      ops |= kFaultRead;
    } else if (name == "copy") {
      ops |= kFaultCopy;
    } else if (name == "zero") {
      ops |= kFaultZero;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown fault operation \"", name, "\" (commit, write, read, copy, zero)"));
    }
  }
  return ops;
}

}  // namespace

absl::StatusOr<FaultPlan> ParseFaultPlan(absl::string_view text) {
  FaultPlan plan;
  if (text == "off") return plan;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    const std::vector<absl::string_view> key_value = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (key_value.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat("\"", item, "\" is not key=value"));
    }
    const absl::string_view key = key_value[0], value = key_value[1];
    if (key == "probability") {
      if (!absl::SimpleAtod(value, &plan.probability) || !(plan.probability >= 0) ||
          plan.probability > 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("probability=", value, " is not a number from 0 to 1"));
      }
    } else if (key == "seed") {
      if (!absl::SimpleAtoi(value, &plan.seed)) {
        return absl::InvalidArgumentError(absl::StrCat("seed=", value, " is not a number"));
      }
    } else if (key == "delay") {
      int64_t milliseconds = 0;
      if (!absl::SimpleAtoi(value, &milliseconds) || milliseconds < 0 || milliseconds > 60000) {
        return absl::InvalidArgumentError(
            absl::StrCat("delay=", value, " is not a number of milliseconds from 0 to 60000"));
      }
      plan.delay = absl::Milliseconds(milliseconds);
    } else if (key == "ops") {
      absl::StatusOr<uint32_t> ops = ParseFaultOps(value);
      if (!ops.ok()) return ops.status();
      plan.ops = *ops;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown fault plan item \"", key, "\" (probability, seed, ops, delay)"));
    }
  }
  return plan;
}

void FaultyDevice::SetPlan(const FaultPlan& plan) {
  absl::MutexLock lock(&mu_);
  plan_ = plan;
  rng_.seed(plan.seed);
}

void FaultyDevice::SetProbability(double probability) {
  absl::MutexLock lock(&mu_);
  plan_.probability = probability;
}

uint64_t FaultyDevice::injected() const {
  absl::MutexLock lock(&mu_);
  return injected_;
}

absl::Status FaultyDevice::Commit(uint64_t offset, uint64_t length) {
  if (Fail(kFaultCommit)) return absl::ResourceExhaustedError("injected: out of memory");
  return DeviceWrapper::Commit(offset, length);
}

absl::Status FaultyDevice::Write(absl::Span<const HostToDevice> copies) {
  if (!copies.empty() && Fail(kFaultWrite)) return absl::InternalError("injected: write");
  return DeviceWrapper::Write(copies);
}

absl::Status FaultyDevice::Read(absl::Span<const DeviceToHost> copies) {
  if (!copies.empty() && Fail(kFaultRead)) return absl::InternalError("injected: read");
  return DeviceWrapper::Read(copies);
}

absl::Status FaultyDevice::Copy(absl::Span<const DeviceToDevice> copies) {
  if (!copies.empty() && Fail(kFaultCopy)) return absl::InternalError("injected: copy");
  return DeviceWrapper::Copy(copies);
}

absl::Status FaultyDevice::Zero(absl::Span<const DeviceRange> ranges) {
  if (!ranges.empty() && Fail(kFaultZero)) return absl::InternalError("injected: zero");
  return DeviceWrapper::Zero(ranges);
}

bool FaultyDevice::Fail(FaultOp op) {
  absl::Duration delay;
  {
    absl::MutexLock lock(&mu_);
    if ((plan_.ops & op) == 0) return false;
    delay = plan_.delay;
  }
  // Outside the lock: other calls wait their own.
  if (delay > absl::ZeroDuration()) absl::SleepFor(delay);
  absl::MutexLock lock(&mu_);
  if (plan_.probability <= 0 || (plan_.ops & op) == 0) return false;
  if (std::uniform_real_distribution<double>(0, 1)(rng_) >= plan_.probability) return false;
  ++injected_;
  return true;
}

}  // namespace cudafs
