#include <fmt/ranges.h>

#include "commands.hpp"
#include "core/error.hpp"
#include "core/lists.hpp"
#include "core/fs.hpp"
#include "core/logging.hpp"
#include "core/memory.hpp"
#include "core/timer.hpp"
#include "csp/presample.hpp"
#include "graph/dataset.hpp"
#include "layout/partition.hpp"
#include "layout/partition_plan.hpp"

namespace dsp::cli {
namespace {

// Per-part rows, entries, seeds, cache and halo; imbalance (max / mean) per balance constraint;
// for self-reliant parts the replication factors. Returns the figures as JSON.
nlohmann::json report(const std::string& out, const PartitionMeta& m) {
  fmt::print("partition {}: {} parts of '{}' by {}, edge cut {} of {} entries ({:.1f}%)\n", out,
             m.parts, m.dataset_name, m.method, m.edge_cut, m.num_edges,
             m.num_edges ? 100.0 * m.edge_cut / m.num_edges : 0.0);
  const bool halo = m.hops > 0;
  fmt::print("  {:>4} {:>12} {:>12} {:>10} {:>10}", "part", "nodes", "entries", "seeds", "cached");
  if (halo) fmt::print(" {:>12} {:>12} {:>12}", "halo nodes", "halo entries", "L-hop reach");
  fmt::print("\n");
  int64_t max_nodes = 0, max_seeds = 0, tot_seeds = 0, max_entries = 0, tot_entries = 0;
  int64_t rows = 0, reach = 0;
  for (int p = 0; p < m.parts; ++p) {
    const auto& s = m.part[p];
    fmt::print("  {:>4} {:>12} {:>12} {:>10} {:>10}", p, s.end - s.begin, s.edges, s.seeds,
               s.cached);
    if (halo) fmt::print(" {:>12} {:>12} {:>12}", s.halo_nodes, s.halo_edges, s.reach);
    fmt::print("\n");
    max_nodes = std::max(max_nodes, s.end - s.begin);
    max_seeds = std::max(max_seeds, s.seeds);
    tot_seeds += s.seeds;
    // The topology a rank holds: its own rows plus the replicated ones.
    max_entries = std::max(max_entries, s.edges + s.halo_edges);
    tot_entries += s.edges + s.halo_edges;
    rows += s.end - s.begin + s.halo_nodes;
    reach += s.reach;
  }
  const double mean_nodes = double(m.num_nodes) / m.parts, mean_seeds = double(tot_seeds) / m.parts;
  const double mean_entries = double(tot_entries) / m.parts;  // replicas included
  nlohmann::json j = {{"edge_cut_share", m.num_edges ? double(m.edge_cut) / m.num_edges : 0.0},
                      {"imbalance",
                       {{"nodes", max_nodes / mean_nodes},
                        {"seeds", mean_seeds > 0 ? max_seeds / mean_seeds : 1.0},
                        {"entries", mean_entries > 0 ? max_entries / mean_entries : 1.0}}}};
  fmt::print("  imbalance (max / mean): nodes {:.3f}, seeds {:.3f}, entries {:.3f}\n",
             j["imbalance"]["nodes"].get<double>(), j["imbalance"]["seeds"].get<double>(),
             j["imbalance"]["entries"].get<double>());
  if (!m.preaggregated.empty()) {
    j["preaggregated"] = m.preaggregated;
    fmt::print("  pre-aggregated first layer (PaGraph): {} (preaggregated_<kind>.npy, [{}, {}])\n",
               fmt::join(m.preaggregated, ", "), m.num_nodes, 2 * m.feature_dim);
  }
  if (halo) {
    j["replication"] = {{"rows", double(rows) / m.num_nodes},
                        {"entries", m.num_edges ? double(tot_entries) / m.num_edges : 0.0},
                        {"reach", double(reach) / m.num_nodes}};
    fmt::print(
        "  replication ({}-hop halo{}): rows {:.3f}x, entries {:.3f}x, L-hop reach {:.3f}x of "
        "the graph\n",
        m.hops, m.halo_cap > 0 ? fmt::format(", cap {}", m.halo_cap) : "",
        j["replication"]["rows"].get<double>(), j["replication"]["entries"].get<double>(),
        j["replication"]["reach"].get<double>());
  }
  return j;
}

// Estimates the peak from dataset.json alone; prints it for --dry-run (returns true: stop), else
// refuses with one line when it exceeds the budget.
bool plan_memory(const std::string& dataset, const PartitionOptions& o,
                 const std::string& budget_text, bool dry_run) {
  const DatasetMeta meta = load_dataset_meta(dataset);
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
    std::string fanouts = "15,10,5", json;
    std::string memory_budget, preaggregate_kinds;
    bool dry_run = false, preaggregate = false;
  };
  auto a = std::make_shared<Args>();
  sub->add_option("DATASET", a->dataset, "dataset directory (dsp convert / dsp generate)")
      ->required();
  sub->add_option("OUT", a->out, "partition directory to write")->required();
  sub->add_option("--parts,-p", a->o.parts, "number of parts (= ranks of the training job)")
      ->required();
  sub->add_option("--method", a->o.method,
                  "metis (default), random, bfs-blocks (BGL: for graphs beyond METIS) or pagraph "
                  "(self-reliant parts: each replicates its seeds' L-hop neighbourhood)")
      ->type_name("TEXT:{metis,random,bfs-blocks,pagraph}");
  sub->add_flag("--no-entry-balance{false}", a->o.balance_entries,
                "metis, bfs-blocks: balance nodes and seeds only, not adjacency entries");
  sub->add_option("--hops", a->o.pagraph.hops,
                  "pagraph: layers L of the model (fanouts) whose neighbourhood is replicated "
                  "(default 2)");
  sub->add_option("--halo-cap", a->o.pagraph.halo_cap,
                  "pagraph: in-neighbours kept per replicated row (default 0: all)");
  sub->add_option("--block-size", a->o.bfs_blocks.block_size,
                  "bfs-blocks: nodes at which a BFS block stops growing (default N / (256 parts), at least 256)");
  sub->add_option("--block-hops", a->o.bfs_blocks.hops,
                  "bfs-blocks: hops of block neighbours the assignment counts (default 2)");
  sub->add_flag("--preaggregate", a->preaggregate,
                "PaGraph's first-layer pre-aggregation: also store [x_v | a_v] per node, a_v "
                "aggregated over v's whole in-neighbourhood (mean for GraphSAGE, the normalised "
                "sum for GCN), so that dsp train --preaggregate samples one hop fewer");
  sub->add_option("--preaggregate-kinds", a->preaggregate_kinds,
                  "with --preaggregate: mean, gcn or mean,gcn (default: both)");
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
  sub->add_option("--json", a->json, "write the figures (times, memory, balance) to this file");
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
    DSP_CHECK_ARG(a->preaggregate || a->preaggregate_kinds.empty(),
                  "--preaggregate-kinds needs --preaggregate");
    if (a->preaggregate) {
      a->o.preaggregate =
          split_list(a->preaggregate_kinds.empty() ? "mean,gcn" : a->preaggregate_kinds);
    }
    DSP_CHECK_ARG(!(a->cache_ratio >= 0 && a->cache_bytes >= 0),
                  "give --cache-ratio or --cache-bytes, not both");
    a->o.bfs_blocks.balance_entries = a->o.balance_entries;
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
    check_partition_method(a->o);  // before loading the dataset, as partition_dataset does
    check_partition_out(a->dataset, a->out);
    if (plan_memory(a->dataset, a->o, a->memory_budget, a->dry_run)) return;
    Stopwatch sw;
    Dataset ds = load_dataset(a->dataset);
    DSP_INFO("partition", "{:<28} {:7.2f} s   peak RSS {:.2f} GiB", "load + validate", sw.seconds(),
             peak_rss_bytes() / 1073741824.0);
    PartitionMeta m = partition_dataset(ds, a->o, a->out);
    nlohmann::json j = report(a->out, m);
    fmt::print("  total {:.2f} s, peak RSS {:.2f} GiB\n", sw.seconds(),
               peak_rss_bytes() / 1073741824.0);
    if (!a->json.empty()) {
      j["bench"] = "partition";
      j["path"] = a->dataset;
      j["seconds"] = sw.seconds();
      j["peak_rss_bytes"] = peak_rss_bytes();
      j["partition"] = m.to_json();
      write_file_atomic(a->json, j.dump(2) + "\n");
    }
  });
}
}  // namespace dsp::cli
