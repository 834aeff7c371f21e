"""DGL 2.1 CPU link prediction on a dsp link dataset directory, as DGL's own examples train it.

The standard DGL loop (examples/pytorch/graphsage/link_pred.py, with a learnt embedding for a
featureless graph): the graph from the directory's in-neighbour CSR, its link_train.npy edges as
the training edge ids, as_edge_prediction_sampler(NeighborSampler(fanouts reversed),
exclude="reverse_id" (undirected datasets: an edge's reverse is its (v, u) entry; "self" for a
directed one), negative_sampler=Uniform(k)), DataLoader(batch B, shuffle), nn.Embedding(N, hidden,
sparse=True) + SparseAdam for the node rows (the features instead when the dataset has them),
len(fanouts) x SAGEConv('mean') (ReLU between, no dropout), dot predictor, BCE with logits, Adam.
Timed per step with perf_counter: sample (next() on the DataLoader), gather (embedding/feature
rows), train (forward, loss, backward, both optimizers, loss.item()).

Usage (OMP_NUM_THREADS must equal T):
  OMP_NUM_THREADS=T DGLBACKEND=pytorch python dgl_link.py DATA T OUT.json [--steps S]
      [--fanouts 10,5] [--batch 1024] [--neg 1] [--hidden 64] [--seed 0]
--steps S: time the first S steps of the epoch (after 3 warm-up steps); 0: the whole epoch.
"""
import argparse, json, os, statistics, time

ap = argparse.ArgumentParser()
ap.add_argument("data")
ap.add_argument("threads", type=int)
ap.add_argument("out")
ap.add_argument("--steps", type=int, default=200)
ap.add_argument("--fanouts", default="10,5")
ap.add_argument("--batch", type=int, default=1024)
ap.add_argument("--neg", type=int, default=1)
ap.add_argument("--hidden", type=int, default=64)
ap.add_argument("--seed", type=int, default=0)
args = ap.parse_args()
T = args.threads
assert os.environ.get("OMP_NUM_THREADS") == str(T), "set OMP_NUM_THREADS=T"

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import dgl
import dgl.nn as dglnn

torch.set_num_threads(T)
dgl.utils.set_num_threads(T)
torch.manual_seed(args.seed)
dgl.seed(args.seed)

pc = time.perf_counter
t_load = pc()
d = args.data
meta = json.load(open(f"{d}/dataset.json"))
indptr = torch.from_numpy(np.load(f"{d}/indptr.npy").astype(np.int64))
indices = torch.from_numpy(np.load(f"{d}/indices.npy").astype(np.int64))
N = indptr.numel() - 1
g = dgl.graph(("csc", (indptr, indices, torch.tensor([], dtype=torch.int64))), num_nodes=N)
train = torch.from_numpy(np.load(f"{d}/link_train.npy"))
train_eids = g.edge_ids(train[:, 0], train[:, 1])
undirected = not meta.get("directed", True)
if undirected:  # the reverse of edge u -> v is the entry v -> u
    all_u, all_v = g.edges()
    reverse = g.edge_ids(all_v, all_u)
    exclude = dict(exclude="reverse_id", reverse_eids=reverse)
else:
    exclude = dict(exclude="self")
F_dim = meta.get("feature_dim", 0)
feats = torch.from_numpy(np.load(f"{d}/features.npy")) if F_dim else None
t_load = pc() - t_load
print(f"torch {torch.__version__} dgl {dgl.__version__} threads {T} N={N} E={g.num_edges()} "
      f"train edges={train_eids.numel()} features={F_dim} exclude={exclude['exclude']} "
      f"load {t_load:.1f}s", flush=True)


class SAGE(nn.Module):
    def __init__(self, in_feats, hidden, layers):
        super().__init__()
        self.layers = nn.ModuleList(
            [dglnn.SAGEConv(in_feats if l == 0 else hidden, hidden, "mean") for l in range(layers)])
        for layer in self.layers:  # nn.Linear's init, as dsp's LibTorch Linear
            layer.fc_self.reset_parameters()
            layer.fc_neigh.reset_parameters()

    def forward(self, blocks, x):
        h = x
        for l, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if l != len(self.layers) - 1:
                h = F.relu(h)
        return h


fanouts = [int(f) for f in args.fanouts.split(",")]
model = SAGE(F_dim if F_dim else args.hidden, args.hidden, len(fanouts))
opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=0)
emb = None if F_dim else nn.Embedding(N, args.hidden, sparse=True)
if emb is not None:
    nn.init.uniform_(emb.weight, -0.1, 0.1)  # dsp's init_scale
    emb_opt = torch.optim.SparseAdam(list(emb.parameters()), lr=0.05)
sampler = dgl.dataloading.as_edge_prediction_sampler(
    dgl.dataloading.NeighborSampler(list(reversed(fanouts))),
    negative_sampler=dgl.dataloading.negative_sampler.Uniform(args.neg), **exclude)
loader = dgl.dataloading.DataLoader(g, train_eids, sampler, batch_size=args.batch, shuffle=True,
                                    drop_last=False, num_workers=0)
steps_per_epoch = len(loader)


def summ(xs):
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs),
            "mean": statistics.mean(xs), "n": len(xs)}


model.train()
it = iter(loader)
ts, tg, tt, losses, nedges, nin = [], [], [], [], [], []
WARM = 3
limit = args.steps + WARM if args.steps > 0 else steps_per_epoch
t_ep = None
for step in range(min(limit, steps_per_epoch)):
    if step == WARM:
        t_ep = pc()
    t0 = pc()
    input_nodes, pos_g, neg_g, blocks = next(it)
    t1 = pc()
    x = emb(input_nodes) if emb is not None else feats[input_nodes]
    t2 = pc()
    h = model(blocks, x)
    ps, pd = pos_g.edges()
    ns, nd = neg_g.edges()
    logits = torch.cat([(h[ps] * h[pd]).sum(1), (h[ns] * h[nd]).sum(1)])
    y = torch.cat([torch.ones(ps.numel()), torch.zeros(ns.numel())])
    loss = F.binary_cross_entropy_with_logits(logits, y)
    opt.zero_grad()
    if emb is not None:
        emb_opt.zero_grad()
    loss.backward()
    opt.step()
    if emb is not None:
        emb_opt.step()
    lv = loss.item()
    t3 = pc()
    if step >= WARM:
        ts.append(t1 - t0); tg.append(t2 - t1); tt.append(t3 - t2); losses.append(lv)
        nedges.append(sum(b.num_edges() for b in blocks)); nin.append(input_nodes.numel())
wall = pc() - t_ep
steps = len(ts)
res = {"threads": T, "seed": args.seed, "fanouts": fanouts, "batch": args.batch, "neg": args.neg,
       "hidden": args.hidden, "steps_per_epoch": steps_per_epoch, "steps_timed": steps,
       "torch": torch.__version__, "dgl": dgl.__version__, "wall_s": wall,
       "step_s": summ([a + b + c for a, b, c in zip(ts, tg, tt)]),
       "sample_s_sum": sum(ts), "gather_s_sum": sum(tg), "train_s_sum": sum(tt),
       "mean_edges": statistics.mean(nedges), "mean_input_nodes": statistics.mean(nin),
       "sampled_edges_per_s": sum(nedges) / sum(ts), "mean_loss": statistics.mean(losses),
       "epoch_s_estimate": wall / steps * steps_per_epoch}
json.dump(res, open(args.out, "w"), indent=1)
print(f"{steps} steps in {wall:.2f} s ({wall / steps * 1000:.1f} ms/step; an epoch of "
      f"{steps_per_epoch} steps ~ {res['epoch_s_estimate']:.0f} s) | sample {sum(ts):.2f} gather "
      f"{sum(tg):.2f} train {sum(tt):.2f} | {res['sampled_edges_per_s'] / 1e6:.2f} M sampled "
      f"edges/s | loss {res['mean_loss']:.4f}", flush=True)
