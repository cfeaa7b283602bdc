#!/bin/bash
# How fast --make-room moves data to host memory: FILES (16) files of 1 GiB
# on a GPU mount (OPTIONS added to size=SIZE, 40g), then
# `cudafs --make-room MOUNT all`, timed, with the daemon's counters and GPU
# memory before and after, and the host memory kept ready before. Needs
# root and a GPU.
#   CUDAFS=build/cudafs bench/make_room_rate.sh
#   CUDAFS=build/cudafs FILES=8 OPTIONS=reserve=25% LOG=make-room.log bench/make_room_rate.sh
B=${CUDAFS:-build/cudafs}; M=${MOUNT:-/mnt/make-room-rate}; N=${FILES:-16}; mkdir -p "$M"
# In the foreground, so that the daemon's make-room log line lands in LOG.
"$B" "$M" -f -o "size=${SIZE:-40g}${OPTIONS:+,$OPTIONS}" 2>>"${LOG:-/dev/null}" & daemon=$!
for _ in $(seq 100); do mountpoint -q "$M" && break; sleep 0.1; done
mountpoint -q "$M" || exit 1
writers=()
for i in $(seq 1 "$N"); do dd if=/dev/urandom of="$M/f$i" bs=8M count=128 status=none & writers+=($!); done
wait "${writers[@]}"
sync
sleep "${SETTLE:-5}"  # as on a mount filled a while ago: host memory for the reserve is ready
nvidia-smi --query-gpu=memory.used --format=csv,noheader
"$B" --stats --all "$M" | grep -E "spill_ready_bytes"
s=$(date +%s%N); "$B" --make-room "$M" all; e=$(date +%s%N)
echo "make-room all of $N GiB${OPTIONS:+ ($OPTIONS)} took $(( (e - s) / 1000000 )) ms"
"$B" --stats --all "$M" | grep -E "moved_out|device._used"
nvidia-smi --query-gpu=memory.used --format=csv,noheader
umount "$M"; wait "$daemon"
