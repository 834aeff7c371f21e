#include "graph/generate.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"
#include "core/timer.hpp"

namespace dsp {
namespace {

// Keys are rng_key(seed, kDomain, generator, purpose): a generator never shares a stream with
// sampling (whose keys use small epoch numbers) or with the other generator.
constexpr uint64_t kDomain = 0x67656e6572617465ULL;  // "generate"
constexpr uint64_t kGenRmat = 1, kGenCommunity = 2;
enum Purpose : uint64_t {
  kEdges = 1,
  kPermutation,
  kFeatures,
  kLabels,
  kSplits,
  kThetas,
  kCentroids,
};

uint64_t key_for(uint64_t seed, uint64_t generator, uint64_t purpose) {
  return rng_key(seed, kDomain, generator, purpose);
}

constexpr int64_t kEdgeGrain = int64_t{1} << 15;
constexpr int64_t kNodeGrain = int64_t{1} << 12;

// A uniformly random permutation of [0, n): Fisher-Yates where the swap partner of position i
// comes from its own stream, so it is a pure function of (key, n).
std::vector<int64_t> random_permutation(int64_t n, uint64_t key) {
  std::vector<int64_t> p(n);
  std::iota(p.begin(), p.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(RngStream(key, i).uniform_int(i + 1));
    std::swap(p[i], p[j]);
  }
  return p;
}

// Fills out[0, count) with standard normals: Box-Muller from two 32-bit draws per pair, both
// branches used (the transcendental functions dominate feature generation).
inline void normals(RngStream& s, float* out, int64_t count) {
  for (int64_t j = 0; j < count; j += 2) {
    float u1 = (static_cast<float>(s.next_u32() >> 8) + 0.5f) * (1.0f / 16777216.0f);
    float u2 = static_cast<float>(s.next_u32() >> 8) * (1.0f / 16777216.0f);
    float r = std::sqrt(-2.0f * std::log(u1));
    float a = 6.2831853f * u2;
    out[j] = r * std::cos(a);
    if (j + 1 < count) out[j + 1] = r * std::sin(a);
  }
}

// IEEE binary16 bits of `f`, rounding to nearest even (features may be stored as float16).
uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mag = x & 0x7fffffffu;
  if (mag >= 0x7f800000u)
    return static_cast<uint16_t>(sign | (mag > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (mag >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (mag < 0x38800000u) {                                               // subnormal half (or zero)
    if (mag < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t e = mag >> 23;
    uint32_t m = (mag & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;  // 14..24
    uint32_t h = m >> (shift);
    uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((mag - 0x38000000u) >> 13);
  uint32_t rem = mag & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

// Allocates features [n, dim] of `dtype` and fills row v with fill(v, float* row) in parallel.
template <class Fill>
Array make_features(int64_t n, int64_t dim, DType dtype, const Fill& fill) {
  Array out(dtype, {n, dim});
  if (dtype == DType::kFloat32) {
    float* x = out.mutable_data<float>();
    parallel_for(0, n, kNodeGrain, [&](int64_t b, int64_t e) {
      for (int64_t v = b; v < e; ++v) fill(v, x + v * dim);
    });
  } else {
    uint16_t* x = out.mutable_data<uint16_t>();
    parallel_for(0, n, kNodeGrain, [&](int64_t b, int64_t e) {
      std::vector<float> row(dim);
      for (int64_t v = b; v < e; ++v) {
        fill(v, row.data());
        for (int64_t j = 0; j < dim; ++j) x[v * dim + j] = float_to_half(row[j]);
      }
    });
  }
  return out;
}

// Random train/valid/test split of [0, n) with exact sizes; each split sorted ascending.
void make_splits(Dataset& ds, int64_t n, double train_frac, double valid_frac, uint64_t key) {
  std::vector<int64_t> order = random_permutation(n, key);
  int64_t ntr = std::min<int64_t>(n, std::llround(train_frac * static_cast<double>(n)));
  int64_t nva = std::min<int64_t>(n - ntr, std::llround(valid_frac * static_cast<double>(n)));
  auto take = [&](int64_t b, int64_t e) {
    std::vector<int64_t> v(order.begin() + b, order.begin() + e);
    std::sort(v.begin(), v.end());
    return Array::from_vector(std::move(v));
  };
  ds.train_idx = take(0, ntr);
  ds.valid_idx = take(ntr, ntr + nva);
  ds.test_idx = take(ntr + nva, n);
}

void check_common(int64_t num_nodes, int64_t num_edges, int64_t feature_dim, DType feature_dtype,
                  int64_t num_classes, double train_frac, double valid_frac) {
  DSP_CHECK_ARG(num_nodes > 0, "the number of nodes must be positive, got {}", num_nodes);
  DSP_CHECK_ARG(num_edges >= 0, "the number of edges must not be negative, got {}", num_edges);
  DSP_CHECK_ARG(feature_dim >= 0, "the feature dimension must not be negative, got {}",
                feature_dim);
  DSP_CHECK_ARG(feature_dtype == DType::kFloat32 || feature_dtype == DType::kFloat16,
                "features must be float32 or float16, got {}", dtype_name(feature_dtype));
  DSP_CHECK_ARG(num_classes >= 0 && num_classes <= std::numeric_limits<int32_t>::max(),
                "the number of classes must be in [0, 2^31), got {}", num_classes);
  DSP_CHECK_ARG(train_frac >= 0 && train_frac <= 1, "train fraction {} is outside [0, 1]",
                train_frac);
  DSP_CHECK_ARG(valid_frac >= 0 && valid_frac <= 1, "valid fraction {} is outside [0, 1]",
                valid_frac);
  DSP_CHECK_ARG(train_frac + valid_frac <= 1 + 1e-12, "train + valid fractions ({} + {}) exceed 1",
                train_frac, valid_frac);
}

void fill_meta(Dataset& ds, const std::string& name, bool directed) {
  DatasetMeta& m = ds.meta;
  m.name = name;
  m.num_nodes = ds.graph.num_nodes;
  m.num_edges = ds.graph.num_edges();
  m.directed = directed;
  m.index_dtype = ds.graph.index_dtype();
  m.feature_dim = ds.features.defined() ? ds.features.dim(1) : 0;
  if (ds.features.defined()) m.feature_dtype = ds.features.dtype();
  m.has_weights = false;
  m.num_train = ds.train_idx.defined() ? ds.train_idx.numel() : 0;
  m.num_valid = ds.valid_idx.defined() ? ds.valid_idx.numel() : 0;
  m.num_test = ds.test_idx.defined() ? ds.test_idx.numel() : 0;
}

// ---------------------------------------------------------------- R-MAT

template <class Id>
Csr rmat_edges(const RmatOptions& o) {
  const int64_t n = o.num_nodes, m = o.num_edges;
  int scale = 0;
  while ((int64_t{1} << scale) < n) ++scale;
  // Quadrant thresholds on a 32-bit draw: r < ta -> a, < tab -> b, < tabc -> c, else d.
  const uint64_t two32 = uint64_t{1} << 32;
  const uint64_t ta = static_cast<uint64_t>(o.a * two32);
  const uint64_t tab = static_cast<uint64_t>((o.a + o.b) * two32);
  const uint64_t tabc = static_cast<uint64_t>((o.a + o.b + o.c) * two32);
  std::vector<int64_t> perm;
  if (o.permute) perm = random_permutation(n, key_for(o.seed, kGenRmat, kPermutation));

  Stopwatch sw;
  std::vector<Id> src(m), dst(m);
  const uint64_t key = key_for(o.seed, kGenRmat, kEdges);
  // Redraws until both ends are < n; with a >= b, c the acceptance is at least about a, so the
  // fallback (folding ids with a modulo) is essentially never taken.
  constexpr int kMaxAttempts = 64;
  parallel_for(0, m, kEdgeGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      RngStream s(key, static_cast<uint64_t>(i));
      int64_t u = 0, v = 0;
      for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
        u = 0;
        v = 0;
        for (int l = 0; l < scale; ++l) {
          uint64_t r = s.next_u32();
          int64_t bu = r >= tab, bv = (r >= ta && r < tab) || r >= tabc;
          u = (u << 1) | bu;
          v = (v << 1) | bv;
        }
        if (u < n && v < n) break;
      }
      u %= n;
      v %= n;
      if (o.permute) {
        u = perm[u];
        v = perm[v];
      }
      src[i] = static_cast<Id>(u);
      dst[i] = static_cast<Id>(v);
    }
  });
  perm = {};
  DSP_DEBUG("generate", "drew {} edges in {:.2f} s", m, sw.seconds());
  sw.reset();
  CsrBuildOptions co;
  co.symmetrize = o.undirected;
  co.dedup = true;
  co.remove_self_loops = true;
  Csr g = build_in_csr<Id>(n, src.data(), dst.data(), m, nullptr, co);
  DSP_DEBUG("generate", "built the CSR ({} entries) in {:.2f} s", g.num_edges(), sw.seconds());
  return g;
}

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

template <class Id>
Csr community_edges(const CommunityOptions& o, const std::vector<int64_t>& cstart,
                    const std::vector<double>& theta, const std::vector<int64_t>& perm) {
  const int64_t n = o.num_nodes, m = o.num_edges, k = o.num_communities;
  // Per-community alias tables over theta, and one over community volumes.
  SegmentedAlias<Id> seg;
  seg.start = cstart;
  seg.entry.resize(n);
  std::vector<double> volume(k, 0.0);
  parallel_for(0, k, 1, [&](int64_t cb, int64_t ce) {
    AliasTable t;
    for (int64_t c = cb; c < ce; ++c) {
      int64_t b = cstart[c], len = cstart[c + 1] - b;
      t.build(theta.data() + b, len);
      double vol = 0;
      for (int64_t i = 0; i < len; ++i) {
        vol += theta[b + i];
        auto& e = seg.entry[b + i];
        e.thresh = static_cast<uint32_t>(std::min<uint64_t>(t.thresh[i], 0xffffffffULL));
        e.self = static_cast<Id>(perm[b + i]);
        e.alias = static_cast<Id>(perm[b + t.alias[i]]);
      }
      volume[c] = vol;
    }
  });
  AliasTable comm;
  comm.build(volume.data(), k);

  Stopwatch sw;
  std::vector<Id> src(m), dst(m);
  const uint64_t key = key_for(o.seed, kGenCommunity, kEdges);
  const uint64_t intra = static_cast<uint64_t>(o.intra_fraction * 4294967296.0);
  constexpr int kMaxAttempts = 64;
  parallel_for(0, m, kEdgeGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      RngStream s(key, static_cast<uint64_t>(i));
      int64_t cu = comm.pick(s);
      Id u = seg.pick(s, cu);
      int64_t cv = cu;
      if (k > 1 && s.next_u32() >= intra) {
        // An inter-community edge: the other end's community follows the volumes, excluding cu.
        for (int attempt = 0; attempt < kMaxAttempts && cv == cu; ++attempt) cv = comm.pick(s);
        if (cv == cu) cv = (cu + 1) % k;
      }
      src[i] = u;
      dst[i] = seg.pick(s, cv);
    }
  });
  DSP_DEBUG("generate", "drew {} edges in {:.2f} s", m, sw.seconds());
  sw.reset();
  CsrBuildOptions co;
  co.symmetrize = true;
  co.dedup = true;
  co.remove_self_loops = true;
  Csr g = build_in_csr<Id>(n, src.data(), dst.data(), m, nullptr, co);
  DSP_DEBUG("generate", "built the CSR ({} entries) in {:.2f} s", g.num_edges(), sw.seconds());
  return g;
}

}  // namespace

Dataset generate_rmat(const RmatOptions& o) {
  check_common(o.num_nodes, o.num_edges, o.feature_dim, o.feature_dtype, o.num_classes,
               o.train_frac, o.valid_frac);
  DSP_CHECK_ARG(o.a >= 0 && o.b >= 0 && o.c >= 0 && o.a + o.b + o.c < 1,
                "R-MAT needs a, b, c >= 0 with a + b + c < 1, got {}, {}, {}", o.a, o.b, o.c);
  DSP_CHECK_ARG(o.num_nodes <= (int64_t{1} << 62), "too many nodes: {}", o.num_nodes);
  Dataset ds;
  ds.graph = o.num_nodes < (int64_t{1} << 31) ? rmat_edges<int32_t>(o) : rmat_edges<int64_t>(o);

  Stopwatch node_sw;
  if (o.feature_dim > 0) {
    const uint64_t key = key_for(o.seed, kGenRmat, kFeatures);
    const int64_t dim = o.feature_dim;
    ds.features = make_features(o.num_nodes, dim, o.feature_dtype, [&](int64_t v, float* row) {
      RngStream s(key, static_cast<uint64_t>(v));
      for (int64_t j = 0; j < dim; ++j) row[j] = 2.0f * s.uniform01f() - 1.0f;
    });
  }
  if (o.num_classes > 0) {
    ds.labels = Array(DType::kInt64, {o.num_nodes});
    int64_t* y = ds.labels.mutable_data<int64_t>();
    const uint64_t key = key_for(o.seed, kGenRmat, kLabels);
    parallel_for(0, o.num_nodes, kNodeGrain, [&](int64_t b, int64_t e) {
      for (int64_t v = b; v < e; ++v) {
        y[v] = static_cast<int64_t>(RngStream(key, v).uniform_int(o.num_classes));
      }
    });
  }
  make_splits(ds, o.num_nodes, o.train_frac, o.valid_frac, key_for(o.seed, kGenRmat, kSplits));
  DSP_DEBUG("generate", "features, labels and splits in {:.2f} s", node_sw.seconds());
  fill_meta(ds, o.name, /*directed=*/!o.undirected);
  ds.meta.num_classes = o.num_classes;
  ds.meta.extra = {{"generator", "rmat"},
                   {"seed", o.seed},
                   {"a", o.a},
                   {"b", o.b},
                   {"c", o.c},
                   {"undirected", o.undirected},
                   {"permuted", o.permute},
                   {"requested_edges", o.num_edges},
                   {"train_frac", o.train_frac},
                   {"valid_frac", o.valid_frac}};
  return ds;
}

Dataset generate_community(const CommunityOptions& o, std::vector<int32_t>* communities) {
  check_common(o.num_nodes, o.num_edges, o.feature_dim, o.feature_dtype, o.num_classes,
               o.train_frac, o.valid_frac);
  DSP_CHECK_ARG(o.num_classes >= 1, "the community graph needs at least one class, got {}",
                o.num_classes);
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
  const int64_t n = o.num_nodes, k = o.num_communities;

  // Internal ids put each community in one contiguous range (equal sizes up to one node);
  // perm maps them to the published ids, so communities are scattered over the id space.
  std::vector<int64_t> cstart(k + 1);
  for (int64_t c = 0; c <= k; ++c) cstart[c] = n * c / k;

  // Node weights: Pareto(exponent - 1) with minimum 1, capped so that no expected degree exceeds
  // max_degree. Expected degree = theta * 2m / sum(theta); the cap and the sum depend on each
  // other, so iterate a few times (the sum is serial, hence independent of the thread count).
  std::vector<double> theta(n);
  {
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
  }
  std::vector<int64_t> perm = random_permutation(n, key_for(o.seed, kGenCommunity, kPermutation));

  Dataset ds;
  ds.graph = n < (int64_t{1} << 31) ? community_edges<int32_t>(o, cstart, theta, perm)
                                    : community_edges<int64_t>(o, cstart, theta, perm);
  theta = {};

  // Community of every published id.
  std::vector<int32_t> comm_of(n);
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t i = cstart[c]; i < cstart[c + 1]; ++i) comm_of[perm[i]] = static_cast<int32_t>(c);
  }
  perm = {};

  Stopwatch node_sw;
  if (o.feature_dim > 0) {
    const int64_t dim = o.feature_dim;
    std::vector<float> centroid(k * dim);
    const uint64_t ckey = key_for(o.seed, kGenCommunity, kCentroids);
    for (int64_t c = 0; c < k; ++c) {
      RngStream s(ckey, c);
      normals(s, centroid.data() + c * dim, dim);
    }
    const uint64_t key = key_for(o.seed, kGenCommunity, kFeatures);
    const float noise = static_cast<float>(o.feature_noise);
    ds.features = make_features(n, dim, o.feature_dtype, [&](int64_t v, float* row) {
      RngStream s(key, static_cast<uint64_t>(v));
      const float* mu = centroid.data() + comm_of[v] * dim;
      normals(s, row, dim);
      for (int64_t j = 0; j < dim; ++j) row[j] = mu[j] + noise * row[j];
    });
  }

  ds.labels = Array(DType::kInt64, {n});
  {
    int64_t* y = ds.labels.mutable_data<int64_t>();
    const uint64_t key = key_for(o.seed, kGenCommunity, kLabels);
    const int64_t classes = o.num_classes;
    const double noise = o.label_noise;
    parallel_for(0, n, kNodeGrain, [&](int64_t b, int64_t e) {
      for (int64_t v = b; v < e; ++v) {
        RngStream s(key, v);
        y[v] = comm_of[v] % classes;
        if (s.uniform01() < noise) y[v] = static_cast<int64_t>(s.uniform_int(classes));
      }
    });
  }
  make_splits(ds, n, o.train_frac, o.valid_frac, key_for(o.seed, kGenCommunity, kSplits));

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
  const int64_t stored = ds.graph.num_edges();

  DSP_DEBUG("generate", "features, labels and splits in {:.2f} s", node_sw.seconds());
  fill_meta(ds, o.name, /*directed=*/false);
  ds.meta.num_classes = o.num_classes;
  const double bound = 1.0 - o.label_noise * (1.0 - 1.0 / static_cast<double>(o.num_classes));
  ds.meta.extra = {{"generator", "community"},
                   {"seed", o.seed},
                   {"num_communities", o.num_communities},
                   {"intra_fraction", o.intra_fraction},
                   {"measured_intra_fraction",
                    stored > 0 ? static_cast<double>(inside) / static_cast<double>(stored) : 0.0},
                   {"degree_exponent", o.degree_exponent},
                   {"max_degree", o.max_degree},
                   {"feature_noise", o.feature_noise},
                   {"label_noise", o.label_noise},
                   {"accuracy_bound", bound},
                   {"requested_edges", o.num_edges},
                   {"train_frac", o.train_frac},
                   {"valid_frac", o.valid_frac},
                   {"community_to_class", "community % num_classes"}};
  if (communities) *communities = std::move(comm_of);
  return ds;
}

}  // namespace dsp
