#include "alloc/devices/cuda_driver.h"

#include <dlfcn.h>

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace cudafs {
namespace {

absl::StatusOr<CudaDriver*> LoadDriver() {
  // RTLD_NODELETE: entry points stay valid for the whole process, even in
  // static destructors that run after us.
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (library == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot load the NVIDIA driver (libcuda.so.1): ", dlerror()));
  }
  // The loader entry point is the one symbol we look up with dlsym, in its
  // _v2 form (CUDA 12.0+), which also says whether a symbol exists at all.
  auto get_proc_address =
      reinterpret_cast<cu::cuGetProcAddress_t>(dlsym(library, "cuGetProcAddress_v2"));
  auto init = reinterpret_cast<cu::cuInit_t>(dlsym(library, "cuInit"));
  if (get_proc_address == nullptr || init == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "the NVIDIA driver is too old for cudafs (it lacks cuGetProcAddress_v2; need CUDA ",
        CudaDriver::VersionName(cu::kOldestDriverVersion), "+)"));
  }
  const cu::CUresult init_result = init(0);
  if (init_result != cu::CUDA_SUCCESS) {
    // The entry points are not resolved yet: look the message up directly.
    auto error_string =
        reinterpret_cast<cu::cuGetErrorString_t>(dlsym(library, "cuGetErrorString"));
    const char* why = nullptr;
    if (error_string == nullptr || error_string(init_result, &why) != cu::CUDA_SUCCESS) {
      why = "unknown error";
    }
    return absl::UnavailableError(
        absl::StrCat("cuInit failed: ", why, " (CUresult ", static_cast<int>(init_result), ")"));
  }
  auto driver_get_version =
      reinterpret_cast<cu::cuDriverGetVersion_t>(dlsym(library, "cuDriverGetVersion"));
  int driver_version = 0;
  if (driver_get_version == nullptr || driver_get_version(&driver_version) != cu::CUDA_SUCCESS) {
    return absl::UnavailableError("cuDriverGetVersion failed");
  }
  if (driver_version < cu::kOldestDriverVersion) {
    return absl::UnavailableError(
        absl::StrCat("the NVIDIA driver (CUDA ", CudaDriver::VersionName(driver_version),
                     ") is too old for cudafs: need CUDA ",
                     CudaDriver::VersionName(cu::kOldestDriverVersion), "+"));
  }
  absl::StatusOr<CudaDriver> driver = CudaDriver::Resolve(get_proc_address, driver_version);
  if (!driver.ok()) return driver.status();
  return new CudaDriver(*std::move(driver));
}

}  // namespace

absl::StatusOr<CudaDriver> CudaDriver::Resolve(cu::cuGetProcAddress_t get_proc_address,
                                               int version) {
  CudaDriver driver;
  driver.version = version;
  auto lookup = [&](const char* name, void** slot, int declared) {
    *slot = cu::ProcAddress(get_proc_address, version, name, declared);
    return *slot != nullptr;
  };
  absl::Status missing = absl::OkStatus();
  auto resolve = [&](const char* name, void** slot, int declared) {
    if (!lookup(name, slot, declared) && missing.ok()) {
      missing = absl::UnavailableError(absl::StrCat("the NVIDIA driver (CUDA ",
                                                    VersionName(version), ") lacks ", name,
                                                    " (CUDA ", VersionName(declared), ")"));
    }
  };
#define CUDAFS_RESOLVE_ENTRY_POINT(name) \
  resolve(#name, reinterpret_cast<void**>(&driver.name), cu::name##_version);
  CUDAFS_CUDA_ENTRY_POINTS(CUDAFS_RESOLVE_ENTRY_POINT)
#undef CUDAFS_RESOLVE_ENTRY_POINT
#define CUDAFS_LOOK_UP_ENTRY_POINT(name) \
  lookup(#name, reinterpret_cast<void**>(&driver.name), cu::name##_version);
  CUDAFS_CUDA_OPTIONAL_ENTRY_POINTS(CUDAFS_LOOK_UP_ENTRY_POINT)
#undef CUDAFS_LOOK_UP_ENTRY_POINT
  if (!missing.ok()) return missing;
  return driver;
}

std::string CudaDriver::VersionName(int version) {
  return absl::StrCat(version / 1000, ".", version % 1000 / 10);
}

absl::StatusOr<const CudaDriver*> CudaDriver::Load() {
  // Loaded once; a failure is remembered too (the answer will not change).
  static const absl::StatusOr<CudaDriver*>* const loaded =
      new absl::StatusOr<CudaDriver*>(LoadDriver());
  if (!loaded->ok()) return loaded->status();
  return **loaded;
}

std::string CudaDriver::DeviceName(int device) const {
  char name[256] = {};
  if (cuDeviceGetName(name, sizeof name, device) != cu::CUDA_SUCCESS) return "?";
  return name;
}

std::string CudaDriver::PciBusId(int device) const {
  char bus_id[32] = {};
  if (cuDeviceGetPCIBusId(bus_id, sizeof bus_id, device) != cu::CUDA_SUCCESS) return "?";
  return absl::AsciiStrToLower(bus_id);
}

std::string CudaDriver::Describe(absl::string_view call, cu::CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName(result, &name) != cu::CUDA_SUCCESS) name = nullptr;
  if (cuGetErrorString(result, &text) != cu::CUDA_SUCCESS) text = nullptr;
  return absl::StrCat(call, ": ", name != nullptr ? name : "CUresult ",
                      name != nullptr ? "" : absl::StrCat(static_cast<int>(result)),
                      text != nullptr ? absl::StrCat(" (", text, ")") : "");
}

absl::Status CudaDriver::Check(absl::string_view call, cu::CUresult result) const {
  if (result == cu::CUDA_SUCCESS) return absl::OkStatus();
  if (result == cu::CUDA_ERROR_OUT_OF_MEMORY) {
    return absl::ResourceExhaustedError(Describe(call, result));
  }
  return absl::InternalError(Describe(call, result));
}

bool IsStickyCudaError(cu::CUresult result) {
  switch (result) {
    case cu::CUDA_ERROR_ILLEGAL_ADDRESS:
    case cu::CUDA_ERROR_LAUNCH_FAILED:
    case cu::CUDA_ERROR_HARDWARE_STACK_ERROR:
    case cu::CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case cu::CUDA_ERROR_MISALIGNED_ADDRESS:
    case cu::CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case cu::CUDA_ERROR_INVALID_PC:
    case cu::CUDA_ERROR_ECC_UNCORRECTABLE:
    case cu::CUDA_ERROR_CONTEXT_IS_DESTROYED:
      return true;
    default:
      return false;
  }
}

}  // namespace cudafs
