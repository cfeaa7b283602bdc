#include "alloc/storage/extent_set.h"

#include <cassert>

namespace cudafs {

// The one extent in place and the form beside it; the rest is tail padding
// a holder may use.
static_assert(sizeof(ExtentSet) <= sizeof(Extent) + 8, "ExtentSet grew past one extent in place");

ExtentSet::~ExtentSet() {
  if (form_ == Form::kTree) delete tree_;
}

ExtentSet::const_iterator ExtentSet::At(Set::const_iterator it) const {
  const_iterator at;
  at.set_ = this;
  at.in_tree_ = it;
  return at;
}

ExtentSet::const_iterator ExtentSet::AtOne(bool past) const {
  const_iterator at;
  at.set_ = this;
  at.past_one_ = past || form_ == Form::kEmpty;
  return at;
}

ExtentSet::const_iterator ExtentSet::begin() const {
  return form_ == Form::kTree ? At(tree_->set.begin()) : AtOne(false);
}

ExtentSet::const_iterator ExtentSet::end() const {
  return form_ == Form::kTree ? At(tree_->set.end()) : AtOne(true);
}

ExtentSet::const_iterator ExtentSet::find(uint64_t start) const {
  if (form_ == Form::kTree) return At(tree_->set.find(start));
  return AtOne(form_ == Form::kEmpty || one_.start != start);
}

ExtentSet::const_iterator ExtentSet::lower_bound(uint64_t offset) const {
  if (form_ == Form::kTree) return At(tree_->set.lower_bound(offset));
  return AtOne(form_ == Form::kEmpty || one_.start < offset);
}

ExtentSet::const_iterator ExtentSet::upper_bound(uint64_t offset) const {
  if (form_ == Form::kTree) return At(tree_->set.upper_bound(offset));
  return AtOne(form_ == Form::kEmpty || one_.start <= offset);
}

const Block& ExtentSet::at(uint64_t start) const {
  const const_iterator it = find(start);
  assert(it != end());
  return it->block;
}

void ExtentSet::emplace(uint64_t start, Block block) {
  switch (form_) {
    case Form::kEmpty:
      one_ = Extent{start, block};
      form_ = Form::kOne;
      return;
    case Form::kOne: {
      if (one_.start == start) return;
      auto* tree = new Tree;
      tree->set.insert(one_);
      tree->set.insert(Extent{start, block});
      tree->bytes = one_.block.size + block.size;
      tree_ = tree;
      form_ = Form::kTree;
      return;
    }
    case Form::kTree:
      if (tree_->set.insert(Extent{start, block}).second) tree_->bytes += block.size;
      return;
  }
}

ExtentSet::const_iterator ExtentSet::erase(const_iterator it) {
  if (form_ != Form::kTree) {
    form_ = Form::kEmpty;
    return end();
  }
  tree_->bytes -= it->block.size;
  Set::const_iterator next = tree_->set.erase(it.in_tree_);
  if (tree_->set.size() > 1) return At(next);
  // Back in place: the tree's node would hold one extent.
  const bool past = next == tree_->set.end();
  const Extent one = *tree_->set.begin();
  delete tree_;
  one_ = one;
  form_ = Form::kOne;
  return AtOne(past);
}

size_t ExtentSet::size() const {
  switch (form_) {
    case Form::kEmpty:
      return 0;
    case Form::kOne:
      return 1;
    case Form::kTree:
      return tree_->set.size();
  }
  return 0;
}

uint64_t ExtentSet::bytes() const {
  switch (form_) {
    case Form::kEmpty:
      return 0;
    case Form::kOne:
      return one_.block.size;
    case Form::kTree:
      return tree_->bytes;
  }
  return 0;
}

}  // namespace cudafs
