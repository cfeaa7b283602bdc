// The command line: what to do, positionals, flags, -o lists; each -o
// option's own rules are in mount_options_test.cc.
#include "fs/daemon/command_line.h"

#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "alloc/base/sizes.h"
#include "gtest/gtest.h"
#include "tests/fs/daemon/parse_helpers.h"

namespace cudafs {
namespace {

using Strings = std::vector<std::string>;

TEST(ParseCommandLineTest, MountpointAloneGivesDefaults) {
  absl::StatusOr<MountOptions> options = Parse({"/mnt/x"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->action, MountOptions::Action::kMount);
  EXPECT_EQ(options->source, "cudafs");
  EXPECT_EQ(options->mountpoint, "/mnt/x");
  EXPECT_FALSE(options->foreground);
  EXPECT_FALSE(options->debug);
  EXPECT_FALSE(options->single_threaded);
  EXPECT_FALSE(options->size.bytes);
  EXPECT_FALSE(options->size.percent);
  EXPECT_FALSE(options->nr_inodes);
  EXPECT_EQ(options->mode, 01777u);
  EXPECT_FALSE(options->uid);
  EXPECT_FALSE(options->gid);
  EXPECT_EQ(options->backend, BackendKind::kAuto);
  EXPECT_EQ(options->device, "");
  EXPECT_EQ(options->min_block, 4096u);
  EXPECT_FALSE(options->noatime);
  EXPECT_EQ(options->fuse_options, Strings());
}

TEST(ParseCommandLineTest, TwoPositionalsAreSourceAndMountpoint) {
  absl::StatusOr<MountOptions> options = Parse({"gpu0", "/mnt/x"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->source, "gpu0");
  EXPECT_EQ(options->mountpoint, "/mnt/x");
}

TEST(ParseCommandLineTest, ThreePositionalsAreAnError) {
  EXPECT_TRUE(Contains(ParseError({"a", "b", "c"}), "\"c\""));
}

// main adds " (see cudafs --help)" to every message: no second pointer here.
TEST(ParseCommandLineTest, MissingMountpointIsAnError) {
  EXPECT_EQ(ParseError({}), "missing MOUNTPOINT");
  EXPECT_EQ(ParseError({"-f", "-o", "size=1g"}), "missing MOUNTPOINT");
}

// The kernel refuses a mount with an empty source; say so before trying.
TEST(ParseCommandLineTest, EmptySourceIsAnError) {
  EXPECT_EQ(ParseError({"", "/mnt/x"}), "empty SOURCE: name one, or leave it out for \"cudafs\"");
}

TEST(ParseCommandLineTest, DoubleDashEndsFlags) {
  absl::StatusOr<MountOptions> options = Parse({"-f", "--", "-src", "-mnt"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->foreground);
  EXPECT_EQ(options->source, "-src");
  EXPECT_EQ(options->mountpoint, "-mnt");
}

TEST(ParseCommandLineTest, ActionsNeedNoMountpoint) {
  const struct {
    const char* flag;
    MountOptions::Action action;
  } kCases[] = {
      {"-h", MountOptions::Action::kHelp},
      {"--help", MountOptions::Action::kHelp},
      {"-V", MountOptions::Action::kVersion},
      {"--version", MountOptions::Action::kVersion},
      {"--list-devices", MountOptions::Action::kListDevices},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.flag);
    absl::StatusOr<MountOptions> options = Parse({c.flag});
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_EQ(options->action, c.action);
  }
}

TEST(ParseCommandLineTest, UpgradeTakesOneMountpoint) {
  absl::StatusOr<MountOptions> options = Parse({"--upgrade", "/mnt/gpu"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->action, MountOptions::Action::kUpgrade);
  EXPECT_EQ(options->mountpoint, "/mnt/gpu");
  EXPECT_TRUE(Contains(ParseError({"--upgrade"}), "--upgrade takes one MOUNTPOINT"));
  EXPECT_TRUE(Contains(ParseError({"--upgrade", "a", "b"}), "--upgrade takes one MOUNTPOINT"));
  EXPECT_FALSE(Parse({"--upgrade", "--json", "/mnt/gpu"}).ok()) << "--json is for --stats";
}

TEST(ParseCommandLineTest, StatsTakesOneMountpoint) {
  absl::StatusOr<MountOptions> options = Parse({"--stats", "/mnt/gpu"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->action, MountOptions::Action::kStats);
  EXPECT_EQ(options->mountpoint, "/mnt/gpu");
  EXPECT_EQ(options->stats_format, MountOptions::StatsFormat::kSummary);
  EXPECT_FALSE(Parse({"--stats"}).ok());
  EXPECT_FALSE(Parse({"--stats", "a", "b"}).ok());
  options = Parse({"--stats", "--json", "/mnt/gpu"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->stats_format, MountOptions::StatsFormat::kJson);
  options = Parse({"--all", "--stats", "/mnt/gpu"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->stats_format, MountOptions::StatsFormat::kAll);
  EXPECT_FALSE(Parse({"--json", "/mnt/gpu"}).ok()) << "--json is for --stats";
}

TEST(ParseCommandLineTest, StatsTakesOneFormat) {
  // Either order: the last format used to win silently.
  EXPECT_TRUE(Contains(ParseError({"--stats", "--json", "--all", "/mnt/gpu"}), "--all and --json"));
  EXPECT_TRUE(Contains(ParseError({"--all", "--stats", "--json", "/mnt/gpu"}), "--all and --json"));
  absl::StatusOr<MountOptions> options = Parse({"--stats", "--json", "--json", "/mnt/gpu"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->stats_format, MountOptions::StatsFormat::kJson);
}

TEST(ParseCommandLineTest, HelpWinsOverTheRestOfTheLine) {
  absl::StatusOr<MountOptions> options = Parse({"/mnt/x", "--help", "-o", "bogus", "-x"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->action, MountOptions::Action::kHelp);
}

TEST(ParseCommandLineTest, FlagsAnywhere) {
  absl::StatusOr<MountOptions> options = Parse({"-s", "src", "-f", "/mnt/x"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->single_threaded);
  EXPECT_TRUE(options->foreground);
  EXPECT_FALSE(options->debug);
  EXPECT_EQ(options->source, "src");
  EXPECT_EQ(options->mountpoint, "/mnt/x");
}

TEST(ParseCommandLineTest, DebugImpliesForeground) {
  absl::StatusOr<MountOptions> options = Parse({"/mnt/x", "-d"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->debug);
  EXPECT_TRUE(options->foreground);
}

TEST(ParseCommandLineTest, UnknownFlagIsNamed) {
  EXPECT_EQ(ParseError({"/mnt/x", "-x"}), "unknown flag \"-x\"");
  EXPECT_EQ(ParseError({"--frobnicate", "/mnt/x"}), "unknown flag \"--frobnicate\"");
  // Flags do not combine.
  EXPECT_EQ(ParseError({"/mnt/x", "-fd"}), "unknown flag \"-fd\"");
}

TEST(ParseCommandLineTest, DashOWithoutArgument) {
  EXPECT_TRUE(Contains(ParseError({"/mnt/x", "-o"}), "-o"));
}

TEST(ParseCommandLineTest, GluedDashO) {
  absl::StatusOr<MountOptions> options = Parse({"/mnt/x", "-osize=1g,noatime"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->size.bytes, uint64_t{1} << 30);
  EXPECT_TRUE(options->noatime);
}

TEST(ParseCommandLineTest, RepeatedDashOAccumulatesAndLastWins) {
  absl::StatusOr<MountOptions> options =
      Parse({"-o", "size=1g", "/mnt/x", "-o", "allow_other,mode=700", "-osize=2g", "-o", "nosuid"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->size.bytes, uint64_t{2} << 30);
  EXPECT_EQ(options->mode, 0700u);
  EXPECT_EQ(options->fuse_options, (Strings{"allow_other", "nosuid"}));
}

TEST(ParseCommandLineTest, MountFuse3Argv) {
  absl::StatusOr<MountOptions> options =
      Parse({"cudafs", "/mnt/x", "-o", "rw,size=8G,mode=1777,nofail"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->action, MountOptions::Action::kMount);
  EXPECT_EQ(options->source, "cudafs");
  EXPECT_EQ(options->mountpoint, "/mnt/x");
  EXPECT_EQ(options->size.bytes, uint64_t{8} << 30);
  EXPECT_EQ(options->mode, 01777u);
  EXPECT_EQ(options->fuse_options, (Strings{"rw"}));
}

TEST(ParseCommandLineTest, MountFuse3AddsDevAndSuid) {
  // mount.fuse3 appends dev,suid unless nodev/nosuid were given.
  absl::StatusOr<MountOptions> options =
      Parse({"gpu", "/mnt/x", "-o", "rw,noauto,user,_netdev,dev,suid"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->fuse_options, (Strings{"rw", "dev", "suid"}));
}

TEST(ParseCommandLineTest, EmptyOptionItemsAreSkipped) {
  absl::StatusOr<MountOptions> options = Parse({"/mnt/x", "-o", ",ro,,noatime,"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->fuse_options, (Strings{"ro"}));
  EXPECT_TRUE(options->noatime);
}

TEST(ParseCommandLineTest, MakeRoomTakesAMountpointAndASizeOrAll) {
  absl::StatusOr<MountOptions> options = Parse({"--make-room", "/mnt/gpu", "60g"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->action, MountOptions::Action::kMakeRoom);
  EXPECT_EQ(options->mountpoint, "/mnt/gpu");
  EXPECT_EQ(options->make_room_bytes, 60 * kGiB);
  options = Parse({"--make-room", "/mnt/gpu", "all"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->make_room_bytes, std::nullopt);
  EXPECT_TRUE(Contains(ParseError({"--make-room", "/mnt/gpu"}), "--make-room takes"));
  EXPECT_TRUE(Contains(ParseError({"--make-room", "/mnt/gpu", "lots"}), "--make-room:"));
  EXPECT_TRUE(Contains(ParseError({"--make-room", "/mnt/gpu", "1g", "2g"}), "--make-room takes"));
}

// SIZE reads as size='s bytes do: the same suffixes, either case.
TEST(ParseCommandLineTest, MakeRoomSizeTakesSizeSuffixes) {
  for (const char* size : {"2P", "2p", "2048T"}) {
    SCOPED_TRACE(size);
    absl::StatusOr<MountOptions> options = Parse({"--make-room", "/mnt/gpu", size});
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_EQ(options->make_room_bytes, uint64_t{2} << 50);
  }
}

TEST(UsageTextTest, NamesEveryOptionAndDefault) {
  const std::string usage = UsageText("my-cudafs");
  EXPECT_TRUE(Contains(usage, "usage: my-cudafs [SOURCE] MOUNTPOINT"));
  for (const char* word : {"--help",
                           "--version",
                           "--list-devices",
                           "-f ",
                           "-d ",
                           "-s ",
                           "-o OPT",
                           "size=",
                           "nr_inodes=",
                           "mode=",
                           "uid=",
                           "gid=",
                           "backend=auto|cuda|host",
                           "device=",
                           "min_block=",
                           "noatime",
                           "atime",
                           "relatime",
                           "strictatime",
                           "norelatime",
                           "ro ",
                           "rw ",
                           "allow_other",
                           "allow_root",
                           "auto_unmount",
                           "default_permissions",
                           "suid",
                           "nosuid",
                           "dev",
                           "nodev",
                           "exec",
                           "noexec",
                           "sync",
                           "async",
                           "dirsync",
                           "fsname=",
                           "defaults",
                           "auto",
                           "noauto",
                           "nofail",
                           "_netdev",
                           "user",
                           "nouser",
                           "users",
                           "owner",
                           "group",
                           "comment=",
                           "x-*",
                           "50% of the device's memory",
                           "default: one per 4 KiB of size",
                           "default: 1777",
                           "default: 4k",
                           "default: auto"}) {
    EXPECT_TRUE(Contains(usage, word));
  }
  // StrFormat escapes must not leak into the text.
  EXPECT_FALSE(absl::StrContains(usage, "%%"));
}

}  // namespace
}  // namespace cudafs
