#include "fs/core/directory.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "alloc/base/coding.h"

namespace cudafs {

Directory::OwnedRecord Directory::Record::Make(absl::string_view name, Entry entry,
                                               uint64_t cookie) {
  assert(name.size() <= UINT8_MAX);
  // A short name leaves part of the struct's tail unused, never missing.
  void* memory =
      ::operator new(std::max(sizeof(Record), offsetof(Record, name_data) + name.size()));
  Record* record = new (memory) Record;
  record->ino = entry.ino;
  record->cookie = cookie;
  record->type = (entry.type & S_IFMT) >> 12;
  record->name_size = static_cast<uint8_t>(name.size());
  std::memcpy(record->name_data, name.data(), name.size());
  return OwnedRecord(record);
}

std::optional<Directory::Entry> Directory::Find(absl::string_view name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return (*it)->entry();
}

bool Directory::Insert(absl::string_view name, Entry entry) {
  if (by_name_.contains(name)) return false;
  OwnedRecord record = Record::Make(name, entry, next_cookie_++);
  by_name_.insert(record.get());
  by_cookie_.insert(std::move(record));
  return true;
}

uint64_t Directory::CookieOf(absl::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? 0 : uint64_t{(*it)->cookie};
}

std::optional<Directory::Entry> Directory::Erase(absl::string_view name) {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  const Entry entry = (*it)->entry();
  const uint64_t cookie = (*it)->cookie;
  by_name_.erase(it);
  by_cookie_.erase(cookie);  // frees the record
  return entry;
}

void Directory::Replace(absl::string_view name, Entry entry) {
  Record* record = *by_name_.find(name);
  record->ino = entry.ino;
  record->type = (entry.type & S_IFMT) >> 12;
}

void Directory::EncodeTo(std::string* out) const {
  PutVarint(out, parent_);
  PutVarint(out, next_cookie_);
  PutVarint(out, by_cookie_.size());
  for (const OwnedRecord& record : by_cookie_) {
    PutBytes(out, record->name());
    PutVarint(out, record->ino);
    PutVarint(out, record->type);
    PutVarint(out, record->cookie);
  }
}

absl::Status Directory::DecodeFrom(absl::string_view* in) {
  const auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("directory: ", what));
  };
  constexpr uint64_t kMaxCookie = (uint64_t{1} << 60) - 1;
  uint64_t count = 0;
  if (!by_cookie_.empty() || !GetVarint(in, &parent_) ||
      !GetVarintUpTo(in, kMaxCookie, &next_cookie_) || !GetVarint(in, &count)) {
    return bad("a record cut short");
  }
  uint64_t last_cookie = kDotDotCookie;
  for (uint64_t i = 0; i < count; ++i) {
    absl::string_view name;
    uint64_t ino = 0;
    uint64_t type = 0;
    uint64_t cookie = 0;
    if (!GetBytes(in, &name) || !GetVarint(in, &ino) || !GetVarintUpTo(in, S_IFMT >> 12, &type) ||
        !GetVarint(in, &cookie)) {
      return bad("a record cut short");
    }
    if (name.empty() || name.size() > UINT8_MAX || name == "." || name == ".." ||
        name.find_first_of(absl::string_view("/\0", 2)) != absl::string_view::npos) {
      return bad(absl::StrCat("no name a directory holds: \"", name, "\""));
    }
    const mode_t mode = static_cast<mode_t>(type << 12);
    if (!S_ISREG(mode) && !S_ISDIR(mode) && !S_ISLNK(mode) && !S_ISCHR(mode) && !S_ISBLK(mode) &&
        !S_ISFIFO(mode) && !S_ISSOCK(mode)) {
      return bad(absl::StrCat("entry \"", name, "\" has no type"));
    }
    if (cookie <= last_cookie || cookie >= next_cookie_) {
      return bad(absl::StrCat("entry \"", name, "\" is out of cookie order"));
    }
    if (by_name_.contains(name)) return bad(absl::StrCat("\"", name, "\" twice"));
    OwnedRecord record = Record::Make(name, Entry{ino, mode}, cookie);
    by_name_.insert(record.get());
    by_cookie_.insert(std::move(record));
    last_cookie = cookie;
  }
  return absl::OkStatus();
}

}  // namespace cudafs
