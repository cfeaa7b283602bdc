#!/bin/bash
# How fast --make-room moves data to host memory: FILES (16) files of 1 GiB
# on a GPU mount (OPTIONS added to size=SIZE, 40g), then
# `cudafs --make-room MOUNT all`, timed, with the daemon's counters and GPU
# memory before and after, the host memory kept ready before, and how long
# `ls` of the root and --stats take while it runs. Needs root and a GPU.
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
# While it runs, `ls` of the root and --stats every 50 ms: make-room comes
# over the share socket and must hold neither the root's inode lock nor a
# FUSE worker.
probe() {
  while :; do
    a=$(date +%s%N); ls "$M" >/dev/null; b=$(date +%s%N); "$B" --stats "$M" >/dev/null
    c=$(date +%s%N); echo "$(( (b - a) / 1000 )) $(( (c - b) / 1000 ))"; sleep 0.05
  done
}
probe >"${TMPDIR:-/tmp}/make-room-probe.$$" & prober=$!
s=$(date +%s%N); "$B" --make-room "$M" all; e=$(date +%s%N)
kill "$prober"; wait "$prober" 2>/dev/null
echo "make-room all of $N GiB${OPTIONS:+ ($OPTIONS)} took $(( (e - s) / 1000000 )) ms"
sort -n "${TMPDIR:-/tmp}/make-room-probe.$$" | awk '{ls[NR]=$1} END {if (NR) printf "ls of the root meanwhile: %d probes, median %d us, max %d us\n", NR, ls[int((NR+1)/2)], ls[NR]}'
sort -n -k2 "${TMPDIR:-/tmp}/make-room-probe.$$" | awk '{st[NR]=$2} END {if (NR) printf "--stats meanwhile: median %d us, max %d us\n", st[int((NR+1)/2)], st[NR]}'
rm -f "${TMPDIR:-/tmp}/make-room-probe.$$"
"$B" --stats --all "$M" | grep -E "moved_out|device._used"
nvidia-smi --query-gpu=memory.used --format=csv,noheader
umount "$M"; wait "$daemon"
