#!/bin/bash
# How fast --make-room moves data to host memory: 16 files of 1 GiB on a
# GPU mount, then `cudafs --make-room MOUNT all`, timed, with the daemon's
# counters and GPU memory before and after. Needs root and a GPU.
#   CUDAFS=build/cudafs bench/make_room_rate.sh
B=${CUDAFS:-build/cudafs}; M=${MOUNT:-/mnt/make-room-rate}; mkdir -p "$M"
"$B" "$M" -o size=40g || exit 1
for i in $(seq 0 15); do dd if=/dev/urandom of="$M/f$i" bs=8M count=128 status=none & done; wait
sync
nvidia-smi --query-gpu=memory.used --format=csv,noheader
s=$(date +%s%N); "$B" --make-room "$M" all; e=$(date +%s%N)
echo "make-room all of 16 GiB took $(( (e - s) / 1000000 )) ms"
"$B" --stats --all "$M" | grep -E "moved_out|device._used"
nvidia-smi --query-gpu=memory.used --format=csv,noheader
umount "$M"
