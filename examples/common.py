"""Shared by the examples: the command line, the default data (Cora, converted from
tests/data/cora), the loaders, a stack of layers run block by block, and the training loop (Adam,
accuracy on the valid and test splits after every epoch, the test accuracy at the best valid
epoch), so that each example shows only its layers and how one of them runs on one dsp block.

    python EXAMPLE.py [DATA_DIR] [EPOCHS] [--normalize-features none|row]

The model sees the features as the dataset stores them, except on the datasets whose reference
examples row-normalise them (ROW_NORMALISED: Cora's bags of words); --normalize-features chooses.
"""
import argparse
import json
import os
import sys
import tempfile

import torch

import dsp

CORA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "cora")


# The datasets whose features the examples row-normalise by default: the Planetoid citation
# graphs' bags of words, which PyG's examples load with NormalizeFeatures() and DGL's datasets
# row-normalise (dataset.json's name; a partition's dataset_name).
ROW_NORMALISED = ("cora", "citeseer", "pubmed")


def parse_args(argv):
    """The examples' command line (argv[0] is the script)."""
    p = argparse.ArgumentParser(prog=os.path.basename(argv[0]))
    p.add_argument("data", nargs="?", help="a dsp dataset or partition directory (default: Cora, "
                   "converted into a temporary directory)")
    p.add_argument("epochs", nargs="?", type=int, default=30)
    p.add_argument("--normalize-features", choices=("none", "row"),
                   help="row: each feature row over its sum (PyG's NormalizeFeatures); default: "
                   f"row for {', '.join(ROW_NORMALISED)}, none for other datasets")
    return p.parse_args(argv[1:])


def data_dir(path=None):
    """`path` (a dsp dataset or partition directory), or Cora converted into a temporary one."""
    if path:
        return path
    out = os.path.join(tempfile.mkdtemp(), "cora")
    dsp.convert_ogb(CORA, out)
    return out


def dataset_name(data):
    """The name of the dataset of a dataset or partition directory ("" if it has none)."""
    for file, key in (("partition.json", "dataset_name"), ("dataset.json", "name")):
        path = os.path.join(data, file)
        if os.path.exists(path):
            with open(path) as f:
                return str(json.load(f).get(key, ""))
    return ""


def feature_normalisation(data, choice=None):
    """`choice` ("none" or "row"), or by default the one the dataset's reference examples use."""
    if choice is not None:
        return choice
    return "row" if dataset_name(data).lower() in ROW_NORMALISED else "none"


def loaders(data, batch_size=32, fanouts=(10, 10), eval_fanouts=(20, 20), **kw):
    """The training loader and one evaluation loader per split (this rank's seeds of each)."""
    train = dsp.Loader(data, fanouts=fanouts, batch_size=batch_size, seed=0, **kw)
    evals = {s: dsp.Loader(data, fanouts=eval_fanouts, batch_size=512, split=s, shuffle=False,
                           **kw) for s in ("valid", "test")}
    return train, evals


def normalise(x, how):
    """`x` as the model sees it: "row" scales each row to sum 1 (bags of words), "none" keeps it."""
    return x / x.sum(1, keepdim=True).clamp(min=1) if how == "row" else x


class BlockStack(torch.nn.Module):
    """`layers[i]` runs on `blocks[i]` (blocks[0] is the input layer), ReLU and dropout between
    them, the input features normalised as `normalize` says (`normalise`); subclasses say how
    one layer runs on one block (`layer`)."""

    def __init__(self, layers, dropout=0.5, normalize="none"):
        super().__init__()
        if normalize not in ("none", "row"):
            raise ValueError(f"normalize must be 'none' or 'row', got {normalize!r}")
        self.layers = torch.nn.ModuleList(layers)
        self.dropout = dropout
        self.normalize = normalize

    def layer(self, layer, block, h):
        return layer(block, h)

    def forward(self, blocks, x):
        h = normalise(x, self.normalize)
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = self.layer(layer, block, h)
            if i < len(self.layers) - 1:
                h = torch.nn.functional.dropout(h.relu(), self.dropout, self.training)
        return h


def make_model(model_class, make_layer, loader, hidden=64, normalize="none"):
    """model_class([make_layer(in, out) per layer], normalize=normalize) for the loader's
    features and classes."""
    torch.manual_seed(0)
    dims = [loader.num_features, hidden, loader.num_classes]
    return model_class([make_layer(a, b) for a, b in zip(dims, dims[1:])], normalize=normalize)


def main(model_class, make_layer, argv=sys.argv):
    """`python EXAMPLE.py [DATA_DIR] [EPOCHS] [--normalize-features none|row]`: trains on one
    process."""
    args = parse_args(argv)
    data = data_dir(args.data)
    normalize = feature_normalisation(data, args.normalize_features)
    print(f"features: {normalize} normalisation")
    train, evals = loaders(data)
    model = make_model(model_class, make_layer, train, normalize=normalize)
    return fit(model, train, evals, epochs=args.epochs)


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
