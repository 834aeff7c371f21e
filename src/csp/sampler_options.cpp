// The sampler's options: the names of its choices, the combinations it accepts, and the option
// table that dsp train, the benches and the Loader embed (sampler.hpp).
#include <algorithm>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "csp/sampler.hpp"

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

std::string sampler_combination_error(const SamplerOptions& o) {
  const bool all = std::find(o.fanouts.begin(), o.fanouts.end(), kAllNeighbours) != o.fanouts.end();
  if (all && (o.kind == SamplerKind::kLayer || o.replace)) {
    return "--fanouts -1 (all neighbours) samples node-wise without replacement (--sampler layer "
           "and --replace draw a number of picks: give that number)";
  }
  if (all && o.kind == SamplerKind::kLabor && o.labor_importance != 0) {
    return "--labor-importance with --fanouts -1: every neighbour is taken, there is nothing to "
           "weigh (give a fanout, or leave --labor-importance out)";
  }
  if (o.temporal) {
    if (o.kind != SamplerKind::kNeighbor || o.biased) {
      return "--temporal samples node-wise among the edges before each seed's time, uniformly or "
             "the most recent (biased, layer-wise and LABOR sampling are not supported with it)";
    }
    if (o.mode == SampleMode::kPull) return "--temporal: the pull mode is not supported";
  }
  if (o.kind == SamplerKind::kLabor) {
    if (o.biased || o.replace) {
      return "--sampler labor: LABOR samples node-wise, uniformly and without replacement "
             "(biased, with-replacement and layer-wise LABOR are not supported)";
    }
    if (o.mode == SampleMode::kPull) return "--sampler labor: the pull mode is not supported";
    if (o.labor_importance < -1) {
      return fmt::format("--labor-importance: rounds must be >= 0 or * (got {})",
                         o.labor_importance);
    }
    if (o.labor_batch_dependency < 1) {
      return fmt::format("--labor-batch-dependency: must be >= 1 (got {})",
                         o.labor_batch_dependency);
    }
  } else if (o.labor_importance != 0 || o.labor_layer_dependency || o.labor_batch_dependency != 1) {
    return "--labor-importance, --labor-layer-dependency and --labor-batch-dependency need "
           "--sampler labor";
  }
  if (!o.layer_replace) {
    if (o.kind != SamplerKind::kLayer) return "--layer-draws without needs --sampler layer";
    if (o.biased || o.replace) {
      return "--layer-draws without: layer-wise sampling without replacement is uniform and takes "
             "distinct neighbours (biased sampling and --replace are not supported with it)";
    }
  }
  return "";
}

void SamplerOptions::validate() const {
  check_fanouts(fanouts, "--fanouts");
  const std::string err = sampler_combination_error(*this);
  DSP_CHECK_ARG(err.empty(), "{}", err);
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
std::vector<Option<SamplerOptions>> sampler_kind_options() {
  using S = SamplerOptions;
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
  Option<S> draws = options::declare<S>(
      "--layer-draws", "layer_draws",
      "with (default) or without: --sampler layer's draws over the frontier with replacement, "
      "or without, over the union of its in-edges (each node at most its degree, distinct "
      "neighbours)");
  draws.type = options::type_of<LayerDraws>();
  auto parse_draws = [](const std::string& s) {
    return parse_choice<LayerDraws>(s) == LayerDraws::kWith;
  };
  draws.parse = [parse_draws](S& o, const std::string& s) { o.layer_replace = parse_draws(s); };
  draws.read = [parse_draws](S& o, const nlohmann::json& v) {
    o.layer_replace = parse_draws(v.get<std::string>());
  };
  draws.write = [](const S& o) {
    return nlohmann::json(name_of(o.layer_replace ? LayerDraws::kWith : LayerDraws::kWithout));
  };
  Option<S> temporal = options::declare<S>(
      "--temporal", "temporal",
      "off (default), uniform or recent: temporal neighbour sampling, every seed at its time T "
      "(a node's node_time.npy) sampling only in-edges of time < T (edge_time.npy), uniformly or "
      "the fanout latest; picks inherit T");
  temporal.type = options::type_of<TemporalKind>();
  auto parse_temporal = [](S& o, const std::string& v) {
    const TemporalKind t = parse_choice<TemporalKind>(v);
    o.temporal = t != TemporalKind::kOff;
    o.temporal_strategy = t == TemporalKind::kRecent ? csp::TemporalStrategy::kRecent
                                                     : csp::TemporalStrategy::kUniform;
  };
  temporal.parse = parse_temporal;
  temporal.read = [parse_temporal](S& o, const nlohmann::json& v) {
    parse_temporal(o, v.get<std::string>());
  };
  temporal.write = [](const S& o) {
    return nlohmann::json(name_of(temporal_kind(o.temporal, o.temporal_strategy)));
  };
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

const OptionTable<SamplerOptions>& sampler_options_table() {
  static const OptionTable<SamplerOptions> table = [] {
    using S = SamplerOptions;
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
    fanouts.parse = [](S& o, const std::string& s) { parse_fanouts_option(s, o); };
    fanouts.read = [](S& o, const nlohmann::json& v) {
      if (v.is_array()) {
        o.fanouts = v.get<std::vector<int>>();
        o.relation_fanouts.clear();
      } else {
        parse_fanouts_option(v.is_string() ? v.get<std::string>() : v.dump(), o);
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
