// UnescapeMountField (fs/wire/mountinfo_field.h).
#include "fs/wire/mountinfo_field.h"

#include "gtest/gtest.h"

namespace cudafs {
namespace {

TEST(MountinfoFieldTest, OctalEscapesAreUndone) {
  EXPECT_EQ(UnescapeMountField("/mnt/gpu"), "/mnt/gpu");
  EXPECT_EQ(UnescapeMountField("/mnt/my\\040gpu"), "/mnt/my gpu");
  EXPECT_EQ(UnescapeMountField("/a\\011b\\012c\\134d"), "/a\tb\nc\\d");
}

TEST(MountinfoFieldTest, WhatIsNoEscapeIsKeptAsItIs) {
  EXPECT_EQ(UnescapeMountField("/a\\04"), "/a\\04");
  EXPECT_EQ(UnescapeMountField("/a\\089"), "/a\\089");
  EXPECT_EQ(UnescapeMountField("/a\\"), "/a\\");
  EXPECT_EQ(UnescapeMountField("\\\\040"), "\\ ");
  EXPECT_EQ(UnescapeMountField(""), "");
}

}  // namespace
}  // namespace cudafs
