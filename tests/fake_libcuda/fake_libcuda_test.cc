// The fake driver as libcuda.so.1 (fake_libcuda_config.h): loaded with
// dlopen as programs load the driver, in processes of their own that share
// the GPUs' memory through one state file.
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include "alloc/devices/cuda_api.h"
#include "gtest/gtest.h"
#include "tests/fake_libcuda/fake_libcuda_config.h"
#include "tests/support/fake_cuda_program_api.h"
#include "tests/support/processes.h"
#include "tests/support/temp_dir.h"

#ifndef CUDAFS_FAKE_LIBCUDA
#error "CUDAFS_FAKE_LIBCUDA must name the built libcuda.so.1"
#endif

namespace cudafs {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

TEST(ParseFakeGpusTest, CountsAndSizes) {
  absl::StatusOr<std::vector<FakeGpuOptions>> gpus = ParseFakeGpus("");
  ASSERT_TRUE(gpus.ok());
  ASSERT_EQ(gpus->size(), 1u);
  EXPECT_EQ((*gpus)[0].total_bytes, 8 * kGiB);
  gpus = ParseFakeGpus("2x8G, 512m,4096");
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  ASSERT_EQ(gpus->size(), 4u);
  EXPECT_EQ((*gpus)[1].total_bytes, 8 * kGiB);
  EXPECT_EQ((*gpus)[2].total_bytes, 512 * kMiB);
  EXPECT_EQ((*gpus)[3].total_bytes, 4096u);
  EXPECT_EQ((*gpus)[0].pci_bus_id, "0000:65:00.0");
  EXPECT_EQ((*gpus)[3].pci_bus_id, "0000:68:00.0");
  for (const char* bad : {"0x8G", "8Q", "x8G", "2x", "8G,,1G", "17x1G", "-1G"}) {
    EXPECT_FALSE(ParseFakeGpus(bad).ok()) << bad;
  }
}

// The driver as a program sees it: the library loaded by path (this test
// process never loads it, so each child starts afresh).
class Driver {
 public:
  Driver() : library_(dlopen(CUDAFS_FAKE_LIBCUDA, RTLD_NOW | RTLD_LOCAL)) {
    if (library_ == nullptr) Fail(dlerror());
  }

  void* Symbol(const char* name) const { return dlsym(library_, name); }

  template <typename Function>
  Function Get(const char* name) const {
    auto function = reinterpret_cast<Function>(Symbol(name));
    if (function == nullptr) Fail(name);
    return function;
  }

  [[noreturn]] static void Fail(const std::string& why) {
    std::fprintf(stderr, "child: %s\n", why.c_str());
    _exit(100);
  }

  // Initialises the driver and makes device 0's primary context current.
  void Enter(int device = 0) const {
    Check(Get<cu::cuInit_t>("cuInit")(0), "cuInit");
    cu::CUcontext context = nullptr;
    Check(Get<cu::cuDevicePrimaryCtxRetain_t>("cuDevicePrimaryCtxRetain")(&context, device),
          "cuDevicePrimaryCtxRetain");
    Check(Get<cu::cuCtxSetCurrent_t>("cuCtxSetCurrent")(context), "cuCtxSetCurrent");
  }

  cu::CUresult Alloc(cu::CUdeviceptr* pointer, size_t size) const {
    return Get<cu::cuMemAlloc_t>("cuMemAlloc_v2")(pointer, size);
  }
  cu::CUresult Free(cu::CUdeviceptr pointer) const {
    return Get<cu::cuMemFree_t>("cuMemFree_v2")(pointer);
  }
  uint64_t FreeBytes() const {
    size_t free = 0, total = 0;
    Check(Get<cu::cuMemGetInfo_t>("cuMemGetInfo_v2")(&free, &total), "cuMemGetInfo_v2");
    return free;
  }

  static void Check(cu::CUresult result, const char* call) {
    if (result != cu::CUDA_SUCCESS) Fail(std::string(call) + " failed: " + std::to_string(result));
  }
  static void Expect(bool ok, const std::string& what) {
    if (!ok) Fail(what);
  }

 private:
  void* const library_;
};

// A child process that runs `body` on the driver, with `environment` set
// before it loads it.
class Child {
 public:
  Child(const std::vector<std::pair<std::string, std::string>>& environment,
        const std::function<void(const Driver&, int go)>& body) {
    int go_pipe[2];
    if (pipe(go_pipe) != 0) std::abort();
    pid_ = fork();
    if (pid_ == 0) {
      close(go_pipe[1]);
      for (const auto& [name, value] : environment) setenv(name.c_str(), value.c_str(), 1);
      Driver driver;
      body(driver, go_pipe[0]);
      _exit(0);
    }
    close(go_pipe[0]);
    go_ = go_pipe[1];
  }
  ~Child() {
    if (go_ >= 0) close(go_);
    if (pid_ > 0 && !waited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // Lets a child waiting in Wait() go on.
  void Go() { EXPECT_EQ(write(go_, "g", 1), 1); }

  // The child's exit status (0: all went as expected).
  int Join() {
    int status = 0;
    EXPECT_EQ(waitpid(pid_, &status, 0), pid_);
    waited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  // In the child: waits for Go().
  static void Wait(int go) {
    char byte;
    if (read(go, &byte, 1) != 1) _exit(101);
  }

 private:
  pid_t pid_ = -1;
  int go_ = -1;
  bool waited_ = false;
};

class FakeLibcudaTest : public testing::Test {
 protected:
  std::vector<std::pair<std::string, std::string>> Environment(const std::string& gpus) const {
    return {{"CUDAFS_FAKE_GPUS", gpus}, {"CUDAFS_FAKE_CUDA_STATE", dir_.path() + "/state"}};
  }

  // Runs `body` in a child, and expects it to exit 0.
  void InChild(const std::string& gpus, const std::function<void(const Driver&)>& body) {
    Child child(Environment(gpus), [&](const Driver& driver, int) { body(driver); });
    EXPECT_EQ(child.Join(), 0);
  }

  cudafs_test::TempDir dir_;
};

TEST_F(FakeLibcudaTest, ExportsTheDriversSymbolsAndNothingElse) {
  InChild("1G", [](const Driver& driver) {
    for (const char* name : {"cuInit",
                             "cuDriverGetVersion",
                             "cuGetProcAddress",
                             "cuGetProcAddress_v2",
                             "cuGetErrorName",
                             "cuGetErrorString",
                             "cuDeviceGetCount",
                             "cuDeviceGet",
                             "cuDeviceGetName",
                             "cuDeviceGetPCIBusId",
                             "cuDeviceGetByPCIBusId",
                             "cuDeviceTotalMem_v2",
                             "cuDeviceGetAttribute",
                             "cuDeviceCanAccessPeer",
                             "cuDevicePrimaryCtxRetain",
                             "cuDevicePrimaryCtxRelease_v2",
                             "cuCtxSetCurrent",
                             "cuCtxGetCurrent",
                             "cuCtxGetDevice",
                             "cuCtxSynchronize",
                             "cuMemGetInfo_v2",
                             "cuMemGetAllocationGranularity",
                             "cuMemAddressReserve",
                             "cuMemAddressFree",
                             "cuMemCreate",
                             "cuMemRelease",
                             "cuMemMap",
                             "cuMemUnmap",
                             "cuMemSetAccess",
                             "cuMemExportToShareableHandle",
                             "cuMemImportFromShareableHandle",
                             "cuMemHostAlloc",
                             "cuMemFreeHost",
                             "cuMemHostRegister_v2",
                             "cuMemHostUnregister",
                             "cuStreamCreate",
                             "cuStreamDestroy_v2",
                             "cuStreamSynchronize",
                             "cuStreamQuery",
                             "cuMemcpyAsync",
                             "cuMemcpyBatchAsync_v2",
                             "cuMemsetD8Async",
                             "cuModuleLoadData",
                             "cuModuleUnload",
                             "cuModuleGetFunction",
                             "cuLaunchKernel",
                             "cuMemAlloc_v2",
                             "cuMemFree_v2",
                             "cuMemAllocPitch_v2",
                             "cuMemAllocManaged",
                             "cuMemAllocAsync",
                             "cuMemFreeAsync",
                             "cuMemAllocFromPoolAsync",
                             "cuDeviceGetDefaultMemPool"}) {
      Driver::Expect(driver.Symbol(name) != nullptr, std::string("no ") + name);
    }
    // Neither our code nor abseil: a program's own copies are not replaced.
    Driver::Expect(driver.Symbol("_ZN4absl5Mutex4LockEv") == nullptr, "abseil exported");
    Driver::Expect(driver.Symbol("_ZN6cudafs10CudaDriver4LoadEv") == nullptr, "cudafs exported");
    // The old ABIs are not there, as the driver's are not served here.
    Driver::Expect(driver.Symbol("cuMemAlloc") == nullptr, "cuMemAlloc (v1) exported");

    int version = 0;
    Driver::Check(driver.Get<cu::cuDriverGetVersion_t>("cuDriverGetVersion")(&version),
                  "cuDriverGetVersion");
    Driver::Expect(version >= cu::kOldestDriverVersion, "driver version");
    int count = -1;
    Driver::Expect(driver.Get<cu::cuDeviceGetCount_t>("cuDeviceGetCount")(&count) ==
                       cu::CUDA_ERROR_NOT_INITIALIZED,
                   "cuDeviceGetCount before cuInit");
    // What cuGetProcAddress hands out before cuInit waits for it too.
    auto get_proc_address = driver.Get<cu::cuGetProcAddress_t>("cuGetProcAddress_v2");
    void* function = nullptr;
    cu::CUdriverProcAddressQueryResult found = cu::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    Driver::Check(get_proc_address("cuMemAlloc", &function, cu::cuMemAlloc_version,
                                   cu::CU_GET_PROC_ADDRESS_DEFAULT, &found),
                  "cuGetProcAddress_v2");
    Driver::Expect(
        found == cu::CU_GET_PROC_ADDRESS_SUCCESS && function == driver.Symbol("cuMemAlloc_v2"),
        "cuMemAlloc through cuGetProcAddress_v2");
    Driver::Check(get_proc_address("cuNoSuchThing", &function, 12000,
                                   cu::CU_GET_PROC_ADDRESS_DEFAULT, &found),
                  "cuGetProcAddress_v2");
    Driver::Expect(found == cu::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, "an unknown symbol found");
    Driver::Check(
        get_proc_address("cuInit", &function, 2000, cu::CU_GET_PROC_ADDRESS_DEFAULT, &found),
        "cuGetProcAddress_v2");
    reinterpret_cast<cu::cuInit_t>(function)(0);
    Driver::Check(driver.Get<cu::cuDeviceGetCount_t>("cuDeviceGetCount")(&count),
                  "cuDeviceGetCount");
    Driver::Expect(count == 1, "one GPU");
    size_t total = 0;
    Driver::Check(driver.Get<cu::cuDeviceTotalMem_t>("cuDeviceTotalMem_v2")(&total, 0),
                  "cuDeviceTotalMem_v2");
    Driver::Expect(total == kGiB, "1 GiB");
  });
}

TEST_F(FakeLibcudaTest, ABadConfigurationFailsCuInit) {
  Child child({{"CUDAFS_FAKE_GPUS", "lots"}}, [](const Driver& driver, int) {
    Driver::Expect(driver.Get<cu::cuInit_t>("cuInit")(0) == cu::CUDA_ERROR_INVALID_VALUE,
                   "cuInit with CUDAFS_FAKE_GPUS=lots");
  });
  EXPECT_EQ(child.Join(), 0);
  InChild("1G", [](const Driver& driver) { driver.Enter(); });
  // The state was made for one GPU of 1 GiB.
  InChild("2G", [](const Driver& driver) {
    Driver::Expect(driver.Get<cu::cuInit_t>("cuInit")(0) == cu::CUDA_ERROR_INVALID_VALUE,
                   "cuInit on a state made for other GPUs");
  });
}

TEST_F(FakeLibcudaTest, ProcessesShareEachGpusMemory) {
  // One process holds 768 MiB of GPU 0's 1 GiB and 1 GiB of GPU 1's 2 GiB.
  Child holder(Environment("1G,2G"), [](const Driver& driver, int go) {
    driver.Enter(1);
    cu::CUdeviceptr on_1 = 0;
    Driver::Check(driver.Alloc(&on_1, kGiB), "cuMemAlloc_v2 on GPU 1");
    driver.Enter(0);
    cu::CUdeviceptr pointer = 0;
    Driver::Check(driver.Alloc(&pointer, 768 * kMiB), "cuMemAlloc_v2");
    Child::Wait(go);  // while the others look
    Driver::Check(driver.Free(pointer), "cuMemFree_v2");
    Child::Wait(go);  // exits holding GPU 1's
  });
  // Wait until the holder has its memory.
  InChild("1G,2G", [](const Driver& driver) {
    driver.Enter();
    for (int i = 0; i < 1000 && driver.FreeBytes() != 256 * kMiB; ++i) usleep(10000);
  });
  InChild("1G,2G", [](const Driver& driver) {
    driver.Enter();
    Driver::Expect(driver.FreeBytes() == 256 * kMiB, "free while another holds 768 MiB");
    cu::CUdeviceptr pointer = 0;
    Driver::Expect(driver.Alloc(&pointer, 512 * kMiB) == cu::CUDA_ERROR_OUT_OF_MEMORY,
                   "512 MiB with 256 MiB free");
    auto managed = driver.Get<cu::cuMemAllocManaged_t>("cuMemAllocManaged");
    Driver::Expect(
        managed(&pointer, 512 * kMiB, cu::CU_MEM_ATTACH_GLOBAL) == cu::CUDA_ERROR_OUT_OF_MEMORY,
        "512 MiB managed with 256 MiB free");
    Driver::Check(driver.Alloc(&pointer, 256 * kMiB), "the last 256 MiB");
    Driver::Expect(driver.FreeBytes() == 0, "nothing left");
    Driver::Check(driver.Free(pointer), "cuMemFree_v2");
    Driver::Expect(driver.FreeBytes() == 256 * kMiB, "given back");
    // GPU 1 has its own memory: 1 GiB of its 2 GiB.
    driver.Enter(1);
    Driver::Expect(driver.FreeBytes() == kGiB, "GPU 1's free");
  });
  holder.Go();
  InChild("1G,2G", [](const Driver& driver) {
    driver.Enter();
    for (int i = 0; i < 1000 && driver.FreeBytes() != kGiB; ++i) usleep(10000);
    Driver::Expect(driver.FreeBytes() == kGiB, "all free once the holder freed");
    driver.Enter(1);
    Driver::Expect(driver.FreeBytes() == kGiB, "GPU 1 still held");
  });
  holder.Go();
  EXPECT_EQ(holder.Join(), 0);
  // Its process gone, what it held is free again.
  InChild("1G,2G", [](const Driver& driver) {
    driver.Enter(1);
    Driver::Expect(driver.FreeBytes() == 2 * kGiB, "a dead process's memory reclaimed");
    cu::CUdeviceptr pointer = 0;
    Driver::Check(driver.Alloc(&pointer, 2 * kGiB), "all of GPU 1");
  });
}

TEST_F(FakeLibcudaTest, PythonLoadsItWithCtypes) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "python3 cannot load a sanitized library";
#endif
  if (!cudafs_test::HaveTool("python3")) GTEST_SKIP() << "no python3";
  const std::string script = R"(
import ctypes, sys
cuda = ctypes.CDLL(sys.argv[1])
assert cuda.cuInit(0) == 0
context = ctypes.c_void_p()
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), 0) == 0
assert cuda.cuCtxSetCurrent(context) == 0
pointer = ctypes.c_uint64()
assert cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(1 << 30)) == 0
free, total = ctypes.c_size_t(), ctypes.c_size_t()
assert cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
assert (free.value, total.value) == (1 << 30, 2 << 30), (free.value, total.value)
assert cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(2 << 30)) == 2
print("ok")
)";
  const cudafs_test::CommandResult result = cudafs_test::RunShell(
      "CUDAFS_FAKE_GPUS=2G CUDAFS_FAKE_CUDA_STATE=" + dir_.path() + "/state python3 -c " +
      cudafs_test::ShellQuote(script) + " " + CUDAFS_FAKE_LIBCUDA);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "ok\n");
}

}  // namespace
}  // namespace cudafs
