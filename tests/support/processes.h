// Other programs and processes, for tests that drive a daemon from outside:
// commands run with their output captured and a deadline, a body run under
// other credentials, and what /proc says of a process.
#ifndef CUDAFS_TESTS_SUPPORT_PROCESSES_H_
#define CUDAFS_TESTS_SUPPORT_PROCESSES_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/errno_check.h"

namespace cudafs_test {

struct CommandResult {
  int exit_code = -1;  // -1: killed by a signal or timed out
  std::string out;
  std::string err;
};

// Waits for a child; kills it after `timeout`. Returns the wait status, or
// nullopt when it had to be killed.
std::optional<int> WaitForChild(pid_t pid, std::chrono::milliseconds timeout);

// Runs argv[0] (searched in PATH) with stdin from /dev/null and returns its
// exit code and output. Output goes to memory files rather than pipes: a
// daemon that keeps inherited descriptors open must not make us wait.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         std::chrono::milliseconds timeout = std::chrono::seconds(120));
// `script` through /bin/sh -c.
CommandResult RunShell(const std::string& script,
                       std::chrono::milliseconds timeout = std::chrono::seconds(120));
// A command run through RunShell must exit 0; its output explains failures.
testing::AssertionResult ShellOk(const std::string& script,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(120));
// Whether /bin/sh finds `name`.
bool HaveTool(const std::string& name);

// `text` as one sh word.
std::string ShellQuote(const std::string& text);
// `parts` with `separator` between them (a command line, an option list).
std::string Join(const std::vector<std::string>& parts, std::string_view separator);

// Runs `body` in a child process with the given credentials (no
// supplementary groups) and returns its result. The child reports through
// its exit code, so `body` must return an errno value that fits (0..254).
Errno RunAs(uid_t uid, gid_t gid, const std::function<Errno()>& body);

// Runs `body` in a child process with the given credentials (no
// supplementary groups) and returns the child's pid once `body` has
// returned; the child then waits to be killed, keeping what it holds (an
// attacker's connections, say). -1 when the child failed before that.
pid_t StartAs(uid_t uid, gid_t gid, const std::function<void()>& body);

// True while `pid` exists and is not a zombie.
bool ProcessAlive(pid_t pid);
// True once every thread of `pid` has entered the group stop. kill(SIGSTOP)
// returns before that: the threads stop one by one as each next runs, and
// until then they go on serving requests.
bool AllThreadsStopped(pid_t pid);

}  // namespace cudafs_test

#endif  // CUDAFS_TESTS_SUPPORT_PROCESSES_H_
