// Coding: the integers and byte strings of a filesystem image (SaveImage),
// as LevelDB writes its records: unsigned varints, and byte strings after
// their length. An image outlives the process that wrote it, so readers
// check every field: a Get fails (false, the input then unspecified) on
// input that ends early or holds a varint longer than ten bytes.
#ifndef CUDAFS_ALLOC_BASE_CODING_H_
#define CUDAFS_ALLOC_BASE_CODING_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace cudafs {

void PutVarint(std::string* out, uint64_t value);
void PutBytes(std::string* out, absl::string_view bytes);

// Each consumes what it read from the front of `in`.
bool GetVarint(absl::string_view* in, uint64_t* value);
bool GetBytes(absl::string_view* in, absl::string_view* bytes);
// A varint that must be at most `max`.
bool GetVarintUpTo(absl::string_view* in, uint64_t max, uint64_t* value);

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_BASE_CODING_H_
