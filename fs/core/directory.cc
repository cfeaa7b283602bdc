#include "fs/core/directory.h"

#include <algorithm>
#include <cassert>
#include <cstring>

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

}  // namespace cudafs
