// The Python module (fs/client/python/cudafs) repeats the constants of
// cudafs.h that ctypes cannot read from the library: they must be the
// header's. Read from the module's source, so no Python is needed.
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "fs/client/cudafs.h"
#include "gtest/gtest.h"

namespace {

// The module's top-level `_NAME = integer` assignments.
std::map<std::string, long> ModuleConstants() {
  std::ifstream file(CUDAFS_SOURCE_DIR "/fs/client/python/cudafs/__init__.py");
  std::stringstream text;
  text << file.rdbuf();
  const std::string source = text.str();
  std::map<std::string, long> constants;
  const std::regex assignment(R"(^(_[A-Z_]+) = (\d+)$)", std::regex::multiline);
  for (auto it = std::sregex_iterator(source.begin(), source.end(), assignment);
       it != std::sregex_iterator(); ++it) {
    constants[(*it)[1]] = std::stol((*it)[2]);
  }
  return constants;
}

TEST(ClientPythonModuleTest, ConstantsAreTheHeaders) {
  const std::map<std::string, long> constants = ModuleConstants();
  ASSERT_FALSE(constants.empty()) << "the module was not found or has no constants";
  const std::map<std::string, long> expected = {
      {"_MAP_WRITABLE", CUDAFS_MAP_WRITABLE},
      {"_HOST", CUDAFS_MEMORY_HOST},
      {"_ROOM_ALL", CUDAFS_ROOM_ALL},
      {"_ROOM_HOLD", CUDAFS_ROOM_HOLD},
      {"_CUDA", CUDAFS_MEMORY_CUDA},
  };
  EXPECT_EQ(constants, expected);
}

}  // namespace
