#!/usr/bin/env python3
"""Prints the N slowest tests of a run from the JUnit XML files in a folder.

scripts/test.sh writes them into build/test-reports/: ctest.xml (ctest --output-junit: one entry a
ctest test), <ctest test>.gtest.xml (a gtest binary's cases, GTEST_OUTPUT set by
tests/CMakeLists.txt), ctest-<tree>.xml (another build tree's ctest: ctest-asan.xml) and
pytest*.xml. A ctest test of build/ whose cases have their own file is listed by its cases, not
as a whole, so that a shard of many fast cases never hides a slow one.
Usage: slowest.py DIR [N=20]
"""
import pathlib
import sys
import xml.etree.ElementTree as ET


def cases(path):
    """(name, seconds) of every test case in one JUnit file."""
    for case in ET.parse(path).getroot().iter("testcase"):
        name, cls = case.get("name", "?"), case.get("classname", "")
        full = name if not cls or name.startswith(cls) else f"{cls}.{name}"
        yield full, float(case.get("time", "0") or 0)


def main():
    folder = pathlib.Path(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    rows, expanded = [], set()
    for path in sorted(folder.glob("*.gtest.xml")):
        entry = path.name[: -len(".gtest.xml")]
        try:
            rows += [(t, f"{entry}: {name}") for name, t in cases(path)]
            expanded.add(entry)
        except ET.ParseError:  # a binary that crashed leaves a partial file: its entry stays whole
            pass
    for path in sorted(folder.glob("*.xml")):
        if path.name.endswith(".gtest.xml"):
            continue
        ctest = path.name.startswith("ctest")
        # ctest.xml: build/'s tests; ctest-<build>.xml: another tree's (ctest-asan.xml)
        prefix = f"{path.stem[len('ctest-'):]}: " if ctest and path.stem != "ctest" else ""
        try:
            for name, t in cases(path):
                if ctest and not prefix and name in expanded:
                    continue
                rows.append((t, prefix + name if ctest else f"pytest: {name}"))
        except ET.ParseError as e:
            print(f"slowest.py: {path}: {e}", file=sys.stderr)
    if not rows:
        print(f"slowest tests: no test reports in {folder}")
        return
    rows.sort(reverse=True)
    print(f"the {min(count, len(rows))} slowest of {len(rows)} tests:")
    for t, name in rows[:count]:
        print(f"  {t:8.1f} s  {name}")


if __name__ == "__main__":
    main()
