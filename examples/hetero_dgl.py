"""An R-GCN (DGL's HeteroGraphConv, one GraphConv per relation, summed per destination type, with
a self-loop weight per type) trained on dsp.Loader over a heterogeneous graph.

    pip install . dgl                  # in a venv with torch (a DGL build for that torch)
    python examples/hetero_dgl.py [DATA_DIR] [EPOCHS]
DATA_DIR: a heterogeneous dataset or partition directory (dsp generate hetero, dsp convert --from
ogb-hetero); default: a 20000-paper MAG-shaped graph generated into a temporary directory (its
accuracy bound, which `dsp generate hetero` reports, is 0.91). Each dsp block becomes a DGL
heterogeneous block (block.to_dgl()); batch.x_dict holds the input features per node type in the
same node order. Types without features (authors, institutions, fields) start from a learned
vector per type, so what they pass on is what the first layer gathers from their neighbours.
"""
import torch
import dgl.nn as dglnn

from hetero_common import embed, main, type_inputs

HIDDEN = 64


class RGCN(torch.nn.Module):
    def __init__(self, schema, hidden=HIDDEN, layers=2, dropout=0.5):
        super().__init__()
        self.target, self.dropout = schema.target_type, dropout
        self.proj, self.learned = type_inputs(schema, hidden)
        dims = [hidden] * layers + [schema.num_classes]
        self.convs = torch.nn.ModuleList(
            dglnn.HeteroGraphConv({r: dglnn.GraphConv(a, b, norm="right", bias=False,
                                                      allow_zero_in_degree=True)
                                   for r in schema.relations}, aggregate="sum")
            for a, b in zip(dims, dims[1:]))
        self.loops = torch.nn.ModuleList(
            torch.nn.ModuleDict({t: torch.nn.Linear(a, b) for t in schema.node_types})
            for a, b in zip(dims, dims[1:]))

    def forward(self, batch):
        graphs = [b.to_dgl() for b in batch.blocks]
        h = embed(self.proj, self.learned, batch.x_dict,
                  {t: graphs[0].num_src_nodes(t) for t in graphs[0].srctypes})
        for i, (g, conv, loop) in enumerate(zip(graphs, self.convs, self.loops)):
            h_dst = {t: v[:g.num_dst_nodes(t)] for t, v in h.items()}
            msg = conv(g, (h, h_dst))
            h = {t: loop[t](v) + msg.get(t, 0) for t, v in h_dst.items() if len(v)}
            if i < len(self.convs) - 1:
                h = {t: torch.nn.functional.dropout(v.relu(), self.dropout, self.training)
                     for t, v in h.items()}
        return h[self.target]


if __name__ == "__main__":
    main(RGCN)
