"""DGL 2.1 CPU node sampling: distinct input nodes per batch, NeighborSampler against LaborSampler.

The counterpart of `dsp bench sample --sampler neighbor|labor` on a dsp dataset directory (its
in-neighbour CSR read as DGL's CSC, int64): batches of B seeds taken in order from a shuffled
train_idx (rng --seed, wrapping around, as dsp's bench takes them from its own shuffle: the same
distribution of seed sets, not the same sets), fanouts listed from the seeds out (dsp's order;
DGL's lists start at the input layer, so they are reversed here). For every configuration:
  neighbor        dgl.dataloading.NeighborSampler (fused CPU path, replace=False)
  labor0          LaborSampler(importance_sampling=0)
  labor0_ld       LaborSampler(importance_sampling=0, layer_dependency=True)
  labor1          LaborSampler(importance_sampling=1)
  labor1_ld       LaborSampler(importance_sampling=1, layer_dependency=True)
one warm-up batch, then --batches timed ones: per layer (from the seeds out) the block's source
nodes (DGL's to_block puts the destinations first, as dsp's blocks do) and edges, their means and
the standard error of the input layer's mean, and ms per batch (sample_blocks: sampling and
to_block, as dsp's ms/batch holds sampling and relabelling). Also the in-degrees of all layers'
destinations summed (frontier_degree_sum_per_batch): the entries a sampler reading whole rows
(LABOR: one variate per neighbour) touches, against the sampled edges neighbour sampling draws.

Usage (OMP_NUM_THREADS must equal T):
  OMP_NUM_THREADS=T DGLBACKEND=pytorch python dgl_labor.py DATA T OUT.json [--fanouts 10,10,10]
      [--batch 1024] [--batches 40] [--seed 1] [--configs neighbor,labor0,...]
"""
import argparse, json, math, os, statistics, time

ap = argparse.ArgumentParser()
ap.add_argument("data")
ap.add_argument("threads", type=int)
ap.add_argument("out")
ap.add_argument("--fanouts", default="10,10,10", help="from the seeds out, as dsp --fanouts")
ap.add_argument("--batch", type=int, default=1024)
ap.add_argument("--batches", type=int, default=40)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--configs", default="neighbor,labor0,labor0_ld,labor1,labor1_ld")
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
indptr = torch.from_numpy(np.load(f"{d}/indptr.npy").astype(np.int64))
indices = torch.from_numpy(np.load(f"{d}/indices.npy").astype(np.int64))
N = indptr.numel() - 1
g = dgl.graph(("csc", (indptr, indices, torch.tensor([], dtype=torch.int64))), num_nodes=N)
deg = indptr[1:] - indptr[:-1]  # in-degree: the row a destination's draw reads
train_idx = np.load(f"{d}/train_idx.npy").astype(np.int64)
meta = json.load(open(f"{d}/dataset.json"))
row_bytes = meta["feature_dim"] * np.dtype(meta["feature_dtype"]).itemsize
fanouts = [int(x) for x in args.fanouts.split(",")]
dgl_fanouts = list(reversed(fanouts))  # DGL: input layer first
print(f"torch {torch.__version__} dgl {dgl.__version__} threads torch={torch.get_num_threads()} "
      f"dgl={dgl.utils.get_num_threads()} N={N} E={g.num_edges()} train={train_idx.size} "
      f"fanouts (from the seeds) {fanouts} batch {args.batch}", flush=True)


def batches():
    """Warm-up + timed batches: consecutive windows of a shuffled train_idx, wrapping around."""
    perm = np.random.default_rng(args.seed).permutation(train_idx)
    n, bs = perm.size, min(args.batch, perm.size)
    out = []
    for b in range(1 + args.batches):
        pos = (b * bs + np.arange(bs)) % n
        out.append(torch.from_numpy(perm[pos]))
    return out


def make(name):
    if name == "neighbor":
        return dgl.dataloading.NeighborSampler(dgl_fanouts)
    imp = {"labor0": 0, "labor1": 1}[name.removesuffix("_ld")]
    return dgl.dataloading.LaborSampler(dgl_fanouts, importance_sampling=imp,
                                        layer_dependency=name.endswith("_ld"))


def run(name):
    sampler = make(name)
    bs = batches()
    sampler.sample_blocks(g, bs[0])  # warm-up
    srcs, edges, scanned, ms = [], [], [], []
    for seeds in bs[1:]:
        t0 = time.perf_counter()
        _, _, blocks = sampler.sample_blocks(g, seeds)
        ms.append((time.perf_counter() - t0) * 1e3)
        blocks = blocks[::-1]  # from the seeds out
        srcs.append([b.num_src_nodes() for b in blocks])
        edges.append([b.num_edges() for b in blocks])
        scanned.append(sum(int(deg[b.dstdata[dgl.NID]].sum()) for b in blocks))
    L = len(fanouts)
    per_layer = [statistics.mean(s[l] for s in srcs) for l in range(L)]
    inputs = [s[-1] for s in srcs]
    sem = statistics.stdev(inputs) / math.sqrt(len(inputs)) if len(inputs) > 1 else 0.0
    return dict(sources_per_batch_per_layer=per_layer, input_nodes_per_batch=per_layer[-1],
                input_nodes_sem=sem, feature_bytes_per_batch=per_layer[-1] * row_bytes,
                edges_per_batch_per_layer=[statistics.mean(e[l] for e in edges)
                                           for l in range(L)],
                sampled_edges_per_batch=statistics.mean(sum(e) for e in edges),
                frontier_degree_sum_per_batch=statistics.mean(scanned),
                ms_per_batch=statistics.mean(ms), ms_per_batch_median=statistics.median(ms))


out = dict(system="dgl", dgl=dgl.__version__, torch=torch.__version__, threads=T, graph=d, N=N,
           E=g.num_edges(), fanouts=fanouts, batch_size=args.batch, batches=args.batches,
           seed=args.seed, configs={})
for name in args.configs.split(","):
    r = run(name)
    out["configs"][name] = r
    print(f"{name:10s} input nodes/batch {r['input_nodes_per_batch']:9.0f} "
          f"(+-{r['input_nodes_sem']:.0f}) sources per layer "
          f"{[round(x) for x in r['sources_per_batch_per_layer']]} edges/batch "
          f"{r['sampled_edges_per_batch']:.0f} row entries/batch "
          f"{r['frontier_degree_sum_per_batch']:.0f} ms/batch {r['ms_per_batch']:.2f}", flush=True)
with open(args.out, "w") as f:
    json.dump(out, f, indent=1)
