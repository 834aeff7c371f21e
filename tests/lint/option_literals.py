#!/usr/bin/env python3
"""Choices typed once: no option value compared as a string literal outside its table.

A choice is an enum with its names table (src/core/choice.hpp); code compares enum values and only
the table spells the names. This check finds every comparison of a string with a literal
(`x == "lit"`, `"lit" != x`) in src/ and tools/ and fails on each one that ALLOWED below does not
list with the reason it is not an option value outside a table (a file format's field, an
environment variable, a parser inside an options-table entry, a registry of names). An ALLOWED
entry that matches nothing any more fails too, so the list cannot go stale.

Usage: option_literals.py REPO_ROOT   (exit 1 listing every fault)
"""
import collections
import pathlib
import re
import sys

# A comparison with a string literal on either side.
COMPARISON = re.compile(r'[=!]=\s*"((?:[^"\\]|\\.)*)"|"((?:[^"\\]|\\.)*)"\s*[=!]=')
SUFFIXES = {".cpp", ".hpp", ".cu", ".cuh"}

NPY = "the .npy header's keys and dtype codes (a file format)"
ENV = "an environment variable's value"
ENTRY = "a parser inside its options-table entry"
REGISTRY = "the communicator registry: its names are the table (registered at run time)"
ALLOWED = {
    # (file, literal): why it is not an option value compared outside its table
    ("src/graph/npy.cpp", "descr"): NPY,
    ("src/graph/npy.cpp", "fortran_order"): NPY,
    ("src/graph/npy.cpp", "shape"): NPY,
    ("src/graph/npy.cpp", "u1"): NPY,
    ("src/graph/npy.cpp", "i1"): NPY,
    ("src/graph/npy.cpp", "<i4"): NPY,
    ("src/graph/npy.cpp", "<i8"): NPY,
    ("src/graph/npy.cpp", "<f2"): NPY,
    ("src/graph/npy.cpp", "<f4"): NPY,
    ("src/graph/npy.cpp", "<f8"): NPY,
    ("src/graph/npy.cpp", "|u1"): NPY,
    ("src/graph/npy.cpp", "<u1"): NPY,
    ("src/graph/npy.cpp", ">u1"): NPY,
    ("src/graph/npy.cpp", "|i1"): NPY,
    ("src/graph/npy.cpp", "<i1"): NPY,
    ("src/graph/npy.cpp", ">i1"): NPY,
    ("src/graph/npy.cpp", "<u2"): NPY,
    ("src/graph/import.cpp", ".npy"): "a file's extension (dsp convert --from edgelist)",
    ("src/graph/import.cpp", "raw"): "OGB's raw/ folder name (a dataset layout)",
    ("src/graph/import_hetero.cpp", "raw"): "OGB's raw/ folder name (a dataset layout)",
    ("src/graph/commands.cpp", "--classes"): "finds an option of the table by its flag",
    ("src/layout/partition/partition.cpp", "float32"):
        "partition.json's feature_conversion.source_dtype (a file format)",
    ("src/layout/partition/partition.cpp", "float16"):
        "partition.json's feature_conversion.source_dtype (a file format)",
    ("src/layout/store/cache_sizing.cpp", "MemAvailable:"): "a /proc/meminfo key",
    ("src/core/memory.cpp", "max"): "a cgroup file's value (memory.max)",
    ("src/core/huge_pages.cpp", "0"): ENV,
    ("src/core/huge_pages.cpp", "1"): ENV,
    ("src/pipeline/cores.cpp", "1"): ENV,
    ("src/bench/projection.cpp", "volumes"): "a bench JSON file's \"bench\" field",
    ("src/bench/projection.cpp", "pipeline"): "a bench JSON file's \"bench\" field",
    ("src/python/bindings.cpp", "partition"): "the command whose options table Python asks for",
    ("src/python/bindings.cpp", "convert"): "the command whose options table Python asks for",
    ("src/python/bindings.cpp", "generate rmat"): "the command whose options table Python asks for",
    ("src/python/bindings.cpp", "generate community"):
        "the command whose options table Python asks for",
    ("src/python/bindings.cpp", "link"): "the command whose options table Python asks for",
    ("src/python/bindings.cpp", "loader"): "the command whose options table Python asks for",
    ("src/csp/sampler_options.cpp", "*"): ENTRY + " (--fanouts: * is every neighbour)",
    ("src/csp/sampler_hetero.cpp", "*"): "a typed fanout's relation wildcard (--fanouts rel:*)",
    ("src/train/job_options.cpp", "auto"): ENTRY + " (the integers that take auto, --resume)",
    ("src/train/job_options.cpp", "on"): ENTRY + " (--ccc on|off)",
    ("src/train/job_options.cpp", "off"): ENTRY + " (--ccc on|off)",
    ("src/train/job_config.cpp", "resume"):
        "an option's key: --resume is not listed among the options --resume lets change",
    ("src/train/predict.cpp", "predictions.npy"): "an output file's name (dsp predict)",
    ("src/train/checkpoint_header.cpp", "optimizer"): "a checkpoint entry's name (a file format)",
    ("src/ccc/coordinator.cpp", "auto"): REGISTRY,
    ("src/ccc/coordinator.cpp", "nccl"): REGISTRY,
    ("src/ccc/registry.cpp", "auto"): REGISTRY,
    ("src/ccc/registry.cpp", "nccl"): REGISTRY,
    ("src/ccc/registry.cpp", "self"): REGISTRY,
    ("src/ccc/registry.cpp", "mpi"): REGISTRY,
    ("src/core/options.hpp", "true"): ENTRY + " (a bool's text)",
    ("src/core/options.hpp", "false"): ENTRY + " (a bool's text)",
    ("src/core/device.cpp", "cpu"): ENTRY + " (Device::parse, --device)",
    ("src/core/device.cpp", "cuda"): ENTRY + " (Device::parse, --device)",
    ("tools/usage.cpp", "--"): "the end of options on a command line",
}


def code(line):
    """`line` without a trailing // comment (outside string literals)."""
    quoted = False
    for i, ch in enumerate(line):
        if ch == '"' and (i == 0 or line[i - 1] != "\\"):
            quoted = not quoted
        elif not quoted and line.startswith("//", i):
            return line[:i]
    return line


def main(root):
    root = pathlib.Path(root)
    found = collections.defaultdict(list)
    for top in ("src", "tools"):
        for path in sorted((root / top).rglob("*")):
            if path.suffix not in SUFFIXES:
                continue
            rel = path.relative_to(root).as_posix()
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                for m in COMPARISON.finditer(code(line)):
                    literal = m.group(1) if m.group(1) is not None else m.group(2)
                    found[(rel, literal)].append(f"{rel}:{number}: {line.strip()}")
    faults = []
    for key, places in sorted(found.items()):
        if key not in ALLOWED:
            faults += [f"{p}\n  compares a string with \"{key[1]}\": give the choice an enum and "
                       f"a names table (src/core/choice.hpp), or list it in tests/lint/option_literals.py with the "
                       f"reason it is not an option value" for p in places]
    for key in sorted(set(ALLOWED) - set(found)):
        faults.append(f"tests/lint/option_literals.py: ALLOWED lists {key[0]} comparing with \"{key[1]}\", which "
                      "no longer occurs: remove the entry")
    for f in faults:
        print(f)
    print(f"option_literals: {sum(map(len, found.values()))} comparisons with literals in "
          f"{len(found)} (file, literal) pairs, {len(faults)} fault(s)")
    return 1 if faults else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
