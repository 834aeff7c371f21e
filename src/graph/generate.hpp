#pragma once
// Synthetic graphs, so that every part of dsp can be run, tested and benchmarked with no download.
//
//   generate_rmat       R-MAT (Chakrabarti et al.; Graph500 parameters by default): skewed degrees
//                       and random features. No locality and no learnable signal: a performance
//                       workload (METIS cuts about half of its edges at 4 parts).
//   generate_community  a degree-corrected stochastic block model: power-law degrees, most edges
//                       inside communities, features and labels that follow the community. Training
//                       on it reaches a meaningful accuracy and partitioning finds the locality
//                       real graphs have. The default graph of the demo and of the benchmarks.
//
// Both are pure functions of their options: every random draw comes from a counter-based stream
// keyed by (seed, purpose) with the edge index or node id as subject, so the result is the same
// for any number of threads. Self loops and repeated edges are removed, so the stored edge count
// is at most the requested one (meta.extra records both).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/choice.hpp"
#include "core/dtype.hpp"
#include "graph/dataset.hpp"
#include "graph/link.hpp"

namespace dsp {

// The shares of nodes in train_idx, valid_idx and test_idx. Each split has round(N * share) nodes
// (clamped, in that order, to the nodes left), drawn by one seeded permutation. With test unset
// every node outside train and valid is a test node; with it set, the nodes in no split keep their
// label in labels.npy but no split evaluates them (as most of ogbn-papers100M's nodes).
struct SplitFractions {
  double train = 0.1, valid = 0.05;
  std::optional<double> test;  // unset: the rest
};

// A named split (--splits): all (the defaults above: every node in a split) or papers100m
// (ogbn-papers100M's shares: 1,207,179 train, 125,265 valid and 214,338 test of 111,059,956
// nodes, 1.4% in a split); kNone: no preset given.
enum class SplitPreset { kNone, kAll, kPapers100m };
const Names<SplitPreset>& names_of(SplitPreset);
SplitFractions split_preset(SplitPreset preset);

struct RmatOptions {
  int64_t num_nodes = 100000;
  // Edges drawn (before self loops and repeats are removed); undirected ones are stored twice.
  int64_t num_edges = 1600000;
  // Quadrant probabilities; d = 1 - a - b - c. a > d makes low (pre-permutation) ids hubs.
  double a = 0.57, b = 0.19, c = 0.19;
  bool undirected = false;
  // Relabel nodes with a seeded random permutation (as Graph500 does), so that degree is not
  // correlated with id. Off only to inspect the raw recursive structure.
  bool permute = true;
  int64_t feature_dim = 0;  // features uniform in [-1, 1); 0 = no features
  DType feature_dtype = DType::kFloat32;
  int64_t num_classes = 0;  // labels uniform in [0, C); 0 = no labels
  double train_frac = SplitFractions{}.train, valid_frac = SplitFractions{}.valid;
  std::optional<double> test_frac;  // unset: the rest is test (SplitFractions)
  uint64_t seed = 0;
  std::string name = "rmat";
};

// num_nodes need not be a power of two: endpoints are drawn over [0, 2^ceil(log2 N)) and a pair
// with an endpoint >= N is redrawn (from the same edge's stream, so still deterministic); that
// is R-MAT conditioned on both ends being < N. The Graph500 per-level noise on a, b, c is not
// applied. Throws InvalidArgument on bad options.
Dataset generate_rmat(const RmatOptions& opts);

struct CommunityOptions {
  int64_t num_nodes = 100000;
  int64_t num_edges = 1000000;  // undirected edges drawn; the stored graph holds each twice
  int64_t num_communities = 64;
  // Share of edges with both ends in one community; the others join two different communities.
  double intra_fraction = 0.9;
  // Expected degrees follow a power law P(d) ~ d^-exponent (DC-SBM node weights theta), with a
  // minimum of about a third of the mean degree, capped at max_degree.
  double degree_exponent = 2.5;
  // Cap on a node's expected degree; 0 = sqrt(2 * num_edges) (the structural cut-off above which
  // a node would need repeated edges).
  int64_t max_degree = 0;
  int64_t feature_dim = 100;
  DType feature_dtype = DType::kFloat32;
  int64_t num_classes = 16;  // 0: no labels (a link-prediction graph, say)
  // Features are centroid(community) + feature_noise * N(0, I), centroid entries N(0, 1). The
  // default makes features alone give a modest accuracy (about half) and the mean over a node's
  // neighbours, which mostly share its community, a much higher one: the graph matters.
  double feature_noise = 4.0;
  // Fraction of nodes whose label is replaced by a uniformly random class. The best attainable
  // accuracy is then 1 - label_noise * (1 - 1/C), recorded in meta.extra["accuracy_bound"].
  double label_noise = 0.1;
  double train_frac = SplitFractions{}.train, valid_frac = SplitFractions{}.valid;
  std::optional<double> test_frac;  // unset: the rest is test (SplitFractions)
  uint64_t seed = 0;
  std::string name = "community";
  // A link-prediction split of the generated edges (split_links, seeded with `seed`; in memory
  // only): negatives are pairs of nodes in different communities that are no edges, so a scorer
  // that knows the communities ranks every within-community positive above every negative, and
  // the best Hits@K (any K up to the negatives) is the share of within-community positives:
  // meta.extra["link_hits_bound"] (test) and ["link_hits_bound_valid"]. Its `seed` is ignored.
  std::optional<LinkSplitOptions> link_split;
  // Planted temporal structure (in memory only; not with link_split): the graph is directed, every
  // node v has a time T_v (node_time.npy) and every entry a time (edge_time.npy), and v's label
  // follows a label community h(v) drawn independently of its feature community (the community
  // above, which its features show), so v's own features say nothing of its label. Each in-edge
  // of v is, with equal chance, from the past (time uniform in [0, T_v)) or the future (uniform in
  // [T_v, kTemporalSpan)); its source is, with probability intra_fraction, a node of feature
  // community h(v) (past) or of a decoy d(v), a random community of another class (future), and
  // otherwise of any community. A model sampling only edges before T_v sees h(v) in its
  // neighbours' features: meta.extra["accuracy_bound"] as without --temporal. One that cannot tell
  // past from future sees h(v) and d(v) exchangeably and attains at most
  // ["accuracy_bound_untimed"] = (1 - label_noise) / 2 + label_noise / C (exact when the number of
  // communities is a multiple of C). Needs C >= 2 classes and at least C communities.
  bool temporal = false;
  // > 0: multi-label labels, int8 [N, multilabel] (dataset.json "multilabel", num_classes = this;
  // num_classes must equal it). Label j of community c is on for a seeded share of about
  // kMultiLabelOnShare of the communities (at least one, never all); a node's row is its
  // community's, each entry replaced by a random bit with probability label_noise. Features show
  // the community, so a model reading a node's (and its neighbours') features can predict every
  // label well above chance. Needs at least 2 communities; not with `temporal`.
  int64_t multilabel = 0;
};
constexpr double kMultiLabelOnShare = 0.3;

// Times of the temporal community graph lie in [0, kTemporalSpan); node times in [1, span).
constexpr int64_t kTemporalSpan = int64_t{1} << 20;

// Community c has label c % num_classes (before label noise; with `temporal` the label community
// h(v) decides it, see above). Node ids are randomly permuted, so
// communities are not contiguous id ranges: a partitioner has to find them. If `communities` is
// given, it receives the (feature) community of every node (it is not stored in the dataset).
// Throws InvalidArgument on bad options.
Dataset generate_community(const CommunityOptions& opts,
                           std::vector<int32_t>* communities = nullptr);

// ---------------------------------------------------------------- writing to a directory

// Peak memory of the two ways to produce a dataset directory: in memory (the whole graph, then
// write_dataset) and out of core (edges through an external sort on disk, node data streamed;
// this is its minimum: per-node arrays and the smallest buffers).
struct MemoryEstimate {
  uint64_t in_memory = 0;
  uint64_t out_of_core = 0;
};
MemoryEstimate estimate_rmat_memory(const RmatOptions& opts);
MemoryEstimate estimate_community_memory(const CommunityOptions& opts);

struct GenerateWriteOptions {
  uint64_t memory_budget = 0;      // bytes the command may use (default_memory_budget())
  bool overwrite = false;          // replace an existing directory
  bool force_out_of_core = false;  // out of core even when the graph fits in memory
  uint64_t sort_buffer_bytes = 0;  // cap on the external sort's buffer (0: what the budget leaves)
};

struct GenerateResult {
  DatasetMeta meta;
  int64_t max_in_degree = 0;
  bool out_of_core = false;
  int sort_runs = 0;           // sorted runs written to disk (0: the edges fit in one buffer)
  uint64_t spilled_bytes = 0;  // bytes of those runs
  double generate_s = 0, write_s = 0;  // out of core: all of it counts as generate_s
};

// Generates and writes the dataset to `dir` (staged, renamed at the end). In memory when its
// estimate fits the budget, else out of core; the files are identical either way. Throws Error
// with one line (needed, budget, available, what lowers it) when neither fits, and before
// starting when the out-of-core runs and output would not fit on the disk.
GenerateResult write_rmat(const RmatOptions& opts, const std::string& dir,
                          const GenerateWriteOptions& w);
GenerateResult write_community(const CommunityOptions& opts, const std::string& dir,
                               const GenerateWriteOptions& w);

}  // namespace dsp
