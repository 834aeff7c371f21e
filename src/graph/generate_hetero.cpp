#include "graph/generate_hetero.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"
#include "core/timer.hpp"
#include "graph/generate_detail.hpp"
#include "graph/hetero_detail.hpp"

namespace dsp {
namespace {

// Keys are rng_key(seed, kHeteroDomain, purpose): no stream is shared with the homogeneous generators
// or with sampling.
constexpr uint64_t kHeteroDomain = 0x686574657267656eULL;  // "hetergen"
enum class HeteroKey : uint64_t { kCommunities = 1, kEdges, kCentroids, kFeatures, kLabels, kSplits };
uint64_t key_for(uint64_t seed, HeteroKey p) {
  return rng_key(seed, kHeteroDomain, static_cast<uint64_t>(p));
}

constexpr int64_t kGrain = int64_t{1} << 12;

// Node types in OGB's (alphabetical) order.
enum Type : int { kAuthor = 0, kField, kInstitution, kPaper, kTypes };
constexpr const char* kTypeNames[kTypes] = {"author", "field_of_study", "institution", "paper"};

// A relation drawn: its source, name and destination types, the type whose nodes draw its edges
// (one stream each) and how many each draws.
struct RelationSpec {
  Type src;
  const char* name;
  Type dst;
  Type from;
  int64_t HeteroGenOptions::*per;
};
constexpr RelationSpec kRelations[] = {
    {kAuthor, "affiliated_with", kInstitution, kAuthor, &HeteroGenOptions::affiliations},
    {kAuthor, "writes", kPaper, kPaper, &HeteroGenOptions::writes},
    {kPaper, "cites", kPaper, kPaper, &HeteroGenOptions::cites},
    {kPaper, "has_topic", kField, kPaper, &HeteroGenOptions::topics},
};

void check_options(const HeteroGenOptions& o) {
  const std::pair<const char*, int64_t> counts[] = {{"papers", o.papers},
                                                    {"authors", o.authors},
                                                    {"institutions", o.institutions},
                                                    {"fields", o.fields}};
  for (const auto& [what, n] : counts) {
    DSP_CHECK_ARG(n > 0 && n < (int64_t{1} << 40), "the number of {} must be in [1, 2^40), got {}",
                  what, n);
  }
  DSP_CHECK_ARG(o.classes >= 1 && o.classes <= (int64_t{1} << 20),
                "the number of classes must be in [1, 2^20], got {}", o.classes);
  DSP_CHECK_ARG(o.feature_dim >= 0 && o.feature_dim <= (int64_t{1} << 20),
                "the feature dimension must be in [0, 2^20], got {}", o.feature_dim);
  const std::pair<const char*, int64_t> per[] = {{"writes", o.writes},
                                                 {"cites", o.cites},
                                                 {"topics", o.topics},
                                                 {"affiliations", o.affiliations}};
  for (const auto& [what, k] : per) {
    DSP_CHECK_ARG(k >= 0 && k <= 1024, "--{} must be in [0, 1024], got {}", what, k);
  }
  DSP_CHECK_ARG(o.intra >= 0 && o.intra <= 1, "--intra {} is outside [0, 1]", o.intra);
  DSP_CHECK_ARG(o.feature_noise >= 0 && std::isfinite(o.feature_noise),
                "--feature-noise must be finite and >= 0, got {}", o.feature_noise);
  DSP_CHECK_ARG(o.label_noise >= 0 && o.label_noise <= 1, "--label-noise {} is outside [0, 1]",
                o.label_noise);
  const double test = o.test_frac.value_or(0);
  for (const auto& [what, f] : {std::pair{"train", o.train_frac}, std::pair{"valid", o.valid_frac},
                                std::pair{"test", test}}) {
    DSP_CHECK_ARG(f >= 0 && f <= 1, "{} fraction {} is outside [0, 1]", what, f);
  }
  DSP_CHECK_ARG(o.train_frac + o.valid_frac + test <= 1 + 1e-12,
                "train + valid + test fractions ({} + {} + {}) exceed 1", o.train_frac,
                o.valid_frac, test);
}

// The planted communities: of every node of every type, and each community's members.
struct HeteroModel {
  std::array<int64_t, kTypes> count{};
  std::array<std::vector<int32_t>, kTypes> comm;
  std::array<std::vector<std::vector<int64_t>>, kTypes> members;  // ids ascending

  // A node of `type` for an edge from community c: with probability intra one of c's members,
  // else any node; in either, position x * size with x = u^2 (density ~ 1/sqrt(x)): low
  // positions are hubs.
  int64_t pick(int type, int32_t c, double intra, RngStream& s) const {
    const bool inside = s.uniform01() < intra;
    const double u = s.uniform01();
    const std::vector<int64_t>& m = members[type][c];
    auto at = [u](int64_t size) {
      return std::min(size - 1, static_cast<int64_t>(u * u * static_cast<double>(size)));
    };
    if (inside && !m.empty()) return m[at(static_cast<int64_t>(m.size()))];
    return at(count[type]);
  }
};

HeteroModel hetero_model(const HeteroGenOptions& o) {
  HeteroModel m;
  m.count = {o.authors, o.fields, o.institutions, o.papers};
  const uint64_t key = key_for(o.seed, HeteroKey::kCommunities);
  for (int t = 0; t < kTypes; ++t) {
    std::vector<int32_t>& comm = m.comm[t];
    comm.resize(static_cast<size_t>(m.count[t]));
    parallel_for(0, m.count[t], kGrain, [&](int64_t b, int64_t e) {
      for (int64_t v = b; v < e; ++v) {
        comm[v] = static_cast<int32_t>(RngStream(key, v, t).uniform_int(o.classes));
      }
    });
    m.members[t].assign(static_cast<size_t>(o.classes), {});
    for (int64_t v = 0; v < m.count[t]; ++v) m.members[t][comm[v]].push_back(v);
  }
  return m;
}

// Relation r's edges: every node of its drawing type draws `per` partners from the other type.
Csr draw_relation(const HeteroGenOptions& o, const HeteroModel& m, int r) {
  const RelationSpec& spec = kRelations[r];
  const int64_t k = o.*spec.per, n = m.count[spec.from];
  const Type other = spec.from == spec.src ? spec.dst : spec.src;
  std::vector<int64_t> src(static_cast<size_t>(n * k)), dst(static_cast<size_t>(n * k));
  const uint64_t key = key_for(o.seed, HeteroKey::kEdges);
  parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t v = b; v < e; ++v) {
      RngStream s(key, static_cast<uint64_t>(v), static_cast<uint32_t>(r));
      const int32_t c = m.comm[spec.from][v];
      for (int64_t j = 0; j < k; ++j) {
        const int64_t u = m.pick(other, c, o.intra, s);
        src[v * k + j] = spec.from == spec.src ? v : u;
        dst[v * k + j] = spec.from == spec.src ? u : v;
      }
    }
  });
  const std::string what =
      fmt::format("{}___{}___{}", kTypeNames[spec.src], spec.name, kTypeNames[spec.dst]);
  return detail::build_relation_csr(m.count[spec.src], m.count[spec.dst], src.data(), dst.data(),
                                    n * k, what, spec.src == spec.dst);
}

// The share of g's entries whose two ends share a community.
double share_inside(const Csr& g, const std::vector<int32_t>& src_comm,
                    const std::vector<int32_t>& dst_comm) {
  int64_t inside = 0;
  const int64_t* p = g.rowptr();
  for (int64_t v = 0; v < g.num_nodes; ++v) {
    for (int64_t e = p[v]; e < p[v + 1]; ++e)
      inside += src_comm[g.indices.int_at(e)] == dst_comm[v];
  }
  return g.num_edges() > 0 ? static_cast<double>(inside) / static_cast<double>(g.num_edges()) : 0;
}

std::vector<float> class_centroids(const HeteroGenOptions& o) {
  std::vector<float> mu(static_cast<size_t>(o.classes * o.feature_dim));
  for (int64_t c = 0; c < o.classes; ++c) {
    RngStream s(key_for(o.seed, HeteroKey::kCentroids), static_cast<uint64_t>(c));
    detail::normals(s, mu.data() + c * o.feature_dim, o.feature_dim);
  }
  return mu;
}

Array paper_features(const HeteroGenOptions& o, const HeteroModel& m,
                     const std::vector<float>& mu) {
  const int64_t n = o.papers, dim = o.feature_dim;
  Array out(DType::kFloat32, {n, dim});
  float* x = out.mutable_data<float>();
  const auto noise = static_cast<float>(o.feature_noise);
  parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t v = b; v < e; ++v) {
      RngStream s(key_for(o.seed, HeteroKey::kFeatures), static_cast<uint64_t>(v));
      float* row = x + v * dim;
      const float* c = mu.data() + m.comm[kPaper][v] * dim;
      detail::normals(s, row, dim);
      for (int64_t j = 0; j < dim; ++j) row[j] = c[j] + noise * row[j];
    }
  });
  return out;
}

Array paper_labels(const HeteroGenOptions& o, const HeteroModel& m) {
  Array out(DType::kInt64, {o.papers});
  int64_t* y = out.mutable_data<int64_t>();
  parallel_for(0, o.papers, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t v = b; v < e; ++v) {
      RngStream s(key_for(o.seed, HeteroKey::kLabels), static_cast<uint64_t>(v));
      y[v] = m.comm[kPaper][v];
      if (s.uniform01() < o.label_noise) y[v] = static_cast<int64_t>(s.uniform_int(o.classes));
    }
  });
  return out;
}

// The papers feature_only_accuracy measures: every paper up to this many, else every k-th (the
// estimate's standard error stays below 0.003 while a large graph costs no more).
constexpr int64_t kAccuracySample = 50000;

// The share of papers whose label is the class of the nearest centroid: the accuracy of the
// Bayes classifier on the features alone (equal priors, isotropic equal-variance gaussians:
// nearest centroid is optimal), measured on the generated papers (kAccuracySample of them).
double feature_only_accuracy(const HeteroDataset& ds, const std::vector<float>& mu,
                             int64_t classes) {
  const Array& f = ds.features[kPaper];
  const int64_t dim = f.dim(1), stride = (f.dim(0) + kAccuracySample - 1) / kAccuracySample;
  const int64_t n = (f.dim(0) + stride - 1) / stride;
  const float* x = f.data<float>();
  const int64_t* y = ds.labels.data<int64_t>();
  int64_t right = 0;
#pragma omp parallel for reduction(+ : right) schedule(static, 256)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = i * stride;
    int64_t best = 0;
    double best_d = std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < classes; ++c) {
      double d = 0;
      for (int64_t j = 0; j < dim; ++j) {
        const double t = x[v * dim + j] - mu[c * dim + j];
        d += t * t;
      }
      if (d < best_d) best_d = d, best = c;
    }
    right += best == y[v];
  }
  return static_cast<double>(right) / static_cast<double>(n);
}

// Train/valid/test ids of the papers: the homogeneous generators' split (generate_detail.hpp).
void make_splits(HeteroDataset& ds, const HeteroGenOptions& o) {
  const detail::SplitSizes sizes =
      detail::split_sizes(o.papers, o.train_frac, o.valid_frac, o.test_frac);
  std::vector<std::vector<int64_t>> ids =
      detail::split_ids(o.papers, sizes, key_for(o.seed, HeteroKey::kSplits));
  ds.train_idx = Array::from_vector(std::move(ids[0]));
  ds.valid_idx = Array::from_vector(std::move(ids[1]));
  ds.test_idx = Array::from_vector(std::move(ids[2]));
}

nlohmann::json hetero_extra(const HeteroGenOptions& o) {
  const double c = static_cast<double>(o.classes);
  return {{"generator", "hetero"},
          {"seed", o.seed},
          {"papers", o.papers},
          {"authors", o.authors},
          {"institutions", o.institutions},
          {"fields", o.fields},
          {"writes", o.writes},
          {"cites", o.cites},
          {"topics", o.topics},
          {"affiliations", o.affiliations},
          {"intra_fraction", o.intra},
          {"feature_noise", o.feature_noise},
          {"label_noise", o.label_noise},
          {"train_frac", o.train_frac},
          {"valid_frac", o.valid_frac},
          {"test_frac", o.test_frac ? nlohmann::json(*o.test_frac) : nlohmann::json(nullptr)},
          {"community_to_class", "community"},
          {"accuracy_bound", 1.0 - o.label_noise * (1.0 - 1.0 / c)},
          {"accuracy_bound_method",
           "Bayes-optimal accuracy given every paper's planted community: the community is the "
           "class except for the label_noise share of papers relabelled uniformly, so 1 - "
           "label_noise * (1 - 1 / classes); no model of the graph can do better in expectation"}};
}

// The link split of o.link_relation: negatives join different communities, so a scorer that
// knows the communities ranks every held-out edge inside one above all of them: the share of
// held-out edges inside a community is the best Hits@K (extra["link_hits_bound"], as the
// community generator's).
void split_links_across(HeteroDataset& ds, const HeteroGenOptions& o, const HeteroModel& m) {
  const int r = ds.schema.relation_index(o.link_relation);
  const std::vector<int32_t>* cs = r >= 0 ? &m.comm[ds.schema.relations[r].src_type] : nullptr;
  const std::vector<int32_t>* cd = r >= 0 ? &m.comm[ds.schema.relations[r].dst_type] : nullptr;
  split_hetero_links(ds, o.link_relation, *o.link_split,
                     [cs, cd](int64_t u, int64_t v) { return (*cs)[u] != (*cd)[v]; });
  auto inside = [&](const Array& a) {
    int64_t in = 0;
    for (int64_t i = 0; i < a.dim(0); ++i) {
      in += (*cs)[a.int_at(2 * i)] == (*cd)[a.int_at(2 * i + 1)];
    }
    return a.dim(0) > 0 ? static_cast<double>(in) / static_cast<double>(a.dim(0)) : 0.0;
  };
  if (ds.link_test.defined()) ds.extra["link_hits_bound"] = inside(ds.link_test);
  if (ds.link_valid.defined()) ds.extra["link_hits_bound_valid"] = inside(ds.link_valid);
}

}  // namespace

HeteroDataset generate_hetero(const HeteroGenOptions& o) {
  check_options(o);
  const HeteroModel m = hetero_model(o);
  HeteroDataset ds;
  ds.name = o.name;
  for (int t = 0; t < kTypes; ++t) ds.schema.node_types.push_back({kTypeNames[t], m.count[t]});
  ds.schema.target_type = kTypeNames[kPaper];
  ds.schema.num_classes = o.classes;
  ds.extra = hetero_extra(o);
  nlohmann::json measured = nlohmann::json::object();
  for (int r = 0; r < static_cast<int>(std::size(kRelations)); ++r) {
    const RelationSpec& spec = kRelations[r];
    RelationInfo info{kTypeNames[spec.src], spec.name, kTypeNames[spec.dst]};
    ds.relations.push_back(draw_relation(o, m, r));
    measured[info.key()] = share_inside(ds.relations.back(), m.comm[spec.src], m.comm[spec.dst]);
    ds.schema.relations.push_back(std::move(info));
  }
  ds.extra["measured_intra_fraction"] = measured;
  ds.features.assign(kTypes, Array());
  const std::vector<float> mu = class_centroids(o);
  if (o.feature_dim > 0) ds.features[kPaper] = paper_features(o, m, mu);
  ds.labels = paper_labels(o, m);
  if (o.feature_dim > 0) {
    ds.extra["feature_only_accuracy"] = feature_only_accuracy(ds, mu, o.classes);
  }
  make_splits(ds, o);
  if (o.reverse) add_reverse_relations(ds);
  ds.sync_schema();
  if (o.link_split) split_links_across(ds, o, m);
  return ds;
}

HeteroGenerateResult write_hetero(const HeteroGenOptions& o, const std::string& dir,
                                  bool overwrite) {
  HeteroGenerateResult r;
  Stopwatch sw;
  HeteroDataset ds = generate_hetero(o);
  r.generate_s = sw.seconds();
  sw.reset();
  write_hetero_dataset(ds, dir, overwrite);
  r.write_s = sw.seconds();
  r.name = ds.name;
  r.schema = ds.schema;
  r.extra = ds.extra;
  r.num_train = ds.train_idx.numel();
  r.num_valid = ds.valid_idx.numel();
  r.num_test = ds.test_idx.numel();
  for (const auto& [n, a] :
       {std::pair{&r.num_link_train, &ds.link_train}, std::pair{&r.num_link_valid, &ds.link_valid},
        std::pair{&r.num_link_test, &ds.link_test}}) {
    *n = a->defined() ? a->dim(0) : 0;
  }
  return r;
}

}  // namespace dsp
