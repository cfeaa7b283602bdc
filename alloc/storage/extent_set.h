// ExtentSet: a file's extents (arena blocks keyed by file offset), ordered
// by start, at most one per start, with the sum of their blocks' sizes.
// Whether extents overlap is the holder's business (ExtentMap's layout).
//
// One extent is held in place and a B-tree is made only from the second on:
// a million small files are a million sets of one extent, and a one-extent
// B-tree would be a 40-byte node, 48 bytes of malloc a file. A holder that
// declares its set [[no_unique_address]] may put small fields in the set's
// tail padding (ExtentMap does).
//
// Iterators are invalidated by any change; erase returns the next one.
// Not thread-safe.
#ifndef CUDAFS_ALLOC_STORAGE_EXTENT_SET_H_
#define CUDAFS_ALLOC_STORAGE_EXTENT_SET_H_

#include <cstddef>
#include <cstdint>
#include <iterator>

#include "absl/container/btree_set.h"
#include "alloc/storage/arena.h"

namespace cudafs {

struct Extent {
  uint64_t start;  // file offset
  Block block;
};

class ExtentSet {
 public:
  class const_iterator;
  using iterator = const_iterator;

  ExtentSet() : tree_(nullptr) {}
  ~ExtentSet();
  ExtentSet(const ExtentSet&) = delete;
  ExtentSet& operator=(const ExtentSet&) = delete;

  const_iterator begin() const;
  const_iterator end() const;
  const_iterator find(uint64_t start) const;
  const_iterator lower_bound(uint64_t offset) const;
  const_iterator upper_bound(uint64_t offset) const;
  // The block at `start`, which must be there.
  const Block& at(uint64_t start) const;
  // Adds the extent unless one starts there.
  void emplace(uint64_t start, Block block);
  // Removes the extent; returns the next.
  const_iterator erase(const_iterator it);
  bool empty() const { return form_ == Form::kEmpty; }
  size_t size() const;
  uint64_t bytes() const;  // the sum of the blocks' sizes

 private:
  // Order by start, for extents and for offsets.
  struct ByStart {
    using is_transparent = void;
    static uint64_t StartOf(uint64_t start) { return start; }
    static uint64_t StartOf(const Extent& extent) { return extent.start; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return StartOf(a) < StartOf(b);
    }
  };
  using Set = absl::btree_set<Extent, ByStart>;
  struct Tree {
    Set set;
    uint64_t bytes = 0;
  };
  enum class Form : uint8_t { kEmpty, kOne, kTree };

  const_iterator At(Set::const_iterator it) const;
  const_iterator AtOne(bool past) const;

  // `form_` says which member is live.
  union {
    Extent one_;
    Tree* tree_;  // two extents or more; owned
  };
  Form form_ = Form::kEmpty;
};

class ExtentSet::const_iterator {
 public:
  using iterator_category = std::bidirectional_iterator_tag;
  using value_type = Extent;
  using difference_type = std::ptrdiff_t;
  using pointer = const Extent*;
  using reference = const Extent&;

  const_iterator() = default;

  reference operator*() const { return set_->form_ == Form::kTree ? *in_tree_ : set_->one_; }
  pointer operator->() const { return &**this; }
  const_iterator& operator++() {
    if (set_->form_ == Form::kTree) {
      ++in_tree_;
    } else {
      past_one_ = true;
    }
    return *this;
  }
  const_iterator& operator--() {
    if (set_->form_ == Form::kTree) {
      --in_tree_;
    } else {
      past_one_ = false;
    }
    return *this;
  }
  bool operator==(const const_iterator& other) const {
    return set_->form_ == Form::kTree ? in_tree_ == other.in_tree_ : past_one_ == other.past_one_;
  }

 private:
  friend class ExtentSet;

  const ExtentSet* set_ = nullptr;
  Set::const_iterator in_tree_;  // in the tree, when there is one
  bool past_one_ = false;        // else: end(), rather than the one extent
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_STORAGE_EXTENT_SET_H_
