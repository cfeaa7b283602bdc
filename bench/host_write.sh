#!/bin/bash
# Writes to data in host memory, beside what the kernel and a FUSE
# passthrough give, in one run: a GIB (1) GiB sequential write with
# `dd bs=1M conv=fdatasync` from a tmpfs file, then 4 KiB random reads (after
# drop_caches) and writes (ending with fdatasync) of COUNT (20000) operations
# on a 256 MiB file (bench/random_io.py). Targets: tmpfs; libfuse's
# passthrough_ll example over that tmpfs; cudafs backend=host with default
# options and with cache=64m (and the same two for CUDAFS_OLD, if given);
# cudafs backend=null. ROUNDS (3) rounds, the targets in turn in each; then
# min-max per target. Needs root. PT is passthrough_ll, built from the
# libfuse source the build uses:
#   gcc -O2 -I build/libfuse/include/fuse3 build/libfuse-source/fuse3-*/example/passthrough_ll.c \
#     -o passthrough_ll -L build/libfuse/lib -lfuse3 -Wl,-rpath,$PWD/build/libfuse/lib
#   PT=./passthrough_ll CUDAFS=build/cudafs CUDAFS_OLD=/tmp/cudafs-before bench/host_write.sh
set -eu
PT=${PT:?passthrough_ll}; B=${CUDAFS:-build/cudafs}; G=${GIB:-1}; N=${COUNT:-20000}
R=/mnt/host-write; RANDOM_IO=$(dirname "$0")/random_io.py
mkdir -p $R/src $R/tmpfs $R/mnt
mountpoint -q $R/src || mount -t tmpfs -o size=$((G + 1))g tmpfs $R/src
mountpoint -q $R/tmpfs || mount -t tmpfs -o size=$((G + 1))g tmpfs $R/tmpfs
dd if=/dev/urandom of=$R/src/f bs=1M count=$((G * 1024)) status=none

targets=(tmpfs passthrough_ll "cudafs host" "cudafs host,cache=64m")
[[ -n ${CUDAFS_OLD:-} ]] && targets+=("old cudafs host" "old cudafs host,cache=64m")
targets+=("cudafs null")
declare -A seq rread rwrite

mount_target() {  # mount_target TARGET: prints the directory to write in
  local binary=$B options
  case $1 in
    tmpfs) echo $R/tmpfs; return ;;
    passthrough_ll) "$PT" -o source=$R/tmpfs $R/mnt; echo $R/mnt; return ;;
    old*) binary=$CUDAFS_OLD ;;
  esac
  options=${1##* }; options=backend=${options/host/host,size=$((G + 2))g}
  "$binary" $R/mnt -o "$options"; echo $R/mnt
}
unmount_target() {
  rm -f "$2/f" "$2/r"
  [[ $1 == tmpfs ]] || umount $R/mnt
}
seq_rate() {  # MiB/s of the write of $1
  local s e; s=$(date +%s%N)
  dd if=$R/src/f of="$1" bs=1M conv=fdatasync status=none; e=$(date +%s%N)
  awk -v b=$((G << 30)) -v ns=$((e - s)) 'BEGIN { printf "%.0f", b / ns * 1e9 / 1048576 }'
}
append() { eval "$1[\$2]=\"\${$1[\$2]:-} \$3\""; }

for round in $(seq "${ROUNDS:-3}"); do
  echo "round $round"
  for t in "${targets[@]}"; do
    d=$(mount_target "$t")
    s=$(seq_rate "$d/f"); rm "$d/f"
    dd if=$R/src/f of="$d/r" bs=1M count=256 status=none; sync; echo 3 >/proc/sys/vm/drop_caches
    r=$(python3 "$RANDOM_IO" read "$d/r" "$N"); w=$(python3 "$RANDOM_IO" write "$d/r" "$N")
    echo "  $t: $s MiB/s sequential, 4 KiB random: $r k reads/s, $w k writes/s"
    append seq "$t" "$s"; append rread "$t" "$r"; append rwrite "$t" "$w"
    unmount_target "$t" "$d"
  done
done
span() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g | sed -n '1p;$p' | paste -sd- | sed 's/-/–/'; }
echo "min–max: sequential MiB/s | 4 KiB random k reads/s | k writes/s"
for t in "${targets[@]}"; do
  printf '  %-28s %-12s %-12s %s\n' "$t" "$(span "${seq[$t]}")" "$(span "${rread[$t]}")" "$(span "${rwrite[$t]}")"
done
umount $R/tmpfs $R/src
