// The union graph of a heterogeneous dataset (graph/hetero.hpp): one id space, one in-neighbour
// CSR whose rows are each node's relations in order, and the relation segments beside it.
#include <algorithm>
#include <numeric>

#include "graph/hetero.hpp"

namespace dsp {

namespace {

// Row pointers of the union CSR and the relation segments: node v (type t) gets, for every
// relation r into t in order, the degree of its local row in r.
void union_pointers(const HeteroDataset& ds, const std::vector<int64_t>& toff,
                    std::vector<int64_t>& indptr, std::vector<int64_t>& rel_ptr) {
  const HeteroSchema& s = ds.schema;
  const int64_t n = toff.back();
  const int R = s.num_relations();
  indptr.assign(n + 1, 0);
  rel_ptr.assign(n * R + 1, 0);
  int64_t pos = 0;
  for (int t = 0; t < s.num_types(); ++t) {
    for (int64_t v = toff[t]; v < toff[t + 1]; ++v) {
      for (int r = 0; r < R; ++r) {
        rel_ptr[v * R + r] = pos;
        if (s.relations[r].dst_type == t) pos += ds.relations[r].degree(v - toff[t]);
      }
      indptr[v + 1] = pos;
    }
  }
  rel_ptr[n * R] = pos;
}

template <class Out>
void fill_union(const HeteroDataset& ds, const std::vector<int64_t>& toff,
                const std::vector<int64_t>& rel_ptr, Out* out) {
  const HeteroSchema& s = ds.schema;
  const int R = s.num_relations();
  for (int r = 0; r < R; ++r) {
    const RelationInfo& ri = s.relations[r];
    const Csr& g = ds.relations[r];
    const int64_t base = toff[ri.src_type];
    dispatch_index(g.index_dtype(), [&](auto tag) {
      using Id = decltype(tag);
      const Id* idx = g.num_edges() ? g.indices.data<Id>() : nullptr;
      const int64_t* p = g.rowptr();
      for (int64_t i = 0; i < g.num_nodes; ++i) {
        Out* dst = out + rel_ptr[(toff[ri.dst_type] + i) * R + r];
        for (int64_t j = p[i]; j < p[i + 1]; ++j) dst[j - p[i]] = static_cast<Out>(base + idx[j]);
        std::sort(dst, dst + (p[i + 1] - p[i]));
      }
    });
  }
}

// Labels over the union ids (-1 outside the target type) and a split in union ids.
Array union_labels(const HeteroDataset& ds, const std::vector<int64_t>& toff) {
  std::vector<int64_t> y(toff.back(), -1);
  const int64_t base = toff[ds.schema.target];
  for (int64_t i = 0; i < ds.labels.dim(0); ++i) y[base + i] = ds.labels.int_at(i);
  return Array::from_vector(std::move(y));
}
Array union_split(const Array& a, int64_t base) {
  if (!a.defined()) return a;
  std::vector<int64_t> v(a.dim(0));
  for (int64_t i = 0; i < a.dim(0); ++i) v[i] = base + a.int_at(i);
  return Array::from_vector(std::move(v));
}

// Link pairs of the link relation (type-local ids) in union ids.
Array union_pairs(const Array& a, int64_t src_base, int64_t dst_base) {
  if (!a.defined()) return a;
  std::vector<int64_t> v(static_cast<size_t>(a.numel()));
  const int64_t* p = a.data<int64_t>();
  for (int64_t i = 0; i < a.dim(0); ++i) {
    v[2 * i] = src_base + p[2 * i];
    v[2 * i + 1] = dst_base + p[2 * i + 1];
  }
  return Array::from_vector(std::move(v), {a.dim(0), 2});
}

void union_links(const HeteroDataset& ds, const std::vector<int64_t>& toff, Dataset& out) {
  const HeteroSchema& s = ds.schema;
  if (s.link < 0) return;
  const RelationInfo& rel = s.relations[s.link];
  const int64_t sb = toff[rel.src_type], db = toff[rel.dst_type];
  out.link_train = union_pairs(ds.link_train, sb, db);
  out.link_valid = union_pairs(ds.link_valid, sb, db);
  out.link_test = union_pairs(ds.link_test, sb, db);
  out.link_valid_neg = union_pairs(ds.link_valid_neg, sb, db);
  out.link_test_neg = union_pairs(ds.link_test_neg, sb, db);
  out.meta.link_negatives_per_positive = ds.link_negatives_per_positive;
}

}  // namespace

Dataset hetero_union(const HeteroDataset& ds) {
  const HeteroSchema& s = ds.schema;
  auto u = std::make_shared<HeteroUnion>();
  u->schema = s;
  u->type_offsets = s.type_offsets();
  u->features = ds.features;
  const std::vector<int64_t>& toff = u->type_offsets;
  const int64_t n = toff.back();
  std::vector<int64_t> indptr, rel_ptr;
  union_pointers(ds, toff, indptr, rel_ptr);
  const int64_t m = indptr.back();
  Dataset out;
  out.graph.num_nodes = n;
  if (n < (int64_t{1} << 31)) {
    std::vector<int32_t> idx(m);
    fill_union(ds, toff, rel_ptr, idx.data());
    out.graph.indices = Array::from_vector(std::move(idx));
  } else {
    std::vector<int64_t> idx(m);
    fill_union(ds, toff, rel_ptr, idx.data());
    out.graph.indices = Array::from_vector(std::move(idx));
  }
  out.graph.indptr = Array::from_vector(std::move(indptr));
  u->relation_indptr = Array::from_vector(std::move(rel_ptr));
  if (ds.labels.defined()) out.labels = union_labels(ds, toff);
  const int64_t base = toff[s.target];
  out.train_idx = union_split(ds.train_idx, base);
  out.valid_idx = union_split(ds.valid_idx, base);
  out.test_idx = union_split(ds.test_idx, base);
  union_links(ds, toff, out);
  out.meta.name = ds.name;
  out.meta.directed = true;
  out.meta.num_classes = s.num_classes;
  out.meta.extra = ds.extra;
  out.dir = ds.dir;
  out.hetero = std::move(u);
  out.sync_meta();
  return out;
}

}  // namespace dsp
