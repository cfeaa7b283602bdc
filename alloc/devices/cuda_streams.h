// CudaStreams: the copy streams of one context, and how a caller waits for
// what it put on them.
//
// A fixed pool of non-blocking streams: each batch borrows one, enqueues
// all of its work and waits once, so concurrent FUSE requests overlap on
// the copy engines. The streams are made with the context, because making
// one needs device memory, which a full GPU may lack when a request wants it.
//
// Waiting: a request thread waits in the driver, which spins on its core
// until the GPU is done; sleeping or yielding instead made streams slower
// and nothing faster (docs/MEASUREMENTS.md, "Waiting for the GPU"). A
// background thread (MarkBackgroundThread), which nobody waits on, polls
// between naps of half the time waited so far (50 µs to 5 ms): it never
// spins.
#ifndef CUDAFS_ALLOC_DEVICES_CUDA_STREAMS_H_
#define CUDAFS_ALLOC_DEVICES_CUDA_STREAMS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "alloc/devices/cuda_api.h"

namespace cudafs {

class CudaContext;

class CudaStreams {
 public:
  // `context` must outlive this.
  explicit CudaStreams(const CudaContext& context);

  // Makes `count` streams. REQUIRES: the context current, no streams.
  absl::Status Create(int count);
  // Destroys them. REQUIRES: the context current, no batch running.
  void Destroy();

  // Runs `enqueue` for each of `count` items on a borrowed stream, then
  // waits once.
  // Waits even after a failed enqueue: work already queued must finish
  // before the caller reuses its buffers.
  absl::Status Run(absl::string_view call, size_t count,
                   absl::FunctionRef<int(size_t, cu::CUstream_st* stream)> enqueue);

  // One copy between unified addresses (device and host pointers alike).
  struct Transfer {
    unsigned long long to;    // CUdeviceptr
    unsigned long long from;  // CUdeviceptr
    size_t length;
  };
  // Runs `count` copies and waits for them: one cuMemcpyBatchAsync where the
  // driver has it (the driver's per-copy cost is what scattered pages pay;
  // docs/MEASUREMENTS.md), else one call per copy.
  absl::Status Copy(size_t count, absl::FunctionRef<Transfer(size_t)> transfer);

 private:
  // Borrows an idle stream, waiting for one when all are busy.
  cu::CUstream_st* Acquire();
  void Release(cu::CUstream_st* stream);
  // Waits until `stream` has done everything queued on it.
  absl::Status Wait(cu::CUstream_st* stream);
  // Wait's way for background threads.
  absl::Status Sleep(cu::CUstream_st* stream);

  const CudaContext& context_;
  // Cleared when the driver refuses a batched copy.
  std::atomic<bool> batch_copies_{true};

  absl::Mutex mu_;
  std::vector<cu::CUstream_st*> idle_ ABSL_GUARDED_BY(mu_);
  std::vector<cu::CUstream_st*> all_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_CUDA_STREAMS_H_
