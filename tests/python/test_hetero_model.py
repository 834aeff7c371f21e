"""dsp.HeteroGNN / load_model / export_model / load_embedding_table for the typed models.

Each case trains rgcn or hsage 2 epochs on a small generated heterogeneous graph (papers with
features; authors, institutions and fields without: their rows are learnt) with --eval full and
a checkpoint, then runs the model in plain PyTorch over full-neighbour typed Loader batches
(fanouts -1) of the test split and compares with the job's test accuracy and `dsp predict`.
"""
import json
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import dsp  # noqa: E402
from conftest import assert_same_predictions  # noqa: E402

# rgcn in every tier; hsage (the same path with another layer) not in --quick.
MODELS = ["rgcn", pytest.param("hsage", marks=pytest.mark.slow)]


@pytest.fixture(scope="module")
def hetero_p1(tmp_path_factory):
    out = tmp_path_factory.mktemp("hetero")
    dsp.generate_hetero(str(out / "ds"), papers=1000, authors=600, institutions=40, fields=80,
                        feature_dim=16, classes=4)
    dsp.partition(str(out / "ds"), str(out / "p1"), parts=1)
    return str(out / "p1")


@pytest.fixture(scope="module", params=MODELS)
def trained(request, hetero_p1, tmp_path_factory):
    """(best.pt, the job's result, dsp predict's logits and classes) of one typed model."""
    out = tmp_path_factory.mktemp(request.param)
    ck = out / "ck"
    result = dsp.train({"path": hetero_p1, "model": request.param, "eval": "full", "epochs": 2,
                        "fanouts": [5, 5], "batch_size": 64, "hidden": 16,
                        "checkpoint_dir": str(ck)})
    r = dsp.predict(hetero_p1, str(ck / "best.pt"), str(out / "pred"), output="logits")
    return ck / "best.pt", result, r["logits"], r["predictions"]


def header(checkpoint):
    return json.loads(torch.jit.load(str(checkpoint)).header.numpy().tobytes())


def test_split_logits(model, part, embedding):
    """(logits [test nodes, classes], labels, target-type index of each row) over full-neighbour
    typed batches of the test split, in seed order."""
    outs, labels, seeds = [], [], []
    with dsp.Loader(part, fanouts=[-1, -1], batch_size=256, split="test", shuffle=False) as L:
        for b in L.iter_batches():
            assert b.blocks[0].src_types is not None and b.blocks[0].edge_types is not None
            with torch.no_grad():
                outs.append(model(b.blocks, model.inputs(b, embedding)))
            labels.append(b.y)
            seeds.append(b.seeds)
        original = L.to_original_ids(torch.cat(seeds)).numpy()
        schema = L.meta["hetero"]["schema"]
    # The dataset numbers the nodes type by type in schema order: row i of dsp predict's output
    # is the target type's node i.
    types = [t["name"] for t in schema["node_types"]]
    first = sum(t["count"] for t in schema["node_types"][:types.index(schema["target_type"])])
    return torch.cat(outs).numpy(), torch.cat(labels).numpy(), original - first


test_split_logits.__test__ = False  # a helper, not a test


def test_full_neighbour_batches_give_the_jobs_accuracy_and_dsp_predict(trained, hetero_p1):
    checkpoint, result, ref_logits, ref_classes = trained
    model = dsp.load_model(checkpoint)
    assert isinstance(model, dsp.HeteroGNN) and not model.training
    table = dsp.load_embedding_table(checkpoint, hetero_p1)
    out, y, rows = test_split_logits(model, hetero_p1, table)
    assert len(y) > 0 and np.array_equal(np.sort(rows), np.unique(rows))
    hits = int((out.argmax(1) == y).sum())
    assert hits == round(result["test_acc_at_best"] * len(y))
    assert_same_predictions(out, ref_logits[rows], ref_classes[rows])


def test_parameters_are_the_checkpoints(trained):
    checkpoint = trained[0]
    recorded = [(p["name"], p["shape"]) for p in header(checkpoint)["params"]]
    model = dsp.load_model(checkpoint)
    assert [(n, list(p.shape)) for n, p in model.named_parameters()] == recorded
    cfg = header(checkpoint)["config"]["model"]
    assert model.config["type_dims"] == cfg["type_dims"]
    assert any(n.startswith("input") for n, _ in recorded)  # papers' projection


def test_export_then_load_gives_the_same_outputs(trained, hetero_p1, tmp_path):
    checkpoint = trained[0]
    out = dsp.export_model(checkpoint, tmp_path / "m")
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["model.json", "state_dict.pt"]
    meta = json.loads((tmp_path / "m" / "model.json").read_text())
    assert meta["model"] == header(checkpoint)["config"]["model"]
    exported = dsp.load_model(out)
    assert isinstance(exported, dsp.HeteroGNN)
    table = dsp.load_embedding_table(checkpoint, hetero_p1)
    a = test_split_logits(exported, hetero_p1, table)[0]
    b = test_split_logits(dsp.load_model(checkpoint), hetero_p1, table)[0]
    assert np.array_equal(a, b)


def test_a_bad_typed_export_is_refused(trained, tmp_path):
    checkpoint = trained[0]
    d = tmp_path / "m"
    dsp.export_model(checkpoint, d)
    meta = json.loads((d / "model.json").read_text())
    kind = meta["model"]["model"]
    last = meta["params"][-1]
    (d / "model.json").write_text(json.dumps({**meta, "params": meta["params"][:-1]}))
    n = len(meta["params"])
    with pytest.raises(ValueError, match=re.escape(
            f"{d / 'model.json'}: the recorded parameters do not match dsp.HeteroGNN's {kind} "
            f"model (recorded, expected: {n - 1} parameters against {n})")):
        dsp.load_model(d)
    (d / "model.json").write_text(json.dumps(meta))
    state = torch.load(d / "state_dict.pt")
    del state[last["name"]]
    torch.save(state, d / "state_dict.pt")
    with pytest.raises(ValueError, match="(?s)" + re.escape(
            f"{d / 'state_dict.pt'}: the tensors do not fit the model: ") +
            r".*Missing key\(s\).*" + re.escape(last["name"])):
        dsp.load_model(d)
    bad = {**meta, "model": {**meta["model"], "relation_dst": meta["model"]["relation_dst"][:-1]}}
    (d / "model.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match=re.escape(f"{d / 'model.json'}: bad model description")):
        dsp.load_model(d)


def test_inputs_are_checked(trained, hetero_p1):
    checkpoint = trained[0]
    model = dsp.load_model(checkpoint)
    with dsp.Loader(hetero_p1, fanouts=[-1, -1], batch_size=32, split="test",
                    shuffle=False) as L:
        batch = next(L.iter_batches())
    with pytest.raises(ValueError, match="node type author has no features: the model takes the "
                                         "rows it learnt for them; pass embedding="):
        model.inputs(batch)
    x = dict(batch.x_dict)
    with pytest.raises(ValueError, match=r"the batch has \d+ input nodes of type author but no "
                                         "input rows for them"):
        model(batch.blocks, x)
    x = model.inputs(batch, dsp.load_embedding_table(checkpoint, hetero_p1))
    x["paper"] = x["paper"][:, :3]
    with pytest.raises(ValueError, match=r"inputs of node type paper are \[\d+, 3\] but the "
                                         r"model expects \[\d+, 16\]"):
        model(batch.blocks, x)
    with pytest.raises(ValueError, match="the batch has 1 blocks but the 2-layer model"):
        model(batch.blocks[1:], x)
    untyped = [b._replace(edge_types=None) for b in batch.blocks]
    with pytest.raises(ValueError, match="a typed model needs blocks with node and edge types"):
        model(untyped, model.inputs(batch, dsp.load_embedding_table(checkpoint, hetero_p1)))
    with pytest.raises(ValueError, match=r"unknown model 'rgcn' \(sage, gcn, gat\) \(rgcn and "
                                         r"hsage are dsp.HeteroGNN's\)"):
        dsp.GNN("rgcn", 4, 2)


def test_embedding_shards_are_checked(trained, hetero_p1, tmp_path):
    checkpoint = trained[0]
    shard = checkpoint.parent / (checkpoint.name + ".embedding.0-of-1")
    copy = tmp_path / "best.pt"
    copy.write_bytes(checkpoint.read_bytes())
    with pytest.raises(FileNotFoundError, match=re.escape(
            f"{copy}.embedding.0-of-1 does not exist: the learnt rows of {copy} for rank 0")):
        dsp.load_embedding_table(copy, hetero_p1)
    data = bytearray(shard.read_bytes())
    data[112 + 5] ^= 0x10  # inside the first row
    (tmp_path / "best.pt.embedding.0-of-1").write_bytes(bytes(data))
    with pytest.raises(ValueError, match=re.escape(
            f"{copy}.embedding.0-of-1: checksum mismatch in the rows: the file is damaged")):
        dsp.load_embedding_table(copy, hetero_p1)
