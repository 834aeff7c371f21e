// dsp convert --from ogb-link: OGB's raw link-prediction layout (see import.hpp).
#include <algorithm>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "core/logging.hpp"
#include "graph/import.hpp"
#include "graph/import_detail.hpp"
#include "graph/link.hpp"
#include "graph/npy.hpp"
#include "graph/validate.hpp"

namespace dsp {
namespace fs = std::filesystem;
namespace {

// <dir>/<stem>.npy, .csv.gz or .csv; "" when none exists.
std::string find_pairs_file(const fs::path& dir, const std::string& stem) {
  std::error_code ec;
  for (const char* ext : {".npy", ".csv.gz", ".csv"}) {
    const fs::path p = dir / (stem + ext);
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return "";
}

// The pairs of a split file as int64 [E, 2].
Array read_pairs(const std::string& path) {
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".npy") == 0) {
    Array a = load_npy(path, false);
    DSP_CHECK_FORMAT((a.dtype() == DType::kInt64 || a.dtype() == DType::kInt32) && a.ndim() == 2 &&
                         a.dim(1) == 2,
                     "{}: expected int64[E, 2] node pairs, got {}", path, a.describe());
    if (a.dtype() == DType::kInt64) return a;
    std::vector<int64_t> v(static_cast<size_t>(a.numel()));
    for (int64_t i = 0; i < a.numel(); ++i) v[i] = a.int_at(i);
    return Array::from_vector(std::move(v), {a.dim(0), 2});
  }
  std::vector<int64_t> v;
  for_each_text_chunk(path, [&](std::string_view text, int64_t line) {
    parse_csv_numbers<int64_t>(text, 2, v, path, line);
  });
  const auto rows = static_cast<int64_t>(v.size() / 2);
  return Array::from_vector(std::move(v), {rows, 2});
}

// The split folder's name: opts.split, else the only (or alphabetically first) one; "" when
// there is none and !opts.require_split.
std::string link_split_name(const fs::path& root, const OgbImportOptions& opts) {
  if (!opts.split.empty()) return opts.split;
  std::error_code ec;
  std::vector<std::string> names;
  if (fs::is_directory(root / "split", ec)) {
    for (const auto& e : fs::directory_iterator(root / "split", ec)) {
      if (e.is_directory()) names.push_back(e.path().filename().string());
    }
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) {
    DSP_CHECK_T(IoError, !opts.require_split,
                "{}: no split folder (OGB link datasets come with split/<name>/ holding "
                "train_edge, valid_edge, valid_edge_neg, test_edge, test_edge_neg as .npy or "
                ".csv(.gz)); pass --no-split to train on every edge without held-out edges",
                (root / "split").string());
    return "";
  }
  if (names.size() > 1) {
    DSP_WARN("import", "{}: several splits ({}), using '{}' (choose one with --split)",
             (root / "split").string(), names.size(), names.front());
  }
  return names.front();
}

// Rows of `pairs` that are entries of `g` (either direction when undirected); 0 when undefined.
int64_t pairs_in_graph(const Array& pairs, const Csr& g, bool undirected) {
  if (!pairs.defined()) return 0;
  const int64_t* e = pairs.data<int64_t>();
  int64_t k = 0;
  for (int64_t r = 0; r < pairs.dim(0); ++r) {
    const int64_t u = e[2 * r], v = e[2 * r + 1];
    k += csr_has_entry(g, u, v) || (undirected && csr_has_entry(g, v, u));
  }
  return k;
}

// OGB's per-positive negatives (ogbl-citation2's target_node_neg): `path` holds int64/int32
// [E, K] destinations, row i for positive i of `pos`; the pairs (source of positive i, each of its
// K destinations), [E K, 2] in that order, and K. FormatError naming the file.
std::pair<Array, int64_t> per_positive_pairs(const std::string& path, const Array& pos,
                                             const std::string& pos_file) {
  const Array t = load_npy(path, false);
  DSP_CHECK_FORMAT((t.dtype() == DType::kInt64 || t.dtype() == DType::kInt32) && t.ndim() == 2 &&
                       t.dim(1) > 0,
                   "{}: expected int64[E, K] negative destinations (row i: positive i's), got {}",
                   path, t.describe());
  DSP_CHECK_FORMAT(pos.defined() && pos.dim(0) == t.dim(0),
                   "{}: {} rows, but {} holds {} positives (one row of negatives each)", path,
                   t.dim(0), pos_file, pos.defined() ? pos.dim(0) : 0);
  const int64_t e = t.dim(0), k = t.dim(1);
  std::vector<int64_t> v(static_cast<size_t>(2 * e * k));
  const int64_t* p = pos.data<int64_t>();
  for (int64_t i = 0; i < e * k; ++i) {
    v[2 * i] = p[2 * (i / k)];
    v[2 * i + 1] = t.int_at(i);
  }
  return {Array::from_vector(std::move(v), {e * k, 2}), k};
}

// ogbl-citation2's layout: <split>_target_neg beside <split>_edge makes the split's negatives per
// positive; K must agree between the splits and a split takes one kind of negatives.
void read_per_positive_negatives(const fs::path& sdir, bool undirected, Dataset& ds) {
  const struct {
    const char* stem;
    const Array* pos;
    Array* neg;
  } splits[] = {{"valid", &ds.link_valid, &ds.link_valid_neg},
                {"test", &ds.link_test, &ds.link_test_neg}};
  std::error_code ec;
  int kinds = 0;  // bit 0: a split with shared negatives, bit 1: one with negatives per positive
  for (const auto& s : splits) {
    const fs::path path = sdir / (std::string(s.stem) + "_target_neg.npy");
    if (!fs::is_regular_file(path, ec)) {
      kinds |= s.neg->defined() ? 1 : 0;
      continue;
    }
    DSP_CHECK_FORMAT(!s.neg->defined(),
                     "{}: the split has both {}_edge_neg (negatives shared by its positives) and "
                     "{}_target_neg (negatives per positive); keep one",
                     path.string(), s.stem, s.stem);
    kinds |= 2;
    const std::string pos_file = find_pairs_file(sdir, std::string(s.stem) + "_edge");
    int64_t k = 0;
    std::tie(*s.neg, k) = per_positive_pairs(path.string(), *s.pos, pos_file);
    DSP_CHECK_FORMAT(ds.meta.link_negatives_per_positive == 0 ||
                         ds.meta.link_negatives_per_positive == k,
                     "{}: {} negatives per positive, but the other split has {}", path.string(), k,
                     ds.meta.link_negatives_per_positive);
    ds.meta.link_negatives_per_positive = k;
    check_link_pairs(*s.neg, ds.graph.num_nodes, &ds.graph, LinkRule::kAny, undirected,
                     path.string());
  }
  DSP_CHECK_FORMAT(kinds != 3,
                   "{}: one split's negatives are per positive (<split>_target_neg.npy) and the "
                   "other's shared (<split>_edge_neg): give both splits the same kind",
                   sdir.string());
}

// The split's files into ds.link_*, each checked against the graph and named by its file.
void read_link_split(const fs::path& sdir, bool undirected, Dataset& ds) {
  std::error_code ec;
  DSP_CHECK_T(IoError, fs::is_directory(sdir, ec), "{}: no such split directory", sdir.string());
  const int64_t n = ds.graph.num_nodes;
  const struct {
    const char* stem;
    Array* a;
    LinkRule rule;
  } files[] = {{"train_edge", &ds.link_train, LinkRule::kInGraph},
               {"valid_edge", &ds.link_valid, LinkRule::kAny},
               {"valid_edge_neg", &ds.link_valid_neg, LinkRule::kAny},
               {"test_edge", &ds.link_test, LinkRule::kAny},
               {"test_edge_neg", &ds.link_test_neg, LinkRule::kAny}};
  for (const auto& f : files) {
    const std::string path = find_pairs_file(sdir, f.stem);
    if (path.empty()) continue;
    *f.a = read_pairs(path);
    check_link_pairs(*f.a, n, &ds.graph, f.rule, undirected, path);
  }
  // OGB's semantics: a held-out pair may repeat a training edge (ogbl-collab's later
  // collaborations); kept, counted, and the dataset marked so that its check accepts them.
  nlohmann::json repeats = nlohmann::json::object();
  for (const auto& [name, a] : {std::pair{"valid", &ds.link_valid}, std::pair{"test", &ds.link_test}}) {
    const int64_t k = pairs_in_graph(*a, ds.graph, undirected);
    if (k == 0) continue;
    repeats[name] = k;
    DSP_INFO("import", "{}: {} of its {} held-out {} edges are also training edges (kept, as OGB's "
             "evaluation keeps them)", sdir.string(), k, a->dim(0), name);
  }
  if (!repeats.empty()) {
    ds.meta.link_held_out_in_graph = true;
    ds.meta.extra["held_out_in_graph"] = repeats;
  }
  read_per_positive_negatives(sdir, undirected, ds);
  for (const std::string split : {"valid", "test"}) {
    const std::string stem = split + "_edge", neg = stem + "_neg";
    DSP_CHECK_T(IoError,
                find_pairs_file(sdir, stem).empty() || !find_pairs_file(sdir, neg).empty() ||
                    fs::is_regular_file(sdir / (split + "_target_neg.npy"), ec),
                "{}: missing file ({} holds positive edges; Hits@K and MRR rank them against "
                "fixed negatives, shared by the split's positives, or per positive in "
                "<split>_target_neg.npy as OGB's ogbl-citation2)",
                (sdir / (neg + ".npy")).string(), stem);
  }
  if (!ds.link_train.defined()) ds.link_train = graph_edge_pairs(ds.graph, undirected);
}

}  // namespace

Dataset import_ogb_link(const std::string& dir, const OgbImportOptions& opts, ImportStats* stats) {
  const detail::OgbRaw in = detail::open_ogb_raw(dir);
  const std::string split = link_split_name(in.root, opts);
  OgbImportOptions node = opts;
  node.require_split = false;  // a node split under raw/split, if any, is not looked for
  node.split.clear();
  Dataset ds = import_ogb_raw(dir, node, stats);
  ds.train_idx = ds.valid_idx = ds.test_idx = Array();
  if (split.empty()) {
    ds.link_train = graph_edge_pairs(ds.graph, opts.undirected);
  } else {
    read_link_split(in.root / "split" / split, opts.undirected, ds);
  }
  ds.meta.extra["importer"] = "ogb-link";
  ds.meta.extra["split"] = split;
  ds.sync_meta();
  return ds;
}

}  // namespace dsp
