// The scatter kernel's PTX must compile for the GPUs cudafs runs on. The
// driver compiles it when a CUDA mount starts; here the toolkit's ptxas
// checks it without a GPU (skipped where the toolkit is not installed). What
// the kernel does is tested on a GPU by cuda_device_test.
#include "alloc/devices/scatter_kernel.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace cudafs {
namespace {

std::string FindPtxas() {
  for (const char* candidate : {"/usr/local/cuda/bin/ptxas", "/usr/bin/ptxas"}) {
    if (access(candidate, X_OK) == 0) return candidate;
  }
  return "";
}

TEST(ScatterKernelTest, PtxCompilesForHopperAndTuring) {
  const std::string ptxas = FindPtxas();
  if (ptxas.empty()) GTEST_SKIP() << "no ptxas (CUDA toolkit) on this machine";
  // The kernel's entry point is the one CudaDevice looks up.
  ASSERT_NE(std::string(kScatterKernelPtx).find(absl::StrCat(".entry ", kScatterKernelName, "(")),
            std::string::npos);
  const std::string dir = testing::TempDir();
  const std::string source = absl::StrCat(dir, "/scatter_kernel_test.ptx");
  {
    std::ofstream out(source);
    out << kScatterKernelPtx;
    ASSERT_TRUE(out.good());
  }
  for (const char* arch : {"sm_90", "sm_75"}) {
    const std::string log = absl::StrCat(dir, "/scatter_kernel_test.", arch, ".log");
    const std::string command = absl::StrCat(ptxas, " -arch=", arch, " ", source,
                                             " -o /dev/null >", log, " 2>&1");
    const int status = std::system(command.c_str());
    std::ifstream in(log);
    const std::string output((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
    EXPECT_EQ(status, 0) << arch << ": " << output;
  }
  std::remove(source.c_str());
}

}  // namespace
}  // namespace cudafs
