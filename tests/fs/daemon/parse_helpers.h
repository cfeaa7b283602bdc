// What the command-line and mount-option tests share: parsing an argument
// list as `cudafs ARGS...`, and the message of one that must fail.
#ifndef CUDAFS_TESTS_FS_DAEMON_PARSE_HELPERS_H_
#define CUDAFS_TESTS_FS_DAEMON_PARSE_HELPERS_H_

#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "fs/daemon/command_line.h"
#include "gtest/gtest.h"

namespace cudafs {

inline testing::AssertionResult Contains(absl::string_view text, absl::string_view part) {
  if (absl::StrContains(text, part)) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

// argv with "cudafs" as argv[0].
inline absl::StatusOr<MountOptions> Parse(std::initializer_list<const char*> args) {
  std::vector<const char*> argv = {"cudafs"};
  argv.insert(argv.end(), args);
  return ParseCommandLine(argv);
}

// The error message of parsing `args`, after checking the promises every
// message keeps: InvalidArgument, one line.
inline std::string ParseError(std::initializer_list<const char*> args) {
  absl::StatusOr<MountOptions> options = Parse(args);
  EXPECT_FALSE(options.ok());
  if (options.ok()) return "";
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(options.status().message());
  EXPECT_FALSE(absl::StrContains(message, "\n")) << message;
  return message;
}

}  // namespace cudafs

#endif  // CUDAFS_TESTS_FS_DAEMON_PARSE_HELPERS_H_
