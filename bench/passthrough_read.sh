#!/bin/bash
# What FUSE passthrough would give reads of data in host memory: GIB (2)
# GiB read with dd bs=1M after drop_caches, from tmpfs, through libfuse's
# passthrough_hp example over that tmpfs (passthrough on, then off), from a
# cudafs mount (OPTIONS; after PREP, e.g. a make-room that moves the file
# to host memory) and from cudafs's null backend; ROUNDS (2) rounds, each
# read twice. Needs root. PT is passthrough_hp, built from the libfuse
# source the build uses:
#   g++ -O2 -I build/libfuse/include/fuse3 -I build/libfuse-source/fuse3-*/example \
#     build/libfuse-source/fuse3-*/example/passthrough_hp.cc -o passthrough_hp \
#     -L build/libfuse/lib -lfuse3 -Wl,-rpath,$PWD/build/libfuse/lib
#   PT=./passthrough_hp CUDAFS=build/cudafs OPTIONS=backend=host bench/passthrough_read.sh
#   PT=./passthrough_hp CUDAFS=build/cudafs PREP='build/cudafs --make-room /mnt/passthrough-read/cudafs all' bench/passthrough_read.sh
set -eu
PT=${PT:?passthrough_hp}; B=${CUDAFS:-build/cudafs}; G=${GIB:-2}; R=/mnt/passthrough-read
mkdir -p $R/tmpfs $R/pt $R/cudafs
mountpoint -q $R/tmpfs || mount -t tmpfs -o size=$((G + 1))g tmpfs $R/tmpfs
read_rate() {  # GB/s of a cold read of $1
  sync; echo 3 > /proc/sys/vm/drop_caches
  local s e; s=$(date +%s%N); dd if="$1" of=/dev/null bs=1M status=none; e=$(date +%s%N)
  awk -v b=$((G << 30)) -v ns=$((e - s)) 'BEGIN { printf "%.2f", b / ns }'
}
dd if=/dev/urandom of=$R/tmpfs/f bs=1M count=$((G * 1024)) status=none
for round in $(seq "${ROUNDS:-2}"); do
  echo "round $round"
  echo "  tmpfs: $(read_rate $R/tmpfs/f) $(read_rate $R/tmpfs/f)"
  "$PT" $R/tmpfs $R/pt; echo "  passthrough_hp, passthrough: $(read_rate $R/pt/f) $(read_rate $R/pt/f)"; umount $R/pt
  "$PT" --nopassthrough $R/tmpfs $R/pt; echo "  passthrough_hp, no passthrough: $(read_rate $R/pt/f) $(read_rate $R/pt/f)"; umount $R/pt
  "$B" $R/cudafs -o "size=$((G + 1))g${OPTIONS:+,$OPTIONS}"; cp $R/tmpfs/f $R/cudafs/f; sync; eval "${PREP:-true}"
  echo "  cudafs${OPTIONS:+ ($OPTIONS)}: $(read_rate $R/cudafs/f) $(read_rate $R/cudafs/f) [$(python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.cudafs.where").decode().replace("\n", " ").strip())' $R/cudafs/f 2>&1)]"
  umount $R/cudafs
  "$B" $R/cudafs -o "size=$((G + 1))g,backend=null"; dd if=/dev/zero of=$R/cudafs/f bs=1M count=$((G * 1024)) status=none
  echo "  cudafs null: $(read_rate $R/cudafs/f) $(read_rate $R/cudafs/f)"; umount $R/cudafs
done
umount $R/tmpfs
