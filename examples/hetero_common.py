"""Shared by the heterogeneous examples: the data (a partition directory, made from a dataset
directory or generated when none is given), the loaders and the training loop (Adam, accuracy on
the valid and test papers after every epoch, the test accuracy at the best valid epoch), so that
each example shows only its model and how it reads one dsp batch.
"""
import os
import sys
import tempfile

import torch

import dsp

FANOUTS, EVAL_FANOUTS = [10, 10], [20, 20]


def data_dir(argv):
    """A partition directory: argv[1], or its dataset directory partitioned into one part, or a
    MAG-shaped graph generated and partitioned in a temporary directory."""
    tmp = tempfile.mkdtemp()
    data = argv[1] if len(argv) > 1 else os.path.join(tmp, "mag")
    if len(argv) <= 1:
        info = dsp.generate_hetero(data, papers=20000, seed=1)
        print(f"generated {data}: accuracy bound {info['extra']['accuracy_bound']}")
    if os.path.exists(os.path.join(data, "partition.json")):
        return data
    dsp.partition(data, os.path.join(tmp, "p1"), parts=1)
    return os.path.join(tmp, "p1")


def fit(model, train, evals, epochs, lr=0.01):
    """Trains `model(batch) -> logits of the seeds`; returns (best val, test at best val)."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)

    def accuracy(loader):
        model.eval()
        right = 0
        with torch.no_grad():
            for b in loader.iter_batches():
                right += int((model(b).argmax(1) == b.y).sum())
        return right / max(1, len(loader.local_seeds))

    best_val = test_at_best = 0.0
    for epoch in range(epochs):
        model.train()
        for b in train.iter_batches():
            loss = torch.nn.functional.cross_entropy(model(b), b.y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        val, test = accuracy(evals["valid"]), accuracy(evals["test"])
        if val > best_val:
            best_val, test_at_best = val, test
        print(f"epoch {epoch:2d} loss {loss.item():.4f} val {val:.3f} test {test:.3f}", flush=True)
    print(f"best val {best_val:.3f} test at best val {test_at_best:.3f}")
    return best_val, test_at_best


def main(make_model, argv=sys.argv):
    """`python EXAMPLE.py [DATA_DIR] [EPOCHS]`: make_model(schema) trained on one process."""
    data = data_dir(argv)
    train = dsp.Loader(data, fanouts=FANOUTS, batch_size=256, seed=0)
    evals = {s: dsp.Loader(data, fanouts=EVAL_FANOUTS, batch_size=1024, split=s, shuffle=False)
             for s in ("valid", "test")}
    torch.manual_seed(0)
    model = make_model(train.schema)
    with torch.no_grad():  # lazy layers (PyG's -1 sizes) take their shapes from one batch
        model(next(train.iter_batches()))
    return fit(model, train, evals, epochs=int(argv[2]) if len(argv) > 2 else 10)


def type_inputs(schema, hidden):
    """Per node type: a projection of its features, or a learned vector for a type without."""
    featured = {t: d for t, d in schema.feature_dims.items() if d}
    proj = torch.nn.ModuleDict({t: torch.nn.Linear(d, hidden) for t, d in featured.items()})
    learned = torch.nn.ParameterDict({t: torch.nn.Parameter(torch.randn(hidden) * 0.1)
                                      for t in schema.node_types if t not in featured})
    return proj, learned


def embed(proj, learned, x_dict, counts):
    """Every input node's first hidden vector; counts: {type: its input nodes}."""
    h = {t: lin(x_dict[t]) for t, lin in proj.items()}
    h.update({t: v.expand(counts[t], -1) for t, v in learned.items()})
    return h
