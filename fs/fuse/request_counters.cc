#include "fs/fuse/request_counters.h"

#include <sys/sysinfo.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace cudafs {

RequestCounters::RequestCounters()
    : shard_count_(static_cast<size_t>(std::max(get_nprocs_conf(), 1))),
      shards_(std::make_unique<Shard[]>(shard_count_)) {}

uint64_t RequestCounters::Sum(size_t counter) const {
  uint64_t sum = 0;
  for (size_t i = 0; i < shard_count_; ++i) {
    sum += shards_[i].counts[counter].load(std::memory_order_relaxed);
  }
  return sum;
}

std::string RequestCounters::ToText() const {
  std::string text;
#define CUDAFS_REQUEST_LINE(name)                 \
  absl::StrAppend(&text, "requests_" #name " ", \
                  Sum(static_cast<size_t>(FuseRequest::name)), "\n");
  CUDAFS_FUSE_REQUESTS(CUDAFS_REQUEST_LINE)
#undef CUDAFS_REQUEST_LINE
  absl::StrAppend(&text, "forgotten_inodes ", Sum(kForgottenInodes), "\n");
#define CUDAFS_HANDLER_LINE(name)                 \
  absl::StrAppend(&text, "handler_ns_" #name " ", \
                  Sum(kHandlerNs + static_cast<size_t>(FuseRequest::name)), "\n");
  CUDAFS_FUSE_REQUESTS(CUDAFS_HANDLER_LINE)
#undef CUDAFS_HANDLER_LINE
  return text;
}

}  // namespace cudafs
