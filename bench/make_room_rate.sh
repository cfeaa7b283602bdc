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
# While it runs, `ls` of the root and --stats, each in a loop of its own
# every 50 ms: make-room comes over the share socket and must hold neither
# the root's inode lock nor a FUSE worker. Each run writes when it began
# (ms after make-room started) and then how long it took (us); a run still
# going when make-room ends counts as lasting until then.
probes=${TMPDIR:-/tmp}/make-room-probe.$$
probe() {
  local out=$1 a b
  shift
  while :; do
    a=$(date +%s%N); printf '%d ' $(((a - s) / 1000000)) >>"$out"; "$@" >/dev/null 2>&1
    b=$(date +%s%N); echo $(((b - a) / 1000)) >>"$out"; sleep 0.05
  done
}
summary() {
  local end=$(((e - s) / 1000000))
  awk -v end="$end" 'NF == 2 {print $2} NF == 1 {print (end - $1) * 1000 " open"}' "$2" | sort -n |
    awk -v name="$1" '{d[++n] = $1} $2 == "open" {open = 1}
      END {
        if (!n) { print name ": no probe"; exit }
        printf "%s meanwhile: %d probes, median %d us, max %d us%s\n", name, n, d[int((n + 1) / 2)],
          d[n], open ? " (one still waiting when make-room ended)" : ""
      }'
}
s=$(date +%s%N)
probe "$probes.ls" ls "$M" & ls_prober=$!
probe "$probes.stats" "$B" --stats "$M" & stats_prober=$!
"$B" --make-room "$M" all; e=$(date +%s%N)
kill "$ls_prober" "$stats_prober"; wait "$ls_prober" "$stats_prober" 2>/dev/null
echo "make-room all of $N GiB${OPTIONS:+ ($OPTIONS)} took $(( (e - s) / 1000000 )) ms"
summary "ls of the root" "$probes.ls"
summary "--stats" "$probes.stats"
rm -f "$probes.ls" "$probes.stats"
"$B" --stats --all "$M" | grep -E "moved_out|device._used"
nvidia-smi --query-gpu=memory.used --format=csv,noheader
umount "$M"; wait "$daemon"
