"""dsp.Loader under mpirun: rank and size come from MPI and the ranks split the seeds."""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve().parent


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun not installed")
def test_two_ranks(cora_p2, tmp_path):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    r = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", sys.executable,
                        str(HERE / "mpi_loader.py"), cora_p2, str(tmp_path)],
                       env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    ranks = [json.loads((tmp_path / f"rank{i}.json").read_text()) for i in range(2)]
    offsets = json.loads(pathlib.Path(cora_p2, "partition.json").read_text())["offsets"]
    assert [d["rank"] for d in ranks] == [0, 1] and all(d["size"] == 2 for d in ranks)
    assert ranks[0]["steps"] == ranks[1]["steps"]
    for d in ranks:
        assert d["yielded"] == d["steps"]  # the shuffled schedule wraps: no empty steps
        lo, hi = offsets[d["rank"]], offsets[d["rank"] + 1]
        assert all(lo <= s < hi for s in d["seeds"])  # co-partitioned seeds
        assert set(d["seeds"]) == set(d["local"])
    train = np.load(f"{cora_p2}/train_idx.npy")
    assert sorted(ranks[0]["local"] + ranks[1]["local"]) == sorted(train.tolist())
