// Eventually: polls a condition until it holds or a deadline passes, for
// effects that come a moment after the call that caused them (a context
// dropped once idle, pages flushed in the background, FUSE's asynchronous
// release and forget).
#ifndef CUDAFS_TESTS_SUPPORT_EVENTUALLY_H_
#define CUDAFS_TESTS_SUPPORT_EVENTUALLY_H_

#include <chrono>
#include <functional>

namespace cudafs_test {

// Whether `condition` held before `timeout` passed; checked every 10 ms.
bool Eventually(const std::function<bool()>& condition,
                std::chrono::milliseconds timeout = std::chrono::seconds(5));

}  // namespace cudafs_test

#endif  // CUDAFS_TESTS_SUPPORT_EVENTUALLY_H_
