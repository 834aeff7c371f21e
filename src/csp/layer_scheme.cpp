#include "csp/layer_scheme.hpp"

#include <algorithm>
#include <unordered_set>
#include <utility>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "csp/sample_kernels.hpp"

namespace dsp {

namespace {

// Neighbour sampling: every frontier node a task of the layer's fanout.
class NeighbourScheme final : public LayerScheme {
 public:
  LayerPicks pick(LayerProtocol& p, const Layer& in) override {
    return p.run_layer(in.frontier, in.nf, nullptr, drawn_fanout(in.fanout), in.key, in.known, -1);
  }
};

// W_u of every node (its total in-weight), replicated on every rank by one all_gather of each
// rank's row sums (cum: the patch's row_prefix_sums): layer-wise sampling reads remote frontier
// nodes' without a round trip.
std::vector<double> replicate_weight_sums(const Csr& g, const std::vector<double>& cum,
                                          const std::vector<int64_t>& offsets, int64_t num_nodes,
                                          Communicator& comm) {
  const int size = comm.size();
  const int64_t* ip = g.rowptr();
  int64_t maxrows = 0;
  for (int p = 0; p < size; ++p) maxrows = std::max(maxrows, offsets[p + 1] - offsets[p]);
  std::vector<double> mine(maxrows, 0.0), all(maxrows * size);
  for (int64_t v = 0; v < g.num_nodes; ++v) {
    mine[v] = ip[v + 1] > ip[v] ? cum[ip[v + 1] - 1] : 0.0;
  }
  OpOptions o;
  o.host_buffers = true;
  comm.all_gather(mine.data(), all.data(), maxrows, DType::kFloat64, o);
  std::vector<double> sums(num_nodes);
  for (int p = 0; p < size; ++p) {
    std::copy(all.begin() + p * maxrows, all.begin() + p * maxrows + (offsets[p + 1] - offsets[p]),
              sums.begin() + offsets[p]);
  }
  return sums;
}

// Layer-wise without replacement: n draws over the union of the frontier's in-edges (cum: the
// inclusive prefix of the frontier nodes' in-degrees) without replacement, so c_i <= d_i and the
// counts are multivariate hypergeometric: min(n, D) distinct edge slots of [0, D) by Floyd's
// algorithm (each subset equally likely), each counted for the node whose in-edges hold it.
void hypergeometric_counts(const std::vector<int64_t>& cum, int n, RngStream& s,
                           std::vector<int32_t>& c) {
  const int64_t F = static_cast<int64_t>(cum.size()), D = cum.back();
  if (D <= n) {
    for (int64_t i = 0; i < F; ++i) c[i] = static_cast<int32_t>(cum[i] - (i ? cum[i - 1] : 0));
    return;
  }
  std::unordered_set<int64_t> taken;
  taken.reserve(2 * static_cast<size_t>(n));
  for (int64_t j = D - n; j < D; ++j) {
    int64_t t = csp::draw_index(s, j + 1);
    if (!taken.insert(t).second) {
      t = j;
      taken.insert(j);
    }
    ++c[std::upper_bound(cum.begin(), cum.end(), t) - cum.begin()];
  }
}

// Layer-wise (DSP Eq. 2): the layer's `fanout` draws over the frontier with p_u ~ W_u (in-degree,
// or total in-weight when biased), with replacement, or without over the union of the frontier's
// in-edges; then each node with c_u > 0 a task of c_u draws.
class LayerWiseScheme final : public LayerScheme {
 public:
  LayerWiseScheme(const LayerSampling& o, const PartitionData& part, const std::vector<double>& cum,
                  Communicator& comm)
      : with_replacement_(o.draws == LayerDraws::kWith), biased_(o.biased) {
    if (biased_) {
      weight_sum_ =
          replicate_weight_sums(part.patch, cum, part.meta.offsets, part.meta.num_nodes, comm);
      return;
    }
    DSP_CHECK_ARG(part.in_degree.defined() && part.in_degree.dim(0) == part.meta.num_nodes,
                  "sampler: layer-wise sampling needs the replicated in-degree array");
    in_degree_ = part.in_degree.data<int64_t>();
  }
  bool draws_on_host() const override { return true; }
  bool tasks_every_node() const override { return false; }

  LayerPicks pick(LayerProtocol& p, const Layer& in) override {
    const std::vector<int32_t> c = counts(in.host_frontier, in.nf, in.fanout, in.key);
    const int32_t* fanout = p.upload_fanouts(c);
    std::vector<int64_t> tasks(p.size(), 0);  // the nodes given draws, per owner (group's counts)
    for (int64_t i = 0; i < in.nf; ++i) {
      if (c[i] > 0) ++tasks[p.size() == 1 ? 0 : p.owner_of(in.host_frontier[i])];
    }
    // Each rank draws `fanout` picks over its frontier, so an owner serves at most P times that
    // many, however many tasks hold them (the backend's slots are sized by that, not by every
    // task taking them all).
    const int64_t max_picks = int64_t{p.size()} * std::max(in.fanout, 0);
    return p.run_layer(in.frontier, in.nf, fanout, drawn_fanout(in.fanout), in.key, tasks.data(),
                       max_picks);
  }

 private:
  std::vector<int32_t> counts(const int64_t* frontier, int64_t F, int n, uint64_t key) const;

  bool with_replacement_, biased_;
  const int64_t* in_degree_ = nullptr;  // [N] (unbiased)
  std::vector<double> weight_sum_;      // [N] total in-weight per node (biased)
};

std::vector<int32_t> LayerWiseScheme::counts(const int64_t* frontier, int64_t F, int n,
                                             uint64_t key) const {
  std::vector<int32_t> c(F, 0);
  if (F == 0) return c;
  if (!with_replacement_) {
    const int64_t* deg = in_degree_;
    std::vector<int64_t> cum(F);
    int64_t acc = 0;
    for (int64_t i = 0; i < F; ++i) cum[i] = acc += deg[frontier[i]];
    RngStream s(key, static_cast<uint64_t>(frontier[0]), csp::kPurposeLayerWise);
    if (acc > 0) hypergeometric_counts(cum, n, s, c);
    return c;
  }
  std::vector<double> cum(F);
  double acc = 0;
  for (int64_t i = 0; i < F; ++i) {
    acc += biased_ ? weight_sum_[frontier[i]] : static_cast<double>(in_degree_[frontier[i]]);
    cum[i] = acc;
  }
  // One stream per (layer, sample): keyed by the sample's first frontier node, which is the
  // same whatever P is (frontier order is P-invariant).
  RngStream s(key, static_cast<uint64_t>(frontier[0]), csp::kPurposeLayerWise);
  for (int j = 0; j < n; ++j) {
    int64_t i = csp::weighted_one(cum.data(), F, s);
    if (i < 0) break;
    ++c[i];
  }
  return c;
}

}  // namespace

std::unique_ptr<LayerScheme> make_layer_scheme(const SamplerOptions& o, const PartitionData& part,
                                               const std::vector<double>& cum, Communicator& comm) {
  if (o.labor()) return make_labor_scheme(*o.labor(), o.seed);
  if (o.layer()) return std::make_unique<LayerWiseScheme>(*o.layer(), part, cum, comm);
  return std::make_unique<NeighbourScheme>();
}

}  // namespace dsp
