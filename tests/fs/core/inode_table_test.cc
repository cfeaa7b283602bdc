#include "fs/core/inode_table.h"

#include <sys/stat.h>

#include <cerrno>
#include <memory>
#include <set>
#include <vector>

#include "alloc/base/errors.h"
#include "gtest/gtest.h"

namespace cudafs {
namespace {

// The counts are the table's, under its private lock; each test here runs
// on one thread, so reading them without it is safe.
uint64_t Lookups(const Inode& inode) ABSL_NO_THREAD_SAFETY_ANALYSIS { return inode.lookups; }

uint64_t Opens(const Inode& inode) ABSL_NO_THREAD_SAFETY_ANALYSIS { return inode.opens; }

void SetNlink(Inode& inode, uint32_t nlink) {
  absl::MutexLock lock(&inode.mu);
  inode.nlink = nlink;
}

TEST(InodeTableTest, CreateRootAndGet) {
  InodeTable table(0);
  std::shared_ptr<Inode> root = table.CreateRoot(S_IFDIR | 0755);
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->ino, 1u);
  EXPECT_TRUE(root->is_directory());
  EXPECT_EQ(table.Get(1), root);
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.Get(2), nullptr);
  EXPECT_EQ(table.Get(0), nullptr);
}

TEST(InodeTableTest, CreateAssignsIncreasingNumbersFromTwo) {
  InodeTable table(0);
  table.CreateRoot(S_IFDIR | 0755);
  absl::StatusOr<std::shared_ptr<Inode>> a = table.Create(S_IFREG | 0644);
  absl::StatusOr<std::shared_ptr<Inode>> b = table.Create(S_IFDIR | 0755);
  absl::StatusOr<std::shared_ptr<Inode>> c = table.Create(S_IFLNK | 0777);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*a)->ino, 2u);
  EXPECT_EQ((*b)->ino, 3u);
  EXPECT_EQ((*c)->ino, 4u);
  EXPECT_TRUE((*a)->is_regular());
  EXPECT_TRUE((*b)->is_directory());
  EXPECT_TRUE((*c)->is_symlink());
  EXPECT_EQ((*a)->type, S_IFREG);
  EXPECT_EQ(table.Get(2), *a);
  EXPECT_EQ(table.Get(3), *b);
  EXPECT_EQ(table.Get(4), *c);
  EXPECT_EQ(table.size(), 4u);
  EXPECT_EQ(Lookups(**a), 0u);
  EXPECT_EQ(Opens(**a), 0u);
}

TEST(InodeTableTest, MaxInodesCountsRootAndGivesEnospc) {
  InodeTable table(3);
  EXPECT_EQ(table.max_inodes(), 3u);
  table.CreateRoot(S_IFDIR | 0755);
  absl::StatusOr<std::shared_ptr<Inode>> a = table.Create(S_IFREG | 0644);
  absl::StatusOr<std::shared_ptr<Inode>> b = table.Create(S_IFREG | 0644);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  absl::StatusOr<std::shared_ptr<Inode>> c = table.Create(S_IFREG | 0644);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(ToErrno(c.status()), ENOSPC);
  EXPECT_EQ(table.size(), 3u);
  // Dropping one frees a slot; the number is still new.
  table.DropIfUnused(*b);
  EXPECT_EQ(table.Get((*b)->ino), nullptr);
  absl::StatusOr<std::shared_ptr<Inode>> d = table.Create(S_IFREG | 0644);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_GT((*d)->ino, (*b)->ino);
  EXPECT_EQ(ToErrno(table.Create(S_IFREG).status()), ENOSPC);
}

TEST(InodeTableTest, MaxInodesZeroIsUnlimited) {
  InodeTable table(0);
  table.CreateRoot(S_IFDIR | 0755);
  std::vector<std::shared_ptr<Inode>> keep;
  for (int i = 0; i < 10000; ++i) {
    absl::StatusOr<std::shared_ptr<Inode>> inode = table.Create(S_IFREG | 0644);
    ASSERT_TRUE(inode.ok());
    keep.push_back(*inode);
  }
  EXPECT_EQ(table.size(), 10001u);
}

TEST(InodeTableTest, InodeWithNameStays) {
  InodeTable table(0);
  auto inode = *table.Create(S_IFREG | 0644);
  SetNlink(*inode, 1);
  table.DropIfUnused(inode);
  EXPECT_EQ(table.Get(inode->ino), inode);
  table.Forget(inode, 5);  // more than it has: clamps, still named
  EXPECT_EQ(Lookups(*inode), 0u);
  EXPECT_EQ(table.Get(inode->ino), inode);
  table.Release(inode);  // no open: no underflow
  EXPECT_EQ(Opens(*inode), 0u);
  EXPECT_EQ(table.Get(inode->ino), inode);
  SetNlink(*inode, 0);
  table.DropIfUnused(inode);
  EXPECT_EQ(table.Get(inode->ino), nullptr);
}

TEST(InodeTableTest, LookupsKeepUnlinkedInode) {
  InodeTable table(0);
  auto inode = *table.Create(S_IFREG | 0644);
  SetNlink(*inode, 1);
  table.AddLookup(*inode);
  table.AddLookup(*inode, 2);
  EXPECT_EQ(Lookups(*inode), 3u);
  SetNlink(*inode, 0);  // unlinked
  table.DropIfUnused(inode);
  EXPECT_NE(table.Get(inode->ino), nullptr);
  table.Forget(inode, 1);
  EXPECT_EQ(Lookups(*inode), 2u);
  EXPECT_NE(table.Get(inode->ino), nullptr);
  table.Forget(inode, 1);
  EXPECT_NE(table.Get(inode->ino), nullptr);
  table.Forget(inode, 1);
  EXPECT_EQ(Lookups(*inode), 0u);
  EXPECT_EQ(table.Get(inode->ino), nullptr);
}

TEST(InodeTableTest, ForgetMoreThanHeldClampsAndDrops) {
  InodeTable table(0);
  auto inode = *table.Create(S_IFREG | 0644);
  table.AddLookup(*inode, 2);
  table.Forget(inode, 100);
  EXPECT_EQ(Lookups(*inode), 0u);
  EXPECT_EQ(table.Get(inode->ino), nullptr);
}

TEST(InodeTableTest, OpensKeepUnlinkedInode) {
  InodeTable table(0);
  auto inode = *table.Create(S_IFREG | 0644);
  SetNlink(*inode, 1);
  table.AddOpen(*inode);
  table.AddOpen(*inode);
  EXPECT_EQ(Opens(*inode), 2u);
  SetNlink(*inode, 0);
  table.DropIfUnused(inode);
  EXPECT_NE(table.Get(inode->ino), nullptr);
  table.Release(inode);
  EXPECT_EQ(Opens(*inode), 1u);
  EXPECT_NE(table.Get(inode->ino), nullptr);
  table.Release(inode);
  EXPECT_EQ(Opens(*inode), 0u);
  EXPECT_EQ(table.Get(inode->ino), nullptr);
}

TEST(InodeTableTest, NeedsAllCountsZero) {
  InodeTable table(0);
  auto inode = *table.Create(S_IFREG | 0644);
  table.AddLookup(*inode);
  table.AddOpen(*inode);
  // nlink 0 from the start (e.g. O_TMPFILE-like or unlinked).
  table.Forget(inode, 1);  // opens still 1
  EXPECT_NE(table.Get(inode->ino), nullptr);
  table.AddLookup(*inode);
  table.Release(inode);  // lookups still 1
  EXPECT_NE(table.Get(inode->ino), nullptr);
  SetNlink(*inode, 1);
  table.Forget(inode, 1);  // still has a name
  EXPECT_NE(table.Get(inode->ino), nullptr);
  SetNlink(*inode, 0);
  table.DropIfUnused(inode);
  EXPECT_EQ(table.Get(inode->ino), nullptr);
  // Dropping twice is harmless.
  table.DropIfUnused(inode);
  table.Forget(inode, 1);
  table.Release(inode);
  EXPECT_EQ(table.Get(inode->ino), nullptr);
}

TEST(InodeTableTest, RootIsNeverDropped) {
  InodeTable table(0);
  auto root = table.CreateRoot(S_IFDIR | 0755);
  table.AddLookup(*root);
  table.Forget(root, 1);
  table.DropIfUnused(root);
  EXPECT_EQ(table.Get(1), root);
}

TEST(InodeTableTest, DroppedInodeSurvivesWhileReferenced) {
  InodeTable table(0);
  std::shared_ptr<Inode> inode = *table.Create(S_IFREG | 0644);
  std::weak_ptr<Inode> weak = inode;
  table.DropIfUnused(inode);
  EXPECT_EQ(table.Get(inode->ino), nullptr);
  EXPECT_FALSE(weak.expired());  // our shared_ptr keeps it
  inode.reset();
  EXPECT_TRUE(weak.expired());
}

TEST(InodeTableTest, NumbersNeverReused) {
  InodeTable table(0);
  table.CreateRoot(S_IFDIR | 0755);
  std::set<uint64_t> seen;
  uint64_t last = 1;
  for (int i = 0; i < 1000; ++i) {
    auto inode = *table.Create(i % 2 ? S_IFREG : S_IFDIR);
    EXPECT_GT(inode->ino, last);
    last = inode->ino;
    EXPECT_TRUE(seen.insert(inode->ino).second);
    if (i % 3 != 0) table.DropIfUnused(inode);  // nlink 0, no refs: goes
  }
  EXPECT_EQ(table.size(), 1u + 334u);
}

}  // namespace
}  // namespace cudafs
