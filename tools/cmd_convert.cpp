// `dsp convert`: text datasets (OGB raw CSV, edge lists) -> a dataset directory. The options are
// declared once in graph/commands.hpp (shared with Python).
#include <fmt/format.h>

#include <memory>
#include <string>

#include "commands.hpp"
#include "core/memory.hpp"
#include "core/timer.hpp"
#include "graph/commands.hpp"
#include "graph/hetero.hpp"

namespace dsp::cli {
namespace {

void convert_and_report(const ConvertCommand& a) {
  ImportStats st;
  Stopwatch total;
  double write_s = 0;
  const DatasetMeta m = run_convert(a, &st, &write_s);
  if (m.extra.contains("hetero")) {
    const HeteroSchema s = HeteroSchema::from_json(m.extra["hetero"], a.output);
    fmt::print("{}: {} nodes of {} types, {} edge entries in {} relations ({} input edges)\n",
               m.name, m.num_nodes, s.num_types(), m.num_edges, s.num_relations(), st.input_edges);
    for (const NodeTypeInfo& t : s.node_types) {
      fmt::print("  {:<16} {} nodes{}\n", t.name, t.count,
                 t.feature_dim > 0 ? fmt::format(", features {}", t.feature_dim) : "");
    }
    for (const RelationInfo& r : s.relations) fmt::print("  {:<44} {} edges\n", r.key(), r.edges);
    if (m.num_classes > 0) fmt::print("target: {}\n", s.target_type);
  } else {
    fmt::print("{}: {} nodes, {} edge entries ({} input edges, {}), index {}\n", m.name,
               m.num_nodes, m.num_edges, st.input_edges, m.directed ? "directed" : "undirected",
               dtype_name(m.index_dtype));
  }
  if (m.feature_dim > 0)
    fmt::print("features: {} x {} {}\n", m.num_nodes, m.feature_dim, dtype_name(m.feature_dtype));
  if (m.num_classes > 0) fmt::print("classes: {}\n", m.num_classes);
  if (m.num_train + m.num_valid + m.num_test > 0) {
    fmt::print("split: train {} / valid {} / test {}\n", m.num_train, m.num_valid, m.num_test);
  }
  if (m.num_link_train > 0) {
    fmt::print("links: train {} / valid {} / test {}, negatives {} / {}\n", m.num_link_train,
               m.num_link_valid, m.num_link_test, m.num_link_valid_neg, m.num_link_test_neg);
  }
  if (st.sort_runs >= 0) fmt::print("out of core: {} sorted runs\n", st.sort_runs);
  fmt::print("time: parse {:.2f} s, build CSR {:.2f} s, write {:.2f} s, total {:.2f} s\n",
             st.parse_s, st.build_s, write_s, total.seconds());
  fmt::print("peak RSS: {:.1f} MiB\n", static_cast<double>(peak_rss_bytes()) / (1 << 20));
  fmt::print("wrote {}\n", a.output);
}

}  // namespace

void add_convert(CLI::App& app) {
  struct Args {
    ConvertCommand cmd;
    std::unique_ptr<TableFlags<ConvertCommand>> flags;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "convert",
      "Convert an OGB raw directory (node, link or heterogeneous) or a text edge list into a "
      "dataset directory (dataset.json + .npy arrays)");
  a->flags = std::make_unique<TableFlags<ConvertCommand>>(sub, convert_options());
  a->flags->option("--from")->required();
  sub->add_option("input", a->cmd.input,
                  "ogb: the dataset folder (holding raw/) or raw/ itself; edgelist: a text file "
                  "(optionally .gz) of 'src dst [weight]' lines")
      ->required();
  sub->add_option("output", a->cmd.output, "dataset directory to write")->required();
  sub->callback([a] {
    a->flags->apply(a->cmd);
    convert_and_report(a->cmd);
  });
}

}  // namespace dsp::cli
