// Link-prediction data: the dataset files (link_*.npy), their checks and their round trip.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "error_of.hpp"
#include "graph/commands.hpp"
#include "graph/dataset.hpp"
#include "graph/generate.hpp"
#include "graph/io_test_util.hpp"
#include "graph/link.hpp"
#include "graph/npy.hpp"
#include "graph/validate.hpp"

namespace dsp {
namespace {
using iotest::TempDir;
using test::error_of;

Array pairs(std::vector<int64_t> v) {
  const auto rows = static_cast<int64_t>(v.size() / 2);
  return Array::from_vector(std::move(v), {rows, 2});
}

// An undirected 6-node graph (stored both ways) with training edges among its entries, held-out
// edges that are not, and negatives.
Dataset link_dataset() {
  std::vector<int64_t> src = {0, 1, 2, 3}, dst = {1, 2, 3, 4};
  CsrBuildOptions o;
  o.symmetrize = true;
  Dataset ds;
  ds.graph = build_in_csr<int64_t>(6, src.data(), dst.data(), 4, nullptr, o);
  ds.meta.directed = false;
  ds.meta.name = "links";
  ds.link_train = pairs({0, 1, 1, 2, 2, 3, 3, 4});
  ds.link_valid = pairs({4, 5});
  ds.link_test = pairs({0, 5, 1, 4});
  ds.link_valid_neg = pairs({0, 3, 2, 5, 1, 5});
  ds.link_test_neg = pairs({0, 4});
  ds.sync_meta();
  return ds;
}

bool same_bytes(const Array& a, const Array& b) {
  return a.defined() && b.defined() && a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(LinkData, RoundTripKeepsEveryPairFile) {
  TempDir tmp("link_rt");
  Dataset ds = link_dataset();
  EXPECT_EQ(ds.meta.num_link_train, 4);
  EXPECT_EQ(ds.meta.num_link_valid, 1);
  EXPECT_EQ(ds.meta.num_link_test, 2);
  EXPECT_EQ(ds.meta.num_link_valid_neg, 3);
  EXPECT_EQ(ds.meta.num_link_test_neg, 1);
  const std::string dir = tmp / "ds";
  write_dataset(ds, dir);
  const nlohmann::json j = nlohmann::json::parse(read_file(dir + "/dataset.json"));
  EXPECT_EQ(j["num_link_train"], 4);
  EXPECT_EQ(j["num_link_test_neg"], 1);
  EXPECT_EQ(j["format_version"], 1);
  Dataset back = load_dataset(dir);
  EXPECT_EQ(back.meta.to_json(), ds.meta.to_json());
  EXPECT_TRUE(same_bytes(back.link_train, ds.link_train));
  EXPECT_TRUE(same_bytes(back.link_valid, ds.link_valid));
  EXPECT_TRUE(same_bytes(back.link_test, ds.link_test));
  EXPECT_TRUE(same_bytes(back.link_valid_neg, ds.link_valid_neg));
  EXPECT_TRUE(same_bytes(back.link_test_neg, ds.link_test_neg));
}

TEST(LinkData, DatasetWithoutLinksWritesNoLinkKeys) {
  Dataset ds = link_dataset();
  for (Array* a : {&ds.link_train, &ds.link_valid, &ds.link_test, &ds.link_valid_neg,
                   &ds.link_test_neg}) {
    *a = Array();
  }
  ds.sync_meta();
  const nlohmann::json j = ds.meta.to_json();
  for (const char* k : {"num_link_train", "num_link_valid", "num_link_test", "num_link_valid_neg",
                        "num_link_test_neg"}) {
    EXPECT_FALSE(j.contains(k)) << k;
  }
  EXPECT_NO_THROW(validate_dataset(ds, "D"));
}

TEST(LinkData, EachFaultIsNamedWithFileRowAndPair) {
  auto fault = [](const std::function<void(Dataset&)>& edit) {
    Dataset ds = link_dataset();
    edit(ds);
    ds.sync_meta();
    return error_of<FormatError>([&] { validate_dataset(ds, "D"); });
  };
  EXPECT_EQ(fault([](Dataset& d) { d.link_test_neg = pairs({0, 4, 6, 1}); }),
            "D/link_test_neg.npy: row 1 column 0 is 6, not a node id in [0, 6)");
  EXPECT_EQ(fault([](Dataset& d) { d.link_train = pairs({0, 1, 0, -1}); }),
            "D/link_train.npy: row 1 column 1 is -1, not a node id in [0, 6)");
  EXPECT_EQ(fault([](Dataset& d) { d.link_train = pairs({0, 1, 0, 2}); }),
            "D/link_train.npy: row 1: training edge (0, 2) is not an edge of the stored graph "
            "(row 2 of indices.npy does not list 0)");
  // A held-out edge stored in the training graph, named as given (here the reverse of 2 -> 3).
  EXPECT_EQ(fault([](Dataset& d) { d.link_valid = pairs({4, 5, 3, 2}); }),
            "D/link_valid.npy: row 1: held-out edge (3, 2) is an edge of the stored graph (in "
            "either direction); a split overlapping the training graph is refused");
  EXPECT_EQ(fault([](Dataset& d) { d.link_test_neg = Array(); }),
            "D/link_test_neg.npy: missing: link_test.npy holds positive edges but no negatives "
            "to rank them against");
  EXPECT_EQ(fault([](Dataset& d) { d.link_valid = Array(); }),
            "D/link_valid_neg.npy: negatives without positives: link_valid.npy is missing");
  EXPECT_EQ(fault([](Dataset& d) { d.link_valid = Array::from_vector(std::vector<int64_t>{4, 5}); }),
            "D/link_valid.npy: wrong dtype/shape: expected int64[2, 2], got int64[2]");
}

// dataset.json's link_held_out_in_graph (OGB's collab semantics) lets held-out positives be
// edges of the stored graph, and round-trips; without it they are refused (above).
TEST(LinkData, HeldOutPairsInTheGraphOnlyWhenTheDatasetSaysSo) {
  TempDir tmp("link_repeats");
  Dataset ds = link_dataset();
  ds.link_valid = pairs({4, 5, 3, 2});
  ds.sync_meta();
  EXPECT_EQ(error_of<FormatError>([&] { validate_dataset(ds, "D"); }),
            "D/link_valid.npy: row 1: held-out edge (3, 2) is an edge of the stored graph (in "
            "either direction); a split overlapping the training graph is refused");
  ds.meta.link_held_out_in_graph = true;
  validate_dataset(ds, "D");
  write_dataset(ds, tmp / "d");
  EXPECT_TRUE(load_dataset(tmp / "d").meta.link_held_out_in_graph);
  EXPECT_FALSE(link_dataset().meta.to_json().contains("link_held_out_in_graph"));
}

TEST(LinkData, DirectedGraphChecksOnlyTheGivenDirection) {
  std::vector<int64_t> src = {0, 1}, dst = {1, 2};
  Dataset ds;
  ds.graph = build_in_csr<int64_t>(3, src.data(), dst.data(), 2, nullptr);
  ds.link_train = pairs({0, 1, 1, 2});
  ds.link_test = pairs({1, 0});  // the reverse of a stored edge: held out in a directed graph
  ds.link_test_neg = pairs({2, 0});
  ds.sync_meta();
  EXPECT_NO_THROW(validate_dataset(ds, "D"));
  ds.link_train = pairs({1, 0});
  ds.sync_meta();
  EXPECT_EQ(error_of<FormatError>([&] { validate_dataset(ds, "D"); }),
            "D/link_train.npy: row 0: training edge (1, 0) is not an edge of the stored graph "
            "(row 0 of indices.npy does not list 1)");
}

TEST(LinkData, LoadChecksCountsAgainstTheFiles) {
  TempDir tmp("link_load");
  const std::string dir = tmp / "ds";
  write_dataset(link_dataset(), dir);
  save_npy(dir + "/link_test.npy", pairs({0, 5}));
  EXPECT_EQ(error_of<FormatError>([&] { load_dataset(dir); }),
            dir + "/link_test.npy: wrong shape: expected int64[2, 2], got int64[1, 2]");
  save_npy(dir + "/link_test.npy", pairs({0, 5, 2, 1}));
  EXPECT_EQ(error_of<FormatError>([&] { load_dataset(dir); }),
            dir + "/link_test.npy: row 1: held-out edge (2, 1) is an edge of the stored graph (in "
                  "either direction); a split overlapping the training graph is refused");
}

// A split dataset.json counts but whose file is gone is named alone, with the count: at load (an
// IoError: the file is missing) and by the validator of a dataset built in memory.
TEST(LinkData, AMissingCountedFileIsNamedWithItsCount) {
  TempDir tmp("link_missing");
  const std::string dir = tmp / "ds";
  write_dataset(link_dataset(), dir);
  std::filesystem::remove(dir + "/link_test.npy");
  EXPECT_EQ(error_of<IoError>([&] { load_dataset(dir); }),
            dir + "/link_test.npy: missing, but dataset.json counts 2 pairs");
  write_dataset(link_dataset(), dir, /*overwrite=*/true);
  std::filesystem::remove(dir + "/link_valid.npy");
  LoadOptions lo;
  lo.validate = false;
  EXPECT_EQ(error_of<IoError>([&] { load_dataset(dir, lo); }),
            dir + "/link_valid.npy: missing, but dataset.json counts 1 pair");
  Dataset ds = link_dataset();
  ds.link_test = Array();  // the meta still counts its 2 pairs
  EXPECT_EQ(error_of<FormatError>([&] { validate_dataset(ds, "D"); }),
            "D/link_test.npy: missing, but dataset.json counts 2 pairs");
}

// A link file that dataset.json does not count (a split written by hand beside a dataset) is
// refused naming that file, the key dataset.json lacks and its pairs, rather than ignored; an
// empty one is nothing to count.
TEST(LinkData, AnUncountedLinkFileIsNamedWithTheMissingKey) {
  TempDir tmp("link_uncounted");
  const std::string dir = tmp / "ds";
  Dataset ds = link_dataset();
  for (Array* a : {&ds.link_train, &ds.link_valid, &ds.link_test, &ds.link_valid_neg,
                   &ds.link_test_neg}) {
    *a = Array();
  }
  ds.sync_meta();
  write_dataset(ds, dir);
  save_npy(dir + "/link_train.npy", pairs({0, 1, 1, 2, 2, 3}));
  const std::string train_msg =
      dir + "/link_train.npy exists but dataset.json has no num_link_train: count its pairs "
            "there (\"num_link_train\": 3), or re-save the dataset with "
            "dsp.save_dataset(link_train=...) or dsp convert";
  EXPECT_EQ(error_of<FormatError>([&] { load_dataset(dir); }), train_msg);
  LoadOptions lo;
  lo.validate = false;  // a metadata check: it runs without the content checks too
  EXPECT_EQ(error_of<FormatError>([&] { load_dataset(dir, lo); }), train_msg);
  // Counted, the training pairs load; the test pairs beside them are named next.
  nlohmann::json j = nlohmann::json::parse(read_file(dir + "/dataset.json"));
  j["num_link_train"] = 3;
  write_file_atomic(dir + "/dataset.json", j.dump());
  save_npy(dir + "/link_test.npy", pairs({0, 5}));
  EXPECT_EQ(error_of<FormatError>([&] { load_dataset(dir); }),
            dir + "/link_test.npy exists but dataset.json has no num_link_test: count its pairs "
                  "there (\"num_link_test\": 1), or re-save the dataset with "
                  "dsp.save_dataset(link_test=...) or dsp convert");
  save_npy(dir + "/link_test.npy", Array(DType::kInt64, {0, 2}));
  EXPECT_EQ(load_dataset(dir).link_train.dim(0), 3);
}

// The format holds any held-out split alone: training and test pairs without validation ones.
TEST(LinkData, TrainAndTestWithoutValidationRoundTrip) {
  TempDir tmp("link_no_valid");
  Dataset ds = link_dataset();
  ds.link_valid = ds.link_valid_neg = Array();
  ds.sync_meta();
  write_dataset(ds, tmp / "ds");
  const Dataset back = load_dataset(tmp / "ds");
  EXPECT_FALSE(back.link_valid.defined());
  EXPECT_FALSE(back.link_valid_neg.defined());
  EXPECT_TRUE(same_bytes(back.link_test, ds.link_test));
  EXPECT_FALSE(back.meta.to_json().contains("num_link_valid"));
}

using Pair = std::pair<int64_t, int64_t>;

std::vector<Pair> rows_of(const Array& a) {
  std::vector<Pair> out;
  if (!a.defined()) return out;
  const int64_t* p = a.data<int64_t>();
  for (int64_t r = 0; r < a.dim(0); ++r) out.emplace_back(p[2 * r], p[2 * r + 1]);
  return out;
}

// 40 nodes: a ring, chords, a repeated edge and a self loop, as text.
std::string ring_edge_list(std::set<Pair>* undirected_pairs) {
  std::string text = "# ring with chords\n";
  auto add = [&](int64_t u, int64_t v) {
    text += std::to_string(u) + " " + std::to_string(v) + "\n";
    if (undirected_pairs && u != v) undirected_pairs->insert({std::min(u, v), std::max(u, v)});
  };
  for (int64_t i = 0; i < 40; ++i) {
    add(i, (i + 1) % 40);
    add(i, (i * 7 + 3) % 40);
  }
  add(5, 6);  // a repeat
  add(9, 9);  // a self loop: always a training edge
  return text;
}

ConvertCommand edge_list_command(const std::string& in, const std::string& out) {
  ConvertCommand c;
  c.from = ConvertFrom::kEdgeList;
  c.input = in;
  c.output = out;
  c.undirected = true;
  c.link_split = "0.8,0.1,0.1";
  c.seed = 7;
  return c;
}

TEST(LinkSplit, EdgeListHoldsOutEdgesFromTheStoredGraph) {
  TempDir tmp("link_el");
  std::set<Pair> all;
  iotest::write_text(tmp / "g.txt", ring_edge_list(&all));
  run_convert(edge_list_command(tmp / "g.txt", tmp / "ds"));
  const Dataset ds = load_dataset(tmp / "ds");
  const auto e = static_cast<int64_t>(all.size());
  const std::vector<Pair> train = rows_of(ds.link_train), valid = rows_of(ds.link_valid),
                          test = rows_of(ds.link_test);
  // Sizes: round(0.8 E) training edges plus the self loop, round(0.1 E) each held out.
  EXPECT_EQ(static_cast<int64_t>(train.size()), std::llround(0.8 * e) + 1);
  EXPECT_EQ(static_cast<int64_t>(valid.size()), std::llround(0.1 * e));
  EXPECT_EQ(static_cast<int64_t>(test.size()), e - std::llround(0.8 * e) - std::llround(0.1 * e));
  // Together the distinct input edges, once each; the stored graph is exactly the training edges.
  std::set<Pair> seen;
  for (const auto* split : {&train, &valid, &test}) {
    for (const Pair& p : *split) {
      EXPECT_TRUE(seen.insert(p).second) << p.first << " " << p.second;
      EXPECT_LE(p.first, p.second);
    }
  }
  std::set<Pair> expect = all;
  expect.insert({9, 9});
  EXPECT_EQ(seen, expect);
  for (const Pair& p : train) {
    EXPECT_TRUE(csr_has_entry(ds.graph, p.first, p.second));
    EXPECT_TRUE(csr_has_entry(ds.graph, p.second, p.first));
  }
  for (const auto* split : {&valid, &test}) {
    for (const Pair& p : *split) {
      EXPECT_FALSE(csr_has_entry(ds.graph, p.first, p.second));
      EXPECT_FALSE(csr_has_entry(ds.graph, p.second, p.first));
    }
  }
  EXPECT_EQ(ds.graph.num_edges(), 2 * (static_cast<int64_t>(train.size()) - 1) + 1);
  // Negatives: as many as the larger split, distinct, u < v, never an input edge.
  for (const Array* neg : {&ds.link_valid_neg, &ds.link_test_neg}) {
    const std::vector<Pair> ns = rows_of(*neg);
    EXPECT_EQ(ns.size(), std::max(valid.size(), test.size()));
    EXPECT_EQ(std::set<Pair>(ns.begin(), ns.end()).size(), ns.size());
    for (const Pair& p : ns) {
      EXPECT_LT(p.first, p.second);
      EXPECT_EQ(all.count(p), 0u) << p.first << " " << p.second;
    }
  }
  EXPECT_EQ(ds.meta.extra["link_split"]["candidate_edges"], e);
}

TEST(LinkSplit, SameSeedSameBytesOtherSeedOtherSplit) {
  TempDir tmp("link_det");
  iotest::write_text(tmp / "g.txt", ring_edge_list(nullptr));
  ConvertCommand c = edge_list_command(tmp / "g.txt", tmp / "a");
  c.link_negatives = 25;
  run_convert(c);
  c.output = tmp / "b";
  run_convert(c);
  c.output = tmp / "c";
  c.seed = 8;
  run_convert(c);
  for (const char* f : {"indptr.npy", "indices.npy", "link_train.npy", "link_valid.npy",
                        "link_test.npy", "link_valid_neg.npy", "link_test_neg.npy"}) {
    EXPECT_EQ(iotest::slurp(tmp / ("a/" + std::string(f))),
              iotest::slurp(tmp / ("b/" + std::string(f))))
        << f;
  }
  EXPECT_NE(iotest::slurp(tmp / "a/link_test.npy"), iotest::slurp(tmp / "c/link_test.npy"));
  EXPECT_EQ(load_dataset(tmp / "a").meta.num_link_test_neg, 25);
}

TEST(LinkSplit, DirectedEdgeListSplitsDirectedEdges) {
  TempDir tmp("link_dir");
  iotest::write_text(tmp / "g.txt", "0 1\n1 0\n1 2\n2 3\n3 0\n0 2\n");
  ConvertCommand c = edge_list_command(tmp / "g.txt", tmp / "ds");
  c.undirected = false;
  c.link_split = "0.5,0.5,0";
  run_convert(c);
  const Dataset ds = load_dataset(tmp / "ds");
  EXPECT_EQ(ds.meta.num_link_train, 3);
  EXPECT_EQ(ds.meta.num_link_valid, 3);
  EXPECT_EQ(ds.meta.num_link_test, 0);
  EXPECT_FALSE(ds.link_test_neg.defined());
  EXPECT_EQ(ds.graph.num_edges(), 3);
}

TEST(LinkSplit, RefusalsNameTheOption) {
  TempDir tmp("link_bad");
  iotest::write_text(tmp / "g.txt", ring_edge_list(nullptr));
  auto refusal = [&](const std::function<void(ConvertCommand&)>& edit) {
    ConvertCommand c = edge_list_command(tmp / "g.txt", tmp / "ds");
    edit(c);
    return error_of<InvalidArgument>([&] { run_convert(c); });
  };
  EXPECT_EQ(refusal([](ConvertCommand& c) { c.out_of_core = true; }),
            "--link-split needs the in-memory conversion (the edges are split in memory); drop "
            "--out-of-core");
  EXPECT_EQ(refusal([](ConvertCommand& c) { c.link_split = "0.8,0.1"; }),
            "--link-split: expected three fractions (train,valid,test) such as 0.85,0.05,0.10, "
            "got '0.8,0.1'");
  EXPECT_EQ(refusal([](ConvertCommand& c) { c.link_split = "0.8,x,0.1"; }),
            "--link-split: expected three fractions such as 0.85,0.05,0.10, got '0.8,x,0.1'");
  EXPECT_EQ(refusal([](ConvertCommand& c) { c.link_split = "0.8,0.2,0.1"; }),
            "--link-split: train + valid + test fractions (0.8 + 0.2 + 0.1) exceed 1");
  EXPECT_EQ(refusal([](ConvertCommand& c) { c.link_split = "0,0.5,0.5"; }),
            "--link-split: the train fraction must be > 0 (the stored graph is made of the "
            "training edges)");
  EXPECT_EQ(refusal([](ConvertCommand& c) { c.link_split = "0.8,-0.1,0.1"; }),
            "--link-split: the valid fraction -0.1 is outside [0, 1]");
  EXPECT_EQ(refusal([](ConvertCommand& c) {
              c.link_split.clear();
              c.link_negatives = 3;
            }),
            "--link-negatives, --link-negatives-per-positive and --seed apply with "
            "--link-split only");
  EXPECT_EQ(refusal([](ConvertCommand& c) { c.link_negatives = 100000; }),
            "--link-negatives: found only 708 of 100000 negative pairs for link_valid in "
            "10001000 draws (too few node pairs are not edges); lower --link-negatives");
  EXPECT_FALSE(path_exists(tmp / "ds"));
}

CommunityOptions link_community() {
  CommunityOptions o;
  o.num_nodes = 2000;
  o.num_edges = 12000;
  o.num_communities = 8;
  o.intra_fraction = 0.8;
  o.feature_dim = 0;
  o.num_classes = 0;
  o.seed = 3;
  o.link_split = LinkSplitOptions{0.85, 0.05, 0.10, 0, 0};
  return o;
}

double inside_share(const Array& pairs, const std::vector<int32_t>& comm) {
  int64_t inside = 0;
  for (const Pair& p : rows_of(pairs)) inside += comm[p.first] == comm[p.second];
  return static_cast<double>(inside) / static_cast<double>(pairs.dim(0));
}

TEST(LinkSplit, CommunityBoundIsTheShareOfWithinCommunityPositives) {
  std::vector<int32_t> comm;
  const Dataset ds = generate_community(link_community(), &comm);
  ASSERT_TRUE(ds.link_test.defined());
  EXPECT_FALSE(ds.features.defined());
  EXPECT_FALSE(ds.labels.defined());
  EXPECT_EQ(ds.meta.num_classes, 0);
  EXPECT_FALSE(ds.meta.extra.contains("accuracy_bound"));
  const double bound = ds.meta.extra["link_hits_bound"].get<double>();
  EXPECT_EQ(bound, inside_share(ds.link_test, comm));
  EXPECT_EQ(ds.meta.extra["link_hits_bound_valid"].get<double>(), inside_share(ds.link_valid, comm));
  EXPECT_GT(bound, 0.5);
  EXPECT_LT(bound, 1.0);
  // Every negative joins two communities and is no stored or held-out edge.
  std::set<Pair> positives;
  for (const Array* a : {&ds.link_train, &ds.link_valid, &ds.link_test}) {
    for (const Pair& p : rows_of(*a)) positives.insert(p);
  }
  for (const Array* a : {&ds.link_valid_neg, &ds.link_test_neg}) {
    EXPECT_EQ(a->dim(0), ds.link_test.dim(0));  // the larger split's count
    for (const Pair& p : rows_of(*a)) {
      EXPECT_NE(comm[p.first], comm[p.second]);
      EXPECT_EQ(positives.count(p), 0u);
      EXPECT_FALSE(csr_has_entry(ds.graph, p.first, p.second));
    }
  }
  EXPECT_NO_THROW(validate_dataset(ds, "generated"));
}

TEST(LinkSplit, CommunityWritesFeaturelessLinkDatasetsInMemoryOnly) {
  TempDir tmp("link_gen");
  GenerateWriteOptions w;
  w.memory_budget = uint64_t{1} << 32;
  const GenerateResult r = write_community(link_community(), tmp / "ds", w);
  EXPECT_GT(r.meta.num_link_train, 0);
  const Dataset back = load_dataset(tmp / "ds");
  EXPECT_EQ(back.meta.feature_dim, 0);
  EXPECT_EQ(back.meta.num_link_test, r.meta.num_link_test);
  w.force_out_of_core = true;
  EXPECT_EQ(error_of<InvalidArgument>([&] { write_community(link_community(), tmp / "o", w); }),
            "--link-split needs the in-memory generation (the edges are split in memory); drop "
            "--out-of-core");
  // Without a split, --classes 0 writes no labels out of core as in memory.
  CommunityOptions plain = link_community();
  plain.link_split.reset();
  write_community(plain, tmp / "ooc", w);
  EXPECT_FALSE(path_exists(tmp / "ooc/labels.npy"));
  EXPECT_EQ(load_dataset(tmp / "ooc").meta.num_classes, 0);
}

TEST(LinkSplit, CommunityCommandParsesTheSplit) {
  CommunityCommand c;
  c.link_split = "0.9,0.1,0";
  c.link_negatives = 5;
  c.validate();
  ASSERT_TRUE(c.o.link_split.has_value());
  EXPECT_EQ(c.o.link_split->valid, 0.1);
  EXPECT_EQ(c.o.link_split->negatives, 5);
  CommunityCommand bad;
  bad.link_negatives = 5;
  EXPECT_EQ(error_of<InvalidArgument>([&] { bad.validate(); }),
            "--link-negatives and --link-negatives-per-positive apply with --link-split only");
}

// An OGB link directory: raw/ with a 6-node path 0-1-2-3-4 and node features, split/time/ with
// every kind of split file.
std::string ogb_link_dir(const TempDir& tmp) {
  const std::string root = tmp / "ogbl_toy";
  iotest::write_gz(root + "/raw/edge.csv.gz", "0,1\n1,2\n2,3\n3,4\n");
  iotest::write_gz(root + "/raw/num-node-list.csv.gz", "6\n");
  iotest::write_gz(root + "/raw/num-edge-list.csv.gz", "4\n");
  iotest::write_gz(root + "/raw/node-feat.csv.gz", "1,0\n0,1\n1,1\n0,0\n2,0\n0,2\n");
  const std::string split = root + "/split/time/";
  iotest::write_text(split + "train_edge.csv", "0,1\n1,2\n3,2\n");
  std::filesystem::create_directories(split);
  save_npy(split + "valid_edge.npy", pairs({4, 5}));
  save_npy(split + "valid_edge_neg.npy",
           Array::from_vector(std::vector<int32_t>{0, 3, 1, 5}, {2, 2}));
  iotest::write_gz(split + "test_edge.csv.gz", "0,5\n");
  iotest::write_text(split + "test_edge_neg.csv", "0,4\n2,5\n");
  return root;
}

ConvertCommand ogb_link_command(const std::string& in, const std::string& out) {
  ConvertCommand c;
  c.from = ConvertFrom::kOgbLink;
  c.input = in;
  c.output = out;
  return c;
}

TEST(OgbLink, ImportsTheGraphFeaturesAndEverySplitFile) {
  TempDir tmp("ogbl");
  const std::string root = ogb_link_dir(tmp);
  run_convert(ogb_link_command(root, tmp / "ds"));
  const Dataset ds = load_dataset(tmp / "ds");
  EXPECT_EQ(ds.meta.name, "ogbl_toy");
  EXPECT_FALSE(ds.meta.directed);
  EXPECT_EQ(ds.graph.num_edges(), 8);
  EXPECT_EQ(ds.meta.feature_dim, 2);
  EXPECT_EQ(rows_of(ds.link_train), (std::vector<Pair>{{0, 1}, {1, 2}, {3, 2}}));
  EXPECT_EQ(rows_of(ds.link_valid), (std::vector<Pair>{{4, 5}}));
  EXPECT_EQ(rows_of(ds.link_valid_neg), (std::vector<Pair>{{0, 3}, {1, 5}}));
  EXPECT_EQ(rows_of(ds.link_test), (std::vector<Pair>{{0, 5}}));
  EXPECT_EQ(rows_of(ds.link_test_neg), (std::vector<Pair>{{0, 4}, {2, 5}}));
  EXPECT_EQ(ds.meta.extra["importer"], "ogb-link");
  EXPECT_EQ(ds.meta.extra["split"], "time");
  EXPECT_EQ(ds.meta.num_train, 0);
}

TEST(OgbLink, WithoutTrainEdgesEveryGraphEdgeTrains) {
  TempDir tmp("ogbl_notrain");
  const std::string root = ogb_link_dir(tmp);
  std::filesystem::remove(root + "/split/time/train_edge.csv");
  run_convert(ogb_link_command(root, tmp / "ds"));
  EXPECT_EQ(rows_of(load_dataset(tmp / "ds").link_train),
            (std::vector<Pair>{{0, 1}, {1, 2}, {2, 3}, {3, 4}}));
  ConvertCommand c = ogb_link_command(root, tmp / "nosplit");
  std::filesystem::remove_all(root + "/split");
  EXPECT_EQ(error_of<IoError>([&] { run_convert(c); }),
            root + "/split: no split folder (OGB link datasets come with split/<name>/ holding "
                   "train_edge, valid_edge, valid_edge_neg, test_edge, test_edge_neg as .npy or "
                   ".csv(.gz)); pass --no-split to train on every edge without held-out edges");
  c.no_split = true;
  EXPECT_EQ(run_convert(c).num_link_train, 4);
}

TEST(OgbLink, FaultsNameTheSplitFileRowAndPair) {
  TempDir tmp("ogbl_bad");
  const std::string root = ogb_link_dir(tmp);
  const std::string split = root + "/split/time/";
  auto fault = [&](const std::string& file, const std::string& text) {
    const std::string keep = iotest::slurp(split + file);
    iotest::write_text(split + file, text);
    const std::string msg = error_of([&] { run_convert(ogb_link_command(root, tmp / "ds")); });
    iotest::write_text(split + file, keep);
    return msg;
  };
  EXPECT_EQ(fault("train_edge.csv", "0,1\n4,3\n0,2\n"),
            split + "train_edge.csv: row 2: training edge (0, 2) is not an edge of the stored "
                    "graph (row 2 of indices.npy does not list 0)");
  EXPECT_EQ(fault("test_edge_neg.csv", "0,4\n2,6\n"),
            split + "test_edge_neg.csv: row 1 column 1 is 6, not a node id in [0, 6)");
  EXPECT_EQ(fault("train_edge.csv", "0,1\n1\n"), split + "train_edge.csv:2: expected 2 columns, got 1");
  // A held-out pair that repeats a training edge (ogbl-collab's repeated collaborations) is
  // kept, as OGB's evaluation keeps it: counted, and the dataset marked so that it validates.
  save_npy(split + "valid_edge.npy", pairs({4, 5, 2, 1}));
  EXPECT_EQ(run_convert(ogb_link_command(root, tmp / "repeats")).num_link_valid, 2);
  const Dataset repeats = load_dataset(tmp / "repeats");
  EXPECT_TRUE(repeats.meta.link_held_out_in_graph);
  EXPECT_EQ(repeats.meta.extra.at("held_out_in_graph"), (nlohmann::json{{"valid", 1}}));
  save_npy(split + "valid_edge.npy", pairs({4, 5}));
  std::filesystem::remove(split + "valid_edge_neg.npy");
  EXPECT_EQ(error_of<IoError>([&] { run_convert(ogb_link_command(root, tmp / "ds")); }),
            split + "valid_edge_neg.npy: missing file (valid_edge holds positive edges; Hits@K and "
                    "MRR rank them against fixed negatives, shared by the split's positives, or "
                    "per positive in <split>_target_neg.npy as OGB's ogbl-citation2)");
  EXPECT_FALSE(path_exists(tmp / "ds"));
  ConvertCommand c = ogb_link_command(root, tmp / "ds");
  c.out_of_core = true;
  EXPECT_EQ(error_of<InvalidArgument>([&] { run_convert(c); }),
            "--from ogb-link converts in memory; drop --out-of-core");
}

// ogbl-citation2's layout: <split>_target_neg.npy [E, K] holds K negative destinations for each
// positive; the dataset stores the pairs (positive's source, destination), K per positive in the
// positives' order, and dataset.json records K. Mixed or mismatched files are named.
TEST(OgbLink, PerPositiveNegativesAsCitation2ShipsThem) {
  TempDir tmp("ogbl_citation");
  const std::string root = ogb_link_dir(tmp);
  const std::string split = root + "/split/time/";
  std::filesystem::remove(split + "valid_edge_neg.npy");
  std::filesystem::remove(split + "test_edge_neg.csv");
  save_npy(split + "valid_edge.npy", pairs({4, 5, 0, 2}));
  save_npy(split + "valid_target_neg.npy",
           Array::from_vector(std::vector<int64_t>{0, 1, 2, 3, 4, 5}, {2, 3}));
  save_npy(split + "test_target_neg.npy",
           Array::from_vector(std::vector<int32_t>{1, 2, 4}, {1, 3}));
  run_convert(ogb_link_command(root, tmp / "ds"));
  const Dataset ds = load_dataset(tmp / "ds");
  EXPECT_EQ(ds.meta.link_negatives_per_positive, 3);
  EXPECT_EQ(rows_of(ds.link_valid_neg),
            (std::vector<Pair>{{4, 0}, {4, 1}, {4, 2}, {0, 3}, {0, 4}, {0, 5}}));
  EXPECT_EQ(rows_of(ds.link_test_neg), (std::vector<Pair>{{0, 1}, {0, 2}, {0, 4}}));
  // A dataset.json whose K does not match the pairs is refused naming the file.
  DatasetMeta m = load_dataset_meta(tmp / "ds");
  m.link_negatives_per_positive = 2;
  iotest::write_text(tmp / "ds/dataset.json", m.to_json().dump());
  EXPECT_EQ(error_of<FormatError>([&] { load_dataset(tmp / "ds"); }),
            (tmp / "ds/link_valid_neg.npy") +
                ": has 6 pairs, but dataset.json's link_negatives_per_positive 2 needs 4 for the "
                "2 positives of link_valid.npy (rows [i K, (i + 1) K) are positive i's)");
  save_npy(split + "test_target_neg.npy",
           Array::from_vector(std::vector<int64_t>{1, 2}, {1, 2}));
  EXPECT_EQ(error_of<FormatError>([&] { run_convert(ogb_link_command(root, tmp / "k")); }),
            split + "test_target_neg.npy: 2 negatives per positive, but the other split has 3");
  save_npy(split + "test_target_neg.npy",
           Array::from_vector(std::vector<int64_t>{1, 2, 4, 1, 2, 4}, {2, 3}));
  EXPECT_EQ(error_of<FormatError>([&] { run_convert(ogb_link_command(root, tmp / "rows")); }),
            split + "test_target_neg.npy: 2 rows, but " + split +
                "test_edge.csv.gz holds 1 positives (one row of negatives each)");
  std::filesystem::remove(split + "test_target_neg.npy");
  iotest::write_text(split + "test_edge_neg.csv", "0,4\n2,5\n");
  EXPECT_EQ(error_of<FormatError>([&] { run_convert(ogb_link_command(root, tmp / "mixed")); }),
            (root + "/split/time") +
                ": one split's negatives are per positive (<split>_target_neg.npy) and the "
                "other's shared (<split>_edge_neg): give both splits the same kind");
  save_npy(split + "valid_edge_neg.npy", pairs({0, 3}));
  EXPECT_EQ(error_of<FormatError>([&] { run_convert(ogb_link_command(root, tmp / "both")); }),
            split + "valid_target_neg.npy: the split has both valid_edge_neg (negatives shared by "
                    "its positives) and valid_target_neg (negatives per positive); keep one");
}

// --link-negatives-per-positive K: each held-out (u, v) gets K distinct (u, w), none an edge of
// the input graph (either direction), none a self loop; the dataset validates and records K.
TEST(LinkSplit, NegativesPerPositiveShareTheSourceAndAreNoEdges) {
  TempDir tmp("link_per_positive");
  std::set<Pair> all;
  iotest::write_text(tmp / "g.txt", ring_edge_list(&all));
  ConvertCommand c = edge_list_command(tmp / "g.txt", tmp / "ds");
  c.link_negatives_per_positive = 4;
  run_convert(c);
  const Dataset ds = load_dataset(tmp / "ds");
  EXPECT_EQ(ds.meta.link_negatives_per_positive, 4);
  for (const auto& [pos, neg] : {std::pair{&ds.link_valid, &ds.link_valid_neg},
                                 std::pair{&ds.link_test, &ds.link_test_neg}}) {
    ASSERT_EQ(neg->dim(0), 4 * pos->dim(0));
    const std::vector<Pair> p = rows_of(*pos), n = rows_of(*neg);
    for (size_t i = 0; i < p.size(); ++i) {
      std::set<int64_t> seen;
      for (size_t j = 4 * i; j < 4 * i + 4; ++j) {
        EXPECT_EQ(n[j].first, p[i].first);
        EXPECT_NE(n[j].second, p[i].first);
        EXPECT_EQ(all.count({std::min(n[j].first, n[j].second),
                             std::max(n[j].first, n[j].second)}),
                  0u);
        seen.insert(n[j].second);
      }
      EXPECT_EQ(seen.size(), 4u);
    }
  }
  c.output = tmp / "both";
  c.link_negatives = 10;
  EXPECT_EQ(error_of<InvalidArgument>([&] { run_convert(c); }),
            "--link-negatives (shared by a split's positives) and --link-negatives-per-positive "
            "exclude each other: give one");
}

}  // namespace
}  // namespace dsp
