#!/usr/bin/env bash
# docs/BENCHMARKS.md's tables, from one run of one commit on one machine:
# every workload the report has, cudafs beside its own null backend (FUSE
# with nothing stored) and tmpfs in the same run, with the machine, the
# commit and each command. Writes OUT/report.md (the generated part of the
# report) and OUT/benchmarks.png (the chart, with matplotlib); with
# --update-docs also replaces the generated part of docs/BENCHMARKS.md and
# docs/img/benchmarks.png. Needs root (mount, drop_caches).
#
#   bench/report.sh [--backend cuda|host] [--quick] [--repeat N] [--out DIR]
#                   [--sections LIST] [--update-docs]
#
# --sections  which of streams,trees,appends,gpu to run [all]. Each section
#             keeps its part in OUT/parts; a later call with the same OUT
#             runs only the sections it lacks and writes the report of
#             them all, so a run can be split over calls (a machine lent
#             for minutes at a time). The parts must come from one commit
#             and one boot of one machine, or the script refuses them.
#
# --backend   the backend measured against null and tmpfs [cuda]. On a GPU
#             machine the GPU-only sections (the device alone, a matrix
#             multiply beside the mount, zero copy into PyTorch, giving
#             memory back) run too, each where what it needs is there.
# --quick     small sizes and one repetition: checks that the script works,
#             not numbers for the report (the header says so).
# --repeat    runs of each step of the trees section, whose tables give
#             the median [3]; the header says when it is not 3.
# Environment: CUDAFS (the binary, [build/cudafs]), BUILD_DIR (where
# device_benchmark and libcudafs_client.so are, [the binary's folder]),
# BENCH_TREE (the tree of small files, [bench/tree_workload.sh's choice]),
# PYTHON (a Python 3 with matplotlib for the chart, and PyTorch for the GPU
# programs' sections, [python3]), FIO and CUDAFS_BENCH_TOOLS as
# bench/run_benchmarks.sh takes them, COMMIT (the commit to name, for a
# copy of the checkout without .git [git's HEAD]).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(dirname "$BENCH_DIR")
BACKEND=cuda
QUICK=0
OUT=./bench-report
UPDATE_DOCS=0
REPEAT=3
ALL_SECTIONS="streams trees appends gpu"
SECTIONS=${ALL_SECTIONS// /,}
while (($#)); do
  case $1 in
    --backend) BACKEND=${2:?--backend cuda|host}; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --repeat) REPEAT=${2:?--repeat N}; shift 2 ;;
    --out) OUT=${2:?--out DIR}; shift 2 ;;
    --sections) SECTIONS=${2:?--sections LIST}; shift 2 ;;
    --update-docs) UPDATE_DOCS=1; shift ;;
    -h | --help) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $BACKEND == cuda || $BACKEND == host ]] || { echo "--backend is cuda or host" >&2; exit 2; }
[[ $REPEAT =~ ^[1-9][0-9]*$ ]] || { echo "--repeat takes a positive number" >&2; exit 2; }
for name in ${SECTIONS//,/ }; do
  [[ " $ALL_SECTIONS " == *" $name "* ]] ||
    { echo "unknown section '$name' (--sections takes ${ALL_SECTIONS// /,})" >&2; exit 2; }
done
if ((UPDATE_DOCS && QUICK)); then
  echo "--quick numbers do not go into docs/BENCHMARKS.md" >&2
  exit 2
fi
export CUDAFS=${CUDAFS:-$REPO_DIR/build/cudafs} PYTHON=${PYTHON:-python3}
CUDAFS=$(realpath "$CUDAFS")
BUILD_DIR=${BUILD_DIR:-$(dirname "$CUDAFS")}
mkdir -p "$OUT/parts"
OUT=$(cd "$OUT" && pwd)
# Each section writes REPORT, moved to OUT/parts/NAME.md once it ends.
REPORT=$OUT/parts/.running.md
log() { printf '[%(%H:%M:%S)T] report: %s\n' -1 "$*" >&2; }

# The three targets of every section: the backend, null, tmpfs.
TARGETS=("$BACKEND=cudafs:backend=$BACKEND" "null=cudafs:backend=null" "tmpfs=tmpfs")
if ((QUICK)); then
  export BENCH_SEQ_GIB=0.25 BENCH_PAR_GIB=0.0625 BENCH_WIDE_GIB=0.03125 BENCH_FIO_MIB=32 \
    BENCH_FIO_SECONDS=2 BENCH_SMALL_FILES=1000 BENCH_REPEAT=1
  TREE_DEFAULT=/usr/include/linux
else
  export BENCH_FIO_SECONDS=${BENCH_FIO_SECONDS:-5} BENCH_REPEAT=$REPEAT
  TREE_DEFAULT=""
fi
export BENCH_TREE=${BENCH_TREE:-$TREE_DEFAULT}
[[ -n $BENCH_TREE ]] || unset BENCH_TREE

# section TITLE: a heading in the report.
section() { printf '\n### %s\n\n' "$1" >>"$REPORT"; }
# command_block TEXT: the command a section ran, as the reader would type
# it from the checkout's root.
command_block() { printf '```sh\n%s\n```\n\n' "${1//$REPO_DIR\//}" >>"$REPORT"; }
# skipped WHY: a section that did not run, and why.
skipped() { printf 'Not run: %s.\n' "$1" >>"$REPORT"; log "skipped: $1"; }
# table_of FILE: the markdown tables (and the notes under them) of FILE,
# without its own title, run header and chart; its headings one level
# below the section's.
table_of() {
  awk '/^\|/ { table = 1 } table && !/^!\[|^Chart skipped/' "$1" | sed 's/^## /#### /' >>"$REPORT"
}

machine_header() {
  local commit dirty gpu
  commit=${COMMIT:-$(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo unknown)}
  dirty=$(git -C "$REPO_DIR" status --porcelain --untracked-files=no 2>/dev/null | head -c1)
  gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null |
    paste -sd ';' || true)
  {
    echo "<!-- Written by bench/report.sh; run it again rather than edit. -->"
    echo
    echo "One run of \`bench/report.sh --backend $BACKEND$( ((QUICK)) && echo ' --quick')$( ((REPEAT != 3)) && echo " --repeat $REPEAT")\`,"
    echo "$(date -u '+%Y-%m-%d %H:%M') UTC, on one machine:"
    echo
    echo "- commit $commit${dirty:+ with uncommitted changes}, \`$("$CUDAFS" --version 2>&1 | head -1)\`"
    echo "- GPU: ${gpu:-none}"
    echo "- CPU: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) CPUs;" \
      "memory $(awk '/^MemTotal:/ { printf "%.0f", $2 / 2^20 }' /proc/meminfo) GiB"
    echo "- kernel $(uname -r); FUSE over io_uring:" \
      "$(cat /sys/module/fuse/parameters/enable_uring 2>/dev/null || echo 'not in this kernel')"
    echo "- default mount options but \`size=\`; the columns are cudafs with \`backend=$BACKEND\`," \
      "\`backend=null\` and tmpfs, one after another"
    if ((QUICK)); then echo "- **--quick: small sizes, one repetition; not numbers to compare**"; fi
  } >"$OUT/parts/header.md"
}

# The run's identity: the commit, the options that change numbers, and the
# machine's boot. Parts made under another identity are not mixed in.
run_identity() {
  printf '%s %s quick=%s repeat=%s boot=%s\n' "${COMMIT:-$(git -C "$REPO_DIR" rev-parse HEAD 2>/dev/null)}" \
    "$BACKEND" "$QUICK" "$REPEAT" "$(cat /proc/sys/kernel/random/boot_id)"
}

# run_section NAME: runs section NAME (its function) unless its part is
# there already.
run_section() {
  local name=$1
  if [[ -f $OUT/parts/$name.md ]]; then log "$name: kept from an earlier call"; return 0; fi
  : >"$REPORT"
  "$name"
  mv "$REPORT" "$OUT/parts/$name.md"
}

# Writes OUT/report.md: the header, then every section there is, in order.
assemble() {
  local name
  {
    cat "$OUT/parts/header.md"
    for name in $ALL_SECTIONS; do
      if [[ -f $OUT/parts/$name.md ]]; then cat "$OUT/parts/$name.md"; fi
    done
  } >"$OUT/report.md"
}

streams() {
  section "Streams, random I/O and small files"
  command_block "CUDAFS=$CUDAFS OUT_DIR=$OUT/streams bench/run_benchmarks.sh ${TARGETS[*]}"
  log "streams, random I/O and small files"
  OUT_DIR=$OUT/streams "$BENCH_DIR/run_benchmarks.sh" "${TARGETS[@]}" >"$OUT/streams.log" 2>&1 ||
    { skipped "bench/run_benchmarks.sh failed (streams.log)"; return 0; }
  table_of "$OUT/streams/report.md"
  if [[ -f $OUT/streams/benchmarks.png ]]; then
    cp "$OUT/streams/benchmarks.png" "$OUT/benchmarks.png"
    printf '\n![streams, random I/O and small files](img/benchmarks.png)\n' >>"$REPORT"
  fi
}

trees() {
  section "Trees of small files"
  command_block "CUDAFS=$CUDAFS OUT_DIR=$OUT/trees BENCH_WORKLOADS=\"tree git\"${BENCH_TREE:+ BENCH_TREE=$BENCH_TREE} BENCH_REPEAT=$BENCH_REPEAT bench/tree_workload.sh ${TARGETS[*]}"
  log "trees of small files"
  OUT_DIR=$OUT/trees BENCH_WORKLOADS="tree git" "$BENCH_DIR/tree_workload.sh" "${TARGETS[@]}" \
    >"$OUT/trees.log" 2>&1 || { skipped "bench/tree_workload.sh failed (trees.log)"; return 0; }
  table_of "$OUT/trees/tree.md"
}

appends() {
  section "1 KiB appends round-robin to 1000 files, with and without the write-back cache"
  local targets=("cache=cudafs:backend=$BACKEND,cache=64m" "nocache=cudafs:backend=$BACKEND,cache=0"
    "null=cudafs:backend=null,cache=0" "tmpfs=tmpfs:")
  command_block "CUDAFS=$CUDAFS OUT_DIR=$OUT/appends BENCH_MULTIPLES= bench/cache_matrix.sh ${targets[*]}"
  log "appends"
  OUT_DIR=$OUT/appends BENCH_MULTIPLES= "$BENCH_DIR/cache_matrix.sh" "${targets[@]}" \
    >"$OUT/appends.md" 2>"$OUT/appends.log" || { skipped "bench/cache_matrix.sh failed"; return 0; }
  table_of "$OUT/appends.md"
}

# gpu_section TITLE NEEDS COMMAND: a GPU-only section, the shell command
# COMMAND run when the backend is cuda and the Python modules NEEDS
# (space-separated) import; its output goes into the report as it comes.
gpu_section() {
  local title=$1 needs=$2 command=$3
  section "$title"
  command_block "$command"
  if [[ $BACKEND != cuda ]]; then skipped "needs --backend cuda"; return 0; fi
  local module
  for module in $needs; do
    "$PYTHON" -c "import $module" 2>/dev/null || { skipped "no Python module $module"; return 0; }
  done
  log "$title"
  local output=$OUT/$(echo "$title" | tr -c 'a-zA-Z0-9\n' '_' | cut -c1-40).out
  if (cd "$REPO_DIR" && bash -c "$command") >"$output" 2>&1; then
    if grep -q '^|' "$output"; then cat "$output" >>"$REPORT"; else
      { echo '```'; cat "$output"; echo '```'; } >>"$REPORT"
    fi
  else
    skipped "it failed: $(tail -n 1 "$output")"
  fi
}

gpu() {
  local client="CUDAFS_CLIENT_LIBRARY=$BUILD_DIR/fs/client/libcudafs_client.so PYTHONPATH=fs/client/python"
  local mount=/mnt/cudafs-report seconds=10 gib=8 repeat=3
  if ((QUICK)); then seconds=2 gib=1 repeat=1; fi
  gpu_section "The device alone (no FUSE), GB/s" "" \
    "$BUILD_DIR/device_benchmark --benchmark_filter=Parallel --benchmark_min_time=0.3"
  gpu_section "A bf16 matrix multiply beside the mount" "torch" \
    "mkdir -p $mount && $CUDAFS $mount -o size=40g && { $PYTHON bench/gpu_consumers.py matmul $mount --seconds $seconds; s=\$?; umount $mount; exit \$s; }"
  gpu_section "Zero copy: a $gib GiB safetensors file into PyTorch" "torch safetensors" \
    "$client $PYTHON bench/share_gpu.py --cudafs $CUDAFS --gib $gib --repeat $repeat"
  if ((QUICK)); then
    section "Giving memory back"
    skipped "--quick leaves out the minutes-long pressure runs"
    return 0
  fi
  gpu_section "Giving memory back: a program taking 90% of the GPU" "torch" \
    "$PYTHON bench/gpu_pressure.py --cudafs $CUDAFS --room-extra 1g --idle-seconds 30 --out $OUT/gpu_pressure"
  gpu_section "How fast make-room moves data" "" "CUDAFS=$CUDAFS bench/make_room_rate.sh"
}

# Replaces what lies between the report's markers in docs/BENCHMARKS.md.
update_docs() {
  local doc=$REPO_DIR/docs/BENCHMARKS.md
  "$PYTHON" - "$doc" "$OUT/report.md" <<'PY'
import sys
doc_path, report_path = sys.argv[1], sys.argv[2]
begin, end = "<!-- generated by bench/report.sh: begin -->", "<!-- generated by bench/report.sh: end -->"
doc = open(doc_path).read()
if begin not in doc or end not in doc:
    sys.exit("%s lacks the markers %s ... %s" % (doc_path, begin, end))
head, rest = doc.split(begin, 1)
_, tail = rest.split(end, 1)
open(doc_path, "w").write(head + begin + "\n" + open(report_path).read().rstrip("\n") + "\n" + end + tail)
PY
  [[ -f $OUT/benchmarks.png ]] && cp "$OUT/benchmarks.png" "$REPO_DIR/docs/img/benchmarks.png"
  log "docs/BENCHMARKS.md updated"
}

identity=$(run_identity)
if [[ -f $OUT/parts/identity ]]; then
  if [[ $(cat "$OUT/parts/identity") != "$identity" ]]; then
    echo "$OUT/parts holds another run's sections (another commit, backend, --quick or boot):" \
      "give another --out" >&2
    exit 2
  fi
else
  echo "$identity" >"$OUT/parts/identity"
  machine_header
fi
for name in ${SECTIONS//,/ }; do run_section "$name"; done
assemble
log "written: $OUT/report.md"
if ((UPDATE_DOCS)); then
  for name in $ALL_SECTIONS; do
    [[ -f $OUT/parts/$name.md ]] || { echo "no $name section yet: docs not updated" >&2; exit 1; }
  done
  update_docs
fi
