#!/usr/bin/env python3
"""Every #include of a header whose code is compiled in a library is backed
by a link edge to that library: include directories are the source root for
every target (CMakeLists.txt), so nothing else stops an include without an
edge from building, until the code it needs moves.

  include_edges_test.py SOURCE_DIR

Configures SOURCE_DIR in a scratch build tree with CMake's file API, reads
each target's sources and dependencies, and checks every file a target
compiles and every header with code of its own: where "X.h" has an "X.cc"
that target L compiles, an include of "X.h" in a file of target T needs T
to be L or to depend on it. A header-only file needs no edge; what it
includes, its includer must link. An object library's files are checked
for the targets that take its objects. Prints each missing edge; exit
status 1 when there is one.
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def codemodel(source, build):
    query = os.path.join(build, ".cmake", "api", "v1", "query")
    os.makedirs(query)
    open(os.path.join(query, "codemodel-v2"), "w").close()
    subprocess.run(["cmake", "-S", source, "-B", build, "-DCUDAFS_BUILD_TESTS=ON",
                    "-DCUDAFS_BUILD_MOUNT_TESTS=ON", "-DCUDAFS_BUILD_BENCHMARKS=ON"],
                   check=True, stdout=subprocess.DEVNULL)
    reply = os.path.join(build, ".cmake", "api", "v1", "reply")
    index = json.load(open(sorted(glob.glob(os.path.join(reply, "index-*.json")))[-1]))
    model = json.load(open(os.path.join(reply, index["reply"]["codemodel-v2"]["jsonFile"])))
    targets = {}
    for entry in model["configurations"][0]["targets"]:
        target = json.load(open(os.path.join(reply, entry["jsonFile"])))
        targets[target["id"]] = target
    return targets


def main():
    source = os.path.realpath(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="cudafs-include-edges-") as build:
        targets = codemodel(source, build)
    names = {tid: t["name"] for tid, t in targets.items()}
    # The dependencies CMake lists are transitive already.
    deps = {t["name"]: {names[d["id"]] for d in t.get("dependencies", []) if d["id"] in names}
            for t in targets.values()}
    # An object library's code is linked by whoever takes its objects.
    objects = {t["name"] for t in targets.values() if t["type"] == "OBJECT_LIBRARY"}
    takers = {o: {name for name, d in deps.items() if o in d} for o in objects}
    compiled_by = {}  # "dir/x.cc" -> target names
    for t in targets.values():
        for s in t.get("sources", []):
            path = s["path"]
            if not s.get("isGenerated") and not os.path.isabs(path) and path.endswith(".cc"):
                compiled_by.setdefault(path, set()).update(takers.get(t["name"], {t["name"]}))
    # The files checked: each compiled file, for the targets compiling it,
    # and each header with code of its own, for the targets compiling that.
    files = dict(compiled_by)
    for path, owners in compiled_by.items():
        if os.path.exists(os.path.join(source, path[:-3] + ".h")):
            files[path[:-3] + ".h"] = owners
    missing = []

    def check(path, owners, seen):
        with open(os.path.join(source, path), errors="replace") as f:
            text = f.read()
        for included in INCLUDE.findall(text):
            if not included.endswith(".h") or not os.path.exists(os.path.join(source, included)):
                continue
            libraries = compiled_by.get(included[:-2] + ".cc")
            if libraries is None:
                # Header-only: what it includes, its includer does.
                if included not in seen:
                    seen.add(included)
                    check(included, owners, seen)
            elif not any(owner in libraries or deps[owner] & libraries for owner in owners):
                missing.append(f"{path} includes {included}, compiled in "
                               f"{' or '.join(sorted(libraries))}, which "
                               f"{' or '.join(sorted(owners))} does not link")

    for path, owners in sorted(files.items()):
        check(path, owners, set())
    for line in missing:
        print(line)
    print(f"include_edges_test: {len(files)} files, {len(missing)} includes without a link edge")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
