#include "layout/partition/partition.hpp"

#include <metis.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/hash.hpp"
#include "core/logging.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"
#include "core/timer.hpp"
#include "graph/npy.hpp"
#include "layout/partition/hotness.hpp"
#include "layout/partition/owner_ranges.hpp"
#include "layout/partition/partition_detail.hpp"

namespace dsp {
namespace {

template <class F>
void for_each_entry(const Csr& g, F&& f) {  // f(row, neighbour, entry index)
  const int64_t* p = g.rowptr();
  dispatch_index(g.index_dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* idx = g.indices.data<T>();
    for (int64_t v = 0; v < g.num_nodes; ++v) {
      for (int64_t e = p[v]; e < p[v + 1]; ++e) f(v, static_cast<int64_t>(idx[e]), e);
    }
  });
}

}  // namespace

int PartitionMeta::owner(int64_t v) const { return owner_in(offsets, v); }

nlohmann::json PartitionMeta::to_json() const {
  nlohmann::json parts_j = nlohmann::json::array();
  for (const auto& s : part) {
    parts_j.push_back({{"begin", s.begin},
                       {"end", s.end},
                       {"edges", s.edges},
                       {"seeds", s.seeds},
                       {"cached", s.cached},
                       {"halo_nodes", s.halo_nodes},
                       {"halo_edges", s.halo_edges},
                       {"reach", s.reach},
                       {"link_train", s.link_train}});
  }
  nlohmann::json j = {{"format_version", format_version},
                      {"parts", parts},
                      {"offsets", offsets},
                      {"method", method},
                      {"cache_policy", cache_policy},
                      {"cache_ratio", cache_ratio},
                      {"cache_bytes", cache_bytes},
                      {"cache_rows", cache_rows},
                      {"part", parts_j},
                      {"edge_cut", edge_cut},
                      {"hops", hops},
                      {"halo_cap", halo_cap},
                      {"preaggregated", preaggregated},
                      {"num_nodes", num_nodes},
                      {"num_edges", num_edges},
                      {"feature_dim", feature_dim},
                      {"feature_dtype", dtype_name(feature_dtype)},
                      {"index_dtype", dtype_name(index_dtype)},
                      {"num_classes", num_classes},
                      {"has_weights", has_weights},
                      {"dataset_name", dataset_name},
                      {"source_checksum", fmt::format("{:016x}", source_checksum)},
                      {"partition_id", fmt::format("{:016x}", partition_id)},
                      {"extra", extra}};
  if (hetero) j["hetero"] = hetero->to_json();
  // Only when true, so that a partition without times is written as it always was.
  if (has_edge_time) j["has_edge_time"] = true;
  if (has_node_time) j["has_node_time"] = true;
  if (multilabel) j["multilabel"] = true;
  if (link_negatives_per_positive > 0) j["link_negatives_per_positive"] = link_negatives_per_positive;
  // Only when by reference, so that a partition with its own features.npy is written as before.
  if (!feature_source.empty()) {
    j["feature_source"] = feature_source;
    j["feature_source_fingerprint"] = fmt::format("{:016x}", feature_source_fingerprint);
  }
  // Only when converted, so that --feature-dtype keep writes the file it always did.
  if (feature_conversion.converted) {
    const FeatureConversion& c = feature_conversion;
    j["feature_conversion"] = {{"source_dtype", dtype_name(c.source_dtype)},
                               {"scale", c.scale},
                               {"max_abs_error", c.max_abs_error},
                               {"rel_rms_error", c.rel_rms_error}};
  }
  return j;
}

namespace {

// The counts and offsets of a meta read from `what`: FormatError naming the fault.
void check_layout(const PartitionMeta& m, const std::string& what) {
  DSP_CHECK_FORMAT(m.hops >= 0 && m.halo_cap >= 0, "{}: hops and halo_cap must be >= 0", what);
  DSP_CHECK_FORMAT(m.parts >= 1, "{}: parts must be >= 1, got {}", what, m.parts);
  DSP_CHECK_FORMAT(static_cast<int64_t>(m.offsets.size()) == m.parts + 1,
                   "{}: offsets has {} entries, expected parts + 1 = {}", what, m.offsets.size(),
                   m.parts + 1);
  DSP_CHECK_FORMAT(m.offsets.front() == 0 && m.offsets.back() == m.num_nodes,
                   "{}: offsets must run from 0 to num_nodes = {}", what, m.num_nodes);
  for (int p = 0; p < m.parts; ++p) {
    DSP_CHECK_FORMAT(m.offsets[p] <= m.offsets[p + 1], "{}: offsets decrease at part {}", what, p);
  }
}

// feature_conversion (written with --feature-dtype other than keep) against feature_dtype.
FeatureConversion parse_feature_conversion(const nlohmann::json& j, DType stored,
                                           const std::string& what) {
  FeatureConversion c;
  const bool needs_scale = stored == DType::kInt8;
  if (!j.contains("feature_conversion")) {
    DSP_CHECK_FORMAT(!needs_scale && stored != DType::kBFloat16,
                     "{}: feature_dtype {} needs a 'feature_conversion' entry", what,
                     dtype_name(stored));
    return c;
  }
  std::string source, scale;
  try {
    const nlohmann::json& fc = j.at("feature_conversion");
    fc.at("source_dtype").get_to(source);
    fc.at("scale").get_to(scale);
    fc.at("max_abs_error").get_to(c.max_abs_error);
    fc.at("rel_rms_error").get_to(c.rel_rms_error);
  } catch (const nlohmann::json::exception&) {
    DSP_THROW_T(FormatError,
                "{}: malformed 'feature_conversion' (source_dtype, scale, max_abs_error, "
                "rel_rms_error)",
                what);
  }
  DSP_CHECK_FORMAT(source == "float32" || source == "float16",
                   "{}: feature_conversion.source_dtype '{}' is not float32 or float16", what,
                   source);
  DSP_CHECK_FORMAT(stored == DType::kFloat32 || stored == DType::kFloat16 ||
                       stored == DType::kBFloat16 || stored == DType::kInt8,
                   "{}: feature_dtype {} is not float32, float16, bfloat16 or int8", what,
                   dtype_name(stored));
  const std::optional<StoredScale> stored_scale = names_of(StoredScale{}).find(scale);
  if (needs_scale) {
    DSP_CHECK_FORMAT(stored_scale && *stored_scale != StoredScale::kNone,
                     "{}: feature_conversion.scale '{}' is not column or row (int8 features)", what,
                     scale);
  } else {
    DSP_CHECK_FORMAT(stored_scale == StoredScale::kNone,
                     "{}: feature_conversion.scale '{}' for {} features (only int8 has scales)",
                     what, scale, dtype_name(stored));
  }
  DSP_CHECK_FORMAT(std::isfinite(c.max_abs_error) && c.max_abs_error >= 0 &&
                       std::isfinite(c.rel_rms_error) && c.rel_rms_error >= 0,
                   "{}: feature_conversion errors must be finite and >= 0", what);
  c.converted = true;
  c.source_dtype = parse_dtype(source);
  c.scale = *stored_scale;
  return c;
}

// The per-part entries of partition.json.
std::vector<PartStats> parse_parts(const nlohmann::json& j, int parts, const std::string& what) {
  DSP_CHECK_FORMAT(j.contains("part") && j.at("part").is_array() &&
                       static_cast<int>(j.at("part").size()) == parts,
                   "{}: 'part' must list {} parts", what, parts);
  std::vector<PartStats> out;
  for (const auto& pj : j.at("part")) {
    PartStats s;
    try {
      s.begin = pj.at("begin");
      s.end = pj.at("end");
      s.edges = pj.at("edges");
      s.seeds = pj.at("seeds");
      s.cached = pj.at("cached");
      s.halo_nodes = pj.value("halo_nodes", int64_t{0});
      s.halo_edges = pj.value("halo_edges", int64_t{0});
      s.reach = pj.value("reach", int64_t{0});
      s.link_train = pj.value("link_train", int64_t{0});
    } catch (const nlohmann::json::exception&) {
      DSP_THROW_T(FormatError, "{}: malformed part entry", what);
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace

PartitionMeta PartitionMeta::from_json(const nlohmann::json& j, const std::string& what) {
  PartitionMeta m;
  auto get = [&](const char* key, auto& out) {
    DSP_CHECK_FORMAT(j.is_object() && j.contains(key), "{}: missing key '{}'", what, key);
    try {
      j.at(key).get_to(out);
    } catch (const nlohmann::json::exception&) {
      DSP_THROW_T(FormatError, "{}: key '{}' has the wrong type", what, key);
    }
  };
  auto hex = [&](const char* key) {
    std::string s;
    get(key, s);
    try {
      size_t pos = 0;
      uint64_t v = std::stoull(s, &pos, 16);
      DSP_CHECK_FORMAT(pos == s.size(), "{}: '{}' is not a hex digest", what, key);
      return v;
    } catch (const std::logic_error&) {
      DSP_THROW_T(FormatError, "{}: '{}' is not a hex digest", what, key);
    }
  };
  get("format_version", m.format_version);
  DSP_CHECK_FORMAT(m.format_version == kPartitionFormatVersion,
                   "{}: format version {} is not supported (expected {})", what, m.format_version,
                   kPartitionFormatVersion);
  get("parts", m.parts);
  get("offsets", m.offsets);
  get("method", m.method);
  get("cache_policy", m.cache_policy);
  get("cache_ratio", m.cache_ratio);
  get("cache_bytes", m.cache_bytes);
  get("cache_rows", m.cache_rows);
  get("edge_cut", m.edge_cut);
  get("num_nodes", m.num_nodes);
  get("num_edges", m.num_edges);
  get("feature_dim", m.feature_dim);
  get("num_classes", m.num_classes);
  get("has_weights", m.has_weights);
  m.has_edge_time = j.value("has_edge_time", false);
  m.has_node_time = j.value("has_node_time", false);
  m.multilabel = j.value("multilabel", false);
  m.link_negatives_per_positive = j.value("link_negatives_per_positive", int64_t{0});
  get("dataset_name", m.dataset_name);
  std::string fd, id;
  get("feature_dtype", fd);
  get("index_dtype", id);
  try {
    m.feature_dtype = parse_dtype(fd);
    m.index_dtype = parse_dtype(id);
  } catch (const Error&) {
    DSP_THROW_T(FormatError, "{}: unknown dtype '{}' or '{}'", what, fd, id);
  }
  m.feature_conversion = parse_feature_conversion(j, m.feature_dtype, what);
  m.source_checksum = hex("source_checksum");
  m.partition_id = hex("partition_id");
  if (j.contains("feature_source")) {
    get("feature_source", m.feature_source);
    m.feature_source_fingerprint = hex("feature_source_fingerprint");
    DSP_CHECK_FORMAT(!m.feature_source.empty() && m.feature_source.front() == '/' &&
                         !m.feature_conversion.converted && !j.contains("hetero"),
                     "{}: feature_source must be an absolute path, of features kept as they are "
                     "(no feature_conversion) in a homogeneous partition",
                     what);
  }
  if (j.contains("extra")) m.extra = j.at("extra");
  // Written since self-reliant (pagraph) partitions exist; absent means no replication.
  if (j.contains("hops")) get("hops", m.hops);
  if (j.contains("halo_cap")) get("halo_cap", m.halo_cap);
  // Written since PaGraph's pre-aggregation exists; absent means none.
  if (j.contains("preaggregated")) get("preaggregated", m.preaggregated);
  check_layout(m, what);
  m.part = parse_parts(j, m.parts, what);
  if (j.contains("hetero")) {
    m.hetero =
        std::make_shared<HeteroLayout>(HeteroLayout::from_json(j["hetero"], m.offsets, what));
  }
  return m;
}

uint64_t feature_fingerprint(const Array& features) {
  Hasher h;
  const int64_t n = features.dim(0);
  const std::string shape = fmt::format("{}:{}", features.describe(), dtype_name(features.dtype()));
  h.update(shape.data(), shape.size());
  const size_t row = features.nbytes() / static_cast<size_t>(std::max<int64_t>(n, 1));
  const auto* base = static_cast<const unsigned char*>(features.raw());
  constexpr int64_t kRows = 4096;
  for (int64_t k = 0; n > 0 && k <= kRows; ++k) {
    const int64_t i = static_cast<int64_t>(static_cast<__int128>(n - 1) * k / kRows);
    h.update(base + static_cast<size_t>(i) * row, row);
  }
  return h.digest();
}

uint64_t dataset_checksum(const Dataset& ds) {
  Hasher h;
  nlohmann::json meta = ds.meta.to_json();
  meta.erase("extra");  // provenance only: renaming a source must not orphan its partitions
  meta.erase("name");
  std::string s = meta.dump();
  h.update(s.data(), s.size());
  for (const Array* a : {&ds.graph.indptr, &ds.graph.indices, &ds.graph.weights, &ds.features,
                         &ds.labels, &ds.train_idx, &ds.valid_idx, &ds.test_idx}) {
    // 64 MiB at a time, each piece's mapped pages released once hashed (the digest is the same).
    if (a->defined()) {
      h.update_pieces(a->raw(), a->nbytes(), size_t{64} << 20,
                      [&](size_t offset, size_t bytes) { a->release_pages(offset, bytes); });
    }
    uint64_t sep = a->defined() ? a->nbytes() : ~0ULL;
    h.update(&sep, sizeof(sep));
  }
  if (ds.hetero) {  // the schema and each type's features (the union has none of its own)
    const std::string sj = ds.hetero->schema.to_json().dump();
    h.update(sj.data(), sj.size());
    for (const Array& f : ds.hetero->features) {
      if (f.defined()) h.update(f.raw(), f.nbytes());
    }
  }
  // Link pairs and times: only those present (their presence is in the meta above), so a dataset
  // without them keeps the checksum it had before they existed.
  for (const Array* a : {&ds.link_train, &ds.link_valid, &ds.link_test, &ds.link_valid_neg,
                         &ds.link_test_neg, &ds.graph.times, &ds.node_time}) {
    if (a->defined()) h.update(a->raw(), a->nbytes());
  }
  return h.digest();
}

std::vector<int32_t> assign_random(int64_t n, int parts, uint64_t seed) {
  // A random permutation cut into equal slices: exactly balanced node counts.
  std::vector<std::pair<uint64_t, int64_t>> key(n);
  uint64_t k = rng_key(seed, 0x7061'7274);  // "part"
  for (int64_t v = 0; v < n; ++v) key[v] = {RngStream(k, v).next_u64(), v};
  std::sort(key.begin(), key.end());
  std::vector<int32_t> assign(n);
  for (int64_t i = 0; i < n; ++i) assign[key[i].second] = static_cast<int32_t>(i * parts / n);
  return assign;
}

namespace {

// METIS's input: a symmetric adjacency without self loops, in its index type.
struct MetisGraph {
  std::vector<idx_t> xadj, adj;
};

MetisGraph metis_graph(const Dataset& ds, int64_t max_entries) {
  const Csr& g = ds.graph;
  const int64_t n = g.num_nodes;
  MetisGraph mg;
  std::vector<idx_t>& xadj = mg.xadj;
  std::vector<idx_t>& adj = mg.adj;
  xadj.assign(n + 1, 0);
  if (!ds.meta.directed) {
    int64_t entries = g.num_edges();
    DSP_CHECK_ARG(entries <= max_entries,
                  "METIS uses 32-bit indices: the graph has {} adjacency entries, more than its "
                  "limit of {}; use --method bfs-blocks (or --method random)",
                  entries, max_entries);
    adj.reserve(entries);
    for_each_entry(g, [&](int64_t v, int64_t u, int64_t) {
      if (u != v) adj.push_back(static_cast<idx_t>(u));
      xadj[v + 1] = static_cast<idx_t>(adj.size());
    });
    for (int64_t v = 0; v < n; ++v) xadj[v + 1] = std::max(xadj[v + 1], xadj[v]);
  } else {
    const int64_t m = g.num_edges();
    DSP_CHECK_ARG(m <= max_entries,
                  "METIS uses 32-bit indices: {} directed edges exceed its limit of {} adjacency "
                  "entries; use --method bfs-blocks (or --method random)",
                  m, max_entries);
    std::vector<int32_t> src(m), dst(m);
    for_each_entry(g, [&](int64_t v, int64_t u, int64_t e) {
      src[e] = static_cast<int32_t>(u);
      dst[e] = static_cast<int32_t>(v);
    });
    CsrBuildOptions o;
    o.symmetrize = true;
    o.dedup = true;
    o.remove_self_loops = true;
    Csr sym = build_in_csr<int32_t>(n, src.data(), dst.data(), m, nullptr, o);
    std::vector<int32_t>().swap(src);
    std::vector<int32_t>().swap(dst);
    DSP_CHECK_ARG(sym.num_edges() <= max_entries,
                  "METIS uses 32-bit indices: the symmetrized graph has {} adjacency entries, more "
                  "than its limit of {}; use --method bfs-blocks (or --method random)",
                  sym.num_edges(), max_entries);
    for (int64_t v = 0; v <= n; ++v) xadj[v] = static_cast<idx_t>(sym.rowptr()[v]);
    const int32_t* si = sym.indices.data<int32_t>();
    adj.assign(si, si + sym.num_edges());
  }
  return mg;
}

// Balance constraints, one weight each per node: the node itself (1), training seeds (1 for a
// seed), and the adjacency entries the node's row brings into its part's patch (its in-degree:
// the topology memory of a rank, which on power-law graphs is far from proportional to nodes).
// A heterogeneous graph balances each node type's count instead of the node count (one
// constraint per type: a node weighs 1 in its type's).
std::vector<idx_t> metis_weights(const Dataset& ds, bool balance_entries, idx_t* ncon_out) {
  const Csr& g = ds.graph;
  const int64_t n = g.num_nodes;
  const bool links = ds.link_train.defined() && ds.link_train.dim(0) > 0;
  const bool seeds = links || (ds.train_idx.defined() && ds.train_idx.dim(0) > 0);
  const std::vector<int64_t> toff =
      ds.hetero ? ds.hetero->type_offsets : std::vector<int64_t>{0, n};
  const idx_t types = static_cast<idx_t>(toff.size() - 1);
  idx_t ncon = types + (seeds ? 1 : 0) + (balance_entries ? 1 : 0);
  const idx_t sc = types;  // the seed constraint
  std::vector<idx_t> vwgt(static_cast<size_t>(n) * ncon, 0);
  for (idx_t t = 0; t < types; ++t) {
    for (int64_t v = toff[t]; v < toff[t + 1]; ++v) vwgt[v * ncon + t] = 1;
  }
  for (int64_t v = 0; balance_entries && v < n; ++v) {
    vwgt[v * ncon + ncon - 1] = static_cast<idx_t>(g.degree(v));
  }
  if (links) {  // link prediction: a node's seeds are its training edges as source
    const int64_t* e = ds.link_train.data<int64_t>();
    for (int64_t i = 0; i < ds.link_train.dim(0); ++i) ++vwgt[e[2 * i] * ncon + sc];
  } else if (seeds) {
    for (int64_t i = 0; i < ds.train_idx.dim(0); ++i) vwgt[ds.train_idx.int_at(i) * ncon + sc] = 1;
  }
  *ncon_out = ncon;
  return vwgt;
}

}  // namespace

std::vector<int32_t> assign_metis(const Dataset& ds, int parts, uint64_t seed, bool verbose,
                                  int64_t max_entries, bool balance_entries) {
  static_assert(sizeof(idx_t) == 4 || sizeof(idx_t) == 8, "unexpected METIS idx_t");
  if (sizeof(idx_t) == 4) max_entries = std::min(max_entries, kMetisMaxEntries);
  const Csr& g = ds.graph;
  const int64_t n = g.num_nodes;
  if (parts == 1) return std::vector<int32_t>(n, 0);
  DSP_CHECK_ARG(n <= max_entries,
                "METIS uses 32-bit indices: {} nodes exceed its limit of {}; use --method "
                "bfs-blocks (or --method random)",
                n, max_entries);
  detail::Progress progress(verbose);

  MetisGraph mg = metis_graph(ds, max_entries);
  progress.phase("symmetrize");
  detail::release_pages(g);  // METIS works on its copy

  idx_t ncon = 0;
  std::vector<idx_t> vwgt = metis_weights(ds, balance_entries, &ncon);
  idx_t nv = static_cast<idx_t>(n), np = parts, objval = 0;
  std::vector<real_t> ubvec(ncon, 1.03f);
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_SEED] = static_cast<idx_t>(seed & 0x7fffffff);
  options[METIS_OPTION_NUMBERING] = 0;
  std::vector<idx_t> part(n, 0);
  int rc = METIS_PartGraphKway(&nv, &ncon, mg.xadj.data(), mg.adj.data(), vwgt.data(), nullptr,
                               nullptr, &np, nullptr, ubvec.data(), options, &objval, part.data());
  DSP_CHECK(rc == METIS_OK, "METIS_PartGraphKway failed ({})",
            rc == METIS_ERROR_MEMORY  ? "out of memory"
            : rc == METIS_ERROR_INPUT ? "invalid input"
                                      : "error");
  progress.phase("METIS k-way");
  return std::vector<int32_t>(part.begin(), part.end());
}

int64_t rebalance_seeds(const Csr& g, const Array& train_idx, int parts, double tol,
                        std::vector<int32_t>& assign) {
  if (!train_idx.defined() || parts <= 1) return 0;
  const int64_t s = train_idx.dim(0);
  std::vector<int64_t> count(parts, 0);
  std::vector<std::vector<int64_t>> seeds_of(parts);
  for (int64_t i = 0; i < s; ++i) {
    int64_t v = train_idx.int_at(i);
    ++count[assign[v]];
    seeds_of[assign[v]].push_back(v);
  }
  const int64_t cap =
      std::max<int64_t>((s + parts - 1) / parts, static_cast<int64_t>((1.0 + tol) * s / parts));
  int64_t moved = 0;
  const int64_t* p = g.rowptr();
  for (int src = 0; src < parts; ++src) {
    if (count[src] <= cap) continue;
    // Score each seed of the over-full part by its neighbours in every part, then move the seeds
    // with the strongest pull towards an under-full part first (fewest cut edges added).
    struct Move {
      int64_t gain, v;
      int dst;
    };
    std::vector<Move> moves;
    std::vector<int64_t> nb(parts);
    dispatch_index(g.index_dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* idx = g.indices.data<T>();
      for (int64_t v : seeds_of[src]) {
        std::fill(nb.begin(), nb.end(), 0);
        for (int64_t e = p[v]; e < p[v + 1]; ++e) ++nb[assign[idx[e]]];
        int best = -1;
        for (int q = 0; q < parts; ++q) {
          if (q != src && count[q] < cap && (best < 0 || nb[q] > nb[best])) best = q;
        }
        if (best >= 0) moves.push_back({nb[best] - nb[src], v, best});
      }
    });
    std::stable_sort(moves.begin(), moves.end(),
                     [](const Move& a, const Move& b) { return a.gain > b.gain; });
    for (const Move& mv : moves) {
      if (count[src] <= cap) break;
      int dst = mv.dst;
      if (count[dst] >= cap) {  // its first choice filled up meanwhile: take the emptiest part
        dst = static_cast<int>(std::min_element(count.begin(), count.end()) - count.begin());
        if (dst == src || count[dst] >= cap) continue;
      }
      assign[mv.v] = dst;
      --count[src];
      ++count[dst];
      ++moved;
    }
  }
  return moved;
}

}  // namespace dsp
