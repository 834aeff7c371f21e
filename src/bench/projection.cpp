#include "bench/projection.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.hpp"
#include "pipeline/plan.hpp"

namespace dsp {
namespace {

using json = nlohmann::json;

void check_figure(double v, const char* what) {
  DSP_CHECK_ARG(std::isfinite(v) && v >= 0, "projection: {} must be finite and >= 0, got {}", what,
                v);
}

void check_link(const ProjectionLink& l, const char* what) {
  DSP_CHECK_ARG(std::isfinite(l.gbps) && l.gbps > 0,
                "projection: the {} link's bandwidth must be positive, got {} GB/s", what, l.gbps);
  check_figure(l.latency_us, what);
}

void check_inputs(const ProjectionRun& run, const StageTimes& c, const ProjectionLinks& links) {
  DSP_CHECK_ARG(run.ranks >= 1, "projection: ranks must be >= 1, got {}", run.ranks);
  DSP_CHECK_ARG(run.steps >= 1, "projection: {} rank(s): batches per rank must be >= 1, got {}",
                run.ranks, run.steps);
  DSP_CHECK_ARG(links.gpus_per_node >= 1, "projection: gpus per node must be >= 1, got {}",
                links.gpus_per_node);
  check_link(links.peer, "peer");
  check_link(links.host, "host");
  check_link(links.net, "network");
  for (const StageVolume* v : {&run.sample, &run.load}) {
    check_figure(v->peer_bytes, "peer bytes");
    check_figure(v->host_bytes, "host bytes");
    check_figure(v->messages, "messages");
  }
  check_figure(run.allreduce_bytes, "all-reduce bytes");
  check_figure(run.allreduce_messages, "all-reduce messages");
  check_figure(c.sample_s, "the sample stage's time");
  check_figure(c.load_s, "the load stage's time");
  check_figure(c.train_s, "the train stage's time");
}

// The share of a rank's peer traffic that goes to ranks of other nodes (spread evenly).
double network_share(int ranks, const ProjectionLinks& links) {
  if (ranks <= links.gpus_per_node) return 0.0;
  return static_cast<double>(ranks - links.gpus_per_node) / static_cast<double>(ranks - 1);
}

// Seconds of `bytes` over a link (GB/s = 1e9 bytes a second).
double over(const ProjectionLink& l, double bytes) { return bytes / (l.gbps * 1e9); }

// A message crosses the slowest link it uses: the network's latency when any peer is off-node.
double latency_s(int ranks, const ProjectionLinks& links) {
  const double us = network_share(ranks, links) > 0
                        ? std::max(links.peer.latency_us, links.net.latency_us)
                        : links.peer.latency_us;
  return us * 1e-6;
}

const json& need(const json& j, const char* key, const std::string& what) {
  DSP_CHECK_FORMAT(j.is_object() && j.contains(key), "{}: no \"{}\"", what, key);
  return j.at(key);
}

double number(const json& j, const char* key, const std::string& what) {
  const json& v = need(j, key, what);
  DSP_CHECK_FORMAT(v.is_number(), "{}: \"{}\" is not a number", what, key);
  return v.get<double>();
}

StageVolume volume_from_json(const json& j, const std::string& what) {
  StageVolume v;
  v.peer_bytes = number(j, "peer_bytes", what);
  v.host_bytes = number(j, "host_bytes", what);
  v.messages = number(j, "messages", what);
  return v;
}

// Busy seconds per step of a `dsp bench pipeline` mode, over its measured epochs.
StageTimes pipeline_stage_times(const json& j, const std::string& what) {
  const json& modes = need(j, "modes", what);
  DSP_CHECK_FORMAT(modes.is_array() && !modes.empty(), "{}: \"modes\" is empty", what);
  // The sequential mode's times when the bench ran it (each stage alone), else the first mode's.
  std::string mode = modes[0].get<std::string>();
  const std::string off = name_of(PipelineMode::kSequential);
  for (const json& m : modes) {
    if (m.get<std::string>() == off) mode = off;
  }
  const json& epochs = need(need(j, mode.c_str(), what), "epochs", what + " " + mode);
  double steps = 0, busy[3] = {0, 0, 0};
  const char* names[3] = {"sampler", "loader", "trainer"};
  for (const json& e : epochs) {
    steps += number(e, "steps", what);
    for (int k = 0; k < 3; ++k) {
      busy[k] += number(need(need(e, "stages", what), names[k], what), "busy_s", what);
    }
  }
  DSP_CHECK_FORMAT(steps > 0, "{}: mode {} has no measured steps", what, mode);
  return {busy[0] / steps, busy[1] / steps, busy[2] / steps};
}

}  // namespace

double peer_seconds(double bytes, double messages, int ranks, const ProjectionLinks& links) {
  if (ranks <= 1) return 0.0;
  const double net = network_share(ranks, links);
  return over(links.peer, (1 - net) * bytes) + over(links.net, net * bytes) +
         messages * latency_s(ranks, links);
}

double allreduce_seconds(double bytes, double messages, int ranks, const ProjectionLinks& links) {
  if (ranks <= 1) return 0.0;
  const double p = static_cast<double>(ranks);
  const double wire = 2 * (p - 1) / p * bytes;
  const double net = network_share(ranks, links);
  // a ring is as slow as its slowest hop: the network's once the ring leaves the node
  const ProjectionLink& l = net > 0 && links.net.gbps < links.peer.gbps ? links.net : links.peer;
  return over(l, wire) + messages * 2 * (p - 1) * latency_s(ranks, links);
}

Projection project(const ProjectionRun& run, const StageTimes& compute,
                   const ProjectionLinks& links) {
  check_inputs(run, compute, links);
  Projection p;
  p.ranks = run.ranks;
  p.steps = run.steps;
  p.sample.compute_s = compute.sample_s;
  p.sample.comm_s = peer_seconds(run.sample.peer_bytes, run.sample.messages, run.ranks, links) +
                    over(links.host, run.sample.host_bytes);
  p.load.compute_s = compute.load_s;
  p.load.comm_s = peer_seconds(run.load.peer_bytes, run.load.messages, run.ranks, links) +
                  over(links.host, run.load.host_bytes);
  p.train.compute_s = compute.train_s;
  p.train.comm_s = allreduce_seconds(run.allreduce_bytes, run.allreduce_messages, run.ranks, links);
  p.batch_sequential_s = p.sample.total_s() + p.load.total_s() + p.train.total_s();
  p.batch_pipelined_s = std::max({p.sample.total_s(), p.load.total_s(), p.train.total_s()});
  const double s = static_cast<double>(run.steps);
  p.epoch_sequential_s = s * p.batch_sequential_s;
  p.epoch_pipelined_s = (s - 1) * p.batch_pipelined_s + p.batch_sequential_s;
  return p;
}

std::vector<Projection> project_all(const std::vector<ProjectionRun>& runs,
                                    const StageTimes& compute, const ProjectionLinks& links) {
  std::map<int, const ProjectionRun*> by_p;
  for (const ProjectionRun& r : runs) {
    DSP_CHECK_ARG(by_p.emplace(r.ranks, &r).second, "projection: two runs of {} rank(s)", r.ranks);
  }
  DSP_CHECK_ARG(by_p.count(1), "projection: the speedups need a run of 1 rank");
  std::vector<Projection> out;
  for (const auto& [p, r] : by_p) out.push_back(project(*r, compute, links));
  const Projection& one = out.front();
  for (Projection& p : out) {
    p.speedup_sequential = one.epoch_sequential_s / p.epoch_sequential_s;
    p.speedup_pipelined = one.epoch_pipelined_s / p.epoch_pipelined_s;
  }
  return out;
}

int64_t steps_per_rank(int64_t train_seeds, int ranks, int64_t batch_size) {
  DSP_CHECK_ARG(train_seeds >= 1 && ranks >= 1 && batch_size >= 1,
                "projection: seeds, ranks and batch size must be >= 1, got {}, {}, {}", train_seeds,
                ranks, batch_size);
  const int64_t per = ranks * batch_size;
  return (train_seeds + per - 1) / per;
}

json Projection::to_json() const {
  auto stage = [](const ProjectedStage& s) {
    return json{{"compute_s", s.compute_s}, {"comm_s", s.comm_s}, {"total_s", s.total_s()}};
  };
  return {
      {"ranks", ranks},
      {"steps", steps},
      {"per_batch", {{"sample", stage(sample)}, {"load", stage(load)}, {"train", stage(train)}}},
      {"batch_sequential_s", batch_sequential_s},
      {"batch_pipelined_s", batch_pipelined_s},
      {"epoch_sequential_s", epoch_sequential_s},
      {"epoch_pipelined_s", epoch_pipelined_s},
      {"speedup_sequential", speedup_sequential},
      {"speedup_pipelined", speedup_pipelined}};
}

ProjectionRun projection_run_from_json(const json& j, const std::string& what) {
  DSP_CHECK_FORMAT(j.is_object() && j.value("bench", "") == "volumes",
                   "{}: not a `dsp bench volumes --json` file", what);
  ProjectionRun r;
  r.ranks = static_cast<int>(number(j, "ranks", what));
  r.steps = static_cast<int64_t>(number(j, "steps_per_epoch", what));
  const json& pb = need(j, "per_batch", what);
  r.sample = volume_from_json(need(pb, "sample", what), what + " sample");
  r.load = volume_from_json(need(pb, "load", what), what + " load");
  const json& t = need(pb, "train", what);
  r.allreduce_bytes = number(t, "allreduce_bytes", what + " train");
  r.allreduce_messages = number(t, "messages", what + " train");
  return r;
}

StageTimes stage_times_from_json(const json& j, const std::string& what) {
  DSP_CHECK_FORMAT(j.is_object() && j.contains("bench"), "{}: no \"bench\"", what);
  const std::string bench = j["bench"].get<std::string>();
  if (bench == "pipeline") return pipeline_stage_times(j, what);
  DSP_CHECK_FORMAT(bench == "volumes",
                   "{}: stage times come from bench volumes or pipeline, not {}", what, bench);
  const json& pb = need(j, "per_batch", what);
  return {number(need(pb, "sample", what), "compute_s", what + " sample"),
          number(need(pb, "load", what), "compute_s", what + " load"),
          number(need(pb, "train", what), "compute_s", what + " train")};
}

std::vector<std::string> projection_assumptions(const ProjectionLinks& l) {
  return {
      "volumes: measured with P ranks (CSP and the feature store move the same bytes at any "
      "backend); per batch, the slowest rank's max(sent, received) to other ranks",
      "compute: each stage's one-device time per batch, the same at every P (a rank's batch "
      "holds the same seeds); batches per rank = the epoch's batches / P",
      fmt::format("peer link {} GB/s, {} us per message; host link {} GB/s, {} us (cold rows); "
                  "network {} GB/s, {} us beyond {} GPUs a node (evenly spread traffic)",
                  l.peer.gbps, l.peer.latency_us, l.host.gbps, l.host.latency_us, l.net.gbps,
                  l.net.latency_us, l.gpus_per_node),
      "sample/load comm = peer bytes / link + host bytes / host link + collectives x latency; "
      "train comm = ring all-reduce 2(P-1)/P x gradient bytes / link + 2(P-1) x latency per "
      "all-reduce",
      "epoch: sequential = S x (sample + load + train); pipelined = (S-1) x max(stages) + sum "
      "(stages overlap fully: no contention for the GPU, the queue never starves); not modelled: "
      "load imbalance beyond the slowest rank's bytes, kernel launch and sync overheads, link "
      "contention and multi-hop routes"};
}

}  // namespace dsp
