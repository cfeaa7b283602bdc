#include "tests/support/fake_cuda_shared_budget.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace cudafs {
namespace fake_cuda_internal {

struct SharedRecord {
  std::atomic<int32_t> pid;  // 0: free
  std::atomic<uint64_t> start_time;
  std::atomic<uint64_t> bytes[FakeCudaSharedBudget::kMaxGpus];
};

struct SharedLayout {
  char magic[16];
  uint32_t gpus;
  uint64_t totals[FakeCudaSharedBudget::kMaxGpus];
  SharedRecord records[FakeCudaSharedBudget::kMaxProcesses];
};

namespace {

constexpr char kMagic[16] = "cudafs-fake-v1";

static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<int32_t>::is_always_lock_free,
              "the counts are shared between processes");

// Field 22 of /proc/<pid>/stat, which tells a pid's process from a later
// one given the same pid; 0 for a process that is gone or a zombie.
uint64_t StartTime(int32_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/stat");
  FILE* file = std::fopen(path.c_str(), "re");
  if (file == nullptr) return 0;
  char text[1024];
  const size_t n = std::fread(text, 1, sizeof text - 1, file);
  std::fclose(file);
  text[n] = '\0';
  // The command name, in parentheses, may hold spaces: fields count from
  // after its last ')'.
  const char* after_name = std::strrchr(text, ')');
  if (after_name == nullptr) return 0;
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(after_name + 1), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (the state).
  if (fields.size() < 20 || fields[0] == "Z" || fields[0] == "X") return 0;
  uint64_t start = 0;
  if (!absl::SimpleAtoi(fields[19], &start)) return 0;
  return start;
}

// Holds the state file's lock (and, through `mu`, this process's share of
// it).
class FileLock {
 public:
  explicit FileLock(int fd) : fd_(fd) {
    while (flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~FileLock() { flock(fd_, LOCK_UN); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  const int fd_;
};

std::string Sizes(const uint64_t* totals, uint32_t count) {
  std::vector<uint64_t> sizes(totals, totals + count);
  return absl::StrCat(count, " GPU(s) of ", absl::StrJoin(sizes, ", "), " bytes");
}

}  // namespace
}  // namespace fake_cuda_internal

using fake_cuda_internal::SharedLayout;
using fake_cuda_internal::SharedRecord;

absl::StatusOr<std::unique_ptr<FakeCudaSharedBudget>> FakeCudaSharedBudget::Open(
    const std::string& path, const std::vector<uint64_t>& totals) {
  if (totals.empty() || totals.size() > kMaxGpus) {
    return absl::InvalidArgumentError(
        absl::StrCat("1 to ", kMaxGpus, " fake GPUs, not ", totals.size()));
  }
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  auto fail = [&](const std::string& why) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(path, ": ", why));
  };
  std::unique_ptr<FakeCudaSharedBudget> budget;
  {
    fake_cuda_internal::FileLock lock(fd);
    struct stat st;
    if (fstat(fd, &st) != 0) return fail(std::strerror(errno));
    const bool fresh = st.st_size == 0;
    if (fresh && ftruncate(fd, sizeof(SharedLayout)) != 0) return fail(std::strerror(errno));
    if (!fresh && static_cast<size_t>(st.st_size) != sizeof(SharedLayout)) {
      return fail("not a fake GPU state of this version (remove it)");
    }
    void* mapped = mmap(nullptr, sizeof(SharedLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mapped == MAP_FAILED) return fail(std::strerror(errno));
    // A fresh file reads as zeros: every record free, every count 0.
    auto* layout = static_cast<SharedLayout*>(mapped);
    if (fresh) {
      layout->gpus = static_cast<uint32_t>(totals.size());
      std::copy(totals.begin(), totals.end(), layout->totals);
      std::memcpy(layout->magic, fake_cuda_internal::kMagic, sizeof layout->magic);
    } else if (std::memcmp(layout->magic, fake_cuda_internal::kMagic, sizeof layout->magic) != 0 ||
               layout->gpus != totals.size() ||
               !std::equal(totals.begin(), totals.end(), layout->totals)) {
      const std::string theirs =
          std::memcmp(layout->magic, fake_cuda_internal::kMagic, sizeof layout->magic) == 0
              ? fake_cuda_internal::Sizes(layout->totals, layout->gpus)
              : "something else";
      munmap(mapped, sizeof(SharedLayout));
      return fail(absl::StrCat("made for ", theirs, ", not ",
                               fake_cuda_internal::Sizes(totals.data(), totals.size())));
    }
    budget.reset(new FakeCudaSharedBudget(fd, layout, static_cast<int>(totals.size())));
    absl::MutexLock hold(&budget->mu_);
    budget->ReclaimDead();
    for (SharedRecord& record : layout->records) {
      if (record.pid.load() != 0) continue;
      record.start_time.store(fake_cuda_internal::StartTime(getpid()));
      record.pid.store(getpid());
      budget->record_ = &record;
      break;
    }
  }
  if (budget->record_ == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat(path, ": ", kMaxProcesses, " processes use the fake GPUs already"));
  }
  return budget;
}

FakeCudaSharedBudget::FakeCudaSharedBudget(int fd, SharedLayout* layout, int gpus)
    : fd_(fd), layout_(layout), gpus_(gpus) {}

FakeCudaSharedBudget::~FakeCudaSharedBudget() {
  if (record_ != nullptr) {
    absl::MutexLock hold(&mu_);
    fake_cuda_internal::FileLock lock(fd_);
    for (auto& bytes : record_->bytes) bytes.store(0);
    record_->pid.store(0);
  }
  munmap(layout_, sizeof(SharedLayout));
  close(fd_);
}

bool FakeCudaSharedBudget::Take(int device, uint64_t bytes, uint64_t limit) {
  absl::MutexLock hold(&mu_);
  fake_cuda_internal::FileLock lock(fd_);
  uint64_t used = SumOf(device);
  if (used > limit || bytes > limit - used) {
    ReclaimDead();
    used = SumOf(device);
    if (used > limit || bytes > limit - used) return false;
  }
  record_->bytes[device].fetch_add(bytes);
  return true;
}

void FakeCudaSharedBudget::Give(int device, uint64_t bytes) {
  record_->bytes[device].fetch_sub(bytes);
}

uint64_t FakeCudaSharedBudget::Used(int device) {
  absl::MutexLock hold(&mu_);
  fake_cuda_internal::FileLock lock(fd_);
  ReclaimDead();
  return SumOf(device);
}

void FakeCudaSharedBudget::ReclaimDead() {
  for (SharedRecord& record : layout_->records) {
    const int32_t pid = record.pid.load();
    if (pid == 0 || &record == record_) continue;
    if (fake_cuda_internal::StartTime(pid) == record.start_time.load()) continue;
    for (auto& bytes : record.bytes) bytes.store(0);
    record.pid.store(0);
  }
}

uint64_t FakeCudaSharedBudget::SumOf(int device) const {
  uint64_t sum = 0;
  for (const SharedRecord& record : layout_->records) {
    if (record.pid.load() != 0) sum += record.bytes[device].load();
  }
  return sum;
}

}  // namespace cudafs
