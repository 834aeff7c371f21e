#include "train/eval_choice.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <utility>

#include "core/logging.hpp"
#include "core/memory.hpp"
#include "pipeline/rank/backends.hpp"
#include "train/inference.hpp"

namespace dsp {

namespace {
// Neighbour rows below which full-neighbour evaluation is chosen whatever sampling would read
// (about 2 s of a 2-core machine at hidden 256).
constexpr double kSmallEval = 1e7;
// A job that evaluates sampled tests its best model once in full at the end when that reads at
// most this many times the rows of one sampled evaluation (or kSmallEval): at papers100M's size a
// full pass reads thousands of times more and would take hours after a run of minutes.
constexpr double kFinalFullFactor = 10;

// 1234567 -> "1.2M" (k, M, G), for counts in log lines.
std::string count_str(double n) {
  if (n >= 1e9) return fmt::format("{:.1f}G", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.1f}M", n / 1e6);
  if (n >= 1e3) return fmt::format("{:.1f}k", n / 1e3);
  return fmt::format("{:.0f}", n);
}

const std::vector<int>& eval_fanouts(const JobConfig& cfg) {
  return cfg.eval_fanouts.empty() ? cfg.sampler.fanouts : cfg.eval_fanouts;
}

// Neighbour rows one evaluation reads: full-neighbour inference every entry of the graph once per
// layer; sampled evaluation at most (validation + test seeds) x (f1 + f1 f2 + ...), a fanout of
// -1 counted as the mean degree. Split sizes are summed over the ranks (main channel).
std::pair<double, double> eval_reads(const JobConfig& cfg, RankRuntime& rt, int64_t eval_nodes) {
  const PartitionMeta& meta = rt.part().meta;
  double entries = 0;
  for (const PartStats& ps : meta.part) entries += static_cast<double>(ps.edges);
  int64_t seeds = eval_nodes;
  CoordinatedCommunicator& main_ch = rt.channel(WorkerKind::kMain);
  main_ch.set_step(-1, 5);
  main_ch.all_reduce(&seeds, 1, DType::kInt64, ReduceOp::kSum);
  const std::vector<int>& f = eval_fanouts(cfg);
  const double degree = entries / std::max<int64_t>(meta.num_nodes, 1);
  double frontier = static_cast<double>(seeds), sampled = 0;
  for (const int k : f) {
    frontier *= k < 0 ? degree : std::min<double>(k, degree);  // E min(k, deg) <= min(k, E deg)
    sampled += frontier;
  }
  return {entries * static_cast<double>(f.size()), sampled};
}

// The jobs that evaluate by sampling only (their checks refused --eval full but on a typed
// graph): a heterogeneous graph (no layer-wise inference of its models; --eval full samples
// every neighbour, run_training) and --temporal.
EvalChoice choose_sampled(const JobConfig& cfg, const RankRuntime& rt, const ModelConfig& model) {
  EvalChoice c;
  c.mode = cfg.eval == EvalMode::kFull ? EvalMode::kFull : EvalMode::kSampled;
  if (!rt.leader()) return c;
  if (rt.hetero() && cfg.eval == EvalMode::kFull) {
    DSP_INFO("train",
             "evaluation: full neighbourhoods of the {} nodes, every neighbour of every relation "
             "sampled (fanouts {}), {} nodes a batch",
             rt.part().meta.hetero->schema.target_type, eval_fanouts_text(cfg),
             cfg.eval_batch_size);
  } else if (rt.hetero()) {
    DSP_INFO("train",
             "evaluation: sampled with fanouts {} on the {} nodes (--model {}: no layer-wise "
             "full-neighbour inference on a heterogeneous graph)",
             eval_fanouts_text(cfg), rt.part().meta.hetero->schema.target_type, model.model);
  } else {
    DSP_INFO("train",
             "evaluation: sampled with fanouts {} (--temporal: every node at its own time, by the "
             "same temporal sampler; full neighbourhoods would see the edges after it)",
             fmt::join(eval_fanouts(cfg), ","));
  }
  return c;
}

// The choice and why, `estimate` its figures.
void log_choice(const JobConfig& cfg, const EvalChoice& c, const std::string& estimate) {
  if (c.full) {
    DSP_INFO("train", "evaluation: full neighbourhoods, layer by layer ({}){}", estimate,
             c.fits ? "" : ": it may not fit (--eval full)");
    return;
  }
  DSP_INFO("train", "evaluation: sampled with fanouts {} ({})", fmt::join(eval_fanouts(cfg), ","),
           cfg.preaggregate ? "--preaggregate: the model has no input layer to infer with"
           : cfg.eval == EvalMode::kSampled ? "--eval sampled or --eval-fanouts"
           : c.fits                         ? "full neighbourhoods would read more: " + estimate
                                            : "full neighbourhoods need " + estimate);
  if (c.fits && !cfg.preaggregate) {
    DSP_INFO("train", "{}",
             c.final_full ? "the best model is tested with full neighbourhoods at the end"
                          : "the best model is not tested with full neighbourhoods at the end "
                            "(it would read more than 10 sampled evaluations)");
  }
}
}  // namespace

EvalChoice choose_eval(const JobConfig& cfg, RankRuntime& rt, const ModelConfig& model,
                       const std::vector<int64_t>& widths, int64_t eval_nodes, bool on_device) {
  if (rt.hetero() || cfg.sampler.is_temporal()) return choose_sampled(cfg, rt, model);
  const InferenceBytes need =
      layerwise_inference_bytes(rt.part().meta, rt.rank(), widths, cfg.eval_batch_size, on_device);
  const int64_t have =
      static_cast<int64_t>(available_memory() / 2 / static_cast<uint64_t>(rt.cores().node_size));
  // The device's free memory now (the model, caches and topology placed), halved as the host's
  // for what training allocates meanwhile.
  const int64_t have_device = on_device ? free_device_memory(rt.device()) / 2 : 0;
  int64_t fits = !cfg.preaggregate && need.host <= have && need.device <= have_device ? 1 : 0;
  CoordinatedCommunicator& main_ch = rt.channel(WorkerKind::kMain);
  main_ch.set_step(-1, 3);
  main_ch.all_reduce(&fits, 1, DType::kInt64, ReduceOp::kMin);
  const auto [full_reads, sampled_reads] = eval_reads(cfg, rt, eval_nodes);
  EvalChoice c;
  c.fits = fits == 1;
  // Under kSmallEval rows, full costs seconds whatever sampling would: exact wins.
  const bool cheaper = full_reads <= std::max(sampled_reads, kSmallEval);
  c.full = cfg.eval == EvalMode::kFull || (cfg.eval == EvalMode::kAuto && c.fits && cheaper);
  c.final_full =
      !c.full && c.fits && full_reads <= kFinalFullFactor * std::max(sampled_reads, kSmallEval);
  c.mode = c.full ? EvalMode::kFull : EvalMode::kSampled;
  if (rt.leader()) {
    const std::string device =
        on_device ? fmt::format(" and {} on {} ({} available)", format_bytes(need.device),
                                rt.device().str(), format_bytes(have_device))
                  : "";
    log_choice(cfg, c,
               fmt::format("an estimated {} of host memory per rank{}, {} available to each; {} "
                           "neighbour rows read against up to {} sampled",
                           format_bytes(need.host), device, format_bytes(have),
                           count_str(full_reads), count_str(sampled_reads)));
  }
  return c;
}

std::string eval_fanouts_text(const JobConfig& cfg) {
  if (cfg.eval_fanouts.empty()) return cfg.sampler.relation_fanouts;
  return fmt::format("{}", fmt::join(cfg.eval_fanouts, ","));
}

}  // namespace dsp
