#!/usr/bin/env bash
# Trees of small files, the way a scratch directory is used: tar x, find +
# stat, grep -r (cold and warm), tar c, cp -a, rm -rf of a real source tree;
# git clone / status / checkout of a real repository; bench/smallfiles.py
# (create, stat, stat again, unlink); a warm-ccache rebuild. Every target is
# mounted side by side in one run (a fresh mount for each repetition), each
# step is timed (wall seconds, median of BENCH_REPEAT runs), and on cudafs
# targets the FUSE requests each step cost are counted by opcode.
#
# Writes OUT_DIR/tree.jsonl (a run record, one record per target, then one
# per target x step: seconds, files, requests), OUT_DIR/tree.md (the tables:
# seconds, cudafs/tmpfs and cudafs/null ratios, requests per file), the raw
# samples (tree-samples.jsonl) and logs (OUT_DIR/logs). Needs root (mount,
# drop_caches). See usage below (-h).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(dirname "$BENCH_DIR")
# shellcheck source=bench/lib.sh
source "$BENCH_DIR/lib.sh"
# The exact invocation, with the settings it took from the environment.
COMMAND_LINE=$(
  for var in CUDAFS OUT_DIR PYTHON TMPDIR $(compgen -e | grep '^BENCH_' || true); do
    [[ -n ${!var+set} ]] && printf '%s=%q ' "$var" "${!var}"
  done
  printf '%q' "$0"; (($#)) && printf ' %q' "$@"; echo
)

usage() {
  cat <<'EOF'
usage: bench/tree_workload.sh [-h] [TARGET ...]

Times tar x, find+stat, grep -r, tar c, cp -a, rm -rf of a source tree, git
clone/status/checkout, small-file create/stat/unlink and a warm-ccache
rebuild on every TARGET, each on a fresh mount; counts the FUSE requests
per file of each step on cudafs targets.

TARGET is NAME=SPEC, or just NAME for one of the default targets. SPEC is
  cudafs[:OPTIONS]   mount $CUDAFS with -o OPTIONS,$BENCH_CUDAFS_OPTIONS
                     (size= added unless given)
  tmpfs[:OPTIONS]    mount -t tmpfs (size= added unless given)
  dir:PATH           a fresh directory under PATH (another filesystem)
Default targets, in this order:
  tmpfs=tmpfs  cudafs-cuda=cudafs:backend=cuda  cudafs-host=cudafs:backend=host
  cudafs-null=cudafs:backend=null
A target that fails to mount is reported as n/a; the run goes on.

Workloads (BENCH_WORKLOADS, any of "tree git small ccache"):
  tree    untar the tree (tar xf), stat every file (find -exec stat +), the
          same after drop_caches, grep -r for a string it lacks (cold:
          after drop_caches, then warm), tar cf - | cat >/dev/null, cp -a
          of the tree beside itself, rm -rf of both
  git     git clone --no-local of a repository made from the tree (two
          commits, a few hundred files apart), git status, git status
          after drop_caches, git checkout of the older commit and back
  small   bench/smallfiles.py: create+write+close, stat, stat again
          (stat2), unlink of BENCH_SMALL_FILES 4 KiB files
  ccache  configure + build of a C project with CCACHE_DIR and the build
          tree on the mount: once to fill the cache (cold), then, per
          repetition, the build tree removed and built again (warm);
          skipped with a message without ccache or a project
The source tree is BENCH_TREE if set, else the PyTorch package directory
when `python3 -c 'import torch'` works, else /usr/include (plus more of
/usr/share and /usr/lib/python3 until about 5000 files). Files over
BENCH_TREE_MAX_FILE_MIB are left out (it is about small files).

Environment (defaults in brackets):
  CUDAFS               cudafs binary [build/cudafs of this checkout]
  OUT_DIR              tree.jsonl, tree.md, samples and logs [./bench-out]
  PYTHON               Python 3 for the helpers [python3]
  TMPDIR               where the tarball, repository and mountpoints go [/tmp]
  BENCH_TREE           a directory, .tar or .tar.gz to use as the tree
  BENCH_TREE_MAX_FILE_MIB  leave out bigger files; 0: keep all [16]
  BENCH_CUDAFS_OPTIONS extra -o options of every cudafs target, e.g.
                       nodirect_io (appended to the target's own)
  BENCH_SMALL_FILES    number of 4 KiB files in the small workload [20000]
  BENCH_REPEAT         runs of each step; the tables give the median [3]
  BENCH_WARM           1: write and fsync 4 KiB on each fresh mount before
                       its steps, so a mount's first-write costs (cudafs:
                       the CUDA context, ~0.3 s) fall outside them [0]
  BENCH_WORKLOADS      subset of "tree git small ccache" [all]
  BENCH_CCACHE_PROJECT C/C++ source dir (meson.build or CMakeLists.txt)
                       [build/libfuse-source/fuse3-* of this checkout or
                       of the repository's main worktree]
  BENCH_SIZE           size= of each mount, e.g. 8g [what the workloads need + 1 GiB]
  BENCH_TIMEOUT        seconds before one command is killed [900]

Quick local run (no GPU: cudafs-cuda shows n/a):
  BENCH_REPEAT=2 BENCH_SMALL_FILES=2000 bench/tree_workload.sh
EOF
}

declare -A DEFAULT_SPECS=(
  [tmpfs]=tmpfs
  [cudafs-cuda]=cudafs:backend=cuda
  [cudafs-host]=cudafs:backend=host
  [cudafs-null]=cudafs:backend=null
)
readonly DEFAULT_TARGETS=(tmpfs cudafs-cuda cudafs-host cudafs-null)

CUDAFS=${CUDAFS:-$REPO_DIR/build/cudafs}
OUT_DIR=${OUT_DIR:-./bench-out}
PYTHON=${PYTHON:-python3}
SMALL_FILES=${BENCH_SMALL_FILES:-20000}
REPEAT=${BENCH_REPEAT:-3}
WORKLOADS=${BENCH_WORKLOADS:-tree git small ccache}
TIMEOUT=${BENCH_TIMEOUT:-900}
MAX_FILE_MIB=${BENCH_TREE_MAX_FILE_MIB:-16}
CUDAFS_OPTIONS=${BENCH_CUDAFS_OPTIONS:-}
readonly SMALL_FILE_BYTES=4096
# A string no tree has, so grep reads every byte of every file. Built here
# so that this script does not contain it either.
NEEDLE="cudafs-tree-$((7 * 191))-needle"

WORK_DIR=""   # temp dir: tarball, repository, mountpoints
RESULTS=""    # OUT_DIR/tree.jsonl
SAMPLES=""    # OUT_DIR/tree-samples.jsonl: one record per timed run
LOG_DIR=""
TARBALL=""    # the tree, as an uncompressed tar on local disk
TREE_TOP=""   # the tree's top-level entry in the tarball (a directory)
TREE_FILES=0
TREE_BYTES=0
TREE_SOURCE=""
TREE_SKIPPED="0 0" # "FILES BYTES" left out for their size
SRC_ROOT=""
SRC_PATHS=()
GIT_REPO=""   # the repository on local disk
GIT_FILES=0
CCACHE_PROJECT=""
CCACHE_FILES=0
CCACHE_SKIP="" # why the ccache workload is skipped, if it is

# The target and mount the steps run on.
CUR_TARGET=""
CUR_KIND=""
CUR_MOUNT=""
CUR_WORKLOAD=""
CUR_REP=0

# ---------------------------------------------------------------- inputs

count_files_bytes() {  # count_files_bytes DIR...: "FILES BYTES" of the regular files
  find "$@" -type f -printf '%s\n' | awk '{ n++; b += $1 } END { printf "%d %d\n", n, b }'
}

# find_tree: sets SRC_ROOT, SRC_PATHS (relative to SRC_ROOT) and
# TREE_SOURCE (in words) to the tree to use.
find_tree() {
  local path
  if [[ -n ${BENCH_TREE:-} ]]; then
    TREE_SOURCE=$BENCH_TREE
    if [[ -d $BENCH_TREE ]]; then
      path=$(cd "$BENCH_TREE" && pwd)
      SRC_ROOT=$(dirname "$path")
      SRC_PATHS=("$(basename "$path")")
    elif [[ -f $BENCH_TREE ]]; then
      SRC_ROOT=$WORK_DIR/given
      mkdir -p "$SRC_ROOT"
      tar -xf "$BENCH_TREE" -C "$SRC_ROOT"
      mapfile -t SRC_PATHS < <(cd "$SRC_ROOT" && ls -A)
    else
      log "BENCH_TREE=$BENCH_TREE is neither a directory nor a tarball"
      return 1
    fi
    return 0
  fi
  if path=$(timeout 120 "$PYTHON" -c 'import os, torch; print(os.path.dirname(torch.__file__))' \
      2>/dev/null) && [[ -d $path ]]; then
    SRC_ROOT=$(dirname "$path")
    SRC_PATHS=("$(basename "$path")")
    TREE_SOURCE="PyTorch package $path"
    return 0
  fi
  # Real trees of this machine, until about 5000 files.
  local files=0 candidate
  SRC_ROOT=/
  SRC_PATHS=()
  for candidate in usr/include usr/share/perl5 usr/share/perl usr/lib/python3; do
    [[ -d /$candidate ]] || continue
    SRC_PATHS+=("$candidate")
    files=$((files + $(find "/$candidate" -type f | wc -l)))
    ((files >= 5000)) && break
  done
  ((${#SRC_PATHS[@]})) || { log "no tree found: set BENCH_TREE"; return 1; }
  TREE_SOURCE=$(printf '/%s ' "${SRC_PATHS[@]}")
  TREE_SOURCE=${TREE_SOURCE% }
}

# prepare_tree: the tarball of the tree on local disk, with one top-level
# directory ("tree") so that it untars into one directory of the mount.
prepare_tree() {
  local size_filter=() skipped=""
  find_tree
  ((MAX_FILE_MIB > 0)) && size_filter=(! \( -type f -size "+$((MAX_FILE_MIB * 1024))k" \))
  log "tree: $TREE_SOURCE"
  TARBALL=$WORK_DIR/tree.tar
  TREE_TOP=tree
  # Everything below each path, with "tree/" in front of every name, no
  # file over the size limit; directories listed, not recursed into.
  (cd "$SRC_ROOT" && find "${SRC_PATHS[@]}" "${size_filter[@]}" -print0) |
    tar -C "$SRC_ROOT" --null --no-recursion -T - --transform 's|^|tree/|' -cf "$TARBALL"
  if ((MAX_FILE_MIB > 0)); then
    skipped=$(cd "$SRC_ROOT" && count_files_bytes "${SRC_PATHS[@]}" -size "+$((MAX_FILE_MIB * 1024))k")
  fi
  TREE_SKIPPED=${skipped:-0 0}
  read -r TREE_FILES TREE_BYTES < <("$PYTHON" -c '
import sys, tarfile
files = size = 0
with tarfile.open(sys.argv[1]) as tar:
    for member in tar:
        if member.isreg():
            files += 1
            size += member.size
print(files, size)' "$TARBALL")
  log "tree: $TREE_FILES files, $TREE_BYTES bytes ($((TREE_BYTES >> 20)) MiB); left out, over $MAX_FILE_MIB MiB: ${TREE_SKIPPED% *} files, $((${TREE_SKIPPED#* } >> 20)) MiB"
}

git_quiet() { git -c advice.detachedHead=false "$@" >/dev/null; }

# prepare_git: a repository on local disk made from the tree: commit one is
# the tree, commit two (main) changes, removes and adds a few hundred files.
prepare_git() {
  GIT_REPO=$WORK_DIR/repo
  log "git: making the repository $GIT_REPO"
  mkdir -p "$GIT_REPO"
  tar -xf "$TARBALL" -C "$GIT_REPO" --strip-components=1
  (
    cd "$GIT_REPO"
    git_quiet init -q -b main .
    git_quiet add -A .
    git_quiet commit -q -m "the tree"
    "$PYTHON" - <<'PY'
import os
files = sorted(os.path.join(d, f) for d, _, names in os.walk(".") if not d.startswith("./.git")
               for f in names if os.path.isfile(os.path.join(d, f)) and not os.path.islink(os.path.join(d, f)))
step = max(1, len(files) // 300)
for i, name in enumerate(files[::step][:300]):
    with open(name, "ab") as f:
        f.write(b"\n/* changed by tree_workload.sh */\n")
for name in files[step // 2::step][:50]:
    if os.path.exists(name):
        os.unlink(name)
os.makedirs("added", exist_ok=True)
for i in range(50):
    with open("added/file%02d.txt" % i, "w") as f:
        f.write("added by tree_workload.sh %d\n" % i * 20)
PY
    git_quiet add -A .
    git_quiet commit -q -m "a few hundred files changed"
    git_quiet repack -a -d -q
  )
  GIT_FILES=$(git -C "$GIT_REPO" ls-files | wc -l)
  log "git: $GIT_FILES files; commits differ in $(git -C "$GIT_REPO" diff --name-only HEAD~1 HEAD | wc -l) files"
}

prepare_ccache() {
  local candidate common
  if ! command -v ccache >/dev/null; then CCACHE_SKIP="ccache not installed"; return 0; fi
  if ! command -v cc >/dev/null; then CCACHE_SKIP="no C compiler (cc)"; return 0; fi
  if [[ -n ${BENCH_CCACHE_PROJECT:-} ]]; then
    CCACHE_PROJECT=$BENCH_CCACHE_PROJECT
  else
    common=$(git -C "$REPO_DIR" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)
    for candidate in "$REPO_DIR"/build/libfuse-source/fuse3-* \
        ${common:+"$(dirname "$common")"/build/libfuse-source/fuse3-*}; do
      [[ -d $candidate ]] && { CCACHE_PROJECT=$candidate; break; }
    done
  fi
  if [[ -z $CCACHE_PROJECT || ! -d $CCACHE_PROJECT ]]; then
    CCACHE_SKIP="no project: set BENCH_CCACHE_PROJECT (./build.sh fetches libfuse into build/libfuse-source)"
    return 0
  fi
  CCACHE_PROJECT=$(cd "$CCACHE_PROJECT" && pwd)
  if [[ -f $CCACHE_PROJECT/meson.build ]]; then
    command -v meson >/dev/null && command -v ninja >/dev/null ||
      CCACHE_SKIP="$CCACHE_PROJECT needs meson and ninja"
  elif [[ -f $CCACHE_PROJECT/CMakeLists.txt ]]; then
    command -v cmake >/dev/null || CCACHE_SKIP="$CCACHE_PROJECT needs cmake"
  else
    CCACHE_SKIP="$CCACHE_PROJECT has neither meson.build nor CMakeLists.txt"
  fi
  read -r CCACHE_FILES _ < <(count_files_bytes "$CCACHE_PROJECT")
  [[ -z $CCACHE_SKIP ]] && log "ccache: project $CCACHE_PROJECT ($CCACHE_FILES files)"
  return 0
}

# ---------------------------------------------------------------- mounts

# fresh_mount NAME SPEC: mounts the target at a fresh mountpoint (CUR_*);
# fails when it cannot, the reason in LOG_DIR/NAME.mount.log.
fresh_mount() {
  local name=$1 spec=$2
  CUR_TARGET=$name
  CUR_KIND=${spec%%:*}
  CUR_MOUNT=$WORK_DIR/mnt/$name
  [[ $CUR_KIND == dir ]] && CUR_MOUNT=${spec#*:}/$(basename "$WORK_DIR").$name
  mkdir -p "$WORK_DIR/mnt"
  mount_target "$name" "$spec" "$CUR_MOUNT" "$LOG_DIR/$name.mount.log" || {
    rmdir "$CUR_MOUNT" 2>/dev/null || true
    return 1
  }
  if [[ ${BENCH_WARM:-0} == 1 ]]; then
    head -c 4096 /dev/zero >"$CUR_MOUNT/warm" && sync "$CUR_MOUNT/warm"
  fi
}

release_mount() {
  local pid=""
  [[ $CUR_KIND == cudafs ]] && pid=$(daemon_pid "$CUR_MOUNT")
  if [[ $CUR_KIND == cudafs && -z $pid ]]; then
    log "$CUR_TARGET: the cudafs daemon is gone (died during $CUR_WORKLOAD?)"
  fi
  unmount_target "$CUR_KIND" "$CUR_MOUNT"
}

# ---------------------------------------------------------------- steps

# step NAME FILES [tree_step.py options] -- COMMAND: one timed run of
# COMMAND (a bash command line, run in the mount unless --cwd) on the
# current mount, recorded in SAMPLES. Never fails the script.
step() {
  local name=$1 files=$2; shift 2
  local counters=()
  [[ $CUR_KIND == cudafs ]] && counters=(--counters)
  "$PYTHON" "$BENCH_DIR/tree_step.py" --mount "$CUR_MOUNT" "${counters[@]}" \
    --timeout "$TIMEOUT" --log "$LOG_DIR/$CUR_TARGET.$CUR_WORKLOAD.log" --append "$SAMPLES" \
    --field target="$CUR_TARGET" --field workload="$CUR_WORKLOAD" --field step="$name" \
    --field rep:="$CUR_REP" --field files:="$files" "$@" ||
    log "$CUR_TARGET: $name failed: $(tail -n 1 "$SAMPLES" | "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin).get("error", ""))')"
}

# skipped WORKLOAD STEP... REASON: records STEPs as skipped on this target.
skipped() {
  local workload=$1 reason=${*: -1} name
  for name in "${@:2:$#-2}"; do
    emit_to "$SAMPLES" target="$CUR_TARGET" workload="$workload" step="$name" rep:=0 \
      files:=0 seconds:=null ok:=false skipped="$reason"
  done
}

emit_to() {  # emit_to FILE KEY=VALUE...: emit into FILE instead of RESULTS
  local file=$1; shift
  RESULTS=$file emit "$@"
}

workload_tree() {
  local n=$TREE_FILES
  step untar "$n" -- "mkdir work && tar -xf $(printf %q "$TARBALL") -C work"
  local tree=work/$TREE_TOP stat_all="find work/$TREE_TOP -type f -exec stat -c '%s %Y' {} + >/dev/null"
  step stat "$n" -- "$stat_all"
  step stat_cold "$n" --cold -- "$stat_all"
  step grep_cold "$n" --cold --ok-rc 0,1 -- "grep -r -l -F -e $NEEDLE $tree"
  step grep_warm "$n" --ok-rc 0,1 -- "grep -r -l -F -e $NEEDLE $tree"
  step tar_c "$n" -- "tar -cf - $tree | cat >/dev/null"
  step cp_a "$n" -- "cp -a $tree work/copy"
  step rm_rf "$((2 * n))" -- "rm -rf work"
}

workload_git() {
  local n=$GIT_FILES
  step git_clone "$n" -- "git clone -q --no-local $(printf %q "$GIT_REPO") clone"
  step git_status "$n" --cwd "$CUR_MOUNT/clone" -- "git status --porcelain >/dev/null"
  step git_status_cold "$n" --cwd "$CUR_MOUNT/clone" --cold -- "git status --porcelain >/dev/null"
  step git_checkout "$n" --cwd "$CUR_MOUNT/clone" -- "git -c advice.detachedHead=false checkout -q HEAD~1"
  step git_checkout_back "$n" --cwd "$CUR_MOUNT/clone" -- "git checkout -q main"
}

workload_small() {
  local log_file=$LOG_DIR/$CUR_TARGET.small.log output counters=()
  [[ $CUR_KIND == cudafs ]] && counters=(--counters "$CUR_MOUNT")
  if run_logged "$log_file" "$PYTHON" "$BENCH_DIR/smallfiles.py" --dir="$CUR_MOUNT/small" \
      --count="$SMALL_FILES" --size="$SMALL_FILE_BYTES" "${counters[@]}"; then
    output=$(tail -n 1 "$log_file")
    "$PYTHON" - "$output" "$CUR_TARGET" "$CUR_REP" >>"$SAMPLES" <<'PY'
import json, sys
result, target, rep = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
for phase in ("create", "stat", "stat2", "unlink"):
    record = {"target": target, "workload": "small", "step": "small_" + phase, "rep": rep,
              "files": result["count"], "seconds": result[phase + "_seconds"], "ok": True}
    if "requests" in result:
        record["requests"] = result["requests"][phase]
    print(json.dumps(record))
PY
  else
    local message
    message=$(error_line "$log_file")
    log "$CUR_TARGET: small files failed: $message"
    for phase in create stat stat2 unlink; do
      emit_to "$SAMPLES" target="$CUR_TARGET" workload=small step="small_$phase" rep:="$CUR_REP" \
        files:="$SMALL_FILES" seconds:=null ok:=false error="$message"
    done
  fi
}

# The ccache workload: one cold build, then BENCH_REPEAT warm rebuilds, all
# on one mount (the cache is what the mount keeps between them).
ccache_steps() {  # ccache_steps SUFFIX: configure and build once
  local suffix=$1 n=$CCACHE_FILES configure build
  if [[ -f $CCACHE_PROJECT/meson.build ]]; then
    configure="CC='ccache cc' CXX='ccache c++' meson setup --buildtype=release build-bench"
    build="ninja -C build-bench -j $(nproc)"
  else
    configure="cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release \
-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
$(command -v ninja >/dev/null && echo -G Ninja)"
    build="cmake --build build-bench -j $(nproc)"
  fi
  step "ccache_configure$suffix" "$n" --cwd "$CUR_MOUNT/project" -- "$configure"
  step "ccache_build$suffix" "$n" --cwd "$CUR_MOUNT/project" -- "$build"
  ccache --show-stats >>"$LOG_DIR/$CUR_TARGET.ccache.log" 2>&1 || true
}

workload_ccache() {
  export CCACHE_DIR=$CUR_MOUNT/ccache CCACHE_MAXSIZE=4G
  cp -a "$CCACHE_PROJECT" "$CUR_MOUNT/project"
  rm -rf "$CUR_MOUNT/project/build-bench"
  ccache --zero-stats >/dev/null 2>&1 || true
  CUR_REP=0
  ccache_steps _cold
  local rep
  for ((rep = 1; rep <= REPEAT; rep++)); do
    CUR_REP=$rep
    rm -rf "$CUR_MOUNT/project/build-bench"
    ccache --zero-stats >/dev/null 2>&1 || true
    ccache_steps ""
    local hits
    hits=$(ccache --print-stats 2>/dev/null | awk '
      /^direct_cache_hit|^preprocessed_cache_hit/ { h += $2 } /^cache_miss/ { m += $2 }
      END { if (h + m) printf "%d hits, %d misses", h, m }' || true)
    [[ -n $hits ]] && log "$CUR_TARGET: warm rebuild $rep: $hits"
  done
  unset CCACHE_DIR CCACHE_MAXSIZE
}

# ---------------------------------------------------------------- driver

bench_target() {
  local name=$1 spec=$2 workload rep mounted=0
  local kind=${spec%%:*}
  log "$name: $spec"
  for workload in $WORKLOADS; do
    CUR_WORKLOAD=$workload
    if [[ $workload == ccache && -n $CCACHE_SKIP ]]; then
      CUR_TARGET=$name
      skipped ccache ccache_configure_cold ccache_build_cold ccache_configure ccache_build \
        "skipped: $CCACHE_SKIP"
      continue
    fi
    local reps=$REPEAT
    [[ $workload == ccache ]] && reps=1
    for ((rep = 1; rep <= reps; rep++)); do
      CUR_REP=$rep
      if ! fresh_mount "$name" "$spec"; then
        local message
        message=$(grep -v '^\s*$' "$LOG_DIR/$name.mount.log" | head -n 1 || true)
        log "$name: mount failed: ${message:-unknown error}"
        if ((!mounted)); then
          emit type=target target="$name" spec="$spec" status=mount_failed \
            error="${message:-unknown error}"
          return 0
        fi
        continue
      fi
      if ((!mounted)); then
        mounted=1
        emit type=target target="$name" spec="$spec" kind="$kind" status=ok \
          filesystem="$(findmnt -n -o FSTYPE --target "$CUR_MOUNT" 2>/dev/null | head -n 1 ||
            stat -f -c %T "$CUR_MOUNT")"
      fi
      log "$name: $workload, run $rep of $reps"
      "workload_$workload"
      release_mount
    done
  done
}

emit_run_record() {
  emit_machine_record \
    cudafs_options="$CUDAFS_OPTIONS" repeat:="$REPEAT" workloads="$WORKLOADS" \
    tree_source="$TREE_SOURCE" tree_files:="$TREE_FILES" tree_bytes:="$TREE_BYTES" \
    tree_max_file_mib:="$MAX_FILE_MIB" tree_left_out_files:="${TREE_SKIPPED% *}" \
    tree_left_out_bytes:="${TREE_SKIPPED#* }" git_files:="$GIT_FILES" \
    small_files:="$SMALL_FILES" small_file_bytes:="$SMALL_FILE_BYTES" \
    ccache_project="$CCACHE_PROJECT" ccache_files:="$CCACHE_FILES" ccache_skipped="$CCACHE_SKIP" \
    ccache_version="$(ccache --version 2>/dev/null | head -n 1 || true)" \
    git_version="$(git --version)" tar_version="$(tar --version | head -n 1)" \
    mount_size="$MOUNT_SIZE"
}

default_mount_size() {  # the largest workload's footprint, plus 1 GiB
  local need=$((3 * TREE_BYTES >> 20)) small=$((SMALL_FILES * 2 * SMALL_FILE_BYTES >> 20))
  ((small > need)) && need=$small
  [[ " $WORKLOADS " == *" ccache "* ]] && ((need < 2048)) && need=2048
  echo "$((need + 1024))m"
}

main() {
  parse_targets "$@"
  local -a names=("${TARGET_NAMES[@]}") specs=("${TARGET_SPECS[@]}")
  local argument
  for argument in $WORKLOADS; do
    [[ $argument =~ ^(tree|git|small|ccache)$ ]] || { echo "unknown workload '$argument'" >&2; exit 2; }
  done
  [[ $REPEAT =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_REPEAT must be a positive integer" >&2; exit 2; }
  # Every cudafs target gets the same extra options.
  local i
  if [[ -n $CUDAFS_OPTIONS ]]; then
    for i in "${!specs[@]}"; do
      case ${specs[$i]} in
        cudafs) specs[i]=cudafs:$CUDAFS_OPTIONS ;;
        cudafs:*) specs[i]=${specs[$i]},$CUDAFS_OPTIONS ;;
      esac
    done
  fi
  # The interpreter itself, not a wrapper (a pyenv shim costs most of a
  # second per step).
  PYTHON=$("$PYTHON" -c 'import sys; print(sys.executable)')
  [[ $EUID == 0 ]] || echo "warning: not root: mounts and drop_caches will likely fail" >&2
  export GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=tree-bench GIT_AUTHOR_EMAIL=tree-bench@localhost \
    GIT_COMMITTER_NAME=tree-bench GIT_COMMITTER_EMAIL=tree-bench@localhost
  export LC_ALL=C

  mkdir -p "$OUT_DIR"
  OUT_DIR=$(cd "$OUT_DIR" && pwd)
  RESULTS=$OUT_DIR/tree.jsonl
  SAMPLES=$OUT_DIR/tree-samples.jsonl
  LOG_DIR=$OUT_DIR/logs
  : >"$RESULTS"
  : >"$SAMPLES"
  rm -rf "$LOG_DIR"
  mkdir -p "$LOG_DIR"
  WORK_DIR=$(mktemp -d "${TMPDIR:-/tmp}/cudafs-tree.XXXXXX")
  trap cleanup EXIT
  trap 'exit 130' INT TERM
  # Git reads no configuration but this one (safe.directory: the clones
  # belong to root, the mounts may report other owners).
  export GIT_CONFIG_GLOBAL=$WORK_DIR/gitconfig
  printf '[user]\n\tname = tree-bench\n\temail = tree-bench@localhost\n[safe]\n\tdirectory = *\n' \
    >"$GIT_CONFIG_GLOBAL"

  if [[ " $WORKLOADS " == *" tree "* || " $WORKLOADS " == *" git "* ]]; then
    prepare_tree
  fi
  [[ " $WORKLOADS " == *" git "* ]] && prepare_git
  if [[ " $WORKLOADS " == *" ccache "* ]]; then
    prepare_ccache
    [[ -n $CCACHE_SKIP ]] && log "ccache: skipped: $CCACHE_SKIP"
  fi
  MOUNT_SIZE=${BENCH_SIZE:-$(default_mount_size)}
  emit_run_record

  for i in "${!names[@]}"; do bench_target "${names[$i]}" "${specs[$i]}"; done

  "$PYTHON" "$BENCH_DIR/tree_report.py" "$RESULTS" "$SAMPLES" --markdown "$OUT_DIR/tree.md"
  log "results: $RESULTS; report: $OUT_DIR/tree.md"
}

main "$@"
