// How an open is served: through the kernel's page cache or with direct I/O
// (see Negotiated::direct_io_min), and what the open reply and later
// requests on the open say about it in fuse_file_info.
#ifndef CUDAFS_FS_FUSE_IO_MODE_H_
#define CUDAFS_FS_FUSE_IO_MODE_H_

#include <cstdint>
#include <optional>

#include "fs/fuse/libfuse.h"
#include "fs/fuse/negotiation.h"

namespace cudafs {

// Direct I/O for O_DIRECT and for files that are large when opened; the
// page cache for the rest. A new file (`size_at_open` unset) is empty, so
// its size says nothing: it gets direct I/O, which keeps a large stream at
// full speed and costs a file written once no more requests than the page
// cache does (which asks for security.capability before the first write,
// besides). Nothing gets direct I/O when the negotiation ruled it out.
bool ChooseDirectIo(const Negotiated& negotiated, int flags, std::optional<uint64_t> size_at_open);

// Fills the open reply's caching bits for the choice; the open's handle
// (fh) says it to the requests that follow (IsDirectIoOpen).
void SetCaching(bool direct_io, fuse_file_info* fi);

// Whether a request's open was given direct I/O: requests on an open carry
// its handle, not its flags.
bool IsDirectIoOpen(const fuse_file_info* fi);

// Whether an open applies relatime: reads served from the page cache never
// reach the daemon, and the kernel keeps no atime of its own for FUSE files,
// so an open for reading through the page cache is where the atime moves (a
// truncating one leaves nothing to read; O_NOATIME asks for none).
bool MarksAccessAtOpen(int flags, bool direct_io);

// The kill_suidgid flag of an open, create or write (under
// FUSE_HANDLE_KILLPRIV_V2: the caller lacks CAP_FSETID).
bool KernelKills(const fuse_file_info* fi);

}  // namespace cudafs

#endif  // CUDAFS_FS_FUSE_IO_MODE_H_
