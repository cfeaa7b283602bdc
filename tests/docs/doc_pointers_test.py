#!/usr/bin/env python3
"""The design notes' pointers still point at something, inside the repository.

docs/DESIGN.md and docs/TESTING.md point into the code and at other notes:
- every backquoted repository path (`fs/share/share_server.cc`, `bench/`,
  `build.sh`; in commands and code blocks too) must exist, and every
  backquoted file name of ours (`fuse_ops.cc`) must be some file's name;
- every name said to be in a file (`ChooseDirectIo` (`fs/fuse/io_mode.cc`),
  `Serve` in `fs/daemon/serve.cc`, `fs/fuse/io_mode.cc` (`ChooseDirectIo`,
  `SetCaching`); a bare file name means the file of that name, wherever it
  is) must be defined or declared there, not merely mentioned;
- every pointer at a section of a note (MEASUREMENTS.md, *Entry title*,
  optionally followed by **Paragraph title**) must name a heading of that
  note (its beginning) and a bold paragraph title in it;
- no pointer may leave the repository: no backquoted path with `../`, and
  every markdown link of these notes and of README.md resolves inside it.
Code moves and measurements move to MEASUREMENTS.md; a note pointing at
where something was is worse than none. The test counts what it checked
and fails when it finds too little, so it cannot pass by reading nothing.
Usage: doc_pointers_test.py REPOSITORY_ROOT
"""
import os
import re
import sys

DOCS = ("docs/DESIGN.md", "docs/TESTING.md")
# Notes whose markdown links must stay inside the repository too.
LINKED = DOCS + ("README.md", "docs/MEASUREMENTS.md", "docs/BENCHMARKS.md")
# Where the repository's own files live (anything else in backquotes is a
# command, an option, a path on the machine or a file of another project).
TOP = ("fs/", "alloc/", "cache/", "bench/", "tests/", "docs/", ".ci/")
TOP_FILES = ("build.sh", "CMakeLists.txt")
# Backquoted file names that are not ours: the CUDA toolkit's headers.
NOT_OURS = ("cuda.h", "cudaTypedefs.h")
NOTES = {"README": "README.md", "DESIGN": "docs/DESIGN.md", "TESTING": "docs/TESTING.md",
         "MEASUREMENTS": "docs/MEASUREMENTS.md", "BENCHMARKS": "docs/BENCHMARKS.md"}
# Each check must have found at least this many pointers (about 80% of
# what the notes held when this was written).
AT_LEAST = {"paths": 130, "file names": 35, "names in files": 20, "sections": 20, "links": 25}

IDENT = r"[A-Za-z_][\w:~]*"
SOURCE = r"[^`\s]+\.(?:cc|h|c|sh|py)"
# `Name` (`file`), `Name` in `file`, `Name` of `file`, across line breaks.
NAME_IN_FILE = re.compile(r"`(%s)(?:\(\))?`,?\s+(?:\(|in\s+|of\s+)`(%s)`" % (IDENT, SOURCE))
# `file` (`Name`, `Name` and `Name`): a file and only names in parentheses.
FILE_WITH_NAMES = re.compile(
    r"`(%s)`\s+\(((?:`%s(?:\(\))?`(?:,\s*|\s+and\s+)?)+)\)" % (SOURCE, IDENT))
# NOTE, *Section* [, **Paragraph**], NOTE with or without .md.
SECTION = re.compile(r"\b(%s)(?:\.md)?,\s+\*([^*]+)\*(?:,\s+\*\*([^*]+)\*\*)?" % "|".join(NOTES))
LINK = re.compile(r"\]\(([^)\s]+)\)")


def words(text):
    return " ".join(text.split())


def split_fenced(text):
    """The note's prose (code blocks blanked out) and its code blocks' text."""
    prose, code = [], []
    for i, part in enumerate(re.split(r"^```.*$", text, flags=re.M)):
        (code if i % 2 else prose).append(part)
    return "\n".join(prose), "\n".join(code)


def is_repository_path(word, alone):
    if any(c in word for c in "*$<>{}|=") or word.startswith(("/", "-", "build", "./build")):
        return False
    if word.startswith(TOP) or word in TOP_FILES or word.endswith("/CMakeLists.txt"):
        return True
    # A path of two or more parts with an extension, alone in its quotes.
    return alone and "/" in word and re.search(r"\.[A-Za-z]\w*$", word) is not None


def defines(text, name):
    """Whether a C++, Python or shell file defines or declares name."""
    n = re.escape(name)
    return re.search(
        r"\b(?:class|struct|union|enum(?:\s+class)?|namespace|using|def)\s+%s\b"
        r"|#define\s+%s\b|^\s*%s::|::%s\s*\(|\b%s\s*(?:\(|=|;|\{)" % (n, n, n, n, n),
        text, re.M) is not None


class Checker:
    def __init__(self, root):
        self.root = root
        self.counts = dict.fromkeys(AT_LEAST, 0)
        self.by_name = {}
        for directory, subdirectories, names in os.walk(root):
            subdirectories[:] = [d for d in subdirectories
                                 if not d.startswith(("build", ".git"))]
            for name in names:
                self.by_name.setdefault(name, []).append(
                    os.path.relpath(os.path.join(directory, name), root))
        self.texts = {}

    def text(self, path):
        if path not in self.texts:
            with open(os.path.join(self.root, path), encoding="utf-8", errors="replace") as f:
                self.texts[path] = f.read()
        return self.texts[path]

    def exists(self, path):
        return os.path.exists(os.path.join(self.root, path))

    def paths(self, doc, prose, code):
        spans = [m.group(1) for m in re.finditer(r"`([^`]+)`", prose)]
        for span, alone in [(s, len(s.split()) == 1) for s in spans] + [(code, False)]:
            for word in span.split():
                word = word.split(":")[0].strip("(),;'\"").rstrip(".")
                if "../" in word:
                    yield f"{doc}: `{word}` points outside the repository"
                elif is_repository_path(word, alone):
                    self.counts["paths"] += 1
                    if not self.exists(word):
                        yield f"{doc}: `{word}` does not exist"
                elif (alone and "/" not in word and word not in NOT_OURS
                      and re.fullmatch(r"[\w.+-]+\.(?:cc|h|c|sh|py|toml|patch)", word)):
                    self.counts["file names"] += 1
                    if word not in self.by_name:
                        yield f"{doc}: no file is named `{word}`"

    def names(self, doc, prose):
        pairs = [(m.group(1), m.group(2)) for m in NAME_IN_FILE.finditer(prose)]
        for m in FILE_WITH_NAMES.finditer(prose):
            pairs += [(name, m.group(1)) for name in re.findall(r"`(%s)" % IDENT, m.group(2))]
        for name, path in pairs:
            self.counts["names in files"] += 1
            candidates = [path] if "/" in path else self.by_name.get(path, [])
            candidates = [c for c in candidates if self.exists(c)]
            if not candidates:
                yield f"{doc}: `{name}` is said to be in `{path}`, which does not exist"
            elif name == os.path.splitext(os.path.basename(path))[0]:
                continue  # a program named by its one source file
            elif not any(defines(self.text(c), name.split("::")[-1]) for c in candidates):
                yield f"{doc}: `{name}` is not defined or declared in `{path}`"

    def sections(self, doc, prose):
        for m in SECTION.finditer(prose):
            note, title, paragraph = NOTES[m.group(1)], words(m.group(2)), m.group(3)
            self.counts["sections"] += 1
            text = self.text(note).replace("`", "")
            headings = [words(h) for h in re.findall(r"^#+\s+(.*)$", text, re.M)]
            if not any(h.startswith(title.replace("`", "")) for h in headings):
                yield f"{doc}: {note} has no section *{title}*"
            elif paragraph and "**" + words(paragraph) not in words(text):
                yield f"{doc}: {note} has no paragraph **{words(paragraph)}**"

    def links(self, doc):
        prose, _ = split_fenced(self.text(doc))
        for m in LINK.finditer(prose):
            target = m.group(1).split("#")[0]
            if not target or re.match(r"[a-z]+:", target):
                continue
            self.counts["links"] += 1
            path = os.path.normpath(os.path.join(os.path.dirname(doc), target))
            if path.startswith(".."):
                yield f"{doc}: link ({m.group(1)}) points outside the repository"
            elif not self.exists(path):
                yield f"{doc}: link ({m.group(1)}) leads nowhere"

    def problems(self):
        for doc in DOCS:
            prose, code = split_fenced(self.text(doc))
            yield from self.paths(doc, prose, code)
            yield from self.names(doc, prose)
            yield from self.sections(doc, prose)
        for doc in LINKED:
            yield from self.links(doc)
        for kind, least in AT_LEAST.items():
            if self.counts[kind] < least:
                yield (f"only {self.counts[kind]} {kind} checked, fewer than {least}: "
                       "has the notes' form changed under this test?")


def main():
    checker = Checker(sys.argv[1])
    found = list(checker.problems())
    for problem in found:
        print(problem)
    print("checked: " + ", ".join(f"{n} {kind}" for kind, n in checker.counts.items()))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
