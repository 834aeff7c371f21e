"""Run under mpirun by test_mpi.py: one epoch of dsp.Loader per rank, checked and summarised."""
import json
import sys

import numpy as np

import dsp

part_dir, out_dir = sys.argv[1], sys.argv[2]
loader = dsp.Loader(part_dir, fanouts=[10, 5], batch_size=16, seed=3)
feats = np.load(f"{part_dir}/features.npy")
labels = np.load(f"{part_dir}/labels.npy")
seeds, steps = [], 0
for b in loader.iter_batches():
    np.testing.assert_array_equal(b.x.numpy(), feats[b.blocks[0].src_ids.numpy()])
    np.testing.assert_array_equal(b.y.numpy(), labels[b.seeds.numpy()])
    seeds += b.seeds.tolist()
    steps += 1
# A second epoch left early on rank 0 only: the loader finishes it in the background, so rank 1
# (which runs it to the end) is still served.
for i, _ in enumerate(loader):
    if loader.rank == 0 and i == 0:
        break
with open(f"{out_dir}/rank{loader.rank}.json", "w") as f:
    json.dump({"rank": loader.rank, "size": loader.size, "steps": loader.steps,
               "yielded": steps, "seeds": seeds, "local": loader.local_seeds.tolist()}, f)
