#!/usr/bin/env python3
"""Packs a directory into one fuzz input of the directory targets (fuzz/fuzz_dir.hpp):
entries NAME '\\n' LENGTH (uint32, little-endian) DATA, files in name order. JSON files are
re-written compactly without their top-level "extra" (provenance the readers do not check) so
that the seeds stay small.

Usage: fuzz/pack_dir.py DIR OUT [--skip NAME ...]   (NAME: a file name to leave out)
"""
import json
import os
import struct
import sys


def pack(root, skip):
    out = bytearray()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if name in skip:
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            with open(path, "rb") as f:
                data = f.read()
            if name.endswith(".json"):
                obj = json.loads(data)
                if isinstance(obj, dict):
                    obj.pop("extra", None)
                data = json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()
            out += rel.encode() + b"\n" + struct.pack("<I", len(data)) + data
    return bytes(out)


def main(argv):
    if len(argv) < 3 or (len(argv) > 3 and argv[3] != "--skip"):
        sys.exit(__doc__)
    with open(argv[2], "wb") as f:
        f.write(pack(argv[1], set(argv[4:])))


if __name__ == "__main__":
    main(sys.argv)
