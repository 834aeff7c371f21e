// `dsp convert`: text datasets (OGB raw CSV, edge lists) -> a dataset directory.
#include <fmt/format.h>

#include <memory>
#include <string>

#include "commands.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/memory.hpp"
#include "core/timer.hpp"
#include "graph/dataset.hpp"
#include "graph/import.hpp"

namespace dsp::cli {
namespace {

struct ConvertArgs {
  std::string from, input, output, name, split, memory_budget, sort_buffer;
  bool undirected = false, directed = false, overwrite = false, no_self_loops = false,
       no_split = false, out_of_core = false;
  int64_t num_nodes = -1;
};

OutOfCoreImportOptions out_of_core_options(const ConvertArgs& a, uint64_t budget) {
  OutOfCoreImportOptions w;
  w.memory_budget = budget;
  w.sort_buffer_bytes = a.sort_buffer.empty() ? 0 : parse_bytes("--sort-buffer", a.sort_buffer);
  w.overwrite = a.overwrite;
  return w;
}

// Converts in memory, or out of core when the in-memory estimate exceeds what the budget leaves
// or --out-of-core is given; refuses with one line when neither fits.
DatasetMeta convert(const ConvertArgs& a, ImportStats& st, double& write_s) {
  const uint64_t budget = a.memory_budget.empty() ? default_memory_budget()
                                                  : parse_bytes("--memory-budget", a.memory_budget);
  Dataset ds;
  DSP_CHECK_ARG(!path_within(a.input, a.output),
                "output {} is the input {} or contains it: writing there would destroy the input; "
                "choose another output",
                a.output, a.input);
  if (a.from == "ogb") {
    DSP_CHECK_ARG(a.num_nodes < 0, "--num-nodes applies to --from edgelist only");
    OgbImportOptions o;
    DSP_CHECK_ARG(!(a.no_split && !a.split.empty()), "give --split or --no-split, not both");
    o.split = a.split;
    o.require_split = !a.no_split;
    o.name = a.name;
    o.undirected = !a.directed;
    if (a.out_of_core || estimate_ogb_memory(a.input) > memory_left(budget)) {
      check_memory("dsp convert (out of core)", ogb_out_of_core_bytes(a.input), budget,
                   "raise --memory-budget");
      return import_ogb_to_dir(a.input, o, a.output, out_of_core_options(a, budget), &st);
    }
    ds = import_ogb_raw(a.input, o, &st);
  } else if (a.from == "edgelist") {
    DSP_CHECK_ARG(a.split.empty() && !a.no_split, "--split/--no-split apply to --from ogb only");
    DSP_CHECK_ARG(!a.directed, "edge lists are directed unless --undirected is given");
    EdgeListOptions o;
    o.num_nodes = a.num_nodes;
    o.undirected = a.undirected;
    o.remove_self_loops = a.no_self_loops;
    if (a.out_of_core ||
        estimate_edge_list_memory(sample_edge_list(a.input), o) > memory_left(budget)) {
      check_memory("dsp convert (out of core)", edge_list_out_of_core_bytes(), budget,
                   "raise --memory-budget");
      return import_edge_list_to_dir(a.input, o, a.name, a.output, out_of_core_options(a, budget),
                                     &st);
    }
    ds = import_edge_list(a.input, o, a.name, &st);
  } else {
    DSP_THROW_T(InvalidArgument, "--from must be 'ogb' or 'edgelist', got '{}'", a.from);
  }
  Stopwatch sw;
  write_dataset(ds, a.output, a.overwrite);
  write_s = sw.seconds();
  return ds.meta;
}

void run_convert(const ConvertArgs& a) {
  ImportStats st;
  Stopwatch total;
  double write_s = 0;
  const DatasetMeta m = convert(a, st, write_s);
  fmt::print("{}: {} nodes, {} edge entries ({} input edges, {}), index {}\n", m.name, m.num_nodes,
             m.num_edges, st.input_edges, m.directed ? "directed" : "undirected",
             dtype_name(m.index_dtype));
  if (m.feature_dim > 0)
    fmt::print("features: {} x {} {}\n", m.num_nodes, m.feature_dim, dtype_name(m.feature_dtype));
  if (m.num_classes > 0) fmt::print("classes: {}\n", m.num_classes);
  if (m.num_train + m.num_valid + m.num_test > 0) {
    fmt::print("split: train {} / valid {} / test {}\n", m.num_train, m.num_valid, m.num_test);
  }
  if (st.sort_runs >= 0) fmt::print("out of core: {} sorted runs\n", st.sort_runs);
  fmt::print("time: parse {:.2f} s, build CSR {:.2f} s, write {:.2f} s, total {:.2f} s\n",
             st.parse_s, st.build_s, write_s, total.seconds());
  fmt::print("peak RSS: {:.1f} MiB\n", static_cast<double>(peak_rss_bytes()) / (1 << 20));
  fmt::print("wrote {}\n", a.output);
}

}  // namespace

void add_convert(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  auto* sub = app.add_subcommand(
      "convert",
      "Convert an OGB raw directory or a text edge list into a dataset directory (dataset.json + "
      ".npy arrays)");
  sub->add_option("--from", args->from, "input format: ogb | edgelist")
      ->required()
      ->check(CLI::IsMember({"ogb", "edgelist"}));
  sub->add_option("input", args->input,
                  "ogb: the dataset folder (holding raw/) or raw/ itself; edgelist: a text file "
                  "(optionally .gz) of 'src dst [weight]' lines")
      ->required();
  sub->add_option("output", args->output, "dataset directory to write")->required();
  sub->add_option("--name", args->name, "dataset name (default: the input's name)");
  sub->add_option("--split", args->split,
                  "ogb: split folder under raw/split (default: the only or first one)");
  sub->add_flag("--no-split", args->no_split,
                "ogb: import a directory without raw/split (the dataset then has no train, valid "
                "or test ids, and dsp train refuses it)");
  sub->add_flag("--undirected", args->undirected,
                "edgelist: each line is an undirected edge (store both directions)");
  sub->add_flag("--directed", args->directed,
                "ogb: keep edges one-directional (default: symmetrize, as OGB intends)");
  sub->add_option("--num-nodes", args->num_nodes,
                  "edgelist: number of nodes (default: largest id + 1); larger ids are errors");
  sub->add_flag("--no-self-loops", args->no_self_loops, "edgelist: drop u -> u edges");
  sub->add_flag("--overwrite", args->overwrite, "replace an existing output directory");
  sub->add_option("--memory-budget", args->memory_budget,
                  "memory the command may use, e.g. 12G (default: 3/4 of what is available); an "
                  "input whose in-memory estimate exceeds it converts out of core");
  sub->add_flag("--out-of-core", args->out_of_core,
                "sort the edges on disk (runs in the output's staging directory) and stream the "
                "features even if they fit in memory");
  sub->add_option("--sort-buffer", args->sort_buffer,
                  "out of core: cap on the sort buffer, e.g. 256M (default: what the budget "
                  "leaves)");
  sub->callback([args] { run_convert(*args); });
}

}  // namespace dsp::cli
