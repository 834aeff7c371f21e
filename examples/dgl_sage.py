"""DGL's own SAGEConv trained on dsp.Loader (Cora: about 0.80 test accuracy).

    pip install . dgl                  # in a venv with torch (a DGL build for that torch)
    python examples/dgl_sage.py [DATA_DIR] [EPOCHS] [--normalize-features none|row]
Each dsp block becomes a DGL block (block.to_dgl(): dgl.create_block with the same source and
destination counts, the global ids as dgl.NID), which DGL's layers take as they are.
"""
from dgl.nn import SAGEConv

from common import BlockStack, main


class DglStack(BlockStack):
    def layer(self, conv, block, h):
        g = block.to_dgl().to(h.device)
        return conv(g, (h, h[:g.num_dst_nodes()]))


if __name__ == "__main__":
    main(DglStack, lambda in_dim, out_dim: SAGEConv(in_dim, out_dim, "mean"))
