"""The GPU kit's Python check: dsp.Loader(device="cuda") on Cora yields CUDA tensors equal to the
CPU Loader's batches (same seed: the same blocks, features bit for bit). Without a GPU (the kit's
dry run) it checks only that the module built on the spot (or installed from the kit's wheel)
imports and loads CPU batches (numpy arrays where the Python has no torch).

Usage: python3 loader_check.py PACKAGE_DIR CORA_RAW WORK_DIR [cuda|cpu]
"""
import os
import sys

sys.path.insert(0, sys.argv[1])
import dsp  # noqa: E402

# The package under test, not another one on the path.
assert os.path.realpath(dsp.__file__).startswith(os.path.realpath(sys.argv[1])), dsp.__file__

raw, work, device = sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "cuda"
dsp.convert_ogb(raw, f"{work}/cora")
dsp.partition(f"{work}/cora", f"{work}/cora-p1", parts=1)
kw = dict(fanouts=[10, 5], batch_size=64, seed=3)
cpu = list(dsp.Loader(f"{work}/cora-p1", **kw))
print(f"cpu: {len(cpu)} batches, x {tuple(cpu[0][1].shape)}")
if device == "cpu":
    sys.exit(0)
import torch  # noqa: E402

gpu = list(dsp.Loader(f"{work}/cora-p1", device=device, **kw))
assert len(gpu) == len(cpu), (len(gpu), len(cpu))
for (gb, gx, gy), (cb, cx, cy) in zip(gpu, cpu):
    assert gx.is_cuda and gy.is_cuda, (gx.device, gy.device)
    assert torch.equal(gx.cpu(), cx) and torch.equal(gy.cpu(), cy)
    for g, c in zip(gb, cb):
        for name in ("indptr", "indices", "src_ids"):
            assert torch.equal(getattr(g, name).cpu(), getattr(c, name)), name
print(f"{device}: {len(gpu)} batches on {gx.device}, equal to the CPU Loader's")
