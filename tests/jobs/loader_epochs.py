"""Run under mpirun -n 2 by job_failures.sh: rank 0 iterates 2 epochs, rank 1 three. Both must
end with a message naming the other (not hang in rank 1's third epoch or rank 0's exit)."""
import sys
import time

import dsp

loader = dsp.Loader(sys.argv[1], fanouts=[10, 5], batch_size=8, seed=3)
epochs = 2 + loader.rank
for epoch in range(epochs):
    for blocks, x, y in loader:
        pass
if loader.rank == 0:
    print(f"fault at {int(time.time() * 1000)}", flush=True)
print(f"rank {loader.rank}: iterated {epochs} epochs", flush=True)
