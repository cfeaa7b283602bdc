#include "fs/fuse/request_counters.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace cudafs {
namespace {

TEST(RequestCountersTest, EveryTypeIsPrintedZerosIncluded) {
  const RequestCounters counters;
  const std::string text = counters.ToText();
  EXPECT_TRUE(text.starts_with("requests_init 0\nrequests_lookup 0\n")) << text;
  EXPECT_NE(text.find("requests_batch_forget 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("requests_lseek 0\nforgotten_inodes 0\nhandler_ns_init 0\n"),
            std::string::npos)
      << text;
  EXPECT_TRUE(text.ends_with("handler_ns_lseek 0\n")) << text;
}

// A handler's time goes to its type alone, and adds up.
TEST(RequestCountersTest, HandlerTimeAddsUpByType) {
  RequestCounters counters;
  counters.Count(FuseRequest::unlink);
  counters.CountHandlerTime(FuseRequest::unlink, 1500);
  counters.Count(FuseRequest::unlink);
  counters.CountHandlerTime(FuseRequest::unlink, 2500);
  counters.CountHandlerTime(FuseRequest::lookup, 7);
  const std::string text = counters.ToText();
  EXPECT_NE(text.find("requests_unlink 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("handler_ns_unlink 4000\n"), std::string::npos) << text;
  EXPECT_NE(text.find("handler_ns_lookup 7\n"), std::string::npos) << text;
  EXPECT_NE(text.find("requests_lookup 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("handler_ns_rmdir 0\n"), std::string::npos) << text;
}

// Threads on whatever CPUs the scheduler picks, moving between them: the
// shards add up to every count, none lost and none given to another type.
TEST(RequestCountersTest, ConcurrentCountsAddUp) {
  RequestCounters counters;
  constexpr int kThreads = 16;
  constexpr int kPerThread = 100000;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&counters, i] {
      for (int j = 0; j < kPerThread; ++j) {
        counters.Count(i % 2 == 0 ? FuseRequest::lookup : FuseRequest::getattr);
        if (j % 10 == 0) counters.CountForgotten(3);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const std::string text = counters.ToText();
  const std::string half = std::to_string(kThreads / 2 * kPerThread);
  EXPECT_NE(text.find("requests_lookup " + half + "\n"), std::string::npos) << text;
  EXPECT_NE(text.find("requests_getattr " + half + "\n"), std::string::npos) << text;
  EXPECT_NE(text.find("requests_create 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("forgotten_inodes " + std::to_string(kThreads * kPerThread / 10 * 3) + "\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace cudafs
