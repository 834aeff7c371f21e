#pragma once
// How a rank runs its three stages, decided from a short profile (`--pipeline auto`).
//
// BGL (NSDI'23) gives each stage an isolated share of the cores by a min-max rule over profiled
// stage costs; pipelining only pays when the stages then run on different resources. A rank here
// has C cores (its share, RankRuntime::cores()). The profile runs a few batches sequentially and
// records, per stage and batch: wall seconds w, seconds inside collectives m (waiting for peers,
// no CPU), and CPU seconds u of the whole process while the stage ran (its OpenMP/BLAS pools and
// its collectives included). A stage on c cores is modelled as
//     T(c) = m + max(w - m, min(u, (w - m) C) / c)
// (its computing part scales with cores up to what it reached on all C; a serial stage does not
// slow down on fewer cores; CPU seconds beyond (w - m) C were burnt while waiting, so T(C) = w). Candidate layouts, each a min-max over integer core counts:
//   * shared:   every stage on all C cores (no isolation): max(max_i T_i(C), sum_i u_i / C);
//   * split:    the trainer on c_t cores, sampler and loader sharing the other C - c_t (C >= 2):
//               max(T_t(c_t), T_s(c), T_l(c), (u_s + u_l) / c);
//   * isolated: disjoint c_s + c_l + c_t = C, each >= 1 (C >= 3): max_i T_i(c_i).
// On a tie the more isolated layout wins (threads sharing cores interfere; the model does not
// price that). Sequential: sum_i w_i. The best layout is worth a trial only if it predicts a gain of more than
// `margin`; the trial runs a few batches pipelined with it, and the pipeline stays on only if the
// measured batch time beats the sequential one by more than `margin`. Both decisions are pure
// functions of the profile, which every rank all-reduces (max) before deciding, so every rank
// makes the same choice.
#include <nlohmann/json.hpp>

#include <array>
#include <string>
#include <vector>

#include "core/choice.hpp"

namespace dsp {

enum class PipelineMode { kPipelined, kSequential, kAuto };
const Names<PipelineMode>& names_of(PipelineMode);  // on, off, auto (pipeline.cpp)

// Per batch, averaged over the profiled batches, max over ranks.
struct StageCost {
  double wall_s = 0;  // w
  double comm_s = 0;  // m, part of w
  double cpu_s = 0;   // u
};

struct PipelineProfile {
  std::array<StageCost, 3> stage;  // sampler, loader, trainer
  int cores = 1;                   // C
  double seq_batch_s = 0;          // measured, sequential
  double on_batch_s = -1;          // measured, pipelined with the planned shares (< 0: no trial)
};

// Threads and cpus of each stage (sampler, loader, trainer) when pipelined. Empty cpus: no
// binding (the stage runs wherever the rank may).
struct StageShares {
  std::array<int, 3> threads = {1, 1, 1};
  std::array<std::vector<int>, 3> cpus;
  std::string layout = "shared";  // shared | split | isolated
  // Every stage with all of the rank's threads, unbound (`--pipeline on`, no isolation).
  static StageShares shared(int threads);
  std::string describe() const;  // "sampler 1 thread (cpus 0), loader ..., trainer ..."
};

struct StagePlan {
  PipelineMode mode = PipelineMode::kSequential;  // kPipelined or kSequential
  StageShares shares;
  double predicted_on_s = 0;   // per batch, best layout
  double predicted_off_s = 0;  // per batch
  bool trial = false;          // the plan asks for a pipelined trial
  std::string why;             // one line for the log
  nlohmann::json to_json() const;
};

struct AutoOptions {
  int profile_steps = 4;  // batches profiled sequentially (after one warm-up batch)
  int trial_steps = 4;    // batches pipelined with the planned shares
  double margin = 0.05;   // required relative gain, predicted and measured
};

// T(c) of the model above.
double stage_time(const StageCost& s, int full_cores, double cores);

// The best layout for the profile's stage costs over `cpus` (the rank's share; its size is
// profile.cores). Pure. Sets trial when it predicts a gain above the margin; mode is kSequential
// until decide() sees the trial.
StagePlan plan_stages(const PipelineProfile& profile, const std::vector<int>& cpus,
                      const AutoOptions& opts = {});

// The final choice after the trial (profile.on_batch_s >= 0) or without one. Pure.
StagePlan decide(const PipelineProfile& profile, StagePlan plan, const AutoOptions& opts = {});

}  // namespace dsp
