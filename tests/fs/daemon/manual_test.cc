#include "fs/daemon/manual.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "fs/daemon/option_table.h"
#include "gtest/gtest.h"

namespace cudafs {
namespace {

// The output of a shell command (stdout and stderr), or nullopt when it
// could not run.
std::optional<std::string> Shell(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string out;
  char buffer[4096];
  while (size_t got = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, got);
  if (pclose(pipe) != 0) return std::nullopt;
  return out;
}

// The page written to a file, for the tools that read one.
std::string WrittenPage() {
  const std::string path = testing::TempDir() + "/cudafs.8";
  std::ofstream(path) << ManualPage("1.2.3");
  return path;
}

// Every option --help and the README name is in the page, as written there.
TEST(ManualTest, ListsEveryOptionOfTheTable) {
  const std::string page = ManualPage("1.2.3");
  for (const MountOptionSpec& spec : MountOptionTable()) {
    if (spec.section == OptionSection::kRefused) continue;
    for (const OptionForm& form : spec.forms) {
      const std::string spelling(form.syntax.empty() ? spec.names : form.syntax);
      for (absl::string_view one : absl::StrSplit(spelling, ',')) {
        EXPECT_TRUE(absl::StrContains(page, RoffEscape(one))) << one;
      }
    }
  }
  EXPECT_TRUE(absl::StrContains(page, ".TH CUDAFS 8")) << "a section 8 page";
  EXPECT_TRUE(absl::StrContains(page, "cudafs 1.2.3"));
}

// The page's text (docs/cudafs.8.md) becomes roff: the markup it uses, and
// nothing of the text taken for a roff request.
TEST(ManualTest, TurnsTheTextIntoRoff) {
  EXPECT_EQ(ManualRoff("<!--\nabout the file\n-->\n# cudafs(8) System Administration\n"
                       "## NAME\n\ncudafs - a name\n",
                       "1.2.3", ""),
            ".TH CUDAFS 8 \"\" \"cudafs 1.2.3\" \"System Administration\"\n"
            ".SH NAME\ncudafs \\- a name\n");
  EXPECT_EQ(ManualRoff("## A\none **-f** and *FILE*, `x-y`\ntwo\n\n.three \\*not\\*\n", "", ""),
            ".SH A\none \\fB\\-f\\fR and \\fIFILE\\fR, \\fBx\\-y\\fR\ntwo\n"
            ".PP\n\\&.three *not*\n");
  EXPECT_EQ(ManualRoff("### B\n**a**\\\n**b** \\\\\n", "", ""),
            ".SS B\n\\fBa\\fR\n.br\n\\fBb\\fR \\e\n");
  EXPECT_EQ(ManualRoff("## C\ntext:\n\n```\n.x -y\n\nz\n```\n\n"
                       "*term*\n: what it is\ngoes on\n\nafter\n",
                       "", ""),
            ".SH C\ntext:\n.PP\n.nf\n.RS\n\\&.x \\-y\n\\&\nz\n.RE\n.fi\n"
            ".TP\n\\fIterm\\fR\nwhat it is\ngoes on\n.PP\nafter\n");
  EXPECT_EQ(ManualRoff("## OPTIONS\n<!-- options -->\n", "", ".SS from the table\n"),
            ".SH OPTIONS\n.SS from the table\n");
  // A marker that does not close is text.
  EXPECT_EQ(ManualRoff("a * b ** c `d\n", "", ""), "a * b ** c `d\n");
}

TEST(ManualTest, EscapesWhatRoffWouldTakeForItself) {
  EXPECT_EQ(RoffEscape("a-b\\c"), "a\\-b\\ec");
  EXPECT_EQ(RoffEscape(".x\n'y"), "\\&.x\n\\&'y");
  EXPECT_EQ(RoffEscape("libfuse \u2265 3.18"), "libfuse \\(>= 3.18");
}

// groff reads it without a warning, and man(1) shows it.
TEST(ManualTest, RendersWithoutWarnings) {
  if (!Shell("command -v groff")) GTEST_SKIP() << "no groff";
  const std::string path = WrittenPage();
  const std::optional<std::string> warnings = Shell("groff -man -ww -z " + path);
  ASSERT_TRUE(warnings.has_value());
  EXPECT_EQ(*warnings, "");
  if (!Shell("command -v man")) return;
  const std::optional<std::string> shown =
      Shell("MANWIDTH=80 MANPAGER=cat man -l " + path);
  ASSERT_TRUE(shown.has_value());
  EXPECT_TRUE(absl::StrContains(*shown, "cudafs options")) << *shown;
  EXPECT_TRUE(absl::StrContains(*shown, "size=N[k|m|g|t|p|e]"));
}

// The systemd mount units people copy, the page's and docs/examples', are
// ones systemd takes (man pages are not looked up: cudafs(8) is not
// installed where the test runs).
TEST(ManualTest, SystemdMountUnitsVerify) {
  if (!Shell("command -v systemd-analyze")) GTEST_SKIP() << "no systemd-analyze";
  const std::string dir = testing::TempDir() + "/units";
  ASSERT_TRUE(Shell("rm -rf " + dir + " && mkdir -p " + dir));
  // The page's unit: from "[Unit]" to the end of "[Install]", roff undone.
  const std::string page = ManualPage("1.2.3");
  const size_t start = page.find("[Unit]");
  const size_t end = page.find("WantedBy=multi\\-user.target", start);
  ASSERT_NE(start, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  std::string unit = page.substr(start, end - start) + "WantedBy=multi\\-user.target\n";
  for (size_t at; (at = unit.find("\\-")) != std::string::npos;) unit.replace(at, 2, "-");
  std::ofstream(dir + "/mnt-gpu.mount") << unit;
  const std::optional<std::string> from_page =
      Shell("systemd-analyze verify --man=no " + dir + "/mnt-gpu.mount");
  EXPECT_TRUE(from_page.has_value()) << unit;
  const std::optional<std::string> example = Shell(
      "systemd-analyze verify --man=no " CUDAFS_SOURCE_DIR "/docs/examples/mnt-gpu.mount");
  EXPECT_TRUE(example.has_value());
  // A unit whose name is not its mountpoint is refused: the check bites.
  std::ofstream(dir + "/mnt-other.mount") << unit;
  EXPECT_FALSE(Shell("systemd-analyze verify --man=no " + dir + "/mnt-other.mount"));
}

}  // namespace
}  // namespace cudafs
