#include "bench/cache_bench.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "core/lists.hpp"
#include "core/timer.hpp"
#include "csp/presample.hpp"
#include "layout/partition/hotness.hpp"
#include "layout/store/fifo_cache.hpp"

namespace dsp {
namespace {

using CacheOpts = CacheBenchOptions;
using json = nlohmann::json;

// clang-format off
#define DSP_FIELD(member) [](CacheOpts& c) -> auto& { return c.member; }
// clang-format on

template <class Get>
Option<CacheOpts> cache_value(std::string flag, std::string key, std::string help, Get get) {
  return options::value<CacheOpts>(std::move(flag), std::move(key), std::move(help), get);
}

OptionTable<CacheOpts> cache_options_table() {
  return {
      cache_value("--ratios", "ratios", "cached share of the nodes (default 0.05,0.1,0.2)",
                  DSP_FIELD(ratios)),
      cache_value("--policies", "policies",
                  "static policies to score (default in-degree,out-degree,presample,random); BGL's "
                  "dynamic FIFO is always replayed too",
                  DSP_FIELD(policies)),
      cache_value("--batches", "batches", "batches in the trace (default 50)", DSP_FIELD(batches)),
      cache_value("--fanouts", "fanouts", "fanouts from the seeds out (default 15,10,5)",
                  DSP_FIELD(fanouts)),
      cache_value("--batch-size", "batch_size", "seeds per batch (default 1024)",
                  DSP_FIELD(batch_size)),
      cache_value("--presample-epochs", "presample_epochs",
                  "K of PreSC#K, or a list (1,2,4: one presample#K policy each; default 1)",
                  DSP_FIELD(presample_epochs)),
      cache_value("--orders", "orders",
                  "seed orders to record a trace for: random (default), bfs, or random,bfs",
                  DSP_FIELD(orders)),
      cache_value("--bfs-sequences", "bfs_sequences",
                  "order bfs: BFS sequences interleaved per epoch (default 4)",
                  DSP_FIELD(bfs_sequences)),
      cache_value("--threads", "threads", "OpenMP threads (default 1)", DSP_FIELD(threads)),
      cache_value("--seed", "seed", "seed of the trace (presampling and random use others)",
                  DSP_FIELD(seed)),
      cache_value("--json", "json", "write the figures to this file", DSP_FIELD(json)),
  };
}
#undef DSP_FIELD

// Hits of a cache per ratio and their share of the oracle's.
struct Hits {
  json hits = json::array(), of_opt = json::array();
  void add(double h, const json& opt) {
    of_opt.push_back(opt[hits.size()].get<double>() > 0 ? h / opt[hits.size()].get<double>() : 0.0);
    hits.push_back(h);
  }
};

// Each window against the best static policy and the oracle holding as many nodes.
json reuse_windows(const CacheTrace& t, const std::vector<ScoredPolicy>& scored, int64_t n) {
  json reuse = json::array();
  for (const WindowReuse& w : window_reuse(t, n, {1, 4, 16})) {
    const int64_t k = static_cast<int64_t>(w.size_share * static_cast<double>(n));
    double best = 0;
    for (const ScoredPolicy& sp : scored) {
      best = std::max(best, hit_rate(t.ids, n, top_k_by_score(sp.score, 0, n, k)));
    }
    reuse.push_back({{"window_batches", w.window},
                     {"hit_rate", w.hit_rate},
                     {"size_share", w.size_share},
                     {"best_static_same_size", best},
                     {"optimal_same_size", optimal_hit_rate(t.ids, n, k)}});
  }
  return reuse;
}

}  // namespace

const OptionTable<CacheBenchOptions>& cache_bench_options() {
  static const OptionTable<CacheOpts> table = cache_options_table();
  return table;
}

void CacheBenchOptions::validate() const {
  DSP_CHECK_ARG(batch_size > 0 && batches > 0 && threads > 0,
                "--batch-size, --batches and --threads must be positive");
}

SamplerOptions CacheBenchOptions::sampler() const {
  SamplerOptions so;
  so.fanouts = parse_int_list(fanouts, "--fanouts");
  so.seed = seed;
  return so;
}

std::vector<ScoredPolicy> score_policies(const CacheBenchOptions& o, const Csr& graph,
                                         const std::vector<int64_t>& train,
                                         const SamplerOptions& so) {
  std::vector<int> ks;
  for (int k : parse_int_list(o.presample_epochs, "--presample-epochs")) {
    DSP_CHECK_ARG(k > 0, "--presample-epochs must be positive, got {}", k);
    ks.push_back(k);
  }
  std::vector<ScoredPolicy> out;
  for (const std::string& pname : split_list(o.policies)) {
    const bool presample = static_cache_policy(pname).presamples();
    for (int k : presample ? ks : std::vector<int>{1}) {
      PresampleOptions po;
      po.epochs = k;
      po.batch_size = o.batch_size;
      po.sampler = so;
      po.sampler.seed = o.seed + 0x9e3779b9ULL;  // not the trace's draws
      Stopwatch sw;
      ScoredPolicy sp;
      sp.name = presample && ks.size() > 1 ? fmt::format("presample#{}", k) : pname;
      sp.score = hotness_scores(pname, graph, train, o.seed + 1, make_presample_fn(po));
      sp.seconds = sw.seconds();
      out.push_back(std::move(sp));
    }
  }
  return out;
}

nlohmann::json score_trace(const CacheTrace& t, const std::vector<ScoredPolicy>& scored,
                           const std::vector<double>& ratios, int64_t n) {
  json opt = json::array(), pol = json::object();
  for (double r : ratios) opt.push_back(optimal_hit_rate(t.ids, n, static_cast<int64_t>(r * n)));
  for (const ScoredPolicy& sp : scored) {
    Hits h;
    for (double r : ratios) {
      h.add(hit_rate(t.ids, n, top_k_by_score(sp.score, 0, n, static_cast<int64_t>(r * n))), opt);
    }
    pol[sp.name] = {{"hit_rate", h.hits}, {"of_optimal", h.of_opt}, {"score_s", sp.seconds}};
  }
  {  // BGL's dynamic FIFO, replayed on the trace (cold at the start, like a real run)
    Hits h;
    Stopwatch sw;
    for (double r : ratios) {
      h.add(fifo_hit_rate(t.ids, t.batch_end, n, static_cast<int64_t>(r * n)), opt);
    }
    pol["fifo"] = {{"hit_rate", h.hits}, {"of_optimal", h.of_opt}, {"replay_s", sw.seconds()}};
  }
  return {{"policies", pol},
          {"optimal", opt},
          {"trace_accesses", t.ids.size()},
          {"window_reuse", reuse_windows(t, scored, n)},
          {"label_tv", t.label_tv},
          {"sampling_s", t.seconds}};
}

}  // namespace dsp
