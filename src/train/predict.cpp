#include "train/predict.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/logging.hpp"
#include "core/memory.hpp"
#include "csp/sampler.hpp"
#include "graph/npy.hpp"
#include "layout/partition/partition_dir.hpp"
#include "layout/store/embedding_table.hpp"
#include "pipeline/rank/backends.hpp"
#include "pipeline/rank/runtime.hpp"
#include "train/inference.hpp"
#include "train/link.hpp"
#include "train/metrics.hpp"
#include "train/step_embedding.hpp"
#include "train/trainer.hpp"
#include "train/typed_rows.hpp"

namespace dsp {

namespace fs = std::filesystem;

const Names<PredictOutput>& names_of(PredictOutput) {
  using O = PredictOutput;
  static const Names<O> n("output", {{O::kClass, "class"},
                                     {O::kProbs, "probs"},
                                     {O::kLogits, "logits"},
                                     {O::kEmbedding, "embedding"}});
  return n;
}

std::vector<std::string> PredictConfig::files() const {
  if (embed()) return {"embeddings.npy"};
  if (output == PredictOutput::kProbs) return {"predictions.npy", "probabilities.npy"};
  if (output == PredictOutput::kLogits) return {"predictions.npy", "logits.npy"};
  return {"predictions.npy"};
}

void PredictConfig::validate() const {
  DSP_CHECK_ARG(!rank.path.empty(), "give a dataset or partition directory");
  DSP_CHECK_ARG(!checkpoint.empty(), "--checkpoint: give the model (checkpoint.pt or best.pt)");
  DSP_CHECK_ARG(!out.empty(), "--out: give the output directory");
  DSP_CHECK_ARG(batch_size > 0, "--batch-size must be > 0, got {}", batch_size);
  DSP_CHECK_ARG(layer >= -1, "--layer must be >= 0, got {}", layer);
  DSP_CHECK_ARG(node_type.empty() || embed(),
                "--node-type {}: dsp predict classifies the target type's nodes; dsp embed "
                "exports another type's rows",
                node_type);
  for (const std::string& f : files()) {
    const fs::path p = fs::path(out) / f;
    DSP_CHECK_T(IoError, overwrite || !fs::exists(p),
                "{} exists: remove it, choose another --out, or give --overwrite", p.string());
  }
}

OptionTable<PredictConfig> predict_options_table(bool embed) {
  using options::value;
#define DSP_FIELD(member) \
  [](PredictConfig & c) -> auto& { return c.member; }
  OptionTable<PredictConfig> t = {
      value<PredictConfig>("--checkpoint", "checkpoint",
                           "the model: checkpoint.pt (last epoch) or best.pt (best validation) of "
                           "dsp train --checkpoint-dir",
                           DSP_FIELD(checkpoint)),
      value<PredictConfig>("--out", "out", "output directory (created)", DSP_FIELD(out)),
      value<PredictConfig>("--nodes", "nodes",
                           ".npy of node ids (the dataset's own, int32 or int64): one output row "
                           "each, in that order (default: every node, row i = node i)",
                           DSP_FIELD(nodes)),
      value<PredictConfig>("--batch-size", "batch_size",
                           "destination nodes per inference batch (default 4096)",
                           DSP_FIELD(batch_size)),
      options::toggle<PredictConfig>("--overwrite", "overwrite", "replace existing output files",
                                     DSP_FIELD(overwrite)),
  };
  if (embed) {
    t.push_back(value<PredictConfig>(
        "--layer", "layer",
        "export the output of this layer, after its activation (0-based; default: the last "
        "hidden layer, the input of the output layer; for a --task link model its output layer, "
        "the rows its predictor scores)",
        DSP_FIELD(layer)));
    t.push_back(value<PredictConfig>(
        "--node-type", "node_type",
        "a typed model: export this node type's rows, row i its node i (default: the target "
        "type; a --task link model's two types are its relation's)",
        DSP_FIELD(node_type)));
  } else {
    t.push_back(value<PredictConfig>("--output", "output",
                                     "class (predictions.npy), probs (also probabilities.npy: "
                                     "softmax; a --loss bce model's sigmoids) or logits (also "
                                     "logits.npy)",
                                     DSP_FIELD(output)));
  }
  t.push_back(value<PredictConfig>("--threads", "threads",
                                   "threads per rank (default: the rank's share of its cores)",
                                   DSP_FIELD(rank.threads)));
#undef DSP_FIELD
  for (const char* key : {"device", "memory_budget"}) {
    t.push_back(
        options::embed<PredictConfig>(options::find(rank_options_table(), key),
                                      [](PredictConfig& c) -> RankOptions& { return c.rank; }));
  }
  return t;
}

namespace {

// The node type whose rows a typed model writes (-1 on a homogeneous graph): --node-type, or the
// target type.
int output_type(const PredictConfig& c, const HeteroLayout* h) {
  DSP_CHECK_ARG(h || c.node_type.empty(),
                "--node-type {}: {} is a homogeneous graph (node types are a typed graph's)",
                c.node_type, c.rank.path);
  if (!h) return -1;
  if (c.node_type.empty()) {
    DSP_CHECK_ARG(h->schema.target >= 0,
                  "{} has no target type: give --node-type (the type whose rows to export)",
                  c.rank.path);
    return h->schema.target;
  }
  const int t = h->schema.type_index(c.node_type);
  std::string names;
  for (const NodeTypeInfo& n : h->schema.node_types) names += (names.empty() ? "" : ", ") + n.name;
  DSP_CHECK_ARG(t >= 0, "--node-type {}: {} has no such node type (types: {})", c.node_type,
                c.rank.path, names);
  return t;
}

// The original ids whose rows are written: `nodes` (checked against the graph) or all of them.
std::vector<int64_t> output_ids(const PredictConfig& c, int64_t num_nodes) {
  std::vector<int64_t> ids;
  if (c.nodes.empty()) {
    ids.resize(static_cast<size_t>(num_nodes));
    for (int64_t v = 0; v < num_nodes; ++v) ids[v] = v;
    return ids;
  }
  const Array a = load_npy(c.nodes);
  DSP_CHECK_FORMAT(a.ndim() == 1 && (a.dtype() == DType::kInt32 || a.dtype() == DType::kInt64),
                   "{}: node ids must be a 1-d int32 or int64 array", c.nodes);
  for (int64_t i = 0; i < a.dim(0); ++i) {
    const int64_t v = a.int_at(i);
    DSP_CHECK_FORMAT(v >= 0 && v < num_nodes,
                     "{}: entry {} is node {}, outside the graph's [0, {})", c.nodes, i, v,
                     num_nodes);
    ids.push_back(v);
  }
  return ids;
}

// Every rank's `mine` at rank 0, rank after rank (rows: in the partition's new id order, the
// parts being contiguous); empty elsewhere. Step (2, step) of the trainer channel.
template <class T>
std::vector<T> gather_rows(RankRuntime& rt, const std::vector<T>& mine, int64_t step = 0,
                           const char* label = "predict:rows") {
  CoordinatedCommunicator& tc = rt.channel(WorkerKind::kTrainer);
  tc.set_step(2, step);
  std::vector<int64_t> counts(static_cast<size_t>(rt.size()), 0);
  counts[0] = static_cast<int64_t>(mine.size());
  OpOptions o;
  o.label = label;
  return tc.all_to_all_v(mine, counts, nullptr, o);
}

void write_atomic(const Array& a, const fs::path& path) {
  const std::string tmp = path.string() + ".tmp";
  save_npy(tmp, a);
  fs::rename(tmp, path);
}

// The rows of `ids` (original ids), in their order, out of every node's rows (new id order).
std::vector<float> rows_of(const RankRuntime& rt, const std::vector<int64_t>& ids,
                           const std::vector<float>& table, int64_t width) {
  const Array old2new = load_old2new(rt.partition_dir(), rt.part().meta.num_nodes);
  const int64_t n = static_cast<int64_t>(ids.size());
  std::vector<float> rows(static_cast<size_t>(n * width));
  for (int64_t i = 0; i < n; ++i) {
    const float* r = &table[old2new.int_at(ids[i]) * width];
    std::copy(r, r + width, rows.begin() + i * width);
  }
  return rows;
}

// Rank 0: the output files from the output rows ([n, width], the order of the ids asked for).
// --loss bce models (`bce`): each logit's 0/1 prediction (logit > 0) and sigmoid probability
// (train/metrics.hpp's probability, the score training's ROC-AUC ranks). A binary model's one
// column gives predictions.npy int64 [n]; a multi-label model's L columns give int8 [n, L].
std::vector<std::string> write_outputs(const PredictConfig& c, std::vector<float> rows, int64_t n,
                                       int64_t width, bool bce) {
  std::vector<int64_t> cls(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float* r = &rows[i * width];
    cls[i] = std::max_element(r, r + width) - r;
  }
  std::vector<int8_t> multi;  // a multi-label model's predictions
  if (bce) {
    for (int64_t i = 0; i < n; ++i) cls[i] = rows[i] > 0;  // binary: its one column
    if (width > 1) {
      multi.resize(rows.size());
      for (size_t k = 0; k < rows.size(); ++k) multi[k] = rows[k] > 0;
    }
    if (c.output == PredictOutput::kProbs) {
      for (float& x : rows) x = probability(x);
    }
  } else if (c.output == PredictOutput::kProbs) {
    for (int64_t i = 0; i < n; ++i) {
      float* r = &rows[i * width];
      const float m = *std::max_element(r, r + width);
      double sum = 0;
      for (int64_t j = 0; j < width; ++j) sum += std::exp(static_cast<double>(r[j]) - m);
      for (int64_t j = 0; j < width; ++j) {
        r[j] = static_cast<float>(std::exp(static_cast<double>(r[j]) - m) / sum);
      }
    }
  }
  fs::create_directories(c.out);
  std::vector<std::string> written;
  for (const std::string& f : c.files()) {
    const fs::path p = fs::path(c.out) / f;
    if (f == "predictions.npy" && !multi.empty()) {
      write_atomic(Array::from_vector(multi, {n, width}), p);
    } else if (f == "predictions.npy") {
      write_atomic(Array::from_vector(cls), p);
    } else {
      write_atomic(Array::from_vector(rows, {n, width}), p);
    }
    written.push_back(p.string());
  }
  return written;
}

// The largest `need` and the smallest `have` over the ranks (the main channel's step (-1, step)):
// a memory check that every rank passes or fails alike. Collective.
void busiest_against_least(RankRuntime& rt, int64_t step, int64_t* need, int64_t* have) {
  CoordinatedCommunicator& main_ch = rt.channel(WorkerKind::kMain);
  main_ch.set_step(-1, step);
  main_ch.all_reduce(need, 1, DType::kInt64, ReduceOp::kMax);
  main_ch.all_reduce(have, 1, DType::kInt64, ReduceOp::kMin);
}

// Refuses, on every rank alike, layer-wise inference whose tables (`need` bytes on this rank's
// device) do not fit the free memory of some rank's device. Collective: the main channel's step
// (-1, 2).
void check_device_memory(RankRuntime& rt, int64_t nodes, int64_t need) {
  int64_t have = free_device_memory(rt.device());
  busiest_against_least(rt, 2, &need, &have);
  DSP_CHECK_T(NotSupported, need <= have,
              "layer-wise inference over {} nodes needs an estimated {} of device memory on the "
              "busiest rank but {} is free on a rank's device: run more ranks (mpirun -np) or "
              "give a smaller --batch-size",
              nodes, format_bytes(need), format_bytes(have));
}

// Refuses, on every rank alike, a job whose layer-wise inference (plus, on rank 0, the gathered
// table and the outputs) does not fit the memory each rank of a node has, or (a trainer on a
// device) whose layer tables do not fit the device's free memory; logs the estimate.
void check_memory(RankRuntime& rt, Trainer& trainer, int layers, int64_t batch_size,
                  int64_t out_rows) {
  std::vector<int64_t> widths;
  for (int l = 0; l < layers; ++l) widths.push_back(trainer.eval().layer_width(l));
  const PartitionMeta& meta = rt.part().meta;
  const bool on_device = trainer.device_io().device().is_cuda();
  const InferenceBytes est =
      layerwise_inference_bytes(meta, rt.rank(), widths, batch_size, on_device);
  if (on_device) check_device_memory(rt, meta.num_nodes, est.device);
  int64_t need = est.host;
  if (rt.leader()) need += 4 * widths.back() * (meta.num_nodes + out_rows) + 8 * out_rows;
  int64_t have = static_cast<int64_t>(
      rt.options().budget_or(available_memory() / static_cast<uint64_t>(rt.cores().node_size)));
  busiest_against_least(rt, 3, &need, &have);
  DSP_CHECK_T(NotSupported, need <= have,
              "layer-wise inference over {} nodes needs an estimated {} on the busiest rank but "
              "{} {}: run more ranks (mpirun -np), give a smaller --batch-size or raise "
              "--memory-budget",
              meta.num_nodes, format_bytes(need), format_bytes(have),
              rt.options().memory_budget > 0 ? "is the budget of a rank (--memory-budget)"
                                             : "is available to a rank");
  if (rt.leader()) {
    DSP_INFO("predict", "layer-wise inference: an estimated {} on the busiest rank, {} available",
             format_bytes(need), format_bytes(have));
  }
}

// The options of the learnt embeddings' table whose shard for this rank lies beside `ckpt` (its
// training job's: the same partition and rank count), which `shard` receives.
EmbeddingOptions checkpoint_embedding(const std::string& ckpt, const ModelConfig& m,
                                      const RankRuntime& rt, std::string* shard) {
  *shard = embedding_shard(ckpt, rt.rank(), rt.size());
  DSP_CHECK_T(IoError, path_exists(*shard),
              "{}: the model learnt node embeddings and {} holds no rows for rank {} of {}: run "
              "on the partition and rank count it was trained with",
              ckpt, *shard, rt.rank(), rt.size());
  const nlohmann::json job = checkpoint_header(ckpt)
                                 .value("extra", nlohmann::json::object())
                                 .value("job", nlohmann::json::object());
  EmbeddingOptions eo;
  eo.dim = m.embedding_dim;
  eo.optimizer =
      parse_choice<EmbeddingOptimizer>(job.value("embedding_optimizer", std::string("adam")));
  return eo;
}

// The learnt embeddings' rows of this rank (null for a model without them), attached to
// `trainer`: every node's (a homogeneous model), or the featureless types' (a typed model).
std::unique_ptr<EmbeddingTable> load_embedding(const std::string& ckpt, const ModelConfig& m,
                                               RankRuntime& rt, Trainer& trainer) {
  if (m.embedding_dim == 0) return nullptr;
  std::string shard;
  const EmbeddingOptions eo = checkpoint_embedding(ckpt, m, rt, &shard);
  std::unique_ptr<EmbeddingTable> t;
  if (m.hetero()) {
    t = attach_typed_rows(rt, trainer, m.type_dims, eo);
  } else {
    const PartitionMeta& meta = rt.part().meta;
    const int64_t b = meta.offsets[rt.rank()];
    const Array new2old = load_new2old(rt.partition_dir(), meta.num_nodes);
    t = std::make_unique<EmbeddingTable>(rt.channel(WorkerKind::kTrainer), meta.offsets,
                                         new2old.data<int64_t>() + b, eo, rt.embedding_storage());
    trainer.embedding().attach(t.get());
  }
  t->load(shard);
  return t;
}

// Homogeneous models: every node's rows by layer-wise inference, at rank 0 in the order of `ids`.
std::vector<float> layerwise_rows(const PredictConfig& c, RankRuntime& rt, Trainer& trainer,
                                  const std::vector<int64_t>& ids, int layers) {
  InferenceOptions io;
  io.batch_size = c.batch_size;
  io.epoch = 1;  // past the trainer's initial broadcast
  io.layers = layers;
  check_memory(rt, trainer, io.layers, c.batch_size, static_cast<int64_t>(ids.size()));
  const std::vector<float> table = gather_rows(rt, layerwise_inference(rt, trainer, io));
  if (!rt.leader()) return {};
  return rows_of(rt, ids, table, trainer.eval().layer_width(layers - 1));
}

// A typed model's rows of type `type`'s nodes `ids` (the type's own ids), at rank 0 in their
// order: each rank samples every neighbour of every relation (fanouts -1) of the ids it owns,
// batch by batch, and runs the model's first `layers` layers on them: each node's exact
// full-neighbour output (the same as --eval full's). The typed models have no layer-wise pass.
std::vector<float> typed_rows(const PredictConfig& c, RankRuntime& rt, Trainer& trainer,
                              const std::vector<int64_t>& ids, int type, int layers) {
  const PartitionMeta& meta = rt.part().meta;
  const HeteroSchema& schema = meta.hetero->schema;
  const int64_t base = schema.type_offsets()[static_cast<size_t>(type)];
  const Array old2new = load_old2new(rt.partition_dir(), meta.num_nodes);
  const int64_t b = meta.offsets[rt.rank()], e = meta.offsets[rt.rank() + 1];
  std::vector<int64_t> seeds, at;  // the ids this rank owns: new ids, and their places in `ids`
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t v = old2new.int_at(base + ids[i]);
    if (v < b || v >= e) continue;
    seeds.push_back(v);
    at.push_back(static_cast<int64_t>(i));
  }
  SamplerOptions so;
  so.fanouts.assign(static_cast<size_t>(layers), kAllNeighbours);
  const std::unique_ptr<CollectiveSampler> sampler = rt.make_sampler(so);
  const int64_t width = trainer.eval().layer_width(layers - 1);
  rt.channel(WorkerKind::kMain).set_step(-1, 4);
  const std::vector<float> mine =
      typed_outputs_of(rt, trainer, *sampler, seeds, layers, c.batch_size, 1, 0);
  // Rank 0 gathers every rank's rows and their places.
  const std::vector<int64_t> places = gather_rows(rt, at, 1, "predict:places");
  const std::vector<float> rows = gather_rows(rt, mine);
  if (!rt.leader()) return {};
  std::vector<float> ordered(ids.size() * static_cast<size_t>(width));
  for (size_t k = 0; k < places.size(); ++k) {
    std::copy(rows.begin() + static_cast<int64_t>(k) * width,
              rows.begin() + static_cast<int64_t>(k + 1) * width,
              ordered.begin() + places[k] * width);
  }
  return ordered;
}

// The checkpoint's model against the graph: a typed model needs a heterogeneous partition with
// the same node types' feature widths, a homogeneous one the feature columns it reads.
void check_model_fits(const PredictConfig& c, const ModelConfig& m, const RankRuntime& rt) {
  const PartitionData& part = rt.part();
  DSP_CHECK_ARG(m.hetero() == rt.hetero(),
                "{}: a {} model ({}) cannot run on {}, a {} graph", c.checkpoint,
                m.hetero() ? "typed" : "homogeneous", m.model, c.rank.path,
                rt.hetero() ? "typed" : "homogeneous");
  if (!m.hetero()) {
    DSP_CHECK_FORMAT(part.meta.feature_dim + m.embedding_dim == m.in_dim,
                     "{} has {} feature columns but the model in {} reads {}", c.rank.path,
                     part.meta.feature_dim, c.checkpoint, m.in_dim - m.embedding_dim);
    return;
  }
  const HeteroSchema& s = part.meta.hetero->schema;
  DSP_CHECK_FORMAT(s.num_types() == m.num_types(), "{} has {} node types but the model in {} {}",
                   c.rank.path, s.num_types(), c.checkpoint, m.num_types());
  for (int t = 0; t < s.num_types(); ++t) {
    const int64_t d = part.type_features[t].defined() ? part.type_features[t].dim(1) : 0;
    DSP_CHECK_FORMAT(d == m.type_dims[t],
                     "{}: node type {} has {} feature columns but the model in {} reads {}",
                     c.rank.path, s.node_types[t].name, d, c.checkpoint, m.type_dims[t]);
  }
}

// Rank 0: the files, and one line naming each with its shape.
void report_outputs(const PredictConfig& c, const std::string& log_name, std::vector<float> rows,
                    int64_t n, int64_t width, bool bce, PredictResult* res) {
  res->width = width;
  res->rows = n;
  res->files = write_outputs(c, std::move(rows), n, width, !c.embed() && bce);
  // Each file with its shape: predictions [n] (a multi-label model's [n, L]), the float
  // outputs [n, width].
  const bool multi = !c.embed() && bce && width > 1;
  std::vector<std::string> shown;
  for (const std::string& path : res->files) {
    const std::string f = fs::path(path).filename().string();
    const bool vector = f == "predictions.npy" && !multi;
    shown.push_back(vector ? fmt::format("{} [{}]", f, n) : fmt::format("{} [{}, {}]", f, n, width));
  }
  DSP_INFO(log_name, "wrote {} to {}", fmt::join(shown, ", "), c.out);
}

}  // namespace

PredictResult run_predict(const PredictConfig& c) {
  c.validate();
  TrainConfig tc = checkpoint_config(c.checkpoint);
  const int layers = tc.model.layers;
  DSP_CHECK_ARG(!tc.model.preaggregated,
                "{}: a model trained with --preaggregate has no input layer to infer with",
                c.checkpoint);
  DSP_CHECK_ARG(c.embed() || tc.model.predictor == PredictorKind::kNone,
                "{}: a link predictor's outputs are node embeddings: use dsp embed", c.checkpoint);
  // A node classifier's embedding is its last hidden layer; a link model's, its output.
  const bool link = tc.model.predictor != PredictorKind::kNone;
  const int layer = c.layer >= 0 ? c.layer : link ? layers - 1 : std::max(0, layers - 2);
  DSP_CHECK_ARG(!c.embed() || layer < layers, "--layer {}: the model has layers 0..{}", c.layer,
                layers - 1);
  RankOptions ro = c.rank;
  ro.log_name = c.embed() ? "embed" : "predict";
  RankRuntime rt(ro);
  check_model_fits(c, tc.model, rt);
  // Every rank checks the id file before any work, so a bad one fails alike everywhere. A typed
  // model's rows are one type's nodes, by the type's own ids.
  const HeteroLayout* h = rt.part().meta.hetero.get();
  const int type = output_type(c, h);
  const std::vector<int64_t> ids =
      output_ids(c, h ? h->schema.node_types[static_cast<size_t>(type)].count
                      : rt.part().meta.num_nodes);
  tc.num_threads = rt.cores().threads;
  tc.device = rt.device();
  if (tc.normalize_features == FeatureNorm::kStandard) {
    column_statistics(rt.part().features, &tc.feature_mean, &tc.feature_inv_std,
                      rt.part().feature_scale);
  }
  Trainer trainer(tc, rt.channel(WorkerKind::kTrainer));
  trainer.state().load_parameters(c.checkpoint);
  const std::unique_ptr<EmbeddingTable> emb = load_embedding(c.checkpoint, tc.model, rt, trainer);
  const int run = c.embed() ? layer + 1 : layers;
  std::vector<float> rows = tc.model.hetero() ? typed_rows(c, rt, trainer, ids, type, run)
                                              : layerwise_rows(c, rt, trainer, ids, run);
  PredictResult res;
  if (rt.leader()) {
    report_outputs(c, ro.log_name, std::move(rows), static_cast<int64_t>(ids.size()),
                   trainer.eval().layer_width(run - 1), tc.model.bce(), &res);
  }
  CoordinatedCommunicator& main_ch = rt.channel(WorkerKind::kMain);
  main_ch.set_step(3, 0);
  main_ch.barrier();  // no rank leaves while rank 0 writes (its failure ends the job)
  return res;
}

}  // namespace dsp
