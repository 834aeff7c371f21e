#include "commands.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/logging.hpp"
#include "core/memory.hpp"
#include "core/timer.hpp"
#include "csp/presample.hpp"
#include "graph/dataset.hpp"
#include "layout/partition.hpp"
#include "layout/partition_plan.hpp"
#include "lists.hpp"

namespace dsp::cli {
namespace {

// Estimates the peak from dataset.json alone; prints it for --dry-run (returns true: stop), else
// refuses with one line when it exceeds the budget.
bool plan_memory(const std::string& dataset, const PartitionOptions& o,
                 const std::string& budget_text, bool dry_run) {
  const std::string json = dataset + "/dataset.json";
  DSP_CHECK_T(IoError, path_exists(json), "{}: missing file", json);
  auto j = nlohmann::json::parse(read_file(json), nullptr, false);
  DSP_CHECK_FORMAT(!j.is_discarded(), "{}: not valid JSON", json);
  const DatasetMeta meta = DatasetMeta::from_json(j, json);
  const uint64_t budget =
      budget_text.empty() ? default_memory_budget() : parse_bytes("--memory-budget", budget_text);
  const uint64_t need = estimate_partition_memory(meta, o);  // beyond what the process holds
  if (dry_run) {
    fmt::print(
        "partition of {} ({} nodes, {} edge entries) into {} parts by {}: needs about {} "
        "of memory; budget {} ({} available){}\n",
        dataset, meta.num_nodes, meta.num_edges, o.parts, o.method,
        format_bytes(need + process_rss_bytes()), format_bytes(budget),
        format_bytes(available_memory()),
        need + process_rss_bytes() > budget ? ": it would be refused" : "");
    return true;
  }
  check_memory("dsp partition", need, budget, partition_memory_hint(meta, o));
  return false;
}

}  // namespace

void add_partition(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "partition",
      "Co-partition a dataset into P parts (one per rank): METIS or random, renumbered so each "
      "part owns a contiguous id range, with each part's training seeds and feature cache list");
  struct Args {
    std::string dataset, out;
    PartitionOptions o;
    double cache_ratio = -1;
    int64_t cache_bytes = -1;
    PresampleOptions pre;
    std::string fanouts = "15,10,5";
    std::string memory_budget;
    bool dry_run = false;
  };
  auto a = std::make_shared<Args>();
  sub->add_option("DATASET", a->dataset, "dataset directory (dsp convert / dsp generate)")
      ->required();
  sub->add_option("OUT", a->out, "partition directory to write")->required();
  sub->add_option("--parts,-p", a->o.parts, "number of parts (= ranks of the training job)")
      ->required();
  sub->add_option("--method", a->o.method, "metis (default) or random")
      ->check(CLI::IsMember({"metis", "random"}));
  sub->add_option("--cache-policy", a->o.cache_policy,
                  "in-degree (default), out-degree, presample, random, none");
  sub->add_option("--cache-ratio", a->cache_ratio,
                  "share of each part's nodes whose features it caches, in [0, 1] (default 0.1)");
  sub->add_option("--cache-bytes", a->cache_bytes,
                  "per-rank cache budget in bytes (instead of a ratio)");
  sub->add_option("--seed", a->o.seed, "random seed (METIS, random method and policy)")
      ->check(non_negative_integer());
  sub->add_option("--seed-imbalance", a->o.seed_imbalance,
                  "allowed excess of training seeds per part over the mean (default 0.05)");
  sub->add_flag("--overwrite", a->o.overwrite, "replace OUT if it exists");
  sub->add_option("--presample-epochs", a->pre.epochs,
                  "cache policy presample: sampling-only epochs K (default 1)");
  sub->add_option("--fanouts", a->fanouts,
                  "cache policy presample: fanouts from the seeds out (default 15,10,5)");
  sub->add_option("--batch-size", a->pre.batch_size,
                  "cache policy presample: seeds per batch (default 1024)");
  sub->add_option("--memory-budget", a->memory_budget,
                  "memory the command may use, e.g. 12G (default: 3/4 of what is available); "
                  "refuses before loading when the estimate exceeds it");
  sub->add_flag("--dry-run", a->dry_run,
                "print the memory estimate against the budget and exit without partitioning");
  sub->callback([a] {
    DSP_CHECK_ARG(!(a->cache_ratio >= 0 && a->cache_bytes >= 0),
                  "give --cache-ratio or --cache-bytes, not both");
    if (a->cache_ratio >= 0 || a->cache_ratio != -1) {
      if (a->cache_ratio != -1) a->o.cache_ratio = a->cache_ratio;
    }
    if (a->cache_bytes >= 0) a->o.cache_bytes = a->cache_bytes;
    DSP_CHECK_ARG(a->o.cache_ratio >= 0.0 && a->o.cache_ratio <= 1.0,
                  "--cache-ratio must be in [0, 1], got {}", a->o.cache_ratio);
    if (a->o.cache_policy == "presample") {
      a->pre.sampler.fanouts = parse_int_list(a->fanouts, "--fanouts");
      a->pre.sampler.seed = a->o.seed;
      a->o.presample = make_presample_fn(a->pre);
    }
    DSP_CHECK_ARG(!path_within(a->dataset, a->out),
                  "OUT {} is the dataset {} or contains it: writing the partition there would "
                  "destroy the dataset; choose another OUT",
                  a->out, a->dataset);
    if (plan_memory(a->dataset, a->o, a->memory_budget, a->dry_run)) return;
    Stopwatch sw;
    Dataset ds = load_dataset(a->dataset);
    DSP_INFO("partition", "{:<28} {:7.2f} s   peak RSS {:.2f} GiB", "load + validate", sw.seconds(),
             peak_rss_bytes() / 1073741824.0);
    PartitionMeta m = partition_dataset(ds, a->o, a->out);
    fmt::print("partition {}: {} parts of '{}' by {}, edge cut {} of {} entries ({:.1f}%)\n",
               a->out, m.parts, m.dataset_name, m.method, m.edge_cut, m.num_edges,
               m.num_edges ? 100.0 * m.edge_cut / m.num_edges : 0.0);
    int64_t max_nodes = 0, max_seeds = 0, tot_seeds = 0;
    fmt::print("  {:>4} {:>12} {:>12} {:>10} {:>10}\n", "part", "nodes", "edges", "seeds",
               "cached");
    for (int p = 0; p < m.parts; ++p) {
      const auto& s = m.part[p];
      fmt::print("  {:>4} {:>12} {:>12} {:>10} {:>10}\n", p, s.end - s.begin, s.edges, s.seeds,
                 s.cached);
      max_nodes = std::max(max_nodes, s.end - s.begin);
      max_seeds = std::max(max_seeds, s.seeds);
      tot_seeds += s.seeds;
    }
    double mean_nodes = double(m.num_nodes) / m.parts, mean_seeds = double(tot_seeds) / m.parts;
    fmt::print("  imbalance (max / mean): nodes {:.3f}, seeds {:.3f}\n", max_nodes / mean_nodes,
               mean_seeds > 0 ? max_seeds / mean_seeds : 1.0);
    fmt::print("  total {:.2f} s, peak RSS {:.2f} GiB\n", sw.seconds(),
               peak_rss_bytes() / 1073741824.0);
  });
}
}  // namespace dsp::cli
