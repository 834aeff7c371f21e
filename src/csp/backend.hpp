#pragma once
// The device seam of the collective sampler: the local work of one rank in a CSP layer.
//
// CollectiveSampler (sampler.hpp) runs the protocol once for every device, against Communicator:
// owner grouping, count exchange, shuffle, reshuffle, un-permuting, layer-wise counts, walks and
// pull mode. What a rank computes on its own goes through this interface:
//
//   sample   the received tasks of one layer, each a node this rank owns, into their picks;
//   relabel  one layer's destination nodes and picks into a Block (block.hpp conventions).
//
// Both follow the per-node logic of sample_kernels.hpp exactly, so every backend gives the same
// blocks in global ids (tested: CPU backend vs the device path executed on the host, at 1..4
// ranks). Backends:
//
//   cpu        make_cpu_sampler_backend (cpu_backend.cpp): OpenMP loops, software-prefetched;
//              SampleKernel::kTurbo splits tasks over threads degree-sorted (degree_schedule.hpp).
//   device     KernelSamplerBackend<Exec> (kernel_backend.hpp): the device path as per-element
//              kernels and scans; with CudaExec on a GPU (cuda/sampler_backend.cu,
//              make_cuda_sampler_backend), with HostExec on the host in every CPU test
//              (emulated_sampler_backend).
//
// A new backend implements SamplerBackend, is built by a SamplerBackendFactory from the rank's
// LocalTopology, and must pass the backend-parameterised tests (tests/csp: BackendEquivalence,
// and the P-invariance suite under mpiexec).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "csp/block.hpp"

namespace dsp {

struct SamplerOptions;

// The rows this rank owns, as the sampler prepared them (host memory; valid for the sampler's
// lifetime). Row v - row_base of the patch holds the in-neighbours of global node v.
struct LocalTopology {
  int64_t num_rows = 0;
  int64_t num_edges = 0;
  int64_t row_base = 0;              // first global id this rank owns
  const int64_t* indptr = nullptr;   // [num_rows + 1]
  const void* indices = nullptr;     // [num_edges], global ids, int32 (idx32) or int64
  bool idx32 = false;
  bool indices_mapped = false;       // indices point into a read-only file mapping
  const float* weights = nullptr;    // [num_edges] or null
  const double* cum = nullptr;       // [num_edges] per-row inclusive prefix sums (biased only)
  const int64_t* hot_nodes = nullptr;  // owned global ids, hottest first (the feature cache list):
  int64_t num_hot = 0;                 // rows a backend short of memory keeps closest
  size_t indices_bytes() const { return static_cast<size_t>(num_edges) * (idx32 ? 4 : 8); }
};

// One layer's picks in destination (frontier) order: destination i's picks are
// nbrs[offsets[i], offsets[i + 1]), with their edge weights when sampling is biased.
struct LayerPicks {
  std::vector<int64_t> offsets;  // [destinations + 1]
  std::vector<int64_t> nbrs;
  std::vector<float> weights;  // empty unless biased
};

// What sampling a list of tasks produced, compacted in task order.
struct TaskPicks {
  std::vector<int32_t> counts;  // [tasks]
  std::vector<int64_t> nbrs;    // sum(counts) global ids, task by task, each task's sorted by row
                                // position (so by id)
  std::vector<float> weights;   // same length when biased, else empty
};

class SamplerBackend {
 public:
  virtual ~SamplerBackend() = default;
  virtual std::string name() const = 0;
  virtual Device device() const = 0;
  // Samples tasks[0, n) (csp::pack_task(global id, fanout), every id owned by this rank) under
  // `key` with csp::sample_positions: out.counts[i] picks for task i. Reuses out's capacity.
  virtual void sample(const int64_t* tasks, int64_t n, uint64_t key, TaskPicks& out) = 0;
  // The block of one layer (`layer` counts from the seeds out; backends may keep per-layer sizing
  // hints): destination nodes first, then new sources in first-seen order over `picks`.
  virtual void relabel(const std::vector<int64_t>& dst, const LayerPicks& picks, int layer,
                       Block& out) = 0;
};

using SamplerBackendFactory =
    std::function<std::unique_ptr<SamplerBackend>(const LocalTopology&, const SamplerOptions&)>;

// The CPU backend (the default when a sampler is given no factory).
std::unique_ptr<SamplerBackend> make_cpu_sampler_backend(const LocalTopology& topo,
                                                         const SamplerOptions& opts);
struct CpuBackendOptions {
  // Fewest tasks per thread: a layer of n tasks is split over min(threads, n / split_grain)
  // threads (tests lower it to split small batches).
  int64_t split_grain = 4096;
};
SamplerBackendFactory cpu_sampler_backend(CpuBackendOptions opts);
struct KernelBackendOptions {
  // Bytes of device memory the neighbour array may take; beyond it, the array is read where it is
  // (host memory, through UVA on a GPU) except for the hottest rows that fit.
  size_t index_budget = static_cast<size_t>(-1);
};
// The device path (KernelSamplerBackend) executed on the host: what CPU tests run to check the
// CUDA backend's sequence of kernels, scans and copies.
SamplerBackendFactory emulated_sampler_backend(KernelBackendOptions opts = {});

}  // namespace dsp
