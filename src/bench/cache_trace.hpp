#pragma once
// Access traces for `dsp bench cache` (bench/cache_bench.hpp): the input nodes of consecutive
// training batches, and what the order of the seeds does to them (reuse between nearby batches,
// the label mix of a batch).
#include <cstdint>
#include <functional>
#include <vector>

#include "csp/sampler.hpp"
#include "graph/array.hpp"

namespace dsp {

struct CacheTrace {
  std::vector<int64_t> ids;        // input nodes of every batch, concatenated
  std::vector<int64_t> batch_end;  // end of every batch in ids
  // Mean over batches of the total-variation distance between the labels of the batch's seeds
  // and those of all seeds (0 when there are no labels; multi-label: of their label sets): how
  // far from i.i.d. the batches are.
  double label_tv = 0;
  double seconds = 0;  // sampling time
};

// The seeds of epoch e, in training order.
using EpochOrderFn = std::function<std::vector<int64_t>(int64_t epoch)>;

// `batches` consecutive batches of `batch_size` seeds of `order`, continuing into further epochs,
// sampled by `sampler` (epoch, batch as in training). `labels` may be null.
CacheTrace record_trace(CollectiveSampler& sampler, const EpochOrderFn& order, int64_t num_seeds,
                        int batches, int64_t batch_size, const Array* labels);

// Temporal locality of a trace: the share of accesses to a node that one of the previous
// `window` batches also accessed (what a dynamic cache holding those batches would hit), and the
// mean number of distinct nodes those batches hold, as a share of `num_nodes` (the size such a
// cache needs).
struct WindowReuse {
  int window = 0;
  double hit_rate = 0, size_share = 0;
};
std::vector<WindowReuse> window_reuse(const CacheTrace& t, int64_t num_nodes,
                                      const std::vector<int>& windows);

}  // namespace dsp
