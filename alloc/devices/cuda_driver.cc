#include "alloc/devices/cuda_driver.h"

#include <dlfcn.h>

#include <algorithm>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace cudafs {
namespace {

// The loader entry point is the one symbol we look up with dlsym; its
// _v2 form (CUDA 12+) also reports whether a symbol exists at all.
using GetProcAddressFn = CUresult (*)(const char* symbol, void** function, int cuda_version,
                                      cuuint64_t flags,
                                      CUdriverProcAddressQueryResult* symbol_status);
using InitFn = CUresult (*)(unsigned int flags);

absl::StatusOr<CudaDriver*> LoadDriver() {
  // RTLD_NODELETE: entry points stay valid for the whole process, even in
  // static destructors that run after us.
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (library == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot load the NVIDIA driver (libcuda.so.1): ", dlerror()));
  }
  auto get_proc_address =
      reinterpret_cast<GetProcAddressFn>(dlsym(library, "cuGetProcAddress_v2"));
  auto init = reinterpret_cast<InitFn>(dlsym(library, "cuInit"));
  if (get_proc_address == nullptr || init == nullptr) {
    return absl::UnavailableError(
        "the NVIDIA driver is too old for cudafs (it lacks cuGetProcAddress_v2; need CUDA 12+)");
  }
  auto driver = std::make_unique<CudaDriver>();
  const CUresult init_result = init(0);
  if (init_result != CUDA_SUCCESS) {
    // The entry points are not resolved yet: look the message up directly.
    auto error_string = reinterpret_cast<CUresult (*)(CUresult, const char**)>(
        dlsym(library, "cuGetErrorString"));
    const char* why = nullptr;
    if (error_string == nullptr || error_string(init_result, &why) != CUDA_SUCCESS) {
      why = "unknown error";
    }
    return absl::UnavailableError(
        absl::StrCat("cuInit failed: ", why, " (CUresult ", static_cast<int>(init_result), ")"));
  }
  auto driver_get_version =
      reinterpret_cast<CUresult (*)(int*)>(dlsym(library, "cuDriverGetVersion"));
  int driver_version = 0;
  if (driver_get_version == nullptr || driver_get_version(&driver_version) != CUDA_SUCCESS) {
    return absl::UnavailableError("cuDriverGetVersion failed");
  }
  driver->version = driver_version;
  // Ask for the entry points as they were at the API version of our
  // headers, or the driver's own when it is older: the members' types are
  // the headers' declarations.
  const int api_version = std::min(driver_version, CUDA_VERSION);
  absl::Status missing = absl::OkStatus();
  auto lookup = [&](const char* name, void** slot, int version) {
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    const CUresult result =
        get_proc_address(name, slot, version, CU_GET_PROC_ADDRESS_DEFAULT, &found);
    if (result != CUDA_SUCCESS || found != CU_GET_PROC_ADDRESS_SUCCESS) *slot = nullptr;
    return *slot != nullptr;
  };
  auto resolve = [&](const char* name, void** slot) {
    if (!lookup(name, slot, api_version) && missing.ok()) {
      missing = absl::UnavailableError(absl::StrCat(
          "the NVIDIA driver (CUDA ", driver_version / 1000, ".", driver_version % 1000 / 10,
          ") lacks ", name));
    }
  };
#define CUDAFS_RESOLVE_ENTRY_POINT(name) \
  resolve(#name, reinterpret_cast<void**>(&driver->name));
  CUDAFS_CUDA_ENTRY_POINTS(CUDAFS_RESOLVE_ENTRY_POINT)
#undef CUDAFS_RESOLVE_ENTRY_POINT
  // Optional ones only as declared in our headers: an older driver's
  // version of a newer call may take other arguments (cuMemcpyBatchAsync
  // did before CUDA 13).
  if (driver_version >= CUDA_VERSION) {
#define CUDAFS_LOOK_UP_ENTRY_POINT(name) \
  lookup(#name, reinterpret_cast<void**>(&driver->name), CUDA_VERSION);
    CUDAFS_CUDA_OPTIONAL_ENTRY_POINTS(CUDAFS_LOOK_UP_ENTRY_POINT)
#undef CUDAFS_LOOK_UP_ENTRY_POINT
  }
  if (!missing.ok()) return missing;
  return driver.release();
}

}  // namespace

absl::StatusOr<const CudaDriver*> CudaDriver::Load() {
  // Loaded once; a failure is remembered too (the answer will not change).
  static const absl::StatusOr<CudaDriver*>* const loaded =
      new absl::StatusOr<CudaDriver*>(LoadDriver());
  if (!loaded->ok()) return loaded->status();
  return **loaded;
}

std::string CudaDriver::DeviceName(int device) const {
  char name[256] = {};
  if (cuDeviceGetName(name, sizeof name, device) != CUDA_SUCCESS) return "?";
  return name;
}

std::string CudaDriver::PciBusId(int device) const {
  char bus_id[32] = {};
  if (cuDeviceGetPCIBusId(bus_id, sizeof bus_id, device) != CUDA_SUCCESS) return "?";
  return absl::AsciiStrToLower(bus_id);
}

std::string CudaDriver::Describe(absl::string_view call, CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName(result, &name) != CUDA_SUCCESS) name = nullptr;
  if (cuGetErrorString(result, &text) != CUDA_SUCCESS) text = nullptr;
  return absl::StrCat(call, ": ", name != nullptr ? name : "CUresult ",
                      name != nullptr ? "" : absl::StrCat(static_cast<int>(result)),
                      text != nullptr ? absl::StrCat(" (", text, ")") : "");
}

absl::Status CudaDriver::Check(absl::string_view call, CUresult result) const {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  if (result == CUDA_ERROR_OUT_OF_MEMORY) {
    return absl::ResourceExhaustedError(Describe(call, result));
  }
  return absl::InternalError(Describe(call, result));
}

bool IsStickyCudaError(CUresult result) {
  switch (result) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
      return true;
    default:
      return false;
  }
}

}  // namespace cudafs
