#include "bench/sample_bench.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/lists.hpp"
#include "core/timer.hpp"
#include "csp/presample.hpp"

namespace dsp {
namespace {

using Opts = SampleBenchOptions;
using json = nlohmann::json;

// clang-format off
#define DSP_FIELD(member) [](Opts& c) -> auto& { return c.member; }
// clang-format on

template <class Get>
Option<Opts> value(std::string flag, std::string key, std::string help, Get get) {
  return options::value<Opts>(std::move(flag), std::move(key), std::move(help), get);
}

template <class Get>
Option<Opts> toggle(std::string flag, std::string key, std::string help, Get get) {
  return options::toggle<Opts>(std::move(flag), std::move(key), std::move(help), get);
}

OptionTable<Opts> all_options() {
  OptionTable<Opts> t{
      value("--batch-size", "batch_size", "seeds per rank and batch (default 1024)",
            DSP_FIELD(batch_size)),
      value("--batches", "batches", "timed batches (default 20)", DSP_FIELD(batches)),
      options::value<Opts>("--mode", "mode", "csp (default), pull or both", DSP_FIELD(mode)),
      toggle("--biased", "biased", "weight by edge weight", DSP_FIELD(base.biased)),
      toggle("--replace", "replace", "draw with replacement", DSP_FIELD(base.replace)),
      toggle("--per-layer-bytes", "per_layer_bytes",
             "also measure the bytes of every layer (one extra run per layer prefix)",
             DSP_FIELD(per_layer_bytes)),
      value("--threads", "threads", "OpenMP threads per rank (default 1)", DSP_FIELD(threads)),
      value("--seed", "seed", "sampling seed", DSP_FIELD(seed)),
      value("--json", "json", "write the figures to this file", DSP_FIELD(json)),
  };
  for (Option<Opts>& o : options::embed_all<Opts>(sampler_options_table(), DSP_FIELD(base))) {
    t.push_back(std::move(o));
  }
  return t;
}
#undef DSP_FIELD

// Batch b of the shuffled seeds: bs seeds from (b * bs) mod n on, wrapping around.
std::vector<int64_t> batch_seeds(const std::vector<int64_t>& seeds, int64_t bs, int64_t b) {
  std::vector<int64_t> s;
  const int64_t n = static_cast<int64_t>(seeds.size());
  const int64_t start = (b * bs) % n;
  for (int64_t i = 0; i < bs && i < n; ++i) s.push_back(seeds[(start + i) % n]);
  return s;
}

// The figures of one mode from this rank's stats and wall time, reduced over ranks.
json reduce_figures(const Opts& o, Communicator& comm, const SamplerStats& st, double wall,
                    int num_layers, int64_t num_seeds, SampleMode mode) {
  const int L = num_layers;
  // sums over ranks
  std::vector<double> sum = {static_cast<double>(st.sampled_edges), static_cast<double>(st.seeds),
                             static_cast<double>(st.bytes_sent),
                             static_cast<double>(st.tasks_local),
                             static_cast<double>(st.tasks_remote)};
  comm.all_reduce(sum.data(), static_cast<int64_t>(sum.size()), DType::kFloat64, ReduceOp::kSum);
  // maxima over ranks (the slowest rank sets the pace of a collective)
  // distinct (source) nodes of every layer's block, summed over ranks
  std::vector<double> src(st.layer_sources.begin(), st.layer_sources.end());
  src.resize(L, 0.0);
  comm.all_reduce(src.data(), L, DType::kFloat64, ReduceOp::kSum);
  json sources = json::array();
  for (int l = 0; l < L; ++l) sources.push_back(src[l] / o.batches / comm.size());
  std::vector<double> mx = {wall, st.t_shuffle, st.t_sample, st.t_reshuffle, st.t_relabel};
  for (int l = 0; l < L; ++l) mx.push_back(st.t_layer[l]);
  // a device backend's host round trips (the busiest rank's)
  for (const int64_t h : {st.host.syncs, st.host.reads, st.host.read_bytes, st.host.allocations,
                          st.host.graph_launches}) {
    mx.push_back(static_cast<double>(h));
  }
  comm.all_reduce(mx.data(), static_cast<int64_t>(mx.size()), DType::kFloat64, ReduceOp::kMax);
  // batches per epoch: the rank with the most seeds decides (others sample empty batches)
  int64_t bpe = (num_seeds + o.batch_size - 1) / o.batch_size;
  comm.all_reduce(&bpe, 1, DType::kInt64, ReduceOp::kMax);
  const double nb = o.batches;
  json per_layer = json::array();
  for (int l = 0; l < L; ++l) per_layer.push_back(mx[5 + l] / nb * 1e3);
  return {{"mode", mode},
          {"sampled_edges_per_s", sum[0] / mx[0]},
          {"sampled_edges_per_s_per_rank", sum[0] / mx[0] / comm.size()},
          {"seeds_per_s", sum[1] / mx[0]},
          {"sampled_edges_per_batch", sum[0] / nb / comm.size()},
          // per rank and batch, from the seeds out; the last is the input layer's
          {"sources_per_batch_per_layer", sources},
          {"input_nodes_per_batch", L ? src[L - 1] / nb / comm.size() : 0.0},
          {"ms_per_batch", mx[0] / nb * 1e3},
          {"ms_per_stage",
           {{"shuffle", mx[1] / nb * 1e3},
            {"sample", mx[2] / nb * 1e3},
            {"reshuffle", mx[3] / nb * 1e3},
            {"relabel", mx[4] / nb * 1e3}}},
          {"ms_per_layer_from_seeds", per_layer},
          {"tasks_local", sum[3]},
          {"tasks_remote", sum[4]},
          {"bytes_per_batch", sum[2] / nb},
          // a device backend's blocking syncs and device-to-host copies per batch (the busiest
          // rank's; 0 on the CPU backend), and the copies per sampled layer
          {"host_syncs_per_batch", mx[5 + L] / nb},
          {"host_reads_per_batch", mx[6 + L] / nb},
          {"host_read_bytes_per_batch", mx[7 + L] / nb},
          {"host_reads_per_layer", L ? mx[6 + L] / nb / L : 0.0},
          // growths of its buffers over the whole run (once sizes settle, a batch makes none)
          {"host_allocations", mx[8 + L]},
          // captured sequences replayed per batch (--cuda-graphs: one launch for sample's kernels)
          {"graph_launches_per_batch", mx[9 + L] / nb},
          {"batches_per_epoch", bpe},
          // measured bytes per batch (all ranks) times batches per epoch
          {"bytes_per_epoch_extrapolated", sum[2] / nb * bpe}};
}

// The sampler counts bytes per batch, not per layer. Layer l's draws are keyed by (seed, epoch,
// batch, l) only, so a run with the first l fanouts samples exactly the first l layers of the
// full run: differences of prefix runs are the per-layer volumes.
json per_layer_bytes(const Opts& o, const SamplerFactory& make, Communicator& comm,
                     const std::vector<int64_t>& seeds, int part, SampleMode mode, const json& full,
                     int L) {
  std::vector<double> prefix = {0.0};
  for (int l = 1; l < L; ++l) {
    prefix.push_back(
        measure_sample_mode(o, make, comm, seeds, part, mode, l)["bytes_per_epoch_extrapolated"]
            .get<double>());
  }
  prefix.push_back(full["bytes_per_epoch_extrapolated"].get<double>());
  json per = json::array();
  for (int l = 0; l < L; ++l) per.push_back(prefix[l + 1] - prefix[l]);
  return per;
}

}  // namespace

const Names<SampleBenchOptions::Modes>& names_of(SampleBenchOptions::Modes) {
  using M = SampleBenchOptions::Modes;
  static const Names<M> n("mode", {{M::kCsp, "csp"}, {M::kPull, "pull"}, {M::kBoth, "both"}});
  return n;
}

const OptionTable<SampleBenchOptions>& sample_bench_options() {
  static const OptionTable<Opts> table = all_options();
  return table;
}

void SampleBenchOptions::validate() const {
  DSP_CHECK_ARG(batch_size > 0 && batches > 0 && threads > 0,
                "--batch-size, --batches and --threads must be positive");
  for (SampleMode m : modes()) sampler(m).validate();
}

SamplerOptions SampleBenchOptions::sampler(SampleMode m, int num_layers) const {
  SamplerConfig c = base;
  if (num_layers >= 0) c.fanouts.resize(num_layers);
  SamplerOptions so = c.options();
  so.seed = seed;
  so.mode = m;
  so.blocks_on_device = true;  // as dsp train samples: a device backend's blocks stay there
  so.ids_on_device = true;     // ... with their source ids, for the feature store
  return so;
}

std::vector<SampleMode> SampleBenchOptions::modes() const {
  if (mode == Modes::kBoth) return {SampleMode::kCsp, SampleMode::kPull};
  return {mode == Modes::kCsp ? SampleMode::kCsp : SampleMode::kPull};
}

nlohmann::json measure_sample_mode(const SampleBenchOptions& o, const SamplerFactory& make,
                                   Communicator& comm, const std::vector<int64_t>& part_seeds,
                                   int part, SampleMode mode, int num_layers) {
  const SamplerOptions so = o.sampler(mode, num_layers);
  std::unique_ptr<CollectiveSampler> sampler = make(so);
  DSP_CHECK_ARG(!part_seeds.empty(), "part {} has no training seeds", part);
  const std::vector<int64_t> seeds = shuffle_ids(part_seeds, o.seed, 0);
  const int64_t bs = std::min<int64_t>(o.batch_size, static_cast<int64_t>(seeds.size()));
  // as dsp train samples node batches: with --temporal every seed at its node time
  sampler->sample(batch_seeds(seeds, bs, 0), 0, 0);  // warm-up: page faults, table growth
  sampler->reset_stats();
  comm.barrier();
  Stopwatch sw;
  for (int b = 0; b < o.batches; ++b) {
    sampler->sample(batch_seeds(seeds, bs, b + 1), 0, b + 1);
  }
  const double wall = sw.seconds();
  return reduce_figures(o, comm, sampler->stats(), wall, static_cast<int>(so.fanouts.size()),
                        static_cast<int64_t>(part_seeds.size()), mode);
}

nlohmann::json measure_sampling(const SampleBenchOptions& o, const SamplerFactory& make,
                                Communicator& comm, const std::vector<int64_t>& seeds, int part) {
  json j = {{"modes", json::array()}};
  const std::vector<SampleMode> modes = o.modes();
  const int L = static_cast<int>(o.base.fanouts.size());
  for (SampleMode m : modes) {
    json r = measure_sample_mode(o, make, comm, seeds, part, m);
    if (o.per_layer_bytes && L > 1) {
      r["bytes_per_epoch_per_layer"] = per_layer_bytes(o, make, comm, seeds, part, m, r, L);
    }
    j["modes"].push_back(r);
  }
  if (modes.size() == 2) {
    const double c = j["modes"][0]["bytes_per_epoch_extrapolated"].get<double>();
    const double p = j["modes"][1]["bytes_per_epoch_extrapolated"].get<double>();
    j["csp_bytes_over_pull"] = p > 0 ? c / p : 0.0;
  }
  return j;
}

}  // namespace dsp
