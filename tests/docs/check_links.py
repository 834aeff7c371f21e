#!/usr/bin/env python3
"""The documentation's links and the code it names, checked against the repository.

- Every relative link of README.md and docs/*.md (outside code blocks) names a file that exists,
  and a `#anchor` in it names a heading of that page (GitHub's anchors: the heading lowercased,
  characters other than letters, digits, '-', '_' and spaces dropped, spaces made '-', a repeat
  numbered -1, -2, ...).
- README.md links every page of docs/ (the front door leads everywhere).
- docs/contributing.md's "Where a change goes": every repository path an entry names in
  backticks exists, and every code name it gives in backticks (a name with '_', '::' or a capital
  letter, as `sampler_combination_error`, `SamplerOptions::validate` or `Loader._open`: each part of it)
  appears as a word in a file the same entry names (a folder: any file under it), so an entry
  cannot send a reader to a file that moved or to a function that was renamed.

Usage: check_links.py REPO_ROOT   (exit 1 listing every fault)
"""
import pathlib
import re
import sys

LINK = re.compile(r"\]\(([^()\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"^[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-*]+)+/?$")
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*((::|\.)~?[A-Za-z_][A-Za-z0-9_]*)*(\(\))?$")
SOURCE_SUFFIXES = {".cpp", ".hpp", ".cu", ".cuh", ".py", ".sh", ".txt", ".cmake", ".md", ".toml"}


def prose(text):
    """The lines of `text` outside fenced code blocks (others blanked, so line numbers hold)."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return out


def anchors(path):
    """GitHub's anchors of the headings of the Markdown file `path`."""
    seen, result = {}, set()
    for line in prose(path.read_text(encoding="utf-8")):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))  # a link's text only
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        result.add(slug if n == 0 else f"{slug}-{n}")
    return result


def check_links(root, pages):
    faults = []
    for page in pages:
        for number, line in enumerate(prose(page.read_text(encoding="utf-8")), 1):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                    continue
                file_part, _, anchor = target.partition("#")
                dest = (page.parent / file_part).resolve() if file_part else page
                where = f"{page.relative_to(root)}:{number}: link '{target}'"
                if not dest.exists():
                    shown = dest.relative_to(root) if dest.is_relative_to(root) else dest
                    faults.append(f"{where}: no file {shown}")
                elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    faults.append(f"{where}: no heading with anchor '#{anchor}' in "
                                  f"{dest.relative_to(root)}")
    return faults


def check_front_door(root):
    readme = root / "README.md"
    linked = set()
    for line in prose(readme.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            linked.add((readme.parent / target.partition("#")[0]).resolve())
    return [f"README.md: no link to {p.relative_to(root)}"
            for p in sorted((root / "docs").glob("*.md")) if p.resolve() not in linked]


def section(text, heading):
    """The lines of the `## heading` section of `text` (fenced blocks blanked)."""
    lines, out, on = prose(text), [], False
    for line in lines:
        if line.startswith("## "):
            on = line[3:].strip() == heading
            continue
        if on:
            out.append(line)
    return out


def entries(lines):
    """The list entries of `lines`: each '- ' item with its indented continuation lines joined."""
    items, current = [], None
    for line in lines:
        if line.startswith("- "):
            current = [line[2:]]
            items.append(current)
        elif current is not None and line.startswith("  ") and line.strip():
            current.append(line.strip())
        else:
            current = None
    return [" ".join(item) for item in items]


def files_under(path):
    if path.is_dir():
        return [p for p in path.rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES]
    return [path]


def check_where_a_change_goes(root):
    page = root / "docs" / "contributing.md"
    heading = "Where a change goes"
    lines = section(page.read_text(encoding="utf-8"), heading)
    items = entries(lines)
    if not items:
        return [f"docs/contributing.md: no entries under '## {heading}'"]
    faults, paths_seen, names_seen = [], 0, 0
    for item in items:
        title = re.match(r"\*\*(.+?)\*\*", item)
        label = f"docs/contributing.md, '{title.group(1) if title else item[:40]}'"
        paths, names = [], []
        for token in CODE_SPAN.findall(item):
            token = token.strip()
            if PATH.match(token) or (re.match(r"^[\w.\-]+$", token) and
                                     pathlib.PurePath(token).suffix in SOURCE_SUFFIXES):
                paths.append(token)
            elif NAME.match(token) and ("_" in token or "::" in token or
                                        re.search(r"[A-Z]", token)):
                names.append(token)
        files = []
        for token in paths:
            matches = sorted(root.glob(token.rstrip("/"))) if "*" in token else [root / token]
            if not matches or not all(m.exists() for m in matches):
                faults.append(f"{label}: `{token}` does not exist")
                continue
            paths_seen += 1
            for m in matches:
                files += files_under(m)
        texts = {}
        for name in names:
            # `f`: the word in a file. A qualified `A::f` (or Python's `A.f`): `A::f` as written
            # (an out-of-line definition), or `A` and `f` in one header or Python file (a
            # declaration inside `struct A`, a method of `class A`).
            plain = name.removesuffix("()")
            words = [w.lstrip("~") for w in re.split(r"::|\.", plain)]
            exact = re.compile(rf"\b{re.escape(plain)}\b")
            patterns = [re.compile(rf"\b{re.escape(w)}\b") for w in words]
            found = False
            for f in files:
                if f not in texts:
                    texts[f] = f.read_text(encoding="utf-8", errors="replace")
                text = texts[f]
                if len(words) == 1 or "::" in plain:
                    found = bool(exact.search(text))
                if not found and len(words) > 1 and f.suffix in {".hpp", ".cuh", ".py"}:
                    found = all(p.search(text) for p in patterns)
                if found:
                    break
            if found:
                names_seen += 1
            else:
                faults.append(f"{label}: `{name}` is in none of the files the entry names "
                              f"({', '.join(dict.fromkeys(paths)) or 'none'})")
    if not faults:
        print(f"ok: '{heading}': {len(items)} entries, {paths_seen} paths and {names_seen} "
              "names found in the code")
    return faults


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    root = pathlib.Path(sys.argv[1]).resolve()
    pages = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    faults = check_links(root, pages) + check_front_door(root) + check_where_a_change_goes(root)
    for f in faults:
        print(f"FAIL: {f}")
    if faults:
        return 1
    links = sum(len(LINK.findall(line)) for p in pages
                for line in prose(p.read_text(encoding="utf-8")))
    print(f"ok: {links} links of {len(pages)} pages resolve; README.md links every docs/ page")
    return 0


if __name__ == "__main__":
    sys.exit(main())
