#include "fs/wire/mount_info_line.h"

#include <sys/sysmacros.h>

#include <charconv>

namespace cudafs {
namespace {

// The fields of `line` split at single spaces (the kernel escapes spaces
// inside them).
std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> fields;
  while (!line.empty()) {
    const size_t space = line.find(' ');
    fields.push_back(line.substr(0, space));
    if (space == std::string_view::npos) break;
    line.remove_prefix(space + 1);
  }
  return fields;
}

template <typename T>
bool Number(std::string_view text, T* value) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return error == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::optional<MountInfoLine> ParseMountInfoLine(std::string_view line) {
  const std::vector<std::string_view> fields = Fields(line);
  // Optional fields ("shared:1") follow the mount's options, up to a "-".
  size_t separator = 6;
  while (separator < fields.size() && fields[separator] != "-") ++separator;
  // Six fields before it, three after it.
  if (separator + 3 >= fields.size()) return std::nullopt;
  MountInfoLine mount;
  const size_t colon = fields[2].find(':');
  unsigned major_number = 0, minor_number = 0;
  if (!Number(fields[0], &mount.id) || !Number(fields[1], &mount.parent) ||
      colon == std::string_view::npos || !Number(fields[2].substr(0, colon), &major_number) ||
      !Number(fields[2].substr(colon + 1), &minor_number)) {
    return std::nullopt;
  }
  mount.device = std::string(fields[2]);
  mount.dev = makedev(major_number, minor_number);
  mount.root = UnescapeMountField(fields[3]);
  mount.mountpoint = UnescapeMountField(fields[4]);
  mount.options = std::string(fields[5]);
  mount.fstype = UnescapeMountField(fields[separator + 1]);
  mount.source = UnescapeMountField(fields[separator + 2]);
  mount.super_options = std::string(fields[separator + 3]);
  return mount;
}

std::vector<MountInfoLine> ParseMountInfo(std::string_view text) {
  std::vector<MountInfoLine> mounts;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    if (std::optional<MountInfoLine> mount = ParseMountInfoLine(text.substr(0, end))) {
      mounts.push_back(std::move(*mount));
    }
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return mounts;
}

std::optional<std::string> MountOptionValue(std::string_view options, std::string_view key) {
  while (!options.empty()) {
    const size_t comma = options.find(',');
    const std::string_view option = options.substr(0, comma);
    if (option.size() > key.size() && option.starts_with(key) && option[key.size()] == '=') {
      return std::string(option.substr(key.size() + 1));
    }
    if (comma == std::string_view::npos) break;
    options.remove_prefix(comma + 1);
  }
  return std::nullopt;
}

std::string UnescapeMountField(std::string_view field) {
  const auto octal = [&](size_t at) { return field[at] >= '0' && field[at] <= '7'; };
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && octal(i + 1) && octal(i + 2) &&
        octal(i + 3)) {
      out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                               (field[i + 3] - '0'));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

}  // namespace cudafs
