"""Shared by the examples: the default data (Cora, converted from tests/data/cora), the loaders,
a stack of layers run block by block, and the training loop (Adam, accuracy on the valid and test
splits after every epoch, the test accuracy at the best valid epoch), so that each example shows
only its layers and how one of them runs on one dsp block.
"""
import os
import sys
import tempfile

import torch

import dsp

CORA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "cora")


def data_dir(argv):
    """argv[1] (a dsp dataset or partition directory), or Cora converted into a temporary one."""
    if len(argv) > 1:
        return argv[1]
    out = os.path.join(tempfile.mkdtemp(), "cora")
    dsp.convert_ogb(CORA, out)
    return out


def loaders(data, batch_size=32, fanouts=(10, 10), eval_fanouts=(20, 20), **kw):
    """The training loader and one evaluation loader per split (this rank's seeds of each)."""
    train = dsp.Loader(data, fanouts=fanouts, batch_size=batch_size, seed=0, **kw)
    evals = {s: dsp.Loader(data, fanouts=eval_fanouts, batch_size=512, split=s, shuffle=False,
                           **kw) for s in ("valid", "test")}
    return train, evals


def normalise(x):
    """Cora's features are bags of words: rows scaled to sum 1."""
    return x / x.sum(1, keepdim=True).clamp(min=1)


class BlockStack(torch.nn.Module):
    """`layers[i]` runs on `blocks[i]` (blocks[0] is the input layer), ReLU and dropout between
    them; subclasses say how one layer runs on one block (`layer`)."""

    def __init__(self, layers, dropout=0.5):
        super().__init__()
        self.layers = torch.nn.ModuleList(layers)
        self.dropout = dropout

    def layer(self, layer, block, h):
        return layer(block, h)

    def forward(self, blocks, x):
        h = normalise(x)
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = self.layer(layer, block, h)
            if i < len(self.layers) - 1:
                h = torch.nn.functional.dropout(h.relu(), self.dropout, self.training)
        return h


def make_model(model_class, make_layer, loader, hidden=64):
    """model_class([make_layer(in, out) per layer]) for the loader's features and classes."""
    torch.manual_seed(0)
    dims = [loader.num_features, hidden, loader.num_classes]
    return model_class([make_layer(a, b) for a, b in zip(dims, dims[1:])])


def main(model_class, make_layer, argv=sys.argv):
    """`python EXAMPLE.py [DATA_DIR] [EPOCHS]`: trains on one process."""
    train, evals = loaders(data_dir(argv))
    model = make_model(model_class, make_layer, train)
    return fit(model, train, evals, epochs=int(argv[2]) if len(argv) > 2 else 30)


def fit(model, train, evals, epochs, device="cpu", eval_model=None, all_reduce=None, log=print):
    """Trains `model(blocks, x) -> logits of the seeds`; returns (best val, test at best val).

    all_reduce(tensor) sums a tensor over the ranks in place (data-parallel runs), so that every
    rank reports the accuracy over all ranks' seeds.
    """
    eval_model = eval_model or model
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)

    def accuracy(loader):
        eval_model.eval()
        counts = torch.tensor([0.0, float(len(loader.local_seeds))])
        with torch.no_grad():
            for blocks, x, y in loader:
                counts[0] += (eval_model(blocks, x.to(device)).argmax(1).cpu() == y).sum()
        if all_reduce:
            all_reduce(counts)
        return (counts[0] / counts[1].clamp(min=1)).item()

    best_val = test_at_best = 0.0
    for epoch in range(epochs):
        model.train()
        for blocks, x, y in train:
            logits = model(blocks, x.to(device, non_blocking=True))
            loss = torch.nn.functional.cross_entropy(logits, y.to(device, non_blocking=True))
            opt.zero_grad()
            loss.backward()
            opt.step()
        val, test = accuracy(evals["valid"]), accuracy(evals["test"])
        if val > best_val:
            best_val, test_at_best = val, test
        log(f"epoch {epoch:2d} loss {loss.item():.4f} val {val:.3f} test {test:.3f}")
    log(f"best val {best_val:.3f} test at best val {test_at_best:.3f}")
    return best_val, test_at_best
