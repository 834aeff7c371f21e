"""A dsp dataset directory that shares a graph's topology, features and labels (symlinks) with
fewer training, validation and test nodes: epochs of a chosen number of steps for both systems.

Usage: python subset.py SRC DST NUM_TRAIN NUM_EVAL
The nodes are the first NUM_TRAIN (NUM_EVAL) of a seeded permutation of SRC's splits.
"""
import json, os, sys

import numpy as np

src, dst, n_train, n_eval = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
meta = json.load(open(os.path.join(src, "dataset.json")))
os.makedirs(dst, exist_ok=True)
rng = np.random.default_rng(0)
for name in os.listdir(src):
    if name.endswith("_idx.npy") or name == "dataset.json":
        continue
    link = os.path.join(dst, name)
    if not os.path.lexists(link):
        os.symlink(os.path.abspath(os.path.join(src, name)), link)
for split, n in (("train", n_train), ("valid", n_eval), ("test", n_eval)):
    ids = np.load(os.path.join(src, f"{split}_idx.npy"))
    assert ids.size >= n, f"{src} has only {ids.size} {split} nodes, {n} requested"
    ids = np.sort(rng.permutation(ids)[:n])
    np.save(os.path.join(dst, f"{split}_idx.npy"), ids)
    meta[f"num_{split}"] = int(n)
meta["name"] = f"{meta['name']}-{n_train}"
# dataset.json last: its presence marks a complete directory.
with open(os.path.join(dst, "dataset.json"), "w") as f:
    json.dump(meta, f, indent=2)
