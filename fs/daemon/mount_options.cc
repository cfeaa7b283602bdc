#include "fs/daemon/mount_options.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"

namespace cudafs {

uint64_t SizeSpec::Resolve(uint64_t device_memory, double default_percent) const {
  if (bytes) return *bytes;
  // long double holds any uint64_t exactly on x86-64; the clamp covers
  // rounding on platforms where it does not.
  const long double share = static_cast<long double>(device_memory) *
                            static_cast<long double>(percent.value_or(default_percent)) / 100;
  if (share >= static_cast<long double>(device_memory)) return device_memory;
  return static_cast<uint64_t>(share);
}

uint32_t DefaultUringDepth(uint64_t max_request) {
  const uint64_t depth = max_request == 0 ? kMostDefaultUringDepth
                                          : kUringBytesPerQueue / max_request;
  return static_cast<uint32_t>(
      std::clamp<uint64_t>(depth, kLeastDefaultUringDepth, kMostDefaultUringDepth));
}

std::string FsnameOption(absl::string_view source) {
  std::string option = "fsname=";
  for (char c : source) {
    if (c == ',' || c == '\\') option += '\\';
    option += c;
  }
  return option;
}

absl::StatusOr<uint64_t> ParseByteCount(absl::string_view text) {
  absl::string_view digits = text;
  int shift = 0;
  if (!digits.empty()) {
    const size_t suffix = absl::string_view("kmgtpe").find(absl::ascii_tolower(digits.back()));
    if (suffix != absl::string_view::npos) {
      shift = 10 * static_cast<int>(suffix + 1);
      digits.remove_suffix(1);
    }
  }
  uint64_t count;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
  if (error == std::errc::invalid_argument || end != digits.data() + digits.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "not a byte count: \"%s\" (expected digits with an optional k/m/g/t/p/e suffix)",
        absl::CHexEscape(text)));
  }
  if (error == std::errc::result_out_of_range ||
      count > (std::numeric_limits<uint64_t>::max() >> shift)) {
    return absl::OutOfRangeError(
        absl::StrFormat("byte count too large: \"%s\"", absl::CHexEscape(text)));
  }
  return count << shift;
}

}  // namespace cudafs
