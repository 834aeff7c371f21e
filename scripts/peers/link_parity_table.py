"""Link-prediction parity of dsp with PyG's and DGL's link examples, seed by seed (a reference, not a test).

Every run of a row trains on the same split: the dataset's graph (a dsp dataset directory made by
`dsp convert --from ogb`, e.g. from ../shared/datasets/cora) is cut per seed by `dsp convert
--from edgelist --undirected --link-split 0.85,0.05,0.10 --seed S` (PyG's RandomLinkSplit
fractions): the stored graph keeps the training edges, link_valid/link_test hold the held-out
ones with fixed negative pairs. Each system reads those files and trains from the seed; AUC
(scikit-learn's roc_auc_score of positives against negatives) and Hits@K are computed after every
epoch on the training graph, and a run reports the test figures of its best validation AUC epoch
(the first best), as PyG's example does.

Protocols (rows):
  pyg  PyG's examples/link_pred.py: features row-normalised (NormalizeFeatures), 2 x GCNConv (or
       SAGEConv('mean')) of --hidden, ReLU between, no dropout; FULL batch: each epoch is one step
       over every training edge plus as many negative pairs from torch_geometric's
       negative_sampling, BCE with logits, Adam(lr 0.01); 100 epochs. The graph is the training
       edges both ways (the example's test graph also holds the validation edges; here every
       split is scored on the training graph, as dsp does).
       dsp: --fanouts -1,-1 --batch-size <training edges> --exclude none --normalize-features row
       --negatives pairs (one step an epoch over whole neighbourhoods; negatives with both ends
       uniform, where negative_sampling also skips existing edges). --pyg-negatives destinations
       gives both systems negatives that keep the positive's source instead (dsp's default):
       with GCN and the dot predictor, full batch, both then collapse on Amazon Photo (every score
       equal, AUC 0.5, from about epoch 8) where pairs keep learning.
  dgl  DGL's mini-batch loop (user guide 6.3, examples/pytorch/graphsage/link_pred.py):
       as_edge_prediction_sampler(NeighborSampler([10, 10]), exclude='reverse_id',
       negative_sampler=Uniform(1)), DataLoader(batch 512, shuffle) over the training edges, 2 x
       SAGEConv('mean') of --hidden, ReLU between, no dropout, Adam(lr 0.01), 20 epochs; after each
       epoch full-neighbour layer-wise inference scores the held-out pairs.
       dsp: --fanouts 10,10 --batch-size 512 --exclude reverse.
  pygmb PyG's mini-batch loop (its LinkNeighborLoader; needs pyg-lib, or torch_sparse with
       torch_scatter, whose PyPI sources build against the venv's torch: pip install
       --no-build-isolation torch-scatter torch-sparse): the training edges as edge_label_index,
       num_neighbors [10, 10] (--dgl-fanouts), batches of 512 positives with one 'binary'
       negative each (both ends uniform), shuffled; the stack of SAGEConv('mean') over each
       batch's subgraph (raw features), the pairs scored at edge_label_index, BCE, Adam(lr 0.01),
       20 epochs; every split scored after each epoch on the whole training graph.
       LinkNeighborLoader keeps the batch's own edges in its subgraph.
       dsp: --fanouts 10,10 --batch-size 512 --exclude none --negatives pairs.
  ogb  OGB's featureless protocol (ogbl-ddi's example, full-batch SAGE + MLP predictor): the
       graph's features dropped, a learnt embedding of --hidden per node (uniform +-0.1),
       2 x SAGEConv('mean') over the whole training graph every step, ReLU between, no dropout,
       MLP predictor, batches of 1024 positive edges with one uniform negative destination each,
       Adam(lr 0.01) over everything (dsp: sparse Adam of --embedding-lr 0.01 for the rows),
       20 epochs. dsp: --fanouts -1,-1 --exclude none --embedding-dim <hidden>.
Weights: --peer-init dsp (default) starts the peers' encoders as dsp's layers start (LibTorch
Linear's init, biases zero), so that a difference is the loop's; --peer-init own keeps the peers'
(PyG's GCNConv: glorot; DGL's SAGEConv: xavier).
Depth, width and rate: --layers (2), --hidden (128), --lr (0.01) for every protocol ("2 x" above
is --layers); DGL's own example (examples/pytorch/graphsage/link_pred.py: 3 layers of 256, fanouts
15,10,5, lr 0.0005, an MLP predictor) is `--rows dgl/sage/mlp --layers 3 --hidden 256 --lr 0.0005
--dgl-fanouts 15,10,5` (its MLP has one more hidden layer than dsp's, used by both here).
Row names: protocol/model/predictor, e.g. pyg/gcn/dot (PyG's example as it is), pyg/sage/mlp,
dgl/sage/dot, dgl/sage/mlp, ogb/sage/mlp. The MLP predictor: Linear(h, h), ReLU, Linear(h, 1)
over the two rows' product (dsp's --predictor mlp).

Run with the DGL venv's python after `pip install torch_geometric==2.5.3` into it, e.g.
  python scripts/peers/link_parity_table.py /tmp/lp/cora --rows pyg/gcn/dot,dgl/sage/dot \
      --seeds 0,1,2,3,4 --out cora.json --markdown cora.md
DATASET is a dsp dataset directory with features (dsp convert --from ogb
/work/shared/datasets/cora /tmp/lp/cora); the splits go to --work (default: DATASET + "-splits").
Prints one line per finished run to stderr; writes every run's curves to --out and a table (mean,
sample std, per-seed values of test AUC and Hits@K at the best validation AUC) to --markdown.
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile, time, warnings

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("datasets", nargs="+", metavar="DATASET")
ap.add_argument("--dsp", default="/work/main/build/tools/dsp")
ap.add_argument("--rows", default="pyg/gcn/dot,pyg/sage/mlp,dgl/sage/dot,dgl/sage/mlp")
ap.add_argument("--systems", default="dsp,peer",
                help="dsp, peer, and for the dgl protocol dsp-loader: DGL's model and loop fed by "
                     "dsp.LinkLoader's batches (to_dgl()), which tells dsp's batches from its "
                     "trainer (needs dsp's Python package on PYTHONPATH)")
ap.add_argument("--seeds", default="0,1,2,3,4")
ap.add_argument("--hidden", type=int, default=128)
ap.add_argument("--layers", type=int, default=2, help="every protocol's encoder depth")
ap.add_argument("--lr", type=float, default=0.01, help="every protocol's learning rate (Adam)")
ap.add_argument("--k", type=int, default=50, help="Hits@K")
ap.add_argument("--epochs", type=int, default=0, help="0: the protocol's (pyg 100, others 20)")
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--peer-init", choices=["dsp", "own"], default="dsp",
                help="the encoders' weights: dsp = as dsp's layers (LibTorch Linear's uniform "
                     "+-1/sqrt(fan_in), biases zero); own = the peer's (PyG's GCNConv glorot, "
                     "its SAGEConv's random bias; DGL's xavier)")
ap.add_argument("--work", help="where the per-seed splits go (default: DATASET-splits)")
ap.add_argument("--pyg-negatives", choices=["pairs", "destinations"], default="pairs",
                help="the pyg protocol's negatives: pairs = torch_geometric's negative_sampling "
                     "(both ends random, edges skipped: the example's); destinations = each "
                     "positive's source with a uniform destination (dsp's, DGL's Uniform)")
ap.add_argument("--dgl-exclude", choices=["reverse", "none"], default="reverse",
                help="the dgl protocol's exclusion: reverse (exclude='reverse_id', dsp --exclude "
                     "reverse) or none (both systems sample the batch's own edges)")
ap.add_argument("--dgl-fanouts", default="10,10",
                help="the dgl and pygmb protocols' fanouts (dsp's order: from the seeds out; -1 "
                     "for all)")
ap.add_argument("--out")
ap.add_argument("--markdown")
args = ap.parse_args()
os.environ["OMP_NUM_THREADS"] = str(args.threads)  # before torch is imported
os.environ["DGLBACKEND"] = "pytorch"
warnings.filterwarnings("ignore")

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import roc_auc_score

torch.set_num_threads(args.threads)
PROTOCOL_EPOCHS = {"pyg": 100, "pygmb": 20, "dgl": 20, "ogb": 20}
LR = args.lr
DGL_FANOUTS = [int(f) for f in args.dgl_fanouts.split(",")]
if len(DGL_FANOUTS) != args.layers:
    ap.error(f"--dgl-fanouts: one fanout per layer ({args.layers}, --layers)")
DGL_BATCH, OGB_BATCH = 512, 1024


# ---------------------------------------------------------------------------------------------
# Data: one split per seed, written by dsp, read by every system.

def split_dir(data, seed, featureless):
    work = args.work or data.rstrip("/") + "-splits"
    out = f"{work}/seed{seed}{'-nofeat' if featureless else ''}"
    if os.path.exists(f"{out}/dataset.json"):
        return out
    os.makedirs(work, exist_ok=True)
    indptr, indices = np.load(f"{data}/indptr.npy"), np.load(f"{data}/indices.npy")
    dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    keep = indices < dst  # each undirected edge once
    el = f"{work}/edges.txt"
    np.savetxt(el, np.stack([indices[keep], dst[keep]], 1), fmt="%d")
    cmd = [args.dsp, "convert", "--from", "edgelist", el, out, "--undirected", "--overwrite",
           "--num-nodes", str(len(indptr) - 1), "--link-split", "0.85,0.05,0.10",
           "--seed", str(seed)]
    if not featureless:
        cmd += ["--features", f"{data}/features.npy"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return out


def load(d):
    arr = lambda n: torch.from_numpy(np.load(f"{d}/{n}.npy")).long()
    meta = json.load(open(f"{d}/dataset.json"))
    indptr, indices = arr("indptr"), arr("indices")
    n = indptr.numel() - 1
    dst = torch.repeat_interleave(torch.arange(n), indptr.diff())
    feats = (torch.from_numpy(np.load(f"{d}/features.npy")).float()
             if meta.get("feature_dim", 0) else None)
    return dict(n=n, src=indices, dst=dst, indptr=indptr, indices=indices, x=feats,
                train=arr("link_train"), valid=arr("link_valid"), valid_neg=arr("link_valid_neg"),
                test=arr("link_test"), test_neg=arr("link_test_neg"))


def figures(score, D, split):
    """AUC and Hits@K of a split from a pair-scoring function (no grad)."""
    pos, neg = score(D[split]).numpy(), score(D[split + "_neg"]).numpy()
    auc = roc_auc_score(np.r_[np.ones(len(pos)), np.zeros(len(neg))], np.r_[pos, neg])
    kth = np.sort(neg)[::-1][args.k - 1]
    return {"auc": float(auc), f"hits@{args.k}": float((pos > kth).mean())}


def dsp_init(convs):
    """--peer-init dsp: every weight matrix of the encoder uniform in +-1/sqrt(fan_in) (LibTorch
    Linear's init, dsp's SAGE and GCN layers), every bias zero."""
    if args.peer_init != "dsp":
        return
    with torch.no_grad():
        for name, p in convs.named_parameters():
            if p.dim() == 2:
                bound = 1 / p.size(1) ** 0.5
                p.uniform_(-bound, bound)
            else:
                p.zero_()


class Mlp(torch.nn.Module):
    def __init__(self, h):
        super().__init__()
        self.a, self.b = torch.nn.Linear(h, h), torch.nn.Linear(h, 1)

    def forward(self, u, v):
        return self.b(F.relu(self.a(u * v))).squeeze(1)


def bce_step(opt, score, h, pos, neg):
    """One optimiser step of binary cross-entropy over the positive and negative pairs' logits."""
    logits = torch.cat([score(h, pos), score(h, neg)])
    y = torch.cat([torch.ones(pos.size(0)), torch.zeros(neg.size(0))])
    loss = F.binary_cross_entropy_with_logits(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()


def pair_scorer(predictor):
    mlp = Mlp(args.hidden) if predictor == "mlp" else None
    def score(h, pairs):
        u, v = h[pairs[:, 0]], h[pairs[:, 1]]
        return mlp(u, v) if mlp is not None else (u * v).sum(1)
    return score, mlp


# ---------------------------------------------------------------------------------------------
# PyG: the full-graph encoders (pyg and ogb protocols).

def run_pyg(D, model, predictor, seed, epochs, featureless):
    from torch_geometric.nn import GCNConv, SAGEConv
    from torch_geometric.utils import negative_sampling
    torch.manual_seed(seed)
    edge_index = torch.stack([D["src"], D["dst"]])  # the training graph, both ways
    if featureless:
        emb = torch.nn.Embedding(D["n"], args.hidden)
        torch.nn.init.uniform_(emb.weight, -0.1, 0.1)
        x_of = lambda: emb.weight
        in_dim = args.hidden
    else:
        x = D["x"] / D["x"].sum(1, keepdim=True).clamp(min=1)  # NormalizeFeatures
        x_of = lambda: x
        in_dim = x.size(1)
    Conv = (lambda i, o: GCNConv(i, o)) if model == "gcn" else (lambda i, o: SAGEConv(i, o))
    convs = torch.nn.ModuleList([Conv(in_dim if i == 0 else args.hidden, args.hidden)
                                 for i in range(args.layers)])
    dsp_init(convs)
    score, mlp = pair_scorer(predictor)
    params = list(convs.parameters()) + (list(mlp.parameters()) if mlp else [])
    params += list(emb.parameters()) if featureless else []
    opt = torch.optim.Adam(params, lr=LR)

    def encode():
        h = x_of()
        for i, conv in enumerate(convs):
            h = conv(h, edge_index)
            if i < len(convs) - 1:
                h = h.relu()
        return h

    train, curve = D["train"], []
    for epoch in range(epochs):
        if featureless:  # OGB: batches of positives, a uniform negative destination each
            perm = torch.randperm(train.size(0))
            batches = [train[perm[s:s + OGB_BATCH]] for s in range(0, train.size(0), OGB_BATCH)]
        else:  # PyG's example: one step over every training edge
            batches = [train]
        for pos in batches:
            if featureless or args.pyg_negatives == "destinations":
                neg = torch.stack([pos[:, 0], torch.randint(0, D["n"], (pos.size(0),))], 1)
            else:
                neg = negative_sampling(edge_index, num_nodes=D["n"],
                                        num_neg_samples=pos.size(0), method="sparse").t()
            bce_step(opt, score, encode(), pos, neg)
        with torch.no_grad():
            h = encode()
            f = lambda pairs: score(h, pairs)
            curve.append({"val": figures(f, D, "valid"), "test": figures(f, D, "test")})
    return curve


def run_pyg_minibatch(D, model, predictor, seed, epochs):
    """PyG's mini-batch link loop: LinkNeighborLoader over the training edges."""
    from torch_geometric.data import Data
    from torch_geometric.loader import LinkNeighborLoader
    from torch_geometric.nn import SAGEConv
    assert model == "sage", "the pygmb protocol trains SAGE"
    torch.manual_seed(seed)
    edge_index = torch.stack([D["src"], D["dst"]])  # the training graph, both ways
    data = Data(x=D["x"], edge_index=edge_index, num_nodes=D["n"])
    loader = LinkNeighborLoader(data, num_neighbors=DGL_FANOUTS, edge_label_index=D["train"].t(),
                                neg_sampling="binary", batch_size=DGL_BATCH, shuffle=True)
    convs = torch.nn.ModuleList([SAGEConv(D["x"].size(1) if i == 0 else args.hidden, args.hidden)
                                 for i in range(args.layers)])
    dsp_init(convs)
    score, mlp = pair_scorer(predictor)
    opt = torch.optim.Adam(list(convs.parameters()) + (list(mlp.parameters()) if mlp else []),
                           lr=LR)

    def encode(x, ei):
        h = x
        for i, conv in enumerate(convs):
            h = conv(h, ei)
            if i < len(convs) - 1:
                h = h.relu()
        return h

    curve = []
    for epoch in range(epochs):
        for b in loader:
            h = encode(b.x, b.edge_index)
            logits = score(h, b.edge_label_index.t())
            loss = F.binary_cross_entropy_with_logits(logits, b.edge_label.float())
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            h = encode(D["x"], edge_index)
            f = lambda pairs: score(h, pairs)
            curve.append({"val": figures(f, D, "valid"), "test": figures(f, D, "test")})
    return curve


# ---------------------------------------------------------------------------------------------
# DGL: the mini-batch loop.

def run_dgl(D, model, predictor, seed, epochs, dsp_batches=None):
    """DGL's loop; with dsp_batches (a dataset directory), the same model and steps fed by
    dsp.LinkLoader's batches of it (to_dgl()) instead of DGL's own loader."""
    import dgl, dgl.nn as dglnn
    assert model == "sage", "the dgl protocol trains SAGE"
    torch.manual_seed(seed)
    dgl.seed(seed)
    g = dgl.graph(("csc", (D["indptr"], D["indices"], torch.tensor([], dtype=torch.int64))),
                  num_nodes=D["n"])
    train_eids = g.edge_ids(D["train"][:, 0], D["train"][:, 1])
    u, v = g.edges()
    reverse = g.edge_ids(v, u)
    x = D["x"]
    convs = torch.nn.ModuleList([dglnn.SAGEConv(x.size(1) if i == 0 else args.hidden, args.hidden,
                                                "mean") for i in range(args.layers)])
    dsp_init(convs)
    score, mlp = pair_scorer(predictor)
    opt = torch.optim.Adam(list(convs.parameters()) + (list(mlp.parameters()) if mlp else []),
                           lr=LR)
    exclude = (dict(exclude="reverse_id", reverse_eids=reverse)
               if args.dgl_exclude == "reverse" else {})
    sampler = dgl.dataloading.as_edge_prediction_sampler(
        dgl.dataloading.NeighborSampler(list(reversed(DGL_FANOUTS))),
        negative_sampler=dgl.dataloading.negative_sampler.Uniform(1), **exclude)
    loader = dgl.dataloading.DataLoader(g, train_eids, sampler, batch_size=DGL_BATCH,
                                        shuffle=True, drop_last=False, num_workers=0)
    batches = lambda: ((input_nodes, pos_g, neg_g, blocks, x[input_nodes])
                       for input_nodes, pos_g, neg_g, blocks in loader)
    if dsp_batches:
        import dsp
        link_loader = dsp.LinkLoader(dsp_batches, fanouts=DGL_FANOUTS, batch_size=DGL_BATCH,
                                     exclude=args.dgl_exclude, seed=seed)
        batches = lambda: ((b.input_nodes, *b.to_dgl(), b.x) for b in link_loader)
    full = dgl.dataloading.MultiLayerFullNeighborSampler(1)
    curve = []
    for epoch in range(epochs):
        for input_nodes, pos_g, neg_g, blocks, h in batches():
            for i, (conv, block) in enumerate(zip(convs, blocks)):
                h = conv(block, h)
                if i < len(convs) - 1:
                    h = F.relu(h)
            bce_step(opt, score, h, torch.stack(pos_g.edges(), 1), torch.stack(neg_g.edges(), 1))
        with torch.no_grad():  # layer-wise inference over whole neighbourhoods
            h = x
            for i, conv in enumerate(convs):
                nodes = torch.arange(D["n"])
                _, _, (block,) = full.sample_blocks(g, nodes)
                h = conv(block, h)
                if i < len(convs) - 1:
                    h = F.relu(h)
            f = lambda pairs: score(h, pairs)
            curve.append({"val": figures(f, D, "valid"), "test": figures(f, D, "test")})
    return curve


# ---------------------------------------------------------------------------------------------
# dsp

def run_dsp(d, protocol, model, predictor, seed, epochs, n_train):
    with tempfile.TemporaryDirectory(prefix="lparity-") as tmp:
        cmd = [args.dsp, "train", d, "--task", "link", "--model", model, "--predictor", predictor,
               "--layers", str(args.layers), "--hidden", str(args.hidden), "--lr", str(LR), "--dropout", "0",
               "--weight-decay", "0", "--epochs", str(epochs), "--seed", str(seed),
               "--threads", str(args.threads), "--metric", "rocauc", "--hits-k", str(args.k),
               "--eval", "full", "--metrics", f"{tmp}/m.jsonl", "--result", f"{tmp}/r.json",
               "--checkpoint-dir", f"{tmp}/ck", "--no-progress"]
        if protocol == "pyg":
            cmd += ["--fanouts", "-1,-1", "--batch-size", str(n_train), "--exclude", "none",
                    "--normalize-features", "row", "--negatives",
                    "pairs" if args.pyg_negatives == "pairs" else "uniform"]
        elif protocol == "dgl":
            cmd += ["--fanouts", ",".join(map(str, DGL_FANOUTS)), "--batch-size", str(DGL_BATCH),
                    "--exclude", args.dgl_exclude]
        elif protocol == "pygmb":
            cmd += ["--fanouts", ",".join(map(str, DGL_FANOUTS)), "--batch-size", str(DGL_BATCH),
                    "--exclude", "none", "--negatives", "pairs"]
        else:
            cmd += ["--fanouts", "-1,-1", "--batch-size", str(OGB_BATCH), "--exclude", "none",
                    "--embedding-dim", str(args.hidden), "--embedding-lr", str(LR)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr}")
        recs = [json.loads(l) for l in open(f"{tmp}/m.jsonl")]
        result = json.load(open(f"{tmp}/r.json"))
        key = f"hits@{args.k}"
        curve = [{s: {"auc": r[s]["auc"], key: r[s][key]} for s in ("val", "test")}
                 for r in recs if "val" in r]
        best = pick(curve)
        assert abs(result["test_acc_at_best"] - curve[best]["test"]["auc"]) < 1e-9, \
            "dsp's own choice differs from the curve's"
        return curve


def pick(curve):
    """The epoch of the best validation AUC (the first best)."""
    vals = [c["val"]["auc"] for c in curve]
    return vals.index(max(vals))


def main():
    rows = [r.split("/") for r in args.rows.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    systems = args.systems.split(",")
    if "dsp-loader" in systems and any(protocol != "dgl" for protocol, _, _ in rows):
        ap.error("--systems dsp-loader: the dgl protocol's rows only")
    runs = []
    for data in args.datasets:
        name = os.path.basename(data.rstrip("/"))
        for protocol, model, predictor in rows:
            epochs = args.epochs or PROTOCOL_EPOCHS[protocol]
            for seed in seeds:
                d = split_dir(data, seed, featureless=protocol == "ogb")
                D = load(d)
                for system in systems:
                    t0 = time.time()
                    if system == "dsp":
                        curve = run_dsp(d, protocol, model, predictor, seed, epochs,
                                        D["train"].size(0))
                    elif protocol == "pygmb":
                        curve = run_pyg_minibatch(D, model, predictor, seed, epochs)
                    elif protocol == "dgl":
                        curve = run_dgl(D, model, predictor, seed, epochs,
                                        d if system == "dsp-loader" else None)
                    else:
                        curve = run_pyg(D, model, predictor, seed, epochs, protocol == "ogb")
                    best = pick(curve)
                    run = dict(dataset=name, row=f"{protocol}/{model}/{predictor}",
                               system=system, seed=seed, best_epoch=best + 1,
                               test=curve[best]["test"], val=curve[best]["val"], curve=curve,
                               seconds=time.time() - t0)
                    runs.append(run)
                    print(f"{name} {run['row']} {system} seed {seed}: test auc "
                          f"{run['test']['auc']:.4f} hits@{args.k} "
                          f"{run['test'][f'hits@{args.k}']:.4f} (epoch {best + 1}, "
                          f"{run['seconds']:.0f} s)", file=sys.stderr, flush=True)
                    if args.out:
                        json.dump(runs, open(args.out, "w"))
    if args.markdown:
        open(args.markdown, "w").write(table(runs))


def table(runs):
    key = f"hits@{args.k}"
    lines = [f"| dataset | row | system | test AUC mean +- std | test Hits@{args.k} mean +- std "
             f"| per seed (AUC) |", "|---|---|---|---|---|---|"]
    groups = {}
    for r in runs:
        groups.setdefault((r["dataset"], r["row"], r["system"]), []).append(r)
    for (ds, row, system), rs in groups.items():
        auc = [r["test"]["auc"] for r in rs]
        hits = [r["test"][key] for r in rs]
        sd = lambda xs: statistics.stdev(xs) if len(xs) > 1 else 0.0
        lines.append(f"| {ds} | {row} | {system} | {statistics.mean(auc):.4f} +- {sd(auc):.4f} | "
                     f"{statistics.mean(hits):.4f} +- {sd(hits):.4f} | "
                     f"{' / '.join(f'{a:.3f}' for a in auc)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
