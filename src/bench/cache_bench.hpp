#pragma once
// `dsp bench cache`: hit rates of the static cache policies (layout/partition/hotness.hpp) and
// BGL's dynamic FIFO against the optimal oracle, on access traces the reference sampler records
// (GNNLab's evaluation, single process). Its options are declared once (cache_bench_options: flags,
// keys, help, defaults), checked once (validate); the scoring is here, next to the sampler that
// records the traces (bench/cache_trace.hpp); the CLI (tools/bench_cache.cpp) loads the graph,
// builds the seed orders, prints and writes the figures.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/cache_trace.hpp"
#include "core/options.hpp"
#include "csp/sampler.hpp"
#include "graph/csr.hpp"

namespace dsp {

struct CacheBenchOptions {
  std::string path;  // the CLI's PATH: a dataset directory or a 1-part partition directory
  std::string ratios = "0.05,0.1,0.2";  // cached shares of the nodes
  std::string policies = "in-degree,out-degree,presample,random";
  int batches = 50;  // batches in the trace
  std::string fanouts = "15,10,5";
  int64_t batch_size = 1024;
  std::string presample_epochs = "1";  // K of PreSC#K, or a list of them
  std::string orders = "random";       // seed orders to record a trace for: random, bfs
  int bfs_sequences = 4;
  int threads = 1;
  uint64_t seed = 0;  // of the trace (presampling and random use others)
  std::string json;

  // InvalidArgument "--batch-size, --batches and --threads must be positive".
  void validate() const;
  // The trace's sampler: the fanouts, o.seed.
  SamplerOptions sampler() const;
};

const OptionTable<CacheBenchOptions>& cache_bench_options();

// One policy's hotness of every node (presample once per K of PreSC#K: "presample#K" when several
// K are asked for), computed once: static caches do not depend on the order of the seeds.
struct ScoredPolicy {
  std::string name;
  std::vector<int64_t> score;
  double seconds = 0;
};
// Every policy of o.policies over `graph` with training seeds `train`; presampling draws with
// another seed than the trace (`so`'s), as a real run would: its counts come before training.
std::vector<ScoredPolicy> score_policies(const CacheBenchOptions& o, const Csr& graph,
                                         const std::vector<int64_t>& train,
                                         const SamplerOptions& so);

// Hit rates of the policies, the replayed FIFO and the oracle on one trace (each cache holding
// ratio * n nodes), its reuse windows and label mix: {"policies": {name: {"hit_rate",
// "of_optimal", "score_s" | "replay_s"}}, "optimal", "trace_accesses", "window_reuse", "label_tv",
// "sampling_s"}.
nlohmann::json score_trace(const CacheTrace& t, const std::vector<ScoredPolicy>& scored,
                           const std::vector<double>& ratios, int64_t n);

}  // namespace dsp
