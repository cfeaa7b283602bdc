#!/usr/bin/env bash
# Direct I/O or the page cache, by file size: the measurement behind the
# direct_io_min= default. For each file size, writes 1 GiB of such files
# (at most 2048 of them) on a cudafs mounted with `direct_io` (every open
# direct) and one mounted with `nodirect_io` (every open through the page
# cache), then reads them all with one `cat` per 64 files, cold (page cache
# dropped) and warm (again at once), and prints GB/s for each. Needs root
# (mount, drop_caches).
#
# usage: CUDAFS=build/cudafs bench/open_policy.sh [CUDAFS_OPTIONS]
#   CUDAFS_OPTIONS  added to -o of both mounts, e.g. backend=null
#   SIZES           file sizes to try [64k 256k 1m 4m 16m 64m]
set -euo pipefail

cudafs=${CUDAFS:-build/cudafs}
extra=${1:-}
sizes=(${SIZES:-64k 256k 1m 4m 16m 64m})
total=$((1 << 30))
work=$(mktemp -d)
trap 'for m in "$work"/m-*; do umount "$m" 2>/dev/null || true; done; rm -rf "$work"' EXIT

bytes_of() {
  numfmt --from=iec "${1^^}"
}

now() { date +%s.%N; }

# read_all DIR: GB/s of reading every file of DIR, 64 files per cat.
read_all() {
  local start end
  start=$(now)
  find "$1" -type f -print0 | xargs -0 -n 64 cat >/dev/null
  end=$(now)
  python3 -c "print(f'{$total / ($end - $start) / 1e9:.2f}')"
}

printf '%-6s %-11s %8s %10s %10s\n' size open write_GB/s cold_GB/s warm_GB/s
for size in "${sizes[@]}"; do
  size_bytes=$(bytes_of "$size")
  count=$((total / size_bytes))
  ((count > 2048)) && count=2048
  total=$((count * size_bytes))
  for mode in direct_io nodirect_io; do
    mountpoint=$work/m-$mode
    mkdir -p "$mountpoint"
    "$cudafs" "$mountpoint" -o "size=4g,$mode${extra:+,$extra}"
    start=$(now)
    block=$((size_bytes < (1 << 20) ? size_bytes : (1 << 20)))
    for ((i = 0; i < count; i++)); do
      dd if=/dev/zero of="$mountpoint/f$i" bs="$block" count=$((size_bytes / block)) status=none
    done
    end=$(now)
    write=$(python3 -c "print(f'{$total / ($end - $start) / 1e9:.2f}')")
    sync
    echo 3 >/proc/sys/vm/drop_caches
    cold=$(read_all "$mountpoint")
    warm=$(read_all "$mountpoint")
    printf '%-6s %-11s %8s %10s %10s\n' "$size" "$mode" "$write" "$cold" "$warm"
    umount "$mountpoint"
  done
  total=$((1 << 30))
done
