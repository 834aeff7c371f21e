"""DGL 2.1 CPU heterograph sampling: the counterpart of `dsp bench sample` on a heterogeneous graph.

Reads a dsp heterogeneous dataset directory (`dsp generate hetero`, `dsp convert --from
ogb-hetero`) with numpy: every relation's in-neighbour CSR (relations/<src>___<name>___<dst>/
indptr.npy over the dst type's ids, indices.npy the src type's ids) becomes the (src, dst) lists
of one canonical edge type of `dgl.heterograph`. Seeds are the target type's train_idx, shuffled
(rng --seed) and taken B at a time, wrapping around, as dsp's bench takes its shuffled training
seeds (the same distribution of seed sets, not the same sets). Fanouts are dsp's --fanouts text,
from the seeds out: "15,10" (every relation takes 15, then 10) or per relation
"writes:10,cites:15;writes:5,cites:10" (layers split by ';', a relation named by its name or its
key src___name___dst, '*' for the relations not named, the others none), resolved as dsp resolves
them and handed to DGL as one {canonical etype: count} dict per layer (DGL's order: input layer
first). Configurations, each without replacement:
  default   dgl.dataloading.NeighborSampler(...).sample_blocks: with one thread DGL 2.1 takes its
            unfused path (sample_neighbors, then to_block per layer)
  fused     sample_neighbors_fused per layer with one mapping (DGL's fused CPU path, which
            NeighborSampler takes only with more than one thread)
One warm-up batch, then --batches timed ones: sampled edges per batch (all relations, all layers),
per layer from the seeds out, and per relation; ms per batch; sampled edges per second.

Usage (OMP_NUM_THREADS must equal T):
  OMP_NUM_THREADS=T DGLBACKEND=pytorch python dgl_hetero.py DATA T OUT.json [--fanouts 15,10]
      [--batch 1024] [--batches 40] [--seed 1] [--configs default,fused]
"""
import argparse, json, os, time

ap = argparse.ArgumentParser()
ap.add_argument("data")
ap.add_argument("threads", type=int)
ap.add_argument("out")
ap.add_argument("--fanouts", default="15,10", help="from the seeds out, as dsp --fanouts")
ap.add_argument("--batch", type=int, default=1024)
ap.add_argument("--batches", type=int, default=40)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--configs", default="default,fused")
args = ap.parse_args()
T = args.threads
assert os.environ.get("OMP_NUM_THREADS") == str(T), "set OMP_NUM_THREADS=T"

import numpy as np
import torch
import dgl

torch.set_num_threads(T)
dgl.utils.set_num_threads(T)
torch.manual_seed(args.seed)
dgl.seed(args.seed)

d = args.data
schema = json.load(open(f"{d}/dataset.json"))["hetero"]
types = {t["name"]: t["count"] for t in schema["node_types"]}
rels = [(r["src"], r["name"], r["dst"]) for r in schema["relations"]]
target = schema["target_type"]


def resolve_fanouts(text):
    """[layer from the seeds out] -> {canonical etype: count}, as dsp's resolve_relation_fanouts."""
    if ":" not in text:
        return [{r: int(f) for r in rels} for f in text.split(",")]
    layers = []
    for spec in text.split(";"):
        given, rest = {}, 0
        for item in filter(None, (s.strip() for s in spec.split(","))):
            name, count = item.rsplit(":", 1)
            if name == "*":
                rest = int(count)
                continue
            match = [r for r in rels if "___".join(r) == name] or [r for r in rels if r[1] == name]
            assert len(match) == 1, f"--fanouts: relation '{name}' names {len(match)} relations"
            given[match[0]] = int(count)
        layers.append({r: given.get(r, rest) for r in rels})
    return layers


data = {}
for src, name, dst in rels:
    rd = f"{d}/relations/{src}___{name}___{dst}"
    indptr = np.load(f"{rd}/indptr.npy").astype(np.int64)
    indices = np.load(f"{rd}/indices.npy").astype(np.int64)
    dst_ids = np.repeat(np.arange(indptr.size - 1, dtype=np.int64), np.diff(indptr))
    data[(src, name, dst)] = (torch.from_numpy(indices), torch.from_numpy(dst_ids))
g = dgl.heterograph(data, num_nodes_dict=types)
g = g.formats("csc")  # in-edge sampling reads the in-neighbour CSR
g.create_formats_()
train_idx = np.load(f"{d}/train_idx.npy").astype(np.int64)
fanouts = resolve_fanouts(args.fanouts)
dgl_fanouts = list(reversed(fanouts))  # DGL: input layer first
print(f"torch {torch.__version__} dgl {dgl.__version__} threads torch={torch.get_num_threads()} "
      f"dgl={dgl.utils.get_num_threads()} nodes {g.num_nodes()} edges {g.num_edges()} "
      f"({len(rels)} relations) train {train_idx.size} fanouts {args.fanouts}", flush=True)

rng = np.random.default_rng(args.seed)
order = rng.permutation(train_idx)


def batch_seeds(b):
    B = min(args.batch, order.size)
    idx = (np.arange(B) + b * B) % order.size
    return {target: torch.from_numpy(order[idx])}


sampler = dgl.dataloading.NeighborSampler(dgl_fanouts, replace=False)
mapping = {}


def default(seeds):
    return sampler.sample_blocks(g, seeds)[2]


def fused(seeds):
    blocks, s = [], seeds
    for fanout in fanouts:
        block = g.sample_neighbors_fused(s, fanout, edge_dir="in", replace=False, mapping=mapping)
        s = {t: block.srcnodes[t].data[dgl.NID] for t in block.srctypes}
        blocks.insert(0, block)
    return blocks


def measure(fn):
    fn(batch_seeds(0))  # warm-up
    edges, per_layer, per_rel = 0, [0] * len(fanouts), {"___".join(r): 0 for r in rels}
    t0 = time.perf_counter()
    for b in range(1, args.batches + 1):
        blocks = fn(batch_seeds(b))
        edges += sum(blk.num_edges() for blk in blocks)
    dt = time.perf_counter() - t0
    # the counts, apart from the timed loop (per-relation counting costs a little)
    for b in range(1, args.batches + 1):
        blocks = fn(batch_seeds(b))
        for l, blk in enumerate(reversed(blocks)):  # from the seeds out
            per_layer[l] += blk.num_edges()
            for r in rels:
                per_rel["___".join(r)] += blk.num_edges(r)
    nb = args.batches
    return dict(sampled_edges_per_s=edges / dt, ms_per_batch=dt / nb * 1e3,
                sampled_edges_per_batch=edges / nb,
                sampled_edges_per_batch_per_layer=[e / nb for e in per_layer],
                sampled_edges_per_batch_per_relation={k: v / nb for k, v in per_rel.items()})


out = {"dgl": dgl.__version__, "threads": T, "data": d, "fanouts": args.fanouts,
       "batch_size": args.batch, "batches": args.batches, "seed": args.seed, "configs": {}}
for name in args.configs.split(","):
    r = measure(dict(default=default, fused=fused)[name])
    out["configs"][name] = r
    print(f"{name:8s} {r['sampled_edges_per_s'] / 1e6:.2f} M sampled edges/s, "
          f"{r['ms_per_batch']:.2f} ms/batch, {r['sampled_edges_per_batch']:.0f} edges/batch, "
          f"per layer {[round(e) for e in r['sampled_edges_per_batch_per_layer']]}", flush=True)
json.dump(out, open(args.out, "w"), indent=1)
