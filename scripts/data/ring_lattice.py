#!/usr/bin/env python3
"""Writes a dataset directory holding a ring lattice: N nodes, each joined to its K nearest on
either side, randomly relabelled, undirected (2 K N entries, int32 indices, int64 row pointers),
no features, 10% training seeds. With N = 100M and K = 11 it has 2.2e9 entries, past METIS's
2^31 - 1: the graph docs/benchmarks.md partitions with --method bfs-blocks. Streams the
entries to disk in chunks (memory: 16 bytes per node).

Usage: ring_lattice.py OUT [N] [K]   (numpy; Debian's /usr/bin/python3 has it)
"""
import json
import os
import sys

import numpy as np
from numpy.lib.format import open_memmap


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000_000
    k = int(sys.argv[3]) if len(sys.argv) > 3 else 11
    assert n < 2**31 and 2 * k < n
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    perm = rng.permutation(n).astype(np.int64)  # ring position i holds node perm[i]
    inv = np.empty(n, np.int64)
    inv[perm] = np.arange(n, dtype=np.int64)
    ptr = open_memmap(f"{out}/indptr.npy", mode="w+", dtype=np.int64, shape=(n + 1,))
    ptr[:] = np.arange(n + 1, dtype=np.int64) * (2 * k)
    del ptr
    idx = open_memmap(f"{out}/indices.npy", mode="w+", dtype=np.int32, shape=(2 * k * n,))
    offs = np.concatenate([np.arange(-k, 0), np.arange(1, k + 1)]).astype(np.int64)
    chunk = 2_000_000
    for b in range(0, n, chunk):
        v = np.arange(b, min(n, b + chunk), dtype=np.int64)
        rows = perm[(inv[v][:, None] + offs[None, :]) % n]
        rows.sort(axis=1)
        idx[b * 2 * k:(b + len(v)) * 2 * k] = rows.reshape(-1).astype(np.int32)
    del idx
    train = np.sort(rng.choice(n, n // 10, replace=False)).astype(np.int64)
    np.save(f"{out}/train_idx.npy", train)
    meta = {"directed": False, "extra": {"generator": "ring lattice, relabelled",
                                         "neighbours_per_side": k},
            "feature_dim": 0, "feature_dtype": "float32", "format_version": 1,
            "has_weights": False, "index_dtype": "int32", "name": f"ring{n}",
            "num_classes": 0, "num_edges": 2 * k * n, "num_nodes": n, "num_test": 0,
            "num_train": len(train), "num_valid": 0}
    with open(f"{out}/dataset.json", "w") as f:
        json.dump(meta, f, indent=2)
    print(f"wrote {out}: {n} nodes, {2 * k * n} entries")


if __name__ == "__main__":
    main()
