#!/bin/sh
# A Slurm prolog that gives a job the GPUs' memory: before the job starts,
# every cudafs mount of the node moves its data off the GPUs into host
# memory (nothing is lost: files read the same, from host memory, and come
# back once the GPUs have had room for a while). Install it on each node
# and name it in slurm.conf:
#   Prolog=/etc/slurm/prolog.d/cudafs-make-room.sh
# slurmd runs it as root with no PATH of use, hence the search path set
# here: cudafs from the package (/usr/bin) or from `cmake --install`
# (/usr/local/bin). A prolog that fails drains the node, so a failure here
# is logged, not returned: the job still runs, only with less free GPU
# memory.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
for mount in $(findmnt -n -l -t fuse.cudafs -o TARGET); do
  # `all`: every byte that can move; a size ("71g") would move only enough
  # for that much to be free on each GPU.
  cudafs --make-room "$mount" all ||
    logger -t cudafs-prolog "job $SLURM_JOB_ID: no room made on $mount"
done
exit 0
