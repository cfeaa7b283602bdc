// Tests of the core's own permission rules (fs/core/permissions.h), as pure
// functions: no arena, no Filesystem. The access checks (owner/group/other
// bits, sticky directories, who may chmod or chown) are the kernel's under
// default_permissions and have no counterpart here.
#include "fs/core/permissions.h"

#include <sys/stat.h>

#include <vector>

#include "gtest/gtest.h"

namespace cudafs {
namespace {

constexpr uid_t kUser = 1000;
constexpr gid_t kGroup = 100;
constexpr gid_t kOtherGroup = 200;
constexpr gid_t kSupplementary = 300;

// A caller in kGroup and, when asked, in kSupplementary; counts the fetches.
Caller UserWithGroups(int* fetches) {
  return Caller(kUser, kGroup, [fetches] {
    ++*fetches;
    return std::vector<gid_t>{kSupplementary};
  });
}

TEST(PermissionsCallerTest, InGroupChecksPrimaryThenFetchesSupplementaryOnce) {
  int fetches = 0;
  Caller caller = UserWithGroups(&fetches);
  EXPECT_TRUE(caller.InGroup(kGroup));
  EXPECT_EQ(fetches, 0);  // the primary group needs no fetch
  EXPECT_TRUE(caller.InGroup(kSupplementary));
  EXPECT_FALSE(caller.InGroup(kOtherGroup));
  EXPECT_EQ(fetches, 1);
}

TEST(PermissionsCallerTest, WithoutFetcherOnlyThePrimaryGroupCounts) {
  Caller caller(kUser, kGroup);
  EXPECT_TRUE(caller.InGroup(kGroup));
  EXPECT_FALSE(caller.InGroup(kSupplementary));
}

TEST(PermissionsCallerTest, EveryoneButRootDropsSetIdUnlessTheKernelSaysOtherwise) {
  EXPECT_FALSE(Caller::Root().drops_set_id());
  Caller user(kUser, kGroup);
  EXPECT_TRUE(user.drops_set_id());
  EXPECT_FALSE(user.set_drops_set_id(false).drops_set_id());  // CAP_FSETID
}

TEST(PermissionsCallerTest, TrustedNamesAreListedByTheCapabilityTheGlueReports) {
  EXPECT_TRUE(ListsExtendedAttribute("trusted.a", Caller::Root()));  // no word: uid 0
  EXPECT_FALSE(ListsExtendedAttribute("trusted.a", Caller(kUser, kGroup)));
  int checks = 0;
  const auto check = [&checks](bool result) {
    return [&checks, result] {
      ++checks;
      return result;
    };
  };
  EXPECT_FALSE(
      ListsExtendedAttribute("trusted.a", Caller::Root().set_trusted_names_check(check(false))));
  Caller admin(kUser, kGroup);
  admin.set_trusted_names_check(check(true));
  EXPECT_TRUE(ListsExtendedAttribute("user.a", admin));
  EXPECT_EQ(checks, 1) << "checked only for a trusted.* name";
  EXPECT_TRUE(ListsExtendedAttribute("trusted.a", admin));
  EXPECT_TRUE(ListsExtendedAttribute("trusted.b", admin));
  EXPECT_EQ(checks, 2) << "and once per caller";
  EXPECT_TRUE(ListsExtendedAttribute("user.a", Caller(kUser, kGroup)));
}

TEST(PermissionsOwnershipOfNewTest, PlainDirectoryGivesTheCallersIds) {
  const Ownership owner =
      OwnershipOfNew(S_IFREG | S_ISGID | 0644, Caller(kUser, kGroup), S_IFDIR | 0777, kOtherGroup);
  EXPECT_EQ(owner.uid, kUser);
  EXPECT_EQ(owner.gid, kGroup);
  EXPECT_EQ(owner.mode, static_cast<mode_t>(S_IFREG | S_ISGID | 0644));  // kept as asked
}

TEST(PermissionsOwnershipOfNewTest, SetgidDirectoryHandsDownItsGroup) {
  const Ownership owner =
      OwnershipOfNew(S_IFREG | 0644, Caller(kUser, kGroup), S_IFDIR | S_ISGID | 0775, kOtherGroup);
  EXPECT_EQ(owner.uid, kUser);
  EXPECT_EQ(owner.gid, kOtherGroup);
  EXPECT_EQ(owner.mode, static_cast<mode_t>(S_IFREG | 0644));  // files get no setgid bit
}

TEST(PermissionsOwnershipOfNewTest, SetgidDirectoryHandsDownItsSetgidBitToSubdirectories) {
  const Ownership owner =
      OwnershipOfNew(S_IFDIR | 0755, Caller(kUser, kGroup), S_IFDIR | S_ISGID | 0775, kOtherGroup);
  EXPECT_EQ(owner.gid, kOtherGroup);
  EXPECT_EQ(owner.mode, static_cast<mode_t>(S_IFDIR | S_ISGID | 0755));
}

TEST(PermissionsModeAfterDataChangeTest, SetuidGoesForAUserWithoutFsetid) {
  EXPECT_EQ(ModeAfterDataChange(S_IFREG | S_ISUID | 0755, kGroup, Caller(kUser, kGroup)),
            static_cast<mode_t>(S_IFREG | 0755));
}

TEST(PermissionsModeAfterDataChangeTest, SetgidGoesWhenTheGroupMayExecute) {
  EXPECT_EQ(ModeAfterDataChange(S_IFREG | S_ISUID | S_ISGID | 0750, kGroup, Caller(kUser, kGroup)),
            static_cast<mode_t>(S_IFREG | 0750));
}

TEST(PermissionsModeAfterDataChangeTest, SetgidWithoutGroupExecuteStaysForAGroupMember) {
  // No group execute: mandatory-locking style sgid, kept for members.
  int fetches = 0;
  EXPECT_EQ(ModeAfterDataChange(S_IFREG | S_ISGID | 0640, kGroup, UserWithGroups(&fetches)),
            static_cast<mode_t>(S_IFREG | S_ISGID | 0640));
  EXPECT_EQ(ModeAfterDataChange(S_IFREG | S_ISGID | 0640, kSupplementary, UserWithGroups(&fetches)),
            static_cast<mode_t>(S_IFREG | S_ISGID | 0640));
}

TEST(PermissionsModeAfterDataChangeTest, SetgidWithoutGroupExecuteGoesForAnOutsider) {
  int fetches = 0;
  EXPECT_EQ(ModeAfterDataChange(S_IFREG | S_ISGID | 0640, kOtherGroup, UserWithGroups(&fetches)),
            static_cast<mode_t>(S_IFREG | 0640));
}

TEST(PermissionsModeAfterDataChangeTest, GroupsAreNotFetchedWhenTheRuleDoesNotNeedThem) {
  int fetches = 0;
  ModeAfterDataChange(S_IFREG | S_ISUID | 0755, kOtherGroup, UserWithGroups(&fetches));
  ModeAfterDataChange(S_IFREG | S_ISGID | 0770, kOtherGroup, UserWithGroups(&fetches));
  EXPECT_EQ(fetches, 0);
}

TEST(PermissionsModeAfterDataChangeTest, RootAndCallersWithFsetidKeepEverything) {
  const mode_t mode = S_IFREG | S_ISUID | S_ISGID | 0755;
  EXPECT_EQ(ModeAfterDataChange(mode, kOtherGroup, Caller::Root()), mode);
  EXPECT_EQ(ModeAfterDataChange(mode, kOtherGroup, Caller(kUser, kGroup).set_drops_set_id(false)),
            mode);
}

TEST(PermissionsModeAfterDataChangeTest, RootWithoutFsetidLosesThemToo) {
  // The kernel's verdict wins over uid 0 (FUSE_HANDLE_KILLPRIV_V2).
  EXPECT_EQ(
      ModeAfterDataChange(S_IFREG | S_ISUID | 0755, kGroup, Caller::Root().set_drops_set_id(true)),
      static_cast<mode_t>(S_IFREG | 0755));
}

TEST(PermissionsModeAfterDataChangeTest, OnlyRegularFilesLoseSetIdBits) {
  const mode_t dir = S_IFDIR | S_ISGID | S_ISUID | 0775;
  EXPECT_EQ(ModeAfterDataChange(dir, kOtherGroup, Caller(kUser, kGroup)), dir);
}

TEST(PermissionsModeAfterChownTest, SetuidGoesAndSetgidWithGroupExecute) {
  EXPECT_EQ(ModeAfterChown(S_IFREG | S_ISUID | S_ISGID | 0755),
            static_cast<mode_t>(S_IFREG | 0755));
}

TEST(PermissionsModeAfterChownTest, SetgidWithoutGroupExecuteStays) {
  EXPECT_EQ(ModeAfterChown(S_IFREG | S_ISUID | S_ISGID | 0644),
            static_cast<mode_t>(S_IFREG | S_ISGID | 0644));
}

TEST(PermissionsModeAfterChownTest, DirectoriesKeepTheirBits) {
  const mode_t dir = S_IFDIR | S_ISUID | S_ISGID | S_ISVTX | 0775;
  EXPECT_EQ(ModeAfterChown(dir), dir);
}

TEST(PermissionsListsExtendedAttributeTest, TrustedNamesOnlyForRoot) {
  Caller user(kUser, kGroup);
  EXPECT_TRUE(ListsExtendedAttribute("user.comment", user));
  EXPECT_TRUE(ListsExtendedAttribute("security.selinux", user));
  EXPECT_FALSE(ListsExtendedAttribute("trusted.overlay", user));
  EXPECT_TRUE(ListsExtendedAttribute("trusted.overlay", Caller::Root()));
}

}  // namespace
}  // namespace cudafs
