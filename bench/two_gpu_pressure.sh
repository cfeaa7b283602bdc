#!/bin/bash
# Pressure on GPU 0 of a two-GPU mount: its data should go to GPU 1 first.
# 32 files of 1 GiB on a device=all mount, then a PyTorch program takes
# 70 GiB of GPU 0 in 1 GiB steps, retrying for up to 60 s; where the bytes
# are comes from the daemon's counters, and every file's sha256 is checked.
# Needs root, two GPUs and torch.
#   CUDAFS=build/cudafs bench/two_gpu_pressure.sh
B=${CUDAFS:-build/cudafs}; M=${MOUNT:-/mnt/two-gpus}; mkdir -p "$M"
"$B" "$M" -o device=all,size=100g || exit 1
for i in $(seq 0 31); do dd if=/dev/urandom of="$M/f$i" bs=8M count=128 status=none & done; wait
sync
sums=$(mktemp); sha256sum "$M"/f* > "$sums"
nvidia-smi --query-gpu=index,memory.used --format=csv,noheader
python3 - <<'PY'
import time
import torch
held, got, start = [], 0, time.monotonic()
while got < (70 << 30) and time.monotonic() - start < 60:
    try:
        held.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda:0"))
        got += 1 << 30
    except torch.cuda.OutOfMemoryError:
        time.sleep(0.05)
print("GPU 0 program: %.0f GiB in %.2f s" % (got / 2**30, time.monotonic() - start), flush=True)
PY
nvidia-smi --query-gpu=index,memory.used --format=csv,noheader
"$B" --stats --all "$M" | grep -E "_place|_used_bytes|moved"
sha256sum -c --quiet "$sums" && echo "all 32 files intact"
rm -f "$sums"; umount "$M"
