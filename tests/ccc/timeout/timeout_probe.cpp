// Run by ctest under mpiexec -n 3 with DSP_COMM_TIMEOUT=1: rank 2 never reaches the second barrier,
// so ranks 0 and 1 must abort the job within a few seconds with a line naming rank 2.
#include <chrono>
#include <cstdio>
#include <thread>

#include "ccc/communicator.hpp"

int main() {
  auto comm = dsp::make_communicator("mpi");
  dsp::OpOptions o;
  o.label = "warm-up";
  comm->barrier(o);  // op #1 everywhere
  if (comm->rank() != 2) {
    o.label = "skipped by rank 2";
    comm->barrier(o);  // op #2: never completes
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(30));
  }
  std::printf("rank %d: the timeout did not fire\n", comm->rank());
  return 0;
}
