#pragma once
// What a CollectiveSampler is asked to do (sampler.hpp): the sampling scheme, each scheme with only
// its own settings (SamplerOptions::scheme, one of four), and the settings every scheme shares.
// What the user says (the options table's --sampler, --temporal, --labor-*, --layer-draws, in any
// order, from flags, JSON or the Loader's keywords) is a SamplerConfig: its options() checks the
// flags against each other once and builds the scheme they choose.
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "core/options.hpp"
#include "csp/temporal_kernels.hpp"

namespace dsp {

// kCsp pushes tasks to owners; kPull fetches remote adjacency rows (and weights) and samples
// locally (the ablation of DSP Fig. 11). Both give the same blocks.
enum class SampleMode { kCsp, kPull };

// Who samples which task (the picks do not depend on it: csp/degree_schedule.hpp). kDefault: one
// thread per task in task order (CPU: equal chunks per thread). kTurbo: tasks sorted by degree and
// dealt in snake order (TurboGNN): to warps and blocks on a GPU, with high-degree tasks' positions
// in shared memory; to threads on the CPU.
enum class SampleKernel { kDefault, kTurbo };

// Which sampler --sampler names: neighbour sampling (the default), LABOR or layer-wise.
enum class SamplerKind { kNeighbor, kLabor, kLayer };
// The option values of --sampler (also "neighbour"), --sample-kernel, the mode (csp, pull),
// --layer-draws (with, without) and --temporal (off, uniform, recent): core/choice.hpp's tables,
// in sampler_options.cpp.
enum class LayerDraws { kWith, kWithout };
enum class TemporalKind { kOff, kUniform, kRecent };
const Names<SamplerKind>& names_of(SamplerKind);
const Names<SampleMode>& names_of(SampleMode);
const Names<SampleKernel>& names_of(SampleKernel);
const Names<LayerDraws>& names_of(LayerDraws);
const Names<TemporalKind>& names_of(TemporalKind);

// A fanout of -1 (as DGL's and PyG's): every neighbour. Node-wise sampling without replacement
// takes min(k, degree) picks, so the sampler asks the backends for the largest fanout,
// kMaxFanout (a node of a higher degree gives that many), and they size such tasks' slots by the
// degree (csp::kDegreeSlotsAbove). Layer-wise draws and --replace draw a number: refused there.
constexpr int kAllNeighbours = -1;
constexpr int kMaxFanout = 1 << 22;
constexpr int drawn_fanout(int f) { return f == kAllNeighbours ? kMaxFanout : f; }

// The one check of a list of fanouts, wherever one is given (dsp train, the Loader, the benches,
// the sampler itself): at least one layer, each fanout -1 (all) or in [1, 2^22]. `what` names the
// option.
void check_fanouts(const std::vector<int>& fanouts, const std::string& what);

// Neighbour sampling (node-wise, the default): fanouts[l] neighbours of every frontier node,
// uniformly or weighted by edge weight (biased: the partition must have edge_weight.npy), without
// or with replacement.
struct NeighborSampling {
  bool biased = false;
  bool replace = false;
};

// LABOR (Balin & Catalyurek, NeurIPS'23; --sampler labor): node-wise, uniform and without
// replacement, with one variate r_t per neighbour global id shared by the layer's seeds
// (csp::LaborVariates). importance 0: LABOR-0, each seed keeps the min(fanout, degree) neighbours
// of smallest r_t (GraphBolt's LayerNeighborSampler: sequential Poisson sampling, a fixed count).
// i > 0: LABOR-i, i rounds of DGL's importance-sampling fixed point over the requesting rank's
// frontier give pi_ts = min(1, c_s q_t); -1: LABOR-*, rounds until it converges. Then, as DGL's
// sample_labors (Poisson sampling), t is picked for s iff r_t <= pi_ts (the count n_s varies; its
// mean is sum_t pi_ts), and the edge carries the weight (1 / pi_ts) n_s / d_s (Block::weights): a
// mean over the picks weighted by it is the Horvitz-Thompson estimate sum h_t / pi_ts / d_s of the
// mean over all d_s neighbours, exactly unbiased (DGL normalises by sum 1 / pi over the picks
// instead of d_s: self-normalised, with an O(1 / n_s) bias).
struct LaborSampling {
  int importance = 0;             // rounds: >= 0, or -1 (until it converges)
  bool layer_dependency = false;  // every layer the same variates (DGL layer_dependency)
  int batch_dependency = 1;       // K > 1: variates drift over K batches (DGL's kappa)
};

// Layer-wise (DSP Eq. 2; --sampler layer): fanouts[l] draws per layer over the frontier with
// p_u ~ W_u (the in-degree, or the total in-neighbour weight when biased), giving per-node counts
// c_u, then node-wise sampling of c_u neighbours of u (with replacement within the node when
// `replace`). The layer's draws are with replacement (kWith), or without (kWithout), over the
// union of the frontier's in-edges (multivariate hypergeometric counts c_u <= d_u, then c_u
// distinct neighbours of u: needs replace = false and unbiased sampling).
struct LayerSampling {
  bool biased = false;
  bool replace = false;
  LayerDraws draws = LayerDraws::kWith;
};

// Temporal neighbour sampling (--temporal uniform|recent; GraphBolt's TemporalNeighborSampler,
// csp/temporal_kernels.hpp): every seed carries a time T (CollectiveSampler::sample_temporal), a
// node samples only its in-edges of time < T (uniform, with or without `replace`, or the fanout
// latest: recent) and its picks inherit T, so blocks are over (id, time) pairs (Block::src_times).
// Node-wise and unbiased, in CSP mode; needs edge_time.npy.
struct TemporalSampling {
  csp::TemporalStrategy strategy = csp::TemporalStrategy::kUniform;
  bool replace = false;
  // Tests: relabel (id, time) pairs on the host even where combined keys fit the backend's table.
  bool host_relabel = false;
};

using SamplingScheme =
    std::variant<NeighborSampling, LaborSampling, LayerSampling, TemporalSampling>;

// The parameters of DSP's Table 2 plus the RNG seed and the mode.
struct SamplerOptions {
  std::vector<int> fanouts{15, 10, 5};  // from the seeds out; each > 0 or -1 (all neighbours)
  SamplingScheme scheme{};              // neighbour sampling unless set
  uint64_t seed = 0;
  SampleMode mode = SampleMode::kCsp;
  SampleKernel kernel = SampleKernel::kDefault;
  // Seeds must be owned by the calling rank (co-partitioned seeds, DSP 2.2). Off, any rank may
  // sample any node (e.g. evaluation over arbitrary ids).
  bool require_owned_seeds = true;
  // A device backend leaves each block's edge arrays in its memory (Block::on_device) instead of
  // copying them to the host: for a trainer on that device. The CPU backend ignores it.
  bool blocks_on_device = false;
  // With blocks_on_device, a device backend also leaves each block's source ids there
  // (BlockEdges::src_ids; Block::ids_to_host brings them back) instead of reading them: for a
  // feature store on that device (FeatureStore::gather_resident). Not for the samplers that read
  // them on the host: layer-wise and LABOR-i (their draws take the previous block's ids) and
  // temporal sampling (its loader deduplicates them); their ids are read as without it.
  bool ids_on_device = false;
  // A device backend captures each of a layer's kernel sequences (group, sample, unpermute,
  // relabel up to its sizes) once per shape (its sizes rounded up to 3 significant bits and the
  // arrays it names) and replays it as one CUDA Graph launch from the second call of that shape
  // on; the same blocks. Reads and exchanges between ranks stay direct.
  // The CPU backend has no kernels to capture: the sampler refuses the option there.
  bool cuda_graphs = false;
  // Heterogeneous graphs: per-relation fanouts as --fanouts gave them, "writes:10,cites:15;
  // writes:5,cites:10" (layers from the seeds out split by ';', each a list of relation:count
  // with a relation named by its name or its key src___name___dst, and '*' for every relation
  // not named; a relation named nowhere takes no neighbours in that layer) or a JSON map
  // {"writes": [10, 5], "*": [5, 5]}; `fanouts` then holds each layer's largest count. Kept as
  // text until the sampler resolves it against the partition's schema (resolve_relation_fanouts).
  // Empty: every relation takes fanouts[l] in layer l (DGL's int fanout on a heterograph).
  std::string relation_fanouts{};

  // The scheme's settings where it has them (null otherwise).
  const LaborSampling* labor() const { return std::get_if<LaborSampling>(&scheme); }
  const LayerSampling* layer() const { return std::get_if<LayerSampling>(&scheme); }
  const TemporalSampling* temporal() const { return std::get_if<TemporalSampling>(&scheme); }
  // Draws weighted by edge weight (neighbour and layer-wise sampling); with replacement
  // (neighbour, layer-wise within a node, temporal uniform).
  bool biased() const;
  bool replace() const;

  // The fanouts (check_fanouts, named --fanouts) and the values that do not fit the scheme or
  // the mode: one InvalidArgument naming them (sampler_combination_error).
  void validate() const;
};
// What is wrong with o's values for its scheme and mode ("" when nothing): the message
// validate() and the sampler throw.
std::string sampler_combination_error(const SamplerOptions& o);

// The sampler's options as a user gives them (dsp train's and the benches' flags, --config files,
// the Loader's keywords, a run's recorded config): each scheme's flags side by side, in any order,
// until options() checks them against each other and builds the scheme they choose.
struct SamplerConfig {
  std::vector<int> fanouts{15, 10, 5};  // --fanouts (SamplerOptions::fanouts)
  std::string relation_fanouts{};       // --fanouts per relation (SamplerOptions)
  SampleKernel kernel = SampleKernel::kDefault;
  bool cuda_graphs = false;
  SamplerKind kind = SamplerKind::kNeighbor;   // --sampler
  TemporalKind temporal = TemporalKind::kOff;  // --temporal
  int labor_importance = 0;                    // --labor-importance (-1: *)
  bool labor_layer_dependency = false;         // --labor-layer-dependency
  int labor_batch_dependency = 1;              // --labor-batch-dependency
  LayerDraws layer_draws = LayerDraws::kWith;  // --layer-draws
  bool biased = false, replace = false;        // the benches' --biased and --replace

  bool is_temporal() const { return temporal != TemporalKind::kOff; }
  // The scheme the flags choose, with its settings, and the shared ones (seed, mode and the
  // device switches at their defaults). InvalidArgument naming the flags that do not fit
  // ("--labor-importance ... need --sampler labor"), or what SamplerOptions::validate refuses.
  SamplerOptions options() const;
  void validate() const { (void)options(); }
};

// Parses --fanouts text: "15,10,5" into `fanouts` (`relation_fanouts` cleared), or a per-relation
// form (any ':' or a JSON object) into `relation_fanouts`, with `fanouts` each layer's largest
// count.
void parse_fanouts_option(const std::string& text, std::vector<int>& fanouts,
                          std::string& relation_fanouts);

// The sampler options a user sets (core/options.hpp): fanouts, the kernel, CUDA graphs and the
// scheme's flags. dsp train's table embeds them (JobConfig::sampler); SamplerConfig::options is
// their one check.
const OptionTable<SamplerConfig>& sampler_options_table();

}  // namespace dsp
