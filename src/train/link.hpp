#pragma once
// Link prediction (`dsp train --task link`): how held-out edges are scored (the batches:
// pipeline/link_batch.hpp). Torch-free header.
//
// Evaluation. Every node's output row comes from full-neighbour layer-wise inference
// (train/inference.hpp); each rank scores a contiguous share of a split's positive edges and of
// its negatives (rows of other parts fetched from their owners), the negatives' scores are summed
// into one vector every rank holds, and each positive is ranked against all of them (the
// negatives are shared by the split's positives, OGB's ogbl-collab/ppa/ddi convention):
//   Hits@K  positives scoring above the K-th highest negative (OGB's evaluator);
//   MRR     mean of 1 / rank, rank = 1 + (#negatives above + #negatives at least as high) / 2;
//   AUC     mean over positives of the share of negatives scoring below it, ties counting half
//           (scikit-learn's roc_auc_score of the positives' and negatives' scores; PyG's and
//           DGL's link examples report it).
// With negatives per positive (dataset.json's link_negatives_per_positive K, OGB's ogbl-citation2
// convention) positive i is ranked against negative rows [i K, (i + 1) K) only, each rank scoring
// its positives' rows chunk by chunk: MRR as above, Hits@K the positives of rank <= K (OGB's
// citation2 lists), AUC the mean of each positive's share of its own negatives below it, and MRR
// picks the best epoch (--metric rocauc: the AUC, in either convention). scripts/peers/ogb_link_evaluator.py gives OGB's
// values on the fixed scores that tests/train/test_link.cpp pins.
#include <cstdint>
#include <string>
#include <vector>

#include "core/options.hpp"
#include "layout/store/embedding_table.hpp"
#include "pipeline/link_batch.hpp"

namespace dsp {

// --embedding-dim, --embedding-optimizer, --embedding-lr (layout/store/embedding_table.hpp's
// options as dsp train takes them; EmbeddingOptions::validate checks them once a table is made).
const OptionTable<EmbeddingOptions>& embedding_options_table();

// Rank `rank`'s rows of the learnable embeddings saved beside checkpoint `ckpt` by a job of
// `ranks` ranks: "<ckpt>.embedding.<rank>-of-<ranks>".
std::string embedding_shard(const std::string& ckpt, int rank, int ranks);

// Hits@K (one per K) and MRR of a split, over every rank's positives.
struct LinkMetrics {
  std::vector<int> k;
  std::vector<double> hits;
  double mrr = 0;
  double auc = 0;  // ROC-AUC of the positives against the negatives (per positive: their mean)
  int64_t positives = 0, negatives = 0;
  int64_t per_positive = 0;  // > 0: each positive ranked against its own negatives (MRR leads)
  std::vector<int> recall_k;   // --recall-k
  std::vector<double> recall;  // Recall@K per K, averaged over the split's sources
  // The figure that picks a link job's best epoch (link_selection names it): the ROC-AUC with
  // `rocauc` (--metric rocauc), else MRR with negatives per positive, else the first Hits@K.
  double selected(bool rocauc) const;
};

// The name of LinkMetrics::selected for a split of `per_positive` negatives per positive (0:
// shared) and the reported `ks`: "rocauc", "mrr" or "hits@<first K>".
std::string link_selection(bool rocauc, int64_t per_positive, const std::vector<int>& ks);

// The metrics of this rank's positive scores `pos` against all of the split's negative scores
// `neg` (every rank the same vector). Collective (one all_reduce on `comm`). InvalidArgument when
// a K exceeds the negatives.
LinkMetrics link_metrics(Communicator& comm, const std::vector<float>& pos,
                         const std::vector<float>& neg, const std::vector<int>& ks);
// The same with `per_positive` K negatives for each positive: neg[i K, (i + 1) K) are pos[i]'s.
// InvalidArgument when a K of `ks` exceeds them.
LinkMetrics link_metrics_per_positive(Communicator& comm, const std::vector<float>& pos,
                                      const std::vector<float>& neg, int64_t per_positive,
                                      const std::vector<int>& ks);

// This rank's share [b, e) of n rows split over `ranks` in contiguous pieces.
std::pair<int64_t, int64_t> share_of(int64_t n, int rank, int ranks);

class Trainer;
// The predictor's logits of rows [b, e) of `edges` (int64 [E, 2], new ids) from the output rows
// `h` (this rank's part rows, `width` floats each; other parts' rows fetched). Collective.
std::vector<float> score_edges(Communicator& comm, const PartitionMeta& meta,
                               const std::vector<float>& h, int64_t width, const Array& edges,
                               int64_t b, int64_t e, Trainer& trainer);
// Recall@K of one source (recommendation): `scores` of every candidate, `excluded` marks its
// training destinations (left out of the ranking), `held` the candidates' indices of its held-out
// destinations. Per K, the share of `held` ranked in the top K: fewer than K candidates that are
// not excluded score strictly higher.
std::vector<double> source_recall(const std::vector<float>& scores,
                                  const std::vector<char>& excluded,
                                  const std::vector<int64_t>& held, const std::vector<int>& ks);
// What a source is not ranked against besides its training destinations (the part's
// link_train): on a homogeneous graph itself (every node is a candidate), and on an undirected
// one its training neighbours in either direction: its row's entries in the part, since the
// stored graph keeps the training edges both ways (graph/link.hpp split_links).
struct RecallExclusions {
  bool self = false;
  bool row_neighbours = false;
};
// Recall@K of a split `pos` (int64 [E, 2], new ids; column 0 the sources) over `candidates` (new
// ids: the link relation's destination type, or every node of a homogeneous graph): each rank
// takes the split's sources it owns, scores each against every candidate (the candidates' rows
// fetched once from their owners), leaves out its training destinations and what `ex` adds, and
// averages source_recall over every rank's sources (one all_reduce). Collective on `comm`.
std::vector<double> link_recall(Communicator& comm, const PartitionData& part,
                                const std::vector<float>& h, int64_t width, const Array& pos,
                                const std::vector<int64_t>& candidates, const std::vector<int>& ks,
                                Trainer& trainer, RecallExclusions ex = {});

// A split's metrics from every node's output rows: each rank scores its share of the positives
// `pos` and of the negatives `neg` (int64 [., 2], new ids); shared negatives (`per_positive` 0):
// their scores are summed into one vector on every rank (each entry written by one rank);
// per_positive K: a rank scores its positives' K rows each, in chunks. Collective on `comm`.
LinkMetrics evaluate_link_split(Communicator& comm, const PartitionMeta& meta,
                                const std::vector<float>& h, int64_t width, const Array& pos,
                                const Array& neg, int64_t per_positive, const std::vector<int>& ks,
                                Trainer& trainer);

}  // namespace dsp
