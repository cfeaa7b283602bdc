// survive=on (fs/daemon/keeper.h): the daemon killed with SIGKILL, at any
// moment and as often as one likes, and its keeper's successor serves on
// with every file, attribute, link and byte acknowledged before the kill;
// open descriptors and mappings go on working, requests in flight are
// served by the successor without an error, successors killed as they
// start are replaced too; the keeper's own death leaves the daemon
// serving, and an unmount ends the keeper. On host memory and on GPUs (the
// option refuses the rest, which this checks too).
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/mount/mount.h"
#include "tests/mount/mount_fixture.h"
#include "tests/support/eventually.h"
#include "tests/support/fd.h"
#include "tests/support/file_io.h"
#include "tests/support/processes.h"
#include "tests/support/temp_dir.h"

namespace cudafs_test {
namespace {

using namespace std::chrono_literals;

// The daemon serving `mountpoint`, as its root says (the request waits
// for a successor while there is none).
std::optional<pid_t> DaemonOf(const std::string& mountpoint) {
  char value[32] = {};
  const ssize_t n = getxattr(mountpoint.c_str(), "user.cudafs.daemon", value, sizeof value - 1);
  if (n <= 0) return std::nullopt;
  return static_cast<pid_t>(std::atoi(value));
}

// Processes whose command line names `mountpoint`: the keeper
// (`cudafs-keeper MOUNTPOINT`) and daemons, a successor starting included.
std::vector<pid_t> ProcessesOf(const std::string& mountpoint, bool keeper) {
  std::vector<pid_t> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* entry = readdir(proc)) {
    const pid_t pid = std::atoi(entry->d_name);
    if (pid <= 0) continue;
    std::ifstream file("/proc/" + std::string(entry->d_name) + "/cmdline", std::ios::binary);
    std::vector<std::string> argv;
    for (std::string argument; std::getline(file, argument, '\0');) argv.push_back(argument);
    if (argv.size() < 2) continue;
    const bool is_keeper = argv[0] == "cudafs-keeper";
    bool names = false;
    for (size_t i = 1; i < argv.size(); ++i) names = names || argv[i] == mountpoint;
    if (names && is_keeper == keeper && (keeper || argv[0].find("cudafs") != std::string::npos)) {
      found.push_back(pid);
    }
  }
  closedir(proc);
  return found;
}

// Everything a user sees below `root`, by path: the stat fields that do
// not move by themselves (atime aside), the bytes, a link's target, the
// extended attributes.
std::map<std::string, std::string> Snapshot(const std::string& root) {
  static std::map<std::string, std::string>* seen;
  static size_t prefix;
  std::map<std::string, std::string> result;
  seen = &result;
  prefix = root.size();
  nftw(
      root.c_str(),
      [](const char* path, const struct stat* st, int, FTW*) {
        std::ostringstream out;
        out << "ino " << st->st_ino << " mode " << std::oct << st->st_mode << std::dec
            << " nlink " << st->st_nlink << " uid " << st->st_uid << " gid " << st->st_gid
            << " size " << st->st_size << " m " << st->st_mtim.tv_sec << "."
            << st->st_mtim.tv_nsec << " c " << st->st_ctim.tv_sec << "." << st->st_ctim.tv_nsec;
        if (S_ISREG(st->st_mode)) {
          out << " data " << std::hash<std::string>()(ReadFile(path).value_or("?"));
        } else if (S_ISLNK(st->st_mode)) {
          char target[4096];
          const ssize_t n = readlink(path, target, sizeof target);
          out << " target " << std::string(target, n > 0 ? n : 0);
        }
        char names[4096];
        const ssize_t n = llistxattr(path, names, sizeof names);
        for (ssize_t at = 0; at < n; at += std::strlen(names + at) + 1) {
          char value[256];
          const ssize_t v = lgetxattr(path, names + at, value, sizeof value);
          out << " xattr " << names + at << "=" << std::string(value, v > 0 ? v : 0);
        }
        (*seen)[std::string(path).substr(prefix)] = out.str();
        return 0;
      },
      16, FTW_PHYS);
  return result;
}

// On host memory, and on GPUs (fake ones without a GPU: their memory is
// memfds, which outlive the daemon as a real GPU's exported memory does).
class SurviveTest : public BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    if (IsSkipped()) return;
    if (const char* options = getenv("CUDAFS_TEST_MOUNT_OPTIONS");
        options != nullptr && std::string(options).find("uring=on") != std::string::npos) {
      GTEST_SKIP() << "survive=on serves over /dev/fuse only";
    }
    std::vector<std::string> options = {"backend=" + backend(), "survive=on", "size=256m",
                                        "allow_other"};
    if (backend() == "cuda") options.push_back("spill=0");
    StartOrSkip(mount_, options);
    path_ = mount_.path();
  }

  std::string Path(const std::string& relative) const { return path_ + "/" + relative; }

  // Kills the daemon with SIGKILL and waits until a successor serves;
  // returns it.
  pid_t KillAndAwaitSuccessor() {
    const std::optional<pid_t> daemon = DaemonOf(path_);
    EXPECT_TRUE(daemon.has_value());
    if (!daemon) return 0;
    EXPECT_EQ(kill(*daemon, SIGKILL), 0);
    EXPECT_TRUE(Eventually([&] { return !ProcessAlive(*daemon); }, 10s));
    std::optional<pid_t> successor;
    EXPECT_TRUE(Eventually(
        [&] {
          successor = DaemonOf(path_);
          return successor && *successor != *daemon && ProcessAlive(*successor);
        },
        30s));
    return successor.value_or(0);
  }

  Mount mount_;
  std::string path_;
};

// One of everything a filesystem holds, a descriptor held open on a file
// with no name and a shared mapping: all as they were after the kill.
TEST_P(SurviveTest, KillNineLosesNothing) {
  ASSERT_EQ(mkdir(Path("dir").c_str(), 02775), 0);
  ASSERT_EQ(mkdir(Path("dir/sub").c_str(), 0700), 0);
  ASSERT_TRUE(WriteFile(Path("small"), "hello, keeper"));
  ASSERT_TRUE(WriteFile(Path("dir/large"), RandomBytes(20 << 20, 1)));
  {
    Fd sparse(open(Path("dir/sub/sparse").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_TRUE(WriteAll(sparse.get(), RandomBytes(5000, 2), 100 << 20));
  }
  ASSERT_TRUE(WriteFile(Path("dir/linked"), RandomBytes(70000, 3)));
  ASSERT_EQ(link(Path("dir/linked").c_str(), Path("dir/sub/second name").c_str()), 0);
  ASSERT_EQ(symlink("dir/large", Path("short link").c_str()), 0);
  ASSERT_EQ(symlink(std::string(3000, 'x').c_str(), Path("dir/long link").c_str()), 0);
  ASSERT_EQ(mkfifo(Path("fifo").c_str(), 0600), 0);
  ASSERT_EQ(setxattr(Path("dir/linked").c_str(), "user.colour", "blue", 4, 0), 0);
  ASSERT_EQ(chown(Path("dir/linked").c_str(), 1000, 100), 0);
  const timespec times[2] = {{1000000000, 5}, {1234567890, 123456789}};
  ASSERT_EQ(utimensat(AT_FDCWD, Path("dir/linked").c_str(), times, 0), 0);
  ASSERT_EQ(truncate(Path("dir/large").c_str(), (7 << 20) + 5), 0);
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(WriteFile(Path("dir/sub/f" + std::to_string(i)), RandomBytes(i * 97, i)));
  }
  for (int i = 0; i < 200; i += 3) ASSERT_EQ(unlink(Path("dir/sub/f" + std::to_string(i)).c_str()), 0);
  ASSERT_EQ(rename(Path("dir/sub/f1").c_str(), Path("moved").c_str()), 0);
  Fd nameless(open(Path("nameless").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_TRUE(WriteAll(nameless.get(), "no name, still open", 0));
  ASSERT_EQ(unlink(Path("nameless").c_str()), 0);
  Fd mapped(open(Path("mapped").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_EQ(ftruncate(mapped.get(), 1 << 20), 0);
  char* map = static_cast<char*>(
      mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, mapped.get(), 0));
  ASSERT_NE(map, MAP_FAILED);
  std::memset(map, 'a', 1 << 20);
  ASSERT_EQ(msync(map, 1 << 20, MS_SYNC), 0);
  Snapshot(path_);  // moves the atimes reading moves
  const std::map<std::string, std::string> before = Snapshot(path_);
  ASSERT_GT(before.size(), 140u);

  KillAndAwaitSuccessor();
  EXPECT_EQ(Snapshot(path_), before);
  // The descriptors and the mapping go on working, against the successor.
  EXPECT_EQ(ReadAt(nameless.get(), 0, 19).value_or(""), "no name, still open");
  ASSERT_TRUE(WriteAll(nameless.get(), "written after", 100));
  EXPECT_EQ(ReadAt(nameless.get(), 100, 13).value_or(""), "written after");
  std::memset(map + 4096, 'b', 4096);
  ASSERT_EQ(msync(map, 1 << 20, MS_SYNC), 0);
  ASSERT_EQ(munmap(map, 1 << 20), 0);
  std::string expected(1 << 20, 'a');
  std::memset(expected.data() + 4096, 'b', 4096);
  EXPECT_TRUE(BytesEqual(ReadStored(Path("mapped")).value_or(""), expected));
}

// A writer that keeps a model of what it did, while the daemon is killed
// again and again under it: no call fails, and the files are the model.
TEST_P(SurviveTest, AWriterSeesNoErrorAcrossKillsAndFindsWhatItWrote) {
  std::map<std::string, std::string> model;  // file -> bytes
  std::atomic<bool> stop{false};
  std::vector<std::string> errors;
  ASSERT_EQ(mkdir(Path("w").c_str(), 0755), 0);
  std::thread writer([&] {
    std::mt19937 random(7);
    for (int i = 0; !stop || i < 200; ++i) {
      const std::string name = Path("w/f" + std::to_string(random() % 60));
      const auto fail = [&](const std::string& what) {
        errors.push_back(what + " " + name + ": " + std::strerror(errno));
      };
      switch (random() % 6) {
        case 0:
        case 1: {
          const std::string bytes = RandomBytes(random() % 70000, i);
          if (!WriteFile(name, bytes)) fail("write");
          model[name] = bytes;
          break;
        }
        case 2:
          if (unlink(name.c_str()) != 0 && errno != ENOENT) fail("unlink");
          model.erase(name);
          break;
        case 3: {
          const std::string to = Path("w/f" + std::to_string(random() % 60));
          const bool exists = model.count(name) != 0;
          if (rename(name.c_str(), to.c_str()) != 0 && (exists || errno != ENOENT)) fail("rename");
          if (exists && to != name) {
            model[to] = model[name];
            model.erase(name);
          }
          break;
        }
        case 4: {
          if (!model.count(name)) break;
          const size_t size = random() % 90000;
          if (truncate(name.c_str(), static_cast<off_t>(size)) != 0) fail("truncate");
          model[name].resize(size, '\0');
          break;
        }
        default: {
          if (!model.count(name)) break;
          const int fd = open(name.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
          const std::string bytes = "appended " + std::to_string(i) + "\n";
          if (fd < 0 || write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
            fail("append");
          }
          if (fd >= 0) close(fd);
          model[name] += bytes;
          break;
        }
      }
    }
  });
  for (int kill_round = 0; kill_round < 8; ++kill_round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + 40 * kill_round));
    KillAndAwaitSuccessor();
  }
  stop = true;
  writer.join();
  EXPECT_TRUE(errors.empty()) << errors.size() << " calls failed, the first: " << errors.front();
  const std::optional<std::vector<std::string>> names = ListDir(Path("w"));
  ASSERT_TRUE(names.has_value());
  size_t listed = 0;
  for (const std::string& name : *names) {
    if (name == "." || name == "..") continue;
    ++listed;
    EXPECT_TRUE(model.count(Path("w/" + name))) << "not in the model: " << name;
  }
  EXPECT_EQ(listed, model.size());
  for (const auto& [name, bytes] : model) {
    EXPECT_TRUE(BytesEqual(ReadStored(name).value_or("<missing>"), bytes)) << name;
  }
}

// tar extracting a tree while the daemon is killed four times: tar sees
// no error, and the tree is its source's.
TEST_P(SurviveTest, UntarAcrossKillsMatchesItsSource) {
  if (!HaveTool("tar") || !HaveTool("diff")) GTEST_SKIP() << "needs tar and diff";
  TempDir source;
  ASSERT_FALSE(source.path().empty());
  ASSERT_TRUE(ShellOk("cd " + ShellQuote(source.path()) +
                      " && mkdir -p tree && cd tree && "
                      "for d in $(seq 1 20); do mkdir -p d$d/e; "
                      "for f in $(seq 1 40); do head -c $((f * 131 + d)) /dev/urandom > d$d/e/f$f; "
                      "done; ln -s e/f1 d$d/link; ln d$d/e/f2 d$d/hard; done"));
  ASSERT_TRUE(ShellOk("cd " + ShellQuote(source.path()) + " && tar cf tree.tar tree"));
  std::atomic<bool> done{false};
  CommandResult untar;
  std::thread extractor([&] {
    untar = RunCommand({"tar", "-xf", source.path() + "/tree.tar", "-C", path_}, 300s);
    done = true;
  });
  for (int round = 0; round < 4 && !done; ++round) {
    std::this_thread::sleep_for(120ms);
    KillAndAwaitSuccessor();
  }
  extractor.join();
  EXPECT_EQ(untar.exit_code, 0) << untar.err;
  const CommandResult diff =
      RunCommand({"diff", "-r", "--no-dereference", source.path() + "/tree", Path("tree")});
  EXPECT_EQ(diff.exit_code, 0) << diff.out << diff.err;
}

// Successors killed as soon as they appear, three in a row: the keeper
// starts another each time, and the files survive them all.
TEST_P(SurviveTest, KillsDuringRecoveryAreSurvivedToo) {
  ASSERT_TRUE(WriteFile(Path("kept"), RandomBytes(3 << 20, 9)));
  ASSERT_EQ(mkdir(Path("d").c_str(), 0755), 0);
  const std::map<std::string, std::string> before = Snapshot(path_);
  const std::optional<pid_t> first = DaemonOf(path_);
  ASSERT_TRUE(first.has_value());
  ASSERT_EQ(kill(*first, SIGKILL), 0);
  std::vector<pid_t> killed = {*first};
  for (int round = 0; round < 3; ++round) {
    // The next successor, as soon as it is there.
    std::vector<pid_t> starting;
    ASSERT_TRUE(Eventually(
        [&] {
          starting.clear();
          for (pid_t pid : ProcessesOf(path_, /*keeper=*/false)) {
            if (std::find(killed.begin(), killed.end(), pid) == killed.end()) {
              starting.push_back(pid);
            }
          }
          return !starting.empty();
        },
        30s));
    for (pid_t pid : starting) {
      kill(pid, SIGKILL);
      killed.push_back(pid);
    }
  }
  std::optional<pid_t> serving;
  ASSERT_TRUE(Eventually(
      [&] {
        serving = DaemonOf(path_);
        return serving && std::find(killed.begin(), killed.end(), *serving) == killed.end();
      },
      60s));
  EXPECT_EQ(Snapshot(path_), before);
}

// A journal that outgrows its checkpoint has the daemon pause between
// requests and write a new one; the test asks for one every 64 KiB, so
// hundreds come while a writer works, and a kill after them finds every
// file.
TEST_P(SurviveTest, CheckpointsPauseNothingAndAKillAfterThemLosesNothing) {
  ASSERT_TRUE(mount_.Unmount());
  setenv("CUDAFS_TEST_CHECKPOINT_BYTES", "65536", 1);
  const testing::AssertionResult started =
      mount_.Start({"backend=host", "survive=on", "size=256m", "allow_other"});
  unsetenv("CUDAFS_TEST_CHECKPOINT_BYTES");
  ASSERT_TRUE(started);
  path_ = mount_.path();
  ASSERT_EQ(mkdir(Path("d").c_str(), 0755), 0);
  for (int i = 0; i < 3000; ++i) {
    ASSERT_TRUE(WriteFile(Path("d/f" + std::to_string(i)), std::to_string(i)));
    if (i % 3 == 0) {
      ASSERT_EQ(unlink(Path("d/f" + std::to_string(i)).c_str()), 0);
    }
  }
  const std::map<std::string, std::string> before = Snapshot(path_);
  KillAndAwaitSuccessor();
  EXPECT_EQ(Snapshot(path_), before);
  ASSERT_TRUE(WriteFile(Path("d/after"), "after"));
  KillAndAwaitSuccessor();
  EXPECT_EQ(ReadFile(Path("d/after")).value_or(""), "after");
  EXPECT_EQ(ReadFile(Path("d/f2999")).value_or(""), "2999");
}

// The keeper killed: the daemon serves on, without it, and an unmount
// ends the daemon as ever; nothing of the mount's is left running.
TEST_P(SurviveTest, TheKeepersDeathLeavesTheDaemonServing) {
  ASSERT_TRUE(WriteFile(Path("f"), "before"));
  const std::vector<pid_t> keepers = ProcessesOf(path_, /*keeper=*/true);
  ASSERT_EQ(keepers.size(), 1u);
  ASSERT_EQ(kill(keepers[0], SIGKILL), 0);
  ASSERT_TRUE(Eventually([&] { return !ProcessAlive(keepers[0]); }, 10s));
  ASSERT_TRUE(WriteFile(Path("g"), "after"));
  EXPECT_EQ(ReadFile(Path("f")).value_or(""), "before");
  const std::optional<pid_t> daemon = DaemonOf(path_);
  ASSERT_TRUE(daemon.has_value());
  EXPECT_TRUE(mount_.Unmount());
  EXPECT_TRUE(Eventually([&] { return !ProcessAlive(*daemon); }, 10s));
}

// `cudafs --upgrade` hands a survive=on mount to a new daemon, which
// starts a keeper of its own (the old one ends): a crash after the
// upgrade is survived as before it, by the new daemon's keeper.
TEST_P(SurviveTest, AnUpgradedMountSurvivesACrash) {
  ASSERT_TRUE(WriteFile(Path("before"), "written before the upgrade"));
  const std::vector<pid_t> old_keepers = ProcessesOf(path_, /*keeper=*/true);
  ASSERT_EQ(old_keepers.size(), 1u);
  const CommandResult upgrade = RunCommand({kBinary, "--upgrade", path_}, 90s);
  ASSERT_EQ(upgrade.exit_code, 0) << upgrade.err;
  EXPECT_TRUE(Eventually([&] { return !ProcessAlive(old_keepers[0]); }, 10s));
  std::vector<pid_t> keepers;
  EXPECT_TRUE(Eventually(
      [&] {
        keepers = ProcessesOf(path_, /*keeper=*/true);
        return keepers.size() == 1 && keepers[0] != old_keepers[0];
      },
      10s))
      << keepers.size() << " keepers";
  ASSERT_TRUE(WriteFile(Path("after"), "written after it"));
  KillAndAwaitSuccessor();
  EXPECT_EQ(ReadFile(Path("before")).value_or(""), "written before the upgrade");
  EXPECT_EQ(ReadFile(Path("after")).value_or(""), "written after it");
}

TEST_P(SurviveTest, AnUnmountEndsTheKeeper) {
  const std::vector<pid_t> keepers = ProcessesOf(path_, /*keeper=*/true);
  ASSERT_EQ(keepers.size(), 1u);
  ASSERT_TRUE(WriteFile(Path("f"), "x"));
  EXPECT_TRUE(mount_.Unmount());
  EXPECT_TRUE(Eventually([&] { return !ProcessAlive(keepers[0]); }, 10s));
}

// The keeper holds a GPU's memory as the daemon maps it, and lets go of
// what the daemon releases: deleted files give their memory back, before
// a crash and after one (pieces the successor took over), and a kill in
// between loses nothing.
TEST_P(SurviveTest, TheKeeperHoldsTheGpuMemoryTheDaemonHoldsAndNoMore) {
  if (backend() != "cuda") GTEST_SKIP() << "host memory is one memfd, held whole";
  const std::vector<pid_t> keepers = ProcessesOf(path_, /*keeper=*/true);
  ASSERT_EQ(keepers.size(), 1u);
  // The fake GPUs' memory is memfds named so; a real GPU's exported
  // memory is a descriptor of the driver's control device, as are others
  // the keeper may hold: counted from where they stand before any file.
  const auto descriptors = [&] {
    int found = 0;
    const std::string fds = "/proc/" + std::to_string(keepers[0]) + "/fd/";
    DIR* dir = opendir(fds.c_str());
    while (dir != nullptr) {
      const dirent* entry = readdir(dir);
      if (entry == nullptr) break;
      char target[256] = {};
      if (readlink((fds + entry->d_name).c_str(), target, sizeof target - 1) > 0 &&
          (std::strstr(target, "vram") != nullptr || std::strstr(target, "nvidia") != nullptr)) {
        ++found;
      }
    }
    if (dir != nullptr) closedir(dir);
    return found;
  };
  const int before = descriptors();
  const auto held = [&] { return descriptors() - before; };
  ASSERT_TRUE(WriteFile(Path("small"), "small"));  // a piece of 2 MiB
  ASSERT_TRUE(Eventually([&] { return held() >= 1; }, 10s));
  const int small = held();
  const std::string bytes = RandomBytes(96 << 20, 46);
  ASSERT_TRUE(WriteFile(Path("big"), bytes));
  EXPECT_TRUE(Eventually([&] { return held() >= small + 3; }, 10s))
      << held() << " pieces: 96 MiB is three of 32 MiB at least";
  KillAndAwaitSuccessor();
  EXPECT_TRUE(ReadFile(Path("big")).value_or("") == bytes);
  ASSERT_EQ(unlink(Path("big").c_str()), 0);
  EXPECT_TRUE(Eventually([&] { return held() == small; }, 10s))
      << held() << " pieces held for " << RunCommand({kBinary, "--stats", path_}).out;
  KillAndAwaitSuccessor();
  EXPECT_EQ(ReadFile(Path("small")).value_or(""), "small");
}

// What a successor could not take over is refused at mount time, saying
// why.
CUDAFS_INSTANTIATE_BACKENDS(SurviveTest);

TEST(SurviveOptionTest, WhatCannotSurviveIsRefused) {
  if (TestDirFromEnv()) GTEST_SKIP() << "needs a cudafs mount (CUDAFS_TEST_DIR is set)";
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const struct {
    const char* options;
    const char* says;
  } cases[] = {
      {"survive=on,backend=cuda", "spill=0"},
      {"survive=on,backend=cuda,spill=10%", "spill=0"},
      {"survive=on", "backend=cuda"},  // auto may land on a GPU that spills
      {"survive=on,backend=null", "backend=host"},
      {"survive=on,backend=host,cache=1m", "cache=0"},
      {"survive=on,backend=host,uring=on", "/dev/fuse"},
      {"survive=maybe,backend=host", "survive"},
  };
  for (const auto& c : cases) {
    const CommandResult result = RunCommand({kBinary, dir.path(), "-o", c.options}, 30s);
    EXPECT_EQ(result.exit_code, 2) << c.options;
    EXPECT_NE(result.err.find(c.says), std::string::npos) << c.options << ": " << result.err;
  }
}

}  // namespace
}  // namespace cudafs_test
