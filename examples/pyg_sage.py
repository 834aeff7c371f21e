"""PyTorch Geometric's own SAGEConv trained on dsp.Loader (Cora: about 0.80 test accuracy).

    pip install . torch_geometric      # in a venv with torch
    python examples/pyg_sage.py [DATA_DIR] [EPOCHS] [--normalize-features none|row]
Each dsp block is a bipartite graph for PyG: block.to_pyg() gives its edge_index in PyG's
(source, target) order and its (num_src, num_dst) size.
"""
from torch_geometric.nn import SAGEConv

from common import BlockStack, main


class PygStack(BlockStack):
    def layer(self, conv, block, h):
        edge_index, size = block.to_pyg()
        return conv((h, h[:size[1]]), edge_index.to(h.device), size=size)


if __name__ == "__main__":
    main(PygStack, SAGEConv)
