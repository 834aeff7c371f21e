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
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ccc/communicator.hpp"
#include "core/device.hpp"

namespace dsp {

struct CoreShare {
  int threads = 1;                   // processing units of the share (>= 1)
  std::vector<int> cpus;             // OS indices of those processing units
  int node_rank = 0, node_size = 1;  // this rank among the ranks of its node
  int sharing = 1;               // ranks of this node that split the same cpuset (this one incl.)
  bool bound = false;            // the process was bound to `cpus`
  std::string describe() const;  // "cpus 0-3 (4 threads), node rank 1 of 2"
};

// This rank's place among the ranks of its node (collective: one all_gather of host names).
struct NodePlace {
  int rank = 0, size = 1;
};
NodePlace node_place(Communicator& comm);

// `requested` > 0 overrides the thread count (the cpus stay the share's). Collective.
CoreShare share_cores(Communicator& comm, const Device& device, int requested, bool bind);

// Sets this process's thread pools to `threads`: OpenMP (of the calling thread), and OpenBLAS when
// LibTorch calls it (its own pool otherwise defaults to every core).
void set_thread_pools(int threads);
// OpenMP's team size for parallel regions the calling thread starts (a per-thread setting: a new
// thread starts with OpenMP's process default, one thread per core the process saw at start).
void set_omp_threads(int threads);
// OpenBLAS's pool size (process-wide), when OpenBLAS is loaded.
void set_blas_threads(int threads);
// Binds the calling thread to `cpus` (threads it starts later inherit the binding). False if the
// system refused.
bool bind_this_thread(const std::vector<int>& cpus);

// Makes this process's thread pools wait without burning cores: libgomp spins ~300,000 times at
// every barrier and idle dock before it sleeps, and OpenBLAS's pthread pool spins up to 2^28
// cycles (~0.1 s) after every call; while they spin, the pipeline's other stages (and the other
// ranks of the node) lose those cores. Both libraries read their wait policy from the environment
// once, when they load, so the process has to start with it: unless the user set them,
// OMP_WAIT_POLICY=passive and OPENBLAS_THREAD_TIMEOUT=4 are set and the program re-executes
// itself once (/proc/self/exe, same arguments, same pid: mpirun sees the same process).
// DSP_SPIN_WAIT=1 keeps the libraries' defaults. Call first thing in main(), before any thread
// or MPI starts. Returns only if no re-execution was needed (or it failed).
void ensure_passive_waits(char** argv);

// Host memory on the NUMA nodes nearest `device` (a GPU: the cpus hwloc finds near it within this
// process's allowed ones, as share_cores narrows them; a CPU: the allowed cpus), for the staging
// of a device channel (ccc/staged_communicator.hpp's HostAlloc): page-aligned, bound to `nodes`
// with hwloc_alloc_membind. Where the system refuses the binding (a kernel or container without
// mbind), the memory is allocated unbound, and the first refusal logged.
struct NearMemory {
  std::vector<int> nodes;  // OS indices of the NUMA nodes
  std::function<std::shared_ptr<void>(size_t bytes)> alloc;
};
NearMemory near_memory(const Device& device);
// The NUMA nodes holding the pages of [p, p + bytes) (touched ones), ascending.
std::vector<int> memory_nodes(const void* p, size_t bytes);

// While alive, the memory this thread allocates or first touches (malloc, cudaHostAlloc, torch's
// pin_memory) comes from NUMA `nodes` (OS indices; hwloc_set_membind, thread scope, bind
// policy); the thread's previous policy comes back on destruction. dsp.Loader(pin_memory=True)
// pins each batch under one so that its page-locked copy lies near the GPU
// (near_memory(gpu).nodes). Where the system refuses (no mbind in this kernel or container) nothing
// is bound (logged once), and bound() says so. Empty `nodes`: nothing to bind.
class ThreadMemoryBinding {
 public:
  explicit ThreadMemoryBinding(const std::vector<int>& nodes);
  ~ThreadMemoryBinding();
  ThreadMemoryBinding(const ThreadMemoryBinding&) = delete;
  ThreadMemoryBinding& operator=(const ThreadMemoryBinding&) = delete;
  bool bound() const { return state_ != nullptr; }

 private:
  struct State;
  std::unique_ptr<State> state_;  // the previous policy; null when nothing was bound
};
// The NUMA nodes this thread's memory is bound to, ascending; empty when it is not bound (the
// default policy: pages come from the node of the cpu that touches them first) or the system does
// not say.
std::vector<int> thread_memory_nodes();

// "0-3,8" for a list of cpu indices.
std::string format_cpu_list(const std::vector<int>& cpus);

}  // namespace dsp
