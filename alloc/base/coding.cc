#include "alloc/base/coding.h"

#include <cassert>

namespace cudafs {

size_t EncodeVarint(char* to, uint64_t value) {
  size_t used = 0;
  while (value >= 0x80) {
    to[used++] = static_cast<char>(value | 0x80);
    value >>= 7;
  }
  to[used++] = static_cast<char>(value);
  return used;
}

void PutVarint(std::string* out, uint64_t value) {
  char bytes[kMaxVarintBytes];
  out->append(bytes, EncodeVarint(bytes, value));
}

size_t EncodeVarints(char* to, std::initializer_list<uint64_t> values) {
  size_t used = 0;
  for (const uint64_t value : values) used += EncodeVarint(to + used, value);
  return used;
}

void PutVarints(std::string* out, std::initializer_list<uint64_t> values) {
  assert(values.size() <= kMaxVarintsAtOnce);
  char bytes[kMaxVarintsAtOnce * kMaxVarintBytes];
  out->append(bytes, EncodeVarints(bytes, values));
}

void PutBytes(std::string* out, absl::string_view bytes) {
  PutVarint(out, bytes.size());
  out->append(bytes.data(), bytes.size());
}

bool GetVarint(absl::string_view* in, uint64_t* value) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64 && !in->empty(); shift += 7) {
    const uint64_t byte = static_cast<unsigned char>(in->front());
    in->remove_prefix(1);
    // The tenth byte holds bit 63 only.
    if (shift == 63 && byte > 1) return false;
    result |= (byte & 0x7f) << shift;
    if (byte < 0x80) {
      *value = result;
      return true;
    }
  }
  return false;
}

bool GetBytes(absl::string_view* in, absl::string_view* bytes) {
  uint64_t length = 0;
  if (!GetVarint(in, &length) || length > in->size()) return false;
  *bytes = in->substr(0, length);
  in->remove_prefix(length);
  return true;
}

bool GetVarintUpTo(absl::string_view* in, uint64_t max, uint64_t* value) {
  return GetVarint(in, value) && *value <= max;
}

}  // namespace cudafs
