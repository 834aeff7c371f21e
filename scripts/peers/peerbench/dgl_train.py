"""End-to-end DGL 2.1 CPU training of a 3-layer GraphSAGE (mean) on a dsp dataset directory.

The standard DGL user loop: NeighborSampler([5,10,15]) (input layer first = 15,10,5 from the
seeds), DataLoader(batch 1024, shuffle, drop_last=False, num_workers=0), feats[input_nodes],
3 x SAGEConv(.., 'mean') with ReLU + dropout(0.5) between, cross entropy, Adam(lr 0.01).

Usage (OMP_NUM_THREADS must equal T):
  OMP_NUM_THREADS=T DGLBACKEND=pytorch python dgl_train.py DATA T OUT.json [--epochs E]
      [--seed S] [--wd 5e-4] [--stages K] [--init torch|dgl] [--input-dropout]
Adam weight decay defaults to 5e-4 to match dsp train's default.
Mode train (default): runs E full epochs (epoch 1 is the warm-up), timing every step in three
parts with perf_counter: sample (next() on the DataLoader iterator), gather (feats/labels
indexing), train (forward, loss, backward, optimizer step, loss.item()); the train part also as
the main thread's CPU time (time.thread_time: with T = 1 all of it, robust on a shared machine).
--stages K: instead, after 3 warm-up steps, K steps of each of: sampling only (DataLoader
iteration), sampling + gather, full step.
"""
import argparse, json, os, statistics, sys, time

ap = argparse.ArgumentParser()
ap.add_argument("data")
ap.add_argument("threads", type=int)
ap.add_argument("out")
ap.add_argument("--epochs", type=int, default=2)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--wd", type=float, default=5e-4)
ap.add_argument("--stages", type=int, default=0)
ap.add_argument("--init", choices=["torch", "dgl"], default="torch",
                help="torch: nn.Linear's default init, as LibTorch's Linear in dsp (default); "
                     "dgl: SAGEConv's own xavier_uniform(gain=relu)")
ap.add_argument("--input-dropout", action="store_true",
                help="also drop out the input features (dsp's model does); off by default")
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
np.random.seed(args.seed)

t_load = time.perf_counter()
d = args.data
indptr = torch.from_numpy(np.load(f"{d}/indptr.npy").astype(np.int64))
indices = torch.from_numpy(np.load(f"{d}/indices.npy").astype(np.int64))
N = indptr.numel() - 1
g = dgl.graph(("csc", (indptr, indices, torch.tensor([], dtype=torch.int64))), num_nodes=N)
feats = torch.from_numpy(np.load(f"{d}/features.npy"))
labels = torch.from_numpy(np.load(f"{d}/labels.npy"))
train_idx = torch.from_numpy(np.load(f"{d}/train_idx.npy"))
n_classes = int(labels.max()) + 1
t_load = time.perf_counter() - t_load
print(f"torch {torch.__version__} dgl {dgl.__version__} threads torch={torch.get_num_threads()} "
      f"dgl={dgl.utils.get_num_threads()} N={N} E={g.num_edges()} F={feats.shape[1]} "
      f"classes={n_classes} train={train_idx.numel()} formats={g.formats()} load {t_load:.1f}s",
      flush=True)


class SAGE(nn.Module):
    def __init__(self, in_feats, hidden, out_feats, dropout=0.5, input_dropout=False):
        super().__init__()
        self.input_dropout = input_dropout
        self.layers = nn.ModuleList([
            dglnn.SAGEConv(in_feats, hidden, "mean"),
            dglnn.SAGEConv(hidden, hidden, "mean"),
            dglnn.SAGEConv(hidden, out_feats, "mean")])
        self.dropout = nn.Dropout(dropout)

    def forward(self, blocks, x):
        h = self.dropout(x) if self.input_dropout else x
        for l, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if l != len(self.layers) - 1:
                h = F.relu(h)
                h = self.dropout(h)
        return h


model = SAGE(feats.shape[1], 128, n_classes, input_dropout=args.input_dropout)
if args.init == "torch":  # same init as dsp's LibTorch nn::Linear (kaiming_uniform(a=sqrt 5))
    for layer in model.layers:
        layer.fc_self.reset_parameters()  # weight and bias, as dsp's self_ Linear
        layer.fc_neigh.reset_parameters()
opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=args.wd)
sampler = dgl.dataloading.NeighborSampler([5, 10, 15])
loader = dgl.dataloading.DataLoader(g, train_idx, sampler, batch_size=1024, shuffle=True,
                                    drop_last=False, num_workers=0)
steps_per_epoch = len(loader)
pc = time.perf_counter
res = {"threads": T, "seed": args.seed, "steps_per_epoch": steps_per_epoch, "torch": torch.__version__,
       "dgl": dgl.__version__, "wd": args.wd, "init": args.init,
       "input_dropout": args.input_dropout}


def summ(xs):
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs), "mean": statistics.mean(xs),
            "n": len(xs)}


if args.stages == 0:
    model.train()
    res["epochs"] = []
    for ep in range(args.epochs):
        ts, tg, tt, tc, losses, nin, nedges = [], [], [], [], [], [], []
        it = iter(loader)
        t_ep = pc()
        while True:
            t0 = pc()
            try:
                input_nodes, output_nodes, blocks = next(it)
            except StopIteration:
                break
            t1 = pc()
            x = feats[input_nodes]
            y = labels[output_nodes]
            t2 = pc()
            c2 = time.thread_time()
            logits = model(blocks, x)
            loss = F.cross_entropy(logits, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            lv = loss.item()
            t3 = pc()
            tc.append(time.thread_time() - c2)
            ts.append(t1 - t0); tg.append(t2 - t1); tt.append(t3 - t2); losses.append(lv)
            nin.append(input_nodes.numel()); nedges.append(sum(b.num_edges() for b in blocks))
        wall = pc() - t_ep
        step = [a + b + c for a, b, c in zip(ts, tg, tt)]
        e = {"epoch": ep + 1, "wall_s": wall, "steps": len(step), "step_s": summ(step),
             "sample_s_sum": sum(ts), "gather_s_sum": sum(tg), "train_s_sum": sum(tt),
             "train_thread_cpu_s_sum": sum(tc),
             "mean_loss": statistics.mean(losses), "last_loss": losses[-1],
             "last10_loss": statistics.mean(losses[-10:]), "losses": losses,
             "step_times": step, "sample_times": ts, "gather_times": tg, "train_times": tt,
             "mean_input_nodes": statistics.mean(nin), "mean_edges": statistics.mean(nedges)}
        res["epochs"].append(e)
        print(f"epoch {ep+1} | loss {e['mean_loss']:.4f} (last {lv:.4f}, last10 {e['last10_loss']:.4f})"
              f" | {wall:.2f} s, {len(step)} steps, step med {e['step_s']['median']:.3f} s | sample "
              f"{sum(ts):.2f} gather {sum(tg):.2f} train {sum(tt):.2f} (thread CPU {sum(tc):.2f}) | input nodes "
              f"{e['mean_input_nodes']:.0f}, edges {e['mean_edges']:.0f}", flush=True)
else:
    K, WARM = args.stages, 3
    model.train()

    def batches():
        while True:
            for b in loader:
                yield b

    gen = batches()
    for _ in range(WARM):  # warm-up: full steps
        inp, out, blocks = next(gen)
        loss = F.cross_entropy(model(blocks, feats[inp]), labels[out])
        opt.zero_grad(); loss.backward(); opt.step()
    stages = {}
    # (1) sampling only
    t = []
    for _ in range(K):
        t0 = pc(); inp, out, blocks = next(gen); t.append(pc() - t0)
    stages["sample_only"] = summ(t)
    # (2) sampling + gather
    t = []
    for _ in range(K):
        t0 = pc(); inp, out, blocks = next(gen); x = feats[inp]; y = labels[out]; t.append(pc() - t0)
    stages["sample_gather"] = summ(t)
    # (3) full step, with the parts
    t, tf, tb, to = [], [], [], []
    for _ in range(K):
        t0 = pc(); inp, out, blocks = next(gen); x = feats[inp]; y = labels[out]
        t1 = pc()
        loss = F.cross_entropy(model(blocks, x), y)
        t2 = pc()
        opt.zero_grad(); loss.backward()
        t3 = pc()
        opt.step(); loss.item()
        t4 = pc()
        t.append(t4 - t0); tf.append(t2 - t1); tb.append(t3 - t2); to.append(t4 - t3)
    stages["full_step"] = summ(t)
    stages["forward"] = summ(tf)
    stages["backward"] = summ(tb)
    stages["optimizer"] = summ(to)
    # (4) a no-grad eval-mode forward (what dsp's train stage adds per step for train accuracy)
    t = []
    for _ in range(K):
        inp, out, blocks = next(gen); x = feats[inp]
        t0 = pc()
        model.eval()
        with torch.no_grad():
            model(blocks, x).argmax(1)
        model.train()
        t.append(pc() - t0)
    stages["eval_forward"] = summ(t)
    res["stages"] = stages
    for k, v in stages.items():
        print(f"{k:14s} min {v['min']:.4f} med {v['median']:.4f} max {v['max']:.4f} s", flush=True)

with open(args.out, "w") as f:
    json.dump(res, f, indent=1)
