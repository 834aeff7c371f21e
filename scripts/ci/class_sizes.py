"""Member functions per class in src/ (issue: no class over ~20), largest first.

Counts, in every class or struct of src/**/*.hpp and *.cuh, the declarations at the class's own
indentation (two spaces) that open a parameter list: constructors, destructors, operators and
methods, public or private, inline or not (nested classes' members are theirs, not counted;
deleted functions, such as a class's refused copies, are not functions and are not counted; nor
are data members whose initialiser calls something, `Buffer b_ = ex_.buffer();`).
Prints those over --max (default 20); exit status 1 when any is, so the report can become a gate
check once none is.

  python3 scripts/ci/class_sizes.py [--max 20] [--all]
"""
import argparse
import pathlib
import re
import sys

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--max", type=int, default=20)
ap.add_argument("--all", action="store_true", help="every class, not only those over --max")
ap.add_argument("--root", default=".")
args = ap.parse_args()

CLASS = re.compile(r"^(?:class|struct) (\w+)[^;{]*\{\n(.*?)^\};", re.M | re.S)
# A line at the class's indentation opening a parameter list, not deleted, with no " = " before
# its first "(" (that is a data member's initialiser; operator= has no space before its "=").
METHOD = re.compile(r"^  [A-Za-z~][^(\n]*\((?!.*= delete;)", re.M)


def methods(body):
    return [m for m in METHOD.findall(body) if " = " not in m]


rows = []
src = pathlib.Path(args.root) / "src"
for f in sorted(list(src.rglob("*.hpp")) + list(src.rglob("*.cuh"))):
    for m in CLASS.finditer(f.read_text()):
        rows.append((len(methods(m.group(2))), m.group(1), f.relative_to(args.root)))
rows.sort(key=lambda r: (-r[0], r[1]))
over = [r for r in rows if r[0] > args.max]
for n, name, path in rows if args.all else over:
    print(f"{n:4d}  {name}  {path}")
print(f"{len(over)} of {len(rows)} classes over {args.max} member functions", file=sys.stderr)
sys.exit(1 if over else 0)
