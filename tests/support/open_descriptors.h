// OpenDescriptors: how many descriptors this process has open, for tests
// that check a call keeps none it was handed or made.
#ifndef CUDAFS_TESTS_SUPPORT_OPEN_DESCRIPTORS_H_
#define CUDAFS_TESTS_SUPPORT_OPEN_DESCRIPTORS_H_

#include <dirent.h>

namespace cudafs_test {

// Counts the entries of /proc/self/fd (the directory's own descriptor and
// "." and ".." included: compare counts, not values).
inline int OpenDescriptors() {
  int count = 0;
  DIR* fds = opendir("/proc/self/fd");
  if (fds == nullptr) return -1;
  while (readdir(fds) != nullptr) ++count;
  closedir(fds);
  return count;
}

}  // namespace cudafs_test

#endif  // CUDAFS_TESTS_SUPPORT_OPEN_DESCRIPTORS_H_
