"""Run by test_torchrun.py under torchrun or mpirun: dsp.Loader per rank over the launcher's
communication (torchrun: the torch.distributed process group; mpirun: MPI).

    torchrun_loader.py digest PART OUT   per-rank digests of every batch of two epochs
    torchrun_loader.py fail PART OUT     rank 1 raises after its first batch
    torchrun_loader.py kill PART OUT     rank 1 is killed (SIGKILL) after its first batch
    torchrun_loader.py stall PART OUT    rank 1 stops (sleeps) after its first batch
    torchrun_loader.py probe - OUT       one of every collective (dsp._dsp._collectives_probe)
"""
import hashlib
import json
import os
import signal
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

import dsp

mode, part_dir, out_dir = sys.argv[1], sys.argv[2], sys.argv[3]
if "TORCHELASTIC_RUN_ID" in os.environ:  # torchrun; under mpirun dsp keeps MPI
    dist.init_process_group("gloo")

if mode == "probe":
    backend = "torch" if dsp._pg.resolve(None, "auto") else "mpi"
    probe = dsp._dsp._collectives_probe(backend)
    with open(f"{out_dir}/rank{probe['rank']}.json", "w") as f:
        json.dump(dict(probe, backend=backend), f)
    sys.exit(0)


def digest(value, h):
    """Every array of a batch (seeds, blocks, features, labels), recursively, in field order."""
    if isinstance(value, torch.Tensor):
        value = value.numpy()
    if isinstance(value, np.ndarray):
        h.update(f"{value.dtype}{value.shape}".encode())
        h.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, (list, tuple)):
        for v in value:
            digest(v, h)
    elif isinstance(value, dict):
        for k in sorted(value):
            h.update(str(k).encode())
            digest(value[k], h)
    else:
        h.update(repr(value).encode())
    return h


loader = dsp.Loader(part_dir, fanouts=[10, 5], batch_size=16, seed=3)
batches = []
for i, b in enumerate(loader.iter_batches()):
    batches.append(digest(b, hashlib.sha256()).hexdigest())
    if i == 0 and loader.rank == 1 and mode == "fail":
        raise RuntimeError("rank 1 fails on purpose")
    if i == 0 and loader.rank == 1 and mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if i == 0 and loader.rank == 1 and mode == "stall":
        time.sleep(120)
# A second epoch left early on rank 0 only: finished in the background, so rank 1 is served.
for i, b in enumerate(loader.iter_batches()):
    if loader.rank == 0 and i == 0:
        break
    batches.append(digest(b, hashlib.sha256()).hexdigest())
with open(f"{out_dir}/rank{loader.rank}.json", "w") as f:
    json.dump({"rank": loader.rank, "size": loader.size, "steps": loader.steps,
               "backend": "torch" if dsp._pg.active() else "mpi", "batches": batches}, f)
loader.close()
