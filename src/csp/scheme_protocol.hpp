#pragma once
// The CSP protocol as the schemes see it (LayerProtocol, layer_scheme.hpp): CollectiveSampler's
// layer, row fetch and buffers, for the node-wise schemes (sampler.cpp) and the typed one
// (sampler_hetero.cpp); and one batch's bookkeeping, the same for every scheme (Round). Private to
// src/csp.
#include "core/timer.hpp"
#include "csp/layer_scheme.hpp"
#include "csp/sampler.hpp"
#include "csp/sampler_detail.hpp"

namespace dsp {

class CollectiveSampler::SchemeProtocol final : public LayerProtocol {
 public:
  explicit SchemeProtocol(CollectiveSampler& s) : s_(s) {}
  LayerPicks run_layer(const int64_t* frontier, int64_t nf, const int32_t* fanout, int uniform,
                       uint64_t key, const int64_t* known, int64_t max_picks) override {
    return s_.run_layer(frontier, nf, fanout, uniform, key, nullptr, known, max_picks);
  }
  void fetch_rows(const int64_t* frontier, int64_t nf, std::vector<int64_t>& off,
                  std::vector<int64_t>& ids) override {
    s_.fetch_rows(frontier, nf, off, ids);
  }
  LayerPicks own_picks(const std::vector<int64_t>& off, const std::vector<int64_t>& nbrs,
                       const std::vector<float>& weights) override {
    Buffers& b = *s_.buf_;
    csp_detail::upload(*s_.backend_, *b.offsets, off);
    csp_detail::upload(*s_.backend_, *b.layer_nbrs, nbrs);
    csp_detail::upload(*s_.backend_, *b.layer_weights, weights);
    LayerPicks out;
    out.offsets = b.offsets->as<int64_t>();
    out.nbrs = b.layer_nbrs->as<int64_t>();
    out.weights = b.layer_weights->as<float>();
    out.total = static_cast<int64_t>(nbrs.size());
    out.exact = true;  // made here: relabel reads the block with its sizes
    return out;
  }
  const int32_t* upload_fanouts(const std::vector<int32_t>& counts) override {
    csp_detail::upload(*s_.backend_, *s_.buf_->fanout, counts);
    return s_.buf_->fanout->as<int32_t>();
  }
  SamplerBackend& backend() override { return *s_.backend_; }
  SamplerStats& stats() override { return s_.stats_; }
  int size() const override { return s_.size_; }
  int owner_of(int64_t v) const override { return csp::owner_of(s_.offsets_.data(), s_.size_, v); }

 private:
  CollectiveSampler& s_;
};

// One batch's bookkeeping, the same for every scheme: its input checked on every rank before any
// exchange, the excluded pairs shared with their owners, then its blocks put in input order and
// the batch counted (seeds, bytes moved to and from the other ranks, wall time since the round
// began, the backend's traffic).
class CollectiveSampler::Round {
 public:
  explicit Round(CollectiveSampler& s) : s_(s) {}  // the batch's clock starts
  // Collective: this rank's fault with the batch ("" when none) and its excluded pairs as the
  // protocol carries them (null or empty: none). One all_reduce: InvalidArgument on every rank
  // when any has a fault (its own message there, "another rank passed invalid input" elsewhere);
  // it also tells whether any rank excludes edges, and then the pairs go to their owners.
  void check(const std::string& err, const ExcludedEdges* exclude = nullptr);
  // The batch of `blocks` (from the seeds out), counted.
  SampledBatch finish(std::vector<Block>& blocks, const std::vector<int64_t>& seeds, int64_t epoch,
                      int64_t batch);

 private:
  uint64_t remote_sent() const;
  uint64_t remote_recv() const;

  CollectiveSampler& s_;
  Stopwatch total_;
  uint64_t sent0_ = 0, recv0_ = 0;
};

}  // namespace dsp
