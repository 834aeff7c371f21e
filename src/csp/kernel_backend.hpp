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
// Topology: indptr (and cum, weights when biased) in executor memory; the neighbour array too if it
// fits `index_budget` bytes. Otherwise the array is read where it is through map_host (UVA on a
// GPU), and the hottest rows (LocalTopology::hot_nodes first, then ascending ids) that fit the
// budget are copied to executor memory: DSP's adjacency position list, row_loc[r] = the row's
// offset there, or -1 for a row read from the host. Buffers grow geometrically and are reused: no
// allocation per batch once sizes settle.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/group_kernels.hpp"
#include "core/host_device.hpp"
#include "core/recycle_pool.hpp"
#include "core/rng.hpp"
#include "csp/backend.hpp"
#include "csp/degree_schedule.hpp"
#include "csp/kernel_backend_kernels.hpp"
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
        topo_(topo),
        biased_(opts.biased),
        replace_(opts.replace),
        turbo_(opts.kernel == SampleKernel::kTurbo),
        blocks_on_device_(opts.blocks_on_device),
        ids_on_device_(opts.blocks_on_device && opts.ids_on_device && !opts.temporal),
        cuda_graphs_(opts.cuda_graphs),
        strategy_(opts.temporal_strategy) {
    DSP_CHECK_ARG(topo.num_edges < (int64_t{1} << 31) || !topo.idx32,
                  "sampler backend: int32 neighbour ids with more than 2^31 entries");
    upload(indptr_, topo.indptr, static_cast<size_t>(topo.num_rows + 1) * sizeof(int64_t));
    const size_t ib = topo.indices_bytes();
    if (ib <= kopts.index_budget) {
      indices_ = upload(indices_buf_, topo.indices, ib);
    } else {
      indices_ = ex_.map_host(topo.indices, ib, topo.indices_mapped, indices_reg_);
      indices_on_host_ = true;
      if (kopts.index_budget > 0) split_rows(kopts.index_budget);
    }
    if (biased_) {
      upload(cum_, topo.cum, static_cast<size_t>(topo.num_edges) * sizeof(double));
      upload(weights_, topo.weights, static_cast<size_t>(topo.num_edges) * sizeof(float));
    }
    if (opts.temporal) {
      upload(times_, topo.times, static_cast<size_t>(topo.num_edges) * sizeof(int64_t));
    }
    ex_.sync();
  }

  std::string name() const override { return name_; }
  Device device() const override { return device_; }
  void set_labor(const csp::LaborVariates& lv) override { labor_ = lv; }
  void set_task_times(const int64_t* times) override { task_times_ = times; }
  void gather(const int64_t* values, const int64_t* index, int64_t n, int64_t* out) override {
    if (n) ex_.for_each(n, kernels::GatherAt{values, index, out});
  }
  void pair_keys(const int64_t* offsets, const int64_t* nbrs, const int64_t* tags, int64_t nd,
                 int64_t K, int64_t* out) override {
    if (nd) ex_.for_each(nd, csp::PairKeys{offsets, nbrs, tags, K, out});
  }
  bool indices_on_host() const { return indices_on_host_; }
  // cuda_graphs: the launches of each sequence's captures (group, sample, unpermute, relabel).
  std::array<int64_t, 4> replays() const { return replays_; }
  int64_t hot_rows() const { return hot_rows_; }

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
    const int64_t m = cuda_graphs_ ? capture_size(n) : n;
    const OwnerInputs in = upload_owner_inputs(group_in_, n, &offsets, m);
    auto* owner = reserve<int64_t>(owner_, m);
    auto* flag = reserve<int64_t>(wide_, P * m);
    auto* rank = reserve<int64_t>(slot_, P * m + 1);
    auto* got = reserve<int64_t>(small_out_, P + 1);
    const auto seq = [&] {
      ex_.for_each(m,
                   kernels::GroupOwner{in.live, frontier, fanout, uniform, in.offsets, P, owner});
      owner_ranks(owner, m, P);
      ex_.for_each(m,
                   kernels::GroupScatter{frontier, fanout, uniform, owner, m, rank, tasks, perm});
      if (read) owner_chunk_bounds(rank, P, in.at, got);
    };
    replay(Shape{Seq::kGroup,
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
    download(bounds.data(), got, P + 1);
    ex_.sync();
    for (int p = 0; p < P; ++p) counts[p] = bounds[p + 1] - bounds[p];
  }

  // The sequence runs over the n tasks, or, with cuda_graphs, over the shape's size m >= n
  // (capture_size) and is replayed (replay); its scalars come from executor memory.
  int64_t sample(const int64_t* t, int64_t n, int max_fanout, int64_t max_picks, uint64_t key,
                 int32_t* cnt, BackendBuffer& nbrs, BackendBuffer* weights,
                 const TaskExclusions* ex) override {
    if (n == 0) return 0;
    const int64_t f = std::max(max_fanout, 0);
    const kernels::SampleParams p{n, key, labor_};
    SampleCall c{upload(params_, &p, sizeof p), t, n, max_fanout, cnt, ex,
                 slot_bound(n, f, max_picks)};
    const int64_t m = capture_size(n);
    if (cuda_graphs_ && slot_bound(m, f, max_picks) <= kSlotBound) {
      const int64_t direct = c.total;
      c.m = m;
      c.total = slot_bound(m, f, max_picks);
      replay(reserve_sample(c, nbrs, weights),
             [&] { issue_draws(c, issue_slots(c), nbrs, weights); });
      return direct;
    }
    const int64_t* slot = issue_slots(c);
    // The slots are sized by n x max_fanout (no fanout is above it), or by max_picks when that is
    // smaller, where that is at most kSlotBound entries, without reading their sum back; beyond,
    // the sum is read.
    if (c.total > kSlotBound) c.total = read_back(slot + n);
    issue_draws(c, slot, nbrs, weights);
    return c.total;
  }

  std::vector<int64_t> segment_sums(const int32_t* counts,
                                    const std::vector<int64_t>& off) override {
    const int64_t m = static_cast<int64_t>(off.size());
    const int64_t n = off.back();
    auto* wide = reserve<int64_t>(wide_, n);
    ex_.for_each(n, kernels::WidenCounts{counts, wide});
    auto* scan = prefix_with_zero(slot_, wide, n);
    const int64_t* at = upload(small_, off.data(), m * sizeof(int64_t));
    auto* got = reserve<int64_t>(small_out_, m);
    ex_.for_each(m, kernels::GatherAt{scan, at, got});
    std::vector<int64_t> ends(m);
    download(ends.data(), got, m);
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
    const int64_t mg = cuda_graphs_ ? capture_size(ng) : ng;
    const int64_t mf = cuda_graphs_ ? capture_size(nf) : nf;
    const int64_t sizes[2] = {ng, nf};
    const int64_t* live = upload(unpermute_in_, sizes, sizeof sizes);
    auto* off = out_offsets.reserve_n<int64_t>(mf + 1);
    auto* per_node = reserve<int64_t>(wide_, mf);
    auto* wide = perm ? reserve<int64_t>(owner_, mg) : nullptr;
    auto* start = perm ? reserve<int64_t>(slot_, mg + 1) : nullptr;
    auto* out = perm ? out_nbrs.reserve_n<int64_t>(picks) : nullptr;
    float* outw = perm && weights ? out_weights->reserve_n<float>(picks) : nullptr;
    const auto seq = [&] {
      if (!perm) {  // grouped order is frontier order
        ex_.for_each(mf, kernels::WidenCounts{counts, per_node, live + 1});
        return scan_into(off, per_node, mf);
      }
      ex_.zero(per_node, static_cast<size_t>(mf) * sizeof(int64_t));
      ex_.for_each(mg, kernels::ScatterCounts{live, perm, counts, per_node});
      scan_into(off, per_node, mf);
      ex_.for_each(mg, kernels::WidenCounts{counts, wide, live});
      scan_into(start, wide, mg);
      ex_.for_each(mg,
                   kernels::MovePicks{live, perm, counts, start, off, nbrs, weights, out, outw});
    };
    replay(Shape{Seq::kUnpermute,
                 {mg, mf},
                 ex_.scratch_moves(),
                 {perm, counts, nbrs, weights, live, off, per_node, wide, start, out, outw}},
           seq);
  }

  // Two reads: the sizes (the picks' exact count, lo.offsets[nd], and the source count) in one,
  // then the block: packed in executor memory (pack_, words: edge_words | sources) and read in one
  // copy, or left there (blocks_on_device: only its source ids are read; ids_on_device: nothing,
  // the sizes' read is the only one). One when lo.exact: the block (or its source ids) read with
  // the sizes (read_with_sizes). The kernels run over m >= nd + lo.total positions (lo.total
  // bounds the picks; with cuda_graphs, the shape's m, capture_size): those past nd + the exact
  // count take no part.
  void relabel(const int64_t* dst, int64_t nd, const LayerPicks& lo, int /*layer*/, Block& b,
               BackendBuffer* src_out, OwnerCounts* owners) override {
    const int64_t n = nd + lo.total;
    const int64_t m = cuda_graphs_ && n ? capture_size(n) : n;
    DSP_CHECK(m < (int64_t{1} << 32) - 1, "relabel: {} keys in one layer (at most 2^32-2)", m);
    b.num_dst = nd;
    b.src_ids.clear();
    b.num_src = 0;
    const int P = owners ? static_cast<int>(owners->offsets->size()) - 1 : 0;
    // {picks, sources, then the sources' owner-chunk bounds when counted}
    auto* sizes = reserve<int64_t>(small_out_, 2 + (P ? P + 1 : 0));
    auto* src = reserve<int64_t>(picks_, m);
    auto* local = reserve<int64_t>(out_, m);
    if (owners) owners->counts.assign(P, 0);
    if (n == 0) return set_edges(nd, lo, 0, local, src, b);
    issue_relabel(dst, nd, lo, m, src, local, sizes, owners);
    if (lo.exact && !ids_on_device_)
      return read_with_sizes(nd, lo, local, src, sizes, b, src_out, owners);
    std::shared_ptr<BlockEdges>
        e;                 // ids_on_device: the block, copied by its bounds before the read
    if (ids_on_device_) {  // nothing is read after the sizes, so their wait covers these copies
      e = device_edges(nd, lo, lo.total, local + nd, src, n);
      if (src_out) ex_.copy(src_out->reserve_n<int64_t>(n), src, n * sizeof(int64_t));
    }
    std::vector<int64_t> got(2 + (P ? P + 1 : 0));
    download(got.data(), sizes, static_cast<int64_t>(got.size()));
    ex_.sync();
    take_sizes(got.data(), b, owners);
    if (e) {
      e->num_edges = got[0];
      return put_edges(std::move(e), b);
    }
    if (src_out) {  // issued before the last read, whose wait covers it
      ex_.copy(src_out->reserve_n<int64_t>(b.num_src), src, b.num_src * sizeof(int64_t));
    }
    set_edges(nd, lo, got[0], local, src, b);
    if (!blocks_on_device_) return;
    b.src_ids.resize(b.num_src);
    download(b.src_ids.data(), src, b.num_src);
    ex_.sync();
  }

 private:
  using Buffer = typename Exec::Buffer;
  // sample's slots up to this many entries (128 MiB) are sized by the fanout bound, not read.
  static constexpr int64_t kSlotBound = int64_t{1} << 24;
  // Bits of a degree key (csp::degree_key: at most kDegreeKeyCap).
  static constexpr int kDegreeKeyBits = 12;
  static_assert(csp::kDegreeKeyCap < (int64_t{1} << kDegreeKeyBits), "degree keys need more bits");
  // Captured sequences (cuda_graphs) are kept for at most this many shapes at once.
  static constexpr size_t kMaxGraphs = 128;
  // One sample call: its parameters (executor memory), tasks and counts, and the size m its
  // sequence runs over (n, or the captured shape's) with its slots' `total`.
  struct SampleCall {
    const kernels::SampleParams* params;
    const int64_t* tasks;
    int64_t m;
    int max_fanout;
    int32_t* cnt;
    const TaskExclusions* ex;
    int64_t total;
  };
  // What a captured sequence names: which sequence, its sizes, and every array it reads or writes
  // (the caller's, the backend's own, the executor's scratch by its moves), each reserved for
  // this shape first. A capture is valid for a call with the same: the arrays where they were,
  // each as large as the shape needs.
  enum class Seq { kGroup, kSample, kUnpermute, kRelabel };
  static constexpr int kShapeArrays = 17;
  struct Shape {
    Seq seq;
    int64_t size[4];
    int64_t scratch_moves;
    const void* arrays[kShapeArrays];
    bool operator==(const Shape& o) const {
      return seq == o.seq && std::equal(size, size + 4, o.size) &&
             scratch_moves == o.scratch_moves &&
             std::equal(arrays, arrays + kShapeArrays, o.arrays);
    }
  };
  struct Captured {
    Shape shape;
    bool captured = false;  // seen once (run directly, growing what it needs), or captured
    typename Exec::Graph graph;
  };
  // An owner grouping's inputs in executor memory, uploaded in one copy: the live count (positions
  // from it on take no part), the P + 1 rank offsets, the P + 1 chunk starts p x m.
  struct OwnerInputs {
    const int64_t *live, *offsets, *at;
  };

  // The edge arrays of blocks handed out with Block::on_device, reused once a block is released
  // (after its consumer's work on it has completed: the trainer reads its loss back first).
  struct EdgeArrays {
    Buffer indptr, indices, weights, sources;
    std::shared_ptr<ReleaseFence> fence;  // where the last consumer let go (BlockEdges::fence)
  };

  // {live | offsets | p x m for p = 0..P} (just {live} without offsets) uploaded to buf.
  OwnerInputs upload_owner_inputs(Buffer& buf, int64_t live, const std::vector<int64_t>* offsets,
                                  int64_t m) {
    const size_t P1 = offsets ? offsets->size() : 0;
    std::vector<int64_t> h(1 + 2 * P1);
    h[0] = live;
    for (size_t p = 0; p < P1; ++p) {
      h[1 + p] = (*offsets)[p];
      h[1 + P1 + p] = static_cast<int64_t>(p) * m;
    }
    const int64_t* d = upload(buf, h.data(), h.size() * sizeof(int64_t));
    return {d, d + 1, d + 1 + P1};
  }

  // relabel's sequence over m positions, up to its sizes (picks, sources, then the sources'
  // owner-chunk bounds when `owners`): keys, table, first-occurrence flags, ids, sizes.
  void issue_relabel(const int64_t* dst, int64_t nd, const LayerPicks& lo, int64_t m, int64_t* src,
                     int64_t* local, int64_t* sizes, const OwnerCounts* owners) {
    const int P = owners ? static_cast<int>(owners->offsets->size()) - 1 : 0;
    const OwnerInputs in =
        upload_owner_inputs(relabel_in_, nd, owners ? owners->offsets : nullptr, m);
    int bits = 10;
    while ((uint64_t{1} << bits) < 2 * static_cast<uint64_t>(m)) ++bits;
    auto* keys = reserve<int64_t>(keys_, m);
    const kernels::RelabelTable t{keys,
                                  reserve<uint64_t>(table_, int64_t{1} << bits),
                                  (uint64_t{1} << bits) - 1,
                                  64 - bits,
                                  in.live,
                                  lo.offsets};
    // count_source_owners reuses the flags and ids (wide_, slot_) once the sizes are taken
    auto* flag = reserve<int64_t>(wide_, std::max(1, P) * m);
    auto* ids = reserve<int64_t>(slot_, std::max(1, P) * m + 1);
    auto* owner = P ? reserve<int64_t>(owner_, m) : nullptr;
    const auto seq = [&] {
      ex_.for_each(m, kernels::RelabelKeys{t, dst, lo.nbrs, keys});
      ex_.zero(t.table, (size_t{1} << bits) * sizeof(uint64_t));
      ex_.for_each(m, kernels::RelabelOffer{t});
      ex_.for_each(m, kernels::RelabelFlag{t, flag});
      scan_into(ids, flag, m);
      ex_.for_each(m, kernels::RelabelAssign{t, ids, local, src});
      ex_.for_each(1, kernels::RelabelSizes{t, ids, m, sizes});
      if (P) count_source_owners(src, m, sizes + 1, in, P, sizes + 2);
    };
    replay(Shape{Seq::kRelabel,
                 {m, P},
                 ex_.scratch_moves(),
                 {dst, lo.nbrs, lo.offsets, in.live, keys, t.table, flag, ids, local, src, sizes,
                  owner}},
           seq);
  }

  // The chunk bounds of the sources src[0, *count) by owner (the P + 1 entries of the exclusive
  // scan of the owner-major flag matrix at p x m) into `bounds`, on the device: the same scan as
  // group's, over the m positions relabel ran on (those past the count have no owner). Reuses
  // slot_ and wide_ (relabel's ids and flags: done with once the sizes are copied).
  void count_source_owners(const int64_t* src, int64_t m, const int64_t* count,
                           const OwnerInputs& in, int P, int64_t* bounds) {
    auto* owner = reserve<int64_t>(owner_, m);
    ex_.for_each(m, kernels::SourceOwner{src, count, in.offsets, P, owner});
    owner_chunk_bounds(owner_ranks(owner, m, P), P, in.at, bounds);
  }

  // The exclusive scan of the owner-major flag matrix of owner[0, m) (P x m entries + 1, in
  // slot_): position i of owner p is grouped at rank[p * m + i].
  int64_t* owner_ranks(const int64_t* owner, int64_t m, int P) {
    auto* flag = reserve<int64_t>(wide_, P * m);
    ex_.for_each(P * m, kernels::FlagCategories{owner, m, flag});
    return prefix_with_zero(slot_, flag, P * m);
  }
  // Where each owner's chunk starts, P + 1 entries of owner_ranks' scan (at the chunk starts
  // `at`: p x m), into `out`.
  void owner_chunk_bounds(const int64_t* rank, int P, const int64_t* at, int64_t* out) {
    ex_.for_each(P + 1, kernels::GatherAt{rank, at, out});
  }

  // relabel's sizes read (got: picks, sources, the sources' owner-chunk bounds when counted).
  static void take_sizes(const int64_t* got, Block& b, OwnerCounts* owners) {
    b.num_src = got[1];
    const int P = owners ? static_cast<int>(owners->counts.size()) : 0;
    for (int p = 0; p < P; ++p) owners->counts[p] = got[3 + p] - got[2 + p];
  }
  // relabel when lo.total is the picks' count: every size of block b but its source count is
  // known, so the block is read with the sizes in one copy, its source ids by their bound nd + ne
  // (pack_, words: sizes | edge_words | nd + ne sources); blocks_on_device: its edges copied into
  // the pool first, the sizes and source ids read.
  void read_with_sizes(int64_t nd, const LayerPicks& lo, const int64_t* local, const int64_t* src,
                       const int64_t* sizes, Block& b, BackendBuffer* src_out,
                       OwnerCounts* owners) {
    const int64_t ne = lo.total, n = nd + ne;
    const int64_t ns = owners ? 3 + static_cast<int64_t>(owners->counts.size()) : 2;
    std::shared_ptr<BlockEdges> e;
    if (blocks_on_device_) e = device_edges(nd, lo, ne, local + nd, nullptr, 0);
    const bool w = lo.weights && !e;
    const int64_t edges = e ? 0 : edge_words(nd, ne, w);
    auto* packed = reserve<int64_t>(pack_, ns + edges + n);
    ex_.copy(packed, sizes, ns * sizeof(int64_t));
    if (!e) pack_edges(packed + ns, nd, lo, ne, local + nd, w);
    ex_.copy(packed + ns + edges, src, n * sizeof(int64_t));
    if (src_out) ex_.copy(src_out->reserve_n<int64_t>(n), src, n * sizeof(int64_t));
    host_pack_.resize(static_cast<size_t>(ns + edges + n));
    download(host_pack_.data(), packed, ns + edges + n);
    ex_.sync();
    const int64_t* h = host_pack_.data();
    DSP_CHECK(h[0] == ne, "relabel: {} picks where exactly {} were given", h[0], ne);
    take_sizes(h, b, owners);
    b.src_ids.assign(h + ns + edges, h + ns + edges + b.num_src);
    if (e) {
      e->num_edges = ne;
      return put_edges(std::move(e), b);
    }
    unpack_edges(h + ns, nd, ne, w, b);
  }

  // Block b's edges from relabel's outputs (ne picks: their local ids at local + nd, the source
  // ids at src): pooled arrays of executor memory set as b.on_device (blocks_on_device), or
  // packed with the source ids (pack_, words: edge_words | sources) and read in one copy.
  void set_edges(int64_t nd, const LayerPicks& lo, int64_t ne, const int64_t* local,
                 const int64_t* src, Block& b) {
    if (blocks_on_device_) {
      return put_edges(
          device_edges(nd, lo, ne, local + nd, ids_on_device_ ? src : nullptr, b.num_src), b);
    }
    const bool w = lo.weights != nullptr;
    const int64_t head = edge_words(nd, ne, w);
    auto* packed = reserve<int64_t>(pack_, head + b.num_src);
    pack_edges(packed, nd, lo, ne, local + nd, w);
    if (b.num_src) ex_.copy(packed + head, src, b.num_src * sizeof(int64_t));
    host_pack_.resize(static_cast<size_t>(head + b.num_src));
    download(host_pack_.data(), packed, head + b.num_src);
    ex_.sync();
    const int64_t* h = host_pack_.data();
    unpack_edges(h, nd, ne, w, b);
    b.src_ids.assign(h + head, h + head + b.num_src);
  }

  // Words of a block's edges packed for one read: nd + 1 offsets | ne local ids | ceil(ne / 2)
  // words of weights (w).
  static int64_t edge_words(int64_t nd, int64_t ne, bool w) {
    return nd + 1 + ne + (w ? (ne + 1) / 2 : 0);
  }
  // Issues the copies of a block's edges (the picks' local ids at `local`) into `at`, edge_words.
  void pack_edges(int64_t* at, int64_t nd, const LayerPicks& lo, int64_t ne, const int64_t* local,
                  bool w) {
    ex_.copy(at, lo.offsets, static_cast<size_t>(nd + 1) * sizeof(int64_t));
    if (ne) ex_.copy(at + nd + 1, local, ne * sizeof(int64_t));
    if (w && ne) ex_.copy(at + nd + 1 + ne, lo.weights, ne * sizeof(float));
  }
  // Block b's host edges from the words pack_edges packed, read back to h.
  static void unpack_edges(const int64_t* h, int64_t nd, int64_t ne, bool w, Block& b) {
    b.on_device.reset();
    b.indptr.assign(h, h + nd + 1);
    b.indices.assign(h + nd + 1, h + nd + 1 + ne);
    b.weights.resize(w ? ne : 0);
    if (w && ne) std::memcpy(b.weights.data(), h + nd + 1 + ne, ne * sizeof(float));
  }

  // A block's offsets, local ids and weights (ne of each) and, given `src`, its source ids (ns)
  // copied into pooled arrays of executor memory.
  std::shared_ptr<BlockEdges> device_edges(int64_t nd, const LayerPicks& lo, int64_t ne,
                                           const int64_t* local, const int64_t* src, int64_t ns) {
    std::shared_ptr<EdgeArrays> a = RecyclePool<EdgeArrays>::lend(edge_pool_, [this] {
      return EdgeArrays{ex_.buffer(), ex_.buffer(), ex_.buffer(), ex_.buffer(), ex_.fence()};
    });
    ex_.wait(*a->fence);  // the last consumer's work on them first (nothing when none recorded)
    auto e = std::make_shared<BlockEdges>();
    e->device = device_;
    e->num_edges = ne;
    auto* indptr = reserve<int64_t>(a->indptr, nd + 1);
    ex_.copy(indptr, lo.offsets, (nd + 1) * sizeof(int64_t));
    e->indptr = indptr;
    auto* indices = reserve<int64_t>(a->indices, ne);
    if (ne) ex_.copy(indices, local, ne * sizeof(int64_t));
    e->indices = indices;
    if (lo.weights) {
      auto* w = reserve<float>(a->weights, ne);
      if (ne) ex_.copy(w, lo.weights, ne * sizeof(float));
      e->weights = w;
    }
    if (src) {
      auto* ids = reserve<int64_t>(a->sources, ns);
      if (ns) ex_.copy(ids, src, ns * sizeof(int64_t));
      e->src_ids = ids;
    }
    e->copy = &Exec::read;
    e->fence = a->fence;
    e->keep = std::move(a);
    return e;
  }
  // Sets b.on_device (the host edge vectors emptied).
  static void put_edges(std::shared_ptr<BlockEdges> e, Block& b) {
    b.indptr.clear();
    b.indices.clear();
    b.weights.clear();
    b.on_device = std::move(e);
  }

  // One thread per task in task order, or the turbo schedule: sort keys computed and sorted on the
  // device (a stable descending radix sort: csp::degree_order's order), nothing read back.
  template <class Id>
  void launch(const SampleCall& c, const kernels::SampleTask<Id>& op) {
    const int64_t n = c.m;
    if (!turbo_) {
      ex_.for_each(n, op);
      return;
    }
    auto* keys = reserve<int64_t>(keys_, n);
    ex_.for_each(
        n, kernels::TaskDegreeKey{c.params, c.tasks, static_cast<const int64_t*>(indptr_.data()),
                                  topo_.row_base, keys});
    auto* iota = reserve<int64_t>(owner_, n);
    ex_.for_each(n, kernels::Iota{iota});
    auto* order = reserve<int64_t>(order_, n);
    ex_.sort_pairs_descending(keys, iota, order, n, kDegreeKeyBits);  // csp::degree_order's order
    const int cap = csp::WarpSnake::shared_slot(c.max_fanout);
    const csp::WarpSnake geo = csp::WarpSnake::of(n);
    ex_.for_each_block(geo.blocks, csp::WarpSnake::kThreads,
                       static_cast<size_t>(cap) * csp::WarpSnake::kThreads * sizeof(int64_t),
                       kernels::TurboSampleTask<Id>{op, order, geo, cap});
  }

  // The slots of n tasks of fanouts at most f summing to at most max_picks (when >= 0).
  static int64_t slot_bound(int64_t n, int64_t f, int64_t max_picks) {
    return max_picks >= 0 ? std::min(n * f, max_picks) : n * f;
  }
  // n rounded up to 3 significant bits (at most 12.5% more; 8 shapes per doubling), at least 256.
  static int64_t capture_size(int64_t n) {
    int64_t step = 32;
    while (step * 16 <= n) step *= 2;
    return std::max<int64_t>((n + step - 1) / step * step, 256);
  }
  // The fanouts' exclusive prefix (the slots), m + 1 entries.
  const int64_t* issue_slots(const SampleCall& c) {
    auto* fan = reserve<int64_t>(wide_, c.m);
    ex_.for_each(c.m, kernels::TaskFanout{c.params, c.tasks,
                                          static_cast<const int64_t*>(indptr_.data()),
                                          topo_.row_base, replace_, fan});
    return prefix_with_zero(slot_, fan, c.m);
  }
  // The draws into c.total slots, then the compaction: offsets = prefix of the counts, picks
  // moved to their offsets. The pick count is not read: the exact count stays on the device (the
  // offsets' end, which relabel reads with its source count).
  void issue_draws(const SampleCall& c, const int64_t* slot, BackendBuffer& nbrs,
                   BackendBuffer* weights) {
    auto* res = reserve<int64_t>(out_, c.total);
    float* resw = biased_ ? reserve<float>(outw_, c.total) : nullptr;
    if (topo_.idx32) {
      launch(c, task_op<int32_t>(c, slot, res, resw));
    } else {
      launch(c, task_op<int64_t>(c, slot, res, resw));
    }
    auto* fan = reserve<int64_t>(wide_, c.m);
    ex_.for_each(c.m, kernels::WidenCounts{c.cnt, fan, &c.params->n});
    auto* off = prefix_with_zero(offsets_, fan, c.m);
    auto* picks = nbrs.reserve_n<int64_t>(c.total);
    float* picks_w = biased_ ? weights->reserve_n<float>(c.total) : nullptr;
    ex_.for_each(c.m, kernels::CompactPicks{c.params, c.cnt, slot, res, resw, off, picks, picks_w});
  }
  // seq, the sequence of `shape`, run directly without cuda_graphs; with it, seq replays its
  // capture when the shape was seen before: the first call of a shape runs directly (growing
  // every buffer it takes, the executor's own included), the second is captured. Any growth
  // since may have moved an array a capture names: its shape then differs.
  template <class F>
  void replay(const Shape& shape, const F& seq) {
    if (!cuda_graphs_) return seq();
    auto it = std::find_if(captures_.begin(), captures_.end(),
                           [&](const Captured& g) { return g.shape == shape; });
    if (it == captures_.end()) {
      if (captures_.size() >= kMaxGraphs) captures_.erase(captures_.begin());  // the oldest
      captures_.emplace_back();
      captures_.back().shape = shape;
      return seq();
    }
    if (!it->captured) {
      ex_.capture_begin();
      try {
        seq();
      } catch (...) {
        ex_.capture_end();
        throw;
      }
      it->graph = ex_.capture_end();
      it->captured = true;
    }
    ex_.launch(it->graph);
    replays_[static_cast<int>(shape.seq)] += 1;
  }

  // Every array of sample's sequence reserved for c's shape (issue_slots, issue_draws, launch),
  // and the shape that names them.
  Shape reserve_sample(const SampleCall& c, BackendBuffer& nbrs, BackendBuffer* weights) {
    const int64_t m = c.m, t = c.total;
    const bool w = biased_;
    return {Seq::kSample,
            {m, c.max_fanout, t, c.ex ? c.ex->parts : 0},
            ex_.scratch_moves(),
            {c.tasks, c.cnt, c.params, c.ex ? c.ex->tasks : nullptr, c.ex ? c.ex->pairs : nullptr,
             c.ex ? c.ex->excluded : nullptr, task_times_, nbrs.reserve_n<int64_t>(t),
             w ? weights->reserve_n<float>(t) : nullptr, reserve<int64_t>(wide_, m),
             reserve<int64_t>(slot_, m + 1), reserve<int64_t>(out_, t),
             w ? reserve<float>(outw_, t) : nullptr, reserve<int64_t>(offsets_, m + 1),
             turbo_ ? reserve<int64_t>(keys_, m) : nullptr,
             turbo_ ? reserve<int64_t>(order_, m) : nullptr,
             turbo_ ? reserve<int64_t>(owner_, m) : nullptr}};
  }

  // The adjacency position list: rows in hotness order while their entries fit the budget.
  void split_rows(size_t budget) {
    const LocalTopology& t = topo_;
    const size_t elem = t.idx32 ? 4 : 8;
    std::vector<int64_t> loc(static_cast<size_t>(t.num_rows), -1);
    std::vector<unsigned char> hot;
    auto take = [&](int64_t r) {
      if (r < 0 || r >= t.num_rows || loc[r] >= 0) return true;
      const int64_t deg = t.indptr[r + 1] - t.indptr[r];
      if (hot.size() + deg * elem > budget) return false;
      loc[r] = static_cast<int64_t>(hot.size() / elem);
      const auto* src = static_cast<const unsigned char*>(t.indices) + t.indptr[r] * elem;
      hot.insert(hot.end(), src, src + deg * elem);
      return true;
    };
    bool room = true;
    for (int64_t k = 0; k < t.num_hot && room; ++k) room = take(t.hot_nodes[k] - t.row_base);
    for (int64_t r = 0; r < t.num_rows && room; ++r) room = take(r);
    for (int64_t r = 0; r < t.num_rows; ++r) hot_rows_ += loc[r] >= 0;
    upload(hot_indices_, hot.data(), hot.size());
    upload(row_loc_, loc.data(), loc.size() * sizeof(int64_t));
  }

  template <class T>
  T* reserve(Buffer& buf, int64_t count) {
    return static_cast<T*>(
        buf.reserve(static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(T)));
  }
  template <class T>
  T* upload(Buffer& buf, const T* src, size_t bytes) {
    void* d = buf.reserve(std::max<size_t>(bytes, 8));
    if (bytes) ex_.to_device(d, src, bytes);
    return static_cast<T*>(d);
  }
  const void* upload(Buffer& buf, const void* src, size_t bytes) {
    return upload(buf, static_cast<const unsigned char*>(src), bytes);
  }
  template <class T>
  void download(T* host, const T* dev, int64_t count) {
    if (count) ex_.to_host(host, dev, static_cast<size_t>(count) * sizeof(T));
  }
  int64_t read_back(const int64_t* dev) {
    int64_t v = 0;
    ex_.to_host(&v, dev, sizeof(v));
    ex_.sync();
    return v;
  }
  // out[0] = 0, out[i + 1] = in[0] + ... + in[i]: n + 1 entries.
  int64_t* prefix_with_zero(Buffer& buf, const int64_t* in, int64_t n) {
    auto* out = reserve<int64_t>(buf, n + 1);
    scan_into(out, in, n);
    return out;
  }
  void scan_into(int64_t* out, const int64_t* in, int64_t n) {
    ex_.zero(out, sizeof(int64_t));
    if (n) ex_.inclusive_scan(in, out + 1, n);
  }
  template <class Id>
  kernels::SampleTask<Id> task_op(const SampleCall& c, const int64_t* slot, int64_t* res,
                                  float* resw) const {
    const TaskExclusions* ex = c.ex;
    int32_t* cnt = c.cnt;
    return {c.params,
            c.tasks,
            static_cast<const int64_t*>(indptr_.data()),
            static_cast<const Id*>(indices_),
            hot_rows_ ? static_cast<const Id*>(hot_indices_.data()) : nullptr,
            hot_rows_ ? static_cast<const int64_t*>(row_loc_.data()) : nullptr,
            topo_.row_base,
            biased_ ? static_cast<const double*>(cum_.data()) : nullptr,
            biased_ ? static_cast<const float*>(weights_.data()) : nullptr,
            biased_,
            replace_,
            slot,
            cnt,
            res,
            resw,
            ex ? *ex : csp::TaskExclusions{},
            task_times_,
            task_times_ ? static_cast<const int64_t*>(times_.data()) : nullptr,
            strategy_};
  }

  Exec ex_;
  std::string name_;
  Device device_;
  LocalTopology topo_;
  bool biased_, replace_, turbo_, blocks_on_device_, ids_on_device_, cuda_graphs_;
  csp::TemporalStrategy strategy_;
  csp::LaborVariates labor_;
  const int64_t* task_times_ = nullptr;  // set_task_times (executor memory), or null
  bool indices_on_host_ = false;
  std::shared_ptr<RecyclePool<EdgeArrays>> edge_pool_ = std::make_shared<RecyclePool<EdgeArrays>>();
  int64_t hot_rows_ = 0;
  // Every buffer is the executor's (its stream orders their growths; they are counted).
  Buffer indptr_ = ex_.buffer(), indices_buf_ = ex_.buffer(), cum_ = ex_.buffer(),
         weights_ = ex_.buffer(), hot_indices_ = ex_.buffer(), row_loc_ = ex_.buffer(),
         times_ = ex_.buffer();
  typename Exec::Registration indices_reg_;
  const void* indices_ = nullptr;
  // Work buffers, reused across layers and batches.
  Buffer wide_ = ex_.buffer(), slot_ = ex_.buffer(), out_ = ex_.buffer(), outw_ = ex_.buffer(),
         offsets_ = ex_.buffer(), picks_ = ex_.buffer(), keys_ = ex_.buffer(),
         table_ = ex_.buffer(), order_ = ex_.buffer(), owner_ = ex_.buffer(), small_ = ex_.buffer(),
         small_out_ = ex_.buffer(), pack_ = ex_.buffer();
  std::vector<int64_t> host_pack_;  // relabel's host block, packed
  // Each sequence's scalars in executor memory: sample's kernels::SampleParams, group's and
  // relabel's OwnerInputs, unpermute's live counts.
  Buffer params_ = ex_.buffer(), group_in_ = ex_.buffer(), relabel_in_ = ex_.buffer(),
         unpermute_in_ = ex_.buffer();
  std::vector<Captured> captures_;    // cuda_graphs: the shapes seen, and their captures
  std::array<int64_t, 4> replays_{};  // launches per Seq
};

}  // namespace dsp
