// `dsp bench cache PATH`: hit rates of the cache policies vs the optimal oracle on recorded
// sampling traces, single process (traces and scoring: bench/cache_trace.hpp,
// bench/cache_bench.hpp).
#include <omp.h>

#include <algorithm>

#include "bench/cache_bench.hpp"
#include "bench_common.hpp"
#include "ccc/communicator.hpp"
#include "core/error.hpp"
#include "core/lists.hpp"
#include "core/timer.hpp"
#include "csp/presample.hpp"
#include "graph/dataset.hpp"
#include "layout/partition/partition.hpp"
#include "layout/partition/partition_dir.hpp"
#include "pipeline/seed_order.hpp"

namespace dsp::cli {
namespace {

// The whole graph: a 1-part partition holds it (renumbered) in its only patch; a dataset directory
// is used as is.
struct WholeGraph {
  Dataset ds;
  PartitionData pd;
  const Csr* graph = nullptr;
  std::vector<int64_t> train;
  std::string name;
  const Array* labels = nullptr;
};

void load_whole_graph(const std::string& path, WholeGraph& w) {
  if (is_partition_dir(path)) {
    PartitionMeta m = load_partition_meta(path);
    DSP_CHECK_ARG(m.parts == 1,
                  "{}: bench cache needs the whole graph: a dataset directory or a 1-part "
                  "partition (this one has {} parts)",
                  path, m.parts);
    w.pd = load_partition(path, 0, 1);
    w.graph = &w.pd.patch;
    w.train.assign(w.pd.seeds.data<int64_t>(), w.pd.seeds.data<int64_t>() + w.pd.seeds.dim(0));
    w.name = w.pd.meta.dataset_name;
    w.labels = &w.pd.labels;
  } else {
    LoadOptions lo;
    lo.validate = false;  // O(E) checks would dominate the run; dsp info validates
    w.ds = load_dataset(path, lo);
    w.graph = &w.ds.graph;
    DSP_CHECK_ARG(w.ds.train_idx.defined(), "{}: the dataset has no train_idx", path);
    for (int64_t i = 0; i < w.ds.train_idx.dim(0); ++i) w.train.push_back(w.ds.train_idx.int_at(i));
    w.name = w.ds.meta.name;
    w.labels = &w.ds.labels;
  }
  DSP_CHECK_ARG(!w.train.empty(), "{}: no training seeds", path);
}

void print_trace_scores(const std::string& order, const nlohmann::json& o,
                        const std::vector<double>& ratios) {
  fmt::print("  order {}: {} accesses, batch label TV distance {:.3f}\n", order,
             o["trace_accesses"].get<int64_t>(), o["label_tv"].get<double>());
  std::string head = fmt::format("    {:<12}", "policy");
  for (double r : ratios) head += fmt::format(" {:>8.0f}%", r * 100);
  fmt::print("{}\n", head);
  auto row = [](const std::string& name, const nlohmann::json& v) {
    std::string line = fmt::format("    {:<12}", name);
    for (const auto& h : v) line += fmt::format(" {:>9.3f}", h.get<double>());
    fmt::print("{}\n", line);
  };
  for (auto it = o["policies"].begin(); it != o["policies"].end(); ++it) {
    row(it.key(), it.value()["hit_rate"]);
  }
  row("optimal", o["optimal"]);
  for (const auto& w : o["window_reuse"]) {
    fmt::print(
        "    reuse from the last {:>2} batches: {:.3f} of accesses, holding {:.3f} of the nodes "
        "(best static cache that size {:.3f}, optimal {:.3f})\n",
        w["window_batches"].get<int>(), w["hit_rate"].get<double>(), w["size_share"].get<double>(),
        w["best_static_same_size"].get<double>(), w["optimal_same_size"].get<double>());
  }
}

// One seed order's trace (input nodes of a.batches batches of the reference sampler, continuing
// into further epochs if needed), scored.
nlohmann::json bench_order(const CacheBenchOptions& a, const WholeGraph& w,
                           CollectiveSampler& sampler, SeedOrder order,
                           const std::vector<ScoredPolicy>& scored,
                           const std::vector<double>& ratios, CacheTrace& t) {
  std::unique_ptr<BfsSeedOrder> bfs;
  Stopwatch sw;
  if (order == SeedOrder::kBfs) {
    std::vector<int64_t> sorted = w.train;
    std::sort(sorted.begin(), sorted.end());
    bfs = std::make_unique<BfsSeedOrder>(*w.graph, 0, sorted, a.seed,
                                         BfsOrderOptions{a.bfs_sequences, 0});
  }
  const double t_order = sw.seconds();
  EpochOrderFn fn = [&](int64_t e) {
    return bfs ? bfs->order(e, 0) : shuffle_ids(w.train, a.seed, e);
  };
  sampler.reset_stats();
  t = record_trace(sampler, fn, static_cast<int64_t>(w.train.size()), a.batches, a.batch_size,
                   w.labels);
  nlohmann::json o = score_trace(t, scored, ratios, w.graph->num_nodes);
  o["order_setup_s"] = t_order;
  return o;
}

nlohmann::json cache_header(const CacheBenchOptions& a, const WholeGraph& w,
                            const std::vector<double>& ratios) {
  const int64_t bpe = (static_cast<int64_t>(w.train.size()) + a.batch_size - 1) / a.batch_size;
  return {{"bench", "cache"},
          {"path", a.path},
          {"dataset", w.name},
          {"num_nodes", w.graph->num_nodes},
          {"num_edges", w.graph->num_edges()},
          {"fanouts", a.fanouts},
          {"batch_size", a.batch_size},
          {"batches", a.batches},
          {"batches_per_epoch", bpe},
          {"presample_epochs", a.presample_epochs},
          {"bfs_sequences", a.bfs_sequences},
          {"threads", a.threads},
          {"ratios", ratios},
          {"orders", nlohmann::json::object()}};
}

// Hit rates of static caches on a recorded access trace, single process (GNNLab's evaluation):
// every policy ranks the whole graph, caches its top ratio * N nodes and is scored against the
// trace, as is the optimal oracle (the trace's own most frequent nodes).
void run_cache(const CacheBenchOptions& a) {
  omp_set_num_threads(a.threads);
  WholeGraph w;
  load_whole_graph(a.path, w);
  // The reference sampler: one part, self communicator.
  const SamplerOptions so = a.sampler();
  PartitionData single = single_part(*w.graph);
  auto self = make_communicator("self");
  CollectiveSampler sampler(single, *self, so);
  const std::vector<double> ratios = parse_double_list(a.ratios, "--ratios", 0, 1);
  const std::vector<ScoredPolicy> scored = score_policies(a, *w.graph, w.train, so);
  nlohmann::json j = cache_header(a, w, ratios);
  fmt::print("cache bench: {} ({} nodes), traces of {} batches x {} seeds, fanouts {}\n", w.name,
             w.graph->num_nodes, a.batches, a.batch_size, a.fanouts);
  for (const std::string& order : split_list(a.orders)) {
    CacheTrace t;
    nlohmann::json o =
        bench_order(a, w, sampler, parse_choice<SeedOrder>(order), scored, ratios, t);
    if (j["orders"].empty()) {  // the first order's figures at the top level, as before
      const SamplerStats& st = sampler.stats();
      for (const char* k : {"policies", "optimal", "trace_accesses"}) j[k] = o[k];
      // the single-process reference sampler's throughput, as a by-product
      j["reference_sampler"] = {{"sampled_edges", st.sampled_edges},
                                {"seconds", t.seconds},
                                {"sampled_edges_per_s", st.sampled_edges / t.seconds}};
      fmt::print("  reference sampler: {:.2f} M sampled edges/s ({} thread(s))\n",
                 st.sampled_edges / t.seconds / 1e6, a.threads);
    }
    print_trace_scores(order, o, ratios);
    j["orders"][order] = o;
  }
  write_figures(a.json, j);
}

}  // namespace

void add_bench_cache(CLI::App* bench) {
  add_bench_command<CacheBenchOptions>(
      bench, "cache",
      "Hit rates of the cache policies vs the optimal oracle on a recorded sampling trace (single "
      "process)",
      "PATH", "dataset directory or 1-part partition directory", &CacheBenchOptions::path,
      cache_bench_options(), {},
      [](const CacheBenchOptions& a, const RankOptions&) { run_cache(a); });
}

}  // namespace dsp::cli
