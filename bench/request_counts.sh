#!/usr/bin/env bash
# FUSE requests per file, by type, that a workload costs on cudafs: mounts
# a fresh cudafs, runs the workload, and divides the growth of each
# requests_<op> counter of `cudafs --stats` by the number of files.
#
# usage: CUDAFS=path/to/cudafs bench/request_counts.sh WORKLOAD [CUDAFS_ARGS...]
#   WORKLOAD     smallfiles: bench/smallfiles.py, COUNT files (default 20000)
#                of SIZE bytes (default 4096) created, written and closed,
#                then stat'ed, then unlinked
#   CUDAFS_ARGS  passed to cudafs, e.g. -o backend=host,size=1g
#
# Counts only what reaches cudafs's handlers: requests libfuse answers
# itself (FLUSH, INTERRUPT, ...) are not among them (see README, --stats).
set -euo pipefail

if [[ $# -lt 1 || -z "${CUDAFS:-}" ]]; then
  echo "usage: CUDAFS=path/to/cudafs $0 WORKLOAD [CUDAFS_ARGS...]" >&2
  exit 2
fi
workload=$1
shift
count=${COUNT:-20000}
size=${SIZE:-4096}
here=$(cd "$(dirname "$0")" && pwd)
case $workload in
  smallfiles) ;;
  *)
    echo "request_counts.sh: unknown workload $workload (known: smallfiles)" >&2
    exit 2
    ;;
esac

run_workload() {
  case $workload in
    smallfiles)
      python3 "$here/smallfiles.py" --dir "$mountpoint/smallfiles" --count "$count" --size "$size"
      ;;
  esac
}

mountpoint=$(mktemp -d /tmp/cudafs-requests-XXXXXX)
cleanup() {
  fusermount3 -u "$mountpoint" 2>/dev/null || umount "$mountpoint" 2>/dev/null || true
  rmdir "$mountpoint"
}
trap cleanup EXIT
"$CUDAFS" "$mountpoint" "$@"

stats() { "$CUDAFS" --stats "$mountpoint"; }
# A reading without its GETXATTR counter, which every reading bumps.
unchanged() { grep -v '^requests_getxattr ' <<<"$1"; }

before=$(stats)
result=$(run_workload)
# RELEASE and FORGET reach the daemon after the system calls that cause
# them have returned: read until they stop coming. Each reading is itself
# one GETXATTR, counted by the next: `readings` of them are ours.
after=$(stats)
readings=1
for _ in $(seq 20); do
  sleep 0.5
  latest=$(stats)
  readings=$((readings + 1))
  [[ $(unchanged "$latest") == $(unchanged "$after") ]] && break
  after=$latest
done

echo "workload $workload: $count files of $size bytes; cudafs $*"
echo "$result"
awk -v files="$count" -v ours="$readings" '
  FNR == NR { before[$1] = $2; next }
  $1 ~ /^requests_/ || $1 == "forgotten_inodes" {
    delta = $2 - before[$1]
    if ($1 == "requests_getxattr") delta -= ours
    if (delta == 0) next
    name = $1
    sub(/^requests_/, "", name)
    printf "%-18s %10d %10.3f\n", name, delta, delta / files
    if ($1 != "forgotten_inodes") total += delta
  }
  END { printf "%-18s %10d %10.3f\n", "total requests", total, total / files }
' <(echo "$before") <(echo "$latest") | { printf "%-18s %10s %10s\n" op requests per_file; cat; }
