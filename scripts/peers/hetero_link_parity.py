"""Typed link-prediction parity of dsp with PyG's heterogeneous link example, seed by seed (a reference, not a test).

PyG's examples/hetero/hetero_link_pred.py trains ``to_hetero(GraphSAGE, aggr='sum')`` (two
SAGEConv layers of --hidden, ReLU between) on a relation of a typed graph, full batch: every epoch
is one step over every training edge of the relation plus as many negative pairs (an id of its
source type, one of its destination type, uniform, torch_geometric's bipartite
negative_sampling), binary cross-entropy with logits, Adam. Here every type is featureless and
learns an embedding of --hidden (uniform +-0.1, dsp's learnable rows; with --protocol dgl a type
with features enters through a linear projection of them instead, as in dsp), the score is the dot
product of the two rows, and the split is the dataset's own (``dsp generate hetero --link-split``:
training edges in the graph, held-out ones with fixed negatives), read by both systems.

dsp runs the same loop: ``dsp train --task link --model hsage --fanouts -1,-1 --batch-size
<training edges> --exclude none --negatives pairs --dropout 0 --weight-decay 0 --lr L
--embedding-lr L`` (hsage is to_hetero's SAGE with 'sum': per relation a self and a neighbour
weight, their sum over the relations into a type). Both report, per epoch, the ROC-AUC and Hits@K
of the held-out edges against their negatives; a run reports the test figures at its best
validation AUC (the first best). --peer-init dsp (default) starts PyG's weights as dsp's layers
start (LibTorch Linear's uniform +-1/sqrt(fan_in), biases zero).

--protocol dgl instead runs DGL's mini-batch link loop on the typed graph (the user guide's 6.3
on heterographs): ``as_edge_prediction_sampler(NeighborSampler([10, 15]), exclude=
'reverse_types', reverse_etypes={rel: rev_rel, rev_rel: rel}, negative_sampler=Uniform(1))``, a
DataLoader of batch 512 over the relation's training edges, 2 x ``HeteroGraphConv({rel:
SAGEConv(h, h, 'mean')}, aggregate='sum')`` with ReLU between over learnt embeddings per type, the
dot product of the pair graphs' rows, BCE, Adam; after each epoch every node's output over the
whole training graph scores the held-out pairs. dsp: ``--model hsage --fanouts 15,10
--batch-size 512 --exclude reverse --negatives uniform`` (a negative keeps its positive's source,
as DGL's Uniform does).

--protocol pygmb runs PyG's mini-batch loop on the typed graph (its hetero link tutorial's
LinkNeighborLoader; needs pyg-lib, or torch_sparse with torch_scatter): the relation's training
edges as edge_label_index, num_neighbors [15, 10] for every relation, batches of 512 positives
with one 'binary' negative each (an id of the source type and one of the destination type,
uniform), shuffled; the same to_hetero(GraphSAGE, aggr='sum') over the batch's subgraph, its
nodes' learnt rows (n_id), the pairs scored at edge_label_index, BCE, Adam; scored after each
epoch on the whole training graph. LinkNeighborLoader keeps the batch's own edges in its
subgraph. dsp: ``--model hsage --fanouts 15,10 --batch-size 512 --exclude none --negatives
pairs``.

Run with the DGL venv's python after `pip install torch_geometric==2.5.3` into it, e.g.
  dsp generate hetero /tmp/hl0 --papers 3000 --authors 2000 --institutions 100 --fields 200 \
      --feature-dim 0 --link-split 0.85,0.05,0.10
  python scripts/peers/hetero_link_parity.py /tmp/hl0 --seeds 0,1,2 --lr 0.01 --epochs 100
  python scripts/peers/hetero_link_parity.py /tmp/hl0 --protocol dgl --lr 0.001 --epochs 5
dsp partitions the dataset into DATASET + "-p1" first (one part).
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, time, warnings

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("dataset", metavar="DATASET")
ap.add_argument("--dsp", default="/work/main/build/tools/dsp")
ap.add_argument("--protocol", choices=["pyg", "pygmb", "dgl"], default="pyg")
ap.add_argument("--systems", default="dsp,peer")
ap.add_argument("--seeds", default="0,1,2")
ap.add_argument("--hidden", type=int, default=128)
ap.add_argument("--lr", type=float, default=0.01)
ap.add_argument("--epochs", type=int, default=100)
ap.add_argument("--k", type=int, default=50, help="Hits@K")
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--peer-init", choices=["dsp", "own"], default="dsp")
ap.add_argument("--peer-embeddings", choices=["dense", "sparse"], default="dense",
                help="the dgl protocol's embeddings: dense (nn.Embedding under the model's Adam, "
                     "the example's) or sparse (sparse=True under SparseAdam at --lr: dsp's "
                     "sparse Adam of the rows a step touches)")
ap.add_argument("--out")
args = ap.parse_args()
os.environ["OMP_NUM_THREADS"] = str(args.threads)
warnings.filterwarnings("ignore")

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import roc_auc_score

torch.set_num_threads(args.threads)


def load(d):
    meta = json.load(open(f"{d}/dataset.json"))
    h = meta["hetero"]
    types = [t["name"] for t in h["node_types"]]
    counts = {t["name"]: t["count"] for t in h["node_types"]}
    edges = {}
    for r in h["relations"]:
        key = (r["src"], r["name"], r["dst"])
        rd = f"{d}/relations/{'___'.join(key)}"
        indptr = torch.from_numpy(np.load(f"{rd}/indptr.npy")).long()
        src = torch.from_numpy(np.load(f"{rd}/indices.npy")).long()
        dst = torch.repeat_interleave(torch.arange(indptr.numel() - 1), indptr.diff())
        edges[key] = torch.stack([src, dst])
    arr = lambda n: torch.from_numpy(np.load(f"{d}/{n}.npy")).long()
    link = tuple(h["link_relation"].split("___"))
    features = {t["name"]: torch.from_numpy(np.load(f"{d}/nodes/{t['name']}/features.npy")).float()
                for t in h["node_types"] if t["feature_dim"] > 0}
    if features and args.protocol != "dgl":
        sys.exit(f"{d}: --protocol {args.protocol} compares featureless graphs only (types with "
                 f"features: {', '.join(features)}); --protocol dgl projects them")
    return dict(types=types, counts=counts, edges=edges, link=link, features=features,
                train=arr("link_train"),
                valid=arr("link_valid"), valid_neg=arr("link_valid_neg"), test=arr("link_test"),
                test_neg=arr("link_test_neg"))


def figures(score, D, split):
    pos, neg = score(D[split]).numpy(), score(D[split + "_neg"]).numpy()
    auc = roc_auc_score(np.r_[np.ones(len(pos)), np.zeros(len(neg))], np.r_[pos, neg])
    kth = np.sort(neg)[::-1][args.k - 1]
    return {"auc": float(auc), f"hits@{args.k}": float((pos > kth).mean())}


def dsp_init(module):
    """--peer-init dsp: every weight matrix uniform in +-1/sqrt(fan_in) (LibTorch Linear's, dsp's
    layers), every bias zero."""
    if args.peer_init != "dsp":
        return
    with torch.no_grad():
        for p in module.parameters():
            if p.dim() == 2:
                bound = 1 / p.size(1) ** 0.5
                p.uniform_(-bound, bound)
            else:
                p.zero_()


def pyg_model(D):
    """The graph as HeteroData, to_hetero(GraphSAGE, 'sum') over it, learnt rows per type and
    the optimiser over both."""
    from torch_geometric.data import HeteroData
    from torch_geometric.nn import SAGEConv, to_hetero
    data = HeteroData()
    for t in D["types"]:
        data[t].num_nodes = D["counts"][t]
    for key, ei in D["edges"].items():
        data[key].edge_index = ei

    class Sage(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = SAGEConv((-1, -1), args.hidden)
            self.conv2 = SAGEConv((-1, -1), args.hidden)

        def forward(self, x, edge_index):
            return self.conv2(self.conv1(x, edge_index).relu(), edge_index)

    model = to_hetero(Sage(), data.metadata(), aggr="sum")
    emb = torch.nn.ModuleDict({t: torch.nn.Embedding(D["counts"][t], args.hidden)
                               for t in D["types"]})
    for e in emb.values():
        torch.nn.init.uniform_(e.weight, -0.1, 0.1)
    with torch.no_grad():  # materialise the lazy (-1) weights
        model({t: emb[t].weight for t in D["types"]}, data.edge_index_dict)
    dsp_init(model)
    opt = torch.optim.Adam(list(model.parameters()) + list(emb.parameters()), lr=args.lr)
    return data, model, emb, opt


def run_pyg_minibatch(D, seed):
    from torch_geometric.loader import LinkNeighborLoader
    torch.manual_seed(seed)
    data, model, emb, opt = pyg_model(D)
    s, _, d = D["link"]
    loader = LinkNeighborLoader(data, num_neighbors=[15, 10],
                                edge_label_index=(D["link"], D["train"].t()),
                                neg_sampling="binary", batch_size=512, shuffle=True)
    curve = []
    for epoch in range(args.epochs):
        for b in loader:
            h = model({t: emb[t](b[t].n_id) for t in D["types"]}, b.edge_index_dict)
            pairs = b[D["link"]].edge_label_index
            logits = (h[s][pairs[0]] * h[d][pairs[1]]).sum(1)
            loss = F.binary_cross_entropy_with_logits(logits, b[D["link"]].edge_label.float())
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            h = model({t: emb[t].weight for t in D["types"]}, data.edge_index_dict)
            f = lambda p: (h[s][p[:, 0]] * h[d][p[:, 1]]).sum(1)
            curve.append({"val": figures(f, D, "valid"), "test": figures(f, D, "test")})
    return curve


def run_pyg(D, seed):
    from torch_geometric.utils import negative_sampling
    torch.manual_seed(seed)
    data, model, emb, opt = pyg_model(D)
    x_dict = lambda: {t: emb[t].weight for t in D["types"]}
    s, _, d = D["link"]
    sizes = (D["counts"][s], D["counts"][d])
    train, curve = D["train"], []
    for epoch in range(args.epochs):
        neg = negative_sampling(D["edges"][D["link"]], num_nodes=sizes,
                                num_neg_samples=train.size(0)).t()
        h = model(x_dict(), data.edge_index_dict)
        pairs = torch.cat([train, neg])
        logits = (h[s][pairs[:, 0]] * h[d][pairs[:, 1]]).sum(1)
        y = torch.cat([torch.ones(train.size(0)), torch.zeros(neg.size(0))])
        loss = F.binary_cross_entropy_with_logits(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            h = model(x_dict(), data.edge_index_dict)
            f = lambda p: (h[s][p[:, 0]] * h[d][p[:, 1]]).sum(1)
            curve.append({"val": figures(f, D, "valid"), "test": figures(f, D, "test")})
    return curve


def run_dgl(D, seed):
    import dgl, dgl.nn as dglnn
    torch.manual_seed(seed)
    dgl.seed(seed)
    link = D["link"]
    rev = (link[2], "rev_" + link[1], link[0])
    # exclude='reverse_types' drops the reverse etype's edges of the same ids: the reverse
    # relation's edges in the link relation's order (the same edges, reversed).
    edges = dict(D["edges"])
    edges[rev] = edges[link].flip(0)
    g = dgl.heterograph({k: (e[0], e[1]) for k, e in edges.items()}, num_nodes_dict=D["counts"])
    s, _, d = link
    layers = torch.nn.ModuleList([dglnn.HeteroGraphConv(
        {k[1]: dglnn.SAGEConv(args.hidden, args.hidden, "mean") for k in D["edges"]},
        aggregate="sum") for _ in range(2)])
    sparse = args.peer_embeddings == "sparse"
    # A type with features enters through a linear projection of them (dsp's typed models), the
    # others through learnt rows.
    feats = D["features"]
    proj = torch.nn.ModuleDict({t: torch.nn.Linear(x.size(1), args.hidden) for t, x in feats.items()})
    emb = torch.nn.ModuleDict({t: torch.nn.Embedding(D["counts"][t], args.hidden, sparse=sparse)
                               for t in D["types"] if t not in feats})
    for e in emb.values():
        torch.nn.init.uniform_(e.weight, -0.1, 0.1)
    dsp_init(layers)
    dsp_init(proj)
    dense = list(layers.parameters()) + list(proj.parameters())
    opts = [torch.optim.Adam(dense + ([] if sparse else list(emb.parameters())), lr=args.lr)]
    if sparse:
        opts.append(torch.optim.SparseAdam(list(emb.parameters()), lr=args.lr))
    sampler = dgl.dataloading.as_edge_prediction_sampler(
        dgl.dataloading.NeighborSampler([10, 15]), exclude="reverse_types",
        reverse_etypes={link: rev, rev: link},
        negative_sampler=dgl.dataloading.negative_sampler.Uniform(1))
    loader = dgl.dataloading.DataLoader(
        g, {link: torch.arange(g.num_edges(link))}, sampler, batch_size=512, shuffle=True,
        drop_last=False, num_workers=0)

    def forward(graphs, x):
        for i, (layer, graph) in enumerate(zip(layers, graphs)):
            x = layer(graph, x)
            if i == 0:
                x = {t: F.relu(v) for t, v in x.items()}
        return x

    def inputs(ids_of):
        return {t: proj[t](feats[t][ids]) if t in feats else emb[t](ids) for t, ids in ids_of.items()}

    every = {t: torch.arange(D["counts"][t]) for t in D["types"]}
    curve = []
    for epoch in range(args.epochs):
        for input_nodes, pos_g, neg_g, blocks in loader:
            h = forward(blocks, inputs(input_nodes))
            pos, neg = pos_g.edges(etype=link), neg_g.edges(etype=link)
            logits = torch.cat([(h[s][pos[0]] * h[d][pos[1]]).sum(1),
                                (h[s][neg[0]] * h[d][neg[1]]).sum(1)])
            y = torch.cat([torch.ones(len(pos[0])), torch.zeros(len(neg[0]))])
            loss = F.binary_cross_entropy_with_logits(logits, y)
            for o in opts:
                o.zero_grad()
            loss.backward()
            for o in opts:
                o.step()
        with torch.no_grad():  # every node's output over the whole training graph
            h = forward([g, g], inputs(every))
            f = lambda p: (h[s][p[:, 0]] * h[d][p[:, 1]]).sum(1)
            curve.append({"val": figures(f, D, "valid"), "test": figures(f, D, "test")})
    return curve


def run_dsp(part, seed, n_train):
    with tempfile.TemporaryDirectory(prefix="hlparity-") as tmp:
        loop = {"pyg": ["--fanouts", "-1,-1", "--batch-size", str(n_train), "--exclude", "none",
                        "--negatives", "pairs"],
                "pygmb": ["--fanouts", "15,10", "--batch-size", "512", "--exclude", "none",
                          "--negatives", "pairs"],
                "dgl": ["--fanouts", "15,10", "--batch-size", "512", "--exclude", "reverse",
                        "--negatives", "uniform"]}[args.protocol]
        cmd = [args.dsp, "train", part, "--task", "link", "--model", "hsage", "--predictor", "dot",
               *loop, "--hidden", str(args.hidden), "--lr", str(args.lr),
               "--embedding-lr", str(args.lr), "--dropout", "0", "--weight-decay", "0",
               "--epochs", str(args.epochs), "--seed", str(seed), "--threads", str(args.threads),
               "--metric", "rocauc", "--hits-k", str(args.k), "--metrics", f"{tmp}/m.jsonl",
               "--checkpoint-dir", f"{tmp}/ck", "--no-progress"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr}")
        key = f"hits@{args.k}"
        return [{s: {"auc": r[s]["auc"], key: r[s][key]} for s in ("val", "test")}
                for r in map(json.loads, open(f"{tmp}/m.jsonl")) if "val" in r]


def pick(curve):
    vals = [c["val"]["auc"] for c in curve]
    return vals.index(max(vals))


def main():
    D = load(args.dataset)
    part = args.dataset.rstrip("/") + "-p1"
    if not os.path.exists(f"{part}/partition.json"):
        subprocess.run([args.dsp, "partition", args.dataset, part, "--parts", "1", "--overwrite"],
                       check=True, stdout=subprocess.DEVNULL)
    runs, key = [], f"hits@{args.k}"
    for seed in (int(s) for s in args.seeds.split(",")):
        for system in args.systems.split(","):
            t0 = time.time()
            peer = {"pyg": run_pyg, "pygmb": run_pyg_minibatch, "dgl": run_dgl}[args.protocol]
            curve = run_dsp(part, seed, D["train"].size(0)) if system == "dsp" else peer(D, seed)
            best = pick(curve)
            runs.append(dict(system=system, seed=seed, best_epoch=best + 1,
                             test=curve[best]["test"], curve=curve, seconds=time.time() - t0))
            print(f"{system} seed {seed}: test auc {curve[best]['test']['auc']:.4f} {key} "
                  f"{curve[best]['test'][key]:.4f} (epoch {best + 1}, {time.time() - t0:.0f} s)",
                  file=sys.stderr, flush=True)
            if args.out:
                json.dump(runs, open(args.out, "w"))
    for system in args.systems.split(","):
        rs = [r for r in runs if r["system"] == system]
        auc, hits = [r["test"]["auc"] for r in rs], [r["test"][key] for r in rs]
        sd = lambda xs: statistics.stdev(xs) if len(xs) > 1 else 0.0
        print(f"{system}: test AUC {statistics.mean(auc):.4f} +- {sd(auc):.4f}, {key} "
              f"{statistics.mean(hits):.4f} +- {sd(hits):.4f} over {len(rs)} seeds")


if __name__ == "__main__":
    main()
