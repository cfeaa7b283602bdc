#include "tests/fake_libcuda/fake_libcuda_config.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/support/fake_cuda_shared_budget.h"

namespace cudafs {
namespace {

// "8G", "512M", "4096": bytes, or 0 when it is none of those.
uint64_t ParseSize(absl::string_view text) {
  uint64_t unit = 1;
  if (!text.empty()) {
    switch (absl::ascii_toupper(text.back())) {
      case 'K':
        unit = uint64_t{1} << 10;
        break;
      case 'M':
        unit = uint64_t{1} << 20;
        break;
      case 'G':
        unit = uint64_t{1} << 30;
        break;
      case 'T':
        unit = uint64_t{1} << 40;
        break;
    }
    if (unit != 1) text.remove_suffix(1);
  }
  uint64_t count = 0;
  if (!absl::SimpleAtoi(text, &count) || count > UINT64_MAX / unit) return 0;
  return count * unit;
}

}  // namespace

absl::StatusOr<std::vector<FakeGpuOptions>> ParseFakeGpus(absl::string_view spec) {
  spec = absl::StripAsciiWhitespace(spec);
  if (spec.empty()) spec = "8G";
  std::vector<FakeGpuOptions> gpus;
  for (absl::string_view item : absl::StrSplit(spec, ',')) {
    item = absl::StripAsciiWhitespace(item);
    int count = 1;
    if (const size_t x = item.find_first_of("xX"); x != absl::string_view::npos) {
      if (!absl::SimpleAtoi(item.substr(0, x), &count) || count < 1) count = 0;
      item = item.substr(x + 1);
    }
    const uint64_t bytes = ParseSize(item);
    if (count == 0 || bytes == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CUDAFS_FAKE_GPUS=", spec, ": each item is [COUNTx]SIZE (\"2x8G\", \"8G,24G\")"));
    }
    for (int i = 0; i < count && gpus.size() <= FakeCudaSharedBudget::kMaxGpus; ++i) {
      FakeGpuOptions gpu;
      gpu.total_bytes = bytes;
      gpus.push_back(gpu);
    }
  }
  if (gpus.size() > FakeCudaSharedBudget::kMaxGpus) {
    return absl::InvalidArgumentError(absl::StrCat("CUDAFS_FAKE_GPUS=", spec, ": at most ",
                                                   FakeCudaSharedBudget::kMaxGpus, " GPUs"));
  }
  for (size_t i = 0; i < gpus.size(); ++i) {
    char bus_id[16];
    std::snprintf(bus_id, sizeof bus_id, "0000:%02zx:00.0", 0x65 + i);
    gpus[i].pci_bus_id = bus_id;
  }
  return gpus;
}

absl::StatusOr<FakeLibcudaConfig> FakeLibcudaConfigFromEnvironment() {
  const char* spec = std::getenv("CUDAFS_FAKE_GPUS");
  const char* state = std::getenv("CUDAFS_FAKE_CUDA_STATE");
  FakeLibcudaConfig config;
  absl::StatusOr<std::vector<FakeGpuOptions>> gpus = ParseFakeGpus(spec != nullptr ? spec : "");
  if (!gpus.ok()) return gpus.status();
  config.gpus = *std::move(gpus);
  if (state != nullptr) config.state_path = state;
  return config;
}

}  // namespace cudafs
