#pragma once
// Link prediction's batches (`dsp train --task link`, the Python LinkLoader). Torch-free.
//
// A rank trains the positive edges its part holds (part<p>/link_train.npy: the training edges
// whose source it owns), shuffled per epoch by the EpochScheduler as node seeds are (the
// scheduler's "seeds" are the part's edge indices), batch_size edges per step. Each positive
// (u, v) gets neg_ratio negatives (u, w): w uniform over the graph's nodes, or drawn with
// probability proportional to in-degree^0.75 ("unigram", word2vec's and DGL's choice), from
// RngStream(rng_key(seed, epoch, batch, kNegatives), u * N + v): a pure function of the edge and
// the step (so an edge listed twice in link_train and dealt twice into one batch repeats its
// negatives). "pairs": each negative is (w, x), both uniform from that stream (first draw w,
// second x), as PyG's negative_sampling and DGL's GlobalUniform draw them, an existing edge not
// skipped (a share |E| / N^2 of the draws). The endpoints, deduplicated in first-seen order, are
// the CSP seeds; pairs index them.
// Edge exclusion (CollectiveSampler::ExcludedEdges): "self" hides u -> v from v's row while the
// batch samples, "reverse" also v -> u (an undirected graph stores both), "none" hides nothing;
// "auto" is reverse on an undirected dataset, else self.
// A heterogeneous partition predicts its link relation (schema.link_relation, type-typed pairs
// in union ids): negatives w are uniform over the relation's destination type, or "unigram" by
// their in-degree^0.75 through the relation (its training edges in every part's link_train:
// link_destination_counts) ("pairs": w over its source type, x over its destination type),
// "reverse" hides v -> u in the reverse relation (HeteroSchema::reverse_of; refused when there
// is none), "auto" is reverse when the relation has one, else self; the exclusions carry their
// relation.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/options.hpp"
#include "csp/block.hpp"
#include "csp/sampler.hpp"
#include "layout/partition/partition.hpp"

namespace dsp {

enum class TaskKind { kNode, kLink };
// unigram: in-degree^0.75; pairs: both ends uniform.
enum class NegativeKind { kUniform, kUnigram, kPairs };
enum class ExcludeKind { kAuto, kNone, kSelf, kReverse };
const Names<TaskKind>& names_of(TaskKind);
const Names<NegativeKind>& names_of(NegativeKind);
const Names<ExcludeKind>& names_of(ExcludeKind);

struct LinkOptions {
  TaskKind task = TaskKind::kNode;
  int neg_ratio = 1;  // negatives per positive edge
  NegativeKind negatives = NegativeKind::kUniform;
  ExcludeKind exclude = ExcludeKind::kAuto;
  // Hits@K reported for each K; the first is the validation metric (best epoch, --patience).
  std::vector<int> hits_k{50};
  // Recall@K reported for each K (a typed graph's link relation: each source's held-out
  // destinations ranked among every node of the destination type); empty: none.
  std::vector<int> recall_k;

  bool link() const { return task == TaskKind::kLink; }
  void validate() const;  // InvalidArgument naming the flag
};

// --task, --neg-ratio, --negatives, --exclude, --hits-k (dsp train embeds it).
const OptionTable<LinkOptions>& link_options_table();

// One link batch: its CSP seeds, the pairs it scores and the edges it must not see.
struct LinkBatch {
  std::vector<int64_t> seeds;
  LinkPairs pairs;
  CollectiveSampler::ExcludedEdges exclude;
};

class LinkBatcher {
 public:
  // `part` must outlive the batcher (its link_train and in-degrees are read where they are).
  // `undirected`: the stored graph is symmetric (exclude auto -> reverse).
  LinkBatcher(const PartitionData& part, const LinkOptions& opts, uint64_t seed, bool undirected);
  // The scheduler's seeds: this part's edge indices 0 .. edges - 1.
  std::vector<int64_t> edge_indices() const;
  int64_t num_edges() const { return edges_; }
  ExcludeKind exclusion() const { return exclude_; }  // resolved: none, self or reverse
  // A typed graph's link relation: the new ids of its destination type (the negatives' pool and
  // Recall@K's candidates); empty on a homogeneous graph.
  const std::vector<int64_t>& destinations() const { return dst_pool_; }
  // The batch of the part's edges `edges` (indices) at (epoch, batch).
  LinkBatch make(const std::vector<int64_t>& edges, int64_t epoch, int64_t batch) const;

 private:
  int64_t draw_negative(uint64_t key, uint64_t subject, int j) const;
  std::pair<int64_t, int64_t> draw_pair(uint64_t key, uint64_t subject, int j) const;
  // A heterogeneous partition's link relation: its types' nodes and the exclusion's relations.
  void init_typed(const std::string& dir);
  void set_unigram(const int64_t* deg, const std::string& none);
  void exclude(LinkBatch& out, int64_t u, int64_t v) const;

  const PartitionData& part_;
  LinkOptions opts_;
  uint64_t seed_;
  int64_t edges_ = 0, num_nodes_ = 0;
  ExcludeKind exclude_ = ExcludeKind::kNone;
  // unigram: inclusive prefix sums of in-degree^0.75 over the nodes, or over dst_pool_ (typed)
  std::vector<double> cdf_;
  // Typed: the relation and its reverse (-1: none), the new ids of its source and destination
  // types in type order (the negatives' pools); empty on a homogeneous partition.
  int rel_ = -1, rev_ = -1;
  std::vector<int64_t> src_pool_, dst_pool_;
};

}  // namespace dsp
