// `dsp generate rmat|community OUT`: synthetic datasets, written atomically as a dataset directory.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "commands.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/lists.hpp"
#include "core/fs.hpp"
#include "core/memory.hpp"
#include "core/timer.hpp"
#include "graph/dataset.hpp"
#include "graph/generate.hpp"

namespace dsp::cli {
namespace {

// Parses a count such as "2400000", "2.4M", "62m", "100k" or "1e6" (sizes are easier to type and
// read with a suffix). InvalidArgument on anything else.
int64_t parse_count(const std::string& flag, const std::string& text) {
  std::string s = text;
  double mult = 1;
  if (!s.empty()) {
    switch (s.back()) {
      case 'k':
      case 'K':
        mult = 1e3;
        break;
      case 'm':
      case 'M':
        mult = 1e6;
        break;
      case 'g':
      case 'G':
      case 'b':
      case 'B':
        mult = 1e9;
        break;
      default:
        break;
    }
    if (mult != 1) s.pop_back();
  }
  const std::optional<double> parsed = whole_double(s);
  const double v = parsed.value_or(0);
  DSP_CHECK_ARG(parsed && std::isfinite(v),
                "{}: expected a count such as 100000, 2.4M or 62m, got '{}'", flag, text);
  double r = std::round(v * mult);
  DSP_CHECK_ARG(std::fabs(r - v * mult) < 1e-6 * std::max(1.0, std::fabs(v * mult)),
                "{}: '{}' is not a whole number", flag, text);
  DSP_CHECK_ARG(std::fabs(r) < 9.2e18, "{}: '{}' is too large", flag, text);
  return static_cast<int64_t>(r);
}

// Flags shared by both generators; counts are strings so that they accept suffixes.
struct Common {
  std::string out;
  std::string nodes, edges;
  int64_t features = 0, classes = 0;
  std::string feature_dtype = "float32";
  double train_frac = 0.1, valid_frac = 0.05;
  uint64_t seed = 0;
  std::string name;
  bool overwrite = false;
  std::string memory_budget, sort_buffer;
  bool out_of_core = false;
};

void add_common(CLI::App* sub, Common& c, int64_t nodes, int64_t edges, const char* edges_help) {
  c.nodes = std::to_string(nodes);
  c.edges = std::to_string(edges);
  sub->add_option("out", c.out, "output dataset directory")->required();
  sub->add_option("--nodes,-n", c.nodes, "number of nodes (suffixes k, M, G allowed)")
      ->capture_default_str();
  sub->add_option("--edges,-m", c.edges, edges_help)->capture_default_str();
  sub->add_option("--features,-f", c.features, "feature dimension (0: no features)")
      ->capture_default_str();
  sub->add_option("--feature-dtype", c.feature_dtype, "float32 or float16")->capture_default_str();
  sub->add_option("--classes,-c", c.classes, "number of classes")->capture_default_str();
  sub->add_option("--train-frac", c.train_frac, "share of nodes in train_idx")
      ->capture_default_str();
  sub->add_option("--valid-frac", c.valid_frac, "share of nodes in valid_idx (the rest: test)")
      ->capture_default_str();
  sub->add_option("--seed,-s", c.seed, "random seed; the output is a pure function of it")
      ->check(non_negative_integer())
      ->capture_default_str();
  sub->add_option("--name", c.name, "dataset name recorded in dataset.json");
  sub->add_flag("--overwrite", c.overwrite, "replace an existing OUT");
  sub->add_option("--memory-budget", c.memory_budget,
                  "memory the command may use, e.g. 12G (default: 3/4 of what is available); "
                  "a graph whose in-memory estimate exceeds it is generated out of core");
  sub->add_flag("--out-of-core", c.out_of_core,
                "generate out of core (edges through an external sort on disk) even if the graph "
                "fits in memory");
  sub->add_option("--sort-buffer", c.sort_buffer,
                  "out of core: cap on the sort buffer, e.g. 256M (default: what the budget "
                  "leaves)");
}

GenerateWriteOptions write_options(const Common& c) {
  GenerateWriteOptions w;
  w.memory_budget = c.memory_budget.empty() ? default_memory_budget()
                                            : parse_bytes("--memory-budget", c.memory_budget);
  w.sort_buffer_bytes = c.sort_buffer.empty() ? 0 : parse_bytes("--sort-buffer", c.sort_buffer);
  w.overwrite = c.overwrite;
  w.force_out_of_core = c.out_of_core;
  return w;
}

// Fails before generating, not after minutes of work, when OUT is taken (write_dataset checks
// again, atomically).
void check_out(const Common& c) {
  DSP_CHECK_T(IoError, c.overwrite || !path_exists(c.out),
              "{}: already exists (pass --overwrite to replace it)", c.out);
}

void report(const GenerateResult& r, const Common& c, const char* kind) {
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
    std::printf("  %lld communities, %.1f%% of edges inside one, accuracy bound %.3f\n",
                static_cast<long long>(m.extra.value("num_communities", int64_t{0})),
                100.0 * m.extra.value("measured_intra_fraction", 0.0),
                m.extra.value("accuracy_bound", 0.0));
  }
  std::printf("  features %lld x %s, %lld classes, train/valid/test %lld/%lld/%lld\n",
              static_cast<long long>(m.feature_dim), dtype_name(m.feature_dtype),
              static_cast<long long>(m.num_classes), static_cast<long long>(m.num_train),
              static_cast<long long>(m.num_valid), static_cast<long long>(m.num_test));
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

}  // namespace

void add_generate(CLI::App& app) {
  auto* gen = app.add_subcommand(
      "generate", "generate a synthetic dataset (deterministic given --seed, any thread count)");
  gen->require_subcommand(1);

  // R-MAT: a performance workload, with defaults that make it trainable (random labels).
  auto rmat = std::make_shared<RmatOptions>();
  auto rc = std::make_shared<Common>();
  rc->features = 100;
  rc->classes = 16;
  auto* r = gen->add_subcommand(
      "rmat",
      "R-MAT graph (Graph500 a=.57 b=.19 c=.19): skewed degrees, random features and labels, no "
      "locality; for performance, not accuracy");
  add_common(r, *rc, rmat->num_nodes, rmat->num_edges,
             "number of edges drawn (self loops and repeats are dropped)");
  r->add_option("--a", rmat->a, "R-MAT quadrant probability a")->capture_default_str();
  r->add_option("--b", rmat->b, "R-MAT quadrant probability b")->capture_default_str();
  r->add_option("--c", rmat->c, "R-MAT quadrant probability c (d = 1 - a - b - c)")
      ->capture_default_str();
  r->add_flag("--undirected", rmat->undirected, "store every edge in both directions");
  auto no_permute_flag = std::make_shared<bool>(false);
  r->add_flag("--no-permute", *no_permute_flag,
              "keep R-MAT's raw ids (hubs at low ids) instead of a random relabelling");
  r->callback([rmat, rc, no_permute_flag] {
    RmatOptions o = *rmat;
    const Common& c = *rc;
    o.num_nodes = parse_count("--nodes", c.nodes);
    o.num_edges = parse_count("--edges", c.edges);
    o.feature_dim = c.features;
    o.feature_dtype = parse_dtype(c.feature_dtype);
    o.num_classes = c.classes;
    o.train_frac = c.train_frac;
    o.valid_frac = c.valid_frac;
    o.seed = c.seed;
    o.permute = !*no_permute_flag;
    o.name = c.name.empty() ? "rmat" : c.name;
    check_out(c);
    report(write_rmat(o, c.out, write_options(c)), c, "R-MAT");
  });

  // Community graph: the default dataset of the demo and the benchmarks.
  auto comm = std::make_shared<CommunityOptions>();
  auto cc = std::make_shared<Common>();
  cc->features = comm->feature_dim;
  cc->classes = comm->num_classes;
  auto* k = gen->add_subcommand(
      "community",
      "degree-corrected stochastic block model: power-law degrees, most edges inside "
      "communities, features and labels that follow the community (learnable, partitionable)");
  add_common(k, *cc, comm->num_nodes, comm->num_edges,
             "number of undirected edges drawn (each stored in both directions; repeats dropped)");
  k->add_option("--communities,-k", comm->num_communities, "number of communities")
      ->capture_default_str();
  k->add_option("--intra", comm->intra_fraction, "share of edges inside a community")
      ->capture_default_str();
  k->add_option("--degree-exponent", comm->degree_exponent,
                "power-law exponent of the expected degrees")
      ->capture_default_str();
  k->add_option("--max-degree", comm->max_degree,
                "cap on a node's expected degree (0: sqrt(2 * edges))")
      ->capture_default_str();
  k->add_option("--feature-noise", comm->feature_noise,
                "std of the gaussian noise around the community centroid (entries N(0, 1))")
      ->capture_default_str();
  k->add_option("--label-noise", comm->label_noise, "share of nodes given a random label")
      ->capture_default_str();
  k->callback([comm, cc] {
    CommunityOptions o = *comm;
    const Common& c = *cc;
    o.num_nodes = parse_count("--nodes", c.nodes);
    o.num_edges = parse_count("--edges", c.edges);
    o.feature_dim = c.features;
    o.feature_dtype = parse_dtype(c.feature_dtype);
    o.num_classes = c.classes;
    o.train_frac = c.train_frac;
    o.valid_frac = c.valid_frac;
    o.seed = c.seed;
    o.name = c.name.empty() ? "community" : c.name;
    check_out(c);
    report(write_community(o, c.out, write_options(c)), c, "community");
  });
}

}  // namespace dsp::cli
