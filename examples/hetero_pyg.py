"""A GraphSAGE made heterogeneous by PyG's to_hetero (a SAGEConv per relation, summed per
destination type) trained on dsp.Loader over a heterogeneous graph.

    pip install . torch_geometric      # in a venv with torch
    python examples/hetero_pyg.py [DATA_DIR] [EPOCHS]
DATA_DIR as for examples/hetero_dgl.py. Each batch becomes a HeteroData in the layout of PyG's
heterogeneous NeighborLoader (batch.to_pyg(): x and n_id per node type, edge_index per relation,
the seeds first among the target type's nodes, batch_size of them); types without features start
from a learned vector per type.
"""
import sys

import torch

try:
    from torch_geometric.nn import SAGEConv, to_hetero
except ImportError as e:
    sys.exit(f"examples/hetero_pyg.py needs torch_geometric ({e}): pip install torch_geometric")

from hetero_common import embed, main, type_inputs

HIDDEN = 64


class Sage(torch.nn.Module):
    def __init__(self, hidden, classes, dropout=0.5):
        super().__init__()
        self.conv1 = SAGEConv((-1, -1), hidden)
        self.conv2 = SAGEConv((-1, -1), classes)
        self.dropout = torch.nn.Dropout(dropout)  # a module: to_hetero traces its training flag

    def forward(self, x, edge_index):
        h = self.dropout(self.conv1(x, edge_index).relu())
        return self.conv2(h, edge_index)


class HeteroSage(torch.nn.Module):
    def __init__(self, schema, hidden=HIDDEN):
        super().__init__()
        self.target = schema.target_type
        self.proj, self.learned = type_inputs(schema, hidden)
        self.gnn = to_hetero(Sage(hidden, schema.num_classes),
                             (schema.node_types, schema.relations), aggr="sum")

    def forward(self, batch):
        data = batch.to_pyg()
        x = embed(self.proj, self.learned, batch.x_dict,
                  {t: len(data[t].n_id) for t in data.node_types})
        out = self.gnn(x, data.edge_index_dict)
        return out[self.target][:data[self.target].batch_size]


if __name__ == "__main__":
    main(HeteroSage)
