#include "bench/cache_trace.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/timer.hpp"

namespace dsp {

namespace {

// What a seed's label is for the batches' label distribution: its class, or for multi-label
// rows (int8 [N, L]) its label set (a digest of the row).
int64_t label_key(const Array& labels, int64_t v) {
  if (labels.dtype() != DType::kInt8 || labels.ndim() != 2) return labels.int_at(v);
  const int64_t L = labels.dim(1);
  const int8_t* row = labels.data<int8_t>() + v * L;
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (int64_t j = 0; j < L; ++j) h = (h ^ static_cast<uint8_t>(row[j])) * 1099511628211ULL;
  return static_cast<int64_t>(h);
}

}  // namespace

CacheTrace record_trace(CollectiveSampler& sampler, const EpochOrderFn& order, int64_t num_seeds,
                        int batches, int64_t batch_size, const Array* labels) {
  CacheTrace t;
  const int64_t bpe = (num_seeds + batch_size - 1) / batch_size;
  std::map<int64_t, double> all;  // label distribution of all seeds
  std::vector<int64_t> seeds;
  Stopwatch sw;
  double sampling = 0, tv_sum = 0;
  for (int b = 0; b < batches; ++b) {
    const int64_t e = b / bpe, bb = b % bpe;
    if (bb == 0) seeds = order(e);
    const int64_t lo = bb * batch_size, hi = std::min(num_seeds, lo + batch_size);
    std::vector<int64_t> batch(seeds.begin() + lo, seeds.begin() + hi);
    sw.reset();
    SampledBatch sb = sampler.sample(batch, e, bb);
    sampling += sw.seconds();
    const auto& in = sb.input_nodes();
    t.ids.insert(t.ids.end(), in.begin(), in.end());
    t.batch_end.push_back(static_cast<int64_t>(t.ids.size()));
    if (labels && labels->defined()) {
      if (all.empty()) {
        for (int64_t v : seeds) all[label_key(*labels, v)] += 1.0 / static_cast<double>(num_seeds);
      }
      std::map<int64_t, double> mine;
      for (int64_t v : batch)
        mine[label_key(*labels, v)] += 1.0 / static_cast<double>(batch.size());
      double tv = 0;
      for (const auto& [c, p] : all) tv += std::abs(p - (mine.count(c) ? mine[c] : 0.0));
      tv_sum += tv / 2;
    }
  }
  t.label_tv = batches > 0 ? tv_sum / batches : 0.0;
  t.seconds = sampling;
  return t;
}

std::vector<WindowReuse> window_reuse(const CacheTrace& t, int64_t num_nodes,
                                      const std::vector<int>& windows) {
  std::vector<WindowReuse> out;
  const int64_t nb = static_cast<int64_t>(t.batch_end.size());
  auto begin_of = [&](int64_t b) { return b == 0 ? int64_t{0} : t.batch_end[b - 1]; };
  for (int w : windows) {
    // in[v]: how many of the last w batches accessed v (a batch accesses a node at most once).
    std::vector<int32_t> in(num_nodes, 0);
    int64_t distinct = 0, hits = 0, counted = 0;
    double size_sum = 0;
    for (int64_t b = 0; b < nb; ++b) {
      if (b >= w) {  // scored once the window is full, as a warm cache would be
        for (int64_t i = begin_of(b); i < t.batch_end[b]; ++i) hits += in[t.ids[i]] > 0;
        counted += t.batch_end[b] - begin_of(b);
        size_sum += static_cast<double>(distinct);
      }
      for (int64_t i = begin_of(b); i < t.batch_end[b]; ++i) distinct += in[t.ids[i]]++ == 0;
      if (b >= w) {
        for (int64_t i = begin_of(b - w); i < t.batch_end[b - w]; ++i) {
          distinct -= --in[t.ids[i]] == 0;
        }
      }
    }
    WindowReuse r;
    r.window = w;
    r.hit_rate = counted ? static_cast<double>(hits) / static_cast<double>(counted) : 0.0;
    r.size_share =
        nb > w ? size_sum / static_cast<double>(nb - w) / static_cast<double>(num_nodes) : 0.0;
    out.push_back(r);
  }
  return out;
}

}  // namespace dsp
