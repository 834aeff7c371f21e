#pragma once
// The device sampler backend (backend.hpp), written once against an executor (core/host_exec.hpp):
// with CudaExec it is the CUDA backend (cuda/sampler_backend.cu), with HostExec the host emulation
// every CPU test runs. Each kernel is one per-element functor over sample_kernels.hpp; everything
// else is the executor's copies and scans, so what the CPU tests check is the sequence the GPU
// runs.
//
// Every array is executor memory (the sampler's BackendBuffers); only sizes are read back.
// group: an owner per node (csp::owner_of); one exclusive scan of the owner-major flag matrix
// (P x n) gives every node its grouped position (stable within an owner); one scatter of tasks
// and permutation.
// sample: slots = prefix sums of the fanouts (scan); one thread per task draws its positions and
// writes ids at its slot; counts are scanned into offsets and the picks compacted (one thread per
// task). With SampleKernel::kTurbo the draws run as TurboSampleTask (csp/degree_schedule.hpp): the
// same draws per task, tasks degree-sorted and dealt to warps and blocks in snake order,
// high-degree tasks' positions in shared memory. Tasks under exclusions (TaskExclusions: their
// requesters' pairs, found by binary searches) draw by csp::excluding_task in the same per-task
// function, under either schedule.
// segment_sums: counts widened and scanned, the scan read at the segment bounds.
// unpermute: per-node counts scattered through the permutation and scanned into offsets; one
// thread per grouped position moves its picks.
// relabel: keys = destinations then picks; every position offers itself to its key's table slot
// (atomic minimum: the slot ends at the key's first position); first occurrences are flagged and
// scanned into ids; every position looks its id up. The picks' exact count and the source count
// come back in one read; then the block (packed: offsets, local ids, weights, source ids) in one
// more, unless it stays in executor memory (blocks_on_device: the source ids are read; with
// ids_on_device they stay too, the block copied by its bounds before the sizes are read, so that
// read is the layer's only one); its source ids also stay in executor memory (the next frontier).
// Host round trips (core/host_traffic.hpp, pinned in tests/csp/test_host_traffic.cpp): group reads
// the P owner counts (nothing at one rank with a uniform fanout, or when the caller knows them);
// sample sizes its slots by n x max_fanout or the caller's max_picks, the smaller (read only past
// kSlotBound), and returns that bound, the exact pick count staying on the device
// (LayerPicks::total); unpermute is sized by the bound it is given; relabel reads the two sizes,
// then the block: 2 reads per layer at one rank (1 with ids_on_device, or when the picks' count is
// exact, LayerPicks::exact: the block read with the sizes by a bound). Both are deterministic
// whatever the order threads run in (HostExec runs them scrambled). cuda_graphs
// (SamplerOptions): each of a layer's four sequences (group: owners, flags, scan, scatter, chunk
// bounds; sample: slots, draws, compaction, the turbo sort; unpermute; relabel up to its sizes:
// keys, table, flags, ids, sizes, the sources' owner bounds) has a fixed shape once its sizes are
// rounded up (capture_size: positions past the live count, read from executor memory with the
// key, LABOR's variates and the destination count, take no part), so the second call of a shape
// is captured (Exec::capture_begin/capture_end: a CUDA Graph) and every later one replays it in
// one launch (HostTraffic::graph_launches); the blocks are those of the direct sequence. The
// reads, the exchanges between ranks and the copies of the block (sized by the exact counts)
// stay direct.
//
// Its parts: the adjacency in executor memory (csp/kernel_topology.hpp: the neighbour array, or
// the hottest rows of it within a budget), the captures by shape (core/capture_cache.hpp), the
// blocks' edges read or kept on the device (csp/kernel_block_edges.hpp), the sample step's draws
// (csp/kernel_draws.hpp), the work buffers and owner scans the sequences share
// (csp/kernel_scratch.hpp) and the executor's buffers used as typed arrays (core/exec_memory.hpp).
// Buffers grow geometrically and are reused: no allocation per batch once sizes settle.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/capture_cache.hpp"
#include "core/error.hpp"
#include "core/exec_memory.hpp"
#include "core/group_kernels.hpp"
#include "core/host_device.hpp"
#include "core/rng.hpp"
#include "csp/backend.hpp"
#include "csp/degree_schedule.hpp"
#include "csp/kernel_backend_kernels.hpp"
#include "csp/kernel_block_edges.hpp"
#include "csp/kernel_draws.hpp"
#include "csp/kernel_scratch.hpp"
#include "csp/kernel_topology.hpp"
#include "csp/sample_kernels.hpp"
#include "csp/sampler.hpp"
#include "csp/temporal_kernels.hpp"

namespace dsp {

template <class Exec>
class KernelSamplerBackend final : public SamplerBackend {
 public:
  KernelSamplerBackend(Exec exec, std::string name, Device device, const LocalTopology& topo,
                       const SamplerOptions& opts, KernelBackendOptions kopts = {})
      : ex_(std::move(exec)),
        name_(std::move(name)),
        device_(device),
        topo_(ex_, topo, opts.biased(), opts.temporal() != nullptr, kopts.index_budget),
        edges_(ex_, device, opts.blocks_on_device,
               opts.blocks_on_device && opts.ids_on_device && !opts.temporal()),
        captures_(opts.cuda_graphs),
        s_(ex_),
        draws_(ex_, s_, captures_, topo_, opts) {
    ex_.sync();
  }
  // Its draws hold references to its executor, buffers, captures and topology.
  KernelSamplerBackend(const KernelSamplerBackend&) = delete;
  KernelSamplerBackend& operator=(const KernelSamplerBackend&) = delete;

  std::string name() const override { return name_; }
  Device device() const override { return device_; }
  void set_labor(const csp::LaborVariates& lv) override { draws_.set_labor(lv); }
  void set_task_times(const int64_t* times) override { draws_.set_task_times(times); }
  void gather(const int64_t* values, const int64_t* index, int64_t n, int64_t* out) override {
    if (n) ex_.for_each(n, kernels::GatherAt{values, index, out});
  }
  void pair_keys(const int64_t* offsets, const int64_t* nbrs, const int64_t* tags, int64_t nd,
                 int64_t K, int64_t* out) override {
    if (nd) ex_.for_each(nd, csp::PairKeys{offsets, nbrs, tags, K, out});
  }
  // Where its adjacency is (in executor memory, or read through host mappings: hot rows).
  const DeviceTopology<Exec>& topology() const { return topo_; }
  // cuda_graphs: the launches of each sequence's captures (group, sample, unpermute, relabel).
  std::array<int64_t, 4> replays() const { return captures_.replays(); }

  MemorySpace memory() const override { return MemorySpace::kDevice; }
  HostTraffic traffic() const override { return ex_.traffic(); }
  std::unique_ptr<BackendBuffer> make_buffer() const override {
    return std::make_unique<BackendBufferOf<Buffer>>(ex_.buffer());
  }
  void to_backend(void* dst, const void* host, size_t bytes) override {
    if (bytes) ex_.to_device(dst, host, bytes);
    ex_.sync();
  }
  void to_host(void* host, const void* src, size_t bytes) override {
    if (bytes) ex_.to_host(host, src, bytes);
    ex_.sync();
  }
  void to_backend_async(void* dst, const void* host, size_t bytes) override {
    if (bytes) ex_.to_device(dst, host, bytes);
  }

  // Owners per node, one scan of the owner-major flag matrix (P x m: P is a few ranks) giving
  // every node its grouped position, one scatter; the P chunk sizes come back in one copy, unless
  // the caller knows them (`known`), or one rank takes every node. Over m = n positions, or with
  // cuda_graphs the shape's m >= n (capture_size) through its capture (replay).
  void group(const int64_t* frontier, int64_t n, const int32_t* fanout, int uniform,
             const std::vector<int64_t>& offsets, int64_t* tasks, int64_t* perm,
             std::vector<int64_t>& counts, const int64_t* known) override {
    const int P = static_cast<int>(offsets.size()) - 1;
    counts.assign(P, 0);
    if (n == 0) return;
    const bool all_mine = P == 1 && !fanout && uniform > 0;  // every node is a task of this rank
    const bool read = !all_mine && !known;
    const int64_t m = captures_.enabled() ? Captures::capture_size(n) : n;
    const OwnerInputs in = upload_owner_inputs(ex_, s_.group_in, n, &offsets, m);
    auto* owner = reserve<int64_t>(s_.owner, m);
    auto* flag = reserve<int64_t>(s_.wide, P * m);
    auto* rank = reserve<int64_t>(s_.slot, P * m + 1);
    auto* got = reserve<int64_t>(s_.small_out, P + 1);
    const auto seq = [&] {
      ex_.for_each(m,
                   kernels::GroupOwner{in.live, frontier, fanout, uniform, in.offsets, P, owner});
      owner_ranks(ex_, s_, owner, m, P);
      ex_.for_each(m,
                   kernels::GroupScatter{frontier, fanout, uniform, owner, m, rank, tasks, perm});
      if (read) owner_chunk_bounds(ex_, rank, P, in.at, got);
    };
    captures_.replay(ex_,
                     Shape{kSeqGroup,
                           {m, P, uniform, read},
                           ex_.scratch_moves(),
                           {frontier, fanout, in.live, owner, flag, rank, tasks, perm, got}},
                     seq);
    if (all_mine) {
      counts[0] = n;
      return;
    }
    if (known) {  // the caller has counted the tasks per owner
      counts.assign(known, known + P);
      return;
    }
    std::vector<int64_t> bounds(P + 1);
    download(ex_, bounds.data(), got, P + 1);
    ex_.sync();
    for (int p = 0; p < P; ++p) counts[p] = bounds[p + 1] - bounds[p];
  }

  // The sequence runs over the n tasks, or, with cuda_graphs, over the shape's size m >= n
  // (capture_size) and is replayed (replay); its scalars come from executor memory.
  int64_t sample(const int64_t* t, int64_t n, int max_fanout, int64_t max_picks, uint64_t key,
                 int32_t* cnt, BackendBuffer& nbrs, BackendBuffer* weights,
                 const TaskExclusions* ex) override {
    if (n == 0) return 0;
    return draws_.sample(t, n, max_fanout, max_picks, key, cnt, nbrs, weights, ex);
  }

  std::vector<int64_t> segment_sums(const int32_t* counts,
                                    const std::vector<int64_t>& off) override {
    const int64_t m = static_cast<int64_t>(off.size());
    const int64_t n = off.back();
    auto* wide = reserve<int64_t>(s_.wide, n);
    ex_.for_each(n, kernels::WidenCounts{counts, wide});
    auto* scan = prefix_with_zero(ex_, s_.slot, wide, n);
    const int64_t* at = upload(ex_, s_.small, off.data(), m);
    auto* got = reserve<int64_t>(s_.small_out, m);
    ex_.for_each(m, kernels::GatherAt{scan, at, got});
    std::vector<int64_t> ends(m);
    download(ex_, ends.data(), got, m);
    ex_.sync();
    std::vector<int64_t> sums(m - 1);
    for (int64_t p = 0; p + 1 < m; ++p) sums[p] = ends[p + 1] - ends[p];
    return sums;
  }

  // Nothing read and no wait: the picks' only consumer is relabel, on this executor's stream,
  // and `picks` sizes the output. Over the ng grouped and nf frontier positions, or with
  // cuda_graphs their shapes' (capture_size) through its capture (replay).
  void unpermute(const int64_t* perm, int64_t ng, int64_t nf, const int32_t* counts,
                 const int64_t* nbrs, const float* weights, int64_t picks,
                 BackendBuffer& out_offsets, BackendBuffer& out_nbrs,
                 BackendBuffer* out_weights) override {
    const int64_t mg = captures_.enabled() ? Captures::capture_size(ng) : ng;
    const int64_t mf = captures_.enabled() ? Captures::capture_size(nf) : nf;
    const int64_t sizes[2] = {ng, nf};
    const int64_t* live = upload(ex_, s_.unpermute_in, sizes, 2);
    auto* off = out_offsets.reserve_n<int64_t>(mf + 1);
    auto* per_node = reserve<int64_t>(s_.wide, mf);
    auto* wide = perm ? reserve<int64_t>(s_.owner, mg) : nullptr;
    auto* start = perm ? reserve<int64_t>(s_.slot, mg + 1) : nullptr;
    auto* out = perm ? out_nbrs.reserve_n<int64_t>(picks) : nullptr;
    float* outw = perm && weights ? out_weights->reserve_n<float>(picks) : nullptr;
    const auto seq = [&] {
      if (!perm) {  // grouped order is frontier order
        ex_.for_each(mf, kernels::WidenCounts{counts, per_node, live + 1});
        return scan_into(ex_, off, per_node, mf);
      }
      ex_.zero(per_node, static_cast<size_t>(mf) * sizeof(int64_t));
      ex_.for_each(mg, kernels::ScatterCounts{live, perm, counts, per_node});
      scan_into(ex_, off, per_node, mf);
      ex_.for_each(mg, kernels::WidenCounts{counts, wide, live});
      scan_into(ex_, start, wide, mg);
      ex_.for_each(mg,
                   kernels::MovePicks{live, perm, counts, start, off, nbrs, weights, out, outw});
    };
    captures_.replay(
        ex_,
        Shape{kSeqUnpermute,
              {mg, mf},
              ex_.scratch_moves(),
              {perm, counts, nbrs, weights, live, off, per_node, wide, start, out, outw}},
        seq);
  }

  // Two reads: the sizes (the picks' exact count, lo.offsets[nd], and the source count) in one,
  // then the block: packed in executor memory (edge_words | sources) and read in one
  // copy, or left there (blocks_on_device: only its source ids are read; ids_on_device: nothing,
  // the sizes' read is the only one). One when lo.exact: the block (or its source ids) read with
  // the sizes (read_with_sizes). The kernels run over m >= nd + lo.total positions (lo.total
  // bounds the picks; with cuda_graphs, the shape's m, capture_size): those past nd + the exact
  // count take no part.
  void relabel(const int64_t* dst, int64_t nd, const LayerPicks& lo, int /*layer*/, Block& b,
               BackendBuffer* src_out, OwnerCounts* owners) override {
    const int64_t n = nd + lo.total;
    const int64_t m = captures_.enabled() && n ? Captures::capture_size(n) : n;
    DSP_CHECK(m < (int64_t{1} << 32) - 1, "relabel: {} keys in one layer (at most 2^32-2)", m);
    b.num_dst = nd;
    b.src_ids.clear();
    b.num_src = 0;
    const int P = owners ? static_cast<int>(owners->offsets->size()) - 1 : 0;
    // {picks, sources, then the sources' owner-chunk bounds when counted}
    auto* sizes = reserve<int64_t>(s_.small_out, 2 + (P ? P + 1 : 0));
    auto* src = reserve<int64_t>(s_.picks, m);
    auto* local = reserve<int64_t>(s_.out, m);
    if (owners) owners->counts.assign(P, 0);
    if (n == 0) return edges_.set(ex_, nd, lo, 0, local, src, b);
    issue_relabel(ex_, s_, captures_, dst, nd, lo, m, src, local, sizes, owners);
    if (lo.exact && !edges_.ids_on_device())
      return edges_.read_with_sizes(ex_, nd, lo, local, src, sizes, b, src_out, owners);
    std::shared_ptr<BlockEdges>
        e;                 // ids_on_device: the block, copied by its bounds before the read
    if (edges_.ids_on_device()) {  // nothing is read after the sizes, so their wait covers these
                                   // copies
      e = edges_.lend(ex_, nd, lo, lo.total, local + nd, src, n);
      if (src_out) ex_.copy(src_out->reserve_n<int64_t>(n), src, n * sizeof(int64_t));
    }
    std::vector<int64_t> got(2 + (P ? P + 1 : 0));
    download(ex_, got.data(), sizes, static_cast<int64_t>(got.size()));
    ex_.sync();
    Edges::take_sizes(got.data(), b, owners);
    if (e) {
      e->num_edges = got[0];
      return Edges::put(std::move(e), b);
    }
    if (src_out) {  // issued before the last read, whose wait covers it
      ex_.copy(src_out->reserve_n<int64_t>(b.num_src), src, b.num_src * sizeof(int64_t));
    }
    edges_.set(ex_, nd, lo, got[0], local, src, b);
    if (!edges_.on_device()) return;
    b.src_ids.resize(b.num_src);
    download(ex_, b.src_ids.data(), src, b.num_src);
    ex_.sync();
  }

 private:
  using Buffer = typename Exec::Buffer;
  using Captures = SamplerCaptures<Exec>;
  using Shape = typename Captures::Shape;
  using Edges = DeviceBlockEdges<Exec>;

  Exec ex_;
  std::string name_;
  Device device_;
  DeviceTopology<Exec> topo_;
  Edges edges_;
  Captures captures_;  // cuda_graphs: the shapes seen, their captures and launches
  SamplerScratch<Exec> s_;
  DeviceDraws<Exec> draws_;
};

}  // namespace dsp
