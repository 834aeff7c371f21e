// Heterogeneous datasets: the directory format (write, load, every validation error), reverse
// relations, `dsp generate hetero` and the ogb-hetero importer.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "error_of.hpp"
#include "graph/commands.hpp"
#include "graph/generate_hetero.hpp"
#include "graph/hetero.hpp"
#include "graph/hetero_detail.hpp"
#include "graph/import.hpp"
#include "graph/io_test_util.hpp"
#include "graph/npy.hpp"

namespace dsp {
namespace {
namespace fs = std::filesystem;
using iotest::TempDir;
using iotest::write_gz;
using test::error_of;

bool same_bytes(const Array& a, const Array& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

bool same_dataset(const HeteroDataset& x, const HeteroDataset& y) {
  if (x.schema.to_json() != y.schema.to_json() || x.features.size() != y.features.size() ||
      x.relations.size() != y.relations.size()) {
    return false;
  }
  for (size_t t = 0; t < x.features.size(); ++t) {
    if (!same_bytes(x.features[t], y.features[t])) return false;
  }
  for (size_t r = 0; r < x.relations.size(); ++r) {
    if (x.relations[r].num_nodes != y.relations[r].num_nodes ||
        !same_bytes(x.relations[r].indptr, y.relations[r].indptr) ||
        !same_bytes(x.relations[r].indices, y.relations[r].indices)) {
      return false;
    }
  }
  return same_bytes(x.labels, y.labels) && same_bytes(x.train_idx, y.train_idx) &&
         same_bytes(x.valid_idx, y.valid_idx) && same_bytes(x.test_idx, y.test_idx);
}

template <class T>
std::vector<T> values(const Array& a) {
  const T* p = a.data<T>();
  return std::vector<T>(p, p + a.numel());
}

std::vector<int64_t> ids(const Array& a) {
  std::vector<int64_t> v(static_cast<size_t>(a.numel()));
  for (int64_t i = 0; i < a.numel(); ++i) v[i] = a.int_at(i);
  return v;
}

Csr relation(int64_t n_src, int64_t n_dst, std::vector<std::pair<int64_t, int64_t>> edges) {
  std::vector<int64_t> s, d;
  for (auto [u, v] : edges) s.push_back(u), d.push_back(v);
  return detail::build_relation_csr(n_src, n_dst, s.data(), d.data(),
                                    static_cast<int64_t>(s.size()), "test");
}

// paper (4 ids, 2 features, the target of 2 classes) and author (3 ids, no features);
// author___writes___paper and paper___cites___paper.
HeteroDataset tiny() {
  HeteroDataset ds;
  ds.name = "tiny";
  ds.schema.node_types = {{"paper", 4}, {"author", 3}};
  ds.schema.relations = {{"author", "writes", "paper"}, {"paper", "cites", "paper"}};
  ds.schema.target_type = "paper";
  ds.relations.push_back(relation(3, 4, {{0, 0}, {1, 0}, {2, 1}, {0, 3}}));
  ds.relations.push_back(relation(4, 4, {{1, 0}, {2, 0}, {3, 2}}));
  ds.features = {Array::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}), Array()};
  ds.labels = Array::from_vector(std::vector<int64_t>{0, 1, -1, 1});
  ds.train_idx = Array::from_vector(std::vector<int64_t>{0, 1});
  ds.valid_idx = Array::from_vector(std::vector<int64_t>{2});
  ds.test_idx = Array::from_vector(std::vector<int64_t>{3});
  ds.extra = {{"generator", "test"}};
  ds.sync_schema();
  return ds;
}

// ---------------------------------------------------------------- schema and directory

TEST(HeteroSchema, OffsetsAndLookups) {
  HeteroSchema s = tiny().schema;
  EXPECT_EQ(s.type_offsets(), (std::vector<int64_t>{0, 4, 7}));
  EXPECT_EQ(s.num_nodes(), 7);
  EXPECT_EQ(s.type_index("author"), 1);
  EXPECT_EQ(s.type_index("venue"), -1);
  EXPECT_EQ(s.relation_index("paper___cites___paper"), 1);
  EXPECT_EQ(s.relation_index("writes"), 0);
  EXPECT_EQ(s.relation_index("rev_writes"), -1);
  EXPECT_EQ(s.relations[0].src_type, 1);
  EXPECT_EQ(s.relations[0].dst_type, 0);
  EXPECT_EQ(s.target, 0);
  EXPECT_EQ(s.num_classes, 2);
  // A name shared by two keys is found by key only.
  s.relations.push_back({"author", "cites", "paper"});
  s.resolve("s");
  EXPECT_EQ(s.relation_index("cites"), -1);
  EXPECT_EQ(s.relation_index("author___cites___paper"), 2);
  const HeteroSchema back = HeteroSchema::from_json(s.to_json(), "j");
  EXPECT_EQ(back.to_json(), s.to_json());
  EXPECT_EQ(back.relations[2].src_type, 1);
}

TEST(HeteroDataset, WriteLoadRoundTrip) {
  TempDir tmp("het_rt");
  const std::string dir = tmp / "d";
  const HeteroDataset ds = tiny();
  write_hetero_dataset(ds, dir);
  EXPECT_TRUE(is_hetero_dataset(dir));
  for (bool mmap : {true, false}) {
    LoadOptions lo;
    lo.mmap = mmap;
    const HeteroDataset back = load_hetero_dataset(dir, lo);
    EXPECT_TRUE(same_dataset(ds, back));
    EXPECT_EQ(back.name, "tiny");
    EXPECT_EQ(back.extra, ds.extra);
    EXPECT_EQ(back.dir, dir);
  }
  const auto j = nlohmann::json::parse(read_file(dir + "/dataset.json"));
  EXPECT_EQ(j["num_train"], 2);
  EXPECT_EQ(j["hetero"]["relations"][0]["edges"], 4);
  EXPECT_TRUE(fs::exists(dir + "/nodes/paper/features.npy"));
  EXPECT_FALSE(fs::exists(dir + "/nodes/author"));
  EXPECT_EQ(error_of([&] { write_hetero_dataset(ds, dir); }),
            dir + ": already exists (pass --overwrite to replace it)");
  write_hetero_dataset(ds, dir, true);
  // The homogeneous reader refuses it with a pointer to the right one.
  EXPECT_EQ(error_of<FormatError>([&] { load_dataset(dir); }),
            dir +
                " is a heterogeneous dataset (dataset.json has \"hetero\"): its node types and "
                "relations load with load_hetero_dataset (graph/hetero.hpp), not as one "
                "homogeneous graph");
  EXPECT_FALSE(is_hetero_dataset(tmp / "nothing"));
}

// Writes tiny(), applies `brk` to the directory and returns load_hetero_dataset's message.
template <class Break>
std::string load_error_after(const TempDir& tmp, const std::string& name, Break brk) {
  const std::string dir = tmp / name;
  write_hetero_dataset(tiny(), dir);
  brk(dir);
  return error_of<FormatError>([&] { load_hetero_dataset(dir); });
}

// Applies `change` to tiny() in memory and returns write_hetero_dataset's message; nothing may
// be written.
template <class Change>
std::string write_error_after(const TempDir& tmp, Change change) {
  HeteroDataset ds = tiny();
  change(ds);
  const std::string dir = tmp / "w";
  std::string msg = error_of<FormatError>([&] { write_hetero_dataset(ds, dir); });
  EXPECT_FALSE(fs::exists(dir)) << msg;
  return msg;
}

TEST(HeteroDataset, SchemaErrors) {
  TempDir tmp("het_schema");
  const std::string d = tmp / "w";
  EXPECT_EQ(
      write_error_after(tmp, [](HeteroDataset& ds) { ds.schema.relations[0].src = "autor"; }),
      d + "/dataset.json: relation autor___writes___paper names an unknown node type 'autor'");
  EXPECT_EQ(write_error_after(tmp,
                              [](HeteroDataset& ds) {
                                ds.schema.relations.push_back({"author", "writes", "paper", 4});
                                ds.relations.push_back(ds.relations[0]);
                              }),
            d + "/dataset.json: duplicate relation key author___writes___paper");
  EXPECT_EQ(write_error_after(tmp, [](HeteroDataset& ds) { ds.schema.node_types[1].name = "a/b"; }),
            d + "/dataset.json: node type name 'a/b' must be non-empty, without '___' or '/'");
  // The same faults in dataset.json on disk.
  auto edit_json = [](const std::string& dir, auto edit) {
    auto j = nlohmann::json::parse(read_file(dir + "/dataset.json"));
    edit(j);
    write_file_atomic(dir + "/dataset.json", j.dump());
  };
  EXPECT_EQ(load_error_after(tmp, "unknown",
                             [&](const std::string& dir) {
                               edit_json(dir, [](auto& j) {
                                 j["hetero"]["relations"][1]["dst"] = "book";
                               });
                             }),
            tmp / "unknown" +
                "/dataset.json: relation paper___cites___book names an unknown node type 'book'");
  EXPECT_EQ(load_error_after(tmp, "dup",
                             [&](const std::string& dir) {
                               edit_json(dir, [](auto& j) {
                                 j["hetero"]["relations"][1] = j["hetero"]["relations"][0];
                               });
                             }),
            tmp / "dup" + "/dataset.json: duplicate relation key author___writes___paper");
}

TEST(HeteroDataset, ArrayErrors) {
  TempDir tmp("het_arrays");
  const std::string d = tmp / "w";
  EXPECT_EQ(write_error_after(
                tmp,
                [](HeteroDataset& ds) {
                  ds.relations[0].indices = Array::from_vector(std::vector<int32_t>{0, 1, 2, 5});
                }),
            d + "/relations/author___writes___paper/indices.npy: entry 3 is 5, outside author's "
                "3 ids (row 3, a paper id)");
  EXPECT_EQ(write_error_after(tmp,
                              [](HeteroDataset& ds) {
                                ds.labels = Array::from_vector(std::vector<int64_t>{0, 2, -1, 1});
                              }),
            d + "/labels.npy: label of node 1 is 2, not in [-1, 2)");
  EXPECT_EQ(write_error_after(tmp,
                              [](HeteroDataset& ds) {
                                ds.train_idx = Array::from_vector(std::vector<int64_t>{0, 4});
                              }),
            d + "/train_idx.npy: element 1 is 4, outside paper's 4 ids");
  EXPECT_EQ(write_error_after(tmp,
                              [](HeteroDataset& ds) {
                                ds.test_idx = Array::from_vector(std::vector<int64_t>{3, 3});
                              }),
            d + "/test_idx.npy: paper 3 appears more than once (element 1)");
  EXPECT_EQ(write_error_after(tmp,
                              [](HeteroDataset& ds) {
                                ds.features[1] = Array(DType::kFloat32, {3, 1});
                              }),
            d + "/nodes/author/features.npy: present but dataset.json gives author no features "
                "(feature_dim 0)");
}

TEST(HeteroDataset, FileErrors) {
  TempDir tmp("het_files");
  const std::string rel = "/relations/author___writes___paper";
  EXPECT_EQ(load_error_after(tmp, "indptr",
                             [&](const std::string& dir) {
                               save_npy(dir + rel + "/indptr.npy",
                                        Array::from_vector(std::vector<int64_t>{0, 2, 3, 4}));
                             }),
            tmp / "indptr" + rel +
                "/indptr.npy: expected int64[5] (one row per paper id: 4 ids + 1), got int64[4]");
  EXPECT_EQ(load_error_after(
                tmp, "width",
                [&](const std::string& dir) {
                  save_npy(dir + "/nodes/paper/features.npy", Array(DType::kFloat32, {4, 3}));
                }),
            tmp / "width" +
                "/nodes/paper/features.npy: wrong shape: expected [4, 2] (paper ids x "
                "feature_dim), got float32[4, 3]");
  EXPECT_EQ(load_error_after(
                tmp, "rows",
                [&](const std::string& dir) {
                  save_npy(dir + "/nodes/paper/features.npy", Array(DType::kFloat32, {5, 2}));
                }),
            tmp / "rows" +
                "/nodes/paper/features.npy: wrong shape: expected [4, 2] (paper ids x "
                "feature_dim), got float32[5, 2]");
  EXPECT_EQ(
      load_error_after(
          tmp, "labels",
          [&](const std::string& dir) {
            save_npy(dir + "/labels.npy", Array::from_vector(std::vector<int64_t>{0, 1, -2, 1}));
          }),
      tmp / "labels" + "/labels.npy: label of node 2 is -2, not in [-1, 2)");
  EXPECT_EQ(load_error_after(tmp, "split",
                             [&](const std::string& dir) {
                               save_npy(dir + "/valid_idx.npy",
                                        Array::from_vector(std::vector<int64_t>{9}));
                             }),
            tmp / "split" + "/valid_idx.npy: element 0 is 9, outside paper's 4 ids");
  EXPECT_EQ(load_error_after(tmp, "missing",
                             [&](const std::string& dir) {
                               fs::remove_all(dir + "/relations/paper___cites___paper");
                             }),
            tmp / "missing" +
                "/relations/paper___cites___paper: missing relation directory (dataset.json "
                "lists relation paper___cites___paper)");
  // Unsorted rows are found by the full validation only; shapes always.
  const std::string dir = tmp / "unsorted";
  write_hetero_dataset(tiny(), dir);
  save_npy(dir + rel + "/indices.npy", Array::from_vector(std::vector<int32_t>{1, 0, 2, 0}));
  EXPECT_EQ(error_of<FormatError>([&] { load_hetero_dataset(dir); }),
            dir + rel +
                "/indices.npy: row 0 is not sorted: neighbour 0 (indices[1]) follows 1; each row "
                "must list its neighbours in ascending order");
  LoadOptions lo;
  lo.validate = false;
  EXPECT_NO_THROW(load_hetero_dataset(dir, lo));
}

// ---------------------------------------------------------------- reverse relations

TEST(HeteroDataset, AddReverseRelations) {
  HeteroDataset ds = tiny();
  add_reverse_relations(ds);
  ASSERT_EQ(ds.schema.num_relations(), 4);
  EXPECT_EQ(ds.schema.relations[2].key(), "paper___rev_writes___author");
  EXPECT_EQ(ds.schema.relations[3].key(), "paper___rev_cites___paper");
  EXPECT_EQ(ds.schema.relations[2].src_type, 0);
  EXPECT_EQ(ds.schema.relations[2].edges, 4);
  // author 0 wrote papers 0 and 3, author 1 paper 0, author 2 paper 1.
  EXPECT_EQ(ds.relations[2].num_nodes, 3);
  EXPECT_EQ(values<int64_t>(ds.relations[2].indptr), (std::vector<int64_t>{0, 2, 3, 4}));
  EXPECT_EQ(ids(ds.relations[2].indices), (std::vector<int64_t>{0, 3, 0, 1}));
  // paper 1 cites 0, 2 cites 0, 3 cites 2: the reverse row of a citing paper lists what it cites.
  EXPECT_EQ(values<int64_t>(ds.relations[3].indptr), (std::vector<int64_t>{0, 0, 1, 2, 3}));
  EXPECT_EQ(ids(ds.relations[3].indices), (std::vector<int64_t>{0, 0, 2}));
  // Idempotent: every relation now has its reverse (rev_x's reverse is x).
  add_reverse_relations(ds);
  EXPECT_EQ(ds.schema.num_relations(), 4);
  TempDir tmp("het_rev");
  write_hetero_dataset(ds, tmp / "d");
  EXPECT_TRUE(same_dataset(ds, load_hetero_dataset(tmp / "d")));
}

// ---------------------------------------------------------------- generator

HeteroGenOptions small_gen() {
  HeteroGenOptions o;
  o.papers = 3000;
  o.authors = 1800;
  o.institutions = 60;
  o.fields = 200;
  o.seed = 11;
  return o;
}

TEST(GenerateHetero, Deterministic) {
  const HeteroGenOptions o = small_gen();
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const HeteroDataset one = generate_hetero(o);
  omp_set_num_threads(std::max(2, threads));
  const HeteroDataset two = generate_hetero(o);
  omp_set_num_threads(threads);
  EXPECT_TRUE(same_dataset(one, two));
  EXPECT_EQ(one.extra, two.extra);
  HeteroGenOptions other = o;
  other.seed = 12;
  const HeteroDataset three = generate_hetero(other);
  for (int r = 0; r < one.schema.num_relations(); ++r) {
    EXPECT_FALSE(same_bytes(one.relations[r].indices, three.relations[r].indices)) << r;
  }
  EXPECT_FALSE(same_bytes(one.features[3], three.features[3]));
  EXPECT_FALSE(same_bytes(one.labels, three.labels));
  // Same options, same files.
  TempDir tmp("het_gen_det");
  write_hetero(o, tmp / "a", false);
  write_hetero(o, tmp / "b", false);
  for (const auto& e : fs::recursive_directory_iterator(tmp / "a")) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), tmp / "a").string();
    EXPECT_EQ(iotest::slurp(e.path().string()), iotest::slurp(tmp / "b/" + rel)) << rel;
  }
}

TEST(GenerateHetero, ShapeOfOgbMag) {
  const HeteroGenOptions o = small_gen();
  const HeteroDataset ds = generate_hetero(o);
  const HeteroSchema& s = ds.schema;
  ASSERT_EQ(s.num_types(), 4);
  const std::vector<std::pair<std::string, int64_t>> types = {
      {"author", 1800}, {"field_of_study", 200}, {"institution", 60}, {"paper", 3000}};
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(s.node_types[t].name, types[t].first);
    EXPECT_EQ(s.node_types[t].count, types[t].second);
    EXPECT_EQ(s.node_types[t].feature_dim, t == 3 ? 64 : 0);
  }
  const std::vector<std::string> keys = {"author___affiliated_with___institution",
                                         "author___writes___paper",
                                         "paper___cites___paper",
                                         "paper___has_topic___field_of_study",
                                         "institution___rev_affiliated_with___author",
                                         "paper___rev_writes___author",
                                         "paper___rev_cites___paper",
                                         "field_of_study___rev_has_topic___paper"};
  ASSERT_EQ(s.num_relations(), 8);
  const int64_t drawn[] = {1800, 3 * 3000, 5 * 3000, 3 * 3000};
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(s.relations[r].key(), keys[r]);
    EXPECT_EQ(s.relations[r].edges, s.relations[r % 4].edges);  // a reverse keeps every edge
    if (r < 4) {
      EXPECT_LE(s.relations[r].edges, drawn[r]);
      EXPECT_GT(s.relations[r].edges, drawn[r] * 8 / 10);  // repeats are rare
    }
  }
  EXPECT_EQ(s.target_type, "paper");
  EXPECT_EQ(s.num_classes, 8);
  EXPECT_EQ(ds.train_idx.numel(), 300);
  EXPECT_EQ(ds.valid_idx.numel(), 150);
  EXPECT_EQ(ds.test_idx.numel(), 2550);
  EXPECT_DOUBLE_EQ(ds.extra["accuracy_bound"].get<double>(), 1 - 0.1 * (1 - 1.0 / 8));
  // Inside-community shares: intra + (1 - intra) / classes in expectation.
  for (const auto& [key, share] : ds.extra["measured_intra_fraction"].items()) {
    EXPECT_NEAR(share.get<double>(), 0.8 + 0.2 / 8, 0.03) << key;
  }
  // No self citation; every reverse is the transpose of its relation.
  const Csr& cites = ds.relations[2];
  for (int64_t v = 0; v < cites.num_nodes; ++v) {
    for (int64_t e = cites.rowptr()[v]; e < cites.rowptr()[v + 1]; ++e) {
      ASSERT_NE(cites.indices.int_at(e), v);
    }
  }
  for (int r = 0; r < 4; ++r) {
    std::set<std::pair<int64_t, int64_t>> fwd, rev;
    const Csr &g = ds.relations[r], &h = ds.relations[r + 4];
    for (int64_t v = 0; v < g.num_nodes; ++v) {
      for (int64_t e = g.rowptr()[v]; e < g.rowptr()[v + 1]; ++e)
        fwd.insert({g.indices.int_at(e), v});
    }
    for (int64_t v = 0; v < h.num_nodes; ++v) {
      for (int64_t e = h.rowptr()[v]; e < h.rowptr()[v + 1]; ++e)
        rev.insert({v, h.indices.int_at(e)});
    }
    EXPECT_EQ(fwd, rev) << keys[r];
  }
  HeteroGenOptions plain = o;
  plain.reverse = false;
  EXPECT_EQ(generate_hetero(plain).schema.num_relations(), 4);
}

// Nearest class mean (means from the training papers) over the test papers of `x` [papers, F].
double nearest_mean_accuracy(const HeteroDataset& ds, const std::vector<float>& x, int64_t f) {
  const int64_t c = ds.schema.num_classes;
  std::vector<double> mean(c * f, 0), n(c, 0);
  const int64_t* y = ds.labels.data<int64_t>();
  for (int64_t v : values<int64_t>(ds.train_idx)) {
    for (int64_t j = 0; j < f; ++j) mean[y[v] * f + j] += x[v * f + j];
    n[y[v]] += 1;
  }
  for (int64_t k = 0; k < c * f; ++k) mean[k] /= std::max(1.0, n[k / f]);
  int64_t right = 0;
  const std::vector<int64_t> test = values<int64_t>(ds.test_idx);
  for (int64_t v : test) {
    int64_t best = 0;
    double best_d = 1e300;
    for (int64_t k = 0; k < c; ++k) {
      double d = 0;
      for (int64_t j = 0; j < f; ++j) d += std::pow(x[v * f + j] - mean[k * f + j], 2);
      if (d < best_d) best_d = d, best = k;
    }
    right += best == y[v];
  }
  return static_cast<double>(right) / static_cast<double>(test.size());
}

// The graph carries the label: averaging a paper's features with its cited and citing papers'
// classifies far better than its own features, which stay near the recorded feature-only
// accuracy and well below the bound.
TEST(GenerateHetero, GraphBeatsFeatures) {
  const HeteroDataset ds = generate_hetero(small_gen());
  const int64_t f = 64, n = 3000;
  const std::vector<float> own = values<float>(ds.features[3]);
  std::vector<float> mixed = own;
  for (int r : {2, 6}) {  // paper___cites___paper and its reverse
    const Csr& g = ds.relations[r];
    for (int64_t v = 0; v < n; ++v) {
      for (int64_t e = g.rowptr()[v]; e < g.rowptr()[v + 1]; ++e) {
        for (int64_t j = 0; j < f; ++j) mixed[v * f + j] += own[g.indices.int_at(e) * f + j];
      }
    }
  }
  const double alone = nearest_mean_accuracy(ds, own, f);
  const double with_graph = nearest_mean_accuracy(ds, mixed, f);
  const double recorded = ds.extra["feature_only_accuracy"].get<double>();
  const double bound = ds.extra["accuracy_bound"].get<double>();
  EXPECT_LT(alone, recorded + 0.05);  // estimated means do no better than the true ones
  EXPECT_LT(recorded, bound - 0.25);
  EXPECT_GT(with_graph, alone + 0.2);
  EXPECT_LE(with_graph, bound + 0.03);
}

TEST(GenerateHetero, RefusesBadOptions) {
  HeteroGenOptions o = small_gen();
  o.intra = 1.5;
  EXPECT_EQ(error_of<InvalidArgument>([&] { generate_hetero(o); }),
            "--intra 1.5 is outside [0, 1]");
  o = small_gen();
  o.papers = 0;
  EXPECT_EQ(error_of<InvalidArgument>([&] { generate_hetero(o); }),
            "the number of papers must be in [1, 2^40), got 0");
  o = small_gen();
  o.train_frac = 0.7;
  o.valid_frac = 0.4;
  EXPECT_EQ(error_of<InvalidArgument>([&] { generate_hetero(o); }),
            "train + valid + test fractions (0.7 + 0.4 + 0) exceed 1");
  // The command: --splits with a fraction, and an existing output.
  HeteroCommand c;
  c.splits.preset = SplitPreset::kAll;
  c.splits.train_frac = 0.2;
  EXPECT_EQ(error_of<InvalidArgument>([&] { run_generate(c); }),
            "give --splits or --train-frac, not both");
}

// ---------------------------------------------------------------- ogb-hetero import

// A raw directory in OGB's heterogeneous layout: author 3, paper 4, institution 2 (header not in
// name order), three relations, paper features and labels, split "time".
void write_raw(const std::string& root) {
  const std::string raw = root + "/raw";
  write_gz(raw + "/num-node-dict.csv.gz", "author,paper,institution\n3,4,2\n");
  write_gz(raw + "/relations/author___writes___paper/edge.csv.gz", "0,0\n1,0\n2,1\n0,3\n");
  write_gz(raw + "/relations/author___writes___paper/num-edge-list.csv.gz", "4\n");
  write_gz(raw + "/relations/paper___cites___paper/edge.csv.gz", "1,0\n2,0\n3,2\n1,0\n");
  write_gz(raw + "/relations/author___affiliated_with___institution/edge.csv.gz", "0,1\n2,0\n");
  write_gz(raw + "/node-feat/paper/node-feat.csv.gz", "1,2\n3,4\n5,6\n7,8\n");
  write_gz(raw + "/node-label/paper/node-label.csv.gz", "0\n1\n1\n0\n");
  write_gz(root + "/split/time/paper/train.csv.gz", "0\n1\n");
  write_gz(root + "/split/time/paper/valid.csv.gz", "2\n");
  write_gz(root + "/split/time/paper/test.csv.gz", "3\n");
}

TEST(ImportOgbHetero, SyntheticRawDirectory) {
  TempDir tmp("het_ogb");
  const std::string root = tmp / "ogbn_tiny";
  write_raw(root);
  ImportStats st;
  const HeteroDataset ds = import_ogb_hetero(root, {}, &st);
  EXPECT_EQ(ds.name, "ogbn_tiny");
  EXPECT_EQ(st.input_edges, 10);
  const HeteroSchema& s = ds.schema;
  ASSERT_EQ(s.num_types(), 3);
  EXPECT_EQ(s.node_types[0].name, "author");
  EXPECT_EQ(s.node_types[1].name, "institution");
  EXPECT_EQ(s.node_types[2].name, "paper");
  EXPECT_EQ(s.node_types[2].feature_dim, 2);
  ASSERT_EQ(s.num_relations(), 3);
  EXPECT_EQ(s.relations[0].key(), "author___affiliated_with___institution");
  EXPECT_EQ(s.relations[1].key(), "author___writes___paper");
  EXPECT_EQ(s.relations[2].key(), "paper___cites___paper");
  EXPECT_EQ(values<int64_t>(ds.relations[1].indptr), (std::vector<int64_t>{0, 2, 3, 3, 4}));
  EXPECT_EQ(ids(ds.relations[1].indices), (std::vector<int64_t>{0, 1, 2, 0}));
  EXPECT_EQ(s.relations[2].edges, 3);  // the repeated 1 -> 0 once
  EXPECT_EQ(values<float>(ds.features[2]), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_FALSE(ds.features[0].defined());
  EXPECT_EQ(s.target_type, "paper");
  EXPECT_EQ(s.num_classes, 2);
  EXPECT_EQ(values<int64_t>(ds.labels), (std::vector<int64_t>{0, 1, 1, 0}));
  EXPECT_EQ(values<int64_t>(ds.train_idx), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(values<int64_t>(ds.test_idx), (std::vector<int64_t>{3}));
  EXPECT_EQ(ds.extra["split"], "time");
  EXPECT_EQ(ds.extra["input_edges"]["paper___cites___paper"], 4);

  // --add-reverse, written and read back through the convert command.
  ConvertCommand cmd;
  cmd.from = ConvertFrom::kOgbHetero;
  cmd.input = root + "/raw";  // raw/ itself works too
  cmd.output = tmp / "out";
  cmd.add_reverse = true;
  const DatasetMeta m = run_convert(cmd);
  EXPECT_EQ(m.num_nodes, 9);
  EXPECT_EQ(m.num_edges, 2 * (2 + 4 + 3));
  EXPECT_EQ(m.num_train, 2);
  const HeteroDataset back = load_hetero_dataset(tmp / "out");
  EXPECT_EQ(back.schema.num_relations(), 6);
  EXPECT_EQ(back.schema.relations[4].key(), "paper___rev_writes___author");
  HeteroDataset expect = ds;
  add_reverse_relations(expect);
  EXPECT_TRUE(same_dataset(expect, back));
  // --link-split of one relation: its held-out edges leave it and their reverses its reverse.
  cmd.output = tmp / "links";
  cmd.link_split = "0.5,0.25,0.25";
  cmd.link_relation = "writes";
  run_convert(cmd);
  const HeteroDataset linked = load_hetero_dataset(tmp / "links");
  EXPECT_EQ(linked.schema.link_relation, "author___writes___paper");
  EXPECT_EQ(linked.link_train.dim(0), 2);
  EXPECT_EQ(linked.link_valid.dim(0) + linked.link_test.dim(0), 2);
  EXPECT_EQ(linked.schema.relations[1].edges, 2);
  EXPECT_EQ(linked.schema.relations[4].edges, 2);  // paper___rev_writes___author
  cmd.link_relation.clear();
  EXPECT_EQ(error_of<InvalidArgument>([&] { run_convert(cmd); }),
            "--from ogb-hetero: --link-split and --link-relation go together (which relation's "
            "edges to split)");
  cmd.link_split.clear();
  // A triplet list names the relations (and their order is still OGB's sorted one).
  write_gz(root + "/raw/triplet-type-list.csv.gz",
           "paper,cites,paper\nauthor,writes,paper\nauthor,affiliated_with,institution\n");
  EXPECT_TRUE(same_dataset(ds, import_ogb_hetero(root, {})));
}

TEST(ImportOgbHetero, Errors) {
  TempDir tmp("het_ogb_bad");
  auto fresh = [&](const std::string& name) {
    const std::string root = tmp / name;
    write_raw(root);
    return root;
  };
  auto error = [](const std::string& root, OgbHeteroImportOptions o = {}) {
    return error_of([&] { import_ogb_hetero(root, o); });
  };
  std::string r = fresh("range");
  std::string f = r + "/raw/relations/author___writes___paper/edge.csv.gz";
  write_gz(f, "0,0\n1,4\n");
  EXPECT_EQ(error(r), f + ":2: destination id 4 is outside paper's 4 ids");
  write_gz(f, "0,0\n3,1\n");
  EXPECT_EQ(error(r), f + ":2: source id 3 is outside author's 3 ids");
  write_gz(f, "0,0\n1,2,3\n");
  EXPECT_EQ(error(r), f + ":2: too many columns (expected 2)");
  write_gz(f, "0\n");
  EXPECT_EQ(error(r), f + ":1: expected 2 columns, got 1");
  write_gz(f, "0,0\n");
  EXPECT_EQ(error(r), f + ": has 1 edges but " + r +
                          "/raw/relations/author___writes___paper/num-edge-list.csv.gz says 4");

  r = fresh("type");
  write_gz(r + "/raw/relations/author___writes___book/edge.csv.gz", "0,0\n");
  EXPECT_EQ(error(r), r +
                          "/raw/relations/author___writes___book: relation author___writes___book "
                          "names node type 'book', which " +
                          r + "/raw/num-node-dict.csv.gz does not list");

  r = fresh("triplet");
  write_gz(r + "/raw/triplet-type-list.csv.gz",
           "author,writes,paper\npaper,cites,paper\n"
           "paper,has_topic,field\n");
  EXPECT_EQ(error(r), r + "/raw/relations/paper___has_topic___field: missing relation directory (" +
                          r + "/raw/triplet-type-list.csv.gz:3 lists it)");

  r = fresh("dict");
  write_gz(r + "/raw/num-node-dict.csv.gz", "author,paper,institution\n3,4\n");
  EXPECT_EQ(error(r), r + "/raw/num-node-dict.csv.gz:2: expected 3 columns, got 2");

  r = fresh("split");
  fs::remove_all(r + "/split");
  EXPECT_EQ(error(r), r + "/raw/split: no split folder (OGB datasets come with "
                          "split/<scheme>/paper/{train,valid,test}.csv.gz); pass --no-split to "
                          "import the graph without training, validation and test ids");
  OgbHeteroImportOptions no_split;
  no_split.require_split = false;
  EXPECT_FALSE(import_ogb_hetero(r, no_split).train_idx.defined());

  // The convert command refuses the options of the homogeneous formats.
  ConvertCommand cmd;
  cmd.from = ConvertFrom::kOgbHetero;
  cmd.input = fresh("cmd");
  cmd.output = tmp / "out";
  cmd.directed = true;
  EXPECT_EQ(error_of<InvalidArgument>([&] { run_convert(cmd); }),
            "--directed does not apply to --from ogb-hetero (relations are read as listed, in "
            "memory; --add-reverse adds their reverses)");
  cmd.directed = false;
  cmd.from = ConvertFrom::kOgb;
  cmd.add_reverse = true;
  EXPECT_EQ(error_of<InvalidArgument>([&] { run_convert(cmd); }),
            "--add-reverse applies to --from ogb-hetero only");
}

}  // namespace
}  // namespace dsp
