#include "fs/core/directory.h"

#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace cudafs {
namespace {

struct Listed {
  std::string name;
  uint64_t ino;
  uint64_t cookie;
};

// Up to `limit` entries after `after` (all when limit is 0).
std::vector<Listed> ListAfter(const Directory& dir, uint64_t after, size_t limit = 0) {
  std::vector<Listed> out;
  dir.ForEachAfter(after, [&](absl::string_view name, const Directory::Entry& entry,
                              uint64_t cookie) {
    out.push_back(Listed{std::string(name), entry.ino, cookie});
    return limit == 0 || out.size() < limit;
  });
  return out;
}

std::vector<std::string> Names(const std::vector<Listed>& listed) {
  std::vector<std::string> names;
  for (const Listed& l : listed) names.push_back(l.name);
  return names;
}

TEST(DirectoryTest, EmptyDirectory) {
  Directory dir;
  EXPECT_TRUE(dir.empty());
  EXPECT_EQ(dir.size(), 0u);
  EXPECT_FALSE(dir.Find("a").has_value());
  EXPECT_FALSE(dir.Erase("a").has_value());
  EXPECT_TRUE(ListAfter(dir, 0).empty());
}

TEST(DirectoryTest, InsertFind) {
  Directory dir;
  EXPECT_TRUE(dir.Insert("a", {10, S_IFREG}));
  EXPECT_TRUE(dir.Insert("b", {11, S_IFDIR}));
  EXPECT_FALSE(dir.empty());
  EXPECT_EQ(dir.size(), 2u);
  auto a = dir.Find("a");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->ino, 10u);
  EXPECT_EQ(a->type, static_cast<mode_t>(S_IFREG));
  auto b = dir.Find("b");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->ino, 11u);
  EXPECT_EQ(b->type, static_cast<mode_t>(S_IFDIR));
  EXPECT_FALSE(dir.Find("c").has_value());
  EXPECT_FALSE(dir.Find("A").has_value());
  EXPECT_FALSE(dir.Find("").has_value());
}

// Each entry stores its name in its own allocation, sized to the name.
TEST(DirectoryTest, NamesOfEveryLengthAndEveryType) {
  Directory dir;
  const mode_t types[] = {S_IFREG, S_IFDIR, S_IFLNK, S_IFCHR, S_IFBLK, S_IFIFO, S_IFSOCK};
  for (size_t length = 1; length <= 255; ++length) {
    const std::string name(length, static_cast<char>('a' + length % 26));
    ASSERT_TRUE(dir.Insert(name, {length, types[length % 7]})) << length;
  }
  EXPECT_EQ(dir.size(), 255u);
  for (size_t length = 1; length <= 255; ++length) {
    const std::string name(length, static_cast<char>('a' + length % 26));
    std::optional<Directory::Entry> found = dir.Find(name);
    ASSERT_TRUE(found.has_value()) << length;
    EXPECT_EQ(found->ino, length);
    EXPECT_EQ(found->type, types[length % 7]);
    EXPECT_FALSE(dir.Find(name + "x").has_value());
  }
  const std::vector<Listed> all = ListAfter(dir, 0);
  ASSERT_EQ(all.size(), 255u);
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].name.size(), i + 1);
  for (size_t length = 1; length <= 255; length += 2) {
    ASSERT_TRUE(dir.Erase(std::string(length, static_cast<char>('a' + length % 26))));
  }
  EXPECT_EQ(dir.size(), 127u);
}

TEST(DirectoryTest, InsertExistingNameFailsWithoutChange) {
  Directory dir;
  ASSERT_TRUE(dir.Insert("a", {10, S_IFREG}));
  EXPECT_FALSE(dir.Insert("a", {20, S_IFDIR}));
  EXPECT_EQ(dir.size(), 1u);
  EXPECT_EQ(dir.Find("a")->ino, 10u);
  EXPECT_EQ(dir.Find("a")->type, static_cast<mode_t>(S_IFREG));
  // The failed insert did not add a second listing entry.
  EXPECT_EQ(ListAfter(dir, 0).size(), 1u);
}

TEST(DirectoryTest, Erase) {
  Directory dir;
  ASSERT_TRUE(dir.Insert("a", {10, S_IFREG}));
  ASSERT_TRUE(dir.Insert("b", {11, S_IFLNK}));
  auto erased = dir.Erase("a");
  ASSERT_TRUE(erased.has_value());
  EXPECT_EQ(erased->ino, 10u);
  EXPECT_EQ(erased->type, static_cast<mode_t>(S_IFREG));
  EXPECT_FALSE(dir.Find("a").has_value());
  EXPECT_FALSE(dir.Erase("a").has_value());
  EXPECT_EQ(dir.size(), 1u);
  EXPECT_EQ(Names(ListAfter(dir, 0)), std::vector<std::string>{"b"});
  ASSERT_TRUE(dir.Erase("b").has_value());
  EXPECT_TRUE(dir.empty());
  EXPECT_TRUE(ListAfter(dir, 0).empty());
  // The name can come back.
  EXPECT_TRUE(dir.Insert("a", {12, S_IFREG}));
  EXPECT_EQ(dir.Find("a")->ino, 12u);
}

TEST(DirectoryTest, ReplaceKeepsCookie) {
  Directory dir;
  ASSERT_TRUE(dir.Insert("a", {10, S_IFREG}));
  ASSERT_TRUE(dir.Insert("b", {11, S_IFREG}));
  ASSERT_TRUE(dir.Insert("c", {12, S_IFREG}));
  const std::vector<Listed> before = ListAfter(dir, 0);
  dir.Replace("b", {99, S_IFDIR});
  EXPECT_EQ(dir.Find("b")->ino, 99u);
  EXPECT_EQ(dir.Find("b")->type, static_cast<mode_t>(S_IFDIR));
  EXPECT_EQ(dir.size(), 3u);
  const std::vector<Listed> after = ListAfter(dir, 0);
  ASSERT_EQ(after.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(after[i].name, before[i].name);
    EXPECT_EQ(after[i].cookie, before[i].cookie);
  }
  EXPECT_EQ(after[1].ino, 99u);
  // A listing that stopped at "a" still gets the replaced "b" next.
  const std::vector<Listed> resumed = ListAfter(dir, before[0].cookie, 1);
  ASSERT_EQ(resumed.size(), 1u);
  EXPECT_EQ(resumed[0].name, "b");
  EXPECT_EQ(resumed[0].ino, 99u);
}

TEST(DirectoryTest, CookiesSkipDotAndDotDotAndIncrease) {
  Directory dir;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(dir.Insert("n" + std::to_string(i), {100u + i, 0}));
  const std::vector<Listed> all = ListAfter(dir, 0);
  ASSERT_EQ(all.size(), 10u);
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_GT(all[i].cookie, Directory::kDotDotCookie);
    if (i > 0) {
      EXPECT_GT(all[i].cookie, all[i - 1].cookie);
    }
    // Insertion order is cookie order.
    EXPECT_EQ(all[i].name, "n" + std::to_string(i));
  }
  // Listing after "." or ".." cookies returns everything.
  EXPECT_EQ(ListAfter(dir, Directory::kDotCookie).size(), 10u);
  EXPECT_EQ(ListAfter(dir, Directory::kDotDotCookie).size(), 10u);
  // Past the last cookie: nothing.
  EXPECT_TRUE(ListAfter(dir, all.back().cookie).empty());
  EXPECT_TRUE(ListAfter(dir, UINT64_MAX).empty());
}

TEST(DirectoryTest, ForEachAfterStopsWhenFnReturnsFalse) {
  Directory dir;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(dir.Insert("n" + std::to_string(i), {100u + i, 0}));
  int calls = 0;
  dir.ForEachAfter(0, [&](absl::string_view, const Directory::Entry&, uint64_t) {
    ++calls;
    return calls < 2;
  });
  EXPECT_EQ(calls, 2);
}

TEST(DirectoryTest, ListingResumesAfterInsertsAndErases) {
  Directory dir;
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(dir.Insert("n" + std::to_string(i), {100u + i, 0}));
  // First page: n0, n1.
  std::vector<Listed> page = ListAfter(dir, 0, 2);
  ASSERT_EQ(Names(page), (std::vector<std::string>{"n0", "n1"}));
  const uint64_t cookie = page.back().cookie;
  // Mutations between calls: erase an already listed entry, an unlisted one,
  // and add new ones.
  ASSERT_TRUE(dir.Erase("n0").has_value());
  ASSERT_TRUE(dir.Erase("n3").has_value());
  ASSERT_TRUE(dir.Insert("x", {200, 0}));
  ASSERT_TRUE(dir.Insert("y", {201, 0}));
  page = ListAfter(dir, cookie);
  EXPECT_EQ(Names(page), (std::vector<std::string>{"n2", "n4", "n5", "x", "y"}));
}

TEST(DirectoryTest, ErasedEntryCookieStillResumes) {
  Directory dir;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(dir.Insert("n" + std::to_string(i), {100u + i, 0}));
  std::vector<Listed> page = ListAfter(dir, 0, 3);
  ASSERT_EQ(Names(page), (std::vector<std::string>{"n0", "n1", "n2"}));
  // The entry whose cookie we resume from goes away, and so does its
  // predecessor.
  ASSERT_TRUE(dir.Erase("n2").has_value());
  ASSERT_TRUE(dir.Erase("n1").has_value());
  page = ListAfter(dir, page.back().cookie);
  EXPECT_EQ(Names(page), (std::vector<std::string>{"n3", "n4"}));
  // Even after everything is erased, the old cookie is a valid resume point
  // for entries added later.
  for (const char* name : {"n0", "n3", "n4"}) ASSERT_TRUE(dir.Erase(name).has_value());
  ASSERT_TRUE(dir.Insert("late", {300, 0}));
  EXPECT_EQ(Names(ListAfter(dir, page.back().cookie)), std::vector<std::string>{"late"});
}

TEST(DirectoryTest, ReinsertedNameGetsNewCookie) {
  Directory dir;
  ASSERT_TRUE(dir.Insert("a", {1, 0}));
  ASSERT_TRUE(dir.Insert("b", {2, 0}));
  const uint64_t a_cookie = ListAfter(dir, 0)[0].cookie;
  ASSERT_TRUE(dir.Erase("a").has_value());
  ASSERT_TRUE(dir.Insert("a", {3, 0}));
  const std::vector<Listed> all = ListAfter(dir, 0);
  EXPECT_EQ(Names(all), (std::vector<std::string>{"b", "a"}));
  EXPECT_GT(all[1].cookie, a_cookie);
}

// Random listings interleaved with random mutations: every entry present for
// the whole listing is returned exactly once; no name is returned twice
// unless it was erased and re-inserted in between; every returned entry
// was present at the time it was returned with the inode it had then.
TEST(DirectoryTest, RandomizedListingWithMutations) {
  std::mt19937_64 rng(12345);
  for (int round = 0; round < 200; ++round) {
    Directory dir;
    std::map<std::string, uint64_t> model;  // name -> ino
    uint64_t next_ino = 1000;
    const int initial = std::uniform_int_distribution<int>(0, 60)(rng);
    for (int i = 0; i < initial; ++i) {
      std::string name = "f" + std::to_string(rng() % 100);
      if (dir.Insert(name, {next_ino, S_IFREG})) {
        ASSERT_FALSE(model.count(name));
        model[name] = next_ino;
      } else {
        ASSERT_TRUE(model.count(name));
      }
      ++next_ino;
    }
    // Names that stay untouched for the whole listing.
    std::set<std::string> stable;
    for (const auto& [name, ino] : model) {
      if (rng() % 2 == 0) stable.insert(name);
    }
    std::map<std::string, int> returned;
    std::set<std::string> reinserted;  // erased then inserted again during the listing
    std::set<std::string> erased_during;
    uint64_t cookie = rng() % 2 == 0 ? 0 : Directory::kDotDotCookie;
    uint64_t last_cookie = 0;
    for (int step = 0; step < 1000; ++step) {
      const size_t limit = std::uniform_int_distribution<size_t>(1, 5)(rng);
      std::vector<Listed> page = ListAfter(dir, cookie, limit);
      for (const Listed& l : page) {
        EXPECT_GT(l.cookie, last_cookie);
        last_cookie = l.cookie;
        ASSERT_TRUE(model.count(l.name)) << l.name;
        EXPECT_EQ(model[l.name], l.ino);
        ++returned[l.name];
      }
      if (page.empty()) break;
      cookie = page.back().cookie;
      // Mutate between the calls.
      const int mutations = std::uniform_int_distribution<int>(0, 4)(rng);
      for (int m = 0; m < mutations; ++m) {
        std::string name = "f" + std::to_string(rng() % 100);
        if (stable.count(name)) continue;
        switch (rng() % 3) {
          case 0:
            if (dir.Insert(name, {next_ino, S_IFREG})) {
              ASSERT_FALSE(model.count(name));
              model[name] = next_ino;
              if (erased_during.count(name)) reinserted.insert(name);
            }
            ++next_ino;
            break;
          case 1:
            if (dir.Erase(name)) {
              ASSERT_TRUE(model.count(name));
              model.erase(name);
              erased_during.insert(name);
            } else {
              ASSERT_FALSE(model.count(name));
            }
            break;
          case 2:
            if (model.count(name)) {
              dir.Replace(name, {next_ino, S_IFDIR});
              model[name] = next_ino++;
            }
            break;
        }
      }
      ASSERT_EQ(dir.size(), model.size());
    }
    for (const std::string& name : stable) {
      EXPECT_EQ(returned[name], 1) << "round " << round << " name " << name;
    }
    for (const auto& [name, count] : returned) {
      if (!reinserted.count(name)) {
        EXPECT_EQ(count, 1) << "round " << round << " name " << name;
      }
    }
    // The final state lists exactly the model.
    std::set<std::string> final_names;
    for (const Listed& l : ListAfter(dir, 0)) {
      EXPECT_TRUE(final_names.insert(l.name).second);
      EXPECT_EQ(model[l.name], l.ino);
    }
    EXPECT_EQ(final_names.size(), model.size());
  }
}

// A directory through an image record: the same names, types, cookies and
// parent, and the next insert gets the cookie it would have had.
TEST(DirectoryTest, EncodedAndDecodedItKeepsItsCookies) {
  Directory original;
  original.set_parent(7);
  for (int i = 0; i < 50; ++i) {
    original.Insert("n" + std::to_string(i), {100u + i, i % 2 ? S_IFDIR : S_IFREG});
  }
  for (int i = 0; i < 50; i += 3) original.Erase("n" + std::to_string(i));
  std::string record;
  original.EncodeTo(&record);
  Directory copy;
  absl::string_view in = record;
  ASSERT_TRUE(copy.DecodeFrom(&in).ok());
  EXPECT_TRUE(in.empty());
  EXPECT_EQ(copy.parent(), 7u);
  const auto listing = [](const Directory& d) {
    std::vector<std::tuple<std::string, uint64_t, mode_t, uint64_t>> all;
    d.ForEachAfter(0, [&](absl::string_view name, const Directory::Entry& e, uint64_t cookie) {
      all.emplace_back(std::string(name), e.ino, e.type, cookie);
      return true;
    });
    return all;
  };
  EXPECT_EQ(listing(copy), listing(original));
  original.Insert("new", {1, S_IFREG});
  copy.Insert("new", {1, S_IFREG});
  EXPECT_EQ(listing(copy), listing(original));

  // Records that are none: cut short, a name twice, cookies out of order.
  for (size_t cut = 0; cut < record.size(); ++cut) {
    Directory d;
    absl::string_view short_record(record.data(), cut);
    EXPECT_FALSE(d.DecodeFrom(&short_record).ok()) << cut;
  }
  Directory twice;
  twice.Insert("a", {2, S_IFREG});
  twice.Insert("b", {3, S_IFREG});
  std::string bad;
  twice.EncodeTo(&bad);
  bad[bad.find('b')] = 'a';
  Directory refused;
  absl::string_view bad_in = bad;
  EXPECT_FALSE(refused.DecodeFrom(&bad_in).ok());
}

}  // namespace
}  // namespace cudafs
