#include "tests/support/processes.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_join.h"
#include "tests/support/fd.h"
#include "tests/support/file_io.h"

namespace cudafs_test {
namespace {

using namespace std::chrono_literals;

// The state letter of /proc/.../stat ('R', 'S', 'T', 'Z', ...), or nothing
// when the task is gone.
std::optional<char> TaskState(const std::string& proc_dir) {
  std::ifstream stat_file(proc_dir + "/stat");
  std::string stat;
  if (!std::getline(stat_file, stat)) return std::nullopt;
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return std::nullopt;
  return stat[paren + 2];
}

}  // namespace

std::optional<int> WaitForChild(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return status;
    if (done < 0 && errno != EINTR) return std::nullopt;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return std::nullopt;
    }
    std::this_thread::sleep_for(2ms);
  }
}

CommandResult RunCommand(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  CommandResult result;
  Fd out(memfd_create("stdout", MFD_CLOEXEC));
  Fd err(memfd_create("stderr", MFD_CLOEXEC));
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(out.get(), 1);
    dup2(err.get(), 2);
    execvp(args[0], args.data());
    dprintf(2, "exec %s: %s\n", args[0], strerror(errno));
    _exit(127);
  }
  const std::optional<int> status = WaitForChild(pid, timeout);
  result.out = ReadWholeFd(out.get());
  result.err = ReadWholeFd(err.get());
  if (!status) {
    result.err += "(timed out)\n";
  } else if (WIFEXITED(*status)) {
    result.exit_code = WEXITSTATUS(*status);
  }
  return result;
}

CommandResult RunShell(const std::string& script, std::chrono::milliseconds timeout) {
  return RunCommand({"/bin/sh", "-c", script}, timeout);
}

testing::AssertionResult ShellOk(const std::string& script, std::chrono::milliseconds timeout) {
  const CommandResult result = RunShell(script, timeout);
  if (result.exit_code == 0) return testing::AssertionSuccess();
  return testing::AssertionFailure()
         << "`" << script << "` exited " << result.exit_code << "\nstdout:\n"
         << result.out << "\nstderr:\n"
         << result.err;
}

bool HaveTool(const std::string& name) {
  return RunShell("command -v " + name + " >/dev/null").exit_code == 0;
}

std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

std::string Join(const std::vector<std::string>& parts, std::string_view separator) {
  return absl::StrJoin(parts, std::string(separator));
}

Errno RunAs(uid_t uid, gid_t gid, const std::function<Errno()>& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0 ||
        setresuid(uid, uid, uid) != 0) {
      _exit(255);
    }
    _exit(body().value);
  }
  const std::optional<int> status = WaitForChild(pid, 60s);
  if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) == 255) {
    return Errno{Errno::kNoResult};
  }
  return Errno{WEXITSTATUS(*status)};
}

pid_t StartAs(uid_t uid, gid_t gid, const std::function<void()>& body) {
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    if (setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0 ||
        setresuid(uid, uid, uid) != 0) {
      _exit(255);
    }
    body();
    (void)!write(ready[1], "x", 1);
    for (;;) pause();
  }
  close(ready[1]);
  char byte;
  const bool started = pid > 0 && read(ready[0], &byte, 1) == 1;
  close(ready[0]);
  if (started) return pid;
  if (pid > 0) WaitForChild(pid, 10s);
  return -1;
}

bool ProcessAlive(pid_t pid) {
  const std::optional<char> state = TaskState("/proc/" + std::to_string(pid));
  return state.has_value() && *state != 'Z';
}

bool AllThreadsStopped(pid_t pid) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code error;
  bool any = false;
  for (const auto& task : std::filesystem::directory_iterator(tasks, error)) {
    const std::optional<char> state = TaskState(task.path().string());
    if (state != 'T' && state != 't') return false;
    any = true;
  }
  return any && !error;
}

}  // namespace cudafs_test
