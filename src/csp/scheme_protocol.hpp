#pragma once
// The CSP protocol as the schemes see it (LayerProtocol, layer_scheme.hpp): CollectiveSampler's
// layer, row fetch and buffers, for the node-wise schemes (sampler.cpp) and the typed one
// (sampler_hetero.cpp). Private to src/csp.
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

}  // namespace dsp
