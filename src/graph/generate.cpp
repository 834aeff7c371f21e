#include "graph/generate.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <numeric>
#include <tuple>
#include <vector>

#include "core/disk.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/half.hpp"
#include "core/logging.hpp"
#include "core/memory.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"
#include "core/timer.hpp"
#include "graph/external_sort.hpp"
#include "graph/generate_common.hpp"
#include "graph/generate_detail.hpp"
#include "graph/npy.hpp"

namespace dsp {
namespace {

using namespace gen;  // NOLINT(build/namespaces): the generators' shared steps

// ---------------------------------------------------------------- R-MAT

struct RmatDraw {
  int64_t n;
  int scale = 0;
  uint64_t ta, tab, tabc, key;
  const int64_t* perm;  // null: raw ids

  RmatDraw(const RmatOptions& o, const std::vector<int64_t>& p)
      : n(o.num_nodes),
        key(key_for(o.seed, kGenRmat, kEdges)),
        perm(p.empty() ? nullptr : p.data()) {
    while ((int64_t{1} << scale) < n) ++scale;
    // Quadrant thresholds on a 32-bit draw: r < ta -> a, < tab -> b, < tabc -> c, else d.
    const uint64_t two32 = uint64_t{1} << 32;
    ta = static_cast<uint64_t>(o.a * two32);
    tab = static_cast<uint64_t>((o.a + o.b) * two32);
    tabc = static_cast<uint64_t>((o.a + o.b + o.c) * two32);
  }
  // Redraws until both ends are < n; with a >= b, c the acceptance is at least about a, so the
  // fallback (folding ids with a modulo) is essentially never taken.
  void operator()(int64_t i, int64_t& u, int64_t& v) const {
    constexpr int kMaxAttempts = 64;
    RngStream s(key, static_cast<uint64_t>(i));
    u = 0;
    v = 0;
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
    if (perm) {
      u = perm[u];
      v = perm[v];
    }
  }
};

std::vector<int64_t> rmat_permutation(const RmatOptions& o) {
  return o.permute ? random_permutation(o.num_nodes, key_for(o.seed, kGenRmat, kPermutation))
                   : std::vector<int64_t>{};
}

struct RmatFeatureRow {
  uint64_t key;
  int64_t dim;
  void operator()(int64_t v, float* row) const {
    RngStream s(key, static_cast<uint64_t>(v));
    for (int64_t j = 0; j < dim; ++j) row[j] = 2.0f * s.uniform01f() - 1.0f;
  }
};

struct RmatLabel {
  uint64_t key;
  int64_t classes;
  int64_t operator()(int64_t v) const {
    return static_cast<int64_t>(RngStream(key, v).uniform_int(classes));
  }
};

void check_rmat(const RmatOptions& o) {
  check_common(o.num_nodes, o.num_edges, o.feature_dim, o.feature_dtype, o.num_classes);
  check_splits(o.train_frac, o.valid_frac, o.test_frac);
  DSP_CHECK_ARG(o.a >= 0 && o.b >= 0 && o.c >= 0 && o.a + o.b + o.c < 1,
                "R-MAT needs a, b, c >= 0 with a + b + c < 1, got {}, {}, {}", o.a, o.b, o.c);
  DSP_CHECK_ARG(o.num_nodes <= (int64_t{1} << 62), "too many nodes: {}", o.num_nodes);
}

nlohmann::json rmat_extra(const RmatOptions& o) {
  return {{"generator", "rmat"},
          {"seed", o.seed},
          {"a", o.a},
          {"b", o.b},
          {"c", o.c},
          {"undirected", o.undirected},
          {"permuted", o.permute},
          {"requested_edges", o.num_edges},
          {"train_frac", o.train_frac},
          {"valid_frac", o.valid_frac}};
}

GenerateResult rmat_out_of_core(const RmatOptions& o, const std::string& dir,
                                const GenerateWriteOptions& w) {
  const int64_t n = o.num_nodes, max_entries = o.undirected ? 2 * o.num_edges : o.num_edges;
  check_generate_disk(
      dir, peak_disk_bytes(n, max_entries, o.feature_dim, o.feature_dtype, o.num_classes > 0));
  Stopwatch sw;
  StagedDir staged(dir, w.overwrite);
  std::vector<int64_t> perm = rmat_permutation(o);
  ExternalSorter<uint64_t> sorter(staged.file("sort-runs"), sort_capacity(w, max_entries));
  draw_sorted(sorter, o.num_edges, o.undirected, RmatDraw(o, perm));
  perm = {};
  auto [entries, max_degree] =
      merge_to_csr(sorter, staged, n, max_entries, [](const uint64_t*, size_t) {});
  DSP_DEBUG("generate", "edges out of core: {} runs, {} spilled, {:.2f} s", sorter.runs(),
            format_bytes(sorter.spilled_bytes()), sw.seconds());
  write_node_files(staged, n, o.feature_dim, o.feature_dtype,
                   RmatFeatureRow{key_for(o.seed, kGenRmat, kFeatures), o.feature_dim},
                   o.num_classes, RmatLabel{key_for(o.seed, kGenRmat, kLabels), o.num_classes},
                   node_chunk_bytes(w.memory_budget));
  write_splits(staged, n, split_sizes(o), key_for(o.seed, kGenRmat, kSplits));
  DatasetMeta meta = generated_meta(o.name, !o.undirected, n, entries, index_dtype_for(n),
                                    o.feature_dim, o.feature_dtype, o.num_classes, split_sizes(o));
  meta.extra = with_test_frac(rmat_extra(o), o.test_frac);
  return finish_out_of_core(staged, std::move(meta), max_degree, sorter, sw);
}

}  // namespace

const Names<SplitPreset>& names_of(SplitPreset) {
  using P = SplitPreset;
  static const Names<P> n("split preset",
                          {{P::kNone, ""}, {P::kAll, "all"}, {P::kPapers100m, "papers100m"}});
  return n;
}

SplitFractions split_preset(SplitPreset preset) {
  if (preset != SplitPreset::kPapers100m) return {};
  // ogbn-papers100M (OGB's time split): its split sizes over its node count.
  constexpr double kNodes = 111059956;
  return {1207179 / kNodes, 125265 / kNodes, 214338 / kNodes};
}

MemoryEstimate estimate_rmat_memory(const RmatOptions& o) {
  const uint64_t n = o.num_nodes, id = id_bytes(o.num_nodes), m = o.num_edges;
  const uint64_t entries = o.undirected ? 2 * m : m;
  const uint64_t node_data =
      n * o.feature_dim * dtype_size(o.feature_dtype) + (o.num_classes > 0 ? 8 * n : 0) + 16 * n;
  MemoryEstimate e;
  // Drawing (permutation + endpoints), building the CSR (endpoints + CSR + a row cursor), then
  // the node data beside the CSR.
  e.in_memory = std::max({8 * n + 2 * m * id, 2 * m * id + 16 * n + entries * id,
                          8 * n + entries * id + node_data}) +
                kSlackBytes;
  // The permutation while drawing, the splits at the end; a sort buffer and a chunk of rows.
  e.out_of_core = 16 * n + min_sort_bytes(entries) + 2 * kMinNodeChunkBytes + kSlackBytes;
  return e;
}

Dataset generate_rmat(const RmatOptions& o) {
  check_rmat(o);
  const int64_t n = o.num_nodes;
  Dataset ds;
  {
    std::vector<int64_t> perm = rmat_permutation(o);
    RmatDraw draw(o, perm);
    ds.graph = n < (int64_t{1} << 31) ? draw_csr<int32_t>(n, o.num_edges, o.undirected, draw)
                                      : draw_csr<int64_t>(n, o.num_edges, o.undirected, draw);
  }
  Stopwatch node_sw;
  if (o.feature_dim > 0) {
    ds.features =
        make_features(n, o.feature_dim, o.feature_dtype,
                      RmatFeatureRow{key_for(o.seed, kGenRmat, kFeatures), o.feature_dim});
  }
  if (o.num_classes > 0) {
    ds.labels = make_labels(n, RmatLabel{key_for(o.seed, kGenRmat, kLabels), o.num_classes});
  }
  make_splits(ds, n, split_sizes(o), key_for(o.seed, kGenRmat, kSplits));
  DSP_DEBUG("generate", "features, labels and splits in {:.2f} s", node_sw.seconds());
  ds.meta = generated_meta(o.name, !o.undirected, n, ds.graph.num_edges(), ds.graph.index_dtype(),
                           o.feature_dim, o.feature_dtype, o.num_classes, split_sizes(o));
  ds.meta.extra = with_test_frac(rmat_extra(o), o.test_frac);
  return ds;
}

GenerateResult write_rmat(const RmatOptions& o, const std::string& dir,
                          const GenerateWriteOptions& w) {
  check_rmat(o);
  if (choose_out_of_core(estimate_rmat_memory(o), o.num_nodes, w)) {
    return rmat_out_of_core(o, dir, w);
  }
  Stopwatch sw;
  Dataset ds = generate_rmat(o);
  return write_in_memory(std::move(ds), dir, w.overwrite, sw.seconds());
}

}  // namespace dsp
