#include "csp/presample.hpp"

#include <algorithm>

#include "ccc/communicator.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"

namespace dsp {

std::vector<int64_t> shuffle_ids(const std::vector<int64_t>& ids, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> out(ids);
  RngStream s(rng_key(seed, epoch, 0x7072'6573), 0);  // "pres"
  for (int64_t i = static_cast<int64_t>(out.size()) - 1; i > 0; --i) {
    std::swap(out[i], out[s.uniform_int(static_cast<uint64_t>(i + 1))]);
  }
  return out;
}

std::vector<int64_t> presample_batch(const std::vector<int64_t>& shuffled, int64_t batch_size,
                                     int64_t batch) {
  int64_t b = batch * batch_size;
  int64_t e = std::min<int64_t>(static_cast<int64_t>(shuffled.size()), b + batch_size);
  if (b >= e) return {};
  return std::vector<int64_t>(shuffled.begin() + b, shuffled.begin() + e);
}

std::vector<int64_t> presample_counts(const Csr& graph, const std::vector<int64_t>& train_ids,
                                      const PresampleOptions& opts) {
  DSP_CHECK_ARG(opts.epochs > 0, "presample: epochs must be positive, got {}", opts.epochs);
  DSP_CHECK_ARG(opts.batch_size > 0, "presample: batch size must be positive, got {}",
                opts.batch_size);
  PartitionData part = single_part(graph);
  auto comm = make_communicator("self");
  SamplerOptions so = opts.sampler;
  so.mode = SampleMode::kCsp;
  CollectiveSampler sampler(part, *comm, so);
  std::vector<int64_t> counts(graph.num_nodes, 0);
  const int64_t n = static_cast<int64_t>(train_ids.size());
  for (int64_t e = 0; e < opts.epochs; ++e) {
    std::vector<int64_t> order = shuffle_ids(train_ids, so.seed, e);
    for (int64_t b = 0; b * opts.batch_size < n; ++b) {
      SampledBatch sb = sampler.sample(presample_batch(order, opts.batch_size, b), e, b);
      for (int64_t v : sb.input_nodes()) ++counts[v];
    }
  }
  return counts;
}

PresampleFn make_presample_fn(const PresampleOptions& opts) {
  return [opts](const Csr& g, const std::vector<int64_t>& train_ids) {
    return presample_counts(g, train_ids, opts);
  };
}

PresampleFn presample_hook(const PartitionCommand& cmd) {
  PresampleOptions pre;
  pre.epochs = cmd.presample_epochs;
  pre.batch_size = cmd.presample_batch_size;
  pre.sampler.fanouts = cmd.presample_fanouts;
  pre.sampler.seed = cmd.o.seed;
  return make_presample_fn(pre);
}

}  // namespace dsp
