// Real programs on a mounted cudafs: tar, git, and a CMake build. They use
// the filesystem the way people do (many small files, renames over existing
// files, mtime comparisons, executables, symlinks), so they catch what
// targeted tests miss.
//
// Each workload skips, saying so, when its tools are missing.
#include <stdlib.h>

#include <chrono>
#include <optional>
#include <string>

#include "tests/mount/mount.h"
#include "tests/mount/mount_fixture.h"
#include "tests/support/errno_check.h"
#include "tests/support/file_io.h"
#include "tests/support/processes.h"
#include "tests/support/temp_dir.h"
#include "tests/support/timestamps.h"

namespace cudafs_test {

using namespace std::chrono_literals;

namespace {

// One line per entry below `dir`: path, type and permissions, size (files
// only: directory sizes differ between filesystems), symlink target and,
// except for symlinks, the mtime in whole seconds (what tar keeps).
std::optional<std::string> TreeListing(const std::string& dir) {
  const CommandResult result = RunShell(
      "cd " + ShellQuote(dir) +
      " && find . -mindepth 1 \\( -type d -printf '%p %M\\n' \\) -o \\( -type l -printf '%p %M -> %l\\n' \\)"
      " -o -printf '%p %M %s %TY-%Tm-%Td.%TH:%TM:%TS\\n' | sed 's/\\.[0-9]*$//' | LC_ALL=C sort");
  if (result.exit_code != 0) return std::nullopt;
  return result.out;
}

class WorkloadTest : public FsTest {
 protected:
  // Skips the test when a tool is missing; callers return if IsSkipped().
  void SkipUnlessTools(std::initializer_list<const char*> tools) {
    for (const char* tool : tools) {
      if (!HaveTool(tool)) GTEST_SKIP() << "`" << tool << "` is not installed";
    }
  }
};

// Builds the tree to archive in `dir`: the repository's sources (or what
// CUDAFS_SOURCE_DIR names), /usr/include/linux when present, and entries
// that exercise modes, symlinks, empty directories, holes and a large file.
void BuildSourceTree(const std::string& dir) {
  const char* env_source = getenv("CUDAFS_SOURCE_DIR");
  std::string copy_sources;
  if (env_source != nullptr && *env_source != '\0') {
    copy_sources = "tar -C " + ShellQuote(env_source) + " -cf - . | tar -C src -xpf -";
  } else {
    // Not the whole checkout: build directories there change while we run.
    copy_sources = "tar -C " + ShellQuote(kSourceDir) + " -cf - alloc fs tests CMakeLists.txt" +
                   " | tar -C src -xpf -";
  }
  if (access("/usr/include/linux", R_OK) == 0) {
    copy_sources += " && tar -C /usr/include -cf - linux | tar -C src -xpf -";
  }
  ASSERT_TRUE(ShellOk("set -e; cd " + ShellQuote(dir) + "; mkdir src; " + copy_sources +
                      "; cd src; mkdir -p special/empty special/deep/a/b/c;"
                      " printf '#!/bin/sh\\necho hi\\n' > special/script.sh;"
                      " chmod 755 special/script.sh;"
                      " echo secret > special/private; chmod 600 special/private;"
                      " echo shared > special/group-writable; chmod 664 special/group-writable;"
                      " ln -s script.sh special/relative-link;"
                      " ln -s ../special/deep/a special/dir-link;"
                      " ln -s /nonexistent/target special/dangling-link;"
                      " head -c 3145728 /dev/urandom > special/large.bin;"
                      " truncate -s 5M special/sparse; printf x >> special/sparse;"
                      " : > special/empty-file;"
                      " chmod 750 special/deep"));
}

TEST_P(WorkloadTest, TarInAndOutPreservesTree) {
  SkipUnlessTools({"tar", "diff", "find"});
  if (IsSkipped()) return;
  TempDir scratch;
  ASSERT_FALSE(scratch.path().empty());
  BuildSourceTree(scratch.path());
  if (HasFatalFailure()) return;
  const std::string reference = scratch.path() + "/src";
  const std::string on_fs = Path("tree");
  const std::string out = scratch.path() + "/out";
  ASSERT_SYS_OK(mkdir(on_fs.c_str(), 0755));
  ASSERT_SYS_OK(mkdir(out.c_str(), 0755));

  // Into the filesystem, then back out through a second archive.
  ASSERT_TRUE(ShellOk("tar -C " + ShellQuote(reference) + " -cf - . | tar -C " + ShellQuote(on_fs) +
                      " -xpf -"));
  ASSERT_TRUE(ShellOk("tar -C " + ShellQuote(on_fs) + " -cf " + ShellQuote(root() + "/tree.tar") + " ."));
  ASSERT_TRUE(ShellOk("tar -C " + ShellQuote(out) + " -xpf " + ShellQuote(root() + "/tree.tar")));

  EXPECT_TRUE(ShellOk("diff -r --no-dereference " + ShellQuote(reference) + " " + ShellQuote(on_fs)));
  EXPECT_TRUE(ShellOk("diff -r --no-dereference " + ShellQuote(reference) + " " + ShellQuote(out)));
  const std::optional<std::string> expected = TreeListing(reference);
  ASSERT_TRUE(expected.has_value());
  EXPECT_EQ(TreeListing(on_fs), expected);
  EXPECT_EQ(TreeListing(out), expected);
  // The listing is not vacuous: it has the sources and the special entries.
  EXPECT_NE(expected->find("./special/relative-link lrwxrwxrwx -> script.sh"), std::string::npos);
  EXPECT_NE(expected->find("./special/script.sh -rwxr-xr-x"), std::string::npos);
  EXPECT_NE(expected->find("./special/private -rw-------"), std::string::npos);
  EXPECT_NE(expected->find("./special/deep drwxr-x---"), std::string::npos);
}

// git with identity and configuration of its own, whatever the machine has.
std::string Git(const std::string& repo, const std::string& args) {
  return "env HOME=/nonexistent GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null"
         " GIT_AUTHOR_NAME=cudafs GIT_AUTHOR_EMAIL=cudafs@example.com"
         " GIT_COMMITTER_NAME=cudafs GIT_COMMITTER_EMAIL=cudafs@example.com git -C " +
         ShellQuote(repo) + " " + args;
}

TEST_P(WorkloadTest, GitRepositoryWorks) {
  SkipUnlessTools({"git", "diff"});
  if (IsSkipped()) return;
  const std::string repo = Path("repo");
  ASSERT_TRUE(ShellOk("git init -q " + ShellQuote(repo)));
  ASSERT_TRUE(WriteFile(repo + "/README", "first version\n"));
  ASSERT_SYS_OK(mkdir((repo + "/lib").c_str(), 0755));
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(WriteFile(repo + "/lib/file" + std::to_string(i) + ".txt",
                          RandomBytes(1000 + 997 * i, i)));
  }
  ASSERT_SYS_OK(symlink("README", (repo + "/link").c_str()));
  ASSERT_TRUE(ShellOk(Git(repo, "add -A")));
  ASSERT_TRUE(ShellOk(Git(repo, "commit -q -m 'initial commit'")));

  CommandResult status = RunShell(Git(repo, "status --porcelain"));
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_EQ(status.out, "");

  ASSERT_TRUE(WriteFile(repo + "/README", "second version\n"));
  ASSERT_SYS_OK(unlink((repo + "/lib/file3.txt").c_str()));
  ASSERT_TRUE(WriteFile(repo + "/new.txt", "untracked\n"));
  status = RunShell(Git(repo, "status --porcelain"));
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_EQ(status.out, " M README\n D lib/file3.txt\n?? new.txt\n");

  ASSERT_TRUE(ShellOk(Git(repo, "add -A")));
  ASSERT_TRUE(ShellOk(Git(repo, "commit -q -m 'second commit'")));
  const CommandResult log = RunShell(Git(repo, "log --format=%s"));
  ASSERT_EQ(log.exit_code, 0) << log.err;
  EXPECT_EQ(log.out, "second commit\ninitial commit\n");

  // The object store is intact, also after repacking (which renames packs
  // and deletes loose objects).
  EXPECT_TRUE(ShellOk(Git(repo, "fsck --strict --no-progress")));
  EXPECT_TRUE(ShellOk(Git(repo, "gc -q")));
  EXPECT_TRUE(ShellOk(Git(repo, "fsck --strict --no-progress")));
  const CommandResult old_readme = RunShell(Git(repo, "show HEAD~1:README"));
  EXPECT_EQ(old_readme.out, "first version\n") << old_readme.err;

  // A clone out of the mount checks out the same files.
  TempDir scratch;
  ASSERT_FALSE(scratch.path().empty());
  ASSERT_TRUE(ShellOk(Git(scratch.path(), "clone -q " + ShellQuote(repo) + " clone")));
  EXPECT_TRUE(ShellOk("diff -r --no-dereference --exclude=.git " + ShellQuote(repo) + " " +
                      ShellQuote(scratch.path() + "/clone")));
}

// Whether programs may run from `dir` (tmpfs on /dev/shm is often noexec).
bool AllowsExec(const std::string& dir) {
  const std::optional<struct statvfs> st = StatFs(dir);
  return st && (st->f_flag & ST_NOEXEC) == 0;
}

TEST_P(WorkloadTest, CMakeProjectBuildsAndRuns) {
  SkipUnlessTools({"cmake", "cc", "make"});
  if (IsSkipped()) return;
  const std::string project = Path("project");
  const std::string build = project + "/build";
  ASSERT_SYS_OK(mkdir(project.c_str(), 0755));
  ASSERT_TRUE(WriteFile(project + "/CMakeLists.txt",
                        "cmake_minimum_required(VERSION 3.10)\n"
                        "project(hello C)\n"
                        "add_library(greet STATIC greet.c)\n"
                        "add_executable(hello main.c)\n"
                        "target_link_libraries(hello greet)\n"));
  ASSERT_TRUE(WriteFile(project + "/greet.h", "int greeting_number(int n);\n"));
  const std::string greet_v1 =
      "#include \"greet.h\"\n"
      "int greeting_number(int n) { int sum = 0; for (int i = 1; i <= n; ++i) sum += i; "
      "return sum; }\n";
  ASSERT_TRUE(WriteFile(project + "/greet.c", greet_v1));
  ASSERT_TRUE(WriteFile(project + "/main.c",
                        "#include <stdio.h>\n"
                        "#include \"greet.h\"\n"
                        "int main(void) { printf(\"hello from cudafs: %d\\n\", "
                        "greeting_number(10)); return 0; }\n"));

  ASSERT_TRUE(ShellOk("cmake -S " + ShellQuote(project) + " -B " + ShellQuote(build) +
                      " -G 'Unix Makefiles' -DCMAKE_BUILD_TYPE=Release", 300s));
  ASSERT_TRUE(ShellOk("cmake --build " + ShellQuote(build), 300s));

  // Runs the built program, from a copy outside when the directory forbids
  // running programs.
  TempDir scratch;
  ASSERT_FALSE(scratch.path().empty());
  const auto run_hello = [&]() -> CommandResult {
    if (AllowsExec(build)) return RunCommand({build + "/hello"});
    const std::string copy = scratch.path() + "/hello";
    RunShell("cp " + ShellQuote(build + "/hello") + " " + ShellQuote(copy));
    return RunCommand({copy});
  };
  CommandResult hello = run_hello();
  EXPECT_EQ(hello.exit_code, 0) << hello.err;
  EXPECT_EQ(hello.out, "hello from cudafs: 55\n");

  // make decides what to rebuild from mtimes: an edited source rebuilds...
  SleepPastClockTick();
  std::string greet_v2 = greet_v1;
  greet_v2.replace(greet_v2.find("sum += i"), 8, "sum += i * i");
  ASSERT_TRUE(WriteFile(project + "/greet.c", greet_v2));
  const CommandResult rebuild = RunShell("cmake --build " + ShellQuote(build), 300s);
  ASSERT_EQ(rebuild.exit_code, 0) << rebuild.out << rebuild.err;
  EXPECT_NE(rebuild.out.find("greet.c"), std::string::npos) << rebuild.out;
  hello = run_hello();
  EXPECT_EQ(hello.exit_code, 0) << hello.err;
  EXPECT_EQ(hello.out, "hello from cudafs: 385\n");

  // ... and an unchanged tree compiles nothing.
  const CommandResult nothing = RunShell("cmake --build " + ShellQuote(build), 300s);
  ASSERT_EQ(nothing.exit_code, 0) << nothing.out << nothing.err;
  EXPECT_EQ(nothing.out.find("Building C object"), std::string::npos) << nothing.out;
}

CUDAFS_INSTANTIATE_BACKENDS(WorkloadTest);

}  // namespace
}  // namespace cudafs_test
