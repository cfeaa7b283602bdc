#include "fs/daemon/mount_options.h"

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "fs/daemon/command_line.h"
#include "fs/daemon/mount_plan.h"
#include "gtest/gtest.h"
#include "tests/fs/daemon/parse_helpers.h"

namespace cudafs {
namespace {

using Strings = std::vector<std::string>;

// -o OPTION on an otherwise valid command line.
absl::StatusOr<MountOptions> ParseOption(const char* option) {
  return Parse({"/mnt/x", "-o", option});
}

std::string OptionError(const char* option) { return ParseError({"/mnt/x", "-o", option}); }

TEST(MountOptionTest, SizeInBytes) {
  const struct {
    const char* option;
    uint64_t bytes;
  } kCases[] = {
      {"size=4096", 4096},
      {"size=64k", 64 << 10},
      {"size=8G", uint64_t{8} << 30},
      {"size=1t", uint64_t{1} << 40},
      {"size=2T", uint64_t{2} << 40},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.option);
    absl::StatusOr<MountOptions> options = ParseOption(c.option);
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_EQ(options->size.bytes, c.bytes);
    EXPECT_FALSE(options->size.percent);
  }
}

TEST(MountOptionTest, SizeAsPercent) {
  const struct {
    const char* option;
    double percent;
  } kCases[] = {
      {"size=50%", 50},   {"size=100%", 100}, {"size=12.5%", 12.5},
      {"size=0.5%", 0.5}, {"size=007%", 7},   {"size=150%", 150},  // as tmpfs of RAM
      {"size=100.5%", 100.5},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.option);
    absl::StatusOr<MountOptions> options = ParseOption(c.option);
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_EQ(options->size.percent, c.percent);
    EXPECT_FALSE(options->size.bytes);
  }
}

TEST(MountOptionTest, LaterSizeReplacesEarlierKind) {
  absl::StatusOr<MountOptions> options = ParseOption("size=1g,size=25%");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_FALSE(options->size.bytes);
  EXPECT_EQ(options->size.percent, 25);

  options = ParseOption("size=25%,size=1g");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->size.bytes, uint64_t{1} << 30);
  EXPECT_FALSE(options->size.percent);
}

TEST(MountOptionTest, BadSizeMessage) {
  EXPECT_EQ(OptionError("size=12q"),
            "bad value for size=: \"12q\" (expected bytes with an optional k/m/g/t/p/e suffix or a "
            "percentage)");
}

// tmpfs's suffixes (memparse), either case, and any size below 2^64.
TEST(MountOptionTest, SizeTakesTmpfsSuffixes) {
  const struct {
    const char* option;
    uint64_t bytes;
  } kCases[] = {
      {"size=99999t", uint64_t{99999} << 40}, {"size=2P", uint64_t{2} << 50},
      {"size=15e", uint64_t{15} << 60},       {"size=3K", 3 * kKiB},
      {"size=18446744073709551615", ~uint64_t{0}},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.option);
    absl::StatusOr<MountOptions> options = ParseOption(c.option);
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_EQ(options->size.bytes, c.bytes);
  }
}

TEST(MountOptionTest, SizeOverflowSaysTooLarge) {
  EXPECT_EQ(OptionError("size=16e"), "bad value for size=: \"16e\" (too large)");
  EXPECT_EQ(OptionError("size=99999999999999999999"),
            "bad value for size=: \"99999999999999999999\" (too large)");
}

TEST(MountOptionTest, BadPercentages) {
  for (const char* option :
       {"size=0%", "size=0.0%", "size=-5%", "size=%", "size=1e1%",
        "size=inf%", "size=1.2.3%", "size= 5%", "size=5%%"}) {
    SCOPED_TRACE(option);
    EXPECT_TRUE(Contains(OptionError(option), "bad value for size=:"));
  }
}

TEST(MountOptionTest, FractionalBytesAreRejected) {
  EXPECT_TRUE(Contains(OptionError("size=1.5g"), "bad value for size=: \"1.5g\""));
}

TEST(MountOptionTest, ZeroSizeIsRejected) {
  EXPECT_TRUE(Contains(OptionError("size=0"), "bad value for size=: \"0\""));
}

TEST(MountOptionTest, ValueOptionWithoutValue) {
  // A missing value reads as an empty one.
  for (const char* name : {"size", "nr_inodes", "mode", "uid", "gid", "backend", "device",
                           "min_block", "fsname"}) {
    for (const std::string& option : {std::string(name), absl::StrCat(name, "=")}) {
      SCOPED_TRACE(option);
      EXPECT_TRUE(
          Contains(OptionError(option.c_str()), absl::StrCat("bad value for ", name, "=: \"\"")));
    }
  }
}

TEST(MountOptionTest, NrInodes) {
  const struct {
    const char* option;
    uint64_t count;
  } kCases[] = {{"nr_inodes=0", 0},
                {"nr_inodes=1000", 1000},
                {"nr_inodes=1m", 1 << 20},
                {"nr_inodes=2K", 2048}};
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.option);
    absl::StatusOr<MountOptions> options = ParseOption(c.option);
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_EQ(options->nr_inodes, c.count);
  }
  EXPECT_TRUE(Contains(OptionError("nr_inodes=lots"), "bad value for nr_inodes=: \"lots\""));
  EXPECT_EQ(OptionError("nr_inodes=20e"), "bad value for nr_inodes=: \"20e\" (too large)");
}

TEST(MountOptionTest, Mode) {
  const struct {
    const char* option;
    mode_t mode;
  } kCases[] = {{"mode=755", 0755},   {"mode=0755", 0755}, {"mode=01777", 01777},
                {"mode=7777", 07777}, {"mode=0", 0},       {"mode=000000700", 0700}};
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.option);
    absl::StatusOr<MountOptions> options = ParseOption(c.option);
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_EQ(options->mode, c.mode);
  }
  for (const char* option :
       {"mode=10000", "mode=8", "mode=778", "mode=rwx", "mode=-1", "mode=0x1ff", "mode= 755"}) {
    SCOPED_TRACE(option);
    EXPECT_TRUE(Contains(OptionError(option), "bad value for mode=:"));
  }
}

TEST(MountOptionTest, UidAndGid) {
  absl::StatusOr<MountOptions> options = ParseOption("uid=1000,gid=0");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->uid, 1000u);
  EXPECT_EQ(options->gid, 0u);

  options = ParseOption("uid=4294967294,gid=4294967294");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->uid, 4294967294u);
  EXPECT_EQ(options->gid, 4294967294u);

  for (const char* name : {"uid", "gid"}) {
    // (uid_t)-1, past uid_t, signs, suffixes, spaces, names.
    for (const char* value : {"4294967295", "4294967296", "99999999999999999999999", "-1", "+1",
                              "1k", " 1", "root", "0x10"}) {
      const std::string option = std::string(name) + "=" + value;
      SCOPED_TRACE(option);
      EXPECT_TRUE(
          Contains(OptionError(option.c_str()), "bad value for " + std::string(name) + "=:"));
    }
  }
}

TEST(MountOptionTest, Backend) {
  const struct {
    const char* option;
    BackendKind backend;
  } kCases[] = {{"backend=auto", BackendKind::kAuto},
                {"backend=cuda", BackendKind::kCuda},
                {"backend=host", BackendKind::kHost},
                {"backend=null", BackendKind::kNull}};
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.option);
    absl::StatusOr<MountOptions> options = ParseOption(c.option);
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_EQ(options->backend, c.backend);
  }
  EXPECT_EQ(OptionError("backend=gpu"),
            "bad value for backend=: \"gpu\" (expected auto, cuda, host or null)");
  EXPECT_TRUE(Contains(OptionError("backend=CUDA"), "bad value for backend=:"));
}

TEST(MountOptionTest, Device) {
  for (const char* device : {"0", "3", "12", "0000:3b:00.0", "3b:00.0", "0000:AF:00.1"}) {
    SCOPED_TRACE(device);
    const std::string option = std::string("device=") + device;
    absl::StatusOr<MountOptions> options = ParseOption(option.c_str());
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_EQ(options->device, device);
  }
  // Several GPUs as one mount.
  for (const char* device : {"all", "0+1", "0+0000:3b:00.0+3", "0\\,1"}) {
    SCOPED_TRACE(device);
    const std::string option = std::string("device=") + device;
    absl::StatusOr<MountOptions> options = ParseOption(option.c_str());
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_EQ(options->device, absl::StrReplaceAll(device, {{"\\", ""}}));
  }
  for (const char* option : {"device=", "device=gpu0", "device=-1", "device=0 ", "device=/dev/x",
                             "device=0+", "device=+1", "device=all+1", "device=0++1"}) {
    SCOPED_TRACE(option);
    EXPECT_TRUE(Contains(OptionError(option), "bad value for device=:"));
  }
}

TEST(MountOptionTest, Reserve) {
  absl::StatusOr<MountOptions> options = ParseOption("reserve=2g");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->reserve.Resolve(80 * kGiB, 0), 2 * kGiB);
  options = ParseOption("reserve=10%");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->reserve.Resolve(80 * kGiB, 0), 8 * kGiB);
  EXPECT_EQ(MountOptions().reserve.Resolve(80 * kGiB, MountPlan::kDefaultReservePercent),
            8 * kGiB)
      << "10% by default";
  options = ParseOption("reserve=0");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->reserve.Resolve(80 * kGiB, MountPlan::kDefaultReservePercent), 0u)
      << "0: nothing kept, nothing given back";
  EXPECT_TRUE(Contains(OptionError("reserve=101%"), "bad value for reserve=:"));
  EXPECT_TRUE(Contains(OptionError("reserve=-1"), "bad value for reserve=:"));
}

TEST(MountOptionTest, Spill) {
  absl::StatusOr<MountOptions> options = ParseOption("spill=16g");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->spill.Resolve(128 * kGiB, MountPlan::kDefaultSpillPercent), 16 * kGiB);
  options = ParseOption("spill=25%");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->spill.Resolve(128 * kGiB, MountPlan::kDefaultSpillPercent), 32 * kGiB);
  options = ParseOption("spill=0");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->spill.Resolve(128 * kGiB, MountPlan::kDefaultSpillPercent), 0u);
  EXPECT_EQ(MountOptions().spill.Resolve(128 * kGiB, MountPlan::kDefaultSpillPercent),
            64 * kGiB)
      << "half of host memory by default, as tmpfs";
  EXPECT_TRUE(Contains(OptionError("spill=0%"), "bad value for spill=:"));
  EXPECT_TRUE(Contains(OptionError("spill=lots"), "bad value for spill=:"));
}

TEST(MountOptionTest, SpillReady) {
  absl::StatusOr<MountOptions> options = ParseOption("spill_ready=48g");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->spill_ready, 48 * kGiB);
  options = ParseOption("spill_ready=0");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->spill_ready, 0u);
  EXPECT_EQ(MountOptions().spill_ready, std::nullopt)
      << "unset: the room keeper's default (placement::kNearReady)";
  EXPECT_TRUE(Contains(OptionError("spill_ready=10%"), "bad value for spill_ready=:"));
  EXPECT_TRUE(Contains(OptionError("spill_ready=-1"), "bad value for spill_ready=:"));
  EXPECT_TRUE(Contains(OptionError("spill_ready"), "spill_ready"));
}

TEST(MountOptionTest, MinBlock) {
  const struct {
    const char* option;
    uint64_t bytes;
  } kCases[] = {{"min_block=4096", 4096},
                {"min_block=4k", 4096},
                {"min_block=64K", 64 << 10},
                {"min_block=2m", 2 << 20},
                {"min_block=1g", uint64_t{1} << 30},
                {"min_block=1073741824", uint64_t{1} << 30}};
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.option);
    absl::StatusOr<MountOptions> options = ParseOption(c.option);
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_EQ(options->min_block, c.bytes);
  }
  // Too small, too large, not a power of two, malformed.
  for (const char* option : {"min_block=2048", "min_block=2k", "min_block=0", "min_block=2g",
                             "min_block=1t", "min_block=12k", "min_block=4097", "min_block=big"}) {
    SCOPED_TRACE(option);
    EXPECT_TRUE(Contains(OptionError(option), "bad value for min_block=:"));
  }
  EXPECT_EQ(OptionError("min_block=20e"), "bad value for min_block=: \"20e\" (too large)");
}

TEST(MountOptionTest, Atime) {
  absl::StatusOr<MountOptions> options = ParseOption("noatime");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->noatime);
  // noatime is ours alone.
  EXPECT_EQ(options->fuse_options, Strings());

  for (const char* atime : {"atime", "relatime", "strictatime", "norelatime"}) {
    SCOPED_TRACE(atime);
    const std::string option = std::string("noatime,") + atime;
    options = ParseOption(option.c_str());
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_FALSE(options->noatime);
    EXPECT_EQ(options->fuse_options, Strings());
  }
}

TEST(MountOptionTest, DirectIoIsOursAndTheLastOneWins) {
  EXPECT_FALSE(ParseOption("size=1g")->direct_io_min.has_value());
  absl::StatusOr<MountOptions> options = ParseOption("direct_io");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->direct_io_min, 0u);
  EXPECT_EQ(options->fuse_options, Strings());
  options = ParseOption("direct_io,nodirect_io");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->direct_io_min, kNeverDirectIo);
  options = ParseOption("nodirect_io,direct_io_min=64k");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->direct_io_min, 64u << 10);
  options = ParseOption("direct_io_min=8m,direct_io");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->direct_io_min, 0u);
  EXPECT_TRUE(Contains(OptionError("direct_io=1"), "direct_io"));
  EXPECT_TRUE(Contains(OptionError("direct_io_min=big"), "direct_io_min"));
  EXPECT_TRUE(Contains(OptionError("direct_io_min="), "direct_io_min"));
  EXPECT_TRUE(Contains(OptionError("direct_io_min=-1"), "direct_io_min"));
}

TEST(MountOptionTest, ZeroMessageOpenRefusesDirectIo) {
  EXPECT_FALSE(ParseOption("size=1g")->zero_message_open);
  absl::StatusOr<MountOptions> options = ParseOption("zero_message_open");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->zero_message_open);
  EXPECT_EQ(options->fuse_options, Strings());
  options = ParseOption("zero_message_open,nodirect_io");
  ASSERT_TRUE(options.ok()) << options.status();
  for (const char* conflict : {"zero_message_open,direct_io", "direct_io_min=1m,zero_message_open"}) {
    SCOPED_TRACE(conflict);
    EXPECT_TRUE(Contains(OptionError(conflict), "zero_message_open"));
  }
  EXPECT_TRUE(Contains(OptionError("zero_message_open=1"), "zero_message_open"));
}

TEST(MountOptionTest, UringModeAndDepth) {
  absl::StatusOr<MountOptions> options = ParseOption("size=1g");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->uring, MountOptions::Uring::kAuto);
  EXPECT_EQ(options->uring_depth, std::nullopt);  // DefaultUringDepth
  const struct {
    const char* option;
    MountOptions::Uring uring;
  } kCases[] = {{"uring=auto", MountOptions::Uring::kAuto},
                {"uring=on", MountOptions::Uring::kOn},
                {"uring=off", MountOptions::Uring::kOff},
                {"uring=on,uring=off", MountOptions::Uring::kOff}};
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.option);
    options = ParseOption(c.option);
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_EQ(options->uring, c.uring);
    EXPECT_EQ(options->fuse_options, Strings()) << "libfuse gets io_uring from us, not as is";
  }
  options = ParseOption("uring_depth=1,uring_depth=64");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->uring_depth, 64u);
  EXPECT_EQ(OptionError("uring=yes"), "bad value for uring=: \"yes\" (expected auto, on or off)");
  for (const char* bad : {"uring_depth=0", "uring_depth=65", "uring_depth=-1", "uring_depth=4k",
                          "uring_depth="}) {
    EXPECT_EQ(OptionError(bad).rfind("bad value for uring_depth=:", 0), 0u) << bad;
  }
}

TEST(MountOptionTest, DefaultUringDepthBoundsBuffersPerQueue) {
  EXPECT_EQ(DefaultUringDepth(128 * kKiB), 4u);
  EXPECT_EQ(DefaultUringDepth(kMiB), 4u);
  EXPECT_EQ(DefaultUringDepth(2 * kMiB), 4u);
  EXPECT_EQ(DefaultUringDepth(4 * kMiB), 2u);
  EXPECT_EQ(DefaultUringDepth(16 * kMiB), 2u);
}

TEST(MountOptionTest, MaxRequest) {
  absl::StatusOr<MountOptions> options = ParseOption("size=1g");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->max_request, kDefaultMaxRequest);
  const struct {
    const char* option;
    uint64_t bytes;
  } kCases[] = {{"max_request=128k", 128 * kKiB},   {"max_request=1m", kMiB},
                {"max_request=1048576", kMiB},      {"max_request=2M", 2 * kMiB},
                {"max_request=16m", 16 * kMiB},     {"max_request=8m,max_request=1m", kMiB}};
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.option);
    options = ParseOption(c.option);
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_EQ(options->max_request, c.bytes);
  }
  EXPECT_EQ(OptionError("max_request=3m"),
            "bad value for max_request=: \"3m\" (expected a power of two from 128k to 16m)");
  for (const char* bad : {"max_request=64k", "max_request=32m", "max_request=0",
                          "max_request=1g", "max_request=4097", "max_request=", "max_request=big",
                          "max_request=-1m"}) {
    EXPECT_EQ(OptionError(bad).rfind("bad value for max_request=:", 0), 0u) << bad;
  }
  EXPECT_EQ(OptionError("max_request=20e"), "bad value for max_request=: \"20e\" (too large)");
}

TEST(MountOptionTest, CacheBudget) {
  absl::StatusOr<MountOptions> options = ParseOption("size=1g");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->cache_bytes, std::nullopt) << "the backend's default (MountPlan)";
  options = ParseOption("cache=0");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->cache_bytes, 0u);
  options = ParseOption("cache=256m");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->cache_bytes, uint64_t{256} << 20);
  EXPECT_EQ(options->fuse_options, Strings());
  for (const char* bad : {"cache=", "cache=-1", "cache=lots", "cache=1.5g", "cache=99999999999e",
                          "cache=1", "cache=4095"}) {
    EXPECT_EQ(OptionError(bad).rfind("bad value for cache=:", 0), 0u) << bad;
  }
  EXPECT_TRUE(Contains(OptionError("cache=1"), "less than one 4 KiB page"));
  options = ParseOption("cache=4k");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->cache_bytes, 4096u);
}

TEST(MountOptionTest, OneInodeIsRefusedForTheRootTakesIt) {
  EXPECT_TRUE(Contains(OptionError("nr_inodes=1"), "the root directory takes the only inode"));
  absl::StatusOr<MountOptions> options = ParseOption("nr_inodes=2");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->nr_inodes, 2u);
}

// As libfuse reads -o lists: a backslash takes the next character as it is.
TEST(MountOptionTest, EscapedCommasStayInTheValue) {
  absl::StatusOr<MountOptions> options = ParseOption("fsname=y\\,suid");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->source, "y,suid");
  EXPECT_EQ(options->fuse_options, Strings()) << "suid is part of the name, not an option";
  options = ParseOption("fsname=a\\\\b,ro");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->source, "a\\b");
  EXPECT_EQ(options->fuse_options, Strings({"ro"}));
  EXPECT_TRUE(Contains(OptionError("noatime\\,size=1g"), "noatime,size"));
}

// The kernel enforces ro: it is forwarded, in order with rw.
TEST(MountOptionTest, ReadOnlyIsForwarded) {
  absl::StatusOr<MountOptions> options = ParseOption("ro");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->fuse_options, (Strings{"ro"}));

  options = ParseOption("ro,rw");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->fuse_options, (Strings{"ro", "rw"}));
}

TEST(MountOptionTest, FuseOptionsPassUnchanged) {
  absl::StatusOr<MountOptions> options = ParseOption(
      "allow_other,allow_root,auto_unmount,suid,nosuid,dev,nodev,exec,noexec,sync,async,dirsync");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->fuse_options,
            (Strings{"allow_other", "allow_root", "auto_unmount", "suid", "nosuid", "dev", "nodev",
                     "exec", "noexec", "sync", "async", "dirsync"}));
}

TEST(MountOptionTest, DefaultPermissionsIsNotForwardedTwice) {
  absl::StatusOr<MountOptions> options = ParseOption("default_permissions");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->fuse_options, Strings());
}

// libfuse fails such a mount once it is up unless init repeats the value,
// which cudafs does not: max_read= is refused whatever its value.
TEST(MountOptionTest, MaxReadIsRefused) {
  for (const char* option : {"max_read=131072", "max_read=4096", "max_read=abc", "max_read"}) {
    SCOPED_TRACE(option);
    EXPECT_EQ(OptionError(option),
              "option max_read= is not supported: cudafs sizes read requests itself");
  }
}

TEST(MountOptionTest, FsnameBecomesSource) {
  absl::StatusOr<MountOptions> options = ParseOption("fsname=scratch");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->source, "scratch");
  // The glue passes the source to libfuse; forwarding fsname= too would
  // name it twice.
  EXPECT_EQ(options->fuse_options, Strings());
}

TEST(MountOptionTest, FsnameWinsOverPositionalSource) {
  absl::StatusOr<MountOptions> options = Parse({"-o", "fsname=named", "positional", "/mnt/x"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->source, "named");

  options = Parse({"positional", "/mnt/x", "-o", "fsname=named"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->source, "named");
}

// libfuse splits -o lists at unescaped commas: a SOURCE "x,allow_other"
// must reach it as one fsname, not as fsname=x plus allow_other.
TEST(MountOptionTest, FsnameOptionEscapesCommasAndBackslashes) {
  EXPECT_EQ(FsnameOption("cudafs"), "fsname=cudafs");
  EXPECT_EQ(FsnameOption("x,subtype=evil"), "fsname=x\\,subtype=evil");
  EXPECT_EQ(FsnameOption("x,dev,suid"), "fsname=x\\,dev\\,suid");
  EXPECT_EQ(FsnameOption("a\\b\\"), "fsname=a\\\\b\\\\");
  EXPECT_EQ(FsnameOption("a\\101"), "fsname=a\\\\101") << "not an octal escape";
}

TEST(MountOptionTest, SubtypeIsRejected) {
  EXPECT_TRUE(Contains(OptionError("subtype=other"), "subtype="));
}

TEST(MountOptionTest, MountWordsAreDropped) {
  absl::StatusOr<MountOptions> options = ParseOption(
      "defaults,auto,noauto,nofail,_netdev,user,nouser,users,owner,group,comment=systemd.foo,"
      "comment,x-systemd.automount,x-gvfs-show,x-systemd.device-timeout=10");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->fuse_options, Strings());
}

TEST(MountOptionTest, UnknownOption) {
  EXPECT_EQ(OptionError("bogus"), "unknown option \"bogus\"");
  EXPECT_EQ(OptionError("bogus=1"), "unknown option \"bogus\"");
  EXPECT_EQ(OptionError("nodefault_permissions"), "unknown option \"nodefault_permissions\"");
  // Names are exact: no case folding, no prefixes.
  EXPECT_EQ(OptionError("RO"), "unknown option \"RO\"");
  EXPECT_EQ(OptionError("sizes=1g"), "unknown option \"sizes\"");
}

TEST(MountOptionTest, FlagWithValueIsNamed) {
  EXPECT_TRUE(Contains(OptionError("ro=1"), "\"ro\""));
  EXPECT_TRUE(Contains(OptionError("allow_other="), "\"allow_other\""));
  EXPECT_TRUE(Contains(OptionError("nofail=yes"), "\"nofail\""));
}

TEST(MountOptionTest, ErrorsStayOnOneLine) {
  EXPECT_EQ(OptionError("bo\ngus"), "unknown option \"bo\\ngus\"");
  EXPECT_EQ(OptionError("size=1\n"),
            "bad value for size=: \"1\\n\" (expected bytes with an optional k/m/g/t/p/e suffix "
            "or a percentage)");
}

TEST(MountOptionTest, EveryErrorNamesTheOption) {
  const struct {
    const char* option;
    const char* name;
  } kCases[] = {
      {"size=x", "size="},      {"nr_inodes=x", "nr_inodes="},
      {"mode=x", "mode="},      {"uid=x", "uid="},
      {"gid=x", "gid="},        {"backend=x", "backend="},
      {"device=x!", "device="}, {"min_block=x", "min_block="},
      {"fsname=", "fsname="},   {"max_read=x", "max_read="},
      {"subtype=x", "subtype"}, {"ro=x", "ro"},
      {"x", "\"x\""},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.option);
    EXPECT_TRUE(Contains(OptionError(c.option), c.name));
  }
}

TEST(ParseByteCountTest, Accepts) {
  const struct {
    const char* text;
    uint64_t bytes;
  } kCases[] = {
      {"0", 0},
      {"4096", 4096},
      {"007", 7},
      {"1k", 1 << 10},
      {"1K", 1 << 10},
      {"64k", 64 << 10},
      {"3m", 3 << 20},
      {"8G", uint64_t{8} << 30},
      {"1t", uint64_t{1} << 40},
      {"2P", uint64_t{2} << 50},
      {"15e", uint64_t{15} << 60},
      {"0e", 0},
      {"18446744073709551615", std::numeric_limits<uint64_t>::max()},
      {"17179869183g", (uint64_t{17179869183}) << 30},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.text);
    absl::StatusOr<uint64_t> bytes = ParseByteCount(c.text);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_EQ(*bytes, c.bytes);
  }
}

TEST(ParseByteCountTest, RejectsMalformed) {
  for (const char* text : {"", "k", "-1", "+1", " 1", "1 ", "1.5", "1.5g", "0x10", "1kb", "1kk",
                           "1b", "1 k", "ten", "1_000", "%", "5%"}) {
    SCOPED_TRACE(text);
    absl::StatusOr<uint64_t> bytes = ParseByteCount(text);
    ASSERT_FALSE(bytes.ok());
    EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(ParseByteCountTest, RejectsOverflow) {
  for (const char* text : {"18446744073709551616", "99999999999999999999999", "16e", "16384p",
                           "17179869184g", "18014398509481984k"}) {
    SCOPED_TRACE(text);
    absl::StatusOr<uint64_t> bytes = ParseByteCount(text);
    ASSERT_FALSE(bytes.ok());
    EXPECT_EQ(bytes.status().code(), absl::StatusCode::kOutOfRange);
    EXPECT_TRUE(Contains(bytes.status().message(), "too large"));
  }
}

TEST(SizeSpecTest, Resolve) {
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  EXPECT_EQ((SizeSpec{.bytes = 12345, .percent = std::nullopt}).Resolve(80 * kGiB, 50), 12345u);
  EXPECT_EQ((SizeSpec{.bytes = std::nullopt, .percent = 25}).Resolve(80 * kGiB, 50), 20 * kGiB);
  EXPECT_EQ(SizeSpec().Resolve(80 * kGiB, 50), 40 * kGiB);
  // Truncated, never rounded up.
  EXPECT_EQ(SizeSpec().Resolve(3, 50), 1u);
  EXPECT_EQ((SizeSpec{.bytes = std::nullopt, .percent = 12.5}).Resolve(1001, 50), 125u);
  EXPECT_EQ((SizeSpec{.bytes = std::nullopt, .percent = 0.5}).Resolve(199, 50), 0u);
  // All of the largest possible device, exactly.
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ((SizeSpec{.bytes = std::nullopt, .percent = 100}).Resolve(kMax, 50), kMax);
  EXPECT_EQ(SizeSpec().Resolve(0, 50), 0u);
}

}  // namespace
}  // namespace cudafs
