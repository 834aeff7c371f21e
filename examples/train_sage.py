"""GraphSAGE in plain PyTorch on dsp's sampler and loader (Cora: about 0.80 test accuracy).

    PYTHONPATH=build/python /usr/bin/python3 examples/train_sage.py [DATA_DIR] [EPOCHS]
DATA_DIR: a dsp dataset or partition directory (default: Cora converted from tests/data/cora).
"""
import os, sys, tempfile
import torch
import dsp

data = sys.argv[1] if len(sys.argv) > 1 else None
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 30
if data is None:  # convert the Cora copy shipped with the tests
    data = os.path.join(tempfile.mkdtemp(), "cora")
    dsp.convert_ogb(os.path.join(os.path.dirname(__file__), "..", "tests", "data", "cora"), data)

class SAGE(torch.nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.self_lin = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in zip(dims, dims[1:]))
        self.nbr_lin = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in zip(dims, dims[1:]))

    def forward(self, blocks, h):
        h = h / h.sum(1, keepdim=True).clamp(min=1)  # row-normalised bag of words
        for i, b in enumerate(blocks):  # blocks[0] is the input layer
            deg = b.indptr.diff()
            dst = torch.repeat_interleave(torch.arange(b.num_dst), deg)
            mean = torch.zeros(b.num_dst, h.shape[1]).index_add_(0, dst, h[b.indices])
            h = self.self_lin[i](h[:b.num_dst]) + self.nbr_lin[i](mean / deg.clamp(min=1)[:, None])
            if i < len(blocks) - 1:
                h = torch.nn.functional.dropout(h.relu(), 0.5, self.training)
        return h

train = dsp.Loader(data, fanouts=[10, 10], batch_size=32, seed=0)
evals = {s: dsp.Loader(data, fanouts=[20, 20], batch_size=512, split=s, shuffle=False)
         for s in ("valid", "test")}
torch.manual_seed(0)
model = SAGE([train.num_features, 64, train.num_classes])
opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)

def accuracy(loader):
    model.eval()
    with torch.no_grad():
        hits = [(model(b, x).argmax(1) == y).sum().item() for b, x, y in loader]
    return sum(hits) / max(1, len(loader.local_seeds))

best_val = test_at_best = 0.0
for epoch in range(epochs):
    model.train()
    for blocks, x, y in train:
        loss = torch.nn.functional.cross_entropy(model(blocks, x), y)
        opt.zero_grad(); loss.backward(); opt.step()
    val, test = accuracy(evals["valid"]), accuracy(evals["test"])
    if val > best_val:
        best_val, test_at_best = val, test
    print(f"epoch {epoch:2d} loss {loss.item():.4f} val {val:.3f} test {test:.3f}")
print(f"best val {best_val:.3f} test at best val {test_at_best:.3f}")
