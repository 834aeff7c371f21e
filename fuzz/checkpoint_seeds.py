#!/usr/bin/env python3
"""Writes fuzz_checkpoint's seeds from a checkpoint dsp train wrote: the archive's tensors as raw
bytes, packed as fuzz/fuzz_dir.hpp packs files (NAME '\\n' LENGTH (uint32, little-endian) DATA),
named by their keys in the archive (header, header_checksum, p<i>, feature_mean, ..., optimizer).
Reads the archive with PyTorch (torch.jit.load, as dsp.load_model does).

Writes OUT/NAME (the checkpoint as it is) and OUT/NAME-v1 (the same as version 1 wrote it: no
header_checksum, no checksums in the header).

Usage: fuzz/checkpoint_seeds.py CHECKPOINT OUT_DIR NAME
"""
import json
import os
import struct
import sys

import torch


def entry(name, data):
    return name.encode() + b"\n" + struct.pack("<I", len(data)) + data


def main(argv):
    if len(argv) != 4:
        sys.exit(__doc__)
    archive = torch.jit.load(argv[1], map_location="cpu")
    # LibTorch's OutputArchive registers each tensor as a parameter of the archive's module.
    tensors = {name: t.detach().contiguous().numpy().tobytes()
               for name, t in archive.named_parameters()}
    if "header" not in tensors:
        sys.exit(f"{argv[1]}: no header tensor (not a dsp checkpoint)")
    os.makedirs(argv[2], exist_ok=True)
    with open(os.path.join(argv[2], argv[3]), "wb") as f:
        f.write(b"".join(entry(k, v) for k, v in sorted(tensors.items())))
    header = json.loads(tensors["header"])
    header.pop("checksums", None)
    header["version"] = 1
    v1 = dict(tensors, header=json.dumps(header, separators=(",", ":"), sort_keys=True).encode())
    v1.pop("header_checksum", None)
    with open(os.path.join(argv[2], argv[3] + "-v1"), "wb") as f:
        f.write(b"".join(entry(k, v) for k, v in sorted(v1.items())))


if __name__ == "__main__":
    main(sys.argv)
