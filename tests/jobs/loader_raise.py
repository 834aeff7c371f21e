"""Run under mpirun -n 2 by job_failures.sh: rank 1 raises in the middle of its second epoch, an
exception no one catches. Every rank must end at once with rank 1's error printed once."""
import sys
import time

import dsp

loader = dsp.Loader(sys.argv[1], fanouts=[10, 5], batch_size=8, seed=3)
for epoch in range(3):
    for step, (blocks, x, y) in enumerate(loader):
        if loader.rank == 1 and epoch == 1 and step == 2:
            print(f"fault at {int(time.time() * 1000)}", flush=True)
            raise ValueError("injected failure at step 2")
print(f"rank {loader.rank}: iterated every epoch without the failure", flush=True)
