// `dsp info`: summary and degree statistics of a dataset directory, or the layout of a partition
// directory.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/memory.hpp"
#include "graph/dataset.hpp"
#include "graph/hetero.hpp"
#include "layout/partition/partition.hpp"
#include "layout/partition/partition_plan.hpp"
#include "layout/partition/partition_dir.hpp"

namespace dsp::cli {
namespace {

struct InfoArgs {
  std::string dir;
  bool json = false, no_validate = false;
};

struct DegreeStats {
  int64_t min = 0, max = 0, zero = 0;
  double mean = 0, median = 0;
};

DegreeStats in_degree_stats(const Csr& g) {
  DegreeStats s;
  const int64_t n = g.num_nodes;
  if (n == 0) return s;
  const int64_t* p = g.rowptr();
  std::vector<int64_t> deg(static_cast<size_t>(n));
  for (int64_t v = 0; v < n; ++v) deg[v] = p[v + 1] - p[v];
  s.min = *std::min_element(deg.begin(), deg.end());
  s.max = *std::max_element(deg.begin(), deg.end());
  s.zero = std::count(deg.begin(), deg.end(), 0);
  s.mean = static_cast<double>(p[n]) / static_cast<double>(n);
  auto mid = deg.begin() + n / 2;
  std::nth_element(deg.begin(), mid, deg.end());
  s.median = static_cast<double>(*mid);
  if (n % 2 == 0) {
    s.median = (s.median + static_cast<double>(*std::max_element(deg.begin(), mid))) / 2;
  }
  return s;
}

// Peak memory of `dsp partition -p 2` by each method (the estimate `dsp partition --dry-run`
// prints for any options).
std::pair<uint64_t, uint64_t> partition_estimates(const DatasetMeta& m) {
  PartitionOptions o;
  o.parts = 2;
  o.method = PartitionMethod::kMetis;
  const uint64_t metis = estimate_partition_memory(m, o);
  o.method = PartitionMethod::kRandom;
  return {metis, estimate_partition_memory(m, o)};
}

// A partition directory (dsp partition): what it was made from and how the parts came out.
void run_partition_info(const InfoArgs& a) {
  const PartitionMeta m = load_partition_meta(a.dir);
  if (a.json) {
    nlohmann::json j = m.to_json();
    j["dir"] = a.dir;
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("partition    {} (of dataset '{}')\n", a.dir, m.dataset_name);
  fmt::print("parts        {} by {}, edge cut {} of {} entries ({:.1f}%)\n", m.parts, m.method,
             m.edge_cut, m.num_edges,
             m.num_edges ? 100.0 * static_cast<double>(m.edge_cut) / m.num_edges : 0.0);
  fmt::print("nodes        {}, features {} x {}, {}\n", m.num_nodes, m.feature_dim,
             dtype_name(m.feature_dtype),
             m.multilabel ? fmt::format("labels: multi-label, {} columns", m.num_classes)
                          : fmt::format("{} classes", m.num_classes));
  fmt::print("cache        {} policy, {}\n", m.cache_policy,
             m.cache_bytes >= 0 ? fmt::format("{} per part", format_bytes(m.cache_bytes))
                                : fmt::format("{:g} of each part's nodes", m.cache_ratio));
  if (m.hops > 0) fmt::print("replication  {} hops (pagraph), halo cap {}\n", m.hops, m.halo_cap);
  const HeteroLayout* h = m.hetero.get();
  if (h) {
    fmt::print("types        {} node types, {} relations, target {}\n", h->num_types(),
               h->num_relations(), h->schema.target_type);
  }
  for (int p = 0; p < m.parts; ++p) {
    const PartStats& s = m.part[p];
    fmt::print("part {:<7} nodes [{}, {}), {} entries, {} training seeds, {} cached\n", p, s.begin,
               s.end, s.edges, s.seeds, s.cached);
    for (int t = 0; h && t < h->num_types(); ++t) {
      const size_t k = static_cast<size_t>(p) * h->num_types() + t;
      fmt::print("  {:<15} [{}, {})\n", h->schema.node_types[t].name, h->bounds[k],
                 h->bounds[k + 1]);
    }
  }
  fmt::print("train with   mpirun -np {} dsp train {}\n", m.parts, a.dir);
}

// A heterogeneous dataset directory: its node types and relations (validated as loaded).
void run_hetero_info(const InfoArgs& a) {
  LoadOptions lo;
  lo.validate = !a.no_validate;
  const HeteroDataset ds = load_hetero_dataset(a.dir, lo);
  const HeteroSchema& s = ds.schema;
  if (a.json) {
    nlohmann::json j = s.to_json();
    j["dir"] = a.dir;
    j["name"] = ds.name;
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("dataset      {} (heterogeneous)\n", a.dir);
  fmt::print("name         {}\n", ds.name);
  for (const NodeTypeInfo& t : s.node_types) {
    fmt::print("node type    {:<20} {:>12} nodes, {}\n", t.name, t.count,
               t.feature_dim
                   ? fmt::format("{} x {} features", t.feature_dim, dtype_name(t.feature_dtype))
                   : std::string("no features"));
  }
  for (const RelationInfo& r : s.relations) {
    fmt::print("relation     {:<44} {:>12} edges\n", r.key(), r.edges);
  }
  fmt::print("target       {}, {} classes, train {} / valid {} / test {}\n", s.target_type,
             s.num_classes, ds.train_idx.defined() ? ds.train_idx.dim(0) : 0,
             ds.valid_idx.defined() ? ds.valid_idx.dim(0) : 0,
             ds.test_idx.defined() ? ds.test_idx.dim(0) : 0);
}

void run_info(const InfoArgs& a) {
  if (is_partition_dir(a.dir)) return run_partition_info(a);
  if (is_hetero_dataset(a.dir)) return run_hetero_info(a);
  LoadOptions lo;
  lo.validate = !a.no_validate;
  Dataset ds = load_dataset(a.dir, lo);
  const DatasetMeta& m = ds.meta;
  DegreeStats d = in_degree_stats(ds.graph);
  const auto [metis_bytes, random_bytes] = partition_estimates(m);
  if (a.json) {
    nlohmann::json j = m.to_json();
    j["dir"] = a.dir;
    j["in_degree"] = {{"min", d.min},
                      {"mean", d.mean},
                      {"median", d.median},
                      {"max", d.max},
                      {"zero_degree_nodes", d.zero}};
    j["memory_estimate"] = {{"partition_2_metis", metis_bytes},
                            {"partition_2_random", random_bytes}};
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("dataset      {}\n", a.dir);
  fmt::print("name         {}\n", m.name);
  fmt::print("nodes        {}\n", m.num_nodes);
  fmt::print("edges        {} ({})\n", m.num_edges,
             m.directed ? "directed" : "undirected, each edge stored both ways");
  fmt::print("index dtype  {}\n", dtype_name(m.index_dtype));
  fmt::print("weights      {}\n", m.has_weights ? "yes" : "no");
  fmt::print("in-degree    min {} / mean {:.2f} / median {:g} / max {}, {} nodes with none\n",
             d.min, d.mean, d.median, d.max, d.zero);
  if (m.feature_dim > 0) {
    fmt::print("features     {} x {} {}\n", m.num_nodes, m.feature_dim,
               dtype_name(m.feature_dtype));
  } else {
    fmt::print("features     none\n");
  }
  if (m.multilabel) {
    fmt::print("labels       multi-label, {} columns\n", m.num_classes);
  } else {
    fmt::print("classes      {}\n", m.num_classes);
  }
  fmt::print("split        train {} / valid {} / test {}\n", m.num_train, m.num_valid, m.num_test);
  if (m.num_link_train + m.num_link_valid + m.num_link_test > 0) {
    fmt::print(
        "link split   train {} / valid {} / test {} edges, negatives valid {} / test {}{}\n",
        m.num_link_train, m.num_link_valid, m.num_link_test, m.num_link_valid_neg,
        m.num_link_test_neg,
        m.link_held_out_in_graph ? " (held-out edges may repeat graph edges, as OGB's)" : "");
  }
  fmt::print(
      "memory       dsp partition -p 2 needs about {} (metis) or {} (random) beyond the "
      "process itself; {} available\n",
      format_bytes(metis_bytes), format_bytes(random_bytes), format_bytes(available_memory()));
}

}  // namespace

void add_info(CLI::App& app) {
  auto args = std::make_shared<InfoArgs>();
  auto* sub = app.add_subcommand("info",
                                 "Print the size, degree statistics, features, classes "
                                 "and split of a dataset directory (validates it), or the "
                                 "parts of a partition directory");
  sub->add_option("dir", args->dir, "dataset or partition directory")->required();
  sub->add_flag("--json", args->json, "print machine-readable JSON");
  sub->add_flag("--no-validate", args->no_validate,
                "skip the O(E) structural validation (metadata and shapes are still checked)");
  sub->callback([args] { run_info(*args); });
}

}  // namespace dsp::cli
