#!/usr/bin/env python3
"""Lists every test of the full tier by name, and checks that none of an earlier list was lost.

A name is a ctest test's, a gtest case's (Suite.Case, Prefix/Suite.Case/0) for the ctest tests
that run a gtest binary in shards (tests/CMakeLists.txt, dsp_gtest_shards: one entry for many
cases, so the cases are listed by the binary under the entry's own filter), or a pytest node id
(tests/python/...). Before the tiers, ctest had one entry per gtest case, named Suite.Case: the
two lists compare name for name.
Usage: test_names.py BUILD_DIR                  print the names, sorted
       test_names.py BUILD_DIR --check BEFORE   fail naming every name of BEFORE not found now
"""
import json
import os
import pathlib
import re
import subprocess
import sys

SHARD = re.compile(r"_[0-9]+of[0-9]+$")
# A case named by the suite's own name generator keeps gtest's comment in its ctest name, and the
# comment may print a pointer's bytes ("16-byte object <A3-64 ...>"), which differ from run to run:
# names are compared without it.
COMMENT = re.compile(r" +# GetParam\(\) = .*$")


def gtest_cases(command):
    """The names gtest_discover_tests gives the cases a gtest binary runs with these arguments
    (its filter included): CMake's GoogleTestAddTests.cmake rules, so that a case keeps the name
    ctest gave it when every case was a ctest test (Suite.Case/"value" for a parameter gtest
    prints, Suite.Case<Type> for a typed suite)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GTEST_")}
    out = subprocess.run(command + ["--gtest_list_tests"], capture_output=True, text=True,
                         check=True, env=env).stdout
    names, prefix, suffix = [], "", ""
    for line in out.splitlines():
        if not line.strip():
            continue
        if not line.startswith("  "):
            suite = re.sub(r"\.( *#.*)?$", "", line)
            if "#" in line:
                pretty_suite = re.sub(r"/.*", "", line)
                suffix = "<" + re.sub(r".*/[0-9]+[ .#]+TypeParam = (.*)", r"\1", line) + ">"
            else:
                pretty_suite, suffix = suite, ""
            prefix = re.sub(r"^DISABLED_", "", pretty_suite) + "."
        else:
            test = line.strip()
            if "#" in test:
                pretty = re.sub(r"/[0-9]+[ #]+GetParam\(\) = ", "/", test)
            else:
                pretty = re.sub(r" +#.*", "", test)
            names.append(prefix + re.sub(r"^DISABLED_", "", pretty) + suffix)
    return names


def ctest_names(build):
    info = json.loads(subprocess.run(["ctest", "--show-only=json-v1"], cwd=build,
                                     capture_output=True, text=True, check=True).stdout)
    names = set()
    for test in info["tests"]:
        if SHARD.search(test["name"]):
            names.update(gtest_cases(test["command"]))
        else:
            names.add(test["name"])
    return names


def pytest_names(build, repo):
    env = {**os.environ, "PYTHONPATH": str(build / "python")}
    python = os.environ.get("DSP_PYTHON", "/usr/bin/python3")
    out = subprocess.run([python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "tests/python"], cwd=repo, env=env, capture_output=True, text=True)
    names = {line.strip() for line in out.stdout.splitlines() if "::" in line}
    if out.returncode != 0 or not names:
        sys.exit(f"test_names.py: pytest could not collect tests/python:\n{out.stdout}{out.stderr}")
    return names


def main():
    build = pathlib.Path(sys.argv[1]).resolve()
    repo = pathlib.Path(__file__).resolve().parents[2]
    names = {COMMENT.sub("", n) for n in ctest_names(build) | pytest_names(build, repo)}
    if len(sys.argv) > 3 and sys.argv[2] == "--check":
        before = {COMMENT.sub("", n.rstrip("\n")) for n in open(sys.argv[3]) if n.strip()}
        lost = sorted(before - names)
        for n in lost:
            print(f"lost: {n}")
        print(f"test_names.py: {len(before)} names before, {len(names)} now, {len(lost)} lost")
        sys.exit(1 if lost else 0)
    print("\n".join(sorted(names)))


if __name__ == "__main__":
    main()
