#include "alloc/devices/cuda_context.h"

#include "absl/strings/str_cat.h"
#include "alloc/base/log.h"
#include "alloc/devices/cuda_driver.h"

namespace cudafs {

absl::Status CudaContext::Retain() {
  cu::CUcontext context = nullptr;
  absl::Status status =
      cu_.Check("cuDevicePrimaryCtxRetain", cu_.cuDevicePrimaryCtxRetain(&context, device_));
  if (!status.ok()) return status;
  context_.store(context);
  status = cu_.Check("cuCtxSetCurrent", cu_.cuCtxSetCurrent(context));
  if (!status.ok()) Release();
  return status;
}

void CudaContext::Release() {
  cu_.cuCtxSetCurrent(nullptr);
  cu_.cuDevicePrimaryCtxRelease(device_);
  context_.store(nullptr);
  lost_.store(false);
}

absl::Status CudaContext::Enter() const {
  cu::CUcontext context = context_.load();
  if (context == nullptr) {
    return absl::InternalError(
        absl::StrCat(description_, ": data operation on memory that is not committed"));
  }
  if (lost()) {
    return absl::InternalError(absl::StrCat(
        description_, ": the GPU context was lost; it is made again once nothing is stored"));
  }
  return Check("cuCtxSetCurrent", cu_.cuCtxSetCurrent(context));
}

void CudaContext::MakeCurrent() const { cu_.cuCtxSetCurrent(context_.load()); }

absl::Status CudaContext::Check(absl::string_view call, int result) const {
  const cu::CUresult code = static_cast<cu::CUresult>(result);
  if (code == cu::CUDA_SUCCESS) return absl::OkStatus();
  absl::Status status = cu_.Check(call, code);
  if (absl::IsResourceExhausted(status)) return status;
  const bool sticky = IsStickyCudaError(code);
  if (sticky && lost_.exchange(true)) return status;  // said so already
  LogError(absl::StrCat(description_, ": ", status.message(),
                        sticky ? "; the GPU context is lost, every data operation now fails "
                                 "with EIO until nothing is stored"
                               : ""));
  return status;
}

}  // namespace cudafs
