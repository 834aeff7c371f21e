#pragma once
// Link-prediction splits of a graph held in memory (dsp convert --link-split, dsp generate
// community --link-split): the distinct edges are split by a seeded permutation into training,
// validation and test edges; the stored graph keeps the training edges only, and each held-out
// split gets fixed negative pairs (OGB's collab/ppa/ddi convention, shared by all its positives).
// Every draw comes from RngStream keyed by the seed, so the result is a pure function of the
// input and the seed.
#include <cstdint>
#include <functional>
#include <string>

#include "graph/dataset.hpp"
#include "graph/hetero.hpp"

namespace dsp {

struct LinkSplitOptions {
  double train = 0.85, valid = 0.05, test = 0.10;  // shares of the distinct edges
  int64_t negatives = 0;  // pairs per held-out split; 0: the larger positive count, at least 1
  uint64_t seed = 0;
  // > 0: this many negatives for each held-out positive (u, v) instead, (u, w) pairs in the
  // positives' order (dataset.json's link_negatives_per_positive; OGB's ogbl-citation2 layout).
  int64_t negatives_per_positive = 0;
};

// "0.85,0.05,0.10": three fractions, each >= 0, train > 0, sum <= 1 (+1e-9). InvalidArgument
// naming `flag` otherwise.
LinkSplitOptions parse_link_split(const std::string& text, const std::string& flag = "--link-split");
// The same checks on options built in code (negatives >= 0 too).
void check_link_split(const LinkSplitOptions& o, const std::string& flag = "--link-split");

// Splits the graph of `ds` (in memory, its full input graph) in place. The candidates are the
// distinct edges without self loops, as directed pairs (src, dst), or for an undirected (symmetric)
// dataset the unordered pairs, written (min, max). They are permuted with the seed and cut into
// train round(train * E), valid round(valid * E) and test round(test * E) (clamped in that order);
// what a sum below 1 leaves is dropped. The stored graph keeps the entries of training edges and
// self loops (both directions when undirected; weights kept); link_train holds them as pairs
// (self loops included), link_valid / link_test the held-out ones, each sorted by (src, dst).
// Negatives: pairs (u, v), u != v, drawn uniformly with the seed, that are no edge of the full input
// graph (neither direction when undirected), not repeated within the split and accepted by
// `negative_ok` when given; Error when they cannot be found. With negatives_per_positive K: for
// each held-out (u, v), K pairs (u, w) of the same kind, distinct w. meta.extra["link_split"] records the
// options and counts.
void split_links(Dataset& ds, const LinkSplitOptions& o,
                 const std::function<bool(int64_t, int64_t)>& negative_ok = {});

// Link prediction on one relation of a heterogeneous dataset (dsp generate hetero --link-split,
// --link-relation): `relation` is a key, or a name only one relation has (InvalidArgument naming
// the relations otherwise). The relation's edges are split as split_links splits a directed
// graph's (self loops stay in training only within one type); the relation keeps the training
// edges, and its reverse relation (HeteroSchema::reverse_of), when there is one, loses the
// reverses of the held-out ones. Negatives (u, w): u of the relation's source type, w of its
// destination type, no edge of the relation (and u != w within one type). Sets the link files
// (type-local pairs), link_negatives_per_positive, schema.link_relation and extra["link_split"].
// `negative_ok` as split_links'.
void split_hetero_links(HeteroDataset& ds, const std::string& relation, const LinkSplitOptions& o,
                        const std::function<bool(int64_t, int64_t)>& negative_ok = {});

// The distinct edges of g as pairs (src, dst) sorted, self loops included; for an undirected
// (symmetric) graph one per unordered pair, written (min, max). int64 [E, 2].
Array graph_edge_pairs(const Csr& g, bool undirected);

}  // namespace dsp
