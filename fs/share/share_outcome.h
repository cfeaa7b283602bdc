// What serving one request comes to: the messages to send back, what they
// lend descriptors from, and what the connection waits for next.
#ifndef CUDAFS_FS_SHARE_SHARE_OUTCOME_H_
#define CUDAFS_FS_SHARE_SHARE_OUTCOME_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "alloc/devices/exported_memory.h"
#include "fs/core/filesystem.h"
#include "fs/wire/share_protocol.h"

namespace cudafs {

// A message to send, with descriptors borrowed from ShareOutcome::held.
struct ShareMessage {
  std::string bytes;
  std::vector<int> fds;
};

// The bytes of a wire struct (fs/wire/share_protocol.h) as a message.
template <typename T>
ShareMessage MessageOf(const T& value, std::vector<int> fds = {}) {
  return {std::string(reinterpret_cast<const char*>(&value), sizeof value), std::move(fds)};
}

// What a connection waits for after the messages are sent.
enum class ShareNext {
  kClose,
  kFill,      // kShareFill, with memory for the copy planned
  kImported,  // kShareImported (or the end): `held` goes then
};

struct ShareOutcome {
  std::vector<ShareMessage> messages;
  std::unique_ptr<ExportedMemory> held;
  ShareNext next = ShareNext::kClose;
  // kFill: the copy the client provides memory for, in pieces of these
  // lengths.
  InodeNumber ino = 0;
  ShareMemoryKind kind = kShareHost;
  std::vector<uint64_t> piece_bytes;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_SHARE_SHARE_OUTCOME_H_
