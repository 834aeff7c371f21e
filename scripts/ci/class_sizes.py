"""Member functions per class in src/ (issue: no class over ~20), largest first.

Counts, in every class or struct of src/**/*.hpp and *.cuh, the declarations at the class's own
indentation (two spaces) that open a parameter list: constructors, destructors, operators and
methods, public or private, inline or not (nested classes' members are theirs, not counted;
deleted functions, such as a class's refused copies, are not functions and are not counted; nor
are data members whose initialiser calls something, `Buffer b_ = ex_.buffer();`).
Prints those over --max (default 20). A gate check (tests/CMakeLists.txt, lint_class_sizes):
exit status 1 when a class is over --max and not in CEILINGS, or over its ceiling there, or under
it (a ratchet: the ceiling comes down with the class). CEILINGS holds the
classes still over 20 and what they may not grow past: the executors' contract (core/host_exec.hpp:
its operations are the device path's whole vocabulary), Array's accessors, and the rest not yet
split.

  python3 scripts/ci/class_sizes.py [--max 20] [--all] [--root DIR]
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

CEILINGS = {
    "CudaExec": 27,
    "HostExec": 25,
    "RankRuntime": 23,
    "Array": 23,
    "MpiRuntime": 23,
}

CLASS = re.compile(r"^(?:class|struct) (\w+(?:::\w+)*)[^;{]*\{\n(.*?)^\};", re.M | re.S)
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
    ceiling = CEILINGS.get(name)
    note = "" if ceiling is None else f"  (ceiling {ceiling})"
    print(f"{n:4d}  {name}  {path}{note}")
bad = [(n, name) for n, name, _ in over if n > CEILINGS.get(name, args.max)]
sizes = {}
for n, name, _ in rows:  # a name defined twice (a template's specialisations): the largest
    sizes[name] = max(n, sizes.get(name, 0))
shrunk = [name for name, ceiling in CEILINGS.items() if sizes.get(name, 0) < ceiling]
for name, ceiling in sorted(CEILINGS.items()):
    if name in shrunk:
        print(f"{name}: {sizes.get(name, 0)} member functions, under its ceiling {ceiling}: "
              "lower the ceiling in scripts/ci/class_sizes.py", file=sys.stderr)
for n, name in bad:
    print(f"{name}: {n} member functions, over {CEILINGS.get(name, args.max)}: split it by "
          "concept (docs/contributing.md)", file=sys.stderr)
print(f"{len(over)} of {len(rows)} classes over {args.max} member functions, "
      f"{len(bad)} over their limit", file=sys.stderr)
sys.exit(1 if bad or shrunk else 0)
