#!/usr/bin/env bash
# bench/bundle-libs.sh on the cudafs binary: every library it loads but the
# ones every machine has (the C library, the C++ runtime) lands in the
# bundle, and with LD_LIBRARY_PATH on the bundle each of those resolves there.
# Usage: bundle_libs_test.sh REPOSITORY_ROOT CUDAFS_BINARY
set -euo pipefail
root=${1:?usage: bundle_libs_test.sh REPOSITORY_ROOT CUDAFS_BINARY}
binary=${2:?usage: bundle_libs_test.sh REPOSITORY_ROOT CUDAFS_BINARY}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/build"
cp "$binary" "$work/build/cudafs"
"$root/bench/bundle-libs.sh" "$work/build" "$work/libs" >/dev/null

fail() { echo "bundle_libs_test: $*" >&2; exit 1; }
bundled=$(ls "$work/libs")
[[ -n $bundled ]] || fail "nothing bundled, yet cudafs loads libraries of its build (libfuse)"
for system in libc.so.6 libstdc++.so.6 libgcc_s.so.1; do
  [[ ! -e $work/libs/$system ]] || fail "$system bundled: every machine has its own"
done
LD_LIBRARY_PATH=$work/libs ldd "$work/build/cudafs" |
  awk '$2 == "=>" { print $1, $3 }' | while read -r name path; do
    case $name in linux-vdso* | ld-linux* | libc.* | libm.* | libstdc++* | libgcc_s*) continue ;; esac
    [[ $path == "$work/libs/$name" ]] || fail "$name resolves to $path, not into the bundle"
  done
echo "bundled: $(echo $bundled)"
