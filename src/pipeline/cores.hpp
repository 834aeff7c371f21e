#pragma once
// A rank's share of the machine's cores (hwloc).
//
// The cores a rank may use are those of its allowed cpuset (the launcher's binding, affinity and
// cgroup limits respected, as hwloc reports them). Ranks of one node that were given the same
// cpuset (mpirun --bind-to none, or no launcher binding at all) split its cores evenly, in rank
// order, wrapping around when there are more ranks than cores; a rank the launcher bound to its
// own cores keeps them. A GPU rank first narrows its cpuset to the cores nearest its GPU (CUDA
// build). The rank's threads (OpenMP, BLAS, LibTorch intra-op) are as many as its share's
// processing units, and with `bind` the process is bound to the share, so every thread it starts
// inherits the binding.
//
// Collective over `comm` (one all_gather): node membership comes from the host name.
#include <string>
#include <vector>

#include "ccc/communicator.hpp"
#include "core/device.hpp"

namespace dsp {

struct CoreShare {
  int threads = 1;              // processing units of the share (>= 1)
  std::vector<int> cpus;        // OS indices of those processing units
  int node_rank = 0, node_size = 1;  // this rank among the ranks of its node
  int sharing = 1;              // ranks of this node that split the same cpuset (this one incl.)
  bool bound = false;           // the process was bound to `cpus`
  std::string describe() const;  // "cpus 0-3 (4 threads), node rank 1 of 2"
};

// This rank's place among the ranks of its node (collective: one all_gather of host names).
struct NodePlace {
  int rank = 0, size = 1;
};
NodePlace node_place(Communicator& comm);

// `requested` > 0 overrides the thread count (the cpus stay the share's). Collective.
CoreShare share_cores(Communicator& comm, const Device& device, int requested, bool bind);

// Sets this process's thread pools to `threads`: OpenMP, and OpenBLAS when LibTorch calls it (its
// own pool otherwise defaults to every core).
void set_thread_pools(int threads);

// "0-3,8" for a list of cpu indices.
std::string format_cpu_list(const std::vector<int>& cpus);

}  // namespace dsp
