// The community graph (dsp generate community): a degree-corrected stochastic block model whose
// communities carry the labels and the features' centroids, its timed variant (--temporal), and
// its writing in memory or out of core.
#include "graph/generate.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "graph/generate_common.hpp"

namespace dsp {
namespace {

using namespace gen;  // NOLINT(build/namespaces): the generators' shared steps

// ---------------------------------------------------------------- community (DC-SBM)

// Walker/Vose alias table over weights w[0..k): pick(i = uniform index, r = 32-bit draw) returns
// i if r < thresh[i] else alias[i]. Built serially, so it is deterministic.
struct AliasTable {
  std::vector<uint64_t> thresh;  // in [0, 2^32]
  std::vector<int64_t> alias;

  void build(const double* w, int64_t k) {
    thresh.assign(k, uint64_t{1} << 32);
    alias.resize(k);
    std::iota(alias.begin(), alias.end(), 0);
    double total = 0;
    for (int64_t i = 0; i < k; ++i) total += w[i];
    if (k == 0 || !(total > 0)) return;
    std::vector<double> p(k);
    std::vector<int64_t> small, large;
    for (int64_t i = 0; i < k; ++i) {
      p[i] = w[i] * static_cast<double>(k) / total;
      (p[i] < 1.0 ? small : large).push_back(i);
    }
    while (!small.empty() && !large.empty()) {
      int64_t s = small.back(), l = large.back();
      small.pop_back();
      thresh[s] = static_cast<uint64_t>(p[s] * 4294967296.0);
      alias[s] = l;
      p[l] -= 1.0 - p[s];
      if (p[l] < 1.0) {
        large.pop_back();
        small.push_back(l);
      }
    }
    // Leftovers are 1 up to rounding: keep them as certain picks of themselves.
  }
  int64_t pick(RngStream& s) const {
    int64_t k = static_cast<int64_t>(thresh.size());
    int64_t i = static_cast<int64_t>(s.uniform_int(static_cast<uint64_t>(k)));
    return s.next_u32() < thresh[i] ? i : alias[i];
  }
};

// Alias tables of many segments stored back to back (one per community, over its node range).
// An entry holds the published ids of both outcomes, so a pick costs one cache miss: edge
// drawing is bound by these random reads.
template <class Id>
struct SegmentedAlias {
  struct alignas(2 * sizeof(Id) >= 16 ? 32 : 16) Entry {
    uint32_t thresh;  // 2^32 - 1 means "always self" (off by 2^-32, harmless)
    Id self, alias;
  };
  std::vector<int64_t> start;  // [k + 1]
  std::vector<Entry> entry;

  Id pick(RngStream& s, int64_t seg) const {
    int64_t b = start[seg], len = start[seg + 1] - b;
    const Entry& e = entry[b + static_cast<int64_t>(s.uniform_int(static_cast<uint64_t>(len)))];
    return s.next_u32() <= e.thresh ? e.self : e.alias;
  }
};

// The model behind the community graph: community ranges, node weights and the published ids.
struct CommunityModel {
  std::vector<int64_t> cstart;  // [k + 1]: internal ids of community c are [cstart[c], cstart[c+1])
  std::vector<double> theta;
  std::vector<int64_t> perm;  // internal id -> published id
};

void check_community(const CommunityOptions& o) {
  check_common(o.num_nodes, o.num_edges, o.feature_dim, o.feature_dtype, o.num_classes);
  check_splits(o.train_frac, o.valid_frac, o.test_frac);
  if (o.link_split) check_link_split(*o.link_split);
  DSP_CHECK_ARG(o.num_communities >= 1 && o.num_communities <= o.num_nodes &&
                    o.num_communities <= std::numeric_limits<int32_t>::max(),
                "the number of communities must be in [1, nodes = {}], got {}", o.num_nodes,
                o.num_communities);
  DSP_CHECK_ARG(o.intra_fraction >= 0 && o.intra_fraction <= 1,
                "the intra-community fraction {} is outside [0, 1]", o.intra_fraction);
  DSP_CHECK_ARG(o.degree_exponent > 1 && std::isfinite(o.degree_exponent),
                "the degree exponent must be > 1, got {}", o.degree_exponent);
  DSP_CHECK_ARG(o.max_degree >= 0, "the maximum degree must not be negative, got {}", o.max_degree);
  DSP_CHECK_ARG(o.feature_noise >= 0 && std::isfinite(o.feature_noise),
                "the feature noise must be >= 0, got {}", o.feature_noise);
  DSP_CHECK_ARG(o.label_noise >= 0 && o.label_noise <= 1, "the label noise {} is outside [0, 1]",
                o.label_noise);
  if (o.multilabel != 0) {
    DSP_CHECK_ARG(o.multilabel > 0 && o.multilabel <= 127 && o.num_classes == o.multilabel &&
                      o.num_communities >= 2 && !o.temporal,
                  "--multilabel {}: needs 1 to 127 labels, num_classes equal to it (got {}), at "
                  "least 2 communities (got {}) and no --temporal",
                  o.multilabel, o.num_classes, o.num_communities);
  }
}

CommunityModel community_model(const CommunityOptions& o) {
  const int64_t n = o.num_nodes, k = o.num_communities;
  CommunityModel cm;
  // Internal ids put each community in one contiguous range (equal sizes up to one node);
  // perm maps them to the published ids, so communities are scattered over the id space.
  cm.cstart.resize(k + 1);
  for (int64_t c = 0; c <= k; ++c) cm.cstart[c] = n * c / k;

  // Node weights: Pareto(exponent - 1) with minimum 1, capped so that no expected degree exceeds
  // max_degree. Expected degree = theta * 2m / sum(theta); the cap and the sum depend on each
  // other, so iterate a few times (the sum is serial, hence independent of the thread count).
  std::vector<double>& theta = cm.theta;
  theta.resize(n);
  const uint64_t key = key_for(o.seed, kGenCommunity, kThetas);
  const double inv = -1.0 / (o.degree_exponent - 1.0);
  parallel_for(0, n, kNodeGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      double u = (static_cast<double>(RngStream(key, i).next_u32()) + 0.5) / 4294967296.0;
      theta[i] = std::pow(u, inv);
    }
  });
  const double max_deg = o.max_degree > 0
                             ? static_cast<double>(o.max_degree)
                             : std::max(1.0, std::sqrt(2.0 * static_cast<double>(o.num_edges)));
  const double two_m = 2.0 * static_cast<double>(std::max<int64_t>(o.num_edges, 1));
  for (int iter = 0; iter < 4; ++iter) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += theta[i];
    double cap = std::max(1.0, max_deg * sum / two_m);
    for (int64_t i = 0; i < n; ++i) theta[i] = std::min(theta[i], cap);
  }
  cm.perm = random_permutation(n, key_for(o.seed, kGenCommunity, kPermutation));
  return cm;
}

// Community of every published id.
std::vector<int32_t> community_of(const CommunityModel& cm) {
  const int64_t k = static_cast<int64_t>(cm.cstart.size()) - 1;
  std::vector<int32_t> comm_of(cm.perm.size());
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t i = cm.cstart[c]; i < cm.cstart[c + 1]; ++i) {
      comm_of[cm.perm[i]] = static_cast<int32_t>(c);
    }
  }
  return comm_of;
}

template <class Id>
struct CommunityDraw {
  SegmentedAlias<Id> seg;  // per-community alias tables over theta
  AliasTable comm;         // over community volumes
  uint64_t key = 0, intra = 0;
  int64_t k = 0;

  CommunityDraw(const CommunityOptions& o, const CommunityModel& cm) {
    const int64_t n = o.num_nodes;
    k = o.num_communities;
    key = key_for(o.seed, kGenCommunity, kEdges);
    intra = static_cast<uint64_t>(o.intra_fraction * 4294967296.0);
    seg.start = cm.cstart;
    seg.entry.resize(n);
    std::vector<double> volume(k, 0.0);
    parallel_for(0, k, 1, [&](int64_t cb, int64_t ce) {
      AliasTable t;
      for (int64_t c = cb; c < ce; ++c) {
        int64_t b = cm.cstart[c], len = cm.cstart[c + 1] - b;
        t.build(cm.theta.data() + b, len);
        double vol = 0;
        for (int64_t i = 0; i < len; ++i) {
          vol += cm.theta[b + i];
          auto& e = seg.entry[b + i];
          e.thresh = static_cast<uint32_t>(std::min<uint64_t>(t.thresh[i], 0xffffffffULL));
          e.self = static_cast<Id>(cm.perm[b + i]);
          e.alias = static_cast<Id>(cm.perm[b + t.alias[i]]);
        }
        volume[c] = vol;
      }
    });
    comm.build(volume.data(), k);
  }

  void operator()(int64_t i, int64_t& u, int64_t& v) const {
    constexpr int kMaxAttempts = 64;
    RngStream s(key, static_cast<uint64_t>(i));
    int64_t cu = comm.pick(s);
    u = seg.pick(s, cu);
    int64_t cv = cu;
    if (k > 1 && s.next_u32() >= intra) {
      // An inter-community edge: the other end's community follows the volumes, excluding cu.
      for (int attempt = 0; attempt < kMaxAttempts && cv == cu; ++attempt) cv = comm.pick(s);
      if (cv == cu) cv = (cu + 1) % k;
    }
    v = seg.pick(s, cv);
  }
};

struct CommunityFeatureRow {
  std::vector<float> centroid;  // [k, dim], entries N(0, 1)
  const int32_t* comm_of;
  uint64_t key;
  int64_t dim;
  float noise;

  CommunityFeatureRow(const CommunityOptions& o, const std::vector<int32_t>& comm)
      : centroid(o.num_communities * o.feature_dim),
        comm_of(comm.data()),
        key(key_for(o.seed, kGenCommunity, kFeatures)),
        dim(o.feature_dim),
        noise(static_cast<float>(o.feature_noise)) {
    const uint64_t ckey = key_for(o.seed, kGenCommunity, kCentroids);
    for (int64_t c = 0; c < o.num_communities; ++c) {
      RngStream s(ckey, c);
      normals(s, centroid.data() + c * dim, dim);
    }
  }
  void operator()(int64_t v, float* row) const {
    RngStream s(key, static_cast<uint64_t>(v));
    const float* mu = centroid.data() + comm_of[v] * dim;
    normals(s, row, dim);
    for (int64_t j = 0; j < dim; ++j) row[j] = mu[j] + noise * row[j];
  }
};

struct CommunityLabel {
  const int32_t* comm_of;
  uint64_t key;
  int64_t classes;
  double noise;
  int64_t operator()(int64_t v) const {
    RngStream s(key, v);
    int64_t y = comm_of[v] % classes;
    if (s.uniform01() < noise) y = static_cast<int64_t>(s.uniform_int(classes));
    return y;
  }
};

CommunityLabel community_label(const CommunityOptions& o, const std::vector<int32_t>& comm) {
  return {comm.data(), key_for(o.seed, kGenCommunity, kLabels), o.num_classes, o.label_noise};
}

// Multi-label rows (CommunityOptions::multilabel): row v is community(v)'s label set, each entry
// replaced by a random bit with probability label_noise.
struct MultiLabelRow {
  std::vector<int8_t> on;  // [k, L]: label j is on for community c
  const int32_t* comm_of;
  uint64_t key;
  int64_t columns;
  double noise;

  MultiLabelRow(const CommunityOptions& o, const std::vector<int32_t>& comm)
      : on(static_cast<size_t>(o.num_communities * o.multilabel), 0),
        comm_of(comm.data()),
        key(key_for(o.seed, kGenCommunity, kLabels)),
        columns(o.multilabel),
        noise(o.label_noise) {
    // Each label on for the `m` communities of smallest seeded score: at least one, never all.
    const int64_t k = o.num_communities;
    const int64_t m = std::clamp<int64_t>(std::llround(kMultiLabelOnShare * k), 1, k - 1);
    const uint64_t skey = key_for(o.seed, kGenCommunity, kLabelSets);
    std::vector<std::pair<uint32_t, int64_t>> score(static_cast<size_t>(k));
    for (int64_t j = 0; j < columns; ++j) {
      RngStream s(skey, static_cast<uint64_t>(j));
      for (int64_t c = 0; c < k; ++c) score[c] = {s.next_u32(), c};
      std::partial_sort(score.begin(), score.begin() + m, score.end());
      for (int64_t i = 0; i < m; ++i) on[score[i].second * columns + j] = 1;
    }
  }
  void operator()(int64_t v, int8_t* row) const {
    RngStream s(key, static_cast<uint64_t>(v));
    const int8_t* set = on.data() + comm_of[v] * columns;
    for (int64_t j = 0; j < columns; ++j) {
      row[j] = set[j];
      if (s.uniform01() < noise) row[j] = static_cast<int8_t>(s.next_u32() & 1);
    }
  }
};

void fill_label_rows(int64_t b, int64_t e, const MultiLabelRow& label, int8_t* out) {
  parallel_for(b, e, kNodeGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t v = lo; v < hi; ++v) label(v, out + (v - b) * label.columns);
  });
}

// The labels of a community graph: int64 [N] classes, or int8 [N, L] multi-label rows.
Array make_community_labels(const CommunityOptions& o, const std::vector<int32_t>& comm_of) {
  if (o.multilabel == 0) return make_labels(o.num_nodes, community_label(o, comm_of));
  Array out(DType::kInt8, {o.num_nodes, o.multilabel});
  fill_label_rows(0, o.num_nodes, MultiLabelRow(o, comm_of), out.mutable_data<int8_t>());
  return out;
}

// Out of core: the multi-label rows streamed into the staged labels.npy.
void write_label_rows(const StagedDir& dir, const CommunityOptions& o,
                      const std::vector<int32_t>& comm_of, uint64_t chunk_bytes) {
  const MultiLabelRow label(o, comm_of);
  const int64_t n = o.num_nodes, L = o.multilabel;
  const int64_t rows = std::max<int64_t>(1, static_cast<int64_t>(chunk_bytes) / L);
  std::vector<int8_t> buf(static_cast<size_t>(std::min(rows, n) * L));
  NpyWriter w(dir.file("labels.npy"), DType::kInt8, {n, L});
  for (int64_t b = 0; b < n; b += rows) {
    const int64_t e = std::min(n, b + rows);
    fill_label_rows(b, e, label, buf.data());
    w.write(buf.data(), static_cast<size_t>((e - b) * L));
  }
  w.close();
}

// Entries of sorted keys whose two ends share a community (an integer count: exact in parallel).
int64_t count_inside(const uint64_t* keys, size_t count, const int32_t* comm_of) {
  int64_t inside = 0;
  const int64_t c = static_cast<int64_t>(count);
#pragma omp parallel for reduction(+ : inside) schedule(static, 65536)
  for (int64_t i = 0; i < c; ++i) {
    inside += comm_of[keys[i] >> 32] == comm_of[keys[i] & 0xffffffffu];
  }
  return inside;
}

nlohmann::json community_extra(const CommunityOptions& o, int64_t inside, int64_t stored) {
  nlohmann::json extra = {
      {"generator", "community"},
      {"seed", o.seed},
      {"num_communities", o.num_communities},
      {"intra_fraction", o.intra_fraction},
      {"measured_intra_fraction",
       stored > 0 ? static_cast<double>(inside) / static_cast<double>(stored) : 0.0},
      {"degree_exponent", o.degree_exponent},
      {"max_degree", o.max_degree},
      {"feature_noise", o.feature_noise},
      {"label_noise", o.label_noise},
      {"requested_edges", o.num_edges},
      {"train_frac", o.train_frac},
      {"valid_frac", o.valid_frac}};
  if (o.multilabel > 0) {
    extra["multilabel"] = o.multilabel;
    extra["multilabel_on_share"] = kMultiLabelOnShare;
    // A node's entry agrees with its community's label set with this probability.
    extra["label_agreement_bound"] = 1.0 - o.label_noise / 2;
  } else if (o.num_classes > 0) {
    extra["accuracy_bound"] =
        1.0 - o.label_noise * (1.0 - 1.0 / static_cast<double>(o.num_classes));
    extra["community_to_class"] = "community % num_classes";
  }
  return extra;
}

// The share of the pairs (rows of `pairs`) whose ends share a community.
double share_inside(const Array& pairs, const std::vector<int32_t>& comm_of) {
  const int64_t* p = pairs.data<int64_t>();
  int64_t inside = 0;
  for (int64_t r = 0; r < pairs.dim(0); ++r) inside += comm_of[p[2 * r]] == comm_of[p[2 * r + 1]];
  return static_cast<double>(inside) / static_cast<double>(pairs.dim(0));
}

// The link split of a generated community graph: negatives join different communities; the best
// Hits@K of each held-out split into meta.extra.
void split_community_links(Dataset& ds, const CommunityOptions& o,
                           const std::vector<int32_t>& comm_of) {
  LinkSplitOptions ls = *o.link_split;
  ls.seed = o.seed;
  split_links(ds, ls, [&](int64_t u, int64_t v) { return comm_of[u] != comm_of[v]; });
  if (ds.link_test.defined())
    ds.meta.extra["link_hits_bound"] = share_inside(ds.link_test, comm_of);
  if (ds.link_valid.defined()) {
    ds.meta.extra["link_hits_bound_valid"] = share_inside(ds.link_valid, comm_of);
  }
}

// ---------------------------------------------------------------- temporal community

// The planted temporal structure of every published id: label community h, decoy community d (of
// another class), and time.
struct TemporalModel {
  std::vector<int32_t> label_comm, decoy;
  std::vector<int64_t> node_time;
};

void check_temporal(const CommunityOptions& o) {
  DSP_CHECK_ARG(!o.link_split, "--temporal does not combine with --link-split");
  DSP_CHECK_ARG(o.num_classes >= 2 && o.num_communities >= o.num_classes,
                "--temporal needs at least 2 classes and as many communities as classes, got {} "
                "classes and {} communities",
                o.num_classes, o.num_communities);
}

TemporalModel temporal_model(const CommunityOptions& o) {
  const int64_t n = o.num_nodes, k = o.num_communities, c = o.num_classes;
  TemporalModel tm;
  tm.label_comm.resize(n);
  tm.decoy.resize(n);
  tm.node_time.resize(n);
  const uint64_t key = key_for(o.seed, kGenCommunity, kTemporalNodes);
  parallel_for(0, n, kNodeGrain, [&](int64_t b, int64_t e) {
    for (int64_t v = b; v < e; ++v) {
      RngStream s(key, static_cast<uint64_t>(v));
      const int64_t h = static_cast<int64_t>(s.uniform_int(k));
      // A uniformly random community of another class (k >= c >= 2: one exists); a scan
      // should 64 draws all hit h's class.
      int64_t d = h;
      for (int attempt = 0; attempt < 64 && d % c == h % c; ++attempt) {
        d = static_cast<int64_t>(s.uniform_int(k));
      }
      for (int64_t j = 1; d % c == h % c; ++j) d = (h + j) % k;
      tm.label_comm[v] = static_cast<int32_t>(h);
      tm.decoy[v] = static_cast<int32_t>(d);
      tm.node_time[v] = 1 + static_cast<int64_t>(s.uniform_int(kTemporalSpan - 1));
    }
  });
  return tm;
}

// Draws the m timed edges: destination by degree weight, past or future with equal chance, the
// source from h(v) (past) or d(v) (future) with probability intra, else from any community.
template <class Id>
struct TemporalDraw {
  const CommunityDraw<Id>& base;
  const TemporalModel& tm;
  uint64_t key;

  void operator()(int64_t i, int64_t& u, int64_t& v, int64_t& t) const {
    RngStream s(key, static_cast<uint64_t>(i));
    v = base.seg.pick(s, base.comm.pick(s));
    const bool past = (s.next_u32() & 1) != 0;
    int64_t cu = past ? tm.label_comm[v] : tm.decoy[v];
    if (s.next_u32() >= base.intra) cu = base.comm.pick(s);
    u = base.seg.pick(s, cu);
    const int64_t tv = tm.node_time[v];
    t = past ? static_cast<int64_t>(s.uniform_int(tv))
             : tv + static_cast<int64_t>(s.uniform_int(kTemporalSpan - tv));
  }
};

template <class Id>
Csr draw_temporal_csr(const CommunityOptions& o, const CommunityModel& cm,
                      const TemporalModel& tm) {
  const int64_t n = o.num_nodes, m = o.num_edges;
  CommunityDraw<Id> base(o, cm);
  TemporalDraw<Id> draw{base, tm, key_for(o.seed, kGenCommunity, kEdges)};
  std::vector<Id> src(m), dst(m);
  std::vector<int64_t> time(m);
  parallel_for(0, m, kEdgeGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      int64_t u, v;
      draw(i, u, v, time[i]);
      src[i] = static_cast<Id>(u);
      dst[i] = static_cast<Id>(v);
    }
  });
  CsrBuildOptions co;
  co.remove_self_loops = true;
  Csr g = build_in_csr<Id>(n, src.data(), dst.data(), m, nullptr, co, time.data());
  if (!g.has_times()) g.times = Array(DType::kInt64, {0});
  return g;
}

// meta.extra of the temporal graph: the parameters, both bounds, and the measured shares of past
// entries from h(v), of future entries from d(v), and of nodes with no past in-edge.
nlohmann::json temporal_extra(const CommunityOptions& o, const Csr& g, const TemporalModel& tm,
                              const std::vector<int32_t>& comm_of) {
  int64_t past = 0, past_in = 0, future_decoy = 0, lonely = 0;
  const int64_t n = g.num_nodes;
  const int64_t* ptr = g.rowptr();
  const int64_t* t = g.times.data<int64_t>();
  for (int64_t v = 0; v < n; ++v) {
    int64_t here = 0;
    for (int64_t j = ptr[v]; j < ptr[v + 1]; ++j) {
      const int32_t cu = comm_of[g.indices.int_at(j)];
      if (t[j] < tm.node_time[v]) {
        ++here;
        past_in += cu == tm.label_comm[v];
      } else {
        future_decoy += cu == tm.decoy[v];
      }
    }
    past += here;
    lonely += here == 0;
  }
  const int64_t future = g.num_edges() - past;
  auto share = [](int64_t a, int64_t b) {
    return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0;
  };
  const double c = static_cast<double>(o.num_classes);
  return {{"generator", "community"},
          {"temporal", true},
          {"seed", o.seed},
          {"num_communities", o.num_communities},
          {"intra_fraction", o.intra_fraction},
          {"degree_exponent", o.degree_exponent},
          {"max_degree", o.max_degree},
          {"feature_noise", o.feature_noise},
          {"label_noise", o.label_noise},
          {"requested_edges", o.num_edges},
          {"train_frac", o.train_frac},
          {"valid_frac", o.valid_frac},
          {"time_span", kTemporalSpan},
          {"accuracy_bound", 1.0 - o.label_noise * (1.0 - 1.0 / c)},
          {"accuracy_bound_untimed", (1.0 - o.label_noise) / 2.0 + o.label_noise / c},
          {"community_to_class", "label community % num_classes"},
          {"measured_past_intra_fraction", share(past_in, past)},
          {"measured_future_decoy_fraction", share(future_decoy, future)},
          {"nodes_without_past_edges", share(lonely, n)}};
}

Dataset generate_temporal_community(const CommunityOptions& o, std::vector<int32_t>* communities) {
  check_temporal(o);
  const int64_t n = o.num_nodes;
  Dataset ds;
  std::vector<int32_t> comm_of;
  TemporalModel tm = temporal_model(o);
  {
    CommunityModel cm = community_model(o);
    ds.graph = n < (int64_t{1} << 31) ? draw_temporal_csr<int32_t>(o, cm, tm)
                                      : draw_temporal_csr<int64_t>(o, cm, tm);
    comm_of = community_of(cm);
  }
  if (o.feature_dim > 0) {
    ds.features = make_features(n, o.feature_dim, o.feature_dtype, CommunityFeatureRow(o, comm_of));
  }
  ds.labels = make_labels(n, community_label(o, tm.label_comm));
  make_splits(ds, n, split_sizes(o), key_for(o.seed, kGenCommunity, kSplits));
  ds.node_time = Array::from_vector(tm.node_time);
  ds.meta =
      generated_meta(o.name, /*directed=*/true, n, ds.graph.num_edges(), ds.graph.index_dtype(),
                     o.feature_dim, o.feature_dtype, o.num_classes, split_sizes(o));
  ds.meta.has_edge_time = ds.meta.has_node_time = true;
  ds.meta.extra = with_test_frac(temporal_extra(o, ds.graph, tm, comm_of), o.test_frac);
  if (communities) *communities = std::move(comm_of);
  return ds;
}

template <class Id>
GenerateResult community_out_of_core(const CommunityOptions& o, const std::string& dir,
                                     const GenerateWriteOptions& w) {
  const int64_t n = o.num_nodes, max_entries = 2 * o.num_edges;
  check_generate_disk(dir, peak_disk_bytes(n, max_entries, o.feature_dim, o.feature_dtype, true));
  Stopwatch sw;
  StagedDir staged(dir, w.overwrite);
  std::vector<int32_t> comm_of;
  std::unique_ptr<CommunityDraw<Id>> draw;
  {
    CommunityModel cm = community_model(o);
    draw = std::make_unique<CommunityDraw<Id>>(o, cm);
    comm_of = community_of(cm);
  }
  ExternalSorter<uint64_t> sorter(staged.file("sort-runs"), sort_capacity(w, max_entries));
  draw_sorted(sorter, o.num_edges, /*symmetrize=*/true, *draw);
  draw.reset();
  int64_t inside = 0;
  auto [entries, max_degree] =
      merge_to_csr(sorter, staged, n, max_entries, [&](const uint64_t* keys, size_t count) {
        inside += count_inside(keys, count, comm_of.data());
      });
  const uint64_t chunk = node_chunk_bytes(w.memory_budget);
  write_node_files(staged, n, o.feature_dim, o.feature_dtype, CommunityFeatureRow(o, comm_of),
                   o.multilabel > 0 ? 0 : o.num_classes, community_label(o, comm_of), chunk);
  if (o.multilabel > 0) write_label_rows(staged, o, comm_of, chunk);
  comm_of = {};
  write_splits(staged, n, split_sizes(o), key_for(o.seed, kGenCommunity, kSplits));
  DatasetMeta meta = generated_meta(o.name, false, n, entries, index_dtype_for(n), o.feature_dim,
                                    o.feature_dtype, o.num_classes, split_sizes(o));
  meta.multilabel = o.multilabel > 0;
  meta.extra = with_test_frac(community_extra(o, inside, entries), o.test_frac);
  return finish_out_of_core(staged, std::move(meta), max_degree, sorter, sw);
}

}  // namespace

MemoryEstimate estimate_community_memory(const CommunityOptions& o) {
  const uint64_t n = o.num_nodes, id = id_bytes(o.num_nodes), m = o.num_edges;
  const uint64_t entry = id == 4 ? 16 : 32;   // SegmentedAlias<Id>::Entry
  const uint64_t model = 16 * n + entry * n;  // theta + perm + alias tables
  const uint64_t node_data = n * o.feature_dim * dtype_size(o.feature_dtype) +
                             (o.multilabel > 0 ? n * static_cast<uint64_t>(o.multilabel) : 8 * n) +
                             16 * n + 4 * n;
  MemoryEstimate e;
  e.in_memory =
      std::max({model + 2 * m * id + 16 * n + 2 * m * id, 8 * n + 2 * m * id + node_data}) +
      kSlackBytes;
  e.out_of_core = model + 4 * n + min_sort_bytes(2 * m) + 2 * kMinNodeChunkBytes + kSlackBytes;
  return e;
}

Dataset generate_community(const CommunityOptions& o, std::vector<int32_t>* communities) {
  check_community(o);
  if (o.temporal) return generate_temporal_community(o, communities);
  const int64_t n = o.num_nodes;
  Dataset ds;
  std::vector<int32_t> comm_of;
  {
    CommunityModel cm = community_model(o);
    if (n < (int64_t{1} << 31)) {
      ds.graph = draw_csr<int32_t>(n, o.num_edges, true, CommunityDraw<int32_t>(o, cm));
    } else {
      ds.graph = draw_csr<int64_t>(n, o.num_edges, true, CommunityDraw<int64_t>(o, cm));
    }
    cm.theta = {};
    comm_of = community_of(cm);
  }
  Stopwatch node_sw;
  if (o.feature_dim > 0) {
    ds.features = make_features(n, o.feature_dim, o.feature_dtype, CommunityFeatureRow(o, comm_of));
  }
  if (o.num_classes > 0) ds.labels = make_community_labels(o, comm_of);
  make_splits(ds, n, split_sizes(o), key_for(o.seed, kGenCommunity, kSplits));

  // Share of stored edges inside a community, after repeats and self loops were removed
  // (integer counts, so the parallel reduction is exact).
  int64_t inside = 0;
  dispatch_index(ds.graph.index_dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* idx = ds.graph.indices.data<T>();
    const int64_t* ptr = ds.graph.rowptr();
#pragma omp parallel for reduction(+ : inside) schedule(static, 4096)
    for (int64_t v = 0; v < n; ++v) {
      for (int64_t j = ptr[v]; j < ptr[v + 1]; ++j) inside += comm_of[idx[j]] == comm_of[v];
    }
  });
  DSP_DEBUG("generate", "features, labels and splits in {:.2f} s", node_sw.seconds());
  ds.meta = generated_meta(o.name, false, n, ds.graph.num_edges(), ds.graph.index_dtype(),
                           o.feature_dim, o.feature_dtype, o.num_classes, split_sizes(o));
  ds.meta.multilabel = o.multilabel > 0;
  ds.meta.extra = with_test_frac(community_extra(o, inside, ds.graph.num_edges()), o.test_frac);
  if (o.link_split) split_community_links(ds, o, comm_of);
  if (communities) *communities = std::move(comm_of);
  return ds;
}

GenerateResult write_community(const CommunityOptions& o, const std::string& dir,
                               const GenerateWriteOptions& w) {
  check_community(o);
  if (choose_out_of_core(estimate_community_memory(o), o.num_nodes, w)) {
    DSP_CHECK_ARG(!o.temporal,
                  "--temporal needs the in-memory generation (edges are built with their times in "
                  "memory); drop --out-of-core{}",
                  w.force_out_of_core ? "" : " or raise --memory-budget");
    DSP_CHECK_ARG(!o.link_split,
                  "--link-split needs the in-memory generation (the edges are split in memory); "
                  "drop --out-of-core{}",
                  w.force_out_of_core ? "" : " or raise --memory-budget");
    return o.num_nodes < (int64_t{1} << 31) ? community_out_of_core<int32_t>(o, dir, w)
                                            : community_out_of_core<int64_t>(o, dir, w);
  }
  Stopwatch sw;
  Dataset ds = generate_community(o);
  return write_in_memory(std::move(ds), dir, w.overwrite, sw.seconds());
}

}  // namespace dsp
