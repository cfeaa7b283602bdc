// The fake CUDA driver (tests/support/fake_cuda_driver.h) built as a
// libcuda.so.1 (target fake_libcuda, build/fake_libcuda/libcuda.so.1), so
// that cudafs itself, or any program that loads the driver (dlopen,
// ctypes, linking), runs on fake GPUs:
//
//   LD_LIBRARY_PATH=build/fake_libcuda build/cudafs /mnt -o backend=cuda
//
// It exports cuInit, cuDriverGetVersion, cuGetProcAddress (and _v2),
// cuGetErrorName, cuGetErrorString and every entry point the fake serves
// (fake_cuda_program_api.h's included) under the symbol the real driver
// exports for it (cuMemAlloc_v2, cuMemGetInfo_v2, cuStreamDestroy_v2...),
// and nothing else. Until cuInit, the others fail with
// CUDA_ERROR_NOT_INITIALIZED.
//
// Its configuration, read from the environment at the first cuInit (or
// cuGetProcAddress, cuDriverGetVersion, cuGetError*):
//
//   CUDAFS_FAKE_GPUS         the GPUs and their memory: a comma list of
//                            [COUNTx]SIZE, SIZE in bytes or with a K, M, G
//                            or T suffix (powers of 1024): "2x8G", "8G,24G".
//                            Default: one GPU of 8 GiB. Device i has PCI
//                            bus id 0000:(0x65+i):00.0.
//   CUDAFS_FAKE_CUDA_STATE   a file (created if missing) through which the
//                            processes that name it share the GPUs' memory
//                            (fake_cuda_shared_budget.h): what one holds is
//                            not free for the others, and cuMemGetInfo says
//                            what all hold. They must agree on
//                            CUDAFS_FAKE_GPUS. Unset: each process has GPUs
//                            of its own.
//
// A bad configuration makes cuInit fail with CUDA_ERROR_INVALID_VALUE,
// saying why on stderr.
#ifndef CUDAFS_TESTS_FAKE_LIBCUDA_FAKE_LIBCUDA_CONFIG_H_
#define CUDAFS_TESTS_FAKE_LIBCUDA_FAKE_LIBCUDA_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tests/support/fake_cuda_driver.h"

namespace cudafs {

struct FakeLibcudaConfig {
  std::vector<FakeGpuOptions> gpus;
  std::string state_path;  // empty: not shared
};

// The GPUs a CUDAFS_FAKE_GPUS value names (empty: the default).
absl::StatusOr<std::vector<FakeGpuOptions>> ParseFakeGpus(absl::string_view spec);

// The configuration the environment gives.
absl::StatusOr<FakeLibcudaConfig> FakeLibcudaConfigFromEnvironment();

}  // namespace cudafs

#endif  // CUDAFS_TESTS_FAKE_LIBCUDA_FAKE_LIBCUDA_CONFIG_H_
