#include "pipeline/plan.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "core/error.hpp"
#include "pipeline/cores.hpp"

namespace dsp {
namespace {

const char* const kStageNames[3] = {"sampler", "loader", "trainer"};

std::vector<int> slice(const std::vector<int>& cpus, int begin, int end) {
  return std::vector<int>(cpus.begin() + begin, cpus.begin() + end);
}

// A candidate layout: per stage (first core, core count) within the rank's cpus.
struct Layout {
  const char* name;
  bool binds;  // each stage's threads bound to its cpus (shared: they move freely)
  std::array<int, 3> first, count;
  double predicted;
};

double cpu_bound(const PipelineProfile& p, std::initializer_list<int> stages, double cores) {
  double u = 0;
  for (int i : stages) u += p.stage[i].cpu_s;
  return u / cores;
}

// The min-max layout. Candidates from the most isolated to none, and a later one must be strictly
// faster: on a tie the stages keep separate cores (the model has no term for the interference
// of threads sharing cores, which isolation avoids). Within a kind, the trainer's cores first,
// descending.
Layout best_layout(const PipelineProfile& p) {
  const int C = p.cores;
  const auto T = [&](int i, double c) { return stage_time(p.stage[i], C, c); };
  Layout best{"none", false, {0, 0, 0}, {0, 0, 0}, std::numeric_limits<double>::infinity()};
  auto consider = [&](const Layout& l) {
    if (l.predicted < best.predicted * (1 - 1e-9)) best = l;
  };
  for (int ct = C - 2; ct >= 1; --ct) {
    for (int cs = 1; cs + ct < C; ++cs) {
      const int cl = C - ct - cs;
      consider({"isolated",
                true,
                {0, cs, cs + cl},
                {cs, cl, ct},
                std::max({T(0, cs), T(1, cl), T(2, ct)})});
    }
  }
  // Split: sampler and loader share cpus [0, c), the trainer has [c, C).
  for (int ct = C - 1; ct >= 1; --ct) {
    const int c = C - ct;
    consider({"split",
              true,
              {0, 0, c},
              {c, c, ct},
              std::max({T(2, ct), T(0, c), T(1, c), cpu_bound(p, {0, 1}, c)})});
  }
  consider({"shared",
            false,
            {0, 0, 0},
            {C, C, C},
            std::max({T(0, C), T(1, C), T(2, C), cpu_bound(p, {0, 1, 2}, C)})});
  return best;
}

}  // namespace

StageShares StageShares::shared(int threads) {
  StageShares s;
  s.threads = {threads, threads, threads};
  return s;
}

std::string StageShares::describe() const {
  std::string out = layout + ":";
  for (int i = 0; i < 3; ++i) {
    out += fmt::format(" {} {} thread{}{}{}", kStageNames[i], threads[i], threads[i] == 1 ? "" : "s",
                       cpus[i].empty() ? "" : fmt::format(" (cpus {})", format_cpu_list(cpus[i])),
                       i < 2 ? "," : "");
  }
  return out;
}

nlohmann::json StagePlan::to_json() const {
  nlohmann::json st = nlohmann::json::object();
  for (int i = 0; i < 3; ++i) {
    st[kStageNames[i]] = {{"threads", shares.threads[i]}, {"cpus", shares.cpus[i]}};
  }
  return {{"mode", mode == PipelineMode::kPipelined ? "on" : "off"},
          {"layout", shares.layout},
          {"shares", st},
          {"predicted_on_batch_s", predicted_on_s},
          {"predicted_off_batch_s", predicted_off_s},
          {"trial", trial},
          {"why", why}};
}

double stage_time(const StageCost& s, int full_cores, double cores) {
  DSP_CHECK_ARG(cores > 0 && full_cores > 0, "stage_time: cores must be positive");
  const double compute = std::max(0.0, s.wall_s - s.comm_s);
  // CPU seconds beyond what the computing part could burn on all cores were burnt while waiting
  // (the executor's polling, pools winding down): they do not scale, so T(full) is the wall.
  const double work = std::min(s.cpu_s, compute * full_cores);
  return s.comm_s + std::max(compute, work / std::min<double>(cores, full_cores));
}

StagePlan plan_stages(const PipelineProfile& p, const std::vector<int>& cpus,
                      const AutoOptions& opts) {
  DSP_CHECK_ARG(p.cores >= 1 && static_cast<int>(cpus.size()) == p.cores,
                "plan_stages: the profile has {} cores but {} cpus were given", p.cores,
                cpus.size());
  StagePlan plan;
  plan.predicted_off_s = p.stage[0].wall_s + p.stage[1].wall_s + p.stage[2].wall_s;
  const Layout best = best_layout(p);
  plan.predicted_on_s = best.predicted;
  plan.shares.layout = best.name;
  for (int i = 0; i < 3; ++i) {
    plan.shares.threads[i] = best.count[i];
    if (best.binds) {
      plan.shares.cpus[i] = slice(cpus, best.first[i], best.first[i] + best.count[i]);
    }
  }
  const double gain = 1.0 - plan.predicted_on_s / std::max(plan.predicted_off_s, 1e-12);
  plan.trial = gain > opts.margin;
  plan.mode = PipelineMode::kSequential;
  plan.why = fmt::format(
      "profile per batch: sample {:.3f} s, load {:.3f} s, train {:.3f} s (of which waiting in "
      "collectives {:.3f}/{:.3f}/{:.3f} s) on {} core(s); pipelined {} predicts {:.3f} s vs "
      "sequential {:.3f} s ({:+.1f}%)",
      p.stage[0].wall_s, p.stage[1].wall_s, p.stage[2].wall_s, p.stage[0].comm_s,
      p.stage[1].comm_s, p.stage[2].comm_s, p.cores, plan.shares.layout, plan.predicted_on_s,
      plan.predicted_off_s, -100.0 * gain);
  if (!plan.trial) {
    plan.why += fmt::format("; gain below the {:.0f}% margin: off", 100 * opts.margin);
  }
  return plan;
}

StagePlan decide(const PipelineProfile& p, StagePlan plan, const AutoOptions& opts) {
  if (!plan.trial || p.on_batch_s < 0) {
    plan.mode = PipelineMode::kSequential;
    return plan;
  }
  const double gain = 1.0 - p.on_batch_s / std::max(p.seq_batch_s, 1e-12);
  const bool on = gain > opts.margin;
  plan.mode = on ? PipelineMode::kPipelined : PipelineMode::kSequential;
  plan.why += fmt::format("; trial: pipelined {:.3f} s vs sequential {:.3f} s per batch ({:+.1f}%): {}",
                          p.on_batch_s, p.seq_batch_s, -100.0 * gain,
                          on ? "on" : fmt::format("off (gain below {:.0f}%)", 100 * opts.margin));
  return plan;
}

}  // namespace dsp
