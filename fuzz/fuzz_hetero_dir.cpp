// The heterogeneous dataset reader (load_hetero_dataset: graph/hetero.cpp) over whole
// directories: dataset.json's "hetero" schema (node types, relations, target type), the per-type
// nodes/<type>/features.npy, the per-relation relations/<key>/{indptr,indices}.npy, labels and
// splits. The input is a packed directory (fuzz/fuzz_dir.hpp); the seeds are small datasets written
// by dsp generate hetero. Whatever the files hold, the reader either accepts them or throws a
// dsp::Error (naming the file and the fault), and what it accepts builds a union graph
// (hetero_union) that a slow reference finds well formed: no crash, out-of-bounds read, leak or
// other exception on the way.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "fuzz_dir.hpp"
#include "graph/hetero.hpp"

namespace {

template <class I>
bool union_rows_valid(const dsp::Dataset& u, const dsp::HeteroUnion& h) {
  const int64_t n = h.type_offsets.back(), r = h.schema.num_relations();
  const int64_t e = u.graph.indices.numel();
  if (u.graph.indptr.numel() != n + 1 || h.relation_indptr.numel() != n * r + 1) return false;
  const int64_t* p = u.graph.indptr.data<int64_t>();
  const int64_t* rel = h.relation_indptr.data<int64_t>();
  const I* idx = u.graph.indices.data<I>();
  if (p[0] != 0 || p[n] != e || rel[n * r] != e) return false;
  for (int64_t v = 0; v < n; ++v) {
    if (p[v + 1] < p[v] || rel[v * r] != p[v]) return false;
    for (int64_t k = 0; k < r; ++k) {
      const int64_t b = rel[v * r + k], end = rel[v * r + k + 1];
      if (end < b || b < p[v] || end > p[v + 1]) return false;
      // Relation k's segment: ascending ids of its source type.
      const int s = h.schema.relations[k].src_type;
      for (int64_t j = b; j < end; ++j) {
        if (idx[j] < h.type_offsets[s] || idx[j] >= h.type_offsets[s + 1]) return false;
        if (j > b && idx[j] <= idx[j - 1]) return false;
      }
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static dsp_fuzz::FuzzDir dir;
  if (!dir.unpack(data, size)) return 0;
  dsp::HeteroDataset ds;
  try {
    ds = dsp::load_hetero_dataset(dir.path());
  } catch (const dsp::Error& e) {
    dsp_fuzz::note_refused(e);
    return 0;
  }
  // A dataset the reader accepted makes a well-formed union graph, without an error.
  const dsp::Dataset u = dsp::hetero_union(ds);
  const bool ok = u.graph.index_dtype() == dsp::DType::kInt32
                      ? union_rows_valid<int32_t>(u, *u.hetero)
                      : union_rows_valid<int64_t>(u, *u.hetero);
  if (!ok) __builtin_trap();
  return 0;
}
