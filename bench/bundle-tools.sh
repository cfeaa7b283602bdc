#!/usr/bin/env bash
# bundle-tools.sh OUTDIR: packs the benchmark's tools (fio) with the shared
# libraries they need, for a machine that has no package manager:
#   OUTDIR/bin/fio   the binary
#   OUTDIR/lib/      its libraries (bench/bundle-libs.sh)
#   OUTDIR/fio       wrapper that runs bin/fio with lib/ on LD_LIBRARY_PATH
#   OUTDIR.tar.gz    all of the above in one file
# There: CUDAFS_BENCH_TOOLS=OUTDIR (or OUTDIR.tar.gz) bench/run_benchmarks.sh
set -euo pipefail

usage() { echo "usage: $0 OUTDIR" >&2; }

main() {
  (($# == 1)) || { usage; exit 2; }
  [[ $1 != -h && $1 != --help ]] || { usage; exit 0; }
  local out=$1
  local bench_dir fio_binary
  bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  fio_binary=${FIO:-/usr/bin/fio}
  [[ -x $fio_binary ]] || { echo "$fio_binary not found (apt-get install fio)" >&2; exit 1; }

  rm -rf "$out"
  mkdir -p "$out/bin"
  cp -L "$fio_binary" "$out/bin/fio"
  "$bench_dir/bundle-libs.sh" "$out/bin" "$out/lib"
  cat >"$out/fio" <<'EOF'
#!/bin/sh
# fio with the libraries bundled beside it.
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/bin/fio" "$@"
EOF
  chmod +x "$out/fio"

  # Every library fio needs must now resolve inside OUTDIR or be one that
  # bundle-libs.sh leaves to the target machine (glibc, compiler runtime).
  if LD_LIBRARY_PATH=$out/lib ldd "$out/bin/fio" | grep -q 'not found'; then
    echo "unresolved libraries:" >&2
    LD_LIBRARY_PATH=$out/lib ldd "$out/bin/fio" | grep 'not found' >&2
    exit 1
  fi
  "$out/fio" --version

  tar -C "$out" -czf "$out.tar.gz" .
  echo "wrote $out ($(du -sh "$out" | cut -f1)) and $out.tar.gz ($(du -sh "$out.tar.gz" | cut -f1))"
}

main "$@"
