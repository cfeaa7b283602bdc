// Coding: the integers and byte strings of a filesystem image (SaveImage),
// as LevelDB writes its records: unsigned varints, and byte strings after
// their length. An image outlives the process that wrote it, so readers
// check every field: a Get fails (false, the input then unspecified) on
// input that ends early or holds a varint longer than ten bytes.
#ifndef CUDAFS_ALLOC_BASE_CODING_H_
#define CUDAFS_ALLOC_BASE_CODING_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/strings/string_view.h"

namespace cudafs {

inline constexpr size_t kMaxVarintBytes = 10;

// Writes `value` at `to` (room for kMaxVarintBytes); returns the bytes used.
size_t EncodeVarint(char* to, uint64_t value);
// EncodeVarint of each, one after the other (room for kMaxVarintBytes each).
size_t EncodeVarints(char* to, std::initializer_list<uint64_t> values);
void PutVarint(std::string* out, uint64_t value);
// PutVarint of each, in one append (at most kMaxVarintsAtOnce).
inline constexpr size_t kMaxVarintsAtOnce = 16;
void PutVarints(std::string* out, std::initializer_list<uint64_t> values);
void PutBytes(std::string* out, absl::string_view bytes);
// What PutBytes would write of the bytes `put(out)` appends, written in
// place: no copy of them (put may append nothing).
template <typename Put>
void PutBytesOf(std::string* out, Put put);

// Each consumes what it read from the front of `in`.
bool GetVarint(absl::string_view* in, uint64_t* value);
bool GetBytes(absl::string_view* in, absl::string_view* bytes);
// A varint that must be at most `max`.
bool GetVarintUpTo(absl::string_view* in, uint64_t max, uint64_t* value);

template <typename Put>
void PutBytesOf(std::string* out, Put put) {
  // Room for a one-byte length, which most are; a longer one moves the
  // bytes up.
  const size_t at = out->size();
  out->push_back(0);
  put(out);
  char length[kMaxVarintBytes];
  const size_t used = EncodeVarint(length, out->size() - at - 1);
  if (used > 1) out->insert(at + 1, used - 1, '\0');
  out->replace(at, used, length, used);
}

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_BASE_CODING_H_
