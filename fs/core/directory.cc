#include "fs/core/directory.h"

namespace cudafs {

std::optional<Directory::Entry> Directory::Find(absl::string_view name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second.entry;
}

bool Directory::Insert(absl::string_view name, Entry entry) {
  auto [it, inserted] = by_name_.try_emplace(name, Slot{entry, next_cookie_});
  if (!inserted) return false;
  by_cookie_.emplace(next_cookie_++, std::string(name));
  return true;
}

std::optional<Directory::Entry> Directory::Erase(absl::string_view name) {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  Entry entry = it->second.entry;
  by_cookie_.erase(it->second.cookie);
  by_name_.erase(it);
  return entry;
}

void Directory::Replace(absl::string_view name, Entry entry) {
  by_name_.find(name)->second.entry = entry;
}

}  // namespace cudafs
