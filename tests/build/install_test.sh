#!/usr/bin/env bash
# What `cmake --install` installs, staged under DESTDIR: the Python module
# must land in a folder that the system's python3 searches (Debian's
# /usr/local/lib/python3.X/dist-packages for /usr/local, not a python3/
# folder it never looks in), import from there with its version and its
# dist-info (pip list, importlib.metadata), and the manual page must be
# compressed.
#   install_test.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: install_test.sh BUILD_DIR}
python=/usr/bin/python3
[[ -x $python ]] || python=$(command -v python3)
stage=$(mktemp -d /tmp/cudafs-install-test.XXXXXX)
trap 'rm -rf "$stage"' EXIT

DESTDIR=$stage cmake --install "$build" >/dev/null
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
module=$(cd "$stage" && find . -path '*/cudafs/__init__.py' -printf '%h\n')
[[ $(wc -l <<<"$module") == 1 ]] || { echo "install_test: the module, not once: $module"; exit 1; }
folder=${module#.}
folder=${folder%/cudafs}
echo "install_test: the module in $folder (prefix $prefix)"
"$python" - "$folder" "$stage" <<'PY'
import importlib.metadata, re, sys
folder, stage = sys.argv[1], sys.argv[2]
if folder not in sys.path:
    sys.exit("install_test: %s is not on %s's path: %s" % (folder, sys.executable, sys.path))
# The folder as staged stands in for itself.
sys.path[sys.path.index(folder)] = stage + folder
import cudafs
assert cudafs.__file__.startswith(stage + folder), cudafs.__file__
version = importlib.metadata.version("cudafs")
assert version == cudafs.__version__, (version, cudafs.__version__)
assert re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", version), version
print("install_test: python3 imports cudafs %s from there, with its metadata" % version)
PY
[[ -f $stage$prefix/share/man/man8/cudafs.8.gz && ! -e $stage$prefix/share/man/man8/cudafs.8 ]] ||
  { echo "install_test: no compressed manual page"; exit 1; }
echo "install_test: passed"
