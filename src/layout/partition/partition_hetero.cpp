// Heterogeneous partitions (partition.hpp: HeteroLayout): the type layout of the renumbered ids,
// each part's relation segments, the per-type feature files, and the per-type views a feature
// store serves.
#include <algorithm>
#include <filesystem>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "graph/npy.hpp"
#include "layout/partition/partition.hpp"
#include "layout/partition/partition_hetero.hpp"

namespace dsp {

int64_t HeteroLayout::slot(int64_t v) const {
  auto it = std::upper_bound(bounds.begin(), bounds.end(), v);
  int64_t s = static_cast<int64_t>(it - bounds.begin()) - 1;
  // Empty (part, type) slots share their bound: upper_bound lands after all of them.
  return std::min<int64_t>(s, static_cast<int64_t>(bounds.size()) - 2);
}

int64_t HeteroLayout::type_index(int64_t v) const {
  const int64_t s = slot(v);
  return before[s] + (v - bounds[s]);
}

int64_t HeteroLayout::type_node(int t, int64_t j) const {
  const int T = num_types();
  for (int p = 0; p < parts; ++p) {
    const int64_t s = static_cast<int64_t>(p) * T + t, n = bounds[s + 1] - bounds[s];
    if (j < before[s] + n) return bounds[s] + (j - before[s]);
  }
  DSP_THROW_T(InvalidArgument, "node {} of type {} does not exist", j, t);
}

nlohmann::json HeteroLayout::to_json() const {
  return {{"schema", schema.to_json()}, {"type_bounds", bounds}};
}

HeteroLayout HeteroLayout::from_json(const nlohmann::json& j, const std::vector<int64_t>& offsets,
                                     const std::string& what) {
  HeteroLayout h;
  try {
    h.schema = HeteroSchema::from_json(j.at("schema"), what);
    h.bounds = j.at("type_bounds").get<std::vector<int64_t>>();
  } catch (const nlohmann::json::exception& e) {
    DSP_THROW_T(FormatError, "{}: malformed \"hetero\" ({})", what, e.what());
  }
  const int T = h.num_types();
  h.parts = static_cast<int>(offsets.size()) - 1;
  DSP_CHECK_FORMAT(
      T >= 1 && static_cast<int64_t>(h.bounds.size()) == static_cast<int64_t>(h.parts) * T + 1,
      "{}: hetero.type_bounds has {} entries, expected parts x types + 1 = {}", what,
      h.bounds.size(), static_cast<int64_t>(h.parts) * T + 1);
  h.before.assign(static_cast<size_t>(h.parts) * T, 0);
  std::vector<int64_t> count(T, 0);
  for (int p = 0; p < h.parts; ++p) {
    DSP_CHECK_FORMAT(h.bounds[static_cast<size_t>(p) * T] == offsets[p],
                     "{}: hetero.type_bounds does not start part {} at its offset {}", what, p,
                     offsets[p]);
    for (int t = 0; t < T; ++t) {
      const size_t s = static_cast<size_t>(p) * T + t;
      DSP_CHECK_FORMAT(h.bounds[s] <= h.bounds[s + 1], "{}: hetero.type_bounds decrease at {}",
                       what, s);
      h.before[s] = count[t];
      count[t] += h.bounds[s + 1] - h.bounds[s];
    }
  }
  DSP_CHECK_FORMAT(h.bounds.back() == offsets.back(), "{}: hetero.type_bounds end at {}, not {}",
                   what, h.bounds.back(), offsets.back());
  for (int t = 0; t < T; ++t) {
    DSP_CHECK_FORMAT(count[t] == h.schema.node_types[t].count,
                     "{}: hetero.type_bounds give type {} {} nodes, the schema {}", what,
                     h.schema.node_types[t].name, count[t], h.schema.node_types[t].count);
  }
  return h;
}

namespace detail {

HeteroLayout make_hetero_layout(const HeteroUnion& u, const std::vector<int64_t>& offsets,
                                const std::vector<int64_t>& new2old) {
  const int T = u.schema.num_types(), P = static_cast<int>(offsets.size()) - 1;
  nlohmann::json j = {{"schema", u.schema.to_json()}};
  std::vector<int64_t> bounds(static_cast<size_t>(P) * T + 1, 0);
  for (int p = 0; p < P; ++p) {
    // Part p's new ids follow union ids, so its types come in order: count them by type.
    int64_t v = offsets[p];
    for (int t = 0; t < T; ++t) {
      bounds[static_cast<size_t>(p) * T + t] = v;
      while (v < offsets[p + 1] && new2old[v] < u.type_offsets[t + 1]) ++v;
    }
  }
  bounds.back() = offsets.back();
  j["type_bounds"] = bounds;
  return HeteroLayout::from_json(j, offsets, "partition");
}

std::vector<int64_t> type_rows(const HeteroLayout& h, const HeteroUnion& u,
                               const std::vector<int64_t>& new2old, int t) {
  const int T = h.num_types();
  std::vector<int64_t> rows;
  rows.reserve(u.schema.node_types[t].count);
  for (int p = 0; p < h.parts; ++p) {
    const size_t s = static_cast<size_t>(p) * T + t;
    for (int64_t v = h.bounds[s]; v < h.bounds[s + 1]; ++v) {
      rows.push_back(new2old[v] - u.type_offsets[t]);
    }
  }
  return rows;
}

void check_relation_segments(const PartitionData& d, const std::string& file) {
  const HeteroLayout& h = *d.meta.hetero;
  const int64_t R = h.num_relations(), rows = d.patch.num_nodes;
  const Array& a = d.relation_indptr;
  DSP_CHECK_FORMAT(a.dim(0) == rows * R + 1,
                   "{}: has {} entries, expected rows x relations + 1 = {}", file, a.dim(0),
                   rows * R + 1);
  const int64_t* rp = a.data<int64_t>();
  const int64_t* p = d.patch.rowptr();
  const int64_t base = d.meta.offsets[d.part];
  for (int64_t i = 0; i < rows; ++i) {
    DSP_CHECK_FORMAT(rp[i * R] == p[i] && rp[(i + 1) * R] == p[i + 1],
                     "{}: row {} does not span its indptr.npy row", file, base + i);
    const int dt = h.type_of(base + i);
    for (int64_t r = 0; r < R; ++r) {
      const int64_t b = rp[i * R + r], e = rp[i * R + r + 1];
      const RelationInfo& ri = h.schema.relations[r];
      DSP_CHECK_FORMAT(b <= e && (b == e || ri.dst_type == dt),
                       "{}: row {} has a segment of relation {} whose destination type is not {}",
                       file, base + i, ri.key(), h.schema.node_types[dt].name);
      for (int64_t k = b; k < e; ++k) {
        const int64_t u = d.patch.indices.int_at(k);
        DSP_CHECK_FORMAT(u >= 0 && u < d.meta.num_nodes, "{}: row {}: entry {} is not a node id",
                         file, base + i, u);
        DSP_CHECK_FORMAT(
            h.type_of(u) == ri.src_type && (k == b || d.patch.indices.int_at(k - 1) < u),
            "{}: row {}, relation {}: entry {} is not an ascending {} node", file, base + i,
            ri.key(), u, ri.src);
      }
    }
  }
}

void load_hetero_part(PartitionData& d) {
  const HeteroLayout& h = *d.meta.hetero;
  const std::string pd = fmt::format("{}/part{}", d.dir, d.part);
  const std::string rf = pd + "/relation_indptr.npy";
  check_file_readable(rf);
  d.relation_indptr = load_npy(rf, DType::kInt64, 1);
  check_relation_segments(d, rf);
  d.type_features.assign(h.num_types(), Array());
  for (int t = 0; t < h.num_types(); ++t) {
    const NodeTypeInfo& nt = h.schema.node_types[t];
    if (nt.feature_dim == 0) continue;
    const std::string f = fmt::format("{}/features_{}.npy", d.dir, nt.name);
    check_file_readable(f);
    d.type_features[t] = load_npy(f, nt.feature_dtype, 2);
    DSP_CHECK_FORMAT(
        d.type_features[t].dim(0) == nt.count && d.type_features[t].dim(1) == nt.feature_dim,
        "{}: shape {} does not match {} {} nodes x {} features", f, d.type_features[t].describe(),
        nt.count, nt.name, nt.feature_dim);
  }
}

}  // namespace detail

PartitionData hetero_type_view(const PartitionData& part, int t) {
  DSP_CHECK_ARG(part.meta.hetero != nullptr, "{}: not a heterogeneous partition", part.dir);
  const HeteroLayout& h = *part.meta.hetero;
  DSP_CHECK_ARG(t >= 0 && t < h.num_types(), "node type {} does not exist", t);
  const int T = h.num_types(), P = h.parts;
  PartitionData v;
  v.dir = part.dir;
  v.part = part.part;
  v.meta.parts = P;
  v.meta.offsets.assign(P + 1, 0);
  for (int p = 0; p < P; ++p) {
    const size_t s = static_cast<size_t>(p) * T + t;
    v.meta.offsets[p + 1] = h.before[s] + (h.bounds[s + 1] - h.bounds[s]);
  }
  const NodeTypeInfo& nt = h.schema.node_types[t];
  v.meta.num_nodes = nt.count;
  v.meta.feature_dim = part.type_features[t].defined() ? nt.feature_dim : 0;
  v.meta.feature_dtype =
      part.type_features[t].defined() ? part.type_features[t].dtype() : nt.feature_dtype;
  v.meta.cache_policy = part.meta.cache_policy;
  v.meta.cache_rows = part.meta.cache_rows;
  v.meta.partition_id = part.meta.partition_id;
  v.features = part.type_features[t];
  std::vector<int64_t> cached;
  for (int64_t i = 0; part.cached.defined() && i < part.cached.dim(0); ++i) {
    const int64_t u = part.cached.data<int64_t>()[i];
    if (h.type_of(u) == t) cached.push_back(h.type_index(u));
  }
  v.cached = Array::from_vector(std::move(cached));
  v.patch.num_nodes = v.meta.offsets[part.part + 1] - v.meta.offsets[part.part];
  return v;
}

}  // namespace dsp

namespace dsp::detail {

namespace {
template <class T>
int64_t write_hetero_rows(const Csr& g, const Array& rel_ptr, int64_t R,
                          const std::vector<int64_t>& old2new, const std::vector<int64_t>& new2old,
                          int64_t begin, int64_t end, const std::string& pd) {
  const int64_t* rp = rel_ptr.data<int64_t>();
  const T* src = g.num_edges() ? g.indices.data<T>() : nullptr;
  std::vector<int64_t> ptr(end - begin + 1, 0), seg((end - begin) * R + 1, 0);
  std::vector<T> idx;
  for (int64_t v = begin; v < end; ++v) {
    const int64_t old = new2old[v], i = v - begin;
    for (int64_t r = 0; r < R; ++r) {
      seg[i * R + r] = static_cast<int64_t>(idx.size());
      const size_t first = idx.size();
      for (int64_t k = rp[old * R + r]; k < rp[old * R + r + 1]; ++k) {
        idx.push_back(static_cast<T>(old2new[static_cast<int64_t>(src[k])]));
      }
      std::sort(idx.begin() + first, idx.end());
    }
    ptr[i + 1] = static_cast<int64_t>(idx.size());
  }
  seg.back() = static_cast<int64_t>(idx.size());
  const int64_t entries = static_cast<int64_t>(idx.size());
  save_npy(pd + "/indptr.npy", Array::from_vector(std::move(ptr)));
  save_npy(pd + "/indices.npy", Array::from_vector(std::move(idx)));
  save_npy(pd + "/relation_indptr.npy", Array::from_vector(std::move(seg)));
  return entries;
}
}  // namespace

int64_t write_hetero_patch(const Csr& g, const HeteroUnion& u, const std::vector<int64_t>& old2new,
                           const std::vector<int64_t>& new2old, int64_t begin, int64_t end,
                           const std::string& pd) {
  const int64_t R = u.schema.num_relations();
  return dispatch_index(g.index_dtype(), [&](auto tag) {
    return write_hetero_rows<decltype(tag)>(g, u.relation_indptr, R, old2new, new2old, begin, end,
                                            pd);
  });
}

}  // namespace dsp::detail

namespace dsp {

std::vector<Array> hetero_type_cache_lists(const PartitionData& part,
                                           const std::vector<Array>& all_cached, int t) {
  const HeteroLayout& h = *part.meta.hetero;
  std::vector<Array> out;
  for (int p = 0; p < part.meta.parts; ++p) {
    const Array list = !all_cached.empty() ? all_cached.at(p)
                       : p == part.part    ? part.cached
                                        : load_npy(fmt::format("{}/part{}/cached.npy", part.dir, p),
                                                   DType::kInt64, 1);
    std::vector<int64_t> ids;
    for (int64_t i = 0; list.defined() && i < list.dim(0); ++i) {
      const int64_t v = list.data<int64_t>()[i];
      if (h.type_of(v) == t) ids.push_back(h.type_index(v));
    }
    out.push_back(Array::from_vector(std::move(ids)));
  }
  return out;
}

}  // namespace dsp
