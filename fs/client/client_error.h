// The client library's errors: a negative errno returned, and why in
// words, kept per thread for cudafs_last_error().
#ifndef CUDAFS_FS_CLIENT_CLIENT_ERROR_H_
#define CUDAFS_FS_CLIENT_CLIENT_ERROR_H_

namespace cudafs::client {

// Records the printf-style message as the calling thread's last error;
// returns -error.
int Fail(int error, const char* format, ...) __attribute__((format(printf, 2, 3)));

// The calling thread's last error message ("" before any).
const char* LastError();

}  // namespace cudafs::client

#endif  // CUDAFS_FS_CLIENT_CLIENT_ERROR_H_
