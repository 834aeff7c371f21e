#pragma once
// The device sampler's shared parts (kernel_backend.hpp): its work buffers, the four sequences it
// captures by shape, and the owner scans that group uses for the frontier and relabel for the
// sources: one exclusive scan of the owner-major flag matrix (P x m: P is a few ranks) gives every
// position its place within its owner's chunk, and the scan at p x m the chunks' bounds.
// Private to src/csp.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/capture_cache.hpp"
#include "core/exec_memory.hpp"
#include "csp/backend.hpp"
#include "csp/kernel_backend_kernels.hpp"
#include "csp/sample_kernels.hpp"

namespace dsp {

// The sequences of a layer, each captured by its shape (SamplerOptions::cuda_graphs).
enum KernelSeq : int { kSeqGroup, kSeqSample, kSeqUnpermute, kSeqRelabel };
template <class Exec>
using SamplerCaptures = CaptureCache<Exec, 4, 17>;

// Work buffers of one device sampler, reused across layers and batches (the sequences share
// them where their lifetimes do not overlap), and each sequence's scalars in executor memory:
// sample's kernels::SampleParams, group's and relabel's OwnerInputs, unpermute's live counts.
template <class Exec>
struct SamplerScratch {
  using Buffer = typename Exec::Buffer;
  explicit SamplerScratch(Exec& ex)
      : wide(ex.buffer()),
        slot(ex.buffer()),
        out(ex.buffer()),
        outw(ex.buffer()),
        offsets(ex.buffer()),
        picks(ex.buffer()),
        keys(ex.buffer()),
        table(ex.buffer()),
        order(ex.buffer()),
        owner(ex.buffer()),
        small(ex.buffer()),
        small_out(ex.buffer()),
        params(ex.buffer()),
        group_in(ex.buffer()),
        relabel_in(ex.buffer()),
        unpermute_in(ex.buffer()) {}
  Buffer wide, slot, out, outw, offsets, picks, keys, table, order, owner, small, small_out;
  Buffer params, group_in, relabel_in, unpermute_in;
};

// An owner grouping's inputs in executor memory, uploaded in one copy: the live count (positions
// from it on take no part), the P + 1 rank offsets, the P + 1 chunk starts p x m.
struct OwnerInputs {
  const int64_t *live, *offsets, *at;
};

// {live | offsets | p x m for p = 0..P} (just {live} without offsets) uploaded to buf.
template <class Exec>
OwnerInputs upload_owner_inputs(Exec& ex, typename Exec::Buffer& buf, int64_t live,
                                const std::vector<int64_t>* offsets, int64_t m) {
  const size_t P1 = offsets ? offsets->size() : 0;
  std::vector<int64_t> h(1 + 2 * P1);
  h[0] = live;
  for (size_t p = 0; p < P1; ++p) {
    h[1 + p] = (*offsets)[p];
    h[1 + P1 + p] = static_cast<int64_t>(p) * m;
  }
  const int64_t* d = upload(ex, buf, h.data(), static_cast<int64_t>(h.size()));
  return {d, d + 1, d + 1 + P1};
}

// The exclusive scan of the owner-major flag matrix of owner[0, m) (P x m entries + 1, in
// s.slot; the flags in s.wide): position i of owner p is grouped at rank[p * m + i].
template <class Exec>
int64_t* owner_ranks(Exec& ex, SamplerScratch<Exec>& s, const int64_t* owner, int64_t m, int P) {
  auto* flag = reserve<int64_t>(s.wide, P * m);
  ex.for_each(P * m, kernels::FlagCategories{owner, m, flag});
  return prefix_with_zero(ex, s.slot, flag, P * m);
}

// Where each owner's chunk starts, P + 1 entries of owner_ranks' scan (at the chunk starts
// `at`: p x m), into `out`.
template <class Exec>
void owner_chunk_bounds(Exec& ex, const int64_t* rank, int P, const int64_t* at, int64_t* out) {
  ex.for_each(P + 1, kernels::GatherAt{rank, at, out});
}

// The chunk bounds of the sources src[0, *count) by owner into `bounds`, on the device: the same
// scan as group's, over the m positions relabel ran on (those past the count have no owner).
// Reuses s.slot and s.wide (relabel's ids and flags: done with once the sizes are copied).
template <class Exec>
void count_source_owners(Exec& ex, SamplerScratch<Exec>& s, const int64_t* src, int64_t m,
                         const int64_t* count, const OwnerInputs& in, int P, int64_t* bounds) {
  auto* owner = reserve<int64_t>(s.owner, m);
  ex.for_each(m, kernels::SourceOwner{src, count, in.offsets, P, owner});
  owner_chunk_bounds(ex, owner_ranks(ex, s, owner, m, P), P, in.at, bounds);
}

// relabel's sequence over m positions, up to its sizes (picks, sources, then the sources'
// owner-chunk bounds when `owners`): keys, table, first-occurrence flags, ids, sizes; through
// its capture when the captures are enabled.
template <class Exec>
void issue_relabel(Exec& ex, SamplerScratch<Exec>& s, SamplerCaptures<Exec>& captures,
                   const int64_t* dst, int64_t nd, const LayerPicks& lo, int64_t m, int64_t* src,
                   int64_t* local, int64_t* sizes, const OwnerCounts* owners) {
  const int P = owners ? static_cast<int>(owners->offsets->size()) - 1 : 0;
  const OwnerInputs in =
      upload_owner_inputs(ex, s.relabel_in, nd, owners ? owners->offsets : nullptr, m);
  int bits = 10;
  while ((uint64_t{1} << bits) < 2 * static_cast<uint64_t>(m)) ++bits;
  auto* keys = reserve<int64_t>(s.keys, m);
  const kernels::RelabelTable t{keys,
                                reserve<uint64_t>(s.table, int64_t{1} << bits),
                                (uint64_t{1} << bits) - 1,
                                64 - bits,
                                in.live,
                                lo.offsets};
  // count_source_owners reuses the flags and ids (s.wide, s.slot) once the sizes are taken
  auto* flag = reserve<int64_t>(s.wide, std::max(1, P) * m);
  auto* ids = reserve<int64_t>(s.slot, std::max(1, P) * m + 1);
  auto* owner = P ? reserve<int64_t>(s.owner, m) : nullptr;
  const auto seq = [&] {
    ex.for_each(m, kernels::RelabelKeys{t, dst, lo.nbrs, keys});
    ex.zero(t.table, (size_t{1} << bits) * sizeof(uint64_t));
    ex.for_each(m, kernels::RelabelOffer{t});
    ex.for_each(m, kernels::RelabelFlag{t, flag});
    scan_into(ex, ids, flag, m);
    ex.for_each(m, kernels::RelabelAssign{t, ids, local, src});
    ex.for_each(1, kernels::RelabelSizes{t, ids, m, sizes});
    if (P) count_source_owners(ex, s, src, m, sizes + 1, in, P, sizes + 2);
  };
  captures.replay(
      ex,
      {kSeqRelabel,
       {m, P},
       ex.scratch_moves(),
       {dst, lo.nbrs, lo.offsets, in.live, keys, t.table, flag, ids, local, src, sizes, owner}},
      seq);
}

}  // namespace dsp
