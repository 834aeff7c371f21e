#include "train/run_report.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/ranges.h>

#include "core/console.hpp"
#include "core/error.hpp"
#include "core/logging.hpp"
#include "train/checkpoint_files.hpp"

namespace dsp {

namespace {
// "1433 features", or a typed graph's per type: "features paper 128, author learnt 64".
std::string features_text(const PartitionMeta& meta, int64_t embedding_dim) {
  if (!meta.hetero) return fmt::format("{} features", meta.feature_dim);
  std::vector<std::string> per;
  for (const NodeTypeInfo& t : meta.hetero->schema.node_types) {
    per.push_back(t.feature_dim > 0   ? fmt::format("{} {}", t.name, t.feature_dim)
                  : embedding_dim > 0 ? fmt::format("{} learnt {}", t.name, embedding_dim)
                                      : fmt::format("{} none", t.name));
  }
  return fmt::format("features {}", fmt::join(per, ", "));
}
}  // namespace

RunReport::RunReport(const JobConfig& cfg, RankRuntime& rt, const TrainConfig& tc,
                     const Evaluator& eval, const LinkTask* link)
    : cfg_(cfg), rt_(rt), tc_(tc), model_(tc.model), eval_(eval), link_(link) {
  res_.has_valid = eval.last().has_valid;
  res_.has_test = eval.last().has_test;
  // The partition's --feature-dtype and its error, reported beside the accuracy.
  const PartitionMeta& pm = rt_.part().meta;
  res_.feature_dtype = pm.feature_dim > 0 ? dtype_name(pm.feature_dtype) : "";
  res_.feature_max_abs_error = pm.feature_conversion.max_abs_error;
  res_.feature_rel_rms_error = pm.feature_conversion.rel_rms_error;
}

void RunReport::open_metrics(bool resumed, int start_epoch) {
  if (!rt_.leader() || cfg_.metrics_file.empty()) return;
  // A resumed run continues the file after its checkpoint's epochs (truncate_metrics).
  if (resumed) truncate_metrics(cfg_.metrics_file, start_epoch);
  metrics_.reset(std::fopen(cfg_.metrics_file.c_str(), resumed ? "a" : "w"));
  DSP_CHECK_T(IoError, metrics_ != nullptr, "{}: cannot open for writing", cfg_.metrics_file);
}

void RunReport::start(const EpochScheduler& sched, int64_t steps, int samplers) const {
  if (!rt_.leader()) return;
  log_start(sched, steps, samplers);
  warn_few_steps(sched);
  const PartitionMeta& pm = rt_.part().meta;
  if (pm.feature_conversion.converted) DSP_INFO("train", "{}", describe_feature_storage(pm));
}

void RunReport::trained(const EpochMetrics& em) {
  em_ = em;
  epoch_time_sum_ += em.wall_s;
  ++res_.epochs_run;
  res_.mean_epoch_s = epoch_time_sum_ / res_.epochs_run;
}

void RunReport::epoch(const Epoch& e) {
  res_.final_loss = e.loss;
  res_.cache_hit_rate = e.cache_hit_rate;
  if (rt_.leader()) {
    const std::string evals = e.evaluated ? eval_text(e.val, e.test) : "";
    const bool evaluated = e.evaluated && eval_.evaluates();
    const std::string eval_time =
        evaluated ? fmt::format(" | eval {:.2f} s", eval_.last().seconds) : "";
    const std::string fifo =
        rt_.features().fifo_requested() ? fmt::format(" | fifo {:.3f}", res_.fifo_hit_rate) : "";
    console_result(
        fmt::format("epoch {:>3} | loss {:.4f} | train {:.4f}{}{} | {:.2f} s (sample {:.2f}, load "
                    "{:.2f}, train {:.2f} s busy){}",
                    e.epoch + 1, e.loss, e.train_acc, evals, fifo, em_.wall_s, em_.sampler.busy_s,
                    em_.loader.busy_s, em_.trainer.busy_s, eval_time));
    write_metrics(e);
  }
  note_history(e);
}

// A batch size that leaves a graph a handful of steps an epoch (1024 seeds a rank against
// Cora's 140 training nodes: one update an epoch), said with a size that gives about
// kWantedSteps (the power of two at or above the seeds over kWantedSteps). The size stays the
// user's: DGL and PyG train with the batch size given.
void RunReport::warn_few_steps(const EpochScheduler& sched) const {
  constexpr int64_t kFewSteps = 4, kWantedSteps = 10;
  const int64_t full = sched.full_steps();
  if (full >= kFewSteps || cfg_.max_steps > 0) return;
  const int64_t seeds = sched.num_local_seeds();  // rank 0's (shares are alike)
  int64_t suggest = 1;
  while (suggest < seeds / kWantedSteps) suggest *= 2;
  DSP_WARN("train",
           "--batch-size {} leaves {} step(s) an epoch ({} {} on rank 0): the model is updated "
           "{} time(s) an epoch; --batch-size {} gives {}",
           cfg_.batch_size, full, seeds, link_ ? "training edges" : "training nodes", full, suggest,
           (seeds + suggest - 1) / suggest);
}

// The epoch's record in the result's history (JobResult::history).
void RunReport::note_history(const Epoch& e) {
  nlohmann::json rec = {{"epoch", e.epoch + 1},
                        {"loss", e.loss},
                        {"train_acc", e.train_acc},
                        {"lr", e.lr},
                        {"epoch_s", em_.wall_s}};
  if (e.evaluated) {
    const nlohmann::json none;
    rec["val"] = eval_.last().has_valid ? nlohmann::json(e.val) : none;
    rec["test"] = eval_.last().has_test ? nlohmann::json(e.test) : none;
  }
  res_.history.push_back(std::move(rec));
}

// The epoch line's evaluation: the splits the data has, in the task's metric.
std::string RunReport::eval_text(double val, double test) const {
  if (link_) {
    return fmt::format(" | val {} | test {}", LinkTask::line(link_->valid()),
                       LinkTask::line(link_->test()));
  }
  const std::string m =
      eval_.metric() == MetricKind::kAcc ? "" : fmt::format("{} ", eval_.metric());
  std::string out;
  if (eval_.last().has_valid) out += fmt::format(" | val {}{:.4f}", m, val);
  if (eval_.last().has_test) out += fmt::format(" | test {}{:.4f}", m, test);
  return out;
}

void RunReport::log_start(const EpochScheduler& sched, int64_t steps, int samplers) const {
  const PartitionMeta& meta = rt_.part().meta;
  DSP_INFO(
      "train",
      "{} on {} ({} nodes, {}, {} classes): {} rank(s) x {} thread(s) on {}, {} "
      "steps{} of {} {} per rank per epoch, fanouts {}, {} lr {} weight decay {}, pipeline "
      "{}{}",
      model_.model, meta.dataset_name, meta.num_nodes, features_text(meta, model_.embedding_dim),
      meta.num_classes, rt_.size(), rt_.cores().threads, rt_.device().str(), steps,
      cfg_.max_steps > 0 ? fmt::format(" (--max-steps {}; a whole epoch is {})", cfg_.max_steps,
                                       sched.full_steps())
                         : "",
      cfg_.batch_size, link_ ? "training edges" : "seeds", fmt::join(cfg_.sampler.fanouts, ","),
      tc_.optimizer, tc_.lr, tc_.weight_decay, cfg_.pipeline,
      samplers > 0 ? fmt::format(", roles: {} sampler-only rank(s), {} trainer(s), switching {}",
                                 samplers, rt_.size() - samplers, cfg_.roles_switch)
                   : "");
  log_preaggregation();
}

// What the first layer reads, said once: a pre-aggregated partition must not change what a job
// computes unless asked (--preaggregate).
void RunReport::log_preaggregation() const {
  const PartitionMeta& meta = rt_.part().meta;
  const std::optional<Preaggregation> kind = model_.preaggregation();
  if (cfg_.preaggregate) {
    DSP_INFO("train",
             "first layer pre-aggregated (PaGraph): {} over every in-neighbour, read from "
             "preaggregated_{}.npy as [x | a] rows; sampling fanouts {} (the input layer's {} is "
             "not sampled)",
             kind == Preaggregation::kMean ? "the mean" : "the GCN-normalised sum", *kind,
             fmt::join(cfg_.sampler.fanouts.begin(), cfg_.sampler.fanouts.end() - 1, ","),
             cfg_.sampler.fanouts.back());
  } else if (!meta.preaggregated.empty()) {
    DSP_INFO("train",
             "the partition holds pre-aggregated rows ({}); the first layer samples its "
             "neighbours as usual{}",
             fmt::join(meta.preaggregated, ", "),
             kind && std::find(meta.preaggregated.begin(), meta.preaggregated.end(), *kind) !=
                         meta.preaggregated.end()
                 ? " (dsp train --preaggregate would use them)"
                 : "");
  }
}

// What the training loads of the epoch just run gathered (this rank): bytes of input rows per
// batch, wherever they came from (the FIFO levels' rows too, so the figure does not depend on
// them), the bytes other ranks sent, and the FIFO levels' hits.
void RunReport::gathered(const std::vector<FeatureStore*>& stores, int64_t steps) {
  GatherStats g;
  int64_t fifo_bytes = 0;
  for (FeatureStore* st : stores) {  // a heterogeneous graph's stores summed
    const GatherStats& s = st->stats();
    g.rows_remote_hot += s.rows_remote_hot;
    g.rows_local_hot += s.rows_local_hot;
    g.rows_cold += s.rows_cold;
    g.rows_cold_ahead += s.rows_cold_ahead;
    g.rows_fifo += s.rows_fifo;
    g.rows_fifo_shared += s.rows_fifo_shared;
    g.bytes_cold += s.bytes_cold;
    g.bytes_local_hot += s.bytes_local_hot;
    g.bytes_remote_hot += s.bytes_remote_hot;
    fifo_bytes += (s.rows_fifo + s.rows_fifo_shared) * static_cast<int64_t>(st->format().row_bytes);
  }
  const int64_t fifo_rows = g.rows_fifo + g.rows_fifo_shared;
  const double n = steps > 0 ? static_cast<double>(steps) : 1.0;
  const double bytes =
      static_cast<double>(g.bytes_cold + g.bytes_local_hot + g.bytes_remote_hot + fifo_bytes);
  res_.feature_bytes_per_batch = bytes / n;
  res_.peer_bytes_per_batch = static_cast<double>(g.bytes_remote_hot) / n;
  res_.fifo_hits = g.rows_fifo;
  res_.fifo_shared_hits = g.rows_fifo_shared;
  const int64_t peer_rows = fifo_rows + g.rows_remote_hot;
  res_.fifo_hit_rate = peer_rows > 0 ? static_cast<double>(fifo_rows) / peer_rows : 0.0;
  res_.cold_rows_read_ahead =
      g.rows_cold > 0 ? static_cast<double>(g.rows_cold_ahead) / g.rows_cold : 0.0;
}

double RunReport::cache_hit_rate(const std::vector<FeatureStore*>& stores) {
  int64_t hot = 0, total = 0;
  for (FeatureStore* st : stores) {
    const GatherStats& g = st->stats();
    const int64_t h = g.rows_remote_hot + g.rows_local_hot + g.rows_fifo + g.rows_fifo_shared;
    hot += h;
    total += h + g.rows_cold;
  }
  return total ? static_cast<double>(hot) / total : 0.0;
}

void RunReport::write_metrics(const Epoch& e) {
  if (!metrics_) return;
  nlohmann::json rec = {
      {"epoch", e.epoch + 1},
      {"loss", e.loss},
      {"train_acc", e.train_acc},
      {"epoch_s", em_.wall_s},
      {"max_steps", cfg_.max_steps},  // the cap of pipeline.steps
      {"normalize_features", cfg_.train.normalize_features},
      {"eval", res_.eval},
      {"lr", e.lr},
      {"pipeline", em_.to_json()},
      {"sampler", e.sampler},
      {"train_step", e.train_step},
      {"cache_hit_rate", res_.cache_hit_rate},
      {"feature_bytes_per_batch", res_.feature_bytes_per_batch},
      {"peer_bytes_per_batch", res_.peer_bytes_per_batch},
      {"read_ahead",
       {{"batches", res_.read_ahead}, {"cold_rows_read_ahead", res_.cold_rows_read_ahead}}}};
  if (rt_.part().meta.feature_conversion.converted) {
    rec["feature_dtype"] = res_.feature_dtype;
    rec["feature_rel_rms_error"] = res_.feature_rel_rms_error;
  }
  if (rt_.features().fifo_requested()) {
    rec["fifo"] = {{"hits", res_.fifo_hits},
                   {"shared_hits", res_.fifo_shared_hits},
                   {"hit_rate", res_.fifo_hit_rate}};
  }
  if (e.evaluated && link_) {
    rec["val"] = LinkTask::record(link_->valid());
    rec["test"] = LinkTask::record(link_->test());
    rec["eval_s"] = eval_.last().seconds;
  } else if (e.evaluated) {
    // Every metric of the task (acc and f1, or acc and rocauc) for both splits; a ROC-AUC
    // without both classes in a split is null.
    rec["metric"] = name_of(eval_.metric());
    const nlohmann::json none;  // a split the data does not have
    for (const MetricKind m : eval_.last().valid.metric_names()) {
      const std::string name = name_of(m);
      rec["val_" + name] =
          eval_.last().has_valid ? nlohmann::json(eval_.last().valid.metric(m)) : none;
      rec["test_" + name] =
          eval_.last().has_test ? nlohmann::json(eval_.last().test.metric(m)) : none;
    }
    rec["eval_s"] = eval_.last().seconds;
  }
  const std::string line = rec.dump() + "\n";
  if (std::fputs(line.c_str(), metrics_.get()) == EOF || std::fflush(metrics_.get()) != 0) {
    DSP_THROW_T(IoError, "{}: write failed: {}", cfg_.metrics_file, std::strerror(errno));
  }
}

void RunReport::summary() const {
  if (rt_.leader() && res_.epochs_run > 0) {
    const std::string metric = link_ ? link_->metric() : name_of(eval_.metric());
    console_result(fmt::format(
        "\nsummary\n"
        "{}{}"
        "  final loss          {:.4f}\n"
        "  time per epoch      {:.2f} s\n"
        "  cache hit rate      {:.3f}\n"
        "  bytes sent (rank 0) {:.1f} MB\n"
        "  input rows / batch  {:.3f} MB (rank 0, last epoch)\n",
        eval_.last().has_valid
            ? fmt::format("  {:<20}{:.4f} (epoch {})\n", "best val " + metric, res_.best_val_acc,
                          res_.best_epoch)
            : fmt::format("  {:<20}the last evaluated epoch's ({}; no validation nodes)\n",
                          "best model", res_.best_epoch),
        !eval_.last().has_test
            ? ""
            : fmt::format("  {:<20}{:.4f} ({})\n",
                          link_ ? "test " + metric + " (best)" : "test " + metric + " at best",
                          res_.test_acc_at_best, eval_.summary(res_.test_acc_full)),
        res_.final_loss, res_.mean_epoch_s, res_.cache_hit_rate, res_.bytes_communicated / 1e6,
        res_.feature_bytes_per_batch / 1e6));
    if (rt_.part().meta.feature_conversion.converted) {
      console_result(fmt::format(
          "  features            {}: relative RMS error {:.4g}, max {:.4g} (dsp partition)\n",
          res_.feature_dtype, res_.feature_rel_rms_error, res_.feature_max_abs_error));
    }
    if (rt_.features().fifo_requested()) {
      console_result(fmt::format(
          "  fifo hit rate       {:.3f} of the rows other ranks serve ({} + {} shared rows, "
          "rank 0, last epoch)\n"
          "  rows from peers     {:.3f} MB / batch (rank 0, last epoch)\n",
          res_.fifo_hit_rate, res_.fifo_hits, res_.fifo_shared_hits,
          res_.peer_bytes_per_batch / 1e6));
    }
  }
}

}  // namespace dsp
