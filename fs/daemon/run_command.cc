#include "fs/daemon/run_command.h"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "fs/client/client_error.h"
#include "fs/client/room_request.h"

namespace cudafs {
namespace {

constexpr char kLibrary[] = "libcudafs_preload.so";

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "cudafs run: %s\nusage: cudafs run [-o MOUNTPOINT]... -- COMMAND [ARG...]\n",
               why.c_str());
  return 2;
}


// The interposer beside this binary: in the build tree, the binary's
// directory; installed, PREFIX/lib/cudafs. CUDAFS_PRELOAD_LIBRARY names
// another.
std::string InterposerPath() {
  if (const char* named = std::getenv("CUDAFS_PRELOAD_LIBRARY"); named != nullptr && *named) {
    return named;
  }
  char self[PATH_MAX];
  const ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
  if (length <= 0) return "";
  std::string directory(self, static_cast<size_t>(length));
  directory.erase(directory.rfind('/'));
  for (const std::string& candidate :
       {directory + "/" + kLibrary, directory + "/../lib/cudafs/" + kLibrary}) {
    if (access(candidate.c_str(), R_OK) != 0) continue;
    char resolved[PATH_MAX];
    return realpath(candidate.c_str(), resolved) != nullptr ? resolved : candidate;
  }
  return "";
}

}  // namespace

bool IsRunCommand(int argc, const char* const* argv) {
  if (argc < 3 || std::strcmp(argv[1], "run") != 0) return false;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) return true;
  }
  return false;
}

int RunCommand(int argc, const char* const* argv) {
  std::vector<std::string> mounts;
  int i = 2;
  for (; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    const absl::string_view arg = argv[i];
    if (arg != "-o") return Usage("unknown argument \"" + std::string(arg) + "\" before --");
    if (++i == argc || std::strcmp(argv[i], "--") == 0) return Usage("-o needs a MOUNTPOINT");
    client::CudafsMount mount;
    if (client::MountAt(argv[i], &mount) != 0) return Usage(client::LastError());
    if (mount.mountpoint.find(':') != std::string::npos) {
      return Usage(mount.mountpoint + ": a mount point with ':' cannot be named here");
    }
    mounts.push_back(mount.mountpoint);
  }
  if (++i >= argc) return Usage("no COMMAND after --");
  const std::string library = InterposerPath();
  if (library.empty()) {
    std::fprintf(stderr, "cudafs run: %s not found beside cudafs (set CUDAFS_PRELOAD_LIBRARY)\n",
                 kLibrary);
    return 127;
  }
  std::string preload = library;
  if (const char* others = std::getenv("LD_PRELOAD"); others != nullptr && *others) {
    const std::vector<absl::string_view> listed = absl::StrSplit(others, absl::ByAnyChar(": "));
    bool present = false;
    for (absl::string_view entry : listed) present = present || entry == library;
    preload = present ? others : library + ":" + others;
  }
  setenv("LD_PRELOAD", preload.c_str(), 1);
  if (mounts.empty()) {
    unsetenv("CUDAFS_ROOM_MOUNTS");
  } else {
    setenv("CUDAFS_ROOM_MOUNTS", absl::StrJoin(mounts, ":").c_str(), 1);
  }
  unsetenv("CUDAFS_MAKE_ROOM");
  execvp(argv[i], const_cast<char* const*>(argv + i));
  std::fprintf(stderr, "cudafs run: %s: %s\n", argv[i], std::strerror(errno));
  return 127;
}

}  // namespace cudafs
