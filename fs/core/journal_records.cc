#include "fs/core/journal_records.h"

#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "alloc/base/coding.h"
#include "alloc/storage/extent_set.h"
#include "cache/cached_file.h"
#include "fs/core/inode_coding.h"

namespace cudafs {
namespace {

constexpr char kInode = 'I';
constexpr char kFileWrite = 'F';
constexpr char kHead = 'H';
constexpr char kEntry = 'A';
constexpr char kNoEntry = 'R';
constexpr char kCounts = 'C';
constexpr char kGone = 'G';
constexpr char kExchanged = 'X';
constexpr uint64_t kRootIno = 1;

// One inode as the records so far leave it.
struct Node {
  struct Entry {
    std::string name;
    uint64_t ino = 0;
    uint64_t type = 0;  // S_IFMT >> 12
  };
  bool known = false;  // its 'I' record came (entries alone may come first)
  uint64_t sequence = 0;       // of the record its head came from ('I', 'F' or 'H')
  uint64_t full_sequence = 0;  // its 'I' record's
  uint64_t head[kInodeHeadFields] = {};
  std::string xattrs;
  std::string body;  // a symlink's or a device's
  // A regular file's data: where it ends and when it was last used, as the
  // last record left them, and each extent as the last record naming its
  // file offset left it.
  struct Placed {
    uint64_t sequence = 0;
    Block block;
  };
  bool has_data = false;
  uint64_t tail_sequence = 0;
  CachedFile::Record tail;  // its extents unused
  absl::btree_map<uint64_t, Placed> extents;
  uint64_t parent = 0;
  uint64_t next_cookie = Directory::kDotDotCookie + 1;
  absl::btree_map<uint64_t, Entry> by_cookie;
  // Each name's last record: its sequence, and its cookie (0: no entry).
  struct Name {
    uint64_t sequence = 0;
    uint64_t cookie = 0;
  };
  absl::flat_hash_map<std::string, Name> names;

  bool directory() const { return (head[0] << 12) == S_IFDIR; }
  bool regular() const { return (head[0] << 12) == S_IFREG; }
};

bool ParseHead(absl::string_view head, uint64_t (&fields)[kInodeHeadFields]) {
  for (uint64_t& field : fields) {
    if (!GetVarint(&head, &field)) return false;
  }
  return head.empty();
}

class Replay {
 public:
  explicit Replay(ReplayReport* report) : report_(report) {}

  // Applies each record of `records`.
  absl::Status Apply(absl::string_view records) {
    while (!records.empty()) {
      const char kind = records.front();
      records.remove_prefix(1);
      ++report_->records;
      bool ok = false;
      switch (kind) {
        case kInode:
          ok = ApplyInode(&records);
          break;
        case kFileWrite:
          ok = ApplyFileWrite(&records);
          break;
        case kHead:
          ok = ApplyHead(&records);
          break;
        case kEntry:
        case kNoEntry:
          ok = ApplyEntry(kind == kEntry, &records);
          break;
        case kCounts: {
          uint64_t ino = 0, sequence = 0, lookups = 0, opens = 0;
          ok = GetVarint(&records, &ino) && GetVarint(&records, &sequence) &&
               GetVarint(&records, &lookups) && GetVarintUpTo(&records, UINT32_MAX, &opens);
          if (ok && Live(ino)) {
            Counted& counted = counts_[ino];
            if (sequence >= counted.sequence) counted = Counted{sequence, lookups, opens};
          }
          break;
        }
        case kGone: {
          uint64_t ino = 0;
          ok = GetVarint(&records, &ino) && ino != kRootIno;
          if (ok) {
            Live(ino);
            gone_.insert(ino);
            nodes_.erase(ino);
            counts_.erase(ino);
          }
          break;
        }
        case kExchanged: {
          uint64_t request = 0;
          ok = GetVarint(&records, &request);
          if (ok) report_->exchanges.push_back(request);
          break;
        }
        default:
          break;
      }
      if (!ok) {
        return absl::DataLossError(
            absl::StrFormat("the metadata log's record %d is no record",
                            report_->records));
      }
    }
    return absl::OkStatus();
  }

  // The image of what the records made, mended into a tree LoadImage takes.
  absl::StatusOr<std::string> Image() {
    for (auto it = nodes_.begin(); it != nodes_.end();) {
      if (!it->second.known) {
        if (!it->second.by_cookie.empty()) {
          Mend(absl::StrFormat("directory %d had entries but no record", it->first));
        }
        nodes_.erase(it++);
      } else {
        ++it;
      }
    }
    const auto root = nodes_.find(kRootIno);
    if (root == nodes_.end() || !root->second.directory()) {
      return absl::DataLossError("the metadata log has no root directory");
    }
    root->second.parent = kRootIno;
    // The tree from the root: every entry names an inode of its type, and
    // a directory has one name, in its parent.
    absl::flat_hash_map<uint64_t, uint64_t> names;
    absl::flat_hash_map<uint64_t, uint64_t> subdirectories;
    absl::flat_hash_set<uint64_t> reached = {kRootIno};
    std::vector<uint64_t> to_visit = {kRootIno};
    while (!to_visit.empty()) {
      const uint64_t dir_ino = to_visit.back();
      to_visit.pop_back();
      Node& dir = nodes_[dir_ino];
      for (auto it = dir.by_cookie.begin(); it != dir.by_cookie.end();) {
        const Node::Entry& entry = it->second;
        const auto child = nodes_.find(entry.ino);
        const bool directory = (entry.type << 12) == S_IFDIR;
        std::string why;
        if (child == nodes_.end() || (child->second.head[0] != entry.type)) {
          why = "names no inode of its type";
        } else if (directory && (entry.ino == kRootIno || reached.contains(entry.ino))) {
          why = "names a directory named elsewhere";
        }
        if (!why.empty()) {
          Mend(absl::StrFormat("entry \"%s\" of directory %d %s", entry.name, dir_ino, why));
          it = dir.by_cookie.erase(it);
          continue;
        }
        ++names[entry.ino];
        if (directory) {
          ++subdirectories[dir_ino];
          reached.insert(entry.ino);
          child->second.parent = dir_ino;
          to_visit.push_back(entry.ino);
        }
        ++it;
      }
    }
    std::vector<uint64_t> numbers;
    for (auto it = nodes_.begin(); it != nodes_.end();) {
      Node& node = it->second;
      const bool directory = node.directory();
      const uint64_t links = !directory                    ? names[it->first]
                             : reached.contains(it->first) ? 2 + subdirectories[it->first]
                                                           : 0;
      if (node.head[kInodeHeadNlink] != links) {
        Mend(absl::StrFormat("inode %d had %d links where its names make %d", it->first,
                             node.head[kInodeHeadNlink], links));
        node.head[kInodeHeadNlink] = links;
      }
      const auto counted = counts_.find(it->first);
      const bool referenced = counted != counts_.end() &&
                              (counted->second.lookups != 0 || counted->second.opens != 0);
      if (links == 0 && !referenced) {
        nodes_.erase(it++);  // it was going: its last reference went with the crash
        continue;
      }
      if (directory && links == 0) {
        node.by_cookie.clear();  // a removed directory is empty
      }
      numbers.push_back(it->first);
      ++it;
    }
    std::sort(numbers.begin(), numbers.end());
    std::string out(kImageMagic);
    PutVarint(&out, max_ino_ + 1);
    PutVarint(&out, numbers.size());
    for (const uint64_t ino : numbers) {
      const Node& node = nodes_[ino];
      PutVarint(&out, ino);
      for (const uint64_t field : node.head) PutVarint(&out, field);
      const auto counted = counts_.find(ino);
      PutVarint(&out, counted == counts_.end() ? 0 : counted->second.lookups);
      PutVarint(&out, counted == counts_.end() ? 0 : counted->second.opens);
      out.append(node.xattrs);
      if (node.directory()) {
        PutVarint(&out, node.parent);
        PutVarint(&out, node.next_cookie);
        PutVarint(&out, node.by_cookie.size());
        for (const auto& [cookie, entry] : node.by_cookie) {
          PutBytes(&out, entry.name);
          PutVarint(&out, entry.ino);
          PutVarint(&out, entry.type);
          PutVarint(&out, cookie);
        }
      } else if (node.regular()) {
        CachedFile::Record data = node.tail;
        data.map.extents = Extents(ino, node);
        PutRegularBody(node.has_data, data, &out);
      } else {
        out.append(node.body);
      }
    }
    report_->inodes = numbers.size();
    return out;
  }

 private:
  // False (and nothing to do) for an inode gone before; notes the number.
  bool Live(uint64_t ino) {
    max_ino_ = std::max(max_ino_, ino);
    return !gone_.contains(ino);
  }

  void Mend(std::string what) { report_->mended.push_back(std::move(what)); }

  // What 'I', 'F' and 'H' records start with (PutRecordStart).
  struct RecordStart {
    uint64_t ino = 0;
    uint64_t sequence = 0;
    uint64_t fields[kInodeHeadFields];
  };
  static bool GetRecordStart(absl::string_view* in, RecordStart* start) {
    absl::string_view head;
    return GetVarint(in, &start->ino) && start->ino != 0 && GetVarint(in, &start->sequence) &&
           GetBytes(in, &head) && ParseHead(head, start->fields);
  }
  // The node a record starting so changes; null for an inode gone, or a
  // record older than the node's 'I' record, which holds what it changed.
  Node* NodeFor(const RecordStart& start) {
    if (!Live(start.ino)) return nullptr;
    Node& node = nodes_[start.ino];
    if (node.known && start.sequence < node.full_sequence) return nullptr;
    return &node;
  }

  bool ApplyInode(absl::string_view* in) {
    RecordStart start;
    absl::string_view xattrs, body;
    if (!GetRecordStart(in, &start) || !GetBytes(in, &xattrs) || !GetBytes(in, &body)) {
      return false;
    }
    Node* const found = NodeFor(start);
    if (found == nullptr) return true;
    Node& node = *found;
    const uint64_t sequence = start.sequence;
    const uint64_t type = start.fields[0] << 12;
    node.full_sequence = sequence;
    node.known = true;
    node.xattrs = std::string(xattrs);
    SetHead(node, sequence, start.fields);
    if (type == S_IFDIR) {
      uint64_t next_cookie = 0;
      if (!GetVarint(&body, &node.parent) || !GetVarint(&body, &next_cookie) || !body.empty()) {
        return false;
      }
      node.next_cookie = std::max(node.next_cookie, next_cookie);
    } else if (type == S_IFREG) {
      bool has_data = false;
      CachedFile::Record data;
      if (!ParseRegularBody(body, &has_data, &data)) return false;
      // The state of every extent: those last recorded before are gone
      // unless it names them.
      for (auto it = node.extents.begin(); it != node.extents.end();) {
        it = it->second.sequence < sequence ? node.extents.erase(it) : std::next(it);
      }
      ApplyData(node, sequence, has_data, std::move(data));
    } else {
      node.body = std::string(body);
    }
    return true;
  }

  bool ApplyFileWrite(absl::string_view* in) {
    RecordStart start;
    CachedFile::Record data;
    if (!GetRecordStart(in, &start) || (start.fields[0] << 12) != S_IFREG ||
        !CachedFile::ParseRecord(in, &data)) {
      return false;
    }
    if (Node* node = NodeFor(start)) {
      SetHead(*node, start.sequence, start.fields);
      ApplyData(*node, start.sequence, /*has_data=*/true, std::move(data));
    }
    return true;
  }

  bool ApplyHead(absl::string_view* in) {
    RecordStart start;
    if (!GetRecordStart(in, &start)) return false;
    if (Node* node = NodeFor(start)) SetHead(*node, start.sequence, start.fields);
    return true;
  }

  static void SetHead(Node& node, uint64_t sequence, const uint64_t (&fields)[kInodeHeadFields]) {
    if (sequence < node.sequence) return;
    node.sequence = sequence;
    std::copy(std::begin(fields), std::end(fields), std::begin(node.head));
  }

  static void ApplyData(Node& node, uint64_t sequence, bool has_data, CachedFile::Record data) {
    for (const Extent& extent : data.map.extents) {
      Node::Placed& placed = node.extents[extent.start];
      if (placed.sequence <= sequence) placed = {sequence, extent.block};
    }
    if (sequence >= node.tail_sequence) {
      node.tail_sequence = sequence;
      node.has_data = has_data;
      data.map.extents.clear();
      node.tail = std::move(data);
    }
  }

  // The extents of regular file `ino`, in file order and apart. Blocks
  // are aligned to their power-of-two sizes, so two that overlap nest:
  // the older (a transaction that changed it did not land, one after it
  // did) is split into halves, keeping those the later ones leave alone.
  std::vector<Extent> Extents(uint64_t ino, const Node& node) {
    std::vector<std::pair<uint64_t, Extent>> by_age;  // (sequence, extent)
    for (const auto& [start, placed] : node.extents) {
      by_age.push_back({placed.sequence, Extent{start, placed.block}});
    }
    std::stable_sort(by_age.begin(), by_age.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    absl::btree_map<uint64_t, Block> kept;
    bool split = false;
    std::vector<Extent> to_place;
    for (const auto& [sequence, extent] : by_age) {
      to_place.push_back(extent);
      while (!to_place.empty()) {
        const Extent piece = to_place.back();
        to_place.pop_back();
        const uint64_t end = piece.start + piece.block.size;
        auto next = kept.lower_bound(piece.start);
        const bool inside_previous =
            next != kept.begin() && std::prev(next)->first + std::prev(next)->second.size > piece.start;
        const bool covers_next = next != kept.end() && next->first < end;
        if (inside_previous || (covers_next && next->first == piece.start &&
                                next->second.size >= piece.block.size)) {
          split = true;  // within a later extent
        } else if (covers_next && piece.block.size > 1) {
          split = true;
          const uint64_t half = piece.block.size / 2;
          to_place.push_back(Extent{piece.start, Block{piece.block.offset, half}});
          to_place.push_back(Extent{piece.start + half, Block{piece.block.offset + half, half}});
        } else if (!covers_next) {
          kept.emplace(piece.start, piece.block);
        }
      }
    }
    if (split) Mend(absl::StrFormat("file %d had extents a later one overlapped", ino));
    std::vector<Extent> extents;
    extents.reserve(kept.size());
    for (const auto& [start, block] : kept) extents.push_back(Extent{start, block});
    return extents;
  }

  bool ApplyEntry(bool present, absl::string_view* in) {
    uint64_t dir = 0, sequence = 0, ino = 0, type = 0, cookie = 0;
    absl::string_view name;
    if (!GetVarint(in, &dir) || !GetBytes(in, &name) || name.empty() ||
        !GetVarint(in, &sequence)) {
      return false;
    }
    if (present && (!GetVarint(in, &ino) || !GetVarintUpTo(in, S_IFMT >> 12, &type) ||
                    !GetVarint(in, &cookie) || cookie <= Directory::kDotDotCookie)) {
      return false;
    }
    if (!Live(dir)) return true;
    if (present) Live(ino);
    Node& node = nodes_[dir];
    // A cookie once handed out is never handed out again, whichever state
    // of the name wins.
    if (present) node.next_cookie = std::max(node.next_cookie, cookie + 1);
    Node::Name& last = node.names[name];
    if (sequence < last.sequence) return true;  // an older state of the name
    last.sequence = sequence;
    if (last.cookie != 0) node.by_cookie.erase(std::exchange(last.cookie, 0));
    if (!present) return true;
    // A cookie names one entry.
    if (const auto taken = node.by_cookie.find(cookie); taken != node.by_cookie.end()) {
      if (const auto other = node.names.find(taken->second.name); other != node.names.end()) {
        other->second.cookie = 0;
      }
      node.by_cookie.erase(taken);
    }
    node.by_cookie[cookie] = Node::Entry{std::string(name), ino, type};
    last.cookie = cookie;
    return true;
  }

  ReplayReport* const report_;
  absl::flat_hash_map<uint64_t, Node> nodes_;
  struct Counted {
    uint64_t sequence = 0;
    uint64_t lookups = 0;
    uint64_t opens = 0;
  };
  absl::flat_hash_map<uint64_t, Counted> counts_;
  absl::flat_hash_set<uint64_t> gone_;
  uint64_t max_ino_ = kRootIno;
};

}  // namespace

namespace {

// What 'I', 'F' and 'H' records start with: kind, inode, sequence, head.
void PutRecordStart(char kind, const Inode& inode, uint64_t sequence, std::string* out)
    ABSL_SHARED_LOCKS_REQUIRED(inode.mu) {
  // At once: every commit writes a head or more.
  char head[kInodeHeadBytes];
  const size_t head_bytes = EncodeInodeHead(inode, head);
  char start[1 + 3 * kMaxVarintBytes];
  start[0] = kind;
  out->append(start, 1 + EncodeVarints(start + 1, {inode.ino, sequence, head_bytes}));
  out->append(head, head_bytes);
}

// An 'I' record whose body `put_body` writes.
template <typename PutBody>
void PutRecordOf(const Inode& inode, uint64_t sequence, std::string* out, PutBody put_body)
    ABSL_SHARED_LOCKS_REQUIRED(inode.mu) {
  PutRecordStart(kInode, inode, sequence, out);
  PutBytesOf(out, [&](std::string* xattrs) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    PutInodeXattrs(inode, xattrs);
  });
  PutBytesOf(out, put_body);
}

}  // namespace

uint64_t NextJournalSequence() {
  static std::atomic<uint64_t> next = [] {
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return uint64_t(now.tv_sec) * 1'000'000'000 + uint64_t(now.tv_nsec);
  }();
  return next.fetch_add(1, std::memory_order_relaxed);
}

void PutInodeRecord(const Inode& inode, uint64_t sequence, std::string* out) {
  PutRecordOf(inode, sequence, out, [&](std::string* body) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    PutInodeBody(inode, /*entries=*/false, body);
  });
}

void PutFileRecord(const Inode& inode, uint64_t sequence, std::string* out) {
  PutRecordOf(inode, sequence, out, [&](std::string* body) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    PutFileBody(inode, body);
  });
}

void PutHeadRecord(const Inode& inode, uint64_t sequence, std::string* out) {
  PutRecordStart(kHead, inode, sequence, out);
}

void PutFileWriteRecord(const Inode& inode, uint64_t sequence, uint64_t offset, uint64_t end,
                        std::string* out) {
  PutRecordStart(kFileWrite, inode, sequence, out);
  inode.data()->EncodeRangeTo(offset, end, out);
}

void PutEntryRecord(uint64_t directory, absl::string_view name, uint64_t sequence,
                    const std::optional<Directory::Entry>& entry, uint64_t cookie,
                    std::string* out) {
  out->push_back(entry ? kEntry : kNoEntry);
  PutVarint(out, directory);
  PutBytes(out, name);
  PutVarint(out, sequence);
  if (!entry) return;
  PutVarints(out, {entry->ino, uint64_t{entry->type} >> 12, cookie});
}

void PutCountsRecord(uint64_t ino, uint64_t sequence, uint64_t lookups, uint64_t opens,
                     std::string* out) {
  out->push_back(kCounts);
  PutVarints(out, {ino, sequence, lookups, opens});
}

void PutExchangedRecord(uint64_t request, std::string* out) {
  out->push_back(kExchanged);
  PutVarint(out, request);
}

void PutGoneRecord(uint64_t ino, std::string* out) {
  out->push_back(kGone);
  PutVarint(out, ino);
}

absl::StatusOr<std::string> ReplayJournal(absl::string_view checkpoint, absl::string_view journal,
                                          ReplayReport* report) {
  *report = ReplayReport();
  Replay replay(report);
  if (absl::Status s = replay.Apply(checkpoint); !s.ok()) return s;
  while (!journal.empty()) {
    absl::string_view transaction;
    if (!GetBytes(&journal, &transaction)) {
      return absl::DataLossError("the metadata log's journal is cut short");
    }
    ++report->transactions;
    if (absl::Status s = replay.Apply(transaction); !s.ok()) return s;
  }
  return replay.Image();
}

}  // namespace cudafs
