#include "alloc/devices/cuda_streams.h"

#include <algorithm>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "alloc/devices/cuda_context.h"
#include "alloc/devices/cuda_driver.h"
#include "alloc/devices/device.h"

namespace cudafs {

CudaStreams::CudaStreams(const CudaContext& context) : context_(context) {}

absl::Status CudaStreams::Create(int count) {
  const CudaDriver& cu = context_.driver();
  absl::MutexLock lock(&mu_);
  for (int i = 0; i < count; ++i) {
    cu::CUstream stream;
    absl::Status status =
        context_.Check("cuStreamCreate", cu.cuStreamCreate(&stream, cu::CU_STREAM_NON_BLOCKING));
    if (!status.ok()) return status;
    all_.push_back(stream);
    idle_.push_back(stream);
  }
  return absl::OkStatus();
}

void CudaStreams::Destroy() {
  absl::MutexLock lock(&mu_);
  for (cu::CUstream stream : all_) context_.driver().cuStreamDestroy(stream);
  all_.clear();
  idle_.clear();
}

cu::CUstream CudaStreams::Acquire() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](std::vector<cu::CUstream>* idle) { return !idle->empty(); }, &idle_));
  cu::CUstream stream = idle_.back();
  idle_.pop_back();
  return stream;
}

void CudaStreams::Release(cu::CUstream stream) {
  absl::MutexLock lock(&mu_);
  idle_.push_back(stream);
}

absl::Status CudaStreams::Wait(cu::CUstream stream) {
  if (IsBackgroundThread()) return Sleep(stream);
  return context_.Check("cuStreamSynchronize", context_.driver().cuStreamSynchronize(stream));
}

absl::Status CudaStreams::Sleep(cu::CUstream stream) {
  const absl::Time start = absl::Now();
  while (true) {
    const cu::CUresult result = context_.driver().cuStreamQuery(stream);
    if (result != cu::CUDA_ERROR_NOT_READY) return context_.Check("cuStreamQuery", result);
    // Naps of half the time waited so far: few wake-ups for a long copy,
    // and no request waits for the end of a nap.
    absl::SleepFor(
        std::clamp((absl::Now() - start) / 2, absl::Microseconds(50), absl::Milliseconds(5)));
  }
}

absl::Status CudaStreams::Run(absl::string_view call, size_t count,
                              absl::FunctionRef<int(size_t, cu::CUstream)> enqueue) {
  if (count == 0) return absl::OkStatus();
  if (absl::Status s = context_.Enter(); !s.ok()) return s;
  cu::CUstream stream = Acquire();
  absl::Status status = absl::OkStatus();
  for (size_t i = 0; i < count && status.ok(); ++i) {
    status = context_.Check(call, enqueue(i, stream));
  }
  absl::Status waited = Wait(stream);
  Release(stream);
  return status.ok() ? waited : status;
}

absl::Status CudaStreams::Copy(size_t count, absl::FunctionRef<Transfer(size_t)> transfer) {
  if (count == 0) return absl::OkStatus();
  const CudaDriver& cu = context_.driver();
  if (count > 1 && cu.cuMemcpyBatchAsync != nullptr && batch_copies_.load()) {
    std::vector<cu::CUdeviceptr> to(count), from(count);
    std::vector<size_t> lengths(count);
    for (size_t i = 0; i < count; ++i) {
      const Transfer t = transfer(i);
      to[i] = t.to;
      from[i] = t.from;
      lengths[i] = t.length;
    }
    cu::CUmemcpyAttributes attributes = {};
    attributes.srcAccessOrder = cu::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    size_t first_copy = 0;
    cu::CUresult batched = cu::CUDA_SUCCESS;
    absl::Status status = Run("cuMemcpyBatchAsync", 1, [&](size_t, cu::CUstream stream) {
      batched = cu.cuMemcpyBatchAsync(to.data(), from.data(), lengths.data(), count, &attributes,
                                      &first_copy, 1, stream);
      return static_cast<int>(batched);
    });
    // A driver that declines batches (a platform without them) gets the
    // copies one by one from now on; a lost context stays an error.
    if (status.ok() || IsStickyCudaError(batched)) return status;
    batch_copies_.store(false);
  }
  return Run("cuMemcpyAsync", count, [&](size_t i, cu::CUstream stream) {
    const Transfer t = transfer(i);
    return static_cast<int>(cu.cuMemcpyAsync(t.to, t.from, t.length, stream));
  });
}

}  // namespace cudafs
