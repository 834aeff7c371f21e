#include "graph/commands.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/lists.hpp"
#include "core/memory.hpp"
#include "core/timer.hpp"
#include "graph/link.hpp"

namespace dsp {

const Names<ConvertFrom>& names_of(ConvertFrom) {
  using F = ConvertFrom;
  static const Names<F> n("format", {{F::kNone, ""},
                                     {F::kOgb, "ogb"},
                                     {F::kEdgeList, "edgelist"},
                                     {F::kOgbLink, "ogb-link"},
                                     {F::kOgbHetero, "ogb-hetero"}});
  return n;
}

namespace {
using json = nlohmann::json;
using options::value;

// --- dsp convert --------------------------------------------------------------------------------

using Conv = ConvertCommand;
// clang-format off
#define DSP_CONV(member) [](Conv& c) -> auto& { return c.member; }
// clang-format on

OptionTable<Conv> all_convert_options() {
  auto flag = [](const char* f, const char* k, const char* help, auto get) {
    return options::toggle<Conv>(f, k, help, get);
  };
  return {
      value<Conv>("--from", "from", "input format: ogb | edgelist | ogb-link | ogb-hetero",
                  DSP_CONV(from)),
      value<Conv>("--name", "name", "dataset name (default: the input's name)", DSP_CONV(name)),
      value<Conv>("--split", "split",
                  "ogb: split folder under raw/split; ogb-link: under split/ (default: the only or "
                  "first one)",
                  DSP_CONV(split)),
      flag("--no-split", "no_split",
           "ogb: import a directory without raw/split (the dataset then has no train, valid or "
           "test ids, and dsp train refuses it); ogb-link: without split/ (every edge trains)",
           DSP_CONV(no_split)),
      flag("--undirected", "undirected",
           "edgelist: each line is an undirected edge (store both directions)",
           DSP_CONV(undirected)),
      flag("--directed", "directed",
           "ogb, ogb-link: keep edges one-directional (default: symmetrize, as OGB intends)",
           DSP_CONV(directed)),
      value<Conv>("--num-nodes", "num_nodes",
                  "edgelist: number of nodes (default: largest id + 1); larger ids are errors",
                  DSP_CONV(num_nodes)),
      flag("--no-self-loops", "no_self_loops", "edgelist: drop u -> u edges",
           DSP_CONV(no_self_loops)),
      flag("--overwrite", "overwrite", "replace an existing output directory", DSP_CONV(overwrite)),
      value<Conv>("--memory-budget", "memory_budget",
                  "memory the command may use, e.g. 12G (default: 3/4 of what is available); an "
                  "input whose in-memory estimate exceeds it converts out of core",
                  DSP_CONV(memory_budget)),
      flag("--out-of-core", "out_of_core",
           "sort the edges on disk (runs in the output's staging directory) and stream the "
           "features even if they fit in memory",
           DSP_CONV(out_of_core)),
      value<Conv>("--sort-buffer", "sort_buffer",
                  "out of core: cap on the sort buffer, e.g. 256M (default: what the budget "
                  "leaves)",
                  DSP_CONV(sort_buffer)),
      value<Conv>("--link-split", "link_split",
                  "edgelist, ogb-hetero: TRAIN,VALID,TEST fractions of the distinct edges (of "
                  "--link-relation's) for link prediction, e.g. 0.85,0.05,0.10: the stored graph "
                  "keeps the training edges, the others become link_valid/link_test with fixed "
                  "negatives (in memory only)",
                  DSP_CONV(link_split)),
      value<Conv>("--link-relation", "link_relation",
                  "ogb-hetero with --link-split: the relation to predict, by key or a name only "
                  "one relation has; its reverse relation loses the held-out edges' reverses",
                  DSP_CONV(link_relation)),
      value<Conv>("--link-negatives", "link_negatives",
                  "with --link-split: negative pairs per held-out split (default: the larger of "
                  "the valid and test edge counts)",
                  DSP_CONV(link_negatives)),
      value<Conv>("--link-negatives-per-positive", "link_negatives_per_positive",
                  "with --link-split: K negatives for each held-out edge (u, v) instead, pairs "
                  "(u, w), as OGB's ogbl-citation2 (MRR then picks the best epoch)",
                  DSP_CONV(link_negatives_per_positive)),
      value<Conv>("--seed", "seed", "with --link-split: seed of the split and the negatives",
                  DSP_CONV(seed)),
      value<Conv>("--time-column", "time_column",
                  "edgelist: the column holding each edge's integer time, 3 ('src dst time "
                  "[weight]') or 4 ('src dst weight time'); written as edge_time.npy, a repeated "
                  "edge keeping its earliest time (in memory only)",
                  DSP_CONV(time_column)),
      value<Conv>("--node-time", "node_time",
                  "edgelist with --time-column: each node's integer time (the seed time of node "
                  "classification), a .npy of int64 [N] or a text file of one integer per line; "
                  "written as node_time.npy",
                  DSP_CONV(node_time)),
      value<Conv>("--features", "features",
                  "edgelist: node features, a .npy of float32 or float16 [N, F] (row i: node i; "
                  "N is the node count unless --num-nodes says it); written as features.npy "
                  "(in memory only)",
                  DSP_CONV(features)),
      flag("--add-reverse", "add_reverse",
           "ogb-hetero: add the reverse of every relation (dst___rev_<name>___src), so that "
           "messages flow both ways",
           DSP_CONV(add_reverse)),
  };
}

OutOfCoreImportOptions out_of_core_options(const ConvertCommand& a, uint64_t budget) {
  OutOfCoreImportOptions w;
  w.memory_budget = budget;
  w.sort_buffer_bytes = a.sort_buffer.empty() ? 0 : parse_bytes("--sort-buffer", a.sort_buffer);
  w.overwrite = a.overwrite;
  return w;
}

LinkSplitOptions link_split_options(const ConvertCommand& a) {
  LinkSplitOptions ls = parse_link_split(a.link_split);
  ls.negatives = a.link_negatives;
  ls.negatives_per_positive = a.link_negatives_per_positive;
  ls.seed = a.seed;
  check_link_split(ls);
  return ls;
}

// The checks of options that do not go together (before any reading).
void check_convert_options(const ConvertCommand& a) {
  DSP_CHECK_ARG(!path_within(a.input, a.output),
                "output {} is the input {} or contains it: writing there would destroy the input; "
                "choose another output",
                a.output, a.input);
  using F = ConvertFrom;
  DSP_CHECK_ARG(a.from == F::kEdgeList || a.from == F::kOgbHetero || a.link_split.empty(),
                "--link-split applies to --from edgelist and ogb-hetero only");
  DSP_CHECK_ARG(a.from == F::kOgbHetero || a.link_relation.empty(),
                "--link-relation applies to --from ogb-hetero only");
  DSP_CHECK_ARG(a.link_split.empty() == a.link_relation.empty() || a.from != F::kOgbHetero,
                "--from ogb-hetero: --link-split and --link-relation go together (which "
                "relation's edges to split)");
  DSP_CHECK_ARG(!a.link_split.empty() ||
                    (a.link_negatives == 0 && a.link_negatives_per_positive == 0 && a.seed == 0),
                "--link-negatives, --link-negatives-per-positive and --seed apply with "
                "--link-split only");
  DSP_CHECK_ARG(a.from == F::kEdgeList || (a.time_column == 0 && a.node_time.empty()),
                "--time-column and --node-time apply to --from edgelist only");
  DSP_CHECK_ARG(a.from == F::kEdgeList || a.features.empty(),
                "--features applies to --from edgelist only (OGB's layout carries its features)");
  DSP_CHECK_ARG(a.node_time.empty() || a.time_column > 0,
                "--node-time needs edge times: give --time-column too");
  DSP_CHECK_ARG(a.time_column == 0 || a.link_split.empty(),
                "--link-split does not carry edge times yet: drop --time-column or --link-split");
  check_time_column(a.time_column);
  DSP_CHECK_ARG(a.from == F::kOgbHetero || !a.add_reverse,
                "--add-reverse applies to --from ogb-hetero only");
}

// --from ogb-hetero: in memory, into a heterogeneous dataset directory; the options of the
// homogeneous formats are refused. Returns the summary run_convert describes.
DatasetMeta convert_hetero(const ConvertCommand& a, ImportStats& st, double& write_s) {
  const std::pair<const char*, bool> refused[] = {{"--directed", a.directed},
                                                  {"--undirected", a.undirected},
                                                  {"--num-nodes", a.num_nodes >= 0},
                                                  {"--no-self-loops", a.no_self_loops},
                                                  {"--out-of-core", a.out_of_core},
                                                  {"--memory-budget", !a.memory_budget.empty()},
                                                  {"--sort-buffer", !a.sort_buffer.empty()}};
  for (const auto& [flag, given] : refused) {
    DSP_CHECK_ARG(!given,
                  "{} does not apply to --from ogb-hetero (relations are read as listed, in "
                  "memory; --add-reverse adds their reverses)",
                  flag);
  }
  DSP_CHECK_ARG(!(a.no_split && !a.split.empty()), "give --split or --no-split, not both");
  OgbHeteroImportOptions o;
  o.split = a.split;
  o.require_split = !a.no_split;
  o.add_reverse = a.add_reverse;
  o.name = a.name;
  HeteroDataset ds = import_ogb_hetero(a.input, o, &st);
  if (!a.link_split.empty()) split_hetero_links(ds, a.link_relation, link_split_options(a));
  Stopwatch sw;
  write_hetero_dataset(ds, a.output, a.overwrite);
  write_s = sw.seconds();
  DatasetMeta m;
  m.name = ds.name;
  m.num_nodes = ds.schema.num_nodes();
  for (const RelationInfo& r : ds.schema.relations) m.num_edges += r.edges;
  m.num_classes = ds.schema.num_classes;
  m.num_train = ds.train_idx.defined() ? ds.train_idx.numel() : 0;
  m.num_valid = ds.valid_idx.defined() ? ds.valid_idx.numel() : 0;
  m.num_test = ds.test_idx.defined() ? ds.test_idx.numel() : 0;
  m.extra = ds.extra;
  m.extra["hetero"] = ds.schema.to_json();
  return m;
}

// Converts in memory, or out of core when the in-memory estimate exceeds what the budget leaves
// or --out-of-core is given; refuses with one line when neither fits.
DatasetMeta convert(const ConvertCommand& a, ImportStats& st, double& write_s) {
  const uint64_t budget = a.memory_budget.empty() ? default_memory_budget()
                                                  : parse_bytes("--memory-budget", a.memory_budget);
  Dataset ds;
  check_convert_options(a);
  using F = ConvertFrom;
  if (a.from == F::kOgbHetero) return convert_hetero(a, st, write_s);
  if (a.from == F::kOgb || a.from == F::kOgbLink) {
    DSP_CHECK_ARG(a.num_nodes < 0, "--num-nodes applies to --from edgelist only");
    OgbImportOptions o;
    DSP_CHECK_ARG(!(a.no_split && !a.split.empty()), "give --split or --no-split, not both");
    o.split = a.split;
    o.require_split = !a.no_split;
    o.name = a.name;
    o.undirected = !a.directed;
    if (a.from == F::kOgbLink) {
      DSP_CHECK_ARG(!a.out_of_core, "--from ogb-link converts in memory; drop --out-of-core");
      check_memory("dsp convert --from ogb-link", estimate_ogb_memory(a.input), budget,
                   "raise --memory-budget");
      ds = import_ogb_link(a.input, o, &st);
    } else if (a.out_of_core || estimate_ogb_memory(a.input) > memory_left(budget)) {
      check_memory("dsp convert (out of core)", ogb_out_of_core_bytes(a.input), budget,
                   "raise --memory-budget");
      return import_ogb_to_dir(a.input, o, a.output, out_of_core_options(a, budget), &st);
    } else {
      ds = import_ogb_raw(a.input, o, &st);
    }
  } else if (a.from == F::kEdgeList) {
    DSP_CHECK_ARG(a.split.empty() && !a.no_split,
                  "--split/--no-split apply to --from ogb, ogb-link and ogb-hetero only");
    DSP_CHECK_ARG(!a.directed, "edge lists are directed unless --undirected is given");
    EdgeListOptions o;
    o.num_nodes = a.num_nodes;
    Array features;
    if (!a.features.empty()) {  // read first: its rows are the node count when none is given
      features = read_node_features(a.features, a.num_nodes);
      o.num_nodes = features.dim(0);
    }
    o.undirected = a.undirected;
    o.remove_self_loops = a.no_self_loops;
    o.time_column = a.time_column;
    std::optional<LinkSplitOptions> link;
    if (!a.link_split.empty()) link = link_split_options(a);
    const uint64_t in_memory =
        estimate_edge_list_memory(sample_edge_list(a.input, o.time_column), o);
    if (o.time_column > 0) {
      DSP_CHECK_ARG(!a.out_of_core,
                    "--time-column needs the in-memory conversion (repeated edges keep their "
                    "earliest time); drop --out-of-core");
      check_memory("dsp convert --time-column", in_memory, budget, "raise --memory-budget");
    }
    if (a.out_of_core || in_memory > memory_left(budget)) {
      DSP_CHECK_ARG(a.features.empty(),
                    "--features needs the in-memory conversion; drop --out-of-core{}",
                    a.out_of_core ? "" : " or raise --memory-budget");
      DSP_CHECK_ARG(a.link_split.empty(),
                    "--link-split needs the in-memory conversion (the edges are split in memory); "
                    "drop --out-of-core{}",
                    a.out_of_core ? "" : " or raise --memory-budget");
      check_memory("dsp convert (out of core)", edge_list_out_of_core_bytes(), budget,
                   "raise --memory-budget");
      return import_edge_list_to_dir(a.input, o, a.name, a.output, out_of_core_options(a, budget),
                                     &st);
    }
    ds = import_edge_list(a.input, o, a.name, &st);
    if (!a.node_time.empty()) ds.node_time = read_node_times(a.node_time, ds.meta.num_nodes);
    ds.features = features;
    ds.sync_meta();
    if (link) split_links(ds, *link);
  } else {
    DSP_THROW_T(InvalidArgument, "--from is needed: the input's format ({})",
                names_of(F{}).list(", "));
  }
  Stopwatch sw;
  write_dataset(ds, a.output, a.overwrite);
  write_s = sw.seconds();
  return ds.meta;
}

// --- dsp generate -------------------------------------------------------------------------------

// A count option: "2.4M" on the command line, a number or such a text in JSON.
template <class C, class Get>
Option<C> count(std::string flag, std::string key, std::string help, Get get) {
  Option<C> o = value<C>(flag, std::move(key), std::move(help), get);
  o.type = "COUNT";
  o.parse = [get, flag](C& c, const std::string& s) { get(c) = parse_count(flag, s); };
  o.read = [get, flag](C& c, const json& v) {
    get(c) = v.is_string() ? parse_count(flag, v.get<std::string>()) : v.get<int64_t>();
  };
  return o;
}

// The feature dtype of a generated dataset: float32 or float16.
template <class C>
Option<C> feature_dtype_option() {
  Option<C> o = options::declare<C>("--feature-dtype", "feature_dtype", "float32 or float16");
  o.type = "TEXT:{float32,float16}";
  auto set = [](C& c, const std::string& s) {
    const DType t = parse_dtype(s);
    DSP_CHECK_ARG(t == DType::kFloat32 || t == DType::kFloat16,
                  "--feature-dtype must be float32 or float16, got '{}'", s);
    c.o.feature_dtype = t;
  };
  o.parse = set;
  o.read = [set](C& c, const json& v) { set(c, v.get<std::string>()); };
  o.write = [](const C& c) { return json(dtype_name(c.o.feature_dtype)); };
  return o;
}

Option<RmatCommand> no_permute_option() {
  Option<RmatCommand> o = options::toggle<RmatCommand>(
      "--no-permute", "no_permute",
      "keep R-MAT's raw ids (hubs at low ids) instead of a random relabelling",
      [](RmatCommand & c) -> auto& { return c.o.permute; });
  o.parse = [](RmatCommand& c, const std::string&) { c.o.permute = false; };
  o.read = [](RmatCommand& c, const json& v) { c.o.permute = !v.get<bool>(); };
  o.write = [](const RmatCommand& c) { return json(!c.o.permute); };
  return o;
}

// A fraction that may be left out: a number on the command line and in JSON; null (the default)
// means not given.
template <class C, class Get>
Option<C> optional_fraction(std::string flag, std::string key, std::string help, Get get) {
  Option<C> o = options::declare<C>(flag, std::move(key), std::move(help));
  o.type = "FLOAT";
  o.parse = [get, flag](C& c, const std::string& s) {
    get(c) = options::from_text<double>(s, flag);
  };
  o.read = [get](C& c, const json& v) {
    get(c) = v.is_null() ? std::nullopt : std::optional<double>(v.get<double>());
  };
  o.write = [get](const C& c) {
    const std::optional<double>& v = get(const_cast<C&>(c));
    return v ? json(*v) : json(nullptr);
  };
  return o;
}

// The split options: a preset or the three fractions (checked by validate()).
template <class C>
OptionTable<C> split_options() {
  // clang-format off
#define DSP_SPLIT(member) [](C& c) -> auto& { return c.splits.member; }
  // clang-format on
  return {
      optional_fraction<C>("--train-frac", "train_frac",
                           "share of nodes in train_idx (default 0.1)", DSP_SPLIT(train_frac)),
      optional_fraction<C>("--valid-frac", "valid_frac",
                           "share of nodes in valid_idx (default 0.05)", DSP_SPLIT(valid_frac)),
      optional_fraction<C>("--test-frac", "test_frac",
                           "share of nodes in test_idx (default: the rest); the nodes in no split "
                           "keep a label but are not evaluated",
                           DSP_SPLIT(test_frac)),
      value<C>("--splits", "splits",
               "split preset: all (train 0.1, valid 0.05, test the rest) or papers100m "
               "(ogbn-papers100M's shares: 1.09% train, 0.11% valid, 0.19% test, the rest in no "
               "split); not with --train-frac, --valid-frac or --test-frac",
               DSP_SPLIT(preset)),
  };
#undef DSP_SPLIT
}

// Sets the split fractions of `o` from `s`: the preset's three, else the fractions given (the
// others keep o's). InvalidArgument naming both when a preset comes with a fraction.
template <class Options>
void apply_splits(const GenerateSplits& s, Options& o) {
  if (s.preset == SplitPreset::kNone) {
    if (s.train_frac) o.train_frac = *s.train_frac;
    if (s.valid_frac) o.valid_frac = *s.valid_frac;
    if (s.test_frac) o.test_frac = *s.test_frac;
    return;
  }
  const std::pair<const char*, bool> fractions[] = {{"--train-frac", s.train_frac.has_value()},
                                                    {"--valid-frac", s.valid_frac.has_value()},
                                                    {"--test-frac", s.test_frac.has_value()}};
  for (const auto& [flag, given] : fractions) {
    DSP_CHECK_ARG(!given, "give --splits or {}, not both", flag);
  }
  const SplitFractions f = split_preset(s.preset);
  o.train_frac = f.train;
  o.valid_frac = f.valid;
  o.test_frac = f.test;
}

// The options both generators share: sizes, features, labels, splits, seed, name, writing.
template <class C>
OptionTable<C> common_options(const char* edges_help) {
  // clang-format off
#define DSP_GEN(member) [](C& c) -> auto& { return c.member; }
  // clang-format on
  auto flag = [](const char* f, const char* k, const char* help, auto get) {
    return options::toggle<C>(f, k, help, get);
  };
  OptionTable<C> t = {
      count<C>("--nodes", "nodes", "number of nodes (suffixes k, M, G allowed)",
               DSP_GEN(o.num_nodes)),
      count<C>("--edges", "edges", edges_help, DSP_GEN(o.num_edges)),
      value<C>("--features", "features", "feature dimension (0: no features)",
               DSP_GEN(o.feature_dim)),
      feature_dtype_option<C>(),
      value<C>("--classes", "classes", "number of classes", DSP_GEN(o.num_classes)),
      value<C>("--seed", "seed", "random seed; the output is a pure function of it",
               DSP_GEN(o.seed)),
      value<C>("--name", "name", "dataset name recorded in dataset.json", DSP_GEN(o.name)),
      flag("--overwrite", "overwrite", "replace an existing OUT", DSP_GEN(run.overwrite)),
      value<C>("--memory-budget", "memory_budget",
               "memory the command may use, e.g. 12G (default: 3/4 of what is available); a graph "
               "whose in-memory estimate exceeds it is generated out of core",
               DSP_GEN(run.memory_budget)),
      flag("--out-of-core", "out_of_core",
           "generate out of core (edges through an external sort on disk) even if the graph fits "
           "in memory",
           DSP_GEN(run.out_of_core)),
      value<C>("--sort-buffer", "sort_buffer",
               "out of core: cap on the sort buffer, e.g. 256M (default: what the budget leaves)",
               DSP_GEN(run.sort_buffer)),
  };
#undef DSP_GEN
  // Listed after --classes.
  OptionTable<C> splits = split_options<C>();
  auto classes =
      std::find_if(t.begin(), t.end(), [](const Option<C>& o) { return o.flag == "--classes"; });
  t.insert(classes + 1, splits.begin(), splits.end());
  return t;
}

// The CLI's one-letter spellings of the generators' flags.
template <class C>
OptionTable<C> with_short_flags(OptionTable<C> t) {
  const std::pair<const char*, const char*> shorts[] = {
      {"--nodes", "-n"},   {"--edges", "-m"}, {"--features", "-f"},
      {"--classes", "-c"}, {"--seed", "-s"},  {"--communities", "-k"}};
  for (Option<C>& o : t) {
    for (const auto& [flag, s] : shorts)
      if (o.flag == flag) o.short_flag = s;
  }
  return t;
}

OptionTable<RmatCommand> all_rmat_options() {
  using C = RmatCommand;
  OptionTable<C> t =
      common_options<C>("number of edges drawn (self loops and repeats are dropped)");
  t.push_back(value<C>(
      "--a", "a", "R-MAT quadrant probability a", [](C & c) -> auto& { return c.o.a; }));
  t.push_back(value<C>(
      "--b", "b", "R-MAT quadrant probability b", [](C & c) -> auto& { return c.o.b; }));
  t.push_back(value<C>(
      "--c", "c", "R-MAT quadrant probability c (d = 1 - a - b - c)",
      [](C & c) -> auto& { return c.o.c; }));
  t.push_back(options::toggle<C>(
      "--undirected", "undirected", "store every edge in both directions",
      [](C & c) -> auto& { return c.o.undirected; }));
  t.push_back(no_permute_option());
  return t;
}

OptionTable<CommunityCommand> all_community_options() {
  using C = CommunityCommand;
  // clang-format off
#define DSP_COMM(member) [](C& c) -> auto& { return c.o.member; }
  // clang-format on
  OptionTable<C> t = common_options<C>(
      "number of undirected edges drawn (each stored in both directions; repeats dropped)");
  t.push_back(
      value<C>("--communities", "communities", "number of communities", DSP_COMM(num_communities)));
  t.push_back(
      value<C>("--intra", "intra", "share of edges inside a community", DSP_COMM(intra_fraction)));
  t.push_back(value<C>("--degree-exponent", "degree_exponent",
                       "power-law exponent of the expected degrees", DSP_COMM(degree_exponent)));
  t.push_back(value<C>("--max-degree", "max_degree",
                       "cap on a node's expected degree (0: sqrt(2 * edges))",
                       DSP_COMM(max_degree)));
  t.push_back(value<C>("--feature-noise", "feature_noise",
                       "std of the gaussian noise around the community centroid (entries N(0, 1))",
                       DSP_COMM(feature_noise)));
  t.push_back(value<C>("--label-noise", "label_noise", "share of nodes given a random label",
                       DSP_COMM(label_noise)));
  t.push_back(value<C>(
      "--link-split", "link_split",
      "TRAIN,VALID,TEST fractions of the edges for link prediction, e.g. "
      "0.85,0.05,0.10: the stored graph keeps the training edges; negatives join "
      "different communities (in memory only)",
      [](C & c) -> auto& { return c.link_split; }));
  t.push_back(value<C>(
      "--link-negatives", "link_negatives",
      "with --link-split: negative pairs per held-out split (default: the larger "
      "of the valid and test edge counts)",
      [](C & c) -> auto& { return c.link_negatives; }));
  t.push_back(value<C>(
      "--link-negatives-per-positive", "link_negatives_per_positive",
      "with --link-split: K negatives for each held-out edge (u, v) instead, pairs (u, w), as "
      "OGB's ogbl-citation2 (MRR then picks the best epoch)",
      [](C & c) -> auto& { return c.link_negatives_per_positive; }));
  t.push_back(options::toggle<C>(
      "--temporal", "temporal",
      "planted temporal structure: a directed graph with edge and node times where a node's "
      "in-edges before its time come from its label community and later ones from a decoy; the "
      "accuracy bound holds for sampling the past, accuracy_bound_untimed for sampling all edges "
      "(in memory only)",
      DSP_COMM(temporal)));
  t.push_back(value<C>("--multilabel", "multilabel",
                       "L > 0: L labels per node (int8 [N, L] labels.npy of 0/1, dataset.json "
                       "multilabel), each on for about 30% of the communities; replaces --classes",
                       DSP_COMM(multilabel)));
#undef DSP_COMM
  return t;
}

OptionTable<HeteroCommand> all_hetero_options() {
  using C = HeteroCommand;
  // clang-format off
#define DSP_HET(member) [](C& c) -> auto& { return c.o.member; }
  // clang-format on
  OptionTable<C> t = {
      count<C>("--papers", "papers",
               "number of papers: the target type, with features, labels and the splits",
               DSP_HET(papers)),
      count<C>("--authors", "authors", "number of authors", DSP_HET(authors)),
      count<C>("--institutions", "institutions", "number of institutions", DSP_HET(institutions)),
      count<C>("--fields", "fields", "number of fields of study", DSP_HET(fields)),
      value<C>("--classes", "classes", "number of classes (the planted communities)",
               DSP_HET(classes)),
      value<C>("--feature-dim", "feature_dim",
               "paper feature dimension (0: none); the other types have no features",
               DSP_HET(feature_dim)),
      value<C>("--writes", "writes", "authors drawn per paper (author___writes___paper)",
               DSP_HET(writes)),
      value<C>("--cites", "cites", "references drawn per paper (paper___cites___paper)",
               DSP_HET(cites)),
      value<C>("--topics", "topics", "fields drawn per paper (paper___has_topic___field_of_study)",
               DSP_HET(topics)),
      value<C>("--affiliations", "affiliations",
               "institutions drawn per author (author___affiliated_with___institution)",
               DSP_HET(affiliations)),
      value<C>("--intra", "intra", "chance that an edge is drawn inside its source's community",
               DSP_HET(intra)),
      value<C>("--feature-noise", "feature_noise",
               "std of the gaussian noise around the class centroid (entries N(0, 1))",
               DSP_HET(feature_noise)),
      value<C>("--label-noise", "label_noise", "share of papers given a random label",
               DSP_HET(label_noise)),
      value<C>("--seed", "seed", "random seed; the output is a pure function of it", DSP_HET(seed)),
      value<C>("--name", "name", "dataset name recorded in dataset.json", DSP_HET(name)),
      options::toggle<C>(
          "--no-reverse", "no_reverse",
          "do not add the reverse relations (rev_writes, rev_cites, ...)",
          [](C & c) -> auto& { return c.no_reverse; }),
      value<C>(
          "--link-split", "link_split",
          "TRAIN,VALID,TEST fractions of --link-relation's edges for link prediction, e.g. "
          "0.85,0.05,0.10: the relation keeps the training edges, its reverse loses the "
          "held-out ones; negatives are pairs of its two types that are no edge",
          [](C & c) -> auto& { return c.link_split; }),
      value<C>("--link-relation", "link_relation",
               "with --link-split: the relation to predict, by key or name (default "
               "author___writes___paper)",
               DSP_HET(link_relation)),
      value<C>(
          "--link-negatives", "link_negatives",
          "with --link-split: negative pairs per held-out split (default: the larger of the "
          "valid and test edge counts)",
          [](C & c) -> auto& { return c.link_negatives; }),
      value<C>(
          "--link-negatives-per-positive", "link_negatives_per_positive",
          "with --link-split: K negatives (u, w) for each held-out edge (u, v) instead "
          "(MRR then picks the best epoch)",
          [](C & c) -> auto& { return c.link_negatives_per_positive; }),
      options::toggle<C>(
          "--overwrite", "overwrite", "replace an existing OUT",
          [](C & c) -> auto& { return c.run.overwrite; }),
  };
#undef DSP_HET
  OptionTable<C> splits = split_options<C>();
  auto classes =
      std::find_if(t.begin(), t.end(), [](const Option<C>& o) { return o.flag == "--classes"; });
  t.insert(classes + 1, splits.begin(), splits.end());
  return t;
}

// Fails before generating, not after minutes of work, when OUT is taken (the writer checks
// again, atomically).
void refuse_taken_out(const GenerateRun& r) {
  DSP_CHECK_T(IoError, r.overwrite || !path_exists(r.out),
              "{}: already exists (pass --overwrite to replace it)", r.out);
}

GenerateWriteOptions write_options(const GenerateRun& r) {
  refuse_taken_out(r);
  GenerateWriteOptions w;
  w.memory_budget = r.memory_budget.empty() ? default_memory_budget()
                                            : parse_bytes("--memory-budget", r.memory_budget);
  w.sort_buffer_bytes = r.sort_buffer.empty() ? 0 : parse_bytes("--sort-buffer", r.sort_buffer);
  w.overwrite = r.overwrite;
  w.force_out_of_core = r.out_of_core;
  return w;
}

}  // namespace

const OptionTable<ConvertCommand>& convert_options() {
  static const OptionTable<ConvertCommand> t = all_convert_options();
  return t;
}

DatasetMeta run_convert(const ConvertCommand& cmd, ImportStats* stats, double* write_s) {
  ImportStats st;
  double ws = 0;
  DatasetMeta m = convert(cmd, st, ws);
  if (stats) *stats = st;
  if (write_s) *write_s = ws;
  return m;
}

RmatCommand::RmatCommand() {
  o.feature_dim = 100;
  o.num_classes = 16;
}

const OptionTable<RmatCommand>& rmat_options() {
  static const OptionTable<RmatCommand> t = with_short_flags(all_rmat_options());
  return t;
}

const OptionTable<CommunityCommand>& community_options() {
  static const OptionTable<CommunityCommand> t = with_short_flags(all_community_options());
  return t;
}

const OptionTable<HeteroCommand>& hetero_options() {
  static const OptionTable<HeteroCommand> t = with_short_flags(all_hetero_options());
  return t;
}

void RmatCommand::validate() { apply_splits(splits, o); }

void HeteroCommand::validate() {
  apply_splits(splits, o);
  o.reverse = !no_reverse;
  DSP_CHECK_ARG(!link_split.empty() || (link_negatives == 0 && link_negatives_per_positive == 0 &&
                                        o.link_relation == HeteroGenOptions{}.link_relation),
                "--link-relation, --link-negatives and --link-negatives-per-positive apply with "
                "--link-split only");
  o.link_split.reset();
  if (link_split.empty()) return;
  o.link_split = parse_link_split(link_split);
  o.link_split->negatives = link_negatives;
  o.link_split->negatives_per_positive = link_negatives_per_positive;
  o.link_split->seed = o.seed;
  check_link_split(*o.link_split);
}

void CommunityCommand::validate() {
  apply_splits(splits, o);
  if (o.multilabel > 0) {  // L labels per node: the label count is L, --classes left out or L
    DSP_CHECK_ARG(o.num_classes == CommunityOptions{}.num_classes || o.num_classes == o.multilabel,
                  "--multilabel {} gives every node {} labels; --classes {} contradicts it (leave "
                  "--classes out)",
                  o.multilabel, o.multilabel, o.num_classes);
    o.num_classes = o.multilabel;
  }
  DSP_CHECK_ARG(!link_split.empty() || (link_negatives == 0 && link_negatives_per_positive == 0),
                "--link-negatives and --link-negatives-per-positive apply with --link-split only");
  if (link_split.empty()) return;
  o.link_split = parse_link_split(link_split);
  o.link_split->negatives = link_negatives;
  o.link_split->negatives_per_positive = link_negatives_per_positive;
  check_link_split(*o.link_split);
}

GenerateResult run_generate(const RmatCommand& cmd) {
  RmatCommand c = cmd;
  c.validate();
  return write_rmat(c.o, c.run.out, write_options(c.run));
}

GenerateResult run_generate(const CommunityCommand& cmd) {
  CommunityCommand c = cmd;
  c.validate();
  return write_community(c.o, c.run.out, write_options(c.run));
}

HeteroGenerateResult run_generate(const HeteroCommand& cmd) {
  HeteroCommand c = cmd;
  c.validate();
  refuse_taken_out(c.run);
  return write_hetero(c.o, c.run.out, c.run.overwrite);
}

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

}  // namespace dsp
