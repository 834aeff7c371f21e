"""Link prediction in plain PyTorch on dsp.LinkLoader: GraphSAGE over learnable node embeddings
(and the features, if the dataset has any), a dot-product predictor, and the held-out Hits@50.

    dsp generate community --link-split 0.85,0.05,0.10 -f 0 -c 0 -k 8 -n 2000 -m 20000 OUT
    python examples/link_torch.py OUT [EPOCHS]
OUT: a dsp dataset or partition directory with a link split (link_train.npy, link_valid.npy,
link_valid_neg.npy, ...). Each LinkBatch's pairs index its seeds, the rows of the model's output;
a featureless dataset gives x of width 0, so the nodes' own vectors come from an nn.Embedding
indexed by batch.input_nodes. Evaluation embeds every node with dsp.Loader(split="all") (sampled
neighbourhoods) and ranks each held-out edge against the split's shared negatives, as OGB does.
"""
import os
import sys

import numpy as np
import torch

import dsp
from train_sage import MeanSAGEConv

HITS_K = 50


class Encoder(torch.nn.Module):
    """Embedding of each input node (concatenated with its features), then SAGE layers."""

    def __init__(self, num_nodes, num_features, dim=64, layers=2):
        super().__init__()
        self.emb = torch.nn.Embedding(num_nodes, dim)
        torch.nn.init.normal_(self.emb.weight, std=0.1)
        dims = [dim + num_features] + [dim] * layers
        self.convs = torch.nn.ModuleList(MeanSAGEConv(a, b) for a, b in zip(dims, dims[1:]))

    def forward(self, blocks, x, input_nodes):
        h = torch.cat([self.emb(input_nodes), x], 1)
        for i, (conv, block) in enumerate(zip(self.convs, blocks)):
            h = conv(block, h)
            if i < len(self.convs) - 1:
                h = h.relu()
        return h


def train_epoch(model, loader, opt):
    model.train()
    total = count = 0
    for batch in loader:
        h = model(batch.blocks, batch.x, batch.input_nodes)
        src, dst, label = batch.pairs
        logits = (h[src] * h[dst]).sum(1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, label)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total, count = total + loss.item() * len(label), count + len(label)
    return total / max(count, 1)


@torch.no_grad()
def embed_all(model, loader, num_nodes):
    """Every node's output (partition ids), from loader's sampled neighbourhoods."""
    model.eval()
    out = None
    for b in loader.iter_batches():
        h = model(b.blocks, b.x, b.input_nodes)
        if out is None:
            out = torch.zeros(num_nodes, h.shape[1])
        out[b.seeds] = h
    return out


def hits_at_k(h, pos, neg, k=HITS_K):
    """OGB's Hits@K: the share of held-out edges scoring above the K-th best negative."""
    def score(e):
        e = torch.from_numpy(np.asarray(e))
        return (h[e[:, 0]] * h[e[:, 1]]).sum(1)

    kth = score(neg).topk(min(k, len(neg))).values[-1]
    return (score(pos) > kth).float().mean().item()


def main(argv):
    path = argv[1]
    epochs = int(argv[2]) if len(argv) > 2 else 10
    train = dsp.LinkLoader(path, fanouts=[10, 10], batch_size=512, neg_ratio=1, seed=0)
    # The loader's partition (made on the fly for a dataset directory): its ids are the
    # batches', and it holds the held-out edges renumbered into them.
    part = train.partition_dir
    everything = dsp.Loader(part, fanouts=[20, 20], batch_size=1024, split="all", shuffle=False)
    held_out = {s: (np.load(os.path.join(part, f"link_{s}.npy")),
                    np.load(os.path.join(part, f"link_{s}_neg.npy"))) for s in ("valid", "test")}
    num_nodes = int(train.meta["num_nodes"])
    torch.manual_seed(0)
    model = Encoder(num_nodes, train.num_features)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    best_val = test_at_best = 0.0
    for epoch in range(epochs):
        loss = train_epoch(model, train, opt)
        h = embed_all(model, everything, num_nodes)
        val, test = (hits_at_k(h, *held_out[s]) for s in ("valid", "test"))
        if val > best_val:
            best_val, test_at_best = val, test
        print(f"epoch {epoch:2d} loss {loss:.4f} val hits@{HITS_K} {val:.3f} "
              f"test hits@{HITS_K} {test:.3f}", flush=True)
    print(f"best val hits@{HITS_K} {best_val:.3f} test hits@{HITS_K} at best val "
          f"{test_at_best:.3f}")


if __name__ == "__main__":
    main(sys.argv)
