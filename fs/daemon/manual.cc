#include "fs/daemon/manual.h"

#include "absl/strings/str_cat.h"
#include "fs/daemon/option_table.h"

namespace cudafs {

std::string ManualPage(absl::string_view version) {
  return absl::StrCat(R"(.TH CUDAFS 8 "" "cudafs )", RoffEscape(version), R"(" "System Administration"
.SH NAME
cudafs \- a tmpfs-like filesystem whose file data lives in GPU memory
.SH SYNOPSIS
.B cudafs
[\fISOURCE\fR] \fIMOUNTPOINT\fR [\fB\-f\fR] [\fB\-d\fR] [\fB\-s\fR] [\fB\-o\fR \fIOPT\fR[,\fIOPT\fR...]]
.br
.B cudafs
\fB\-\-help\fR | \fB\-\-version\fR | \fB\-\-list\-devices\fR | \fB\-\-stats\fR [\fB\-\-all\fR|\fB\-\-json\fR] \fIMOUNTPOINT\fR
.br
.B cudafs
\fB\-\-make\-room\fR \fIMOUNTPOINT\fR \fISIZE\fR|\fBall\fR
.SH DESCRIPTION
.B cudafs
mounts a FUSE filesystem that behaves like tmpfs but keeps file data in the
memory of an NVIDIA GPU (or in host memory with \fBbackend=host\fR). Names,
directories and attributes live in the daemon's host memory. An empty mount
holds no GPU memory and no CUDA context; memory follows what is stored and
goes back when files are removed.
.PP
The command returns once the mount is ready, or exits with status 2 and a
one\-line message when it cannot mount (nothing is mounted then).
\fB\-f\fR keeps it in the foreground, \fB\-d\fR prints FUSE debug output
(and implies \fB\-f\fR), \fB\-s\fR serves one request at a time.
SOURCE is the name shown in /proc/mounts and df (default: cudafs).
.SH OPTIONS
Options may come in any order and \fB\-o\fR may repeat. A backslash in an
option list takes the next character as it is (\fBfsname=a\e,b\fR is one name).
)",
                      MountOptionsRoff(), R"(.SH SEMANTICS
As tmpfs: POSIX permissions checked by the kernel with the caller's
capabilities (\fBdefault_permissions\fR is always on), set\-id bits dropped on
writes by callers without CAP_FSETID, nanosecond timestamps with relatime,
sparse files, \fBfallocate\fR(2), SEEK_DATA and SEEK_HOLE,
\fBcopy_file_range\fR(2) done on the device, hard links, symbolic links (long
targets take a block of \fBsize=\fR), special files, extended attributes
(user., trusted., security.) counted against \fBnr_inodes=\fR, and files that
live until their last close after being removed. \fBdf\fR shows the space in
use, rounded to \fBmin_block\fR; \fBdf \-i\fR the inode space.
.SH STATISTICS
\fBcudafs \-\-stats\fR \fIMOUNTPOINT\fR prints one line: space used of the
size, files, the memory the device holds for them, the transport and the
write\-back cache's hit rate. \fB\-\-all\fR prints every counter, one
"name value" per line: the device, the write\-back cache, the transport and
its buffers, the share service (share_*), and the FUSE requests served by
type; \fB\-\-json\fR prints the same, with size_bytes, used_bytes and files,
as one JSON object. The counters are the read\-only attribute
\fBuser.cudafs.stats\fR of the mount's root, readable by root and the user
who mounted.
.SH GIVING MEMORY BACK
File data lives on the GPUs and, when they are wanted by other programs, in
host memory, as tmpfs pages live in RAM or swap. \fBreserve=\fR (10% of each
GPU) is kept free: when another program's allocations leave less, the least
recently used files move to host memory (at most \fBspill=\fR of it, 50% by
default) until half a reserve more is free, and come back once the GPU has
had room for 5 s. Nothing is lost; \fBsize=\fR bounds the data wherever it
lives. A program that sizes itself from free memory at start, or allocates
most of a GPU at once, needs the room made first:
\fBcudafs \-\-make\-room\fR \fIMOUNTPOINT\fR \fISIZE\fR returns once SIZE is
free on each GPU of the mount (\fBall\fR: once every byte that can move has),
and holds that room for 60 s (new data goes to host memory first); it exits with status 1 and a message when it
cannot. The mount's owner and root may make room (Python:
\fBcudafs.make_room\fR). \fBgetfattr \-n user.cudafs.where\fR \fIFILE\fR
prints where a file's bytes are, one "PLACE BYTES" line a place (gpu0, host).
.SH GPU PROGRAMS
A program maps a file of the mount into its own memory without reading it
through FUSE: \fBlibcudafs_client\fR (\fIcudafs/cudafs.h\fR:
\fBcudafs_map\fR, \fBcudafs_unmap\fR) or the Python module \fBcudafs\fR.
On a GPU\-backed mount the mapping is GPU memory in the caller's CUDA context:
by default a private copy of the file made inside the GPU, which the caller
owns until it unmaps it; with \fBCUDAFS_MAP_WRITABLE\fR (Python:
\fBwritable=True\fR) the file's own memory, whose writes are the file's after
\fBcudafs_sync\fR. The daemon checks the file's descriptor and that the
caller may use the mount.
.SH EXAMPLES
A scratch directory of 16 GiB on GPU 0, open to every user:
.PP
.nf
.RS
cudafs /mnt/gpu \-o size=16g,allow_other
.RE
.fi
.PP
The same in /etc/fstab (mount(8) runs the binary as mount.fuse3 does;
\fBnofail\fR keeps the boot going without a GPU):
.PP
.nf
.RS
cudafs  /mnt/gpu  fuse.cudafs  size=16g,allow_other,nofail  0 0
.RE
.fi
.PP
As a systemd mount unit, /etc/systemd/system/mnt\-gpu.mount (the name is
the escaped mountpoint); services that need the mount say
\fBRequiresMountsFor=/mnt/gpu\fR and start after it:
.PP
.nf
.RS
[Unit]
Description=GPU scratch directory
After=nvidia\-persistenced.service modprobe@fuse.service
Wants=modprobe@fuse.service
[Mount]
What=cudafs
Where=/mnt/gpu
Type=fuse.cudafs
Options=size=16g,allow_other
[Install]
WantedBy=multi\-user.target
.RE
.fi
.PP
A compiler cache on the mount:
.PP
.nf
.RS
export CCACHE_DIR=/mnt/gpu/ccache
.RE
.fi
.PP
Tensors from a safetensors file, straight onto the GPU:
.PP
.nf
.RS
import cudafs
tensors = cudafs.load_safetensors("/mnt/gpu/model.safetensors")
.RE
.fi
.SH FILES
.TP
.I /proc/sys/fs/fuse/max_pages_limit
raised by root to allow \fBmax_request=\fR.
.TP
.I /sys/module/fuse/parameters/enable_uring
Y lets requests come over FUSE over io_uring (\fBuring=\fR).
.SH SEE ALSO
.BR tmpfs (5),
.BR mount.fuse3 (8),
.BR fusermount3 (1),
.BR nvidia\-smi (1)
)");
}

}  // namespace cudafs
