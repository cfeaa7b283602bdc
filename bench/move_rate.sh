#!/bin/bash
# How fast data leaves a GPU for fresh host memory, and what the daemon
# holds at rest (docs/DESIGN.md, "Giving memory back"):
#  1. a backend=cuda mount with spill_ready=0 (nothing pinned ahead of time)
#     filled with 32 GiB in files of mixed sizes, then
#     `cudafs --make-room MOUNT all`, timed: GB/s moved, and the daemon's
#     own make-room lines (time per GPU);
#  2. a mount with the default spill_ready= holding 8 GiB, at rest: the
#     daemon's VmRSS and the host memory it keeps pinned, beside an idle
#     tmpfs (no daemon: 0).
# Needs root, /dev/fuse and a GPU with 40 GiB; without them it says so and
# exits 0. Runs in about 2 minutes on an H100.
#   bash bench/move_rate.sh build/cudafs OUTDIR
# Writes OUTDIR/move_rate.log (this output) and OUTDIR/daemon-*.log.
set -uo pipefail
B=${1:?usage: move_rate.sh CUDAFS_BINARY OUTDIR}
OUT=${2:?usage: move_rate.sh CUDAFS_BINARY OUTDIR}
mkdir -p "$OUT" || exit 1
exec > >(tee "$OUT/move_rate.log") 2>&1
B=$(realpath "$B")

skip() { echo "move_rate: skipped: $*"; exit 0; }
((EUID == 0)) || skip "needs root (mounts, and --make-room all is the owner's or root's)"
[[ -c /dev/fuse ]] || skip "no /dev/fuse"
"$B" --list-devices >/dev/null 2>&1 || skip "no GPU: $("$B" --list-devices 2>&1 | head -n 1)"

M=$(mktemp -d /tmp/move-rate.XXXXXX)
SRC=$M.src  # random bytes the files are copied from
export SRC
daemon=

cleanup() {
  mountpoint -q "$M" && umount "$M"
  [[ -n $daemon ]] && wait "$daemon" 2>/dev/null
  rmdir "$M" 2>/dev/null
  rm -f "$SRC"
}
trap cleanup EXIT

# mount_cudafs NAME OPTIONS: in the foreground, so that its log lines land
# in OUTDIR/daemon-NAME.log.
mount_cudafs() {
  "$B" "$M" -f -o "$2" 2>"$OUT/daemon-$1.log" &
  daemon=$!
  for _ in $(seq 100); do mountpoint -q "$M" && return 0; sleep 0.1; done
  echo "move_rate: $1 did not mount:"; cat "$OUT/daemon-$1.log"; exit 1
}
unmount_cudafs() { umount "$M"; wait "$daemon"; daemon=; }
used() { df -B1 --output=used "$M" | tail -n 1; }
stat_of() { "$B" --stats --all "$M" | awk -v k="$1" '$1 == k { print $2 }'; }
# The host part's bytes: the last place of --stats --all.
host_bytes() { "$B" --stats --all "$M" | awk '/_place host$/ { sub(/_place$/, "", $1); p = $1 }
  { v[$1] = $2 } END { print (p == "" ? 0 : v[p "_used_bytes"]) + 0 }'; }
proc_kib() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$daemon/status"; }
gib() { awk -v b="$1" 'BEGIN { printf "%.2f GiB", b / 2^30 }'; }

# fill DIR MIB...: files of these sizes (MiB, multiples of 4), copied from
# SRC in 4 MiB writes, 16 at a time.
fill() {
  local dir=$1 i=0 mib
  shift
  # shellcheck disable=SC2016 # expanded by sh
  for mib in "$@"; do
    echo "$dir/f$((i++)) $mib"
  done | xargs -P 16 -n 2 sh -c \
    'dd if="$SRC" of="$0" bs=4M count="$(($1 / 4))" iflag=fullblock status=none'
}
# 32 GiB: 8 of 2 GiB, 16 of 512 MiB, 64 of 64 MiB, 1024 of 4 MiB, in turns.
sizes_32g() {
  local i
  for i in $(seq 1024); do
    echo 4
    ((i % 16 == 0)) && echo 64
    ((i % 64 == 0)) && echo 512
    ((i % 128 == 0)) && echo 2048
  done
}

head -c $((2048 << 20)) /dev/urandom >"$SRC" || exit 1
echo "$("$B" --version 2>&1 | head -n 1); $(nproc) cores; THP $(cat /sys/kernel/mm/transparent_hugepage/enabled)"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -n 1

echo "== 1. make-room all from fresh host memory (spill_ready=0)"
mount_cudafs fresh "backend=cuda,size=40g,spill_ready=0"
s=$(date +%s%N)
# shellcheck disable=SC2046
fill "$M" $(sizes_32g)
e=$(date +%s%N)
filled=$(used)
echo "fill: $(gib "$filled") in $(((e - s) / 1000000)) ms"
sync; sleep 3
echo "before: spill_ready_bytes $(stat_of spill_ready_bytes), VmRSS $(proc_kib VmRSS) KiB"
before=$(stat_of moved_out_bytes)
s=$(date +%s%N); "$B" --make-room "$M" all; status=$?; e=$(date +%s%N)
moved=$(($(stat_of moved_out_bytes) - before))
ms=$(((e - s) / 1000000))
echo "make-room all: status $status, moved $(gib "$moved") in $ms ms:" \
  "$(awk -v b="$moved" -v ms="$ms" 'BEGIN { printf "%.1f GB/s", ms ? b / ms / 1e6 : 0 }')"
grep -h "make-room" "$OUT/daemon-fresh.log" | sed 's/^/  daemon: /'
echo "after: VmRSS $(proc_kib VmRSS) KiB, host part $(gib "$(host_bytes)"), spill_ready_bytes $(stat_of spill_ready_bytes)"
sleep 2
echo "2 s later: spill_ready_bytes $(stat_of spill_ready_bytes) (chunks pinned ahead let go)"
unmount_cudafs

echo "== 2. at rest holding 8 GiB, default spill_ready="
mount_cudafs rest "backend=cuda,size=40g"
# shellcheck disable=SC2046
fill "$M" $(for _ in $(seq 4); do echo 2048; done)
sync; sleep 10  # rounds in which the data stood still: what is kept ready is pinned by now
ready=$(stat_of spill_ready_bytes)
echo "cudafs holding $(gib "$(used)"): VmRSS $(proc_kib VmRSS) KiB," \
  "pinned and empty (spill_ready_bytes) $(gib "$ready"), VmPin $(proc_kib VmPin) KiB"
echo "idle tmpfs holding the same: no daemon, 0 KiB resident beyond its pages"
unmount_cudafs
