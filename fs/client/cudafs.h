/* libcudafs_client: map a file of a cudafs mount into this process's
 * memory with no copy through FUSE. On a GPU-backed mount the mapping is
 * GPU memory in the calling thread's CUDA context (the device's primary
 * context when the thread has none), at cudafs_mapping_address(); on a
 * host-backed mount it is host memory at cudafs_mapping_pointer().
 *
 * What a mapping is: a private copy of the file's bytes, made inside the
 * device (for a GPU, a copy within VRAM: no PCIe transfer). It costs
 * memory equal to the file until unmapped, later writes to the file do not
 * show in it, and it stays valid when the file is removed or the mount
 * goes away. Shared, writable mappings of the file's own memory
 * (CUDAFS_MAP_WRITABLE) are refused with -EOPNOTSUPP for now.
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
   * read(2) (needs the file open for reading and writing): not built yet. */
  CUDAFS_MAP_WRITABLE = 1,
};

enum cudafs_memory {
  CUDAFS_MEMORY_HOST = 1,
  CUDAFS_MEMORY_CUDA = 2,
};

/* Maps the file at `path`, opened for reading (for writing too with
 * CUDAFS_MAP_WRITABLE). Errors, besides open(2)'s:
 *   -EXDEV       the file is not on a cudafs mount (or the mount's daemon
 *                offers no sharing: an older one)
 *   -EINVAL      an empty file, or not a regular file
 *   -EACCES      the mount lets only its owner in (no allow_other)
 *   -EOPNOTSUPP  CUDAFS_MAP_WRITABLE; or a mount whose memory cannot be
 *                handed out (backend=null, a GPU without POSIX-descriptor
 *                handles)
 *   -ENOSPC      no memory for the copy
 *   -ENOSYS      GPU memory, and no usable CUDA driver in this process
 *   -ENODEV      GPU memory of a GPU this process does not see
 *                (CUDA_VISIBLE_DEVICES)
 *   -EIO         the daemon or the driver failed (cudafs_last_error says) */
CUDAFS_API int cudafs_map(const char* path, int flags, cudafs_mapping** mapping);

/* The same for an open descriptor of the file, which stays the caller's.
 * -EBADF for an O_PATH descriptor, or one not open for reading. */
CUDAFS_API int cudafs_map_fd(int fd, int flags, cudafs_mapping** mapping);

/* Unmaps and frees the mapping. 0, or a negative errno from the driver. */
CUDAFS_API int cudafs_unmap(cudafs_mapping* mapping);

/* Where the mapping is: a CUdeviceptr (CUDA) or a host address (host). */
CUDAFS_API uint64_t cudafs_mapping_address(const cudafs_mapping* mapping);
/* The host address, or NULL for GPU memory. */
CUDAFS_API void* cudafs_mapping_pointer(const cudafs_mapping* mapping);
/* The file's size when mapped: the bytes of the mapping. */
CUDAFS_API uint64_t cudafs_mapping_size(const cudafs_mapping* mapping);
/* enum cudafs_memory. */
CUDAFS_API int cudafs_mapping_memory(const cudafs_mapping* mapping);
/* The GPU (CUDA), as this process numbers it (by PCI bus id, whatever
 * CUDA_VISIBLE_DEVICES says), else -1; -ENODEV from cudafs_map when that
 * GPU is not visible here. */
CUDAFS_API int cudafs_mapping_device(const cudafs_mapping* mapping);

/* Why the calling thread's last failed call failed. */
CUDAFS_API const char* cudafs_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* CUDAFS_FS_CLIENT_CUDAFS_H_ */
