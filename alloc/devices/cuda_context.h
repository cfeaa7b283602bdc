// CudaContext: one GPU's primary context, held while its device stores
// something, and how calls enter it and report their errors.
//
// Data operations read the context without a lock: their device keeps it
// held while any range they may touch is committed. After a sticky error
// (the context is lost) every Enter fails at once until the context is
// released; the next Retain starts afresh.
#ifndef CUDAFS_ALLOC_DEVICES_CUDA_CONTEXT_H_
#define CUDAFS_ALLOC_DEVICES_CUDA_CONTEXT_H_

#include <atomic>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "alloc/devices/cuda_api.h"

namespace cudafs {

struct CudaDriver;

class CudaContext {
 public:
  // `device` is the CUdevice; `description` names the GPU in log lines.
  CudaContext(const CudaDriver& driver, int device, std::string description)
      : cu_(driver), device_(device), description_(std::move(description)) {}
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  // Retains the primary context and makes it current on this thread.
  // REQUIRES: !held(); the caller serialises Retain and Release.
  absl::Status Retain();
  // Releases it, and forgets that it was lost. REQUIRES: held().
  void Release();
  bool held() const { return context_.load() != nullptr; }

  // Makes the context current on the calling thread (FUSE worker threads
  // are not ours); Internal when it is absent or lost.
  absl::Status Enter() const;
  // Makes it current without checking: for cleanup that must run anyway.
  void MakeCurrent() const;
  // A CUresult as a Status: failures are logged (out of memory excepted,
  // an ordinary ENOSPC) and sticky ones mark the context lost.
  absl::Status Check(absl::string_view call, int result) const;
  bool lost() const { return lost_.load(std::memory_order_relaxed); }

  const CudaDriver& driver() const { return cu_; }
  int device() const { return device_; }
  const std::string& description() const { return description_; }

 private:
  const CudaDriver& cu_;
  const int device_;
  const std::string description_;
  std::atomic<cu::CUctx_st*> context_{nullptr};
  mutable std::atomic<bool> lost_{false};
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_CUDA_CONTEXT_H_
