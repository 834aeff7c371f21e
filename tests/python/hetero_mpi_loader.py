"""Run under mpirun by test_hetero_loader.py: one epoch of dsp.Loader on a heterogeneous
partition per rank, x_dict and labels checked against the partition's files, seeds summarised."""
import json
import sys

import numpy as np

import dsp

part_dir, out_dir = sys.argv[1], sys.argv[2]
loader = dsp.Loader(part_dir, fanouts="writes:3,cites:2,*:1;*:2", batch_size=16, seed=3)
meta = loader.meta
schema = loader.schema
T = len(schema.node_types)
bounds = np.asarray(meta["hetero"]["type_bounds"])
sizes = np.diff(bounds).reshape(meta["parts"], T)
before = (np.cumsum(sizes, axis=0) - sizes).reshape(-1)
feats = {t: np.load(f"{part_dir}/features_{t}.npy") for t, d in schema.feature_dims.items() if d}
labels = np.load(f"{part_dir}/labels.npy")
seeds, steps = [], 0
for b in loader.iter_batches():
    ids = b.blocks[0].src_ids.numpy()
    slot = np.searchsorted(bounds, ids, side="right") - 1
    np.testing.assert_array_equal(b.blocks[0].src_types.numpy(), slot % T)
    assert set(b.x_dict) == set(feats)
    for name, x in b.x_dict.items():
        mine = slot % T == schema.node_types.index(name)
        rows = before[slot[mine]] + ids[mine] - bounds[slot[mine]]
        np.testing.assert_array_equal(x.numpy(), feats[name][rows])
    np.testing.assert_array_equal(b.y.numpy(), labels[b.seeds.numpy()])
    seeds += b.seeds.tolist()
    steps += 1
with open(f"{out_dir}/rank{loader.rank}.json", "w") as f:
    json.dump({"rank": loader.rank, "steps": loader.steps, "yielded": steps, "seeds": seeds}, f)
