#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Check Documentation/design.rst's layout tree against the source tree.

The tree is the literal block (the first paragraph ending in "::") of
design.rst's "Module structure" section. Its format:

- Lines start at the block's own indentation plus 4 * DEPTH (DEPTH >= 0).
  An entry line is a PATH, then its description (required), which starts
  at column 28 of the block (or two spaces after a PATH that reaches past
  it). A line that starts at column 28 or further right continues the
  description of the entry above. Blank lines are allowed.
- PATH is one file or folder name, or a relative path, with no spaces; a
  folder ends in "/". At depth 0 it is relative to the repository's top;
  deeper, to the folder line above it at one less depth. One path per
  line: "tx.rs, rx.rs" is refused.

The rule it enforces:

(a) every PATH names something that exists: a folder for a folder line, a
    file for any other; and no PATH is named twice;
(b) every .rs, .c and .h file under rust/ is named by a line of its own,
    except
    - rust/ffi/bindings_generated.rs (written by the build),
    - anything under a folder called target/ or testdata/,
    - inside rust/proto/ and rust/abi/ only (the host crates' internals):
      the files under a folder line that has no line beneath it, which
      stands for its whole content ("listed by folder").
    Other files (Cargo.toml, bindgen_parameters, scripts) may be named and
    then must exist, but need not be.

It fails if the section, the block or any entry is missing, or if it finds
no file under rust/driver/, so it cannot pass by reading nothing.

    tests/layout.py [TOP]     (TOP: the repository, by default this one)
"""

import os
import re
import sys

DOC = "Documentation/design.rst"
SECTION = "Module structure"
DESC_COL = 28
STEP = 4
KINDS = (".rs", ".c", ".h")
GENERATED = {"rust/ffi/bindings_generated.rs"}
SKIP_DIRS = {"target", "testdata"}
BY_FOLDER_OK = ("rust/proto/", "rust/abi/")
# rst section underlines
UNDERLINE = re.compile(r"^([=\-~^\"'`#*+.:_])\1{2,}\s*$")


def fail(errors):
    for e in errors:
        print(e, file=sys.stderr)
    print(f"layout: {len(errors)} problem(s). Every .rs, .c and .h under "
          f"rust/ needs a line of its own in {DOC}'s \"{SECTION}\" tree "
          f"(rust/proto/ and rust/abi/ may be listed by folder), and every "
          f"line must name a file or folder that exists; the format is in "
          f"tests/layout.py's header.", file=sys.stderr)
    sys.exit(1)


def indent_of(line):
    return len(line) - len(line.lstrip(" "))


def find_block(lines):
    """The layout block's lines, as (line number, text) pairs."""
    start = None
    for i in range(len(lines) - 1):
        if lines[i].strip() == SECTION and UNDERLINE.match(lines[i + 1]):
            start = i + 2
            break
    if start is None:
        fail([f"{DOC}: no \"{SECTION}\" section"])
    # The section ends at the next title (a line followed by an underline).
    end = len(lines)
    for i in range(start, len(lines) - 1):
        if lines[i].strip() and UNDERLINE.match(lines[i + 1]) \
                and not UNDERLINE.match(lines[i]):
            end = i
            break
    colons = None
    for i in range(start, end):
        if lines[i].rstrip().endswith("::") and indent_of(lines[i]) == 0:
            colons = i
            break
    if colons is None:
        fail([f"{DOC}: \"{SECTION}\" has no literal block (a paragraph "
              f"ending in \"::\")"])
    block = []
    for i in range(colons + 1, end):
        text = lines[i].rstrip("\n")
        if text.strip() and indent_of(text) == 0:
            break
        block.append((i + 1, text.rstrip()))
    while block and not block[-1][1]:
        block.pop()
    return block


def parse(block):
    """Entries as dicts: line, path (relative to TOP), folder, children."""
    errors = []
    entries = []
    base = None
    stack = []  # (depth, entry) of the folder lines enclosing the next line
    last = None
    for lineno, text in block:
        if not text.strip():
            continue
        where = f"{DOC}:{lineno}"
        if "\t" in text:
            errors.append(f"{where}: a tab in the layout block; use spaces")
            continue
        ind = indent_of(text)
        if base is None:
            base = ind
        col = ind - base
        if col < 0:
            errors.append(f"{where}: indented less than the block's first line")
            continue
        if col >= DESC_COL:
            if last is None:
                errors.append(f"{where}: a description line before any entry")
            continue
        if col % STEP:
            errors.append(f"{where}: indented by {col}, not a multiple of "
                          f"{STEP} (or at least {DESC_COL} for a description "
                          f"line)")
            continue
        depth = col // STEP
        body = text[ind:]
        m = re.match(r"(\S+)(\s*)(.*)$", body)
        path, gap, desc = m.group(1), m.group(2), m.group(3)
        if path.endswith(","):
            errors.append(f"{where}: one path per line ({body!r})")
            continue
        if not desc:
            errors.append(f"{where}: {path} has no description")
        else:
            want = max(DESC_COL, col + len(path) + 2)
            got = col + len(path) + len(gap)
            if got != want:
                errors.append(f"{where}: {path}'s description starts in "
                              f"column {got} of the block, not {want}")
        parts = path.rstrip("/").split("/")
        if path.startswith("/") or any(p in ("", ".", "..") for p in parts) \
                or any(c in path for c in "*?[]{},"):
            errors.append(f"{where}: {path!r} is not a plain relative path")
            continue
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if depth > 0 and (not stack or stack[-1][0] != depth - 1):
            errors.append(f"{where}: {path} is indented {depth} level(s) "
                          f"but has no folder line (ending in /) one level "
                          f"above it")
            continue
        parent = stack[-1][1] if depth > 0 else None
        full = (parent["path"] if parent else "") + path
        entry = {"line": lineno, "path": full.rstrip("/"),
                 "folder": path.endswith("/"), "children": 0}
        if parent:
            parent["children"] += 1
        entries.append(entry)
        last = entry
        if entry["folder"]:
            entry["path"] += "/"
            stack.append((depth, entry))
    return entries, errors


def source_files(top):
    """The files rule (b) asks to be named: paths relative to TOP."""
    found = []
    for root, dirs, files in os.walk(os.path.join(top, "rust")):
        dirs[:] = sorted(d for d in dirs
                         if d not in SKIP_DIRS and not d.startswith("."))
        for f in sorted(files):
            if f.endswith(KINDS) and not f.startswith("."):
                rel = os.path.relpath(os.path.join(root, f), top)
                rel = rel.replace(os.sep, "/")
                if rel not in GENERATED:
                    found.append(rel)
    return found


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else \
        os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        with open(os.path.join(top, DOC), encoding="utf-8") as f:
            lines = f.read().split("\n")
    except OSError as e:
        fail([f"{DOC}: cannot read: {e}"])
    entries, errors = parse(find_block(lines))
    if not entries:
        errors.append(f"{DOC}: \"{SECTION}\"'s layout block names nothing")

    # (a) what is named exists, once.
    seen = {}
    for e in entries:
        where = f"{DOC}:{e['line']}"
        p = os.path.join(top, e["path"])
        if e["path"] in seen:
            errors.append(f"{where}: {e['path']} is named twice (first on "
                          f"line {seen[e['path']]})")
        seen.setdefault(e["path"], e["line"])
        if e["folder"] and not os.path.isdir(p):
            errors.append(f"{where}: {e['path']} is named but there is no "
                          f"such folder")
        elif not e["folder"] and not os.path.isfile(p):
            errors.append(f"{where}: {e['path']} is named but there is no "
                          f"such file")

    # (b) every source file is named.
    files = {e["path"] for e in entries if not e["folder"]}
    by_folder = [e["path"] for e in entries
                 if e["folder"] and e["children"] == 0
                 and e["path"].startswith(BY_FOLDER_OK)]
    required = source_files(top)
    if not any(f.startswith("rust/driver/") for f in required):
        errors.append(f"{top}: no source file found under rust/driver/ "
                      f"(wrong repository?)")
    for f in required:
        if f in files or any(f.startswith(d) for d in by_folder):
            continue
        errors.append(f"{f}: not named by {DOC}'s layout tree")
    if errors:
        fail(errors)
    print(f"layout: {len(entries)} entries in {DOC}'s tree, {len(required)} "
          f"source files under rust/, all named, all present")


if __name__ == "__main__":
    main()
