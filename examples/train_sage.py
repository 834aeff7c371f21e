"""GraphSAGE in plain PyTorch on dsp's sampler and loader (Cora: about 0.80 test accuracy).

    pip install .            # in a venv with torch
    python examples/train_sage.py [DATA_DIR] [EPOCHS] [--normalize-features none|row]
DATA_DIR: a dsp dataset or partition directory (default: Cora converted from tests/data/cora).
"""
import torch

from common import BlockStack, main


class MeanSAGEConv(torch.nn.Module):
    """GraphSAGE-mean on a dsp block: its CSR rows are destinations, entries local source ids."""

    def __init__(self, in_dim, out_dim):
        super().__init__()
        self.self_lin = torch.nn.Linear(in_dim, out_dim)
        self.nbr_lin = torch.nn.Linear(in_dim, out_dim)

    def forward(self, block, h):
        indptr, indices = block.indptr.to(h.device), block.indices.to(h.device)
        deg = indptr.diff()
        dst = torch.repeat_interleave(torch.arange(block.num_dst, device=h.device), deg)
        total = torch.zeros(block.num_dst, h.shape[1], device=h.device)
        mean = total.index_add_(0, dst, h[indices]) / deg.clamp(min=1)[:, None]
        return self.self_lin(h[:block.num_dst]) + self.nbr_lin(mean)


if __name__ == "__main__":
    main(BlockStack, MeanSAGEConv)
