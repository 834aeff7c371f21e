// Temporal neighbour sampling in the collective sampler (TemporalSampling,
// CollectiveSampler::sample_temporal): the CSP layer of sampler.cpp with the frontier's times
// travelling beside its tasks, and the blocks built over (id, time) pairs.
#include <algorithm>
#include <unordered_map>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "core/timer.hpp"
#include "csp/layer_scheme.hpp"
#include "csp/sampler.hpp"
#include "csp/sampler_detail.hpp"
#include "csp/scheme_protocol.hpp"

namespace dsp {

using csp_detail::in_backend;
using csp_detail::on_host;

bool temporal_keys_fit(int64_t num_nodes, int64_t times) {
  // Keys id * times + index lie in [0, num_nodes * times); the table takes keys < 2^32 - 1.
  return times >= 1 && num_nodes <= ((int64_t{1} << 32) - 1) / times;
}

void check_node_times(const SamplerOptions& o, const PartitionData& part, const std::string& dir,
                      const std::string& seed) {
  DSP_CHECK_ARG(!o.temporal() || part.node_time.defined(),
                "--temporal: {} has no node times (node_time.npy): each {} is sampled at its "
                "node's time",
                dir, seed);
}

namespace {

// What is wrong with a temporal batch's seeds (empty: nothing): one time per seed, ids of nodes
// (owned by the rank when require_owned), and no (id, time) pair twice.
std::string temporal_seed_error(const std::vector<int64_t>& seeds,
                                const std::vector<int64_t>& times, int64_t num_nodes,
                                bool require_owned, int rank, int64_t begin, int64_t end) {
  if (seeds.size() != times.size()) {
    return fmt::format("sampler: {} seed times for {} seeds (one time per seed)", times.size(),
                       seeds.size());
  }
  std::vector<std::pair<int64_t, int64_t>> s;
  s.reserve(seeds.size());
  for (size_t i = 0; i < seeds.size(); ++i) s.emplace_back(seeds[i], times[i]);
  std::sort(s.begin(), s.end());
  for (size_t i = 0; i < s.size(); ++i) {
    const int64_t v = s[i].first;
    if (v < 0 || v >= num_nodes) {
      return fmt::format("sampler: seed {} is not a node id (graph has {} nodes)", v, num_nodes);
    } else if (require_owned && (v < begin || v >= end)) {
      return fmt::format("sampler: seed {} is not owned by rank {} (owns [{}, {}))", v, rank, begin,
                         end);
    } else if (i > 0 && s[i] == s[i - 1]) {
      return fmt::format("sampler: seed {} at time {} appears more than once in the batch", v,
                         s[i].second);
    }
  }
  return "";
}

struct PairHash {
  size_t operator()(const std::pair<int64_t, int64_t>& p) const {
    return static_cast<size_t>(mix64(static_cast<uint64_t>(p.first) ^ mix64(p.second)));
  }
};

// The block of (id, time index) pairs on the host: destinations dst_id/dst_tix first, then the
// picks' new pairs in first-seen order (pick j of destination i is (nbr[j], dst_tix[i])).
void relabel_pairs_host(const std::vector<int64_t>& dst_id, const std::vector<int64_t>& dst_tix,
                        const int64_t* off, const int64_t* nbr, Block& b,
                        std::vector<int64_t>& src_tix) {
  const int64_t nd = static_cast<int64_t>(dst_id.size());
  std::unordered_map<std::pair<int64_t, int64_t>, int64_t, PairHash> local;
  b.src_ids = dst_id;
  src_tix = dst_tix;
  for (int64_t i = 0; i < nd; ++i) local.emplace(std::pair{dst_id[i], dst_tix[i]}, i);
  b.indptr.assign(off, off + nd + 1);
  b.indices.resize(off[nd]);
  for (int64_t i = 0; i < nd; ++i) {
    for (int64_t j = off[i]; j < off[i + 1]; ++j) {
      const auto [it, fresh] = local.emplace(std::pair{nbr[j], dst_tix[i]}, b.src_ids.size());
      if (fresh) {
        b.src_ids.push_back(nbr[j]);
        src_tix.push_back(dst_tix[i]);
      }
      b.indices[j] = it->second;
    }
  }
  b.weights.clear();
  b.on_device.reset();
  b.num_dst = nd;
  b.num_src = static_cast<int64_t>(b.src_ids.size());
}

}  // namespace

void CollectiveSampler::group_times(const int64_t* host_times, int64_t nf, int64_t ng) {
  Buffers& b = *buf_;
  backend_->gather(in_backend(*backend_, *b.frontier_times, host_times, nf), b.perm->as<int64_t>(),
                   ng, b.task_times->reserve_n<int64_t>(std::max<int64_t>(ng, 1)));
}

void TemporalScheme::relabel(SamplerBackend& be, std::vector<int64_t>& ids,
                             std::vector<int64_t>& tix, const std::vector<int64_t>& tv,
                             const LayerPicks& lo, int l, Block& b) {
  const int64_t nf = static_cast<int64_t>(ids.size()), K = static_cast<int64_t>(tv.size());
  std::vector<int64_t> src_tix;
  if (host_relabel_ || !temporal_keys_fit(num_nodes_, K)) {
    std::vector<int64_t> ho, hn;
    const int64_t* off = on_host(be, lo.offsets, nf + 1, ho);
    const int64_t* nbr = on_host(be, lo.nbrs, off[nf], hn);  // lo.total may be a bound
    relabel_pairs_host(ids, tix, off, nbr, b, src_tix);
  } else {
    // Combined keys csp::pair_key(id, k, K) in the backend's relabel: its order (destinations,
    // then first seen) is the pairs' order, since a destination's picks all carry its k. The
    // destinations' keys are made here, the picks' where the picks are (pair_keys): nothing of
    // the layer is read but relabel's own.
    if (!key_dst_) {
      for (auto* k : {&key_dst_, &key_picks_, &key_tags_}) *k = be.make_buffer();
    }
    std::vector<int64_t> dk(nf);
    for (int64_t i = 0; i < nf; ++i) dk[i] = csp::pair_key(ids[i], tix[i], K);
    const int64_t* tags = in_backend(be, *key_tags_, tix.data(), nf);
    int64_t* pk = key_picks_->reserve_n<int64_t>(std::max<int64_t>(lo.total, 1));
    be.pair_keys(lo.offsets, lo.nbrs, tags, nf, K, pk);
    LayerPicks kp = lo;
    kp.nbrs = pk;
    be.relabel(in_backend(be, *key_dst_, dk.data(), nf), nf, kp, l, b, nullptr, nullptr);
    src_tix.resize(b.src_ids.size());
    for (size_t i = 0; i < b.src_ids.size(); ++i) {
      src_tix[i] = b.src_ids[i] % K;
      b.src_ids[i] /= K;
    }
  }
  b.src_times.resize(src_tix.size());
  for (size_t i = 0; i < src_tix.size(); ++i) b.src_times[i] = tv[src_tix[i]];
  ids = b.src_ids;
  tix = std::move(src_tix);
}

SampledBatch CollectiveSampler::sample_temporal(const std::vector<int64_t>& seeds,
                                                const std::vector<int64_t>& seed_times,
                                                int64_t epoch, int64_t batch,
                                                const ExcludedEdges* exclude) {
  Round round(*this);
  const bool has_ex = exclude && !(exclude->dst.empty() && exclude->src.empty());
  const std::string err =
      !opts_.temporal()
          ? "sampler: seed times given, but the sampler is not temporal (--temporal off)"
      : has_ex ? "sampler: --temporal: excluded edges (link prediction) are not supported"
               : temporal_seed_error(seeds, seed_times, part_.meta.num_nodes,
                                     opts_.require_owned_seeds, rank_, begin_, end_);
  round.check(err);
  // The batch's distinct times: picks inherit their destination's, so every node of every layer
  // has one of them, and a pair is (id, index into tv).
  std::vector<int64_t> tv = seed_times;
  std::sort(tv.begin(), tv.end());
  tv.erase(std::unique(tv.begin(), tv.end()), tv.end());
  std::vector<int64_t> ids = seeds, tix(seeds.size()), times;
  for (size_t i = 0; i < seeds.size(); ++i) {
    tix[i] = std::lower_bound(tv.begin(), tv.end(), seed_times[i]) - tv.begin();
  }
  const int L = static_cast<int>(opts_.fanouts.size());
  std::vector<Block> blocks(L);
  OwnerCounts owners;
  owners.offsets = &offsets_;
  for (int l = 0; l < L; ++l) {
    Stopwatch lsw;
    const int64_t nf = static_cast<int64_t>(ids.size());
    times.resize(nf);
    for (int64_t i = 0; i < nf; ++i) times[i] = tv[tix[i]];
    const int64_t* frontier = in_backend(*backend_, *buf_->frontier, ids.data(), nf);
    const uint64_t key = rng_key(opts_.seed, epoch, batch, l);
    // The frontier's nodes per owner, counted here where its ids are: group reads none.
    const bool count = size_ > 1 && drawn_fanout(opts_.fanouts[l]) > 0;
    if (count) count_owners(ids.data(), nf, owners);
    const LayerPicks lo = run_layer(frontier, nf, nullptr, drawn_fanout(opts_.fanouts[l]), key,
                                    times.data(),
                                    count ? owners.counts.data() : nullptr);
    Stopwatch rsw;
    temporal_->relabel(*backend_, ids, tix, tv, lo, l, blocks[l]);
    stats_.t_relabel += rsw.seconds();
    stats_.sampled_edges += blocks[l].num_edges();
    stats_.layer_sources[l] += blocks[l].num_src;
    stats_.t_layer[l] += lsw.seconds();
  }
  SampledBatch out = round.finish(blocks, seeds, epoch, batch);
  out.seed_times = seed_times;
  return out;
}

}  // namespace dsp
