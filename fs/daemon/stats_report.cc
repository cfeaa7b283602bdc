#include "fs/daemon/stats_report.h"

#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace cudafs {

StatsReport StatsReport::Parse(absl::string_view text) {
  StatsReport report;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    const std::pair<absl::string_view, absl::string_view> field =
        absl::StrSplit(line, absl::MaxSplits(' ', 1));
    if (field.first.empty() || field.second.empty()) continue;
    report.counters_.emplace_back(std::string(field.first), std::string(field.second));
  }
  return report;
}

std::optional<std::string> StatsReport::Get(absl::string_view name) const {
  for (const auto& [counter, value] : counters_) {
    if (counter == name) return value;
  }
  return std::nullopt;
}

uint64_t StatsReport::Number(absl::string_view name) const {
  uint64_t number = 0;
  const std::optional<std::string> value = Get(name);
  return value && absl::SimpleAtoi(*value, &number) ? number : 0;
}

std::string StatsReport::Summary(absl::string_view mountpoint, const MountFigures& figures) const {
  const uint64_t size = figures.size_bytes;
  const uint64_t percent = size == 0 ? 0 : (figures.used_bytes * 100 + size / 2) / size;
  std::string line = absl::StrFormat("%s: %s of %s used (%d%%), %d files", mountpoint,
                                     HumanBytes(figures.used_bytes), HumanBytes(figures.size_bytes),
                                     percent, figures.files);
  if (Get("device0_place")) {
    // A pool, or a GPU with host memory to move data to: each place.
    std::vector<std::string> places;
    for (int i = 0;
         const std::optional<std::string> place = Get(absl::StrCat("device", i, "_place")); ++i) {
      places.push_back(
          absl::StrCat(*place, " ", HumanBytes(Number(absl::StrCat("device", i, "_bytes")))));
    }
    absl::StrAppend(&line, ", held: ", absl::StrJoin(places, ", "));
    if (Number("spill_ready_bytes") > 0) {
      absl::StrAppend(&line, " (and host ", HumanBytes(Number("spill_ready_bytes")),
                      " kept ready for moves)");
    }
  } else if (const std::optional<std::string> device = Get("device")) {
    absl::StrAppend(&line, ", ", HumanBytes(Number("device_bytes")), " held on ", *device);
  }
  if (Number("moved_out_bytes") > 0 || Number("moved_back_bytes") > 0) {
    absl::StrAppend(&line, ", moved off the GPUs ", HumanBytes(Number("moved_out_bytes")),
                    " and back ", HumanBytes(Number("moved_back_bytes")));
  }
  if (const std::optional<std::string> transport = Get("transport")) {
    absl::StrAppend(&line, ", ", *transport);
  }
  const uint64_t reads = Number("hits") + Number("misses");
  if (Number("cache_budget_bytes") == 0) {
    absl::StrAppend(&line, ", no write-back cache");
  } else if (reads == 0) {
    absl::StrAppend(&line, ", no small reads yet");
  } else {
    absl::StrAppendFormat(&line, ", cache hit rate %d%% of %d small reads",
                          (Number("hits") * 100 + reads / 2) / reads, reads);
  }
  return line;
}

std::string StatsReport::Json(const MountFigures& figures) const {
  nlohmann::ordered_json object;
  object["size_bytes"] = figures.size_bytes;
  object["used_bytes"] = figures.used_bytes;
  object["files"] = figures.files;
  for (const auto& [name, value] : counters_) {
    uint64_t number = 0;
    if (absl::SimpleAtoi(value, &number)) {
      object[name] = number;
    } else {
      object[name] = value;
    }
  }
  return object.dump(2);
}

std::string HumanBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return absl::StrFormat("%d B", bytes);
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit + 1 < static_cast<int>(std::size(kUnits))) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

}  // namespace cudafs
