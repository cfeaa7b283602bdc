#!/usr/bin/env bash
# bundle-libs.sh DIR OUT: copies into OUT every shared library that the
# programs and libraries under DIR load, but those every GPU machine has
# (the C library and its loader, the C++ and GCC runtimes, the NVIDIA
# driver's libraries), so that DIR runs on a machine without the packages
# it was built with (abseil, libfuse, fio's libraries, ...). There:
#   export LD_LIBRARY_PATH=$PWD/OUT:$LD_LIBRARY_PATH
# A library the build machine itself cannot find fails it.
set -euo pipefail
usage="usage: bench/bundle-libs.sh DIR OUT"
dir=${1:?$usage}
out=${2:?$usage}
# libcuda must be the target machine's own: it matches its kernel module.
system='^(linux-vdso|linux-gate|ld-linux|libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|libcuda|libnvidia)[.-]'

elf_files() {
  find "$dir" -type f \( -perm -u+x -o -name '*.so' -o -name '*.so.*' \) -print0 |
    while IFS= read -r -d '' file; do
      if [[ $(head -c4 "$file" | tr -d '\0') == $'\x7fELF' ]]; then echo "$file"; fi
    done
}

mkdir -p "$out"
needed=$(elf_files | while read -r file; do ldd "$file" 2>/dev/null || true; done | sort -u)
if grep -q 'not found' <<<"$needed"; then
  echo "libraries not found on this machine:" >&2
  grep 'not found' <<<"$needed" >&2
  exit 1
fi
awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' <<<"$needed" | sort -u |
  while read -r name path; do
    [[ $name =~ $system ]] || cp -Lf "$path" "$out/$name"
  done
echo "$out: $(find "$out" -type f | wc -l) libraries, $(du -sh "$out" | cut -f1)"
