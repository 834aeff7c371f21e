// The sampler's options (sampler_options.hpp): the names of its choices, the flags' scheme, the
// values each scheme accepts, and the option table that dsp train, the benches and the Loader
// embed.
#include <algorithm>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "csp/sampler_options.hpp"

namespace dsp {

const Names<SamplerKind>& names_of(SamplerKind) {
  using K = SamplerKind;
  static const Names<K> n("sampler", {{K::kNeighbor, "neighbor"},
                                      {K::kLabor, "labor"},
                                      {K::kLayer, "layer"},
                                      {K::kNeighbor, "neighbour"}});
  return n;
}

const Names<SampleMode>& names_of(SampleMode) {
  static const Names<SampleMode> n("sampling mode",
                                   {{SampleMode::kCsp, "csp"}, {SampleMode::kPull, "pull"}});
  return n;
}

const Names<SampleKernel>& names_of(SampleKernel) {
  static const Names<SampleKernel> n(
      "sampling kernel", {{SampleKernel::kDefault, "default"}, {SampleKernel::kTurbo, "turbo"}});
  return n;
}

const Names<LayerDraws>& names_of(LayerDraws) {
  static const Names<LayerDraws> n(
      "layer draws", {{LayerDraws::kWith, "with"}, {LayerDraws::kWithout, "without"}});
  return n;
}

const Names<TemporalKind>& names_of(TemporalKind) {
  using T = TemporalKind;
  static const Names<T> n("temporal sampling",
                          {{T::kOff, "off"}, {T::kUniform, "uniform"}, {T::kRecent, "recent"}});
  return n;
}

bool SamplerOptions::biased() const {
  if (const auto* n = std::get_if<NeighborSampling>(&scheme)) return n->biased;
  return layer() != nullptr && layer()->biased;
}

bool SamplerOptions::replace() const {
  if (const auto* n = std::get_if<NeighborSampling>(&scheme)) return n->replace;
  if (layer()) return layer()->replace;
  return temporal() != nullptr && temporal()->replace;
}

std::string sampler_combination_error(const SamplerOptions& o) {
  const bool all = std::find(o.fanouts.begin(), o.fanouts.end(), kAllNeighbours) != o.fanouts.end();
  if (all && (o.layer() || o.replace())) {
    return "--fanouts -1 (all neighbours) samples node-wise without replacement (--sampler layer "
           "and --replace draw a number of picks: give that number)";
  }
  const LaborSampling* labor = o.labor();
  if (all && labor && labor->importance != 0) {
    return "--labor-importance with --fanouts -1: every neighbour is taken, there is nothing to "
           "weigh (give a fanout, or leave --labor-importance out)";
  }
  if (o.temporal() && o.mode == SampleMode::kPull)
    return "--temporal: the pull mode is not supported";
  if (labor) {
    if (o.mode == SampleMode::kPull) return "--sampler labor: the pull mode is not supported";
    if (labor->importance < -1) {
      return fmt::format("--labor-importance: rounds must be >= 0 or * (got {})",
                         labor->importance);
    }
    if (labor->batch_dependency < 1) {
      return fmt::format("--labor-batch-dependency: must be >= 1 (got {})",
                         labor->batch_dependency);
    }
  }
  const LayerSampling* layer = o.layer();
  if (layer && layer->draws == LayerDraws::kWithout && (layer->biased || layer->replace)) {
    return "--layer-draws without: layer-wise sampling without replacement is uniform and takes "
           "distinct neighbours (biased sampling and --replace are not supported with it)";
  }
  return "";
}

void SamplerOptions::validate() const {
  check_fanouts(fanouts, "--fanouts");
  const std::string err = sampler_combination_error(*this);
  DSP_CHECK_ARG(err.empty(), "{}", err);
}

namespace {
// What is wrong with c's flags together ("" when nothing): those of a scheme it did not choose.
std::string scheme_flags_error(const SamplerConfig& c) {
  if (c.is_temporal() && (c.kind != SamplerKind::kNeighbor || c.biased)) {
    return "--temporal samples node-wise among the edges before each seed's time, uniformly or "
           "the most recent (biased, layer-wise and LABOR sampling are not supported with it)";
  }
  if (c.kind == SamplerKind::kLabor) {
    if (c.biased || c.replace) {
      return "--sampler labor: LABOR samples node-wise, uniformly and without replacement "
             "(biased, with-replacement and layer-wise LABOR are not supported)";
    }
  } else if (c.labor_importance != 0 || c.labor_layer_dependency || c.labor_batch_dependency != 1) {
    return "--labor-importance, --labor-layer-dependency and --labor-batch-dependency need "
           "--sampler labor";
  }
  if (c.layer_draws == LayerDraws::kWithout && c.kind != SamplerKind::kLayer) {
    return "--layer-draws without needs --sampler layer";
  }
  return "";
}

SamplingScheme scheme_of(const SamplerConfig& c) {
  if (c.is_temporal()) {
    TemporalSampling t;
    t.strategy = c.temporal == TemporalKind::kRecent ? csp::TemporalStrategy::kRecent
                                                     : csp::TemporalStrategy::kUniform;
    t.replace = c.replace;
    return t;
  }
  switch (c.kind) {
    case SamplerKind::kLabor:
      return LaborSampling{c.labor_importance, c.labor_layer_dependency, c.labor_batch_dependency};
    case SamplerKind::kLayer:
      return LayerSampling{c.biased, c.replace, c.layer_draws};
    case SamplerKind::kNeighbor:
      break;
  }
  return NeighborSampling{c.biased, c.replace};
}
}  // namespace

SamplerOptions SamplerConfig::options() const {
  const std::string err = scheme_flags_error(*this);
  DSP_CHECK_ARG(err.empty(), "{}", err);
  SamplerOptions o;
  o.fanouts = fanouts;
  o.relation_fanouts = relation_fanouts;
  o.kernel = kernel;
  o.cuda_graphs = cuda_graphs;
  o.scheme = scheme_of(*this);
  o.validate();
  return o;
}

namespace {
int parse_labor_rounds(const std::string& s) {
  if (s == "*") return -1;
  const int r = options::from_text<int>(s, "--labor-importance");
  DSP_CHECK_ARG(r >= 0, "--labor-importance: rounds must be >= 0 or * (got {})", s);
  return r;
}
std::string labor_rounds_text(int r) { return r < 0 ? "*" : std::to_string(r); }

// The options of the sampler's kind: --sampler and LABOR's (declared here once; dsp train, the
// benches and the Loader embed them).
OptionTable<SamplerConfig> sampler_kind_options() {
  using S = SamplerConfig;
  Option<S> kind = options::value<S>(
      "--sampler", "sampler",
      "neighbor (default: fanouts[l] neighbours of every node), labor (LABOR: as many, chosen "
      "by per-node variates shared across the layer's seeds, so fewer distinct nodes), or layer "
      "(layer-wise: fanouts[l] draws per layer over the frontier)",
      [](S & o) -> auto& { return o.kind; });
  Option<S> rounds = options::declare<S>(
      "--labor-importance", "labor_importance",
      "LABOR-i: 0 (default, uniform), i rounds of importance sampling, or * (until it converges); "
      "with i != 0 sampled edges carry weights the models' aggregations use");
  rounds.type = "TEXT";
  rounds.parse = [](S& o, const std::string& s) { o.labor_importance = parse_labor_rounds(s); };
  rounds.read = [](S& o, const nlohmann::json& v) {
    o.labor_importance =
        parse_labor_rounds(v.is_string() ? v.get<std::string>() : std::to_string(v.get<int>()));
  };
  rounds.write = [](const S& o) { return nlohmann::json(labor_rounds_text(o.labor_importance)); };
  Option<S> draws = options::value<S>(
      "--layer-draws", "layer_draws",
      "with (default) or without: --sampler layer's draws over the frontier with replacement, "
      "or without, over the union of its in-edges (each node at most its degree, distinct "
      "neighbours)",
      [](S & o) -> auto& { return o.layer_draws; });
  Option<S> temporal = options::value<S>(
      "--temporal", "temporal",
      "off (default), uniform or recent: temporal neighbour sampling, every seed at its time T "
      "(a node's node_time.npy) sampling only in-edges of time < T (edge_time.npy), uniformly or "
      "the fanout latest; picks inherit T",
      [](S & o) -> auto& { return o.temporal; });
  return {
      kind,
      rounds,
      options::toggle<S>(
          "--labor-layer-dependency", "labor_layer_dependency",
          "LABOR: every layer uses the same variates (fewer nodes)",
          [](S & o) -> auto& { return o.labor_layer_dependency; }),
      options::value<S>(
          "--labor-batch-dependency", "labor_batch_dependency",
          "LABOR: K > 1 lets the variates drift over K consecutive batches "
          "(more overlap between batches; default 1: independent)",
          [](S & o) -> auto& { return o.labor_batch_dependency; }),
      draws,
      temporal,
  };
}
}  // namespace

const OptionTable<SamplerConfig>& sampler_options_table() {
  static const OptionTable<SamplerConfig> table = [] {
    using S = SamplerConfig;
    Option<S> kernel = options::value<S>(
        "--sample-kernel", "sample_kernel",
        "default, or turbo: tasks degree-sorted and dealt in snake order (TurboGNN): to warps and "
        "blocks with shared-memory positions on a GPU, to threads on the CPU; the same blocks "
        "either way",
        [](S & o) -> auto& { return o.kernel; });
    Option<S> fanouts = options::declare<S>(
        "--fanouts", "fanouts",
        "neighbours sampled per node, from the seeds out; one per layer, -1 for all of them "
        "(default 15,10,5; dsp train --task link: 15,10). On a "
        "heterogeneous graph each relation takes them, or per relation: "
        "\"writes:10,cites:15;writes:5,cites:10\" (layers split by ';', '*' for the relations "
        "not named, the others none) or a JSON map {\"writes\": [10, 5], ...}");
    fanouts.type = "LIST";
    fanouts.parse = [](S& o, const std::string& s) {
      parse_fanouts_option(s, o.fanouts, o.relation_fanouts);
    };
    fanouts.read = [](S& o, const nlohmann::json& v) {
      if (v.is_array()) {
        o.fanouts = v.get<std::vector<int>>();
        o.relation_fanouts.clear();
      } else {
        parse_fanouts_option(v.is_string() ? v.get<std::string>() : v.dump(), o.fanouts,
                             o.relation_fanouts);
      }
    };
    fanouts.write = [](const S& o) {
      return o.relation_fanouts.empty() ? nlohmann::json(o.fanouts)
                                        : nlohmann::json(o.relation_fanouts);
    };
    Option<S> graphs = options::toggle<S>(
        "--cuda-graphs", "cuda_graphs",
        "device sampler: capture each shape of a layer's sampling kernels once and replay it as "
        "one CUDA Graph launch (the same blocks; the CPU sampler refuses it)",
        [](S & o) -> auto& { return o.cuda_graphs; });
    OptionTable<S> t{fanouts, kernel, graphs};
    options::append(t, sampler_kind_options());
    return t;
  }();
  return table;
}

void check_fanouts(const std::vector<int>& fanouts, const std::string& what) {
  DSP_CHECK_ARG(!fanouts.empty(), "{}: at least one layer (fanout) is needed", what);
  for (int f : fanouts) {
    DSP_CHECK_ARG(f == kAllNeighbours || (f > 0 && f <= kMaxFanout),
                  "{}: fanouts must be -1 (all neighbours) or in [1, {}], got {}", what, kMaxFanout,
                  f);
  }
}

}  // namespace dsp
