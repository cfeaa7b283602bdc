#!/usr/bin/env bash
# Daemon memory over create/remove cycles (issue 13): mounts cudafs, then
# CYCLES times creates FILES empty files in one directory and removes the
# tree, printing the daemon's RSS 2 s after each cycle (the daemon gives
# free memory back once a second).
#   CUDAFS=build/cudafs bench/memory_cycles.sh [CYCLES [FILES [OPTIONS]]]
set -euo pipefail
cudafs=${CUDAFS:-build/cudafs}
cycles=${1:-10}
files=${2:-100000}
options=${3:-backend=host,size=1g,nr_inodes=0}
mnt=$(mktemp -d /tmp/cudafs-memory-XXXXXX)
"$cudafs" "$mnt" -o "$options"
trap 'umount "$mnt"; rmdir "$mnt"' EXIT
daemon=$(pgrep -f -- " $mnt( |$)" | head -1)
rss_kib() { awk '/VmRSS/{print $2}' "/proc/$daemon/status"; }
echo "start rss_kib=$(rss_kib)"
for cycle in $(seq "$cycles"); do
  mkdir "$mnt/d"
  (cd "$mnt/d" && seq "$files" | xargs touch)
  rm -rf "$mnt/d"
  sleep 2
  echo "cycle $cycle rss_kib=$(rss_kib)"
done
