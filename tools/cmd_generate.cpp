// `dsp generate rmat|community|hetero OUT`: synthetic datasets, written atomically as a dataset
// directory. The options are declared once in graph/commands.hpp (shared with Python).
#include <cstdio>
#include <memory>
#include <string>

#include "commands.hpp"
#include "core/dtype.hpp"
#include "core/memory.hpp"
#include "core/timer.hpp"
#include "graph/commands.hpp"

namespace dsp::cli {
namespace {

void report(const GenerateResult& r, const GenerateRun& c, const char* kind) {
  const DatasetMeta& m = r.meta;
  const int64_t max_deg = r.max_in_degree;
  const double mean_deg = static_cast<double>(m.num_edges) / static_cast<double>(m.num_nodes);
  std::string edges =
      m.directed ? fmt::format("{} edges", m.num_edges)
                 : fmt::format("{} undirected edges ({} stored)", m.num_edges / 2, m.num_edges);
  std::printf("%s graph '%s': %lld nodes, %s from %lld drawn\n", kind, m.name.c_str(),
              static_cast<long long>(m.num_nodes), edges.c_str(),
              static_cast<long long>(m.extra.value("requested_edges", int64_t{0})));
  std::printf("  in-degree mean %.1f, max %lld\n", mean_deg, static_cast<long long>(max_deg));
  if (m.extra.contains("measured_intra_fraction")) {
    const std::string bound =
        m.extra.contains("accuracy_bound")
            ? fmt::format(", accuracy bound {:.3f}", m.extra["accuracy_bound"].get<double>())
            : "";
    std::printf("  %lld communities, %.1f%% of edges inside one%s\n",
                static_cast<long long>(m.extra.value("num_communities", int64_t{0})),
                100.0 * m.extra.value("measured_intra_fraction", 0.0), bound.c_str());
  }
  if (m.extra.value("temporal", false)) {
    std::printf(
        "  temporal: accuracy bound %.3f sampling edges before a node's time, %.3f sampling all "
        "edges; %.1f%% of past edges from the label community, %.1f%% of nodes without one\n",
        m.extra.value("accuracy_bound", 0.0), m.extra.value("accuracy_bound_untimed", 0.0),
        100.0 * m.extra.value("measured_past_intra_fraction", 0.0),
        100.0 * m.extra.value("nodes_without_past_edges", 0.0));
  }
  if (m.num_link_train > 0) {
    std::printf("  links train/valid/test %lld/%lld/%lld, negatives %lld/%lld, Hits@K bound %.3f\n",
                static_cast<long long>(m.num_link_train), static_cast<long long>(m.num_link_valid),
                static_cast<long long>(m.num_link_test),
                static_cast<long long>(m.num_link_valid_neg),
                static_cast<long long>(m.num_link_test_neg), m.extra.value("link_hits_bound", 0.0));
  }
  std::printf("  features %lld x %s, %lld %s, train/valid/test %lld/%lld/%lld\n",
              static_cast<long long>(m.feature_dim), dtype_name(m.feature_dtype),
              static_cast<long long>(m.num_classes),
              m.multilabel ? "labels per node (multi-label)" : "classes",
              static_cast<long long>(m.num_train), static_cast<long long>(m.num_valid),
              static_cast<long long>(m.num_test));
  const double rss_mib = static_cast<double>(peak_rss_bytes()) / (1024.0 * 1024.0);
  if (r.out_of_core) {
    std::printf(
        "  generated out of core in %.2f s (%d sorted runs, %s spilled), peak RSS %.0f "
        "MiB -> %s\n",
        r.generate_s, r.sort_runs, format_bytes(r.spilled_bytes).c_str(), rss_mib, c.out.c_str());
  } else {
    std::printf("  generated in %.2f s, written in %.2f s, peak RSS %.0f MiB -> %s\n", r.generate_s,
                r.write_s, rss_mib, c.out.c_str());
  }
}

void report(const HeteroGenerateResult& r, const GenerateRun& c, const char* kind) {
  const HeteroSchema& s = r.schema;
  std::printf("%s graph '%s': %lld nodes of %d types, %d relations\n", kind, r.name.c_str(),
              static_cast<long long>(s.num_nodes()), s.num_types(), s.num_relations());
  for (const NodeTypeInfo& t : s.node_types) {
    std::printf("  %-16s %lld nodes", t.name.c_str(), static_cast<long long>(t.count));
    if (t.feature_dim > 0) std::printf(", features %lld", static_cast<long long>(t.feature_dim));
    std::printf("\n");
  }
  for (const RelationInfo& rel : s.relations) {
    std::printf("  %-44s %lld edges\n", rel.key().c_str(), static_cast<long long>(rel.edges));
  }
  std::printf("  %lld classes on %s, train/valid/test %lld/%lld/%lld, accuracy bound %.3f",
              static_cast<long long>(s.num_classes), s.target_type.c_str(),
              static_cast<long long>(r.num_train), static_cast<long long>(r.num_valid),
              static_cast<long long>(r.num_test), r.extra.value("accuracy_bound", 0.0));
  if (r.extra.contains("feature_only_accuracy")) {
    std::printf(" (features alone %.3f)", r.extra["feature_only_accuracy"].get<double>());
  }
  if (!s.link_relation.empty()) {
    std::printf("\n  links on %s: train/valid/test %lld/%lld/%lld, Hits@K bound %.3f",
                s.link_relation.c_str(), static_cast<long long>(r.num_link_train),
                static_cast<long long>(r.num_link_valid), static_cast<long long>(r.num_link_test),
                r.extra.value("link_hits_bound", 0.0));
  }
  const double rss_mib = static_cast<double>(peak_rss_bytes()) / (1024.0 * 1024.0);
  std::printf("\n  generated in %.2f s, written in %.2f s, peak RSS %.0f MiB -> %s\n", r.generate_s,
              r.write_s, rss_mib, c.out.c_str());
}

// One generator's subcommand: OUT and the command's table; the run and its report.
template <class C>
void add_generator(CLI::App* gen, const char* name, const char* help, const OptionTable<C>& table,
                   const char* kind) {
  struct Args {
    C cmd;
    std::unique_ptr<TableFlags<C>> flags;
  };
  auto a = std::make_shared<Args>();
  auto* sub = gen->add_subcommand(name, help);
  sub->add_option("out", a->cmd.run.out, "output dataset directory")->required();
  a->flags = std::make_unique<TableFlags<C>>(sub, table);
  sub->callback([a, kind] {
    a->flags->apply(a->cmd);
    report(run_generate(a->cmd), a->cmd.run, kind);
  });
}

}  // namespace

void add_generate(CLI::App& app) {
  auto* gen = app.add_subcommand(
      "generate", "generate a synthetic dataset (deterministic given --seed, any thread count)");
  gen->require_subcommand(1);
  // R-MAT: a performance workload, with defaults that make it trainable (random labels).
  add_generator(gen, "rmat",
                "R-MAT graph (Graph500 a=.57 b=.19 c=.19): skewed degrees, random features and "
                "labels, no locality; for performance, not accuracy",
                rmat_options(), "R-MAT");
  // Community graph: the default dataset of the demo and the benchmarks.
  add_generator(gen, "community",
                "degree-corrected stochastic block model: power-law degrees, most edges inside "
                "communities, features and labels that follow the community (learnable, "
                "partitionable)",
                community_options(), "community");
  // Heterogeneous graph shaped like OGB-MAG.
  add_generator(gen, "hetero",
                "heterogeneous graph shaped like ogbn-mag: papers (features, labels), authors, "
                "institutions and fields joined by writes, cites, has_topic and affiliated_with "
                "(and their reverses), with planted communities the labels follow",
                hetero_options(), "hetero");
}

}  // namespace dsp::cli
