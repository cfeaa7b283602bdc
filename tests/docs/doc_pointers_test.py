#!/usr/bin/env python3
"""The design notes' pointers into the code still point at something.

docs/DESIGN.md and docs/TESTING.md name files (`fs/share/share_server.cc`)
and names in files (`ChooseDirectIo` (`fs/fuse/io_mode.cc`), `Name` in
`file`): each path must exist in the repository, and each name must appear
as a word in the file named (a bare file name: the file of that name,
wherever it is). Code moves; a note pointing at where it was is worse than
none. Usage: doc_pointers_test.py REPOSITORY_ROOT
"""
import os
import re
import sys

DOCS = ("docs/DESIGN.md", "docs/TESTING.md")
# Where the repository's own files live (anything else in backquotes is a
# command, an option or a file of another project).
TOP = ("fs/", "alloc/", "cache/", "bench/", "tests/", "docs/", ".ci/")
# `Name` (`file`), `Name` in `file`, `Name` of `file`, across a line break.
NAME_IN_FILE = re.compile(
    r"`([A-Za-z_][\w:~]*)(?:\(\))?`,?\s+(?:\(|in\s+|of\s+)`([^`\s]+\.(?:cc|h|sh|py))`")


def files_by_name(root):
    found = {}
    for directory, subdirectories, names in os.walk(root):
        subdirectories[:] = [d for d in subdirectories
                             if not d.startswith((".", "build"))]
        for name in names:
            found.setdefault(name, []).append(
                os.path.relpath(os.path.join(directory, name), root))
    return found


def problems(root):
    by_name = files_by_name(root)
    for doc in DOCS:
        text = open(os.path.join(root, doc), encoding="utf-8").read()
        for match in re.finditer(r"`([^`\s]+)`", text):
            path = match.group(1).split(":")[0].rstrip(".,")
            if path.startswith(TOP) and "*" not in path and not os.path.exists(
                    os.path.join(root, path)):
                yield f"{doc}: `{path}` does not exist"
        for match in NAME_IN_FILE.finditer(text):
            name, path = match.group(1), match.group(2)
            candidates = [path] if "/" in path else by_name.get(path, [])
            candidates = [c for c in candidates if os.path.exists(os.path.join(root, c))]
            if not candidates:
                yield f"{doc}: `{name}` is said to be in `{path}`, which does not exist"
                continue
            word = re.compile(r"\b" + re.escape(name.split("::")[-1]) + r"\b")
            if not any(word.search(open(os.path.join(root, c), encoding="utf-8",
                                        errors="replace").read()) for c in candidates):
                yield f"{doc}: `{name}` is not in `{path}`"


def main():
    found = list(problems(sys.argv[1]))
    for problem in found:
        print(problem)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
