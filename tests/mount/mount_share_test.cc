// The share service (fs/share) through the client library (fs/client) and
// the raw protocol: private copies and shared mappings of a file mapped
// into this process, what they hold and how long they live, and who is
// refused. The CUDA instance checks what can be seen without touching GPU
// memory; the bytes on the GPU are checked by bench/share_gpu.py on the
// GPU machine.
#include <fcntl.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "fs/client/cudafs.h"
#include "tests/mount/mount.h"
#include "tests/mount/mount_fixture.h"
#include "tests/mount/mount_table.h"
#include "tests/support/errno_check.h"
#include "tests/support/eventually.h"
#include "tests/support/fd.h"
#include "tests/support/file_io.h"
#include "tests/support/processes.h"
#include "tests/support/raw_share_client.h"
#include "tests/support/timestamps.h"

namespace cudafs_test {

using namespace std::chrono_literals;

namespace {

using ShareTest = FsTest;

// A mapping that unmaps itself.
struct Mapped {
  ~Mapped() { cudafs_unmap(mapping); }
  cudafs_mapping* mapping = nullptr;
  std::string_view bytes() const {
    return {static_cast<const char*>(cudafs_mapping_pointer(mapping)),
            static_cast<size_t>(cudafs_mapping_size(mapping))};
  }
};

// python3 with the module, running `arguments`: the interpreter
// CUDAFS_TEST_PYTHON names (one of a virtual environment the package was
// pip-installed into, as tests/mount/python_package_test.sh does), else
// python3 with this tree's module and library, or the library
// CUDAFS_CLIENT_LIBRARY names (a copy on the GPU machine).
std::vector<std::string> Python(std::vector<std::string> arguments) {
  std::vector<std::string> command;
  const char* python = getenv("CUDAFS_TEST_PYTHON");
  if (python != nullptr && *python != '\0') {
    command = {python};
  } else {
    const char* library = getenv("CUDAFS_CLIENT_LIBRARY");
    command = {"env", std::string("PYTHONPATH=") + CUDAFS_PYTHON_DIR,
               std::string("CUDAFS_CLIENT_LIBRARY=") +
                   (library != nullptr && *library != '\0' ? library : CUDAFS_CLIENT_LIBRARY),
               "python3"};
  }
  command.insert(command.end(), arguments.begin(), arguments.end());
  return command;
}

TEST_P(ShareTest, MapsACopyOfWhatWasWrittenHolesAndCachedWritesIncluded) {
  SKIP_UNLESS_CUDAFS();
  if (backend() == "cuda" && OnFakeGpus()) GTEST_SKIP() << kNoCopiesOnFakeGpus;
  const std::string path = Path("f");
  std::string data = RandomBytes(5 << 20, 1);
  std::memset(data.data() + (1 << 20), 0, 2 << 20);  // a hole, below
  {
    Fd fd(open(path.c_str(), O_WRONLY | O_CREAT, 0644));
    ASSERT_TRUE(fd.valid());
    ASSERT_TRUE(WriteAll(fd.get(), std::string_view(data).substr(0, 1 << 20), 0));
    ASSERT_TRUE(WriteAll(fd.get(), std::string_view(data).substr(3 << 20), 3 << 20));
    // A small write, which the write-back cache holds: the map flushes it.
    ASSERT_TRUE(WriteAll(fd.get(), "tail", 5 << 20));
  }
  data += "tail";
  Mapped m;
  ASSERT_EQ(cudafs_map(path.c_str(), 0, &m.mapping), 0) << cudafs_last_error();
  EXPECT_EQ(cudafs_mapping_size(m.mapping), data.size());
  if (backend() == "cuda") {
    EXPECT_EQ(cudafs_mapping_memory(m.mapping), CUDAFS_MEMORY_CUDA);
    EXPECT_GE(cudafs_mapping_device(m.mapping), 0);
    EXPECT_EQ(cudafs_mapping_pointer(m.mapping), nullptr);
    return;
  }
  EXPECT_EQ(cudafs_mapping_memory(m.mapping), CUDAFS_MEMORY_HOST);
  EXPECT_TRUE(BytesEqual(m.bytes(), data));
  const std::map<std::string, std::string> stats = MountStats(root());
  EXPECT_EQ(stats.at("share_copies"), "1");
  EXPECT_EQ(stats.at("share_copied_bytes"), std::to_string(data.size()));
}

// A private copy: the file's later changes do not show in it, its own do
// not reach the file, and it outlives the file.
TEST_P(ShareTest, ACopyIsPrivateAndOutlivesTheFile) {
  SKIP_UNLESS_CUDAFS();
  if (backend() == "cuda") GTEST_SKIP() << "host memory only (see the file comment)";
  const std::string path = Path("f");
  const std::string data = RandomBytes(300000, 2);
  ASSERT_TRUE(WriteFile(path, data));
  Mapped m;
  ASSERT_EQ(cudafs_map(path.c_str(), 0, &m.mapping), 0) << cudafs_last_error();
  ASSERT_TRUE(WriteFile(path, "changed"));
  EXPECT_TRUE(BytesEqual(m.bytes(), data));
  static_cast<char*>(cudafs_mapping_pointer(m.mapping))[0] ^= 1;
  EXPECT_EQ(ReadFile(path), "changed");
  ASSERT_SYS_OK(unlink(path.c_str()));
  EXPECT_EQ(m.bytes().substr(1), std::string_view(data).substr(1));
}

// Many programs at once (more than the service's workers) each get their
// copy.
TEST_P(ShareTest, ConcurrentMapsEachGetTheirCopy) {
  SKIP_UNLESS_CUDAFS();
  if (backend() == "cuda" && OnFakeGpus()) GTEST_SKIP() << kNoCopiesOnFakeGpus;
  const std::string data = RandomBytes(256 << 10, 5);
  ASSERT_TRUE(WriteFile(Path("f"), data));
  std::vector<std::thread> threads;
  std::atomic<int> good = 0;
  for (int i = 0; i < 12; ++i) {
    threads.emplace_back([&] {
      for (int round = 0; round < 5; ++round) {
        Mapped m;
        if (cudafs_map(Path("f").c_str(), 0, &m.mapping) != 0) continue;
        if (cudafs_mapping_size(m.mapping) != data.size()) continue;
        if (backend() == "host" && m.bytes() != data) continue;
        ++good;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(good, 60);
}

// A daemon that dies (or a mount that goes away) leaves mappings valid,
// copies and shared ones alike.
TEST_P(ShareTest, MappingsOutliveTheDaemon) {
  SKIP_UNLESS_CUDAFS();
  if (backend() == "cuda" && OnFakeGpus()) GTEST_SKIP() << kNoCopiesOnFakeGpus;
  const std::string data = RandomBytes(3 << 20, 3);
  ASSERT_TRUE(WriteFile(Path("f"), data));
  Mapped copy;
  ASSERT_EQ(cudafs_map(Path("f").c_str(), 0, &copy.mapping), 0) << cudafs_last_error();
  Mapped shared;
  ASSERT_EQ(cudafs_map(Path("f").c_str(), CUDAFS_MAP_WRITABLE, &shared.mapping), 0)
      << cudafs_last_error();
  const std::optional<pid_t> daemon = mount().daemon();
  ASSERT_TRUE(daemon);
  ASSERT_SYS_OK(kill(*daemon, SIGKILL));
  EXPECT_TRUE(Eventually([&] { return !ProcessAlive(*daemon); }, 10s));
  if (backend() == "host") {
    EXPECT_TRUE(BytesEqual(copy.bytes(), data));
    EXPECT_TRUE(BytesEqual(shared.bytes(), data));
    static_cast<char*>(cudafs_mapping_pointer(shared.mapping))[0] ^= 1;  // still writable
  }
  EXPECT_LT(cudafs_sync(shared.mapping), 0) << "the mount is gone (ENOTCONN or ECONNABORTED)";
  mount().Unmount();
}

TEST_P(ShareTest, DescriptorsThatProveNothingAreRefused) {
  SKIP_UNLESS_CUDAFS();
  if (backend() == "cuda" && OnFakeGpus()) GTEST_SKIP() << kNoCopiesOnFakeGpus;
  ASSERT_TRUE(WriteFile(Path("f"), "data"));
  Mapped m;
  Fd path_only(open(Path("f").c_str(), O_PATH | O_CLOEXEC));
  ASSERT_TRUE(path_only.valid());
  EXPECT_EQ(cudafs_map_fd(path_only.get(), 0, &m.mapping), -EBADF) << cudafs_last_error();
  Fd write_only(open(Path("f").c_str(), O_WRONLY | O_CLOEXEC));
  EXPECT_EQ(cudafs_map_fd(write_only.get(), 0, &m.mapping), -EBADF) << cudafs_last_error();
  Fd other_filesystem(open("/proc/self/status", O_RDONLY | O_CLOEXEC));
  EXPECT_EQ(RawMap(ShareSocketOf(root()), other_filesystem.get(), 0), EXDEV)
      << "checked by the daemon itself";
  EXPECT_EQ(cudafs_map_fd(other_filesystem.get(), 0, &m.mapping), -EXDEV);
  Fd directory(open(root().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  EXPECT_EQ(RawMap(ShareSocketOf(root()), directory.get(), 0), EISDIR);
  ASSERT_TRUE(WriteFile(Path("empty"), ""));
  EXPECT_EQ(cudafs_map(Path("empty").c_str(), 0, &m.mapping), -EINVAL);
  // Shared: only with a descriptor open for reading and writing, and only
  // for files of a granule or more.
  EXPECT_EQ(cudafs_map(Path("f").c_str(), CUDAFS_MAP_WRITABLE, &m.mapping), -EINVAL);
  ASSERT_SYS_OK(truncate(Path("f").c_str(), 2 << 20));
  Fd read_only(open(Path("f").c_str(), O_RDONLY | O_CLOEXEC));
  EXPECT_EQ(RawMap(ShareSocketOf(root()), read_only.get(), cudafs::kShareWritable), EACCES)
      << "a writable mapping needs a descriptor open for writing";
  EXPECT_EQ(cudafs_map_fd(read_only.get(), CUDAFS_MAP_WRITABLE, &m.mapping), -EACCES);
  EXPECT_EQ(cudafs_map_fd(write_only.get(), CUDAFS_MAP_WRITABLE, &m.mapping), -EACCES);
  EXPECT_EQ(m.mapping, nullptr);
  // A copy has nothing to sync.
  Mapped copy;
  ASSERT_EQ(cudafs_map(Path("f").c_str(), 0, &copy.mapping), 0) << cudafs_last_error();
  EXPECT_EQ(cudafs_sync(copy.mapping), -EINVAL);
}

// Without allow_other, another user is refused even holding a descriptor
// the owner opened; with it, let in.
TEST_P(ShareTest, OtherUsersOnlyWithAllowOther) {
  SKIP_UNLESS_CUDAFS();
  for (const bool allow_other : {false, true}) {
    SCOPED_TRACE(allow_other);
    Mount mount;
    std::vector<std::string> options = {"backend=" + backend(), "size=64m"};
    options.push_back(allow_other ? "allow_other" : "noallow_other");
    ASSERT_TRUE(mount.Start(options));
    const std::string path = mount.path() + "/f";
    ASSERT_TRUE(WriteFile(path, "data"));
    Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(fd.valid());
    // Another user without allow_other cannot even read the root's
    // attribute: the socket's address comes from the owner.
    const std::string address = ShareSocketOf(mount.path());
    const Errno answer =
        RunAs(kOtherUid, kOtherUid, [&] { return Errno{RawMap(address, fd.get(), 0)}; });
    EXPECT_EQ(answer, allow_other ? Errno{0} : Errno{EACCES});
  }
}

// A mountpoint with a space (written \040 in /proc/self/mountinfo, where
// both the daemon and the library look for the mount).
TEST_P(ShareTest, MountpointsWithSpacesShareToo) {
  SKIP_UNLESS_CUDAFS();
  if (backend() == "cuda" && OnFakeGpus()) GTEST_SKIP() << kNoCopiesOnFakeGpus;
  char pattern[] = "/tmp/cudafs share-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string dir = pattern;
  const CommandResult started =
      RunCommand({kBinary, dir, "-o", "backend=" + backend() + ",size=64m"}, 60s);
  ASSERT_EQ(started.exit_code, 0) << started.err;
  const std::string data = RandomBytes(10000, 6);
  EXPECT_TRUE(WriteFile(dir + "/f", data));
  {
    Mapped m;
    EXPECT_EQ(cudafs_map((dir + "/f").c_str(), 0, &m.mapping), 0) << cudafs_last_error();
    if (m.mapping != nullptr && backend() == "host") {
      EXPECT_TRUE(BytesEqual(m.bytes(), data));
    }
  }
  // A mount left behind (one CI run's fusermount3 -u failed once) would
  // outlive the test with its daemon; the GPU machine has no fusermount3.
  EXPECT_TRUE(UnmountAndWait(dir, std::nullopt)) << dir << " stays mounted";
  rmdir(dir.c_str());
}

// Why the Python module's tests cannot run here ("" when they can): they
// map host memory only (see the file comment), and need a python3.
std::string WhyNoPythonModuleTest(const std::string& backend) {
  if (backend == "cuda") return "host memory only (see the file comment)";
  if (!HaveTool("python3")) return "no python3";
  return "";
}

// The Python module over the library: map(), the buffer protocol, the
// context manager and OSError with the errno.
TEST_P(ShareTest, PythonModuleMapsAndRefuses) {
  SKIP_UNLESS_CUDAFS();
  if (const std::string why = WhyNoPythonModuleTest(backend()); !why.empty()) GTEST_SKIP() << why;
  const std::string data = RandomBytes(123457, 4);
  ASSERT_TRUE(WriteFile(Path("f"), data));
  ASSERT_TRUE(WriteFile(Path("empty"), ""));
  const std::string script = R"(
import errno, hashlib, os, sys, cudafs
root = sys.argv[1]
with cudafs.map(root + "/f") as m:
    assert not m.is_cuda and m.device is None and m.size == 123457, m
    print(hashlib.sha256(memoryview(m)).hexdigest())
assert m.closed
# The buffer is the standard library's kind: bytes by index, written by
# slice; a mapping with views left refuses to close, rather than leave
# them over unmapped memory, and closes once they are gone.
m = cudafs.map(root + "/f")
view = memoryview(m)
assert view.format == "B" and len(view) == 123457 and view[0] == m[0]
view[:5] = b"HELLO"
assert bytes(view[:5]) == b"HELLO" and m[:5] == b"HELLO"
try:
    m.close()
    sys.exit("closed a mapping with a view of it")
except BufferError:
    pass
assert not m.closed and bytes(view[:5]) == b"HELLO"
view.release()
m.close()
assert m.closed
for path, error in ((root + "/empty", errno.EINVAL), ("/proc/self/status", errno.EXDEV),
                    (root + "/missing", errno.ENOENT)):
    try:
        cudafs.map(path)
        sys.exit("mapped " + path)
    except OSError as e:
        assert e.errno == error, (path, e)
try:
    cudafs.map(root + "/f", writable=True)
    sys.exit("shared a file under a granule")
except OSError as e:
    assert e.errno == errno.EINVAL, e
with open(root + "/big", "wb") as f:
    f.write(b"x" * (3 << 20))
with cudafs.map(root + "/big", writable=True) as m:
    assert m.writable
    memoryview(m).cast("B")[:4] = b"GPU!"
    m.sync()
with open(root + "/big", "rb") as f:
    assert f.read(5) == b"GPU!x"
# make_room: the daemon's refusal on a mount with no GPU memory to give
# back, in its words; below the root and off cudafs, refused before
# anything is asked.
for path, error in ((root, errno.EOPNOTSUPP), (root + "/f", errno.EXDEV),
                    ("/proc", errno.EXDEV)):
    try:
        cudafs.make_room(path)
        sys.exit("made room on " + path)
    except OSError as e:
        assert e.errno == error, (path, e)
)";
  const CommandResult result = RunCommand(Python({"-c", script, root()}));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const CommandResult digest = RunShell("sha256sum < " + ShellQuote(Path("f")));
  EXPECT_EQ(result.out.substr(0, 64), digest.out.substr(0, 64));
}

// python -m cudafs: a line saying what was mapped, one line on stderr and
// exit status 1 for a failed call, 2 for bad arguments.
TEST_P(ShareTest, PythonCommandLine) {
  SKIP_UNLESS_CUDAFS();
  if (const std::string why = WhyNoPythonModuleTest(backend()); !why.empty()) GTEST_SKIP() << why;
  ASSERT_TRUE(WriteFile(Path("f"), RandomBytes(123457, 5)));
  CommandResult result = RunCommand(Python({"-m", "cudafs", "map", Path("f")}));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out.rfind(Path("f") + ": 123457 bytes", 0), 0u) << result.out;
  EXPECT_NE(result.out.find("a private copy in host memory"), std::string::npos) << result.out;
  const struct {
    std::vector<std::string> arguments;
    int exit_code;
    std::string says;
  } failures[] = {
      {{"map", Path("missing")}, 1, "cudafs: map " + Path("missing") + ": "},
      {{"map", "--writable", Path("f")}, 1, "(EINVAL)"},
      {{"make_room", root()}, 1, "it holds no GPU memory to give back"},
      {{"make-room", Path("f"), "1g"}, 1, "cudafs: make_room " + Path("f")},
      {{"make_room", root(), "12x"}, 2, "not a byte count: '12x'"},
      {{"load_safetensors"}, 2, "the following arguments are required: path"},
      {{}, 2, "the following arguments are required: COMMAND"},
  };
  for (const auto& failure : failures) {
    std::vector<std::string> arguments = {"-m", "cudafs"};
    arguments.insert(arguments.end(), failure.arguments.begin(), failure.arguments.end());
    result = RunCommand(Python(arguments));
    EXPECT_EQ(result.exit_code, failure.exit_code) << result.out << result.err;
    EXPECT_NE(result.err.find(failure.says), std::string::npos) << result.err;
    EXPECT_EQ(result.out, "");
    if (failure.exit_code == 1) {
      EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    }
  }
  result = RunCommand(Python({"-m", "cudafs", "--help"}));
  EXPECT_EQ(result.exit_code, 0) << result.err;
  for (const char* command : {"map", "load_safetensors", "make_room"}) {
    EXPECT_NE(result.out.find(command), std::string::npos) << result.out;
  }
}

// On a GPU-backed mount, through PyTorch: bytes written through FUSE read
// by a kernel through a shared mapping and the reverse, write(2) after
// mapping seen after a sync, another process's mapping of the same
// memory, and a private copy that keeps its bytes. Skipped without torch
// (CI); run on the GPU machine.
TEST_P(ShareTest, GpuProgramsShareTheFilesMemory) {
  SKIP_UNLESS_CUDAFS();
  if (backend() != "cuda") GTEST_SKIP() << "GPU memory only";
  if (RunCommand(Python({"-c", "import torch; assert torch.cuda.is_available()"})).exit_code != 0) {
    GTEST_SKIP() << "no python3 with torch and a GPU";
  }
  const std::string script = R"py(
import os, subprocess, sys, torch, cudafs
path = sys.argv[1] + "/shared"
size = (64 << 20) + 12345
data = bytearray(os.urandom(size))
with open(path, "wb") as f:
    f.write(data)
def host(tensor):
    return bytes(tensor.cpu().numpy().tobytes())
with cudafs.map(path) as copy, cudafs.map(path, writable=True) as m:
    assert m.is_cuda and m.writable and m.size == size, m
    t = torch.as_tensor(m, device="cuda")
    assert host(t) == data, "write(2) -> kernel"
    original = bytes(data[1000:2000])
    t[1000:2000] = 7
    t[-10:] = 9
    torch.cuda.synchronize()
    m.sync()
    data[1000:2000] = b"\x07" * 1000
    data[-10:] = b"\x09" * 10
    with open(path, "rb") as f:
        assert f.read() == data, "kernel -> read(2)"
    with open(path, "r+b") as f:
        f.seek(5 << 20)
        f.write(b"written")
    m.sync()
    assert host(t[5 << 20:(5 << 20) + 7]) == b"written", "write(2) after mapping"
    child = "\n".join([
        "import sys, torch, cudafs",
        "m = cudafs.map(sys.argv[1], writable=True)",
        "t = torch.as_tensor(m, device='cuda')",
        "assert int(t[1500]) == 7",
        "t[0:5] = torch.tensor(list(b'child'), dtype=torch.uint8, device='cuda')",
        "torch.cuda.synchronize()",
        "m.sync()",
    ])
    subprocess.run([sys.executable, "-c", child, path], check=True)
    assert host(t[0:5]) == b"child", "another process's writes"
    c = torch.as_tensor(copy, device="cuda")
    assert host(c[1000:2000]) == original, "the copy is private"
    del t, c
print("ok")
)py";
  const CommandResult result = RunCommand(Python({"-c", script, root()}), 300s);
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_EQ(result.out, "ok\n");
}

// A thread without a CUDA context maps, unmaps and maps again: the primary
// context a mapping retained, released with it, is no longer the thread's
// (it would be taken for the caller's own, and is gone).
TEST_P(ShareTest, MapsAgainAfterUnmapOnAThreadWithoutAContext) {
  SKIP_UNLESS_CUDAFS();
  const std::string path = Path("f");
  ASSERT_TRUE(WriteFile(path, RandomBytes(3 << 20, 11)));
  for (int i = 0; i < 3; ++i) {
    Mapped m;
    ASSERT_EQ(cudafs_map(path.c_str(), CUDAFS_MAP_WRITABLE, &m.mapping), 0)
        << "map " << i << ": " << cudafs_last_error();
    EXPECT_EQ(cudafs_mapping_size(m.mapping), uint64_t{3} << 20);
  }
}

// A shared mapping is the file's own memory: the bytes written before
// (cached small writes included), writes from either side after a sync,
// and another process's mapping of the same file.
TEST_P(ShareTest, SharedMappingsAreTheFilesOwnMemory) {
  SKIP_UNLESS_CUDAFS();
  const std::string path = Path("f");
  std::string data = RandomBytes(5 << 20, 7);
  Fd fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(WriteAll(fd.get(), data, 0));
  ASSERT_TRUE(WriteAll(fd.get(), "tail", data.size()));  // held by the write-back cache
  data += "tail";
  Mapped m;
  ASSERT_EQ(cudafs_map_fd(fd.get(), CUDAFS_MAP_WRITABLE, &m.mapping), 0) << cudafs_last_error();
  EXPECT_EQ(cudafs_mapping_size(m.mapping), data.size());
  if (backend() == "cuda") {
    EXPECT_EQ(cudafs_mapping_memory(m.mapping), CUDAFS_MEMORY_CUDA);
    EXPECT_EQ(cudafs_sync(m.mapping), 0) << cudafs_last_error();
    return;
  }
  EXPECT_TRUE(BytesEqual(m.bytes(), data));
  const std::map<std::string, std::string> stats = MountStats(root());
  EXPECT_EQ(stats.at("share_mappings"), "1");
  EXPECT_EQ(stats.at("share_copies"), "0");

  // Mapping -> read(2).
  struct stat before;
  ASSERT_SYS_OK(fstat(fd.get(), &before));
  char* memory = static_cast<char*>(cudafs_mapping_pointer(m.mapping));
  std::memcpy(memory + 4096 * 300 + 7, "through the mapping", 19);
  std::memcpy(memory + data.size() - 4, "TAIL", 4);
  data.replace(4096 * 300 + 7, 19, "through the mapping");
  data.replace(data.size() - 4, 4, "TAIL");
  std::this_thread::sleep_for(10ms);  // so that the mtime can move
  ASSERT_EQ(cudafs_sync(m.mapping), 0) << cudafs_last_error();
  EXPECT_TRUE(BytesEqual(ReadFile(path).value_or(""), data));
  struct stat after;
  ASSERT_SYS_OK(fstat(fd.get(), &after));
  EXPECT_GT(Nanos(after.st_mtim), Nanos(before.st_mtim));

  // write(2) -> mapping, small and large writes alike.
  ASSERT_TRUE(WriteAll(fd.get(), "small", 100));
  const std::string large = RandomBytes(1 << 20, 8);
  ASSERT_TRUE(WriteAll(fd.get(), large, 2 << 20));
  data.replace(100, 5, "small");
  data.replace(2 << 20, large.size(), large);
  ASSERT_EQ(cudafs_sync(m.mapping), 0) << cudafs_last_error();
  EXPECT_TRUE(BytesEqual(m.bytes(), data));

  // Another process maps the same memory and writes through it.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    cudafs_mapping* other = nullptr;
    if (cudafs_map(path.c_str(), CUDAFS_MAP_WRITABLE, &other) != 0) _exit(1);
    std::memcpy(static_cast<char*>(cudafs_mapping_pointer(other)) + 12345, "child", 5);
    _exit(cudafs_sync(other) == 0 && cudafs_unmap(other) == 0 ? 0 : 2);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(std::string_view(memory + 12345, 5), "child");
  data.replace(12345, 5, "child");
  EXPECT_TRUE(BytesEqual(ReadFile(path).value_or(""), data));
}

// Truncate and unlink while mapped: what a truncate cuts off goes back,
// reading as zeros in the mapping, and never becomes another file's
// memory; what the file keeps stays shared and reads as zeros past the new
// end. A removed file lives while mapped.
TEST_P(ShareTest, SharedMemoryTheFileGivesUpNeverBecomesAnotherFiles) {
  SKIP_UNLESS_CUDAFS();
  if (backend() == "cuda") GTEST_SKIP() << "host memory only (see the file comment)";
  const std::string path = Path("f");
  const std::string data = RandomBytes(8 << 20, 9);
  ASSERT_TRUE(WriteFile(path, data));
  Mapped m;
  ASSERT_EQ(cudafs_map(path.c_str(), CUDAFS_MAP_WRITABLE, &m.mapping), 0) << cudafs_last_error();
  const char* memory = static_cast<const char*>(cudafs_mapping_pointer(m.mapping));
  ASSERT_SYS_OK(truncate(path.c_str(), 1 << 20));
  // The file keeps the whole block holding its new end (its size depends
  // on how the writes came: 2 MiB or more); st_blocks says how much.
  const std::optional<struct stat> st = StatPath(path);
  ASSERT_TRUE(st.has_value());
  const size_t kept = static_cast<size_t>(st->st_blocks) * 512;
  ASSERT_GE(kept, size_t{2} << 20);
  ASSERT_LT(kept, data.size()) << "nothing was given up";
  ASSERT_SYS_OK(truncate(path.c_str(), 8 << 20));
  // Kept: still the file's, zero past the new end.
  EXPECT_TRUE(
      BytesEqual(std::string_view(memory, 1 << 20), std::string_view(data).substr(0, 1 << 20)));
  EXPECT_TRUE(BytesEqual(std::string_view(memory + (1 << 20), kept - (1 << 20)),
                         std::string(kept - (1 << 20), '\0')));
  // Given up: zeros, whatever else is written now.
  const std::string other = RandomBytes(16 << 20, 10);
  ASSERT_TRUE(WriteFile(Path("g"), other));
  ASSERT_TRUE(WriteFile(Path("h"), std::string_view(other).substr(0, 6 << 20)));
  EXPECT_TRUE(BytesEqual(std::string_view(memory + kept, data.size() - kept),
                         std::string(data.size() - kept, '\0')));
  // Removed: the mapping holds the file open, as mmap(2) does, so its
  // memory stays the file's, and goes (df shows it) once unmapped.
  const uint64_t free_before = FreeBytes(root());
  ASSERT_SYS_OK(unlink(path.c_str()));
  EXPECT_TRUE(
      BytesEqual(std::string_view(memory, 1 << 20), std::string_view(data).substr(0, 1 << 20)));
  ASSERT_EQ(cudafs_unmap(m.mapping), 0);
  m.mapping = nullptr;
  EXPECT_TRUE(Eventually([&] { return FreeBytes(root()) >= free_before + kept; }, 10s));
}

// A punch keeps a shared file's whole blocks, zeroed in place, so that the
// mapping stays the file's memory, as a shared mapping of a tmpfs file
// stays coherent: both sides see the hole, then each other's writes after
// a sync. The blocks stay allocated (st_blocks), unlike tmpfs's.
TEST_P(ShareTest, PunchingASharedFileKeepsTheMappingCoherent) {
  SKIP_UNLESS_CUDAFS();
  if (backend() == "cuda") GTEST_SKIP() << "host memory only (see the file comment)";
  const std::string path = Path("f");
  ASSERT_TRUE(WriteFile(path, RandomBytes(10 << 20, 11)));
  Fd fd(open(path.c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  Mapped m;
  ASSERT_EQ(cudafs_map_fd(fd.get(), CUDAFS_MAP_WRITABLE, &m.mapping), 0) << cudafs_last_error();
  char* memory = static_cast<char*>(cudafs_mapping_pointer(m.mapping));
  std::string data = RandomBytes(10 << 20, 12);
  std::memcpy(memory, data.data(), data.size());
  ASSERT_EQ(cudafs_sync(m.mapping), 0) << cudafs_last_error();
  ASSERT_TRUE(BytesEqual(ReadFile(path).value_or(""), data));
  struct stat before;
  ASSERT_SYS_OK(fstat(fd.get(), &before));

  // Whole blocks and more: [2 MiB, 10 MiB), half punched, half zeroed.
  ASSERT_SYS_OK(fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 2 << 20, 4 << 20));
  ASSERT_SYS_OK(fallocate(fd.get(), FALLOC_FL_ZERO_RANGE, 6 << 20, 4 << 20));
  std::memset(data.data() + (2 << 20), 0, 8 << 20);
  ASSERT_EQ(cudafs_sync(m.mapping), 0) << cudafs_last_error();
  EXPECT_TRUE(BytesEqual(ReadFile(path).value_or(""), data));
  EXPECT_TRUE(BytesEqual(m.bytes(), data)) << "the mapping sees the hole";
  struct stat after;
  ASSERT_SYS_OK(fstat(fd.get(), &after));
  EXPECT_EQ(after.st_blocks, before.st_blocks) << "zeroed in place, not freed";

  // write(2) into the hole -> mapping.
  ASSERT_TRUE(WriteAll(fd.get(), "into the hole", 3 << 20));
  ASSERT_TRUE(WriteAll(fd.get(), "into the zeros", 8 << 20));
  data.replace(3 << 20, 13, "into the hole");
  data.replace(8 << 20, 14, "into the zeros");
  ASSERT_EQ(cudafs_sync(m.mapping), 0) << cudafs_last_error();
  EXPECT_TRUE(BytesEqual(m.bytes(), data));
  // Mapping -> read(2).
  std::memcpy(memory + (5 << 20), "through the mapping", 19);
  std::memcpy(memory + (9 << 20), "and here", 8);
  data.replace(5 << 20, 19, "through the mapping");
  data.replace(9 << 20, 8, "and here");
  ASSERT_EQ(cudafs_sync(m.mapping), 0) << cudafs_last_error();
  EXPECT_TRUE(BytesEqual(ReadFile(path).value_or(""), data));
}

// KiB of `field` in /proc/meminfo ("Shmem"), or -1.
int64_t MeminfoKiB(std::string_view field) {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.starts_with(field) && line.size() > field.size() && line[field.size()] == ':') {
      return std::stoll(line.substr(field.size() + 1));
    }
  }
  return -1;
}

// Memory a shared mapping kept after a truncate would lie outside size=
// (df shows it free), so a user who writes, maps and truncates, again and
// again, would hold it without bound (tmpfs counts a mapped file's pages
// until the last unmap). The daemon takes it back: the mapping reads zeros
// past the new end, and the system's shared memory does not grow.
TEST_P(ShareTest, TruncatedSharedMemoryGoesBackThoughStillMapped) {
  SKIP_UNLESS_CUDAFS();
  if (backend() == "cuda") GTEST_SKIP() << "host memory only (see the file comment)";
  Mount small;
  StartOrSkip(small, MountOptions({"size=64m"}));
  if (HasFatalFailure() || IsSkipped()) return;
  const std::string path = small.path() + "/f";
  ASSERT_TRUE(WriteFile(path, ""));
  ASSERT_SYS_OK(chmod(path.c_str(), 0666));
  constexpr size_t kSize = 32 << 20;
  constexpr int kRounds = 8;
  // Shmem is the whole system's: other tests' mounts (a memfd each) may
  // grow it meanwhile, so a round that finds it grew is tried again; what
  // a mapping kept would show every time.
  int64_t grown_kib = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    int report[2];
    ASSERT_SYS_OK(pipe2(report, O_CLOEXEC));
    Fd report_read(report[0]);
    Fd report_write(report[1]);
    const Errno result = RunAs(kOtherUid, kOtherGid, [&] {
      const int64_t shmem_before = MeminfoKiB("Shmem");
      const std::string data(kSize, 'x');
      std::vector<cudafs_mapping*> mappings;
      for (int round = 0; round < kRounds; ++round) {
        Fd fd(open(path.c_str(), O_RDWR | O_CLOEXEC));
        if (!fd.valid()) return Errno{errno};
        if (!WriteAll(fd.get(), data, 0)) return Errno{EIO};
        cudafs_mapping* mapping = nullptr;
        if (const int error = cudafs_map_fd(fd.get(), CUDAFS_MAP_WRITABLE, &mapping); error != 0) {
          return Errno{-error};
        }
        mappings.push_back(mapping);
        if (ftruncate(fd.get(), 0) != 0) return Errno{errno};
      }
      const int64_t grown = MeminfoKiB("Shmem") - shmem_before;
      if (write(report_write.get(), &grown, sizeof grown) != static_cast<ssize_t>(sizeof grown)) {
        return Errno{errno};
      }
      const std::string_view first(static_cast<const char*>(cudafs_mapping_pointer(mappings[0])),
                                   kSize);
      const bool zeros = first.find_first_not_of('\0') == std::string_view::npos;
      for (cudafs_mapping* mapping : mappings) cudafs_unmap(mapping);
      return Errno{zeros ? 0 : EBADMSG};
    });
    ASSERT_EQ(result, Errno{0}) << "EBADMSG: the mapping kept the bytes the truncate cut off";
    report_write.Close();  // so that a child that wrote nothing leaves the read at EOF
    ASSERT_EQ(read(report_read.get(), &grown_kib, sizeof grown_kib),
              static_cast<ssize_t>(sizeof grown_kib));
    if (grown_kib < static_cast<int64_t>(kRounds * kSize / 1024 / 4)) break;
  }
  EXPECT_LT(grown_kib, static_cast<int64_t>(kRounds * kSize / 1024 / 4))
      << "Shmem grew by " << grown_kib << " KiB over " << kRounds << " rounds of " << (kSize >> 20)
      << " MiB on a 64 MiB mount, three times";
}

CUDAFS_INSTANTIATE_BACKENDS(ShareTest);

}  // namespace
}  // namespace cudafs_test
