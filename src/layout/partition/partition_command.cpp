#include "layout/partition/partition_command.hpp"

#include "graph/hetero.hpp"

#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/lists.hpp"
#include "core/logging.hpp"
#include "core/memory.hpp"
#include "core/timer.hpp"
#include "graph/dataset.hpp"
#include "layout/partition/partition_disk.hpp"
#include "layout/partition/partition_plan.hpp"

namespace dsp {
namespace {
using json = nlohmann::json;
using Cmd = PartitionCommand;
using options::declare;

template <class Get>
Option<Cmd> value(std::string flag, std::string key, std::string help, Get get,
                  const std::string& choices = "") {
  return options::value<Cmd>(std::move(flag), std::move(key), std::move(help), get, choices);
}

template <class Get>
Option<Cmd> toggle(std::string flag, std::string key, std::string help, Get get) {
  return options::toggle<Cmd>(std::move(flag), std::move(key), std::move(help), get);
}

// clang-format off
#define DSP_FIELD(member) [](Cmd& c) -> auto& { return c.member; }
// clang-format on

Option<Cmd> no_entry_balance_option() {
  Option<Cmd> o = toggle("--no-entry-balance", "no_entry_balance",
                         "metis, bfs-blocks: balance nodes and seeds only, not adjacency entries",
                         DSP_FIELD(o.balance_entries));
  o.parse = [](Cmd& c, const std::string&) { c.o.balance_entries = false; };
  o.read = [](Cmd& c, const json& v) { c.o.balance_entries = !v.get<bool>(); };
  o.write = [](const Cmd& c) { return json(!c.o.balance_entries); };
  return o;
}

std::vector<Option<Cmd>> method_options() {
  return {
      value("--parts", "parts", "number of parts (= ranks of the training job; default 1)",
            DSP_FIELD(o.parts)),
      value("--method", "method",
            "metis (default), random, bfs-blocks (BGL: for graphs beyond METIS) or pagraph "
            "(self-reliant parts: each replicates its seeds' L-hop neighbourhood)",
            DSP_FIELD(o.method)),
      no_entry_balance_option(),
      value("--hops", "hops",
            "pagraph: layers L of the model (fanouts) whose neighbourhood is replicated "
            "(default 2)",
            DSP_FIELD(o.pagraph.hops)),
      value("--halo-cap", "halo_cap",
            "pagraph: in-neighbours kept per replicated row (default 0: all)",
            DSP_FIELD(o.pagraph.halo_cap)),
      value("--block-size", "block_size",
            "bfs-blocks: nodes at which a BFS block stops growing (default N / (256 parts), at "
            "least 256)",
            DSP_FIELD(o.bfs_blocks.block_size)),
      value("--block-hops", "block_hops",
            "bfs-blocks: hops of block neighbours the assignment counts (default 2)",
            DSP_FIELD(o.bfs_blocks.hops)),
      toggle("--preaggregate", "preaggregate",
             "PaGraph's first-layer pre-aggregation: also store [x_v | a_v] per node, a_v "
             "aggregated over v's whole in-neighbourhood (mean for GraphSAGE, the normalised sum "
             "for GCN), so that dsp train --preaggregate samples one hop fewer",
             DSP_FIELD(preaggregate)),
      value("--preaggregate-kinds", "preaggregate_kinds",
            "with --preaggregate: the kinds to write, mean, gcn or mean,gcn (default: both)",
            DSP_FIELD(preaggregate_kinds)),
      value("--feature-dtype", "feature_dtype",
            "storage of features.npy: keep (default: the dataset's dtype, bytes as they are), "
            "float32, float16 or bfloat16 (rounded to nearest even), or int8 (symmetric, a "
            "float32 scale per column or row: see --feature-scale). Caches and rows exchanged "
            "between ranks keep this dtype; the gather decodes to float32. Prints the error",
            DSP_FIELD(o.feature_dtype)),
      value("--feature-scale", "feature_scale",
            "with --feature-dtype int8: column (auto, the default: one scale per feature column) "
            "or row (one per node); scale = max |x| / 127, q = round(x / scale), in "
            "feature_scale.npy",
            DSP_FIELD(o.feature_scale)),
      value("--feature-storage", "feature_storage",
            "copy (default: features.npy holds the renumbered rows) or reference (no copy: the "
            "ranks read the dataset's features.npy through new2old.npy, so the dataset must stay "
            "where it is; --feature-dtype keep, homogeneous graphs)",
            DSP_FIELD(o.feature_storage)),
      value("--seed", "seed", "random seed (METIS, random method and policy)", DSP_FIELD(o.seed)),
      value("--seed-imbalance", "seed_imbalance",
            "allowed excess of training seeds per part over the mean (default 0.05)",
            DSP_FIELD(o.seed_imbalance)),
  };
}

std::vector<Option<Cmd>> cache_and_run_options() {
  return {
      value("--cache-policy", "cache_policy",
            "in-degree (default), out-degree, presample, random, none", DSP_FIELD(o.cache_policy)),
      value("--cache-ratio", "cache_ratio",
            "share of each part's nodes whose features it caches, in [0, 1] (default 0.1)",
            DSP_FIELD(cache_ratio)),
      value("--cache-bytes", "cache_bytes", "per-rank cache budget in bytes (instead of a ratio)",
            DSP_FIELD(o.cache_bytes)),
      value("--presample-epochs", "presample_epochs",
            "cache policy presample: sampling-only epochs K (default 1)",
            DSP_FIELD(presample_epochs)),
      value("--fanouts", "fanouts",
            "cache policy presample: fanouts from the seeds out (default 15,10,5)",
            DSP_FIELD(presample_fanouts)),
      value("--batch-size", "batch_size", "cache policy presample: seeds per batch (default 1024)",
            DSP_FIELD(presample_batch_size)),
      toggle("--overwrite", "overwrite", "replace OUT if it exists", DSP_FIELD(o.overwrite)),
      value("--json", "json", "write the figures (times, memory, balance) to this file",
            DSP_FIELD(json)),
      value("--memory-budget", "memory_budget",
            "memory the command may use, e.g. 12G (default: 3/4 of what is available); refuses "
            "before loading when the estimate exceeds it",
            DSP_FIELD(memory_budget)),
      toggle("--dry-run", "dry_run",
             "print the memory estimate against the budget and exit without partitioning",
             DSP_FIELD(dry_run)),
      toggle("--quiet", "quiet", "no progress lines per phase", DSP_FIELD(quiet)),
  };
}
#undef DSP_FIELD

std::vector<Option<Cmd>> all_options() {
  std::vector<Option<Cmd>> v = method_options();
  for (auto& o : cache_and_run_options()) v.push_back(std::move(o));
  return v;
}

Dataset load_source(const std::string& dir) {
  return is_hetero_dataset(dir) ? hetero_union(load_hetero_dataset(dir)) : load_dataset(dir);
}

PartitionPlan plan_memory(const PartitionCommand& cmd) {
  const DatasetMeta meta = partition_source_meta(cmd.dataset);
  PartitionPlan p;
  p.budget = cmd.memory_budget.empty() ? default_memory_budget()
                                       : parse_bytes("--memory-budget", cmd.memory_budget);
  p.need = estimate_partition_memory(meta, cmd.o) + process_rss_bytes();
  p.available = available_memory();
  if (!cmd.dry_run) {
    check_memory("dsp partition", p.need - process_rss_bytes(), p.budget,
                 partition_memory_hint(meta, cmd.o));
  }
  return p;
}

}  // namespace

const OptionTable<PartitionCommand>& partition_options() {
  static const OptionTable<PartitionCommand> table = [] {
    OptionTable<PartitionCommand> t = all_options();
    t.front().short_flag = "-p";  // --parts
    return t;
  }();
  return table;
}

void PartitionCommand::validate() {
  DSP_CHECK_ARG(!dataset.empty() && !out.empty(),
                "give a dataset directory and an output directory");
  DSP_CHECK_ARG(preaggregate || preaggregate_kinds.empty(),
                "--preaggregate-kinds needs --preaggregate");
  o.preaggregate.clear();
  if (preaggregate) {
    o.preaggregate = preaggregate_kinds;
    if (o.preaggregate.empty()) o.preaggregate = {Preaggregation::kMean, Preaggregation::kGcn};
  }
  DSP_CHECK_ARG(!(cache_ratio != -1 && o.cache_bytes >= 0),
                "give --cache-ratio or --cache-bytes, not both");
  if (cache_ratio != -1) o.cache_ratio = cache_ratio;
  DSP_CHECK_ARG(o.cache_ratio >= 0.0 && o.cache_ratio <= 1.0,
                "--cache-ratio must be in [0, 1], got {}", o.cache_ratio);
  o.bfs_blocks.balance_entries = o.balance_entries;
  o.verbose = !quiet;
  check_partition_method(o);  // before loading the dataset, as partition_dataset does
  partition_feature_dtype(o, DType::kFloat32);
  check_partition_out(dataset, out);
}

std::string PartitionPlan::describe(const PartitionCommand& cmd) const {
  const DatasetMeta meta = partition_source_meta(cmd.dataset);
  return fmt::format(
      "partition of {} ({} nodes, {} edge entries) into {} parts by {}: needs about {} of "
      "memory; budget {} ({} available){}",
      cmd.dataset, meta.num_nodes, meta.num_edges, cmd.o.parts, cmd.o.method, format_bytes(need),
      format_bytes(budget), format_bytes(available), fits() ? "" : ": it would be refused");
}

json PartitionPlan::to_json() const {
  return {{"need_bytes", need},
          {"budget_bytes", budget},
          {"available_bytes", available},
          {"fits", fits()}};
}

PartitionMeta run_partition(PartitionCommand& cmd,
                            const std::function<PresampleFn(const PartitionCommand&)>& presample,
                            PartitionPlan* plan) {
  cmd.validate();
  // Refused before any work (StagedDir checks again when it writes).
  DSP_CHECK_T(IoError, cmd.dry_run || cmd.o.overwrite || !path_exists(cmd.out),
              "{}: already exists (pass --overwrite to replace it)", cmd.out);
  if (static_cache_policy(cmd.o.cache_policy).presamples()) cmd.o.presample = presample(cmd);
  const PartitionPlan p = plan_memory(cmd);
  if (plan) *plan = p;
  if (cmd.dry_run) return {};
  check_partition_disk("dsp partition", partition_source_meta(cmd.dataset), cmd.o, cmd.out);
  Stopwatch sw;
  Dataset ds = load_source(cmd.dataset);
  DSP_INFO("partition", "{:<28} {:7.2f} s   peak RSS {:.2f} GiB", "load + validate", sw.seconds(),
           peak_rss_bytes() / 1073741824.0);
  PartitionMeta m = partition_dataset(ds, cmd.o, cmd.out);
  if (!cmd.json.empty()) {
    json j = partition_report(cmd.out, m, false);
    j["bench"] = "partition";
    j["path"] = cmd.dataset;
    j["seconds"] = sw.seconds();
    j["peak_rss_bytes"] = peak_rss_bytes();
    j["partition"] = m.to_json();
    write_file_atomic(cmd.json, j.dump(2) + "\n");
  }
  return m;
}

nlohmann::json partition_report(const std::string& out, const PartitionMeta& m, bool print) {
  auto say = [print](auto&&... args) {
    if (print) fmt::print(std::forward<decltype(args)>(args)...);
  };
  say("partition {}: {} parts of '{}' by {}, edge cut {} of {} entries ({:.1f}%)\n", out, m.parts,
      m.dataset_name, m.method, m.edge_cut, m.num_edges,
      m.num_edges ? 100.0 * m.edge_cut / m.num_edges : 0.0);
  const bool halo = m.hops > 0;
  say("  {:>4} {:>12} {:>12} {:>10} {:>10}", "part", "nodes", "entries", "seeds", "cached");
  if (halo) say(" {:>12} {:>12} {:>12}", "halo nodes", "halo entries", "L-hop reach");
  say("\n");
  int64_t max_nodes = 0, max_seeds = 0, tot_seeds = 0, max_entries = 0, tot_entries = 0;
  int64_t rows = 0, reach = 0;
  for (int p = 0; p < m.parts; ++p) {
    const auto& s = m.part[p];
    say("  {:>4} {:>12} {:>12} {:>10} {:>10}", p, s.end - s.begin, s.edges, s.seeds, s.cached);
    if (halo) say(" {:>12} {:>12} {:>12}", s.halo_nodes, s.halo_edges, s.reach);
    say("\n");
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
  say("  imbalance (max / mean): nodes {:.3f}, seeds {:.3f}, entries {:.3f}\n",
      j["imbalance"]["nodes"].get<double>(), j["imbalance"]["seeds"].get<double>(),
      j["imbalance"]["entries"].get<double>());
  if (!m.preaggregated.empty()) {
    j["preaggregated"] = m.preaggregated;
    say("  pre-aggregated first layer (PaGraph): {} (preaggregated_<kind>.npy, [{}, {}])\n",
        fmt::join(m.preaggregated, ", "), m.num_nodes, 2 * m.feature_dim);
  }
  if (m.feature_conversion.converted) {
    const FeatureConversion& c = m.feature_conversion;
    j["feature_conversion"] = {{"dtype", dtype_name(m.feature_dtype)},
                               {"source_dtype", dtype_name(c.source_dtype)},
                               {"scale", c.scale == StoredScale::kNone ? "" : name_of(c.scale)},
                               {"max_abs_error", c.max_abs_error},
                               {"rel_rms_error", c.rel_rms_error}};
    say("  {}\n", describe_feature_storage(m));
  }
  if (halo) {
    j["replication"] = {{"rows", double(rows) / m.num_nodes},
                        {"entries", m.num_edges ? double(tot_entries) / m.num_edges : 0.0},
                        {"reach", double(reach) / m.num_nodes}};
    say("  replication ({}-hop halo{}): rows {:.3f}x, entries {:.3f}x, L-hop reach {:.3f}x of "
        "the graph\n",
        m.hops, m.halo_cap > 0 ? fmt::format(", cap {}", m.halo_cap) : "",
        j["replication"]["rows"].get<double>(), j["replication"]["entries"].get<double>(),
        j["replication"]["reach"].get<double>());
  }
  return j;
}

}  // namespace dsp
