#include "train/job_setup.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/memory.hpp"
#include "layout/partition/partition_dir.hpp"
#include "train/step_embedding.hpp"
#include "train/typed_rows.hpp"

namespace dsp {

namespace {
// The loss of node classification on labels of `classes` classes (int64) or label columns
// (multi-label): --loss auto is ce for class labels and bce for multi-label ones.
LossKind resolve_loss(LossKind loss, bool multilabel, int64_t classes, bool hetero) {
  DSP_CHECK_ARG(!(multilabel && hetero),
                "multi-label labels with a heterogeneous model: not implemented (train a "
                "homogeneous model: sage, gcn or gat)");
  if (multilabel) {
    DSP_CHECK_ARG(loss != LossKind::kCe,
                  "--loss ce on multi-label labels ({} columns): a node may carry several labels; "
                  "train with --loss bce (or auto)",
                  classes);
    return LossKind::kBce;
  }
  DSP_CHECK_ARG(loss != LossKind::kBce || classes == 2,
                "--loss bce on class labels is binary (one logit, label 1 positive): the dataset "
                "has {} classes, not 2; train with --loss ce",
                classes);
  return loss == LossKind::kAuto ? LossKind::kCe : loss;
}

// --metric auto: acc for ce, rocauc for bce; otherwise the given one, which must suit the loss.
// --metric rocauc with ce: a 2-class softmax's p(class 1) (scikit-learn's and OGB's score).
MetricKind resolve_metric(MetricKind metric, LossKind loss, int64_t classes) {
  using M = MetricKind;
  if (metric == M::kAuto) return loss == LossKind::kBce ? M::kRocauc : M::kAcc;
  DSP_CHECK_ARG(!(loss == LossKind::kCe && metric == M::kRocauc && classes != 2),
                "--metric rocauc ranks per-seed scores: a binary task (a 2-class softmax's "
                "p(class 1), or --loss bce) or a multi-label one; the dataset has {} classes",
                classes);
  DSP_CHECK_ARG(!(loss == LossKind::kBce && metric == M::kF1),
                "--metric f1 is the multi-class macro-F1 (--loss ce); with --loss bce pick acc or "
                "rocauc");
  return metric;
}

// --model rgcn|hsage: the schema's types and relations into `m`.
void hetero_model_config(const RankRuntime& rt, ModelConfig& m) {
  const PartitionData& part = rt.part();
  const HeteroSchema& schema = part.meta.hetero->schema;
  m.in_dim = 0;
  m.type_dims.clear();
  for (int t = 0; t < schema.num_types(); ++t) {
    m.type_dims.push_back(part.type_features[t].defined() ? part.type_features[t].dim(1) : 0);
  }
  m.relation_src.clear();
  m.relation_dst.clear();
  for (const RelationInfo& r : schema.relations) {
    m.relation_src.push_back(r.src_type);
    m.relation_dst.push_back(r.dst_type);
  }
}

}  // namespace

void check_job_data(const JobConfig& cfg, const RankRuntime& rt) {
  const PartitionData& part = rt.part();
  const PartitionMeta& meta = part.meta;
  const ModelKind model = cfg.train.model.model;
  DSP_CHECK_ARG(!meta.hetero || ModelConfig::is_hetero_model(model),
                "--model {} on the heterogeneous graph {}: train rgcn or hsage on it", model,
                cfg.rank.path);
  DSP_CHECK_ARG(meta.hetero || !ModelConfig::is_hetero_model(model),
                "--model {} needs a heterogeneous graph (dsp generate hetero, dsp convert --from "
                "ogb-hetero); {} is homogeneous: train sage, gcn or gat on it",
                model, cfg.rank.path);
  DSP_CHECK_FORMAT(meta.hetero || meta.feature_dim > 0 || job_embedding_dim(cfg, rt) > 0,
                   "{}: the dataset has no features to train on (--embedding-dim D learns D "
                   "columns per node)",
                   cfg.rank.path);
  if (cfg.link.link()) {
    int64_t edges = 0;
    for (const PartStats& ps : meta.part) edges += ps.link_train;
    DSP_CHECK_FORMAT(edges > 0,
                     "{}: the dataset has no training edges (link_train.npy missing or empty): "
                     "link prediction needs them (dsp convert --link-split, dsp generate "
                     "--link-split)",
                     cfg.rank.path);
    // Both held-out splits: the best epoch is chosen on validation, reported on test.
    for (const auto& [held, file] : {std::make_pair(&part.link_valid, "link_valid.npy"),
                                     std::make_pair(&part.link_test, "link_test.npy")}) {
      DSP_CHECK_FORMAT(held->defined(),
                       "{}: the dataset has no {} (held-out pairs and their negatives): link "
                       "prediction chooses its best epoch on validation pairs and reports test "
                       "pairs; add both (dsp.save_dataset(link_valid=..., link_test=..., "
                       "link_valid_neg=..., link_test_neg=...), dsp convert --link-split)",
                       cfg.rank.path, file);
    }
    const int64_t per = meta.link_negatives_per_positive;
    const int64_t negatives =
        per > 0 ? per : std::min(part.link_valid_neg.dim(0), part.link_test_neg.dim(0));
    for (int k : cfg.link.hits_k) {
      DSP_CHECK_ARG(k <= negatives,
                    "--hits-k {} is larger than the {} negative edges {}of {}'s held-out splits: "
                    "Hits@K ranks a positive among them",
                    k, negatives, per > 0 ? "of each positive " : "", cfg.rank.path);
    }
    return;
  }
  DSP_CHECK_FORMAT(part.labels.defined() && meta.num_classes > 1,
                   "{}: the dataset has no labels (or a single class)", cfg.rank.path);
  int64_t train_seeds = 0;
  for (const PartStats& ps : meta.part) train_seeds += ps.seeds;
  DSP_CHECK_FORMAT(train_seeds > 0,
                   "{}: the dataset has no training ids (train_idx.npy missing or empty): there is "
                   "nothing to train on",
                   cfg.rank.path);
}

int64_t job_embedding_dim(const JobConfig& cfg, const RankRuntime& rt) {
  if (cfg.embedding.dim >= 0) return cfg.embedding.dim;
  if (rt.hetero()) {  // the types without features enter with hidden-wide learnable rows
    const std::vector<Array>& f = rt.part().type_features;
    const bool featureless =
        std::any_of(f.begin(), f.end(), [](const Array& a) { return !a.defined(); });
    return featureless ? cfg.train.model.hidden : 0;
  }
  return rt.part().meta.feature_dim > 0 ? 0 : cfg.train.model.hidden;
}

TrainConfig job_train_config(const JobConfig& cfg, RankRuntime& rt, MetricKind* metric) {
  const PartitionMeta& meta = rt.part().meta;
  TrainConfig tc = cfg.train;
  ModelConfig& m = tc.model;
  m.embedding_dim = job_embedding_dim(cfg, rt);
  m.in_dim = meta.feature_dim + m.embedding_dim;
  if (rt.hetero()) hetero_model_config(rt, m);
  if (cfg.link.link()) {
    m.out_dim = m.hidden;
    m.loss = LossKind::kBce;  // of the pairs' logits
    if (m.predictor == PredictorKind::kNone) m.predictor = PredictorKind::kDot;
  } else {
    m.loss = resolve_loss(m.loss, meta.multilabel, meta.num_classes, rt.hetero());
    *metric = resolve_metric(cfg.metric, m.loss, meta.num_classes);
    // A binary bce model outputs one logit; a multi-label one, one per label column.
    m.out_dim = m.bce() && !meta.multilabel ? 1 : meta.num_classes;
  }
  m.layers = static_cast<int>(cfg.sampler.fanouts.size());
  m.preaggregated = cfg.preaggregate;
  tc.seed = cfg.seed;
  tc.num_threads = rt.cores().threads;
  tc.device = rt.device();
  if (tc.normalize_features == FeatureNorm::kStandard) {
    column_statistics(rt.part().features, &tc.feature_mean, &tc.feature_inv_std,
                      rt.part().feature_scale);
  }
  if (m.embedding_dim > 0) {  // refused before the model (its input layer) or the table
    int64_t rows = meta.offsets[rt.rank() + 1] - meta.offsets[rt.rank()];
    if (rt.hetero()) {
      const FeaturelessRows f(*meta.hetero, m.type_dims);
      rows = f.offsets[rt.rank() + 1] - f.offsets[rt.rank()];
    }
    rt.check_embedding_fits(
        rows, m.embedding_dim, cfg.embedding.optimizer,
        cfg.rank.budget_or(available_memory() / static_cast<uint64_t>(rt.cores().node_size)));
  }
  return tc;
}

namespace {
// The rows of the featureless types' nodes only (FeaturelessRows), each initialised from its
// dataset (union) id, so a node's row does not depend on the partition or the rank count.
std::unique_ptr<EmbeddingTable> make_typed_embedding(RankRuntime& rt, Trainer& trainer,
                                                     const TrainConfig& tc,
                                                     const EmbeddingOptions& eo) {
  const HeteroLayout& h = *rt.part().meta.hetero;
  std::unique_ptr<EmbeddingTable> emb = attach_typed_rows(rt, trainer, tc.model.type_dims, eo);
  if (rt.leader()) {
    std::vector<std::string> names;
    for (int t = 0; t < h.num_types(); ++t) {
      if (tc.model.type_dims[t] == 0) names.push_back(h.schema.node_types[t].name);
    }
    DSP_INFO("train",
             "learnable rows for the node types without features ({}): {} columns, {} rows in "
             "all ({} on this rank, in {} memory), sparse {} at lr {}",
             fmt::join(names, ", "), eo.dim, emb->ranges().num_ids(),
             emb->ranges().end() - emb->ranges().begin(),
             emb->storage().memory() == MemorySpace::kDevice ? "device" : "host", eo.optimizer,
             eo.lr);
  }
  return emb;
}
}  // namespace

std::unique_ptr<EmbeddingTable> make_job_embedding(const JobConfig& cfg, RankRuntime& rt,
                                                   Trainer& trainer, const TrainConfig& tc) {
  EmbeddingOptions eo = cfg.embedding;
  eo.dim = tc.model.embedding_dim;
  eo.seed = cfg.seed;
  if (rt.hetero()) return make_typed_embedding(rt, trainer, tc, eo);
  const PartitionMeta& meta = rt.part().meta;
  const int64_t b = meta.offsets[rt.rank()], e = meta.offsets[rt.rank() + 1];
  const Array new2old = load_new2old(rt.partition_dir(), meta.num_nodes);
  auto emb =
      std::make_unique<EmbeddingTable>(rt.channel(WorkerKind::kTrainer), meta.offsets,
                                       new2old.data<int64_t>() + b, eo, rt.embedding_storage());
  trainer.embedding().attach(emb.get());
  if (rt.leader()) {
    DSP_INFO("train",
             "learnable embeddings: {} columns per node ({} for this rank's {} rows, "
             "in {} memory), sparse {} at lr {}",
             eo.dim, format_bytes(embedding_bytes(e - b, eo.dim, eo.optimizer)), e - b,
             emb->storage().memory() == MemorySpace::kDevice ? "device" : "host", eo.optimizer,
             eo.lr);
  }
  return emb;
}

}  // namespace dsp
