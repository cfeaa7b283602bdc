/* libcudafs_client: map a file of a cudafs mount into this process's
 * memory with no copy through FUSE. On a GPU-backed mount the mapping is
 * GPU memory in the calling thread's CUDA context (the device's primary
 * context when the thread has none), at cudafs_mapping_address(); on a
 * host-backed mount it is host memory at cudafs_mapping_pointer().
 *
 * Two kinds of mapping:
 *  - without CUDAFS_MAP_WRITABLE, a private copy of the file's bytes in
 *    memory this process allocates (on a GPU mount, on the GPUs holding the
 *    file, filled by a copy within VRAM: no PCIe transfer). It is this
 *    process's memory, as a buffer read(2) into would be, until unmapped;
 *    later writes to the file do not show in it, and writes to it do not
 *    reach the file. It is the default because CUDA cannot make imported
 *    memory read-only: a reader handed the file's own memory could write
 *    it.
 *  - with CUDAFS_MAP_WRITABLE, the file's own memory: no copy, no memory
 *    of its own. Writes through it are the file's; between writes through
 *    one side (the mapping, or write(2)) and reads through the other, call
 *    cudafs_sync. The file may first move into blocks of its own (a copy
 *    inside the device, once). Files smaller than the device's granule
 *    (2 MiB) are never shared (-EINVAL). The mapping holds the file open,
 *    as mmap(2) does. What a truncate cuts off, and a removed file's
 *    memory once nothing holds the file open, is taken back: the mapping
 *    then reads zeros there (host memory: pages written afterwards are
 *    this process's own; GPU memory: zeroed, but held by the mapping until
 *    unmapped), and it never becomes another file's memory. A punched or
 *    zeroed range stays the file's memory, seen through the mapping.
 * Either stays valid when the file is removed or the mount goes away (a
 * daemon that exits cleanly zeroes shared mappings; a killed one leaves
 * them their bytes).
 *
 * Every call returns 0 or a negative errno; cudafs_last_error() then says
 * why, in words, for the calling thread. Thread-safe. */
#ifndef CUDAFS_FS_CLIENT_CUDAFS_H_
#define CUDAFS_FS_CLIENT_CUDAFS_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUDAFS_API __attribute__((visibility("default")))

typedef struct cudafs_mapping cudafs_mapping;

enum {
  /* A shared mapping of the file's own memory, writes through it seen by
   * read(2) after cudafs_sync (needs the file open for reading and
   * writing). */
  CUDAFS_MAP_WRITABLE = 1,
};

enum cudafs_memory {
  CUDAFS_MEMORY_HOST = 1,
  CUDAFS_MEMORY_CUDA = 2,
};

/* Maps the file at `path`, opened for reading (for writing too with
 * CUDAFS_MAP_WRITABLE). Errors, besides open(2)'s:
 *   -EXDEV       the file is not on a cudafs mount (or the mount's daemon
 *                offers no sharing, or only a bind mount of a directory
 *                in it is visible, where the daemon cannot be found
 *                safely: its socket is named at the mount's root only)
 *   -EINVAL      an empty file, or not a regular file; with
 *                CUDAFS_MAP_WRITABLE, a file under 2 MiB
 *   -EACCES      the mount lets only its owner in (no allow_other); with
 *                CUDAFS_MAP_WRITABLE, a descriptor not open for reading
 *                and writing
 *   -EOPNOTSUPP  a mount whose memory cannot be handed out (backend=null,
 *                a GPU without POSIX-descriptor handles); a private copy
 *                of a file whose bytes on two GPUs meet inside one 2 MiB
 *                granule (map it writable instead)
 *   -ENOMEM      no memory of this process's for the copy
 *   -ENOSPC      no room on the mount for moving the file
 *   -EAGAIN      the daemon had too many requests at once, for seconds;
 *                or a copy's bytes moved between GPUs meanwhile
 *   -EPERM       the socket named is served by neither the mount's owner
 *                nor root: not its daemon (nothing is sent to it)
 *   -ETIMEDOUT   the daemon accepted and did not answer in time (30 s,
 *                and 1 s more per 128 MiB of the file or copy)
 *   -EPROTONOSUPPORT  a daemon of another cudafs version
 *   -ENOSYS      GPU memory, and no usable CUDA driver in this process
 *   -ENODEV      GPU memory of a GPU this process does not see
 *                (CUDA_VISIBLE_DEVICES); a file on GPUs without peer
 *                access to each other
 *   -EIO         the daemon or the driver failed (cudafs_last_error says) */
CUDAFS_API int cudafs_map(const char* path, int flags, cudafs_mapping** mapping);

/* The same for an open descriptor of the file, which stays the caller's.
 * -EBADF for an O_PATH descriptor, or one not open for reading. */
CUDAFS_API int cudafs_map_fd(int fd, int flags, cudafs_mapping** mapping);

/* After writing through a writable mapping, or through write(2) to a file
 * mapped writable: makes each side see the other's bytes (fsync(2) of the
 * file, then the daemon drops the kernel's cached pages of it and moves
 * its mtime). Bytes written through both sides between two syncs end up
 * as either. -EINVAL for a private copy; else as cudafs_map. */
CUDAFS_API int cudafs_sync(cudafs_mapping* mapping);

/* Unmaps and frees the mapping. 0, or a negative errno from the driver. */
CUDAFS_API int cudafs_unmap(cudafs_mapping* mapping);

/* Host memory only: moves the mapping onto `address`, the page-aligned
 * start of a range of the caller's (an mmap(2) of at least the file's
 * size, rounded up to a page), whose pages it replaces; the mapping then
 * lives there, and the range stays the caller's to unmap (cudafs_unmap
 * leaves it). For a language runtime that must own the memory it hands
 * out (Python's mmap objects refuse to close while views exist). -EINVAL
 * for GPU memory, a mapping moved before, or an unaligned address; after
 * a failed mremap (the errno), the mapping may be partly moved: unmap
 * both. */
CUDAFS_API int cudafs_mapping_move(cudafs_mapping* mapping, void* address);

/* Where the mapping is: a CUdeviceptr (CUDA) or a host address (host). */
CUDAFS_API uint64_t cudafs_mapping_address(const cudafs_mapping* mapping);
/* The host address, or NULL for GPU memory. */
CUDAFS_API void* cudafs_mapping_pointer(const cudafs_mapping* mapping);
/* The file's size when mapped: the bytes of the mapping. */
CUDAFS_API uint64_t cudafs_mapping_size(const cudafs_mapping* mapping);
/* enum cudafs_memory. */
CUDAFS_API int cudafs_mapping_memory(const cudafs_mapping* mapping);
/* The GPU (CUDA) holding the mapping's first byte, as this process
 * numbers it, else -1: where the driver says the address lives, and so
 * where PyTorch places a tensor of it. On a mount over several GPUs the
 * other pieces may lie on other GPUs: every GPU holding a piece can read
 * and write all of it (peer access over NVLink or PCIe), and so can the
 * calling thread's GPU where it reaches them all. */
CUDAFS_API int cudafs_mapping_device(const cudafs_mapping* mapping);

enum {
  /* cudafs_make_room: every byte that can move, not `bytes`. */
  CUDAFS_ROOM_ALL = 1,
  /* cudafs_make_room: then hold the room for 60 s: nothing comes back to
   * the GPUs, and new data goes to host memory first. */
  CUDAFS_ROOM_HOLD = 2,
};

/* Moves file data of the cudafs mounted at `mount` (the mount's root) off
 * its GPUs into host memory until `bytes` are free on the GPU whose PCI
 * bus id is `gpu` ("0000:65:00.0"; NULL: on each GPU of the mount), and
 * returns then: for a job launcher before a program that sizes itself
 * from free memory, or a program whose GPU allocation failed. Nothing is
 * lost: files read the same, and their data comes back once the GPU has
 * had room for a few seconds (not while held). The mount's owner and root
 * may ask for anything; any other user only for `bytes`, without
 * CUDAFS_ROOM_HOLD. The daemon serves it off its file requests. Errors:
 *   -EXDEV       `mount` is not the root of a cudafs mount
 *   -EPERM       CUDAFS_ROOM_ALL or CUDAFS_ROOM_HOLD from a user other
 *                than the owner and root
 *   -EOPNOTSUPP  the mount holds no GPU memory, or has no host memory to
 *                move data to (spill=0)
 *   -ENOSPC      no more data can move (host memory is full, or the rest
 *                is other programs' memory or files they map)
 *   -ETIMEDOUT   no answer within 30 s plus 1 s per GiB asked (10 minutes
 *                for all)
 *   -EPROTONOSUPPORT  a daemon of another cudafs version */
CUDAFS_API int cudafs_make_room(const char* mount, const char* gpu, uint64_t bytes, int flags);

/* Why the calling thread's last failed call failed. */
CUDAFS_API const char* cudafs_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* CUDAFS_FS_CLIENT_CUDAFS_H_ */
