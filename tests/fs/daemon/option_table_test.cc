// The option table: every entry is documented, parses its default and is
// what the parser, --help and README.md's option table go by.
#include "fs/daemon/option_table.h"

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "fs/daemon/command_line.h"
#include "fs/daemon/mount_options.h"
#include "gtest/gtest.h"

namespace cudafs {
namespace {

absl::StatusOr<MountOptions> ParseOption(const std::string& option) {
  const char* argv[] = {"cudafs", "/mnt/x", "-o", option.c_str()};
  return ParseCommandLine(argv);
}

// Each name an entry accepts, with "x-*" standing for "x-anything".
std::vector<std::string> NamesOf(const MountOptionSpec& spec) {
  std::vector<std::string> names;
  for (absl::string_view name : absl::StrSplit(spec.names, ',')) {
    names.push_back(absl::StrCat(absl::StripSuffix(name, "*"), absl::EndsWith(name, "*") ? "anything" : ""));
  }
  return names;
}

TEST(OptionTableTest, EveryEntryHasNamesAndHelp) {
  for (const MountOptionSpec& spec : MountOptionTable()) {
    SCOPED_TRACE(spec.names);
    EXPECT_FALSE(spec.names.empty());
    ASSERT_FALSE(spec.forms.empty());
    for (const OptionForm& form : spec.forms) EXPECT_FALSE(form.help.empty()) << form.syntax;
    EXPECT_FALSE(!spec.default_value.empty() && !spec.default_text.empty())
        << "one default, shown one way";
  }
}

TEST(OptionTableTest, EveryNameHasOneEntry) {
  std::set<std::string> seen;
  for (const MountOptionSpec& spec : MountOptionTable()) {
    for (const std::string& name : NamesOf(spec)) {
      EXPECT_TRUE(seen.insert(name).second) << name << " is in two entries";
      EXPECT_EQ(FindMountOption(name), &spec) << name;
    }
  }
}

// What --help calls the default is what a mount gets unasked.
TEST(OptionTableTest, EveryDefaultParsesToTheDefault) {
  const absl::StatusOr<MountOptions> unasked = ParseOption("");
  ASSERT_TRUE(unasked.ok()) << unasked.status();
  for (const MountOptionSpec& spec : MountOptionTable()) {
    for (const std::string& name : NamesOf(spec)) {
      if (!spec.default_value.empty()) {
        const std::string option = absl::StrCat(name, "=", spec.default_value);
        SCOPED_TRACE(option);
        const absl::StatusOr<MountOptions> options = ParseOption(option);
        ASSERT_TRUE(options.ok()) << options.status();
        EXPECT_TRUE(*options == *unasked);
      }
      if (spec.is_default) {
        SCOPED_TRACE(name);
        absl::StatusOr<MountOptions> options = ParseOption(name);
        ASSERT_TRUE(options.ok()) << options.status();
        options->fuse_options.clear();  // rw is still said to the kernel
        EXPECT_TRUE(*options == *unasked);
      }
    }
  }
}

// The parser knows every name of the table, and nothing else.
TEST(OptionTableTest, EveryNameIsKnownAndOthersAreRefused) {
  for (const MountOptionSpec& spec : MountOptionTable()) {
    for (const std::string& name : NamesOf(spec)) {
      SCOPED_TRACE(name);
      const absl::StatusOr<MountOptions> options =
          ParseOption(spec.value == OptionValue::kNone ? name : absl::StrCat(name, "=1"));
      if (!options.ok()) {
        EXPECT_FALSE(absl::StartsWith(options.status().message(), "unknown option"))
            << options.status();
      }
    }
  }
  for (const char* unknown : {"bogus", "x", "RO", "sizes", "nodefault_permissions"}) {
    EXPECT_EQ(FindMountOption(unknown), nullptr) << unknown;
    EXPECT_EQ(ParseOption(unknown).status().message(),
              absl::StrCat("unknown option \"", unknown, "\""));
  }
}

// --help shows every way to write an option that is offered; refused ones
// are not offered.
TEST(OptionTableTest, HelpShowsEveryOfferedOption) {
  const std::string usage = UsageText("cudafs");
  for (const MountOptionSpec& spec : MountOptionTable()) {
    for (const OptionForm& form : spec.forms) {
      const std::string shown =
          form.syntax.empty() ? std::string(spec.names.substr(0, spec.names.find(','))) : std::string(form.syntax);
      EXPECT_EQ(absl::StrContains(usage, shown), spec.section != OptionSection::kRefused)
          << shown;
    }
  }
}

// README.md's table of options is `cudafs --options-markdown`: what the
// table says, not a second copy to keep in step by hand.
TEST(OptionTableTest, ReadmeHasTheGeneratedTable) {
  std::ifstream readme(CUDAFS_SOURCE_DIR "/README.md");
  ASSERT_TRUE(readme) << "cannot read " << CUDAFS_SOURCE_DIR "/README.md";
  const std::string expected = MountOptionsMarkdown();
  const std::string header = expected.substr(0, expected.find('\n'));
  std::string table;
  bool in_table = false;
  for (std::string line; std::getline(readme, line);) {
    if (line == header) in_table = true;
    if (in_table && !absl::StartsWith(line, "|")) break;
    if (in_table) absl::StrAppend(&table, line, "\n");
  }
  EXPECT_EQ(table, expected)
      << "README.md's option table differs from the option table's: replace it with the "
         "output of `build/cudafs --options-markdown`";
}

}  // namespace
}  // namespace cudafs
