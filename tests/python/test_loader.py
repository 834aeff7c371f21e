"""dsp.Loader: its tensors equal the batches `dsp train` builds, and the blocks are well formed."""
import numpy as np
import pytest
import torch

import dsp

FANOUTS = [10, 5]


def batches(loader, epoch=None):
    return list(loader.iter_batches(epoch))


def assert_batch_equal(got, ref):
    assert got.epoch == ref.epoch and got.step == ref.step
    np.testing.assert_array_equal(np.asarray(got.seeds), ref.seeds)
    np.testing.assert_array_equal(np.asarray(got.x), ref.x)
    np.testing.assert_array_equal(np.asarray(got.y), ref.y)
    assert len(got.blocks) == len(ref.blocks)
    for b, r in zip(got.blocks, ref.blocks):
        assert (b.num_src, b.num_dst) == (r.num_src, r.num_dst)
        np.testing.assert_array_equal(np.asarray(b.indptr), r.indptr)
        np.testing.assert_array_equal(np.asarray(b.indices), r.indices)
        np.testing.assert_array_equal(np.asarray(b.src_ids), r.src_ids)


@pytest.mark.parametrize("prefetch", [0, 2])
def test_matches_cpp_reference(cora_p1, prefetch):
    # The reference is computed in C++ the way job.cpp does it (scheduler order, sampler.sample,
    # load stage), sequentially and with no queue: the Loader must reproduce it exactly.
    loader = dsp.Loader(cora_p1, fanouts=FANOUTS, batch_size=32, seed=7, prefetch=prefetch)
    for epoch in (0, 1):
        ref = dsp._reference_epoch(cora_p1, FANOUTS, 32, 7, epoch)
        got = batches(loader)
        assert len(got) == len(ref) == loader.steps == 5
        for g, r in zip(got, ref):
            assert_batch_equal(g, r)


def test_fifo_cache_keeps_the_batches(cora_p1):
    # BGL's FIFO levels (one rank: every row is its own, so they stay empty) change nothing.
    loader = dsp.Loader(cora_p1, fanouts=FANOUTS, batch_size=32, seed=7, prefetch=0,
                        fifo_rows=64, fifo_shared_rows=128)
    ref = dsp._reference_epoch(cora_p1, FANOUTS, 32, 7, 0)
    got = batches(loader)
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert_batch_equal(g, r)


def test_tensor_types_and_zero_copy(cora_p1):
    blocks, x, y = next(iter(dsp.Loader(cora_p1, fanouts=FANOUTS, batch_size=16)))
    assert x.dtype == torch.float32 and y.dtype == torch.int64
    assert x.shape == (blocks[0].num_src, 1433) and y.shape == (16,)
    for b in blocks:
        assert b.indptr.dtype == b.indices.dtype == b.src_ids.dtype == torch.int64
    # torch.from_numpy shares the numpy buffer the C++ vector was moved into.
    assert x.is_contiguous() and x.data_ptr() != 0


def test_blocks_and_data_against_partition_files(cora_p1):
    feats = np.load(f"{cora_p1}/features.npy")
    labels = np.load(f"{cora_p1}/labels.npy")
    train = np.load(f"{cora_p1}/train_idx.npy")
    seen = []
    for b in dsp.Loader(cora_p1, fanouts=FANOUTS, batch_size=32, seed=3).iter_batches():
        seeds = b.seeds.numpy()
        seen.append(seeds)
        np.testing.assert_array_equal(b.x.numpy(), feats[b.blocks[0].src_ids.numpy()])
        np.testing.assert_array_equal(b.y.numpy(), labels[seeds])
        # DGL order: the last block ends at the seeds, each block's sources feed the next.
        np.testing.assert_array_equal(b.blocks[-1].src_ids[:len(seeds)].numpy(), seeds)
        assert b.blocks[-1].num_dst == len(seeds)
        for lower, upper in zip(b.blocks, b.blocks[1:]):
            assert lower.num_dst == upper.num_src
            np.testing.assert_array_equal(lower.src_ids[:lower.num_dst], upper.src_ids)
        for blk, fanout in zip(b.blocks, reversed(FANOUTS)):
            deg = blk.indptr.diff()
            assert blk.indptr[0] == 0 and blk.indptr[-1] == len(blk.indices)
            assert int(deg.max()) <= fanout and int(deg.min()) >= 0
            assert int(blk.indices.max()) < blk.num_src
            assert len(np.unique(blk.src_ids.numpy())) == blk.num_src
    # One epoch uses every training seed exactly once (one rank: no wrap-around).
    np.testing.assert_array_equal(np.sort(np.concatenate(seen)), np.sort(train))


def test_fanout_minus_one_gives_whole_neighbourhoods(cora, cora_p1):
    # -1 (as DGL's and PyG's): every destination of every block takes its whole in-neighbour row,
    # each entry once, so the blocks are the full-neighbour ones.
    data = dsp.load_dataset(cora)
    indptr, indices = np.asarray(data["indptr"]), np.asarray(data["indices"])
    b = next(iter(dsp.Loader(cora_p1, fanouts=[-1, -1], batch_size=64, seed=1).iter_batches()))
    edges = 0
    for blk in b.blocks:
        src = blk.src_ids.numpy()
        for d in range(blk.num_dst):
            v = src[d]
            got = np.sort(src[blk.indices[blk.indptr[d]:blk.indptr[d + 1]].numpy()])
            np.testing.assert_array_equal(got, np.sort(indices[indptr[v]:indptr[v + 1]]))
        edges += len(blk.indices)
    assert edges > 64 * 3  # Cora's mean in-degree is about 4


def test_deterministic_for_a_seed(cora_p1):
    a = batches(dsp.Loader(cora_p1, fanouts=FANOUTS, batch_size=32, seed=5))
    b = batches(dsp.Loader(cora_p1, fanouts=FANOUTS, batch_size=32, seed=5, prefetch=0))
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert_batch_equal(x, y)
    c = batches(dsp.Loader(cora_p1, fanouts=FANOUTS, batch_size=32, seed=6))
    assert not torch.equal(a[0].seeds, c[0].seeds)


def test_epochs_and_early_break(cora_p1):
    loader = dsp.Loader(cora_p1, fanouts=FANOUTS, batch_size=32, seed=1)
    first = batches(loader)
    for i, _ in enumerate(loader):  # epoch 1, left early
        if i == 1:
            break
    loader.set_epoch(0)
    again = batches(loader)  # epoch 0 again: the same batches
    assert [b.step for b in again] == list(range(5))
    for x, y in zip(first, again):
        assert torch.equal(x.seeds, y.seeds) and torch.equal(x.x, y.x)
    assert batches(loader)[0].epoch == 1


def test_splits_unshuffled(cora_p1):
    test_ids = np.load(f"{cora_p1}/test_idx.npy")
    loader = dsp.Loader(cora_p1, fanouts=[20, 20], batch_size=300, split="test", shuffle=False)
    got = np.concatenate([b.seeds.numpy() for b in loader.iter_batches()])
    np.testing.assert_array_equal(got, np.sort(test_ids))  # ascending, each once
    assert len(loader) == 4


def test_dataset_directory_is_partitioned_on_the_fly(cora):
    loader = dsp.Loader(cora, fanouts=FANOUTS, batch_size=64, seed=0)
    assert loader.size == 1 and loader.num_classes == 7 and loader.num_features == 1433
    n = sum(len(y) for _, _, y in loader)
    assert n == 140


def test_numpy_mode(cora_p1):
    blocks, x, y = next(iter(dsp.Loader(cora_p1, fanouts=FANOUTS, batch_size=8, as_tensor=False)))
    assert isinstance(x, np.ndarray) and x.flags.writeable and x.dtype == np.float32
    assert isinstance(blocks[0].indptr, np.ndarray)


def test_abandoned_iterator_does_not_end_a_newer_epoch(cora_p1):
    loader = dsp.Loader(cora_p1, fanouts=FANOUTS, batch_size=32, seed=1)
    stale = loader.iter_batches()
    next(stale)  # epoch 0 started, then left
    fresh = loader.iter_batches()
    first = next(fresh)  # epoch 1 (epoch 0 ended when this one started)
    del stale  # collecting the stale generator must leave epoch 1 running
    rest = list(fresh)
    assert first.epoch == 1 and [b.step for b in [first] + rest] == list(range(5))


def test_cuda_device_is_a_clear_error_without_a_gpu(cora_p1):
    # Without a GPU (CI), device="cuda" must fail with a message, not fall back to the CPU: in
    # Python first, and in the C++ runtime for callers of the extension itself.
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the device path is checked by scripts/gpu/check.sh")
    with pytest.raises(dsp.NotSupported, match="needs a CUDA device"):
        dsp.Loader(cora_p1, fanouts=[5], batch_size=16, device="cuda")
    with pytest.raises(dsp.InvalidArgument, match="--device cuda:0: "):
        dsp._dsp._Loader([5], None, {"path": cora_p1, "batch_size": 16, "backend": "self",
                                     "device": "cuda"})


def test_bfs_seed_order_as_dsp_train(cora_p1):
    # dsp train's --order/--bfs-sequences, from the same table: every seed once per epoch, in
    # another order than the shuffle's, the same for a seed; the CLI's check and message.
    rnd = batches(dsp.Loader(cora_p1, fanouts=FANOUTS, batch_size=32, seed=3))
    bfs = batches(dsp.Loader(cora_p1, fanouts=FANOUTS, batch_size=32, seed=3, order="bfs",
                             bfs_sequences=2))
    again = batches(dsp.Loader(cora_p1, fanouts=FANOUTS, batch_size=32, seed=3, order="bfs",
                               bfs_sequences=2))
    seeds = [torch.cat([b.seeds for b in run]) for run in (rnd, bfs, again)]
    assert sorted(seeds[0].tolist()) == sorted(seeds[1].tolist())
    assert not torch.equal(seeds[0], seeds[1])
    assert torch.equal(seeds[1], seeds[2])
    with pytest.raises(dsp.InvalidArgument, match=r"^unknown seed order 'dfs' \(random, bfs\)$"):
        dsp.Loader(cora_p1, fanouts=FANOUTS, order="dfs")
    with pytest.raises(dsp.InvalidArgument, match=r"^--bfs-sequences must be >= 1, got 0$"):
        dsp.Loader(cora_p1, fanouts=FANOUTS, order="bfs", bfs_sequences=0)


def test_labor_sampler_keywords(cora_p1):
    # dsp train's sampler table: LABOR reaches fewer distinct input nodes than neighbour sampling
    # at equal fanouts, LABOR-1's blocks carry positive edge weights, and the same seed gives the
    # same batches.
    def epoch(**kw):
        return batches(dsp.Loader(cora_p1, fanouts=FANOUTS, batch_size=32, seed=3, prefetch=0,
                                  **kw), 0)
    plain = sum(int(b.blocks[0].num_src) for b in epoch())
    labor = epoch(sampler="labor")
    assert sum(int(b.blocks[0].num_src) for b in labor) < plain
    assert all(b.blocks[0].weights is None for b in labor)  # LABOR-0: no weights
    weighted = epoch(sampler="labor", labor_importance=1)
    for b in weighted:
        for blk in b.blocks:
            w = np.asarray(blk.weights)
            assert w.shape == (int(blk.indptr[-1]),) and (w > 0).all() and np.isfinite(w).all()
    again = epoch(sampler="labor", labor_importance=1)
    for g, r in zip(again, weighted):
        np.testing.assert_array_equal(np.asarray(g.blocks[0].src_ids),
                                      np.asarray(r.blocks[0].src_ids))
        np.testing.assert_array_equal(np.asarray(g.blocks[0].weights),
                                      np.asarray(r.blocks[0].weights))
    layer = epoch(sampler="layer", layer_draws="without")
    assert len(layer) == 5


def test_sampler_keywords_are_checked(cora_p1):
    with pytest.raises(dsp.InvalidArgument, match="need --sampler labor"):
        dsp.Loader(cora_p1, fanouts=FANOUTS, labor_importance=1)
    with pytest.raises(dsp.FormatError, match="dsp.Loader: unknown key 'labor_importanc'"):
        dsp.Loader(cora_p1, fanouts=FANOUTS, sampler="labor", labor_importanc=1)
    with pytest.raises(dsp.InvalidArgument, match="unknown sampler 'lab'|sampler.*lab"):
        dsp.Loader(cora_p1, fanouts=FANOUTS, sampler="lab")
