#pragma once
// `dsp bench sample`: collective sampling throughput (per stage and layer) and the bytes it moves,
// CSP against pull. Its options are declared once (sample_bench_options: flags, keys, help,
// defaults), checked once (validate) and measured here, next to the sampler; the CLI
// (tools/bench_sample.cpp) builds the rank, prints and writes the figures.
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ccc/communicator.hpp"
#include "core/options.hpp"
#include "csp/sampler.hpp"

namespace dsp {

struct SampleBenchOptions {
  std::string partition;  // the CLI's PARTITION
  // The sampler as dsp train sets it (sampler_options_table, embedded whole: --fanouts,
  // --sample-kernel, --sampler and its options), with the bench's --biased and --replace; seed and
  // mode come from here.
  SamplerConfig base;
  int64_t batch_size = 1024;  // seeds per rank and batch
  int batches = 20;           // timed batches (after one warm-up)
  enum class Modes { kCsp, kPull, kBoth };
  const Names<SampleBenchOptions::Modes>& names_of(SampleBenchOptions::Modes);  // csp, pull, both
  Modes mode = Modes::kCsp;
  bool per_layer_bytes = false;  // one extra run per layer prefix
  int threads = 1;
  uint64_t seed = 0;
  std::string json;

  // InvalidArgument: "--batch-size, --batches and --threads must be positive", or the sampler's own
  // (SamplerConfig::options of every mode's options).
  void validate() const;
  // The sampler's options for `mode`, with the first `num_layers` fanouts (-1: all).
  SamplerOptions sampler(SampleMode mode, int num_layers = -1) const;
  std::vector<SampleMode> modes() const;  // both: csp, pull
};
const Names<SampleBenchOptions::Modes>& names_of(SampleBenchOptions::Modes);  // csp, pull, both

const OptionTable<SampleBenchOptions>& sample_bench_options();

// Makes the rank's sampler for the given options (pipeline's RankRuntime::make_sampler).
using SamplerFactory = std::function<std::unique_ptr<CollectiveSampler>(const SamplerOptions&)>;

// One mode: `o.batches` timed batches (after one warm-up) of this rank's `seeds` (part `part`'s
// training seeds, shuffled by o.seed), sampled by a sampler from `make` on `comm` (its channel);
// figures summed or maxed over ranks (collective): mode, sampled_edges_per_s(_per_rank),
// seeds_per_s, sampled_edges_per_batch, ms_per_batch, ms_per_stage, ms_per_layer_from_seeds,
// tasks_local, tasks_remote, bytes_per_batch, batches_per_epoch, bytes_per_epoch_extrapolated.
nlohmann::json measure_sample_mode(const SampleBenchOptions& o, const SamplerFactory& make,
                                   Communicator& comm, const std::vector<int64_t>& seeds, int part,
                                   SampleMode mode, int num_layers = -1);

// Every mode of `o.mode` ({"modes": [...]}), each with bytes_per_epoch_per_layer when
// o.per_layer_bytes (from runs over the fanouts' prefixes), and csp_bytes_over_pull when both ran.
nlohmann::json measure_sampling(const SampleBenchOptions& o, const SamplerFactory& make,
                                Communicator& comm, const std::vector<int64_t>& seeds, int part);

}  // namespace dsp
