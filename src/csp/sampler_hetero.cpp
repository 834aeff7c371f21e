// Heterogeneous sampling: per-relation fanouts (--fanouts rel:count), TypedScheme (every layer's
// (node, relation) tasks through one CSP round, blocks over union ids with relation and type
// arrays) and the protocol's front end for it, CollectiveSampler::sample (sample_typed).
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/error.hpp"
#include "core/lists.hpp"
#include "core/timer.hpp"
#include "csp/exclusions.hpp"
#include "csp/layer_scheme.hpp"
#include "csp/sampler.hpp"
#include "csp/scheme_protocol.hpp"

namespace dsp {

namespace {

constexpr int kMaxRelationFanout = 1 << 22;

// "writes:10,cites:15;writes:5" -> per layer, relation name -> count (in order of appearance).
using LayerSpec = std::vector<std::pair<std::string, int>>;

int parse_count(const std::string& s, const std::string& item) {
  size_t used = 0;
  int v = -1;
  try {
    v = std::stoi(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  DSP_CHECK_ARG(used == s.size() && !s.empty() && v >= kAllNeighbours && v <= kMaxRelationFanout,
                "--fanouts: '{}' needs a count in [0, {}] or -1 (all) after its relation", item,
                kMaxRelationFanout);
  return drawn_fanout(v);
}

std::vector<LayerSpec> parse_text_spec(const std::string& text) {
  std::vector<LayerSpec> layers;
  size_t b = 0;
  while (b <= text.size()) {
    size_t e = text.find(';', b);
    if (e == std::string::npos) e = text.size();
    LayerSpec layer;
    for (const std::string& item : split_list(text.substr(b, e - b))) {
      if (item.empty()) continue;
      const size_t c = item.rfind(':');
      DSP_CHECK_ARG(c != std::string::npos && c > 0,
                    "--fanouts: '{}' is not relation:count (layers are separated by ';')", item);
      layer.emplace_back(item.substr(0, c), parse_count(item.substr(c + 1), item));
    }
    DSP_CHECK_ARG(!layer.empty(), "--fanouts: layer {} of '{}' names no relation",
                  layers.size() + 1, text);
    layers.push_back(std::move(layer));
    b = e + 1;
  }
  return layers;
}

std::vector<LayerSpec> parse_json_spec(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    DSP_THROW_T(InvalidArgument, "--fanouts: not valid JSON ({})", e.what());
  }
  DSP_CHECK_ARG(j.is_object() && !j.empty(),
                "--fanouts: a JSON map of relation -> [count per layer] is expected");
  size_t L = 0;
  for (auto it = j.begin(); it != j.end(); ++it) {
    DSP_CHECK_ARG(it->is_array() && !it->empty(),
                  "--fanouts: relation '{}' needs a list of counts, one per layer", it.key());
    DSP_CHECK_ARG(L == 0 || it->size() == L,
                  "--fanouts: relation '{}' has {} layers, another relation {}", it.key(),
                  it->size(), L);
    L = it->size();
  }
  std::vector<LayerSpec> layers(L);
  for (auto it = j.begin(); it != j.end(); ++it) {
    for (size_t l = 0; l < L; ++l) {
      const nlohmann::json& v = (*it)[l];
      DSP_CHECK_ARG(v.is_number_integer(), "--fanouts: relation '{}' layer {}: not an integer",
                    it.key(), l + 1);
      layers[l].emplace_back(it.key(), parse_count(std::to_string(v.get<int64_t>()), it.key()));
    }
  }
  return layers;
}

std::vector<LayerSpec> parse_spec(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t");
  return first != std::string::npos && text[first] == '{' ? parse_json_spec(text)
                                                          : parse_text_spec(text);
}

std::string relation_list(const HeteroSchema& s) {
  std::string out;
  for (const RelationInfo& r : s.relations) out += (out.empty() ? "" : ", ") + r.key();
  return out;
}

// The relation a --fanouts name means: its key, or a name only one relation has.
int find_relation(const HeteroSchema& s, const std::string& name) {
  int found = -1, matches = 0;
  for (int r = 0; r < s.num_relations(); ++r) {
    if (s.relations[r].key() == name) return r;
    if (s.relations[r].name == name) {
      found = r;
      ++matches;
    }
  }
  DSP_CHECK_ARG(matches <= 1,
                "--fanouts: relation name '{}' is ambiguous ({} relations have it); name it by "
                "its key src___name___dst",
                name, matches);
  DSP_CHECK_ARG(found >= 0, "--fanouts: no relation '{}' in the graph (relations: {})", name,
                relation_list(s));
  return found;
}

}  // namespace

void parse_fanouts_option(const std::string& text, std::vector<int>& fanouts,
                          std::string& relation_fanouts) {
  if (text.find(':') == std::string::npos && text.find('{') == std::string::npos) {
    fanouts = parse_int_list(text, "--fanouts");
    relation_fanouts.clear();
    return;
  }
  std::vector<int> widest;
  for (const LayerSpec& layer : parse_spec(text)) {
    int m = 0;
    for (const auto& item : layer) m = std::max(m, item.second);
    widest.push_back(std::max(m, 1));
  }
  fanouts = widest;
  relation_fanouts = text;
}

std::vector<std::vector<int>> resolve_relation_fanouts(const SamplerOptions& o,
                                                       const HeteroSchema& schema) {
  const int R = schema.num_relations();
  if (o.relation_fanouts.empty()) {
    std::vector<std::vector<int>> out;
    for (int f : o.fanouts) out.emplace_back(R, drawn_fanout(f));
    return out;
  }
  std::vector<std::vector<int>> out;
  for (const LayerSpec& layer : parse_spec(o.relation_fanouts)) {
    std::vector<int> f(R, -1);
    int rest = 0;
    for (const auto& [name, count] : layer) {
      if (name == "*") {
        rest = count;
        continue;
      }
      const int r = find_relation(schema, name);
      DSP_CHECK_ARG(f[r] < 0, "--fanouts: relation '{}' is given twice in layer {}", name,
                    out.size() + 1);
      f[r] = count;
    }
    for (int& c : f) c = c < 0 ? rest : c;
    out.push_back(std::move(f));
  }
  return out;
}

TypedScheme::TypedScheme(const PartitionData& part, SamplerOptions& o) : part_(part) {
  const HeteroSchema& s = part_.meta.hetero->schema;
  DSP_CHECK_ARG(std::holds_alternative<NeighborSampling>(o.scheme) && !o.biased() &&
                    o.mode == SampleMode::kCsp,
                "sampler: a heterogeneous graph is sampled node-wise and uniformly in CSP mode "
                "(--sampler labor|layer, biased, temporal and pull sampling are not supported "
                "on it)");
  DSP_CHECK_ARG(part_.relation_indptr.defined(),
                "sampler: the heterogeneous part has no relation segments (relation_indptr.npy)");
  num_rel_ = s.num_relations();
  DSP_CHECK_ARG(part_.meta.num_nodes * num_rel_ < (int64_t{1} << csp::kTaskShift),
                "sampler: {} nodes x {} relations exceed the 2^{} task ids", part_.meta.num_nodes,
                num_rel_, csp::kTaskShift);
  fanouts_ = resolve_relation_fanouts(o, s);
  o.fanouts.clear();
  for (const std::vector<int>& f : fanouts_) {
    o.fanouts.push_back(std::max(1, *std::max_element(f.begin(), f.end())));
  }
  rels_by_dst_.assign(s.num_types(), {});
  for (int r = 0; r < s.num_relations(); ++r) rels_by_dst_[s.relations[r].dst_type].push_back(r);
}

void TypedScheme::layer(LayerProtocol& p, const int64_t* nodes, const int32_t* types, int64_t n,
                        uint64_t key, int l, Block& out) {
  // Tasks: node i's relations into its type, in relation order, as ids v R + r; node i's tasks
  // are [first[i], first[i + 1]). The host arrays are members: reused, so no page faults.
  const std::vector<int>& fan = fanouts_[l];
  tasks_.clear();
  fan_.clear();
  rel_.clear();
  first_.resize(n + 1);
  int max_fan = 1;
  for (int64_t i = 0; i < n; ++i) {
    first_[i] = static_cast<int64_t>(tasks_.size());
    for (int r : rels_by_dst_[types[i]]) {
      if (fan[r] == 0) continue;
      tasks_.push_back(nodes[i] * num_rel_ + r);
      fan_.push_back(fan[r]);
      rel_.push_back(r);
      max_fan = std::max(max_fan, fan[r]);
    }
  }
  first_[n] = static_cast<int64_t>(tasks_.size());
  const int64_t nt = static_cast<int64_t>(tasks_.size());
  SamplerBackend& be = p.backend();
  if (!d_tasks_) {
    for (auto* b : {&d_tasks_, &d_fan_, &d_offsets_, &d_dst_}) *b = be.make_buffer();
  }
  using csp_detail::in_backend;
  const LayerPicks lo =
      p.run_layer(in_backend(be, *d_tasks_, tasks_.data(), nt), nt,
                  in_backend(be, *d_fan_, fan_.data(), nt), max_fan, key, nullptr, -1);
  Stopwatch sw;
  // The picks per node: its tasks' picks are consecutive (tasks in node order).
  toff_.resize(nt + 1);
  be.to_host(toff_.data(), lo.offsets, (nt + 1) * sizeof(int64_t));
  noff_.resize(n + 1);
  for (int64_t i = 0; i <= n; ++i) noff_[i] = toff_[first_[i]];
  LayerPicks per_node = lo;
  per_node.offsets = in_backend(be, *d_offsets_, noff_.data(), n + 1);
  be.relabel(in_backend(be, *d_dst_, nodes, n), n, per_node, l, out, nullptr, nullptr);
  out.edges_to_host();
  attach_relations(types, n, out);
  p.stats().t_relabel += sw.seconds();
}

// A heterogeneous block's edge_types (task j's picks carry its relation) and src_types: the
// destinations' types, then each new source takes the source type of the relation of its first
// edge (every pick of relation r is an r.src node), no lookup.
void TypedScheme::attach_relations(const int32_t* types, int64_t n, Block& out) const {
  const HeteroSchema& s = part_.meta.hetero->schema;
  out.edge_types.resize(out.num_edges());
  for (size_t j = 0; j + 1 < toff_.size(); ++j) {
    std::fill(out.edge_types.begin() + toff_[j], out.edge_types.begin() + toff_[j + 1], rel_[j]);
  }
  out.src_types.assign(out.num_src, -1);
  std::copy(types, types + n, out.src_types.begin());
  for (int64_t e = 0; e < out.num_edges(); ++e) {
    int32_t& t = out.src_types[out.indices[e]];
    if (t < 0) t = s.relations[out.edge_types[e]].src_type;
  }
}

std::string TypedScheme::exclusions(const CollectiveSampler::ExcludedEdges& ex,
                                    CollectiveSampler::ExcludedEdges& tasks) const {
  const int64_t n = part_.meta.num_nodes;
  if (ex.dst.size() != ex.src.size() || ex.rel.size() != ex.dst.size()) {
    return fmt::format(
        "sampler: excluded edges: {} dst ids, {} src ids and {} relations (one of "
        "each per edge on a heterogeneous graph)",
        ex.dst.size(), ex.src.size(), ex.rel.size());
  }
  tasks.dst.resize(ex.dst.size());
  tasks.src = ex.src;
  for (size_t i = 0; i < ex.dst.size(); ++i) {
    if (ex.dst[i] < 0 || ex.dst[i] >= n || ex.src[i] < 0 || ex.src[i] >= n || ex.rel[i] < 0 ||
        ex.rel[i] >= num_rel_) {
      return fmt::format(
          "sampler: excluded edge {} -> {} of relation {} is not between node ids "
          "of one of the {} relations (graph has {} nodes)",
          ex.src[i], ex.dst[i], ex.rel[i], num_rel_, n);
    }
    tasks.dst[i] = ex.dst[i] * num_rel_ + ex.rel[i];
  }
  return "";
}

SampledBatch CollectiveSampler::sample_typed(const std::vector<int64_t>& seeds, int64_t epoch,
                                             int64_t batch, const ExcludedEdges* exclude) {
  Round round(*this);
  std::string err =
      seed_error(seeds, part_.meta.num_nodes, opts_.require_owned_seeds, rank_, begin_, end_);
  const bool has_ex = exclude && !(exclude->dst.empty() && exclude->src.empty());
  ExcludedEdges tasks;
  if (err.empty() && has_ex) err = typed_->exclusions(*exclude, tasks);
  round.check(err, has_ex ? &tasks : nullptr);
  const HeteroLayout& h = *part_.meta.hetero;
  std::vector<int32_t> seed_types(seeds.size());
  for (size_t i = 0; i < seeds.size(); ++i) seed_types[i] = h.type_of(seeds[i]);
  const int L = static_cast<int>(typed_->fanouts().size());
  std::vector<Block> blocks(L);
  SchemeProtocol protocol(*this);
  for (int l = 0; l < L; ++l) {
    Stopwatch lsw;
    // the frontier: the seeds, then the previous block's sources
    const Block* prev = l ? &blocks[l - 1] : nullptr;
    typed_->layer(protocol, prev ? prev->src_ids.data() : seeds.data(),
                  prev ? prev->src_types.data() : seed_types.data(),
                  prev ? prev->num_src : static_cast<int64_t>(seeds.size()),
                  rng_key(opts_.seed, epoch, batch, l), l, blocks[l]);
    stats_.sampled_edges += blocks[l].num_edges();
    stats_.layer_sources[l] += blocks[l].num_src;
    stats_.t_layer[l] += lsw.seconds();
  }
  return round.finish(blocks, seeds, epoch, batch);
}

}  // namespace dsp
