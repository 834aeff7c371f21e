#include "train/trainer.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/ranges.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>
#include <mutex>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/logging.hpp"
#include "core/rng.hpp"
#include "layout/store/embedding_table.hpp"
#include "train/device_io.hpp"
#include "train/trainer_impl.hpp"

namespace dsp {

namespace {

// Separates the dropout streams from the sampler's, which key on the same (seed, epoch, batch).
constexpr uint64_t kDropoutPurpose = 0x44524f504f5554ULL;  // "DROPOUT"

// A train step allocates and frees tensors of tens to hundreds of MB (activations, their
// gradients, the gathered features) every step. glibc serves blocks above 32 MiB with fresh
// mmaps, which the kernel zero-fills page by page on first touch and unmaps on free: measured as
// about a quarter of a GraphSAGE step on one core. Without mmap (requests a worker thread's arena
// cannot hold fall back to the main heap) and without trimming the heap, the same pages serve
// every step. The process keeps its peak heap. Skipped when malloc is tuned through the
// environment.
void keep_freed_memory() {
#ifdef __GLIBC__
  static std::once_flag once;
  std::call_once(once, [] {
    for (const char* v : {"MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"}) {
      if (std::getenv(v) != nullptr) return;
    }
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  });
#endif
}

// --tf32: LibTorch's process-wide switches for cuBLAS and cuDNN (nothing changes on the CPU).
void set_tf32(const torch::Device& device, bool on) {
  if (device.is_cpu()) return;
  at::globalContext().setAllowTF32CuBLAS(on);
  at::globalContext().setAllowTF32CuDNN(on);
}

}  // namespace

using EmbeddingRowMap = Trainer::EmbeddingRowMap;

Trainer::Trainer(const TrainConfig& config, Communicator& comm)
    : cfg_(config), comm_(comm), impl_(std::make_unique<Impl>(*this)) {
  cfg_.validate();
  keep_freed_memory();
  if (cfg_.num_threads > 0) torch::set_num_threads(cfg_.num_threads);
  // Seeded initialisation makes runs reproducible; the broadcast below makes the replicas
  // identical even if some rank's default generator was used differently before.
  impl_->device =
      cfg_.device.is_cuda()
          ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(cfg_.device.index))
          : torch::Device(torch::kCPU);
  DSP_CHECK_ARG(impl_->device.is_cpu() || torch::cuda::is_available(),
                "device '{}' requested but this LibTorch sees no CUDA device", cfg_.device.str());
  if (cfg_.normalize_features == FeatureNorm::kStandard) {
    const size_t f = static_cast<size_t>(cfg_.model.in_dim - cfg_.model.embedding_dim);
    DSP_CHECK_ARG(cfg_.feature_mean.size() == f && cfg_.feature_inv_std.size() == f,
                  "normalize_features standard needs the features' column statistics "
                  "(feature_mean, feature_inv_std: {} entries each, got {} and {})",
                  f, cfg_.feature_mean.size(), cfg_.feature_inv_std.size());
    auto column = [&](const std::vector<float>& v) {
      return torch::from_blob(const_cast<float*>(v.data()), {static_cast<int64_t>(f)},
                              torch::kFloat32)
          .to(impl_->device);
    };
    impl_->mean = column(cfg_.feature_mean);
    impl_->inv_std = column(cfg_.feature_inv_std);
  }
  torch::manual_seed(cfg_.seed);
  impl_->model = make_model(cfg_.model);
  impl_->model->to(impl_->device);
  for (const auto& kv : impl_->model->named_parameters()) {
    impl_->names.push_back(kv.key());
    impl_->params.push_back(kv.value());
    impl_->numel += kv.value().numel();
  }
  if (comm_.size() > 1) {
    auto flat = torch::empty({impl_->numel}, torch::kFloat32);
    int64_t off = 0;
    for (auto& p : impl_->params) {
      flat.narrow(0, off, p.numel()).copy_(p.detach().reshape(-1));
      off += p.numel();
    }
    OpOptions o;
    o.label = "train:init_params";
    o.host_buffers = true;  // once per job: `flat` is host memory whatever the channel's space
    comm_.broadcast(flat.data_ptr<float>(), impl_->numel, DType::kFloat32, 0, o);
    torch::NoGradGuard ng;
    off = 0;
    for (auto& p : impl_->params) {
      p.copy_(flat.narrow(0, off, p.numel()).view_as(p));
      off += p.numel();
    }
  }
  impl_->optimizer = checkpoint_optimizer(impl_->params, cfg_);
  FlatOptimizerOptions fo;
  fo.kind = cfg_.optimizer;
  fo.lr = cfg_.lr;
  fo.weight_decay = cfg_.weight_decay;
  fo.momentum = cfg_.momentum;
  impl_->flat = std::make_unique<FlatOptimizer>(impl_->params, fo);
  impl_->io = DeviceIo(impl_->device);
  impl_->tally =
      torch::zeros({2}, torch::TensorOptions().dtype(torch::kFloat64).device(impl_->device));
  set_tf32(impl_->device, cfg_.tf32);
  DSP_DEBUG("train", "{} model with {} parameters, {} on {} rank(s)", cfg_.model.model,
            impl_->numel, cfg_.optimizer, comm_.size());
}

Trainer::~Trainer() = default;

GnnModel& Trainer::model() { return *impl_->model; }

namespace {

// The per-type inputs of a heterogeneous batch (load_batch's typed_* and, for the types without
// features, the embedding rows embedding().gather added) against the model.
void check_typed_inputs(const LoadedBatch& b, const ModelConfig& cfg) {
  const int T = cfg.num_types();
  DSP_CHECK_ARG(static_cast<int>(b.typed_rows.size()) == T &&
                    static_cast<int>(b.typed_features.size()) == T &&
                    static_cast<int>(b.typed_dims.size()) == T,
                "the batch has inputs of {} node types but --model {} has {}: a heterogeneous "
                "model trains on a heterogeneous partition",
                b.typed_rows.size(), cfg.model, T);
  int64_t emb_rows = 0;
  for (int t = 0; t < T; ++t) {
    const int64_t n = static_cast<int64_t>(b.typed_rows[t].size()), d = cfg.type_dims[t];
    DSP_CHECK_ARG(b.typed_dims[t] == d &&
                      static_cast<int64_t>(b.typed_features[t].size()) == n * b.typed_dims[t],
                  "node type {}: the batch has {} feature values of width {} for {} input nodes, "
                  "the model expects width {}",
                  t, b.typed_features[t].size(), b.typed_dims[t], n, d);
    if (d == 0) emb_rows += n;
  }
  const bool need = cfg.embedding_dim > 0;
  DSP_CHECK_ARG(b.embedding_dim == cfg.embedding_dim &&
                    (b.device_embedding ||
                     static_cast<int64_t>(b.embedding.size()) == emb_rows * b.embedding_dim),
                "batch has {} embedding values of width {}, expected {} rows of the types "
                "without features x {}{}",
                b.embedding.size(), b.embedding_dim, emb_rows, cfg.embedding_dim,
                need ? " (the trainer's embedding().gather adds them)" : "");
}

// The inputs of a homogeneous batch: features and embedding rows of blocks[0]'s sources.
void check_inputs(const LoadedBatch& b, const ModelConfig& cfg) {
  const auto& s = b.sample;
  DSP_CHECK_ARG(b.typed_rows.empty(),
                "a heterogeneous batch (per-type inputs) needs --model rgcn or hsage, not {}",
                cfg.model);
  DSP_CHECK_ARG(b.feature_dim + b.embedding_dim == cfg.input_width(),
                "batch features have {} columns{} but the model expects {}", b.feature_dim,
                b.embedding_dim ? fmt::format(" and {} embedding columns", b.embedding_dim) : "",
                cfg.input_width());
  const int64_t n_in = s.blocks.front().num_src;
  DSP_CHECK_ARG(
      b.device_embedding || static_cast<int64_t>(b.embedding.size()) == n_in * b.embedding_dim,
      "batch has {} embedding values, expected {} input nodes x {}", b.embedding.size(), n_in,
      b.embedding_dim);
  DSP_CHECK_ARG(b.features_on_device()
                    ? b.device_features != nullptr
                    : static_cast<int64_t>(b.features.size()) == n_in * b.feature_dim,
                "batch has {} feature values, expected {} input nodes x {}", b.features.size(),
                n_in, b.feature_dim);
}

// A node classification batch's labels against the model's loss and output width: class ids
// (ce: [0, out_dim); bce: 0 or 1 with one output logit) or a multi-label batch's 0/1 rows (bce,
// one logit per label column).
void check_labels(const LoadedBatch& b, const ModelConfig& cfg, int64_t n_seeds) {
  if (b.multilabel()) {
    DSP_CHECK_ARG(cfg.bce(),
                  "the labels are multi-label ({} columns): train with --loss bce (or auto), not "
                  "--loss {}",
                  b.label_columns, cfg.loss);
    DSP_CHECK_ARG(b.label_columns == cfg.out_dim &&
                      static_cast<int64_t>(b.label_matrix.size()) == n_seeds * b.label_columns,
                  "batch has {} label entries in {} columns for {} seeds; the model outputs {}",
                  b.label_matrix.size(), b.label_columns, n_seeds, cfg.out_dim);
    return;
  }
  DSP_CHECK_ARG(static_cast<int64_t>(b.labels.size()) == n_seeds,
                "batch has {} labels for {} seeds", b.labels.size(), n_seeds);
  DSP_CHECK_ARG(!cfg.bce() || cfg.out_dim == 1,
                "--loss bce on class labels is binary: the model outputs one logit, not {}",
                cfg.out_dim);
  const int64_t classes = cfg.bce() ? 2 : cfg.out_dim;
  for (size_t i = 0; i < b.labels.size(); ++i) {
    DSP_CHECK_ARG(b.labels[i] >= 0 && b.labels[i] < classes,
                  "label {} of seed {} (node {}) is outside [0, {})", b.labels[i], i,
                  i < b.sample.seeds.size() ? b.sample.seeds[i] : -1, classes);
  }
}

void check_batch(const LoadedBatch& b, const ModelConfig& cfg) {
  const auto& s = b.sample;
  DSP_CHECK_ARG(static_cast<int>(s.blocks.size()) == cfg.num_blocks(),
                "the batch has {} blocks but the {}-layer model{} needs {} (the number of fanouts "
                "must equal the number of layers)",
                s.blocks.size(), cfg.layers,
                cfg.preaggregated ? " with a pre-aggregated input" : "", cfg.num_blocks());
  if (cfg.hetero()) {
    check_typed_inputs(b, cfg);
  } else {
    check_inputs(b, cfg);
  }
  const int64_t n_seeds = s.blocks.back().num_dst;
  if (cfg.predictor != PredictorKind::kNone) {
    const LinkPairs& q = s.pairs;
    DSP_CHECK_ARG(q.dst.size() == q.src.size() && q.label.size() == q.src.size(),
                  "link pairs: {} sources, {} destinations, {} labels", q.src.size(), q.dst.size(),
                  q.label.size());
    for (int64_t i = 0; i < q.size(); ++i) {
      DSP_CHECK_ARG(q.src[i] >= 0 && q.src[i] < n_seeds && q.dst[i] >= 0 && q.dst[i] < n_seeds,
                    "link pair {} ({}, {}) is outside the batch's {} seeds", i, q.src[i], q.dst[i],
                    n_seeds);
    }
    return;
  }
  check_labels(b, cfg, n_seeds);
}

// The predictions (argmax) that equal their labels `y` (on the logits' device), counted there.
torch::Tensor count_hits(const torch::Tensor& logits, const torch::Tensor& y) {
  torch::NoGradGuard ng;
  return (logits.argmax(1) == y).sum();
}

// The input features on the model's device, float32: host rows are wrapped without a copy (and
// moved when the model is elsewhere); device rows are used where they are (widened from float16
// there).
torch::Tensor feature_tensor(const LoadedBatch& b, const torch::Device& device) {
  const int64_t n = b.sample.blocks.front().num_src;
  if (!b.features_on_device()) {
    return upload_to_device(torch::from_blob(const_cast<float*>(b.features.data()),
                                             {n, b.feature_dim}, torch::kFloat32),
                            device);
  }
  const torch::Device where(torch::kCUDA, static_cast<c10::DeviceIndex>(b.device.index));
  const auto dtype = b.device_dtype == DType::kFloat16 ? torch::kFloat16 : torch::kFloat32;
  DSP_CHECK_ARG(b.device_dtype == DType::kFloat16 || b.device_dtype == DType::kFloat32,
                "device features of dtype {} are not supported", dtype_name(b.device_dtype));
  std::shared_ptr<ReleaseFence> fence = b.device_features_fence;
  const Device at = b.device;
  return torch::from_blob(
             b.device_features.get(), {n, b.feature_dim},
             [fence, at](void*) { record_release(fence, at); },
             torch::TensorOptions().dtype(dtype).device(where))
      .to(device, torch::kFloat32);
}

// The input features as TrainConfig::normalize_features says the model sees them.
torch::Tensor normalized(torch::Tensor x, FeatureNorm how, const torch::Tensor& mean,
                         const torch::Tensor& inv_std) {
  if (how == FeatureNorm::kRow) return x / x.sum(1, /*keepdim=*/true).clamp_min(1);
  if (how == FeatureNorm::kStandard) return (x - mean) * inv_std;
  return x;
}

// The model's input rows: the features as normalize_features says, then the batch's embedding
// rows (a leaf that records its gradient when `emb_grad` is set).
torch::Tensor input_tensor(const LoadedBatch& b, const torch::Device& device, FeatureNorm how,
                           const torch::Tensor& mean, const torch::Tensor& inv_std,
                           torch::Tensor* emb_leaf) {
  torch::Tensor x = normalized(feature_tensor(b, device), how, mean, inv_std);
  if (b.embedding_dim == 0) return x;
  torch::Tensor e =
      b.device_embedding
          ? *static_cast<const torch::Tensor*>(b.device_embedding.get())
          : upload_to_device(torch::from_blob(const_cast<float*>(b.embedding.data()),
                                              {b.sample.blocks.front().num_src, b.embedding_dim},
                                              torch::kFloat32),
                             device);
  if (emb_leaf) {
    // A new leaf over the batch's rows, not a copy of them (the batch outlives the step, and
    // autograd refuses in-place writes to a leaf that records its gradient).
    e = e.detach().requires_grad_(true);
    *emb_leaf = e;
  }
  return b.feature_dim == 0 ? e : torch::cat({x, e}, 1);
}

torch::Tensor host_index(const std::vector<int64_t>& v, const torch::Device& device) {
  return upload_to_device(torch::from_blob(const_cast<int64_t*>(v.data()),
                                           {static_cast<int64_t>(v.size())}, torch::kInt64),
                          device);
}

// A heterogeneous batch as the model's input: the blocks split by relation, per type its input
// positions and rows (features as normalize_features says, or the embedding rows: a leaf that
// records its gradient when `emb_leaf` is set).
HeteroInput hetero_input(const LoadedBatch& b, const ModelConfig& cfg, const torch::Device& device,
                         FeatureNorm how, torch::Tensor* emb_leaf) {
  HeteroInput in;
  for (const Block& blk : b.sample.blocks) {
    in.blocks.push_back(hetero_block_tensors(blk, cfg, device));
  }
  torch::Tensor emb;
  if (cfg.embedding_dim > 0) {
    emb = b.device_embedding
              ? *static_cast<const torch::Tensor*>(b.device_embedding.get())
              : upload_to_device(
                    torch::from_blob(const_cast<float*>(b.embedding.data()),
                                     {static_cast<int64_t>(b.embedding.size()) / cfg.embedding_dim,
                                      cfg.embedding_dim},
                                     torch::kFloat32),
                    device);
    if (emb_leaf) {
      emb = emb.detach().requires_grad_(true);  // a new leaf over the rows (input_tensor)
      *emb_leaf = emb;
    }
  }
  int64_t off = 0;
  for (int t = 0; t < cfg.num_types(); ++t) {
    const int64_t n = static_cast<int64_t>(b.typed_rows[t].size()), d = cfg.type_dims[t];
    in.rows.push_back(host_index(b.typed_rows[t], device));
    if (d == 0) {
      in.x.push_back(emb.narrow(0, off, n));
      off += n;
      continue;
    }
    auto x = upload_to_device(
        torch::from_blob(const_cast<float*>(b.typed_features[t].data()), {n, d}, torch::kFloat32),
        device);
    in.x.push_back(normalized(x, how, torch::Tensor(), torch::Tensor()));
  }
  return in;
}

// --loss bce on node labels: binary cross-entropy with logits of every label entry (a binary
// task's one column, label 1 positive; a multi-label task's every column), summed; `count` the
// entries. With `hits`, adds the entries whose logit has the label's sign (logit > 0 for 1),
// counted on the device.
torch::Tensor node_bce_loss(const torch::Tensor& out, const LoadedBatch& b,
                            const torch::Device& device, torch::Tensor* hits, int64_t* count) {
  torch::Tensor y;
  if (b.multilabel()) {
    y = torch::from_blob(
        const_cast<int8_t*>(b.label_matrix.data()),
        {static_cast<int64_t>(b.label_matrix.size()) / b.label_columns, b.label_columns},
        torch::kInt8);
  } else {
    y = torch::from_blob(const_cast<int64_t*>(b.labels.data()),
                         {static_cast<int64_t>(b.labels.size()), 1}, torch::kInt64);
  }
  y = upload_to_device(y, device).to(torch::kFloat32);
  if (hits) {
    torch::NoGradGuard ng;
    hits->add_(((out > 0).to(torch::kFloat32) == y).sum());
  }
  *count = y.numel();
  return torch::nn::functional::binary_cross_entropy_with_logits(
      out, y,
      torch::nn::functional::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kSum));
}

// Link prediction's loss: binary cross-entropy of the predictor's logit of every pair (summed),
// and (with `hits`) adds the pairs whose logit has the label's sign, counted on the device.
torch::Tensor link_loss(GnnModel& model, const torch::Tensor& h, const LinkPairs& q,
                        const torch::Device& device, torch::Tensor* hits) {
  const int64_t n = q.size();
  auto y = upload_to_device(
      torch::from_blob(const_cast<float*>(q.label.data()), {n}, torch::kFloat32), device);
  auto logits = model.score(h.index_select(0, host_index(q.src, device)),
                            h.index_select(0, host_index(q.dst, device)));
  if (hits) {
    torch::NoGradGuard ng;
    hits->add_(((logits > 0).to(torch::kFloat32) == y).sum());
  }
  return torch::nn::functional::binary_cross_entropy_with_logits(
      logits, y,
      torch::nn::functional::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kSum));
}

bool batch_empty(const LoadedBatch& b) {
  return b.sample.blocks.empty() || b.sample.blocks.back().num_dst == 0;
}

}  // namespace

nlohmann::json StepTimes::to_json() const {
  return {{"steps", steps},
          {"forward_s", forward_s},
          {"backward_s", backward_s},
          {"all_reduce_s", all_reduce_s},
          {"optimizer_s", optimizer_s},
          {"aggregation_forward_s", aggregation_forward_s},
          {"aggregation_backward_s", aggregation_backward_s},
          {"thread_cpu_s", thread_cpu_s}};
}

namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double seconds_since(std::chrono::steady_clock::time_point& t) {
  const auto now = std::chrono::steady_clock::now();
  const double s = std::chrono::duration<double>(now - t).count();
  t = now;
  return s;
}

}  // namespace

// The model's output for a batch (train or eval mode as set): a homogeneous model over the
// blocks and the input rows, a heterogeneous one over the per-type inputs. `emb_leaf` as
// input_tensor's.
torch::Tensor Trainer::Impl::run_model(const LoadedBatch& batch, at::Generator* gen,
                                       torch::Tensor* emb_leaf) {
  if (owner.cfg_.model.hetero()) {
    const HeteroInput in =
        hetero_input(batch, owner.cfg_.model, device, owner.cfg_.normalize_features, emb_leaf);
    return model->forward_hetero(in, gen);
  }
  auto blocks = blocks_to_tensors(batch.sample.blocks, device);
  auto x = input_tensor(batch, device, owner.cfg_.normalize_features, mean, inv_std, emb_leaf);
  return model->forward(blocks, x, gen);
}

// Forward and backward of one batch with the dropout stream of `stream` (the rank of the
// symmetric job that trains it); its gradients, loss sum and seed count go into `row` (numel + 2
// floats, zero on entry): the parameters' gradients are views of the row, which autograd adds
// into. With `hits`, adds the batch's train predictions that hit their labels (on the device);
// `total` gets their count. Nothing is read from the device.
void Trainer::Impl::backward_into(const LoadedBatch& batch, uint64_t stream, torch::Tensor row,
                                  torch::Tensor* hits, int64_t* total) {
  check_batch(batch, owner.cfg_.model);
  int64_t off = 0;
  for (auto& p : params) {
    p.mutable_grad() = row.narrow(0, off, p.numel()).view(p.sizes());
    off += p.numel();
  }
  auto clock = std::chrono::steady_clock::now();
  torch::Tensor emb;
  // The masks' keys come from a host generator on every device (the same masks on a GPU as on
  // the CPU, and no key read back from the device).
  const uint64_t key = mix64(
      rng_key(owner.cfg_.seed, batch.sample.epoch, batch.sample.batch, stream) ^ kDropoutPurpose);
  at::Generator gen = at::detail::createCPUGenerator(key);
  auto out = run_model(batch, &gen, embedding.attached() ? &emb : nullptr);
  torch::Tensor loss;
  int64_t count = 0;
  if (owner.cfg_.model.predictor != PredictorKind::kNone) {
    loss = link_loss(*model, out, batch.sample.pairs, device, hits);
    count = batch.sample.pairs.size();
  } else if (owner.cfg_.model.bce()) {
    loss = node_bce_loss(out, batch, device, hits, &count);
  } else {
    auto y = host_index(batch.labels, device);
    if (hits) hits->add_(count_hits(out, y));
    loss = torch::nn::functional::cross_entropy(
        out, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    count = y.size(0);
  }
  if (total) *total += count;
  owner.times_.forward_s += seconds_since(clock);
  loss.backward();
  for (auto& p : params) p.mutable_grad() = torch::Tensor();  // the row holds them
  embedding.keep_gradient(batch, emb);
  row.narrow(0, numel, 1).copy_(loss.detach().reshape({1}));
  row[numel + 1] = static_cast<float>(count);
  owner.times_.backward_s += seconds_since(clock);
}

// The step from the summed gradients, loss sum and seed count (`sum`, numel + 2 floats): the
// mean gradient over the step's seeds, then the optimizer. Returns the mean loss ([1], on the
// device). `local` says whether this rank had seeds: then the global count is not 0 and nothing
// is read; otherwise (or when an embedding table needs the count on the host) one read.
torch::Tensor Trainer::Impl::apply_step(torch::Tensor sum, bool local) {
  auto clock = std::chrono::steady_clock::now();
  ++owner.times_.steps;
  if (!local || embedding.attached()) {
    const torch::Tensor totals = io.read(sum.narrow(0, numel, 2));
    last_count = totals.data_ptr<float>()[1];
    // No rank had a seed: nothing to learn from (the same on every rank).
    if (last_count == 0) return torch::zeros({1}, sum.options());
  }
  const torch::Tensor n = sum.narrow(0, numel + 1, 1);
  auto grad = sum.narrow(0, 0, numel);
  grad.div_(n);
  flat->step(grad);
  ++owner.step_;
  owner.times_.optimizer_s += seconds_since(clock);
  return sum.narrow(0, numel, 1) / n;
}

// One symmetric step; returns its figures on the device: [mean loss, train hits] (float32), and
// adds the predictions counted to `total`.
torch::Tensor Trainer::Impl::symmetric_step(const LoadedBatch& batch, bool count, int64_t* total) {
  model->train();
  const double cpu0 = thread_cpu_seconds();
  const AggregationTimes agg0 = aggregation_times();
  const auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  // One bucket on the model's device: every gradient, then the loss sum and the seed count.
  auto bucket = torch::zeros({numel + 2}, opts);
  auto hits = torch::zeros({1}, opts);
  embedding.clear();
  const bool local = !batch_empty(batch);
  if (local) {
    backward_into(batch, static_cast<uint64_t>(owner.comm_.rank()), bucket, count ? &hits : nullptr,
                  total);
  }
  const AggregationTimes& agg1 = aggregation_times();
  owner.times_.aggregation_forward_s += agg1.forward_s - agg0.forward_s;
  owner.times_.aggregation_backward_s += agg1.backward_s - agg0.backward_s;
  auto clock = std::chrono::steady_clock::now();
  all_reduce_bucket(bucket);
  owner.times_.all_reduce_s += seconds_since(clock);
  const torch::Tensor loss = apply_step(bucket, local);
  if (embedding.attached()) {
    // The embedding rows' gradients go to their owners (collective: every rank, every step).
    clock = std::chrono::steady_clock::now();
    embedding.apply(last_count);
    owner.times_.optimizer_s += seconds_since(clock);
  }
  owner.times_.thread_cpu_s += thread_cpu_seconds() - cpu0;
  return torch::cat({loss, hits});
}

namespace {

// The figures [mean loss, hits] of a step read (one read), the hits added to `correct`.
float read_figures(DeviceIo& io, const torch::Tensor& figures, int64_t total, EvalCounts* correct) {
  const torch::Tensor f = io.read(figures);
  if (correct) {
    correct->correct += static_cast<int64_t>(f.data_ptr<float>()[1]);
    correct->total += total;
  }
  return f.data_ptr<float>()[0];
}

}  // namespace

float Trainer::train_step(const LoadedBatch& batch, EvalCounts* correct) {
  int64_t total = 0;
  const torch::Tensor f = impl_->symmetric_step(batch, correct != nullptr, &total);
  return read_figures(impl_->io, f, total, correct);
}

void Trainer::step(const LoadedBatch& batch, bool tally_correct) {
  int64_t total = 0;
  impl_->add_to_tally(impl_->symmetric_step(batch, tally_correct, &total));
  if (tally_correct) impl_->tally_total += total;
}

void Trainer::Impl::add_to_tally(const torch::Tensor& figures) {
  tally.add_(figures);
  ++tally_steps;
}

Trainer::Tally Trainer::take_tally() {
  auto& I = *impl_;
  const torch::Tensor t = I.io.read(I.tally);
  Tally out;
  out.loss_sum = t.data_ptr<double>()[0];
  out.steps = I.tally_steps;
  out.correct.correct = static_cast<int64_t>(t.data_ptr<double>()[1]);
  out.correct.total = I.tally_total;
  I.tally.zero_();
  I.tally_steps = 0;
  I.tally_total = 0;
  return out;
}

double Trainer::running_loss() {
  auto& I = *impl_;
  if (I.tally_steps == 0) return 0;
  return I.io.read(I.tally.narrow(0, 0, 1)).data_ptr<double>()[0] /
         static_cast<double>(I.tally_steps);
}

StepEmbedding& Trainer::embedding() { return impl_->embedding; }

double Trainer::time_backward(const LoadedBatch& batch) {
  if (batch_empty(batch)) return 0;
  auto& I = *impl_;
  I.model->train();
  const StepTimes saved = times_;
  const auto t0 = std::chrono::steady_clock::now();
  auto row =
      torch::zeros({I.numel + 2}, torch::TensorOptions().dtype(torch::kFloat32).device(I.device));
  impl_->backward_into(batch, static_cast<uint64_t>(comm_.rank()), row, nullptr, nullptr);
  for (auto& p : I.params) p.mutable_grad() = torch::Tensor();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  times_ = saved;
  return s;
}

// The slots' step (train_slots); returns its figures [mean loss, hits] on the device and adds
// the predictions counted to `total`.
torch::Tensor Trainer::Impl::slots_step(const std::vector<SlotBatch>& batches, int slots,
                                        bool count, int64_t* total) {
  DSP_CHECK_ARG(slots >= 1, "train_slots: {} slots", slots);
  DSP_CHECK_ARG(!embedding.attached(), "train_slots: learnable embeddings train with train_step");
  model->train();
  const double cpu0 = thread_cpu_seconds();
  const AggregationTimes agg0 = aggregation_times();
  const int64_t width = numel + 2;
  const auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  auto rows = torch::zeros({slots * width}, opts);
  auto hits = torch::zeros({1}, opts);
  std::vector<bool> seen(slots, false);
  bool local = false;
  for (const SlotBatch& b : batches) {
    DSP_CHECK_ARG(b.slot >= 0 && b.slot < slots && !seen[b.slot] && b.batch != nullptr,
                  "train_slots: slot {} of {} given twice, out of range or without a batch", b.slot,
                  slots);
    seen[b.slot] = true;
    if (!batch_empty(*b.batch)) {
      local = true;
      backward_into(*b.batch, static_cast<uint64_t>(b.slot), rows.narrow(0, b.slot * width, width),
                    count ? &hits : nullptr, total);
    }
  }
  const AggregationTimes& agg1 = aggregation_times();
  owner.times_.aggregation_forward_s += agg1.forward_s - agg0.forward_s;
  owner.times_.aggregation_backward_s += agg1.backward_s - agg0.backward_s;
  auto clock = std::chrono::steady_clock::now();
  // Exactly one rank fills each row, so the all-reduce adds exact zeros; the rows are then summed
  // in slot order on every rank, whoever trained which slot.
  all_reduce_bucket(rows);
  auto sum = rows.narrow(0, 0, width).clone();
  for (int v = 1; v < slots; ++v) sum.add_(rows.narrow(0, v * width, width));
  owner.times_.all_reduce_s += seconds_since(clock);
  const torch::Tensor loss = apply_step(sum, local);
  owner.times_.thread_cpu_s += thread_cpu_seconds() - cpu0;
  return torch::cat({loss, hits});
}

float Trainer::train_slots(const std::vector<SlotBatch>& batches, int slots, EvalCounts* correct) {
  int64_t total = 0;
  const torch::Tensor f = impl_->slots_step(batches, slots, correct != nullptr, &total);
  return read_figures(impl_->io, f, total, correct);
}

void Trainer::step_slots(const std::vector<SlotBatch>& batches, int slots, bool tally_correct) {
  int64_t total = 0;
  impl_->add_to_tally(impl_->slots_step(batches, slots, tally_correct, &total));
  if (tally_correct) impl_->tally_total += total;
}

// Sums the bucket over the ranks where the communicator takes its buffers: in place when that is
// the bucket's memory (host with MPI; device with NCCL or staged MPI), through a copy otherwise.
void Trainer::Impl::all_reduce_bucket(torch::Tensor& bucket) {
  if (owner.comm_.size() == 1) return;
  const bool comm_on_device = owner.comm_.memory_space() == MemorySpace::kDevice;
  torch::Tensor buf = bucket.is_cuda() == comm_on_device
                          ? bucket
                          : bucket.to(comm_on_device ? device : torch::Device(torch::kCPU));
  OpOptions o;
  o.label = "train:grad_all_reduce";
  // The channel reads the bucket on its own stream (NCCL) or thread (staged copies): LibTorch's
  // writes to it, queued on the current stream, must have completed (counted on every device).
  io.wait();
  owner.comm_.all_reduce(buf.data_ptr<float>(), buf.numel(), DType::kFloat32, ReduceOp::kSum, o);
  owner.comm_.synchronize(o);
  if (!buf.is_same(bucket)) bucket.copy_(buf);
}

void Trainer::set_threads(int threads) { torch::set_num_threads(std::max(1, threads)); }

void Trainer::set_lr(double lr) {
  for (auto& group : impl_->optimizer->param_groups()) group.options().set_lr(lr);
  impl_->flat->set_lr(lr);
}

DeviceIo& Trainer::device_io() { return impl_->io; }

ModelEval Trainer::eval() { return ModelEval(*this); }

TrainerState Trainer::state() { return TrainerState(*this); }

EvalCounts ModelEval::eval_batch(const LoadedBatch& batch) {
  EvalTally t = new_tally();
  eval_batch(batch, &t);
  return {t.correct(), t.total()};
}

EvalTally ModelEval::new_tally() const {
  return EvalTally(t_.cfg_.model.bce(), t_.cfg_.model.out_dim);
}

void ModelEval::eval_batch(const LoadedBatch& batch, EvalTally* tally) {
  if (batch_empty(batch)) return;
  check_batch(batch, t_.cfg_.model);
  auto& I = *t_.impl_;
  torch::NoGradGuard ng;
  I.model->eval();
  const auto out = I.io.read(t_.impl_->run_model(batch, nullptr, nullptr));
  const float* logits = out.data_ptr<float>();
  if (batch.multilabel()) {
    tally->add(logits, out.size(0), batch.label_matrix.data());
  } else {
    tally->add(logits, out.size(0), batch.labels.data());
  }
}

at::Tensor ModelEval::infer_layer(int layer, const LoadedBatch& batch, const at::Tensor& hidden,
                                  const at::Tensor& gcn_src_scale) {
  auto& I = *t_.impl_;
  DSP_CHECK_ARG(batch.sample.blocks.size() == 1, "layer-wise inference takes one block, got {}",
                batch.sample.blocks.size());
  torch::NoGradGuard ng;
  I.model->eval();
  const Block& blk = batch.sample.blocks.front();
  BlockTensors bt = block_to_tensors(blk, I.device);
  torch::Tensor h = hidden;
  if (layer == 0) {
    DSP_CHECK_ARG(batch.feature_dim + batch.embedding_dim == t_.cfg_.model.in_dim &&
                      (batch.features_on_device() || static_cast<int64_t>(batch.features.size()) ==
                                                         blk.num_src * batch.feature_dim),
                  "layer-wise inference: {} feature columns for {} input nodes, the model expects "
                  "{} columns",
                  batch.feature_dim + batch.embedding_dim, blk.num_src, t_.cfg_.model.in_dim);
    h = input_tensor(batch, I.device, t_.cfg_.normalize_features, I.mean, I.inv_std, nullptr);
  }
  DSP_CHECK_ARG(h.dim() == 2 && h.size(0) == blk.num_src && h.device() == I.device,
                "layer-wise inference: layer {}'s input rows must be [{}, {}] on the trainer's "
                "device",
                layer, blk.num_src, layer > 0 ? layer_width(layer - 1) : t_.cfg_.model.in_dim);
  if (t_.cfg_.model.model == ModelKind::kGcn && gcn_src_scale.defined()) {
    // The whole graph's degrees: a full in-neighbourhood has the graph's in-degree already.
    auto in_deg = bt.indptr.narrow(0, 1, blk.num_dst) - bt.indptr.narrow(0, 0, blk.num_dst);
    bt.cache->gcn_dst_scale = (in_deg.to(torch::kFloat32) + 1.0).rsqrt();
    bt.cache->gcn_src_scale = gcn_src_scale;
  }
  return I.model->forward_layer(layer, bt, h);
}

int64_t ModelEval::layer_width(int layer) const { return t_.impl_->model->layer_width(layer); }

std::vector<float> ModelEval::typed_outputs(const LoadedBatch& batch, int layers) {
  DSP_CHECK_ARG(t_.cfg_.model.hetero(), "typed outputs need a heterogeneous model, not {}",
                t_.cfg_.model.model);
  auto& I = *t_.impl_;
  torch::NoGradGuard ng;
  I.model->eval();
  const HeteroInput in =
      hetero_input(batch, t_.cfg_.model, I.device, t_.cfg_.normalize_features, nullptr);
  const torch::Tensor out = I.io.read(I.model->forward_hetero(in, nullptr, layers)).contiguous();
  const float* p = out.data_ptr<float>();
  return std::vector<float>(p, p + out.numel());
}

std::vector<float> ModelEval::score(const float* hs, const float* hd, int64_t n) {
  auto& I = *t_.impl_;
  torch::NoGradGuard ng;
  I.model->eval();
  const int64_t w = t_.cfg_.model.out_dim;
  auto wrap = [&](const float* p) {
    return torch::from_blob(const_cast<float*>(p), {n, w}, torch::kFloat32).to(I.device);
  };
  auto s = I.io.read(I.model->score(wrap(hs), wrap(hd)));
  return std::vector<float>(s.data_ptr<float>(), s.data_ptr<float>() + n);
}

EvalCounts all_reduce(Communicator& comm, const EvalCounts& local) {
  int64_t buf[2] = {local.correct, local.total};
  if (comm.size() > 1) {
    OpOptions o;
    o.label = "train:eval_counts";
    o.host_buffers = true;
    comm.all_reduce(buf, 2, DType::kInt64, ReduceOp::kSum, o);
  }
  return {buf[0], buf[1]};
}

}  // namespace dsp
