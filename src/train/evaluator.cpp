#include "train/evaluator.hpp"

#include <algorithm>
#include <utility>

#include <fmt/ranges.h>

#include "core/logging.hpp"
#include "core/rng.hpp"
#include "core/timer.hpp"
#include "layout/partition/partition_dir.hpp"
#include "pipeline/pipeline.hpp"
#include "train/checkpoint_keeper.hpp"
#include "train/inference.hpp"
#include "train/progress.hpp"
#include "train/step_embedding.hpp"
#include "train/typed_rows.hpp"

namespace dsp {

namespace {

// Batch numbers of evaluation: a pure function of (split, step), so a resumed job evaluates with
// exactly the draws of an uninterrupted one. Training batches stay below kEvalBase.
constexpr int64_t kEvalBase = int64_t{1} << 40;
// The "layer" of the key that picks --eval-max-nodes' subsample (no sampling layer is this high).
constexpr uint64_t kEvalSubsampleLayer = 0xe5a1;
constexpr int64_t kEvalSplitStride = int64_t{1} << 32;
int64_t eval_batch_id(int split, int64_t step) {
  return kEvalBase + split * kEvalSplitStride + step;
}
// The collectives around a split's evaluation (step agreement, counts) use ids past its steps.
int64_t eval_control_id(int split, int k) {
  return kEvalBase + split * kEvalSplitStride + kEvalSplitStride / 2 + k;
}
// The barrier after an epoch's checkpoint (every rank's embedding shard written) is past every
// training batch, before evaluation's ids.
static_assert(CheckpointKeeper::kBarrierStep == kEvalBase - 1);

}  // namespace

Evaluator::Evaluator(const JobConfig& cfg, RankRuntime& rt, Trainer& trainer,
                     const ModelConfig& model, std::unique_ptr<CollectiveSampler> sampler,
                     LinkTask* link, MetricKind metric)
    : cfg_(cfg),
      rt_(rt),
      trainer_(trainer),
      sampler_(std::move(sampler)),
      link_(link),
      metric_(metric),
      model_(model),
      layers_(model.layers) {
  valid_ids_ = rt_.local_ids(Split::kValid);
  test_ids_ = rt_.local_ids(Split::kTest);
  count_splits();
}

void Evaluator::choose() {
  if (cfg_.eval_max_nodes > 0) subsample();  // main channel, step (-1, 4)
  choose_mode();                             // main channel, steps (-1, 3) and (-1, 5)
}

void Evaluator::keep_best() {
  if (eval_.final_full) best_params_ = trainer_.state().flat_parameters();
}

void Evaluator::count_splits() {
  if (link_) return;
  int64_t n[2] = {static_cast<int64_t>(valid_ids_.size()), static_cast<int64_t>(test_ids_.size())};
  CoordinatedCommunicator& main_ch = rt_.channel(WorkerKind::kMain);
  main_ch.set_step(-1, 8);
  main_ch.all_reduce(n, 2, DType::kInt64, ReduceOp::kSum);
  last_.has_valid = n[0] > 0;
  last_.has_test = n[1] > 0;
  DSP_CHECK_ARG(
      last_.has_valid || (cfg_.patience == 0 && cfg_.train.lr_schedule != LrScheduleKind::kPlateau),
      "{} acts on validation, but {} has no validation nodes",
      cfg_.patience > 0 ? "--patience" : "--lr-schedule plateau", cfg_.rank.path);
  if (!rt_.leader() || (last_.has_valid && last_.has_test)) return;
  DSP_INFO("train", "{}: {}", cfg_.rank.path,
           !last_.has_valid && !last_.has_test
               ? "no validation or test nodes: nothing is evaluated, and "
                 "best.pt is the last epoch's model"
           : !last_.has_valid ? "no validation nodes: best.pt is the last evaluated epoch's model, "
                                "and its test figure is reported"
                              : "no test nodes: validation only, no test figure");
}

// --eval as resolved (eval_choice.hpp); link prediction ranks held-out edges from every node's
// output, so it evaluates with full neighbourhoods (a typed graph: every neighbour sampled).
void Evaluator::choose_mode() {
  if (!link_) {
    std::vector<int64_t> widths;
    for (int l = 0; l < layers_; ++l) widths.push_back(trainer_.eval().layer_width(l));
    const int64_t nodes = static_cast<int64_t>(valid_ids_.size() + test_ids_.size());
    eval_ =
        dsp::choose_eval(cfg_, rt_, model_, widths, nodes, trainer_.device_io().device().is_cuda());
    return;
  }
  eval_.full = eval_.fits = true;
  eval_.mode = EvalMode::kFull;
  if (!rt_.leader()) return;
  const PartitionData& part = rt_.part();
  const int64_t per = part.meta.link_negatives_per_positive;
  DSP_INFO("train",
           "evaluation: full neighbourhoods, {}; Hits@{}, MRR and AUC of {} validation and {} "
           "test edges against {}; {} picks the best epoch",
           rt_.hetero() ? "every neighbour of every relation sampled" : "layer by layer",
           fmt::join(cfg_.link.hits_k, ","), part.link_valid.dim(0), part.link_test.dim(0),
           per > 0 ? fmt::format("{} negatives each", per)
                   : fmt::format("{} and {} negatives", part.link_valid_neg.dim(0),
                                 part.link_test_neg.dim(0)),
           link_->metric());
}

// --eval-max-nodes: each split's node kept with probability max / (the split's size), by a hash
// of (seed, its dataset id), so every rank count keeps the same nodes; the counts are logged.
void Evaluator::subsample() {
  const Array new2old = load_new2old(rt_.partition_dir(), rt_.part().meta.num_nodes);
  const int64_t* orig = new2old.data<int64_t>();
  CoordinatedCommunicator& main_ch = rt_.channel(WorkerKind::kMain);
  main_ch.set_step(-1, 4);
  int64_t sizes[4] = {static_cast<int64_t>(valid_ids_.size()),
                      static_cast<int64_t>(test_ids_.size()), 0, 0};
  main_ch.all_reduce(sizes, 2, DType::kInt64, ReduceOp::kSum);
  const uint64_t key = rng_key(cfg_.seed, 0, 0, kEvalSubsampleLayer);
  std::vector<int64_t>* splits[2] = {&valid_ids_, &test_ids_};
  for (int k = 0; k < 2; ++k) {
    const double keep = static_cast<double>(cfg_.eval_max_nodes) / std::max<int64_t>(sizes[k], 1);
    std::vector<int64_t>& ids = *splits[k];
    ids.erase(std::remove_if(ids.begin(), ids.end(),
                             [&](int64_t v) {
                               return RngStream(key, static_cast<uint64_t>(orig[v])).uniform01() >=
                                      keep;
                             }),
              ids.end());
    sizes[2 + k] = static_cast<int64_t>(ids.size());
  }
  main_ch.all_reduce(sizes + 2, 2, DType::kInt64, ReduceOp::kSum);
  if (rt_.leader()) {
    DSP_INFO("train",
             "evaluation on {} of the {} validation and {} of the {} test nodes "
             "(--eval-max-nodes {}, the same nodes at any rank count)",
             sizes[2], sizes[0], sizes[3], sizes[1], cfg_.eval_max_nodes);
  }
}

// This rank's rows of the model's output on the whole graph (full-neighbour layer-wise
// inference), with the evaluation's progress and steps.
std::vector<float> Evaluator::infer_all(int64_t epoch) {
  InferenceOptions io;
  io.batch_size = cfg_.eval_batch_size;
  io.epoch = epoch;
  io.first_step = eval_batch_id(2, 0);
  EvalProgress progress(rt_.leader() && cfg_.progress, rt_.leader(), "full neighbourhoods");
  io.progress = [&progress](int64_t done, int64_t total) { progress.update(done, total); };
  return layerwise_inference(rt_, trainer_, io);
}

std::pair<EvalTally, EvalTally> Evaluator::evaluate_full(int64_t epoch) {
  const std::vector<float> logits = infer_all(epoch);
  const int64_t width = trainer_.eval().layer_width(layers_ - 1);
  const int64_t first = rt_.part().meta.offsets[rt_.rank()];
  const Array& labels = rt_.part().labels;
  CoordinatedCommunicator& tc = rt_.channel(WorkerKind::kTrainer);
  EvalTally val = trainer_.eval().new_tally(), test = trainer_.eval().new_tally();
  tc.set_step(epoch, eval_control_id(0, 1));
  tally_rows(logits, width, first, valid_ids_, labels, &val);
  val.combine(tc, "train:eval_valid");
  tc.set_step(epoch, eval_control_id(1, 1));
  tally_rows(logits, width, first, test_ids_, labels, &test);
  test.combine(tc, "train:eval_test");
  return {val, test};
}

// A typed link job's output rows at their part rows: every node of the link relation's two types
// that this rank owns, by sampling every neighbour of every relation (eval_sampler_); the rows
// of other types stay zero (no pair reads them).
std::vector<float> Evaluator::typed_link_rows(int64_t epoch) {
  const PartitionMeta& meta = rt_.part().meta;
  const HeteroLayout& h = *meta.hetero;
  const RelationInfo& r = h.schema.relations[h.schema.link];
  const int64_t b = meta.offsets[rt_.rank()], e = meta.offsets[rt_.rank() + 1];
  std::vector<int64_t> seeds;
  for (int64_t v = b; v < e; ++v) {
    const int t = h.type_of(v);
    if (t == r.src_type || t == r.dst_type) seeds.push_back(v);
  }
  EvalProgress progress(rt_.leader() && cfg_.progress, rt_.leader(), "full neighbourhoods");
  rt_.channel(WorkerKind::kMain).set_step(epoch, eval_control_id(2, 0));
  const int layers = layers_;
  const std::vector<float> rows = typed_outputs_of(
      rt_, trainer_, *sampler_, seeds, layers, cfg_.eval_batch_size, epoch, eval_batch_id(2, 0),
      [&progress](int64_t done, int64_t total) { progress.update(done, total); });
  const int64_t width = trainer_.eval().layer_width(layers - 1);
  std::vector<float> out(static_cast<size_t>((e - b) * width), 0.0f);
  for (size_t i = 0; i < seeds.size(); ++i) {
    std::copy(rows.begin() + static_cast<int64_t>(i) * width,
              rows.begin() + static_cast<int64_t>(i + 1) * width,
              out.begin() + (seeds[i] - b) * width);
  }
  return out;
}

double Evaluator::final_full_test(const RunRecord& run) {
  // Full evaluation (a typed graph's by sampling every neighbour): the best epoch's test figure.
  if (eval_.full || cfg_.eval == EvalMode::kFull) {
    return run.best_epoch >= 0 ? run.test_at_best : -1;
  }
  if (best_params_.empty()) return -1;
  const std::vector<float> last = trainer_.state().flat_parameters();
  trainer_.state().set_flat_parameters(best_params_);
  const double test = evaluate_full(cfg_.epochs + 1).second.metric(metric_);
  trainer_.state().set_flat_parameters(last);
  return test;
}

std::string Evaluator::summary(double test_full) const {
  if (eval_.full || cfg_.eval == EvalMode::kFull) return "full neighbourhoods";
  const std::string sampled = fmt::format("sampled, fanouts {}", eval_fanouts_text(cfg_));
  if (test_full < 0) return sampled;
  return fmt::format("{}; with full neighbourhoods {:.4f}", sampled, test_full);
}

// Evaluation over this rank's share of `ids` (global, owned), the same steps on every rank.
EvalTally Evaluator::evaluate(int split, const std::vector<int64_t>& ids, int64_t epoch) {
  const int64_t bs = cfg_.eval_batch_size;
  int64_t steps = (static_cast<int64_t>(ids.size()) + bs - 1) / bs;
  CoordinatedCommunicator& main_ch = rt_.channel(WorkerKind::kMain);
  main_ch.set_step(epoch, eval_control_id(split, 0));
  main_ch.all_reduce(&steps, 1, DType::kInt64, ReduceOp::kMax);
  EvalTally tally = trainer_.eval().new_tally();
  EvalProgress progress(rt_.leader() && cfg_.progress, rt_.leader(), split == 0 ? "valid" : "test");
  // Training's read-ahead groups (--read-ahead): a group's batches are sampled, their cold rows
  // read in one sweep, then each is loaded and evaluated.
  const int64_t k = std::max(1, read_ahead_);
  for (int64_t g = 0; g < steps; g += k) {
    std::vector<SampledBatch> group;
    for (int64_t s = g; s < std::min(steps, g + k); ++s) {
      const int64_t b = std::min<int64_t>(ids.size(), s * bs);
      const int64_t e = std::min<int64_t>(ids.size(), b + bs);
      const std::vector<int64_t> seeds(ids.begin() + b, ids.begin() + e);
      rt_.channel(WorkerKind::kSampler).set_step(epoch, eval_batch_id(split, s));
      group.push_back(sampler_->sample(seeds, epoch, eval_batch_id(split, s)));
    }
    if (k > 1) rt_.features().read_ahead(batch_pointers(group));
    for (int64_t s = g; s < g + static_cast<int64_t>(group.size()); ++s) {
      rt_.channel(WorkerKind::kLoader).set_step(epoch, eval_batch_id(split, s));
      LoadedBatch lb = rt_.features().load(std::move(group[static_cast<size_t>(s - g)]));
      rt_.channel(WorkerKind::kTrainer).set_step(epoch, eval_batch_id(split, s));
      trainer_.embedding().gather(lb);  // collective; nothing without embeddings
      trainer_.eval().eval_batch(lb, &tally);
      progress.update(s + 1, steps);
    }
  }
  if (k > 1) rt_.features().read_ahead({});
  rt_.channel(WorkerKind::kTrainer).set_step(epoch, eval_control_id(split, 1));
  tally.combine(rt_.channel(WorkerKind::kTrainer),
                split == 0 ? "train:eval_valid" : "train:eval_test");
  return tally;
}

std::pair<double, double> Evaluator::run(int64_t epoch) {
  Stopwatch eval_time;
  double val = 0, test = 0;
  if (link_) {
    // Every node's output by full-neighbour inference (a typed graph's: typed_link_rows).
    const std::vector<float> h = rt_.hetero() ? typed_link_rows(epoch) : infer_all(epoch);
    link_->evaluate(h, trainer_.eval().layer_width(layers_ - 1), epoch, trainer_,
                    [epoch](int split) { return eval_control_id(split, 1); });
    val = link_->value(link_->valid());
    test = link_->value(link_->test());
  } else if (last_.has_valid || last_.has_test) {
    if (eval_.full) {
      std::tie(last_.valid, last_.test) = evaluate_full(epoch);
    } else {
      last_.valid = evaluate(0, valid_ids_, epoch);
      last_.test = evaluate(1, test_ids_, epoch);
    }
    val = last_.valid.metric(metric_);
    test = last_.test.metric(metric_);
  }
  last_.seconds = eval_time.seconds();
  return {val, test};
}

}  // namespace dsp
