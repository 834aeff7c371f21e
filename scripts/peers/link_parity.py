"""PyG's side of a link-prediction comparison on a dsp dataset directory (a reference, not a test).

OGB's full-batch protocol (ogbl-ddi's example): a learnt embedding per node (uniform in
[-0.1, 0.1), as dsp's --embedding-init-scale), --layers SAGEConv('mean') layers of --hidden over the
training edges in both directions (link_train.npy), ReLU and dropout between them, the dot product
of two output rows as the logit (or --predictor mlp); per step --batch positive training edges, one
uniform negative destination each (source kept), binary cross-entropy, Adam(lr, weight_decay) over the embedding and
the layers together. After every epoch Hits@K of link_valid/test against link_valid_neg/test_neg
(above the K-th highest negative score: OGB's definition, as dsp's evaluator).
Run with a Python that has torch_geometric (scripts/ci/test-python.sh's test venv has 2.5.3), e.g.
  python scripts/peers/link_parity.py g --layers 2 --epochs 3
and compare with `dsp train g --task link --epochs 3` (docs/benchmarks.md, "Link prediction's
defaults"). Full-batch: every step runs the model over the whole graph (minutes an epoch on
2 cores for 20k nodes).
"""
import argparse
import time

import numpy as np
import torch
from torch_geometric.nn import SAGEConv

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("data", help="dsp dataset directory with link_*.npy (dsp generate --link-split)")
ap.add_argument("--layers", type=int, default=2)
ap.add_argument("--hidden", type=int, default=128)
ap.add_argument("--dropout", type=float, default=0.0)
ap.add_argument("--wd", type=float, default=0.0, help="Adam's weight_decay")
ap.add_argument("--lr", type=float, default=0.01)
ap.add_argument("--epochs", type=int, default=3)
ap.add_argument("--batch", type=int, default=1024, help="positive training edges per step")
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--k", type=int, default=50, help="Hits@K")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--predictor", choices=["dot", "mlp"], default="dot",
                help="mlp: Linear(hidden, hidden), ReLU, Linear(hidden, 1) over the rows' product "
                     "(dsp's --predictor mlp)")
a = ap.parse_args()
torch.manual_seed(a.seed)
torch.set_num_threads(a.threads)


def load(name):
    return torch.from_numpy(np.load(f"{a.data}/{name}.npy")).long()


train, valid, valid_neg = load("link_train"), load("link_valid"), load("link_valid_neg")
test, test_neg = load("link_test"), load("link_test_neg")
n = int(np.load(f"{a.data}/indptr.npy").shape[0] - 1)
edge_index = torch.cat([train.t(), train.t().flip(0)], 1)  # the training edges, both ways
emb = torch.nn.Embedding(n, a.hidden)
torch.nn.init.uniform_(emb.weight, -0.1, 0.1)
convs = torch.nn.ModuleList([SAGEConv(a.hidden, a.hidden) for _ in range(a.layers)])
mlp = torch.nn.Sequential(torch.nn.Linear(a.hidden, a.hidden), torch.nn.ReLU(),
                          torch.nn.Linear(a.hidden, 1))
params = list(emb.parameters()) + list(convs.parameters())
if a.predictor == "mlp":
    params += list(mlp.parameters())
opt = torch.optim.Adam(params, lr=a.lr, weight_decay=a.wd)


def encode(training):
    h = emb.weight
    for i, conv in enumerate(convs):
        h = conv(h, edge_index)
        if i < a.layers - 1:
            h = torch.nn.functional.dropout(h.relu(), a.dropout, training)
    return h


def score(h, pairs):
    prod = h[pairs[:, 0]] * h[pairs[:, 1]]
    return mlp(prod).squeeze(1) if a.predictor == "mlp" else prod.sum(1)


def hits(h, pos, neg):
    threshold = torch.topk(score(h, neg), a.k).values[-1]
    return (score(h, pos) > threshold).float().mean().item()


for epoch in range(a.epochs):
    t0 = time.time()
    perm = torch.randperm(train.size(0))
    total, steps = 0.0, 0
    for s in range(0, train.size(0), a.batch):
        pos = train[perm[s:s + a.batch]]
        neg = torch.randint(0, n, pos.shape)
        neg[:, 0] = pos[:, 0]
        h = encode(True)
        logits = torch.cat([score(h, pos), score(h, neg)])
        labels = torch.cat([torch.ones(pos.size(0)), torch.zeros(neg.size(0))])
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total, steps = total + loss.item(), steps + 1
    with torch.no_grad():
        h = encode(False)
        print(f"epoch {epoch + 1} loss {total / steps:.4f} val hits@{a.k} "
              f"{hits(h, valid, valid_neg):.4f} test hits@{a.k} {hits(h, test, test_neg):.4f} "
              f"{time.time() - t0:.1f} s", flush=True)
