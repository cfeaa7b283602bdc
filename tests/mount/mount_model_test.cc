// Randomized model-based test of file data and names on a mounted cudafs.
//
// A long random sequence of operations (pwrite, O_APPEND write, pread,
// ftruncate, hole punching, rename, link, unlink while open, close and
// reopen) runs against a handful of files in a couple of directories, and
// the same operations run against an in-memory model. Every read is checked
// byte for byte, sizes and link counts after each fstat, and every file's
// whole content, the directory listings and inode numbers periodically.
//
// CUDAFS_TEST_SEED picks the seed (random otherwise; printed on failure) and
// CUDAFS_MODEL_OPS the number of operations (default 20000; on the CUDA
// backend 200000 on a GPU, 2000 on the fake GPUs), so a failure reproduces
// with the same seed.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "tests/mount/mount_fixture.h"
#include "tests/support/errno_check.h"
#include "tests/support/fd.h"
#include "tests/support/file_io.h"
#include "tests/support/processes.h"
#include "tests/support/test_seed.h"

namespace cudafs_test {
namespace {

constexpr uint64_t kMiB = 1 << 20;
// Bounds the model's memory and the cost of the periodic full checks.
constexpr uint64_t kMaxFileSize = 12 * kMiB;
constexpr size_t kMaxOpenFiles = 8;
constexpr int kFullCheckEvery = 1000;
constexpr size_t kHistoryLength = 24;

const std::vector<std::string> kDirectories = {"", "d1", "d2"};
const std::vector<std::string> kFileNames = {"a", "b", "c", "d"};

// A file's identity: its content, shared by all its names and open handles.
struct ModelInode {
  std::string data;
  ino_t ino = 0;
};

struct OpenFile {
  Fd fd;
  std::shared_ptr<ModelInode> inode;
  bool append = false;
  std::string opened_as;  // for the history only
};

// One model run against the directory tree under `root`.
class Model {
 public:
  Model(std::string root, uint64_t seed) : root_(std::move(root)), seed_(seed) {}

  // Runs `ops` random operations in the empty directory `root`; stops at the
  // first mismatch and says what it was, with the last operations.
  testing::AssertionResult Run(uint64_t ops) {
    for (const std::string& dir : kDirectories) {
      if (!dir.empty() && mkdir(Path(dir).c_str(), 0755) != 0) {
        return testing::AssertionFailure() << "mkdir " << dir << ": " << ErrnoName(errno);
      }
      for (const std::string& name : kFileNames) {
        paths_.push_back(dir.empty() ? name : dir + "/" + name);
      }
    }
    rng_.seed(seed_);
    // Written data are slices of this pool at random offsets, so misplaced
    // bytes show up as mismatches.
    pool_ = RandomBytes(4 * kMiB, seed_ ^ 0x9e3779b97f4a7c15);
    for (op_index_ = 0; op_index_ < ops; ++op_index_) {
      const testing::AssertionResult step = Step();
      if (!step) {
        return testing::AssertionFailure() << "operation " << op_index_ << ": " << step.message()
                                           << "\nlast operations:\n" << History();
      }
      if ((op_index_ + 1) % kFullCheckEvery == 0) {
        const testing::AssertionResult check = CheckEverything();
        if (!check) {
          return testing::AssertionFailure()
                 << "full check after operation " << op_index_ << ": " << check.message()
                 << "\nlast operations:\n" << History();
        }
      }
    }
    const testing::AssertionResult check = CheckEverything();
    open_files_.clear();
    if (!check) {
      return testing::AssertionFailure() << "final check: " << check.message()
                                         << "\nlast operations:\n" << History();
    }
    return testing::AssertionSuccess();
  }

 private:
  uint64_t Uniform(uint64_t low, uint64_t high) {  // inclusive
    return std::uniform_int_distribution<uint64_t>(low, high)(rng_);
  }
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  void Log(std::string entry) {
    history_.push_back(std::to_string(op_index_) + ": " + std::move(entry));
    if (history_.size() > kHistoryLength) history_.pop_front();
  }
  std::string History() const {
    std::string out;
    for (const std::string& entry : history_) out += "  " + entry + "\n";
    return out;
  }

  const std::string& RandomPath() { return paths_[Uniform(0, paths_.size() - 1)]; }
  std::optional<std::string> RandomExistingPath() {
    if (names_.empty()) return std::nullopt;
    auto it = names_.begin();
    std::advance(it, Uniform(0, names_.size() - 1));
    return it->first;
  }
  OpenFile& RandomOpenFile() { return open_files_[Uniform(0, open_files_.size() - 1)]; }
  OpenFile* RandomOpenFile(bool append) {
    std::vector<OpenFile*> matching;
    for (OpenFile& file : open_files_) {
      if (file.append == append) matching.push_back(&file);
    }
    if (matching.empty()) return nullptr;
    return matching[Uniform(0, matching.size() - 1)];
  }

  uint64_t LinkCount(const ModelInode* inode) const {
    uint64_t count = 0;
    for (const auto& [path, target] : names_) count += target.get() == inode;
    return count;
  }

  // Write lengths: mostly small, some large, some up to a few MiB.
  uint64_t RandomWriteLength() {
    const uint64_t kind = Uniform(0, 99);
    if (kind < 60) return Uniform(1, 4096);
    if (kind < 85) return Uniform(4097, 256 << 10);
    return Uniform(256 << 10, 3 * kMiB);
  }

  std::string_view PoolSlice(uint64_t length) {
    return std::string_view(pool_).substr(Uniform(0, pool_.size() - length), length);
  }

  testing::AssertionResult Step() {
    const uint64_t kind = Uniform(0, 99);
    if (open_files_.empty() || kind < 8) return OpenRandom();
    if (kind < 14) return CloseRandom();
    if (kind < 38) return PositionedWrite();
    if (kind < 44) return AppendWrite();
    if (kind < 62) return PositionedRead();
    if (kind < 68) return Truncate();
    if (kind < 73) return PunchHole();
    if (kind < 78) return RenameRandom();
    if (kind < 82) return LinkRandom();
    if (kind < 87) return UnlinkRandom();
    if (kind < 94) return StatRandom();
    return Reopen();
  }

  // Opens a random path, creating it when it has no file; sometimes O_TRUNC
  // or O_APPEND.
  testing::AssertionResult OpenRandom() {
    if (open_files_.size() >= kMaxOpenFiles) return CloseRandom();
    const std::string path = RandomPath();
    return OpenPath(path, Chance(0.25), Chance(0.05));
  }

  testing::AssertionResult OpenPath(const std::string& path, bool append, bool truncate) {
    int flags = O_RDWR | O_CREAT;
    if (append) flags |= O_APPEND;
    if (truncate) flags |= O_TRUNC;
    Log("open " + path + (append ? " O_APPEND" : "") + (truncate ? " O_TRUNC" : ""));
    Fd fd(open(Path(path).c_str(), flags, 0644));
    if (!fd.valid()) return testing::AssertionFailure() << "open " << path << ": " << ErrnoName(errno);
    struct stat st;
    if (fstat(fd.get(), &st) != 0) {
      return testing::AssertionFailure() << "fstat " << path << ": " << ErrnoName(errno);
    }
    std::shared_ptr<ModelInode>& inode = names_[path];
    if (inode == nullptr) {
      inode = std::make_shared<ModelInode>();
      inode->ino = st.st_ino;
    } else if (st.st_ino != inode->ino) {
      return testing::AssertionFailure() << "opened " << path << " has inode " << st.st_ino
                                         << ", expected " << inode->ino;
    }
    if (truncate) inode->data.clear();
    if (static_cast<uint64_t>(st.st_size) != inode->data.size()) {
      return testing::AssertionFailure() << "opened " << path << " has size " << st.st_size
                                         << ", expected " << inode->data.size();
    }
    open_files_.push_back(OpenFile{std::move(fd), inode, append, path});
    return testing::AssertionSuccess();
  }

  testing::AssertionResult CloseRandom() { return CloseAt(Uniform(0, open_files_.size() - 1)); }

  // Closes a handle and opens a path that names the same file (when one is
  // left), checking the content survived.
  testing::AssertionResult Reopen() {
    const size_t index = Uniform(0, open_files_.size() - 1);
    const std::shared_ptr<ModelInode> inode = open_files_[index].inode;
    const bool append = open_files_[index].append;
    if (testing::AssertionResult closed = CloseAt(index); !closed) return closed;
    std::vector<std::string> names;
    for (const auto& [path, target] : names_) {
      if (target == inode) names.push_back(path);
    }
    if (names.empty()) return testing::AssertionSuccess();  // it was unlinked: gone now
    const std::string path = names[Uniform(0, names.size() - 1)];
    if (testing::AssertionResult opened = OpenPath(path, append, false); !opened) return opened;
    return CheckContent(open_files_.back(), "reopened " + path);
  }

  testing::AssertionResult CloseAt(size_t index) {
    Log("close fd opened as " + open_files_[index].opened_as);
    if (open_files_[index].fd.Close() != 0) {
      return testing::AssertionFailure() << "close: " << ErrnoName(errno);
    }
    open_files_.erase(open_files_.begin() + index);
    return testing::AssertionSuccess();
  }

  testing::AssertionResult PositionedWrite() {
    OpenFile* file = RandomOpenFile(/*append=*/false);
    if (file == nullptr) return OpenRandom();
    std::string& data = file->inode->data;
    uint64_t length = RandomWriteLength();
    uint64_t offset;
    const uint64_t where = Uniform(0, 99);
    if (where < 15) {
      // Across a 1 MiB boundary.
      const uint64_t boundary = Uniform(1, kMaxFileSize / kMiB - 1) * kMiB;
      length = std::max<uint64_t>(length, 2);
      offset = boundary - Uniform(1, std::min(length - 1, boundary));
    } else if (where < 20) {
      // Far beyond the end: leaves a hole.
      offset = data.size() + Uniform(kMiB, 4 * kMiB);
    } else {
      offset = Uniform(0, data.size() + 4096);
    }
    if (offset >= kMaxFileSize) offset = Uniform(0, kMaxFileSize - 1);
    length = std::min(length, kMaxFileSize - offset);
    const std::string_view bytes = PoolSlice(length);
    Log("pwrite " + file->opened_as + " offset " + std::to_string(offset) + " length " +
        std::to_string(length));
    if (testing::AssertionResult written = WriteAll(file->fd.get(), bytes, offset); !written) {
      return written;
    }
    if (data.size() < offset + length) data.resize(offset + length, '\0');
    data.replace(offset, length, bytes);
    return testing::AssertionSuccess();
  }

  testing::AssertionResult AppendWrite() {
    OpenFile* file = RandomOpenFile(/*append=*/true);
    if (file == nullptr) return OpenPath(RandomPath(), /*append=*/true, /*truncate=*/false);
    std::string& data = file->inode->data;
    if (data.size() >= kMaxFileSize) return Truncate(*file, Uniform(0, data.size()));
    const uint64_t length = std::min(RandomWriteLength(), kMaxFileSize - data.size());
    const std::string_view bytes = PoolSlice(length);
    Log("append " + file->opened_as + " length " + std::to_string(length) + " at size " +
        std::to_string(data.size()));
    size_t done = 0;
    while (done < length) {
      const ssize_t n = write(file->fd.get(), bytes.data() + done, length - done);
      if (n <= 0) return testing::AssertionFailure() << "append write: " << ErrnoName(errno);
      done += n;
    }
    data.append(bytes);
    return testing::AssertionSuccess();
  }

  testing::AssertionResult PositionedRead() {
    OpenFile& file = RandomOpenFile();
    const std::string& data = file.inode->data;
    const uint64_t offset = Chance(0.1) ? data.size() + Uniform(0, 8192) : Uniform(0, data.size());
    const uint64_t length = Chance(0.8) ? Uniform(1, 64 << 10) : Uniform(1, 2 * kMiB);
    Log("pread " + file.opened_as + " offset " + std::to_string(offset) + " length " +
        std::to_string(length));
    const std::optional<std::string> got = ReadAt(file.fd.get(), offset, length);
    if (!got) return testing::AssertionFailure() << "pread: " << ErrnoName(errno);
    const std::string_view expected =
        offset >= data.size() ? std::string_view() : std::string_view(data).substr(offset, length);
    testing::AssertionResult same = BytesEqual(*got, expected);
    if (!same) same << " (pread at " << offset << ")";
    return same;
  }

  testing::AssertionResult Truncate() {
    OpenFile& file = RandomOpenFile();
    const uint64_t size = file.inode->data.size();
    uint64_t new_size;
    if (Chance(0.5)) {
      new_size = Uniform(0, size);
    } else {
      new_size = std::min(kMaxFileSize, size + (Chance(0.7) ? Uniform(0, 65536) : Uniform(0, 3 * kMiB)));
    }
    return Truncate(file, new_size);
  }

  testing::AssertionResult Truncate(OpenFile& file, uint64_t new_size) {
    Log("ftruncate " + file.opened_as + " from " + std::to_string(file.inode->data.size()) +
        " to " + std::to_string(new_size));
    if (ftruncate(file.fd.get(), new_size) != 0) {
      return testing::AssertionFailure() << "ftruncate: " << ErrnoName(errno);
    }
    file.inode->data.resize(new_size, '\0');
    return testing::AssertionSuccess();
  }

  testing::AssertionResult PunchHole() {
    OpenFile& file = RandomOpenFile();
    std::string& data = file.inode->data;
    const uint64_t offset = Uniform(0, data.size() + 8192);
    const uint64_t length = Chance(0.7) ? Uniform(1, 65536) : Uniform(1, data.size() + 1);
    Log("punch " + file.opened_as + " offset " + std::to_string(offset) + " length " +
        std::to_string(length) + " size " + std::to_string(data.size()));
    if (fallocate(file.fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length) != 0) {
      return testing::AssertionFailure() << "fallocate(PUNCH_HOLE): " << ErrnoName(errno);
    }
    if (offset < data.size()) {
      const uint64_t end = std::min<uint64_t>(data.size(), offset + length);
      std::fill(data.begin() + offset, data.begin() + end, '\0');
    }
    return testing::AssertionSuccess();
  }

  // rename(2) of an existing name to a random one, replacing what is there.
  testing::AssertionResult RenameRandom() {
    const std::optional<std::string> from = RandomExistingPath();
    if (!from) return OpenRandom();
    const std::string to = RandomPath();
    Log("rename " + *from + " -> " + to);
    if (rename(Path(*from).c_str(), Path(to).c_str()) != 0) {
      return testing::AssertionFailure() << "rename " << *from << " " << to << ": "
                                         << ErrnoName(errno);
    }
    // Two names of the same file: rename does nothing (POSIX).
    const auto target = names_.find(to);
    if (target != names_.end() && target->second == names_[*from]) {
      return testing::AssertionSuccess();
    }
    std::shared_ptr<ModelInode> inode = names_[*from];
    names_.erase(*from);
    names_[to] = std::move(inode);
    return testing::AssertionSuccess();
  }

  testing::AssertionResult LinkRandom() {
    const std::optional<std::string> from = RandomExistingPath();
    if (!from) return OpenRandom();
    const std::string to = RandomPath();
    Log("link " + *from + " -> " + to);
    const int result = link(Path(*from).c_str(), Path(to).c_str());
    if (names_.contains(to)) {
      return SysFails(result, ("link onto existing " + to).c_str(), {EEXIST});
    }
    if (result != 0) {
      return testing::AssertionFailure() << "link " << *from << " " << to << ": "
                                         << ErrnoName(errno);
    }
    names_[to] = names_[*from];
    return testing::AssertionSuccess();
  }

  // Unlinks a name, preferring one that is open, so the handle lives on.
  testing::AssertionResult UnlinkRandom() {
    std::optional<std::string> victim;
    if (Chance(0.7)) {
      const ModelInode* open_inode = RandomOpenFile().inode.get();
      for (const auto& [path, target] : names_) {
        if (target.get() == open_inode) victim = path;
      }
    }
    if (!victim) victim = RandomExistingPath();
    if (!victim) return OpenRandom();
    Log("unlink " + *victim);
    if (unlink(Path(*victim).c_str()) != 0) {
      return testing::AssertionFailure() << "unlink " << *victim << ": " << ErrnoName(errno);
    }
    names_.erase(*victim);
    return testing::AssertionSuccess();
  }

  testing::AssertionResult CheckHandleAttributes(const OpenFile& file) {
    struct stat st;
    if (fstat(file.fd.get(), &st) != 0) {
      return testing::AssertionFailure() << "fstat: " << ErrnoName(errno);
    }
    if (static_cast<uint64_t>(st.st_size) != file.inode->data.size()) {
      return testing::AssertionFailure() << "fstat of fd opened as " << file.opened_as
                                         << ": size " << st.st_size << ", expected "
                                         << file.inode->data.size();
    }
    if (st.st_ino != file.inode->ino) {
      return testing::AssertionFailure() << "fstat: inode " << st.st_ino << ", expected "
                                         << file.inode->ino;
    }
    const uint64_t links = LinkCount(file.inode.get());
    if (st.st_nlink != links) {
      return testing::AssertionFailure() << "fstat of fd opened as " << file.opened_as
                                         << ": st_nlink " << st.st_nlink << ", expected "
                                         << links;
    }
    return testing::AssertionSuccess();
  }

  testing::AssertionResult StatRandom() {
    if (Chance(0.5)) {
      const OpenFile& file = RandomOpenFile();
      Log("fstat " + file.opened_as);
      return CheckHandleAttributes(file);
    }
    const std::string path = RandomPath();
    Log("stat " + path);
    struct stat st;
    const int result = stat(Path(path).c_str(), &st);
    const auto it = names_.find(path);
    if (it == names_.end()) return SysFails(result, ("stat of absent " + path).c_str(), {ENOENT});
    if (result != 0) return testing::AssertionFailure() << "stat " << path << ": " << ErrnoName(errno);
    const ModelInode& inode = *it->second;
    if (st.st_ino != inode.ino || static_cast<uint64_t>(st.st_size) != inode.data.size() ||
        st.st_nlink != LinkCount(&inode)) {
      return testing::AssertionFailure()
             << "stat " << path << ": inode " << st.st_ino << " size " << st.st_size << " nlink "
             << st.st_nlink << ", expected inode " << inode.ino << " size " << inode.data.size()
             << " nlink " << LinkCount(&inode);
    }
    return testing::AssertionSuccess();
  }

  testing::AssertionResult CheckContent(const OpenFile& file, const std::string& what) {
    if (testing::AssertionResult attributes = CheckHandleAttributes(file); !attributes) {
      return attributes;
    }
    const std::optional<std::string> got =
        ReadAt(file.fd.get(), 0, file.inode->data.size() + 4096);
    if (!got) return testing::AssertionFailure() << what << ": read: " << ErrnoName(errno);
    testing::AssertionResult same = BytesEqual(*got, file.inode->data);
    if (!same) same << " (" << what << ")";
    return same;
  }

  // Every name, listing and open handle against the model.
  testing::AssertionResult CheckEverything() {
    for (const std::string& dir : kDirectories) {
      const std::optional<std::vector<std::string>> listed = ListDir(dir.empty() ? root() : Path(dir));
      if (!listed) return testing::AssertionFailure() << "cannot list '" << dir << "'";
      std::vector<std::string> expected = {".", ".."};
      if (dir.empty()) expected.insert(expected.end(), kDirectories.begin() + 1, kDirectories.end());
      for (const auto& [path, inode] : names_) {
        const size_t slash = path.rfind('/');
        const std::string parent = slash == std::string::npos ? "" : path.substr(0, slash);
        if (parent == dir) expected.push_back(path.substr(slash + 1));
      }
      std::sort(expected.begin(), expected.end());
      if (*listed != expected) {
        return testing::AssertionFailure() << "directory '" << dir << "' lists "
                                           << Join(*listed, " ") << ", expected "
                                           << Join(expected, " ");
      }
    }
    for (const auto& [path, inode] : names_) {
      const std::optional<struct stat> st = StatPath(Path(path));
      if (!st) return testing::AssertionFailure() << "lstat " << path << ": " << ErrnoName(errno);
      if (st->st_ino != inode->ino || st->st_nlink != LinkCount(inode.get())) {
        return testing::AssertionFailure() << path << ": inode " << st->st_ino << " nlink "
                                           << st->st_nlink << ", expected " << inode->ino
                                           << " and " << LinkCount(inode.get());
      }
      const std::optional<std::string> content = ReadFile(Path(path));
      if (!content) return testing::AssertionFailure() << "read " << path << ": " << ErrnoName(errno);
      testing::AssertionResult same = BytesEqual(*content, inode->data);
      if (!same) return same << " (whole file " << path << ")";
    }
    for (const OpenFile& file : open_files_) {
      if (testing::AssertionResult ok = CheckContent(file, "fd opened as " + file.opened_as); !ok) {
        return ok;
      }
    }
    return testing::AssertionSuccess();
  }

  const std::string& root() const { return root_; }
  std::string Path(std::string_view relative) const { return root_ + "/" + std::string(relative); }

  const std::string root_;
  const uint64_t seed_;
  std::vector<std::string> paths_;
  std::map<std::string, std::shared_ptr<ModelInode>> names_;
  std::vector<OpenFile> open_files_;
  std::mt19937_64 rng_;
  std::string pool_;
  uint64_t op_index_ = 0;
  std::deque<std::string> history_;
};

class ModelTest : public FsTest {
 protected:
  // The seed (CUDAFS_TEST_SEED, else random) and operation count
  // (CUDAFS_MODEL_OPS, else 20000; on the CUDA backend 200000 on a real
  // GPU, 2000 on the fake GPUs: those check the CUDA paths in CI, where
  // the host instance already runs the model at length).
  uint64_t Seed() const { return seed_; }
  uint64_t Operations() const {
    const uint64_t fallback = backend() != "cuda" ? 20000 : OnFakeGpus() ? 2000 : 200000;
    return EnvOrDefault("CUDAFS_MODEL_OPS", fallback);
  }

  void Run() {
    SCOPED_TRACE(cudafs::SeedTrace(Seed(), "CUDAFS_MODEL_OPS=" + std::to_string(Operations())));
    EXPECT_TRUE(Model(root(), Seed()).Run(Operations()));
  }

 private:
  const uint64_t seed_ = cudafs::TestSeed();
};

TEST_P(ModelTest, RandomOperationsMatchModel) { Run(); }

// Several models at once, each in its own directory tree: the daemon's
// threads, inode locks and arena serve them concurrently. Each thread runs
// the operation count's share, with its own seed.
TEST_P(ModelTest, ConcurrentModelsInSeparateTrees) {
  constexpr int kThreads = 4;
  SCOPED_TRACE(cudafs::SeedTrace(Seed()) + " (thread i uses seed + i)");
  std::vector<testing::AssertionResult> results(kThreads, testing::AssertionSuccess());
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    const std::string tree = Path("tree" + std::to_string(i));
    ASSERT_SYS_OK(mkdir(tree.c_str(), 0755));
    threads.emplace_back([&, i, tree] {
      results[i] = Model(tree, Seed() + i).Run(Operations() / kThreads);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int i = 0; i < kThreads; ++i) EXPECT_TRUE(results[i]) << "thread " << i;
}

// direct_io sends every read and write to cudafs instead of the page cache,
// and O_APPEND writes arrive as appends, so the same sequence takes other
// paths through the daemon.
TEST_P(ModelTest, RandomOperationsMatchModelWithDirectIo) {
  SKIP_UNLESS_CUDAFS();
  ASSERT_TRUE(Remount({"direct_io"}));
  Run();
}

// The page cache path (the default only where direct-I/O files cannot be
// mmapped): writes copied into cached pages, reads served from them.
TEST_P(ModelTest, RandomOperationsMatchModelThroughThePageCache) {
  SKIP_UNLESS_CUDAFS();
  ASSERT_TRUE(Remount({"nodirect_io"}));
  Run();
}

// cudafs' own write-back cache off (cache=0): every request goes to the
// arena.
TEST_P(ModelTest, RandomOperationsMatchModelWithoutWriteBackCache) {
  SKIP_UNLESS_CUDAFS();
  ASSERT_TRUE(Remount({"cache=0"}));
  Run();
}

// A cache of 16 pages: eviction, flushes under pressure and writes that go
// around a full cache happen all the time.
TEST_P(ModelTest, RandomOperationsMatchModelWithATinyWriteBackCache) {
  SKIP_UNLESS_CUDAFS();
  ASSERT_TRUE(Remount({"cache=64k"}));
  Run();
}

CUDAFS_INSTANTIATE_BACKENDS(ModelTest);

}  // namespace
}  // namespace cudafs_test
