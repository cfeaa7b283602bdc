#!/bin/bash
# The daemon's CPU at rest with 1 GiB stored on the GPU, with the room
# keeper (default) and without it (spill=0): /proc/PID/stat ticks over
# SECONDS_IDLE (60; 100 ticks a second), and the threads that took any
# (the keeper's is "room-keeper"). Needs root and a GPU.
#   CUDAFS=build/cudafs bench/idle_cpu.sh
B=${CUDAFS:-build/cudafs}; M=${MOUNT:-/mnt/idle-cpu}; S=${SECONDS_IDLE:-60}; mkdir -p "$M"
for opts in "size=8g" "size=8g,spill=0"; do
  "$B" "$M" -o "$opts" || exit 1
  dd if=/dev/zero of="$M/f" bs=8M count=128 status=none; sync; sleep 5
  pid=$(pgrep -f "cudafs $M" | head -1)
  declare -A before
  for t in /proc/$pid/task/*; do before[$t]=$(awk '{print $14+$15}' "$t/stat"); done
  a=$(awk '{print $14+$15}' /proc/$pid/stat); sleep "$S"; b=$(awk '{print $14+$15}' /proc/$pid/stat)
  echo "$opts: $((b - a)) ticks in $S s (100 a second)"
  for t in /proc/$pid/task/*; do
    n=$(( $(awk '{print $14+$15}' "$t/stat") - ${before[$t]:-0} ))
    [ "$n" -gt 0 ] && echo "  $(cat "$t/comm") $n"
  done
  umount "$M"
done
