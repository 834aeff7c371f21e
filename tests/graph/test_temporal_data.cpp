// Edge and node times in the dataset: the CSR builder's earliest-time merge, dataset round trips
// and validation messages (exact), the edge-list importer's time column and node-time file, and
// the temporal community generator's planted structure, bounds and determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "error_of.hpp"
#include "graph/commands.hpp"
#include "graph/dataset.hpp"
#include "graph/dataset_cases.hpp"
#include "graph/generate.hpp"
#include "graph/import.hpp"
#include "graph/io_test_util.hpp"
#include "graph/npy.hpp"

namespace dsp {
namespace {
using iotest::TempDir;
using iotest::write_text;
using test::error_of;

std::vector<int64_t> ints(const Array& a) {
  std::vector<int64_t> v(static_cast<size_t>(a.numel()));
  for (int64_t i = 0; i < a.numel(); ++i) v[i] = a.int_at(i);
  return v;
}

// Row v of g as (neighbour, time) pairs.
std::vector<std::pair<int64_t, int64_t>> timed_row(const Csr& g, int64_t v) {
  std::vector<std::pair<int64_t, int64_t>> r;
  for (int64_t e = g.rowptr()[v]; e < g.rowptr()[v + 1]; ++e) {
    r.emplace_back(g.indices.int_at(e), g.times.data<int64_t>()[e]);
  }
  return r;
}

TEST(TemporalCsr, RepeatedEdgesKeepTheirEarliestTimeAndItsWeight) {
  // 0 -> 2 at 30, 50, 10 (earliest last); 1 -> 2 twice at 7 (first listed wins: weight 2).
  std::vector<int64_t> src = {0, 1, 0, 1, 0, 2};
  std::vector<int64_t> dst = {2, 2, 2, 2, 2, 0};
  std::vector<int64_t> time = {30, 7, 50, 7, 10, 4};
  std::vector<float> w = {1, 2, 3, 4, 5, 6};
  const Csr g = build_in_csr<int64_t>(3, src.data(), dst.data(), 6, w.data(), {}, time.data());
  using P = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(timed_row(g, 2), (P{{0, 10}, {1, 7}}));
  EXPECT_EQ(timed_row(g, 0), (P{{2, 4}}));
  const float* gw = g.weights.data<float>();
  EXPECT_EQ(std::vector<float>(gw, gw + g.num_edges()), (std::vector<float>{6, 5, 2}));
  // A reverse edge takes its edge's time.
  CsrBuildOptions o;
  o.symmetrize = true;
  const Csr s = build_in_csr<int64_t>(3, src.data(), dst.data(), 6, nullptr, o, time.data());
  EXPECT_EQ(timed_row(s, 0), (P{{2, 4}}));
  EXPECT_EQ(timed_row(s, 1), (P{{2, 7}}));
  EXPECT_EQ(timed_row(s, 2), (P{{0, 4}, {1, 7}}));
  EXPECT_FALSE(s.has_weights());
}

Dataset small_temporal() {
  Dataset ds = iotest::small_dataset();  // 6 nodes, 8 entries
  ds.graph.times = Array::from_vector(std::vector<int64_t>{5, -3, 9, 9, 0, 12, 1, 7});
  ds.node_time = Array::from_vector(std::vector<int64_t>{10, 10, 0, 4, 100, -1});
  ds.sync_meta();
  return ds;
}

TEST(TemporalDataset, RoundTrip) {
  TempDir tmp("temporal_rt");
  const Dataset ds = small_temporal();
  EXPECT_TRUE(ds.meta.has_edge_time);
  EXPECT_TRUE(ds.meta.has_node_time);
  write_dataset(ds, tmp / "ds");
  const nlohmann::json j = nlohmann::json::parse(iotest::slurp(tmp / "ds/dataset.json"));
  EXPECT_EQ(j.at("has_edge_time"), true);
  EXPECT_EQ(j.at("has_node_time"), true);
  for (bool mmap : {true, false}) {
    LoadOptions lo;
    lo.mmap = mmap;
    const Dataset back = load_dataset(tmp / "ds", lo);
    EXPECT_EQ(ints(back.graph.times), ints(ds.graph.times));
    EXPECT_EQ(ints(back.node_time), ints(ds.node_time));
  }
  // Without times nothing is written and dataset.json has no time keys.
  write_dataset(iotest::small_dataset(), tmp / "plain");
  EXPECT_FALSE(std::filesystem::exists(tmp / "plain/edge_time.npy"));
  const nlohmann::json p = nlohmann::json::parse(iotest::slurp(tmp / "plain/dataset.json"));
  EXPECT_FALSE(p.contains("has_edge_time"));
  EXPECT_FALSE(load_dataset(tmp / "plain").graph.has_times());
}

TEST(TemporalDataset, ValidationMessages) {
  TempDir tmp("temporal_bad");
  const std::string d = tmp / "ds";
  auto fresh = [&] { write_dataset(small_temporal(), d, /*overwrite=*/true); };
  auto load = [&] { return error_of([&] { load_dataset(d); }); };
  fresh();
  save_npy(d + "/edge_time.npy", Array::from_vector(std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(load(), d + "/edge_time.npy: expected int64[8] (one time per entry of indices.npy), "
                        "got int64[3]");
  save_npy(d + "/edge_time.npy", Array(DType::kFloat32, {8}));
  EXPECT_EQ(load(), d + "/edge_time.npy: expected int64[8] (one time per entry of indices.npy), "
                        "got float32[8]");
  save_npy(d + "/edge_time.npy", Array(DType::kInt64, {8, 1}));
  EXPECT_EQ(load(), d + "/edge_time.npy: expected int64[8] (one time per entry of indices.npy), "
                        "got int64[8, 1]");
  fresh();
  save_npy(d + "/node_time.npy", Array(DType::kInt32, {6}));
  EXPECT_EQ(load(), d + "/node_time.npy: expected int64[6] (one time per node), got int32[6]");
  fresh();
  std::filesystem::remove(d + "/edge_time.npy");
  EXPECT_NE(load().find(d + "/edge_time.npy: "), std::string::npos) << load();
  // Node times need edge times.
  iotest::edit_json(d, [](nlohmann::json& j) { j.erase("has_edge_time"); });
  EXPECT_EQ(load(), d + "/node_time.npy: node times without edge times (edge_time.npy): a node's "
                        "time selects the edges before it, so node times need edge times");
  // The writer validates the same way: nothing is written.
  Dataset ds = small_temporal();
  ds.graph.times = Array();
  ds.sync_meta();
  EXPECT_EQ(error_of([&] { write_dataset(ds, tmp / "out"); }),
            tmp /
                "out/node_time.npy: node times without edge times (edge_time.npy): a node's "
                "time selects the edges before it, so node times need edge times");
  EXPECT_FALSE(std::filesystem::exists(tmp / "out"));
  ds = small_temporal();
  ds.meta.has_edge_time = false;
  EXPECT_EQ(error_of([&] { write_dataset(ds, tmp / "out"); }),
            tmp / "out: dataset.json says has_edge_time = false but edge_time.npy is present");
}

ConvertCommand edge_list(const std::string& in, const std::string& out, int64_t time_column) {
  ConvertCommand c;
  c.from = ConvertFrom::kEdgeList;
  c.input = in;
  c.output = out;
  c.time_column = time_column;
  return c;
}

TEST(TemporalImport, TimeColumnRoundTrip) {
  TempDir tmp("temporal_import");
  // Column 3: 'src dst time [weight]'; 0 -> 1 twice, the earliest (5) kept.
  write_text(tmp / "a.txt", "# src dst time\n0 1 9\n2 1 -4\n0 1 5\n1 2 7 # late\n");
  run_convert(edge_list(tmp / "a.txt", tmp / "a", 3));
  Dataset a = load_dataset(tmp / "a");
  EXPECT_TRUE(a.meta.has_edge_time);
  EXPECT_FALSE(a.meta.has_weights);
  EXPECT_EQ(timed_row(a.graph, 1), (std::vector<std::pair<int64_t, int64_t>>{{0, 5}, {2, -4}}));
  EXPECT_EQ(timed_row(a.graph, 2), (std::vector<std::pair<int64_t, int64_t>>{{1, 7}}));
  // Column 4: 'src dst weight time'; undirected, node times from a text file.
  write_text(tmp / "b.csv", "0,1,0.5,20\n1,2,2,3\n");
  write_text(tmp / "nt.txt", "1\n2\n30\n");
  ConvertCommand c = edge_list(tmp / "b.csv", tmp / "b", 4);
  c.undirected = true;
  c.node_time = tmp / "nt.txt";
  run_convert(c);
  Dataset b = load_dataset(tmp / "b");
  EXPECT_EQ(timed_row(b.graph, 1), (std::vector<std::pair<int64_t, int64_t>>{{0, 20}, {2, 3}}));
  const float* w = b.graph.weights.data<float>();
  EXPECT_EQ(std::vector<float>(w, w + 4), (std::vector<float>{0.5f, 0.5f, 2, 2}));
  EXPECT_EQ(ints(b.node_time), (std::vector<int64_t>{1, 2, 30}));
  // Node times from a .npy (int32 widened).
  save_npy(tmp / "nt.npy", Array::from_vector(std::vector<int32_t>{4, 5, 6}));
  c.output = tmp / "c";
  c.node_time = tmp / "nt.npy";
  run_convert(c);
  EXPECT_EQ(ints(load_dataset(tmp / "c").node_time), (std::vector<int64_t>{4, 5, 6}));
}

TEST(TemporalImport, Errors) {
  TempDir tmp("temporal_import_bad");
  auto convert = [&](const std::string& text, int64_t col, const std::string& node_time = "") {
    write_text(tmp / "e.txt", text);
    ConvertCommand c = edge_list(tmp / "e.txt", tmp / "out", col);
    c.node_time = node_time;
    c.overwrite = true;
    return error_of([&] { run_convert(c); });
  };
  const std::string f = tmp / "e.txt";
  EXPECT_EQ(convert("0 1 5\n1 2 2.5\n", 3),
            f + ":2: bad edge time '2.5' in column 3: times are integers");
  EXPECT_EQ(convert("0 1 0.5 x\n", 4), f + ":1: bad edge time 'x' in column 4: times are integers");
  EXPECT_EQ(convert("0 1 5\n1 2\n", 3),
            f + ":2: no time in column 3 (expected 'src dst time [weight]')");
  EXPECT_EQ(convert("0 1 0.5\n", 4),
            f + ":1: no time in column 4 (expected 'src dst weight time')");
  EXPECT_EQ(convert("0 1 5 1 1\n", 3),
            f + ":1: too many columns (expected 'src dst time [weight]')");
  EXPECT_EQ(convert("0 1 5 1\n1 2 3\n", 3), f + ":2: lacks a weight column but earlier lines do");
  EXPECT_EQ(convert("0 1 5\n", 5),
            "--time-column must be 3 ('src dst time [weight]') or 4 ('src dst weight time'), got "
            "5");
  EXPECT_EQ(convert("0 1\n", 0, tmp / "nt.txt"),
            "--node-time needs edge times: give --time-column too");
  write_text(tmp / "nt.txt", "1\n2\n");
  EXPECT_EQ(convert("0 1 5\n1 2 3\n", 3, tmp / "nt.txt"),
            tmp / "nt.txt: has 2 node times but the graph has 3 nodes");
  write_text(tmp / "nt.txt", "1\n2.5\n3\n");
  EXPECT_EQ(convert("0 1 5\n1 2 3\n", 3, tmp / "nt.txt"),
            tmp / "nt.txt:2: bad number '2.5' in column 1");
  ConvertCommand c = edge_list(f, tmp / "ooc", 3);
  c.out_of_core = true;
  EXPECT_EQ(error_of([&] { run_convert(c); }),
            "--time-column needs the in-memory conversion (repeated edges keep their earliest "
            "time); drop --out-of-core");
  EXPECT_FALSE(std::filesystem::exists(tmp / "out"));
}

CommunityOptions temporal_options() {
  CommunityOptions o;
  o.num_nodes = 6000;
  o.num_edges = 90000;
  o.num_communities = 32;
  o.num_classes = 8;
  o.feature_dim = 4;
  o.temporal = true;
  o.seed = 3;
  return o;
}

// The share of labelled nodes whose label is the class of the most frequent feature community
// among their in-neighbours (ties: the lowest), over the entries before their time or all of them.
double vote_accuracy(const Dataset& ds, const std::vector<int32_t>& comm, int64_t classes,
                     bool past_only) {
  const int64_t* t = ds.graph.times.data<int64_t>();
  const int64_t* nt = ds.node_time.data<int64_t>();
  const int64_t* y = ds.labels.data<int64_t>();
  int64_t right = 0;
  for (int64_t v = 0; v < ds.graph.num_nodes; ++v) {
    std::map<int32_t, int64_t> count;
    for (int64_t e = ds.graph.rowptr()[v]; e < ds.graph.rowptr()[v + 1]; ++e) {
      if (!past_only || t[e] < nt[v]) ++count[comm[ds.graph.indices.int_at(e)]];
    }
    int32_t best = -1;
    int64_t most = 0;
    for (auto [c, k] : count) {
      if (k > most) best = c, most = k;
    }
    right += best >= 0 && best % classes == y[v];
  }
  return static_cast<double>(right) / static_cast<double>(ds.graph.num_nodes);
}

TEST(GenerateTemporal, PlantedPastBeatsTheUntimedBound) {
  const CommunityOptions o = temporal_options();
  std::vector<int32_t> comm;
  const Dataset ds = generate_community(o, &comm);
  validate_dataset(ds, "generated");
  EXPECT_TRUE(ds.meta.directed);
  EXPECT_TRUE(ds.meta.has_edge_time && ds.meta.has_node_time);
  const nlohmann::json& x = ds.meta.extra;
  EXPECT_DOUBLE_EQ(x.at("accuracy_bound").get<double>(), 1 - 0.1 * (1 - 1.0 / 8));
  EXPECT_DOUBLE_EQ(x.at("accuracy_bound_untimed").get<double>(), 0.9 / 2 + 0.1 / 8);
  EXPECT_NEAR(x.at("measured_past_intra_fraction").get<double>(), 0.9, 0.02);
  EXPECT_NEAR(x.at("measured_future_decoy_fraction").get<double>(), 0.9, 0.02);
  // A vote over the past's feature communities nears the bound; over all edges it cannot pass
  // the untimed one (past and future clusters are exchangeable without times).
  const double past = vote_accuracy(ds, comm, o.num_classes, true);
  const double all = vote_accuracy(ds, comm, o.num_classes, false);
  const double lonely = x.at("nodes_without_past_edges").get<double>();
  EXPECT_GT(past, (1 - lonely) * x.at("accuracy_bound").get<double>() - 0.05) << past;
  EXPECT_LT(all, x.at("accuracy_bound_untimed").get<double>() + 0.03) << all;
  EXPECT_GT(past, all + 0.3);
  // Times: node times in [1, span), every entry's time in [0, span).
  for (int64_t v : ints(ds.node_time)) ASSERT_TRUE(v >= 1 && v < kTemporalSpan);
  for (int64_t t : ints(ds.graph.times)) ASSERT_TRUE(t >= 0 && t < kTemporalSpan);
}

TEST(GenerateTemporal, DeterministicAndRefusals) {
  const CommunityOptions o = temporal_options();
  const Dataset a = generate_community(o), b = generate_community(o);
  EXPECT_EQ(ints(a.graph.indices), ints(b.graph.indices));
  EXPECT_EQ(ints(a.graph.times), ints(b.graph.times));
  EXPECT_EQ(ints(a.node_time), ints(b.node_time));
  EXPECT_EQ(ints(a.labels), ints(b.labels));
  CommunityOptions other = o;
  other.seed = 4;
  EXPECT_NE(ints(generate_community(other).graph.times), ints(a.graph.times));
  CommunityOptions bad = o;
  bad.num_classes = 1;
  EXPECT_EQ(error_of([&] { generate_community(bad); }),
            "--temporal needs at least 2 classes and as many communities as classes, got 1 "
            "classes and 32 communities");
  bad = o;
  bad.link_split = LinkSplitOptions{};
  EXPECT_EQ(error_of([&] { generate_community(bad); }),
            "--temporal does not combine with --link-split");
  TempDir tmp("temporal_gen");
  GenerateWriteOptions w;
  w.memory_budget = uint64_t{8} << 30;
  w.force_out_of_core = true;
  EXPECT_EQ(error_of([&] { write_community(o, tmp / "g", w); }),
            "--temporal needs the in-memory generation (edges are built with their times in "
            "memory); drop --out-of-core");
  w.force_out_of_core = false;
  const GenerateResult r = write_community(o, tmp / "g", w);
  EXPECT_TRUE(r.meta.has_edge_time);
  EXPECT_EQ(ints(load_dataset(tmp / "g").graph.times), ints(a.graph.times));
}

}  // namespace
}  // namespace dsp
