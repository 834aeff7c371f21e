#pragma once
// `dsp bench project`: the epoch time of a P-GPU job projected from what can be measured without
// P GPUs, stated as a model. CSP and the feature store are P-invariant (the same blocks and rows at
// any backend), so a P-rank job on any machine moves exactly the bytes P GPUs would move; only
// the time those bytes take, and the compute of each stage, depend on the hardware. The model:
//
//   per batch and stage k (sample, load, train), at P ranks:
//     compute_k          = the stage's time on one device (P = 1), the same at every P: a rank's
//                          batch holds the same seeds whatever P is
//     sample/load comm   = peer / peer link + host / host link + messages x latency
//                          peer = the larger of the bytes a rank sends to and receives from the
//                          other ranks (the slowest rank's); host = cold rows read from host memory
//     train comm         = a ring all-reduce of the gradient payload n: 2 (P-1)/P n / peer link
//                          + messages x 2 (P-1) x latency
//     peer bytes cross the network instead of the peer link in the share that goes to ranks of
//     other nodes: (P - gpus_per_node) / (P - 1) when P > gpus_per_node (spread evenly)
//   per epoch, with S batches per rank (the batches of the epoch split over P ranks):
//     sequential (no overlap)  S x (sample + load + train)
//     pipelined (full overlap) (S - 1) x max(sample, load, train) + (sample + load + train)
//   speedup(P) = epoch(1) / epoch(P), each overlap against itself.
// Nothing here measures: the CLI (tools/bench_project.cpp) measures and reads the inputs.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace dsp {

// A link: bandwidth (GB/s, 1e9 bytes) and the latency each message pays (microseconds).
struct ProjectionLink {
  double gbps = 0;
  double latency_us = 0;
};

// The machine projected. Defaults: a DGX-1-like V100 server (the DSP paper's): NVLink-2 at one
// link's 25 GB/s a direction per GPU for an all-to-all (half the pairs of the hybrid cube mesh
// are not linked directly and relay), PCIe 3.0 x16 at 12 GB/s, 100 Gb/s InfiniBand between
// nodes; latencies of the order NCCL's small collectives take on them.
struct ProjectionLinks {
  ProjectionLink peer{25, 20};  // GPU to GPU in a node (NVLink)
  ProjectionLink host{12, 10};  // host memory to GPU (PCIe): cold feature rows
  ProjectionLink net{12.5, 5};  // node to node
  int gpus_per_node = 8;
};

// What one stage of one batch moves at one rank (the job's slowest rank: max over ranks).
struct StageVolume {
  double peer_bytes = 0;  // max(sent, received) to / from the other ranks
  double host_bytes = 0;  // read from host memory (cold rows)
  double messages = 0;    // collectives (each pays a latency)
};

// The per-batch volumes of a P-rank job (dsp bench volumes) and its batches per rank.
struct ProjectionRun {
  int ranks = 1;
  int64_t steps = 0;  // batches per rank and epoch
  StageVolume sample, load;
  double allreduce_bytes = 0;     // gradient payload per batch (what each rank contributes)
  double allreduce_messages = 0;  // all-reduces per batch
};

// Seconds per batch each stage computes on one device (no communication).
struct StageTimes {
  double sample_s = 0, load_s = 0, train_s = 0;
};

struct ProjectedStage {
  double compute_s = 0, comm_s = 0;
  double total_s() const { return compute_s + comm_s; }
};

struct Projection {
  int ranks = 1;
  int64_t steps = 0;
  ProjectedStage sample, load, train;  // per batch
  double batch_sequential_s = 0;       // sample + load + train
  double batch_pipelined_s = 0;        // max(sample, load, train)
  double epoch_sequential_s = 0, epoch_pipelined_s = 0;
  double speedup_sequential = 0, speedup_pipelined = 0;  // filled by project_all
  nlohmann::json to_json() const;
};

// Seconds `bytes` and `messages` take between ranks of a P-rank job (0 at P = 1).
double peer_seconds(double bytes, double messages, int ranks, const ProjectionLinks& links);
// Seconds of a ring all-reduce of `bytes` payload, `messages` times per batch, at P ranks.
double allreduce_seconds(double bytes, double messages, int ranks, const ProjectionLinks& links);
// One P. InvalidArgument when a figure is negative or not finite, a link's bandwidth is not
// positive, ranks < 1 or steps < 1.
Projection project(const ProjectionRun& run, const StageTimes& compute,
                   const ProjectionLinks& links);
// Every run, each with its speedups over the run of 1 rank (InvalidArgument without one, or with
// two runs of the same P), in increasing P.
std::vector<Projection> project_all(const std::vector<ProjectionRun>& runs,
                                    const StageTimes& compute, const ProjectionLinks& links);

// Batches per rank of an epoch of `train_seeds` seeds over P ranks: ceil(seeds / (P batch)).
int64_t steps_per_rank(int64_t train_seeds, int ranks, int64_t batch_size);

// The run a `dsp bench volumes --json` file holds (FormatError naming `what` when a key is
// missing).
ProjectionRun projection_run_from_json(const nlohmann::json& j, const std::string& what);
// The one-device stage times of a run's file ("compute_s" of its stages: the P = 1 run's are
// the one device's), or of a `dsp bench pipeline --json` file (busy seconds per step of its "off"
// mode, else its first mode, averaged over the measured epochs).
StageTimes stage_times_from_json(const nlohmann::json& j, const std::string& what);

// The model's assumptions, one line each, as printed above the table.
std::vector<std::string> projection_assumptions(const ProjectionLinks& links);

}  // namespace dsp
