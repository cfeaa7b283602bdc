// The escaping of the kernel's mount table (/proc/PID/mountinfo): the daemon
// finds its own mount there and a client finds the mount of a file (and so
// the daemon's socket), so both read its fields the same way.
#ifndef CUDAFS_FS_WIRE_MOUNTINFO_FIELD_H_
#define CUDAFS_FS_WIRE_MOUNTINFO_FIELD_H_

#include <string>
#include <string_view>

namespace cudafs {

// Undoes the octal escapes (\040 for a space; also tab, newline and
// backslash) the kernel writes in a mountinfo field. Anything else, a
// malformed escape included, is kept as it is.
inline std::string UnescapeMountField(std::string_view field) {
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

#endif  // CUDAFS_FS_WIRE_MOUNTINFO_FIELD_H_
