#pragma once
// The device seam of the collective sampler: the local work of one rank in a CSP layer.
//
// CollectiveSampler (sampler.hpp) runs the protocol once for every device, against Communicator:
// the order of the steps and exchanges and the per-rank counts, layer-wise counts, walks and pull
// mode. The per-layer arrays live in the backend's memory (BackendBuffer), and every
// per-element step goes through this interface:
//
//   group         a frontier into tasks grouped by owner rank (and the permutation back);
//   sample        the received tasks of one layer, each a node this rank owns, into their picks;
//   segment_sums  per-rank totals of per-task counts (what the reshuffle's sizes need);
//   unpermute     picks in grouped order back to frontier order;
//   relabel       one layer's destination nodes and picks into a Block (block.hpp conventions).
//
// Sample and relabel follow the per-node logic of sample_kernels.hpp exactly, so every backend
// gives the same blocks in global ids (tested: CPU backend vs the device path executed on the
// host, at 1..4 ranks). Backends:
//
//   cpu        make_cpu_sampler_backend (cpu_backend.cpp): OpenMP loops, software-prefetched;
//              SampleKernel::kTurbo splits tasks over threads degree-sorted (degree_schedule.hpp).
//   device     KernelSamplerBackend<Exec> (kernel_backend.hpp): the device path as per-element
//              kernels and scans; with CudaExec on a GPU (cuda/sampler_backend.cu,
//              make_cuda_sampler_backend), with HostExec on the host in every CPU test
//              (emulated_sampler_backend).
//
// A new backend implements SamplerBackend, is built by a SamplerBackendFactory from the rank's
// LocalTopology, and must pass the backend-parameterised tests (tests/csp: BackendBlocks,
// BackendRelabel, and the P-invariance suite under mpiexec).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ccc/communicator.hpp"
#include "core/device.hpp"
#include "core/host_traffic.hpp"
#include "csp/block.hpp"
#include "csp/sample_kernels.hpp"

namespace dsp {

struct SamplerOptions;

// The rows this rank owns, as the sampler prepared them (host memory; valid for the sampler's
// lifetime). Row v - row_base of the patch holds the in-neighbours of global node v.
struct LocalTopology {
  int64_t num_rows = 0;
  int64_t num_edges = 0;
  int64_t row_base = 0;             // first global id this rank owns
  const int64_t* indptr = nullptr;  // [num_rows + 1]
  const void* indices = nullptr;    // [num_edges], global ids, int32 (idx32) or int64
  bool idx32 = false;
  bool indices_mapped = false;         // indices point into a read-only file mapping
  const float* weights = nullptr;      // [num_edges] or null
  const double* cum = nullptr;         // [num_edges] per-row inclusive prefix sums (biased only)
  const int64_t* times = nullptr;      // [num_edges] edge times (temporal sampling only)
  const int64_t* hot_nodes = nullptr;  // owned global ids, hottest first (the feature cache list):
  int64_t num_hot = 0;                 // rows a backend short of memory keeps closest
  size_t indices_bytes() const { return static_cast<size_t>(num_edges) * (idx32 ? 4 : 8); }
};

// Storage in a backend's memory (SamplerBackend::memory()): growth-only, its contents not kept
// when it grows. The protocol's per-layer arrays live in these, so a device backend's tasks and
// picks stay on the device.
class BackendBuffer {
 public:
  virtual ~BackendBuffer() = default;
  virtual void* reserve(size_t bytes) = 0;
  virtual void* data() const = 0;
  template <class T>
  T* reserve_n(int64_t n) {
    return static_cast<T*>(reserve(static_cast<size_t>(n > 0 ? n : 1) * sizeof(T)));
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(data());
  }
};

// One layer's picks in destination (frontier) order, in the backend's memory: destination i's
// picks are nbrs[offsets[i], offsets[i + 1]), with their edge weights when sampling is biased.
// `total` is at least the number of picks (offsets[destinations]) and the buffers hold that many
// entries: exactly it from a host backend; a device backend's sample returns a bound (the count
// stays in its memory, and its relabel reads it with the source count), so a caller that needs
// the exact count reads offsets[destinations].
struct LayerPicks {
  const int64_t* offsets = nullptr;  // [destinations + 1]
  const int64_t* nbrs = nullptr;     // [total]
  const float* weights = nullptr;    // [total], or null unless biased
  int64_t total = 0;
  // total is the picks' count (offsets[destinations]), as after an exchange whose sizes the host
  // has, not a bound: a device relabel then knows the block's sizes, but its source count, before
  // it reads anything, and reads the block with them in one copy.
  bool exact = false;
};

// The pairs the tasks of one sample call leave out of their rows (link prediction's edge
// exclusion: CollectiveSampler::ExcludedEdges), in the backend's memory (csp/sample_kernels.hpp):
// each task samples its row without its requester's pairs' entries by csp::excluding_task, so a
// task with none gives exactly its plain picks. Uniform sampling only.
using csp::TaskExclusions;

// A frontier's nodes per owner: counts[p] = the nodes v with offsets[p] <= v < offsets[p + 1].
struct OwnerCounts {
  const std::vector<int64_t>* offsets = nullptr;  // host, P + 1
  std::vector<int64_t> counts;                    // host, P
};
// Counts nodes[0, n) (host) into owners.counts.
void count_owners(const int64_t* nodes, int64_t n, OwnerCounts& owners);

// The local steps of a CSP layer. Pointers are the backend's memory unless a parameter says
// host. A call's outputs are complete for the backend's later calls; every call but sample and
// unpermute has also completed when it returns (its outputs may go straight to a communicator),
// and those two complete with the next call that does (a device backend leaves them in flight).
class SamplerBackend {
 public:
  virtual ~SamplerBackend() = default;
  virtual std::string name() const = 0;
  virtual Device device() const = 0;
  // Where the protocol's buffers live: host (cpu), or device (the kernel backends, emulated ones
  // included, so that tests exercise the device-space channels).
  virtual MemorySpace memory() const = 0;
  virtual std::unique_ptr<BackendBuffer> make_buffer() const = 0;
  virtual void to_backend(void* dst, const void* host, size_t bytes) = 0;
  virtual void to_host(void* host, const void* src, size_t bytes) = 0;
  // An upload for the backend's own later calls only: ordered before them, without a wait (the
  // host bytes may be reused on return: a device executor stages them in pinned memory; a
  // communicator must not read dst before a call that reads back). A host backend copies.
  virtual void to_backend_async(void* dst, const void* host, size_t bytes) {
    to_backend(dst, host, bytes);
  }
  // Device backends: the blocking syncs and device-to-host copies their executor has issued since
  // construction (core/host_traffic.hpp); a host backend has none.
  virtual HostTraffic traffic() const { return {}; }

  // Groups frontier[0, n) by owner: node i gets a task, csp::pack_task(id, k) with k = fanout[i]
  // (fanout non-null) or `uniform`, when k > 0; its owner p has offsets[p] <= id < offsets[p + 1]
  // (host, P + 1 entries). Owner chunks in rank order, frontier order within a chunk: tasks and
  // perm (grouped position -> frontier index) get sum(counts) entries (room for n), counts (host)
  // the tasks per owner. `known` (host, P entries, or null): the tasks per owner (the nodes with
  // k > 0) as the caller already has them (the seeds counted on the host, relabel's OwnerCounts
  // of the sources, layer-wise counts drawn on the host), which a device backend then need not
  // read back.
  virtual void group(const int64_t* frontier, int64_t n, const int32_t* fanout, int uniform,
                     const std::vector<int64_t>& offsets, int64_t* tasks, int64_t* perm,
                     std::vector<int64_t>& counts, const int64_t* known) = 0;
  // Samples tasks[0, n) (every id owned by this rank; no fanout above max_fanout, and, when
  // max_picks >= 0, the fanouts summing to at most max_picks: layer-wise's P x its draws) under
  // `key` with csp::sample_positions: counts[i] picks for task i (room for n); the picks, compacted
  // in task order, each task's sorted by row position (so by id), into nbrs (and weights, biased
  // only; null otherwise). `ex`, when not null (never with biased sampling), leaves each task's
  // excluded entries out of its row. Returns at least the number of picks (the room nbrs got):
  // exactly it on a host backend; a device backend returns a bound without reading the count
  // back (the sum of counts is exact), and its outputs are complete for its own later calls,
  // for the host and for a communicator once one of its calls that reads back (segment_sums,
  // to_host, relabel) has returned.
  virtual int64_t sample(const int64_t* tasks, int64_t n, int max_fanout, int64_t max_picks,
                         uint64_t key, int32_t* counts, BackendBuffer& nbrs, BackendBuffer* weights,
                         const TaskExclusions* ex) = 0;
  // The LABOR variates of the next sample calls (lv.on: every task takes csp::labor_positions
  // of its row instead of sample_positions; uniform, without exclusions). Off until set.
  virtual void set_labor(const csp::LaborVariates& lv) = 0;
  // The seed times of the tasks of the next sample calls (temporal sampling: task i takes
  // csp::temporal_positions of its row's entries before times[i], drawn from
  // csp::temporal_stream(key, id, times[i]); strategy and replacement from the options; uniform
  // fanouts, without exclusions). times: [n] in the backend's memory, served order; null: off.
  virtual void set_task_times(const int64_t* times) = 0;
  // Temporal sampling's device steps, neither reading nor waiting (like group given `known`: the
  // outputs are ordered before the backend's later calls and its channel's transfers).
  // out[i] = values[index[i]] for i in [0, n) (the grouped tasks' times).
  virtual void gather(const int64_t* values, const int64_t* index, int64_t n, int64_t* out) = 0;
  // The picks' pair keys: out[j] = csp::pair_key(nbrs[j], tags[i], K) for every pick j of
  // destination i < nd (offsets[i] <= j < offsets[i + 1]); positions past offsets[nd] untouched.
  virtual void pair_keys(const int64_t* offsets, const int64_t* nbrs, const int64_t* tags,
                         int64_t nd, int64_t K, int64_t* out) = 0;
  // sums[p] = counts[off[p]] + ... + counts[off[p + 1] - 1] for every p (off and sums: host).
  virtual std::vector<int64_t> segment_sums(const int32_t* counts,
                                            const std::vector<int64_t>& off) = 0;
  // Picks in grouped order (counts[ng], nbrs and weights compacted) to frontier order: frontier
  // index perm[pos] gets grouped position pos's picks, indices no position names none. Writes
  // out_offsets ([nf + 1]); out_nbrs/out_weights get the picks (room for `picks`, at least their
  // number) unless perm is null (the grouped order is the frontier order, ng == nf: the picks
  // stay where they are).
  virtual void unpermute(const int64_t* perm, int64_t ng, int64_t nf, const int32_t* counts,
                         const int64_t* nbrs, const float* weights, int64_t picks,
                         BackendBuffer& out_offsets, BackendBuffer& out_nbrs,
                         BackendBuffer* out_weights) = 0;
  // The block of one layer (`layer` counts from the seeds out; backends may keep per-layer sizing
  // hints): destination nodes dst[0, nd) first, then new sources in first-seen order over
  // `picks`. The block is host memory (edges: see SamplerOptions::blocks_on_device); its source
  // ids also go to `src` unless it is null (the next frontier, when it lives in backend memory).
  // `owners`, unless null, gets the sources per owner (a device backend counts them on the device
  // and reads them with its sizes: the next layer's group then reads nothing).
  virtual void relabel(const int64_t* dst, int64_t nd, const LayerPicks& picks, int layer,
                       Block& out, BackendBuffer* src, OwnerCounts* owners) = 0;
};

// A BackendBuffer over an executor's buffer type (core/host_exec.hpp: E::Buffer).
template <class B>
class BackendBufferOf final : public BackendBuffer {
 public:
  BackendBufferOf() = default;
  explicit BackendBufferOf(B b) : b_(std::move(b)) {}  // e.g. an executor's buffer()
  void* reserve(size_t bytes) override { return b_.reserve(bytes); }
  void* data() const override { return b_.data(); }

 private:
  B b_;
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
