"""Data-parallel GraphSAGE: the model under torch's DistributedDataParallel, each rank iterating
its own dsp.Loader (Cora: the accuracy of one rank, about 0.80).

    mpirun -np 2 python examples/ddp_sage.py [DATA_DIR] [EPOCHS] [--normalize-features none|row]
    torchrun --nproc_per_node 2 examples/ddp_sage.py [DATA_DIR] [EPOCHS]
torch.distributed is initialised from the rank and size the launcher gives each process
(torchrun's RANK/WORLD_SIZE, Open MPI's OMPI_COMM_WORLD_*, or PMI_RANK/PMI_SIZE): gloo on CPU,
NCCL when there is a GPU (one per local rank). Under mpirun on one machine the ranks meet
through a file in the temporary directory; torchrun (or MASTER_ADDR and MASTER_PORT across
machines) uses env://. dsp.Loader takes the same rank and size: from MPI under mpirun, from the
torch.distributed process group under torchrun (its collectives then run over gloo groups of
that group, no MPI needed). A dataset directory is partitioned on the fly into one part per
rank, and every rank runs the same number of steps per epoch, which DDP needs (its gradient
all-reduce is a collective). The global batch is 32 seeds per step, split over the ranks.
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist

from common import (BlockStack, data_dir, feature_normalisation, fit, loaders, make_model,
                    parse_args)
from train_sage import MeanSAGEConv


def rank_and_size():
    for rank, size in (("RANK", "WORLD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                       ("PMI_RANK", "PMI_SIZE")):
        if rank in os.environ:
            return int(os.environ[rank]), int(os.environ[size])
    return 0, 1


def init_method():
    if "MASTER_ADDR" in os.environ:
        return "env://"
    job = os.environ.get("PMIX_NAMESPACE") or os.environ.get("PMI_JOBID") or "local"
    return f"file://{tempfile.gettempdir()}/dsp-ddp-{job}"


def main(argv):
    args = parse_args(argv)
    rank, size = rank_and_size()
    cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", os.environ.get(
        "OMPI_COMM_WORLD_LOCAL_RANK", os.environ.get("MPI_LOCALRANKID", 0))))
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo", init_method=init_method(), rank=rank,
                            world_size=size)
    data = data_dir(args.data)
    train, evals = loaders(data, batch_size=max(1, 32 // size), pin_memory=cuda)
    assert (train.rank, train.size) == (rank, size), "dsp and torch.distributed disagree"
    normalize = feature_normalisation(data, args.normalize_features)
    model = make_model(BlockStack, MeanSAGEConv, train, normalize=normalize).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model,
                                                    device_ids=[local_rank] if cuda else None)

    # One buffer for the whole run, on the device the backend works on. (It also outlives the
    # process group: torch 2.2's gloo can hang in destroy_process_group when the last tensor of
    # a finished all_reduce is freed on its worker thread.)
    buffer = torch.zeros(2, device=device)

    def all_reduce(t):
        buffer.copy_(t)
        dist.all_reduce(buffer)
        t.copy_(buffer)

    fit(ddp, train, evals, epochs=args.epochs, device=device,
        eval_model=model, all_reduce=all_reduce, log=print if rank == 0 else lambda _: None)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv)
