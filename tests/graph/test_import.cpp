#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "graph/dataset.hpp"
#include "graph/import.hpp"
#include "graph/io_test_util.hpp"

namespace dsp {
namespace {
using iotest::TempDir;

template <class F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error, expected '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "got:      " << e.what() << "\nexpected: " << needle;
  }
}

bool has_edge(const Csr& g, int64_t u, int64_t v) {  // u -> v, i.e. u in row v
  return dispatch_index(g.index_dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* idx = g.indices.data<T>();
    return std::binary_search(idx + g.rowptr()[v], idx + g.rowptr()[v + 1], static_cast<T>(u));
  });
}

TEST(Import, CoraFromOgbRaw) {
  OgbImportOptions o;
  Dataset ds = import_ogb_raw(std::string(DSP_TEST_DATA_DIR) + "/cora", o);
  const DatasetMeta& m = ds.meta;
  EXPECT_EQ(m.name, "cora");
  EXPECT_EQ(m.num_nodes, 2708);
  EXPECT_EQ(m.num_edges, 10556);
  EXPECT_FALSE(m.directed);
  EXPECT_EQ(m.index_dtype, DType::kInt32);
  EXPECT_EQ(m.feature_dim, 1433);
  EXPECT_EQ(m.feature_dtype, DType::kFloat32);
  EXPECT_EQ(m.num_classes, 7);
  EXPECT_EQ(m.num_train, 140);
  EXPECT_EQ(m.num_valid, 500);
  EXPECT_EQ(m.num_test, 1000);
  EXPECT_EQ(m.extra["split"], "public");
  validate_dataset(ds, "cora");
  // Symmetric: every stored u -> v has its v -> u.
  const Csr& g = ds.graph;
  const int32_t* idx = g.indices.data<int32_t>();
  for (int64_t v = 0; v < g.num_nodes; ++v) {
    for (int64_t e = g.rowptr()[v]; e < g.rowptr()[v + 1]; ++e) {
      ASSERT_TRUE(has_edge(g, v, idx[e])) << idx[e] << " -> " << v;
    }
  }
  // Bag-of-words features are 0/1 and every node has some words.
  const float* f = ds.features.data<float>();
  for (int64_t i = 0; i < 2708 * 1433; ++i) ASSERT_TRUE(f[i] == 0.0f || f[i] == 1.0f);
  EXPECT_GT(*std::max_element(f, f + 1433), 0.0f);
  // The same directory given as raw/ itself, and with the split named explicitly.
  o.split = "public";
  Dataset again = import_ogb_raw(std::string(DSP_TEST_DATA_DIR) + "/cora/raw", o);
  EXPECT_EQ(again.meta.name, "cora");
  EXPECT_EQ(again.meta.num_edges, 10556);
  o.split = "nope";
  expect_error([&] { import_ogb_raw(std::string(DSP_TEST_DATA_DIR) + "/cora", o); },
               "split/nope: no such split directory");
}

TEST(Import, EdgeListTextSyntax) {
  EdgeListData d;
  parse_edge_list_text(
      "# header comment\n"
      "0 1\n"
      "\n"
      "  2\t3   # trailing comment\r\n"
      "4,5\r\n"
      "   \n"
      "6 , 7\n"
      "8 9",  // no final newline
      d, "g.txt");
  EXPECT_EQ(d.src, (std::vector<int64_t>{0, 2, 4, 6, 8}));
  EXPECT_EQ(d.dst, (std::vector<int64_t>{1, 3, 5, 7, 9}));
  EXPECT_TRUE(d.weight.empty());
  EXPECT_EQ(d.max_id, 9);

  EdgeListData w;
  parse_edge_list_text("0 1 0.5\n1 2 2e3\n", w, "w.txt");
  EXPECT_EQ(w.weight, (std::vector<float>{0.5f, 2000.0f}));
  // Appending continues the weighted-ness of what is already there.
  expect_error([&] { parse_edge_list_text("3 4\n", w, "w.txt", 3); },
               "w.txt:3: lacks a weight column but earlier lines do");

  EdgeListData e;
  expect_error([&] { parse_edge_list_text("0 1\n1 2\n2 x3\n", e, "g.txt"); },
               "g.txt:3: bad node id 'x3'");
  expect_error([&] { parse_edge_list_text("0 1\n1 2.5\n", e, "g.txt", 10); },
               "g.txt:11: bad node id '2.5'");
  expect_error([&] { parse_edge_list_text("0 1\n1 2 7\n", e, "g.txt"); },
               "g.txt:2: has a weight column but earlier lines do not");
  expect_error([&] { parse_edge_list_text("0 -1\n", e, "g.txt"); }, "g.txt:1: negative node id -1");
  expect_error([&] { parse_edge_list_text("5\n", e, "g.txt"); }, "g.txt:1: expected 'src dst");
  expect_error([&] { parse_edge_list_text("1 2 3 4\n", e, "g.txt"); }, "g.txt:1: too many columns");
  expect_error([&] { parse_edge_list_text("1 2 w\n", e, "g.txt"); },
               "g.txt:1: bad edge weight 'w'");
  // Weights the dataset cannot hold are named at their line of the input, not in edge_weight.npy.
  EdgeListData bad;
  expect_error([&] { parse_edge_list_text("0 1 0.5\n1 2 nan\n", bad, "w.txt"); },
               "w.txt:2: edge weight 'nan' is NaN; edge weights must be finite and >= 0");
  EdgeListData neg;
  expect_error([&] { parse_edge_list_text("0 1 -1\n", neg, "w.txt"); },
               "w.txt:1: edge weight '-1' is negative; edge weights must be finite and >= 0");
  EdgeListData inf;
  expect_error([&] { parse_edge_list_text("0 1 inf\n", inf, "w.txt"); },
               "w.txt:1: edge weight 'inf' is infinite; edge weights must be finite and >= 0");
  expect_error([&] { parse_edge_list_text("1 99999999999999999999\n", e, "g.txt"); },
               "g.txt:1: bad node id");
}

TEST(Import, CsvNumbers) {
  std::vector<int64_t> ints;
  parse_csv_numbers<int64_t>("1,2,3\r\n4, 5 ,6\n", 3, ints, "a.csv");
  EXPECT_EQ(ints, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  std::vector<float> fl;
  parse_csv_numbers<float>("3.0\nnan\n\n-1.5e2\n", 1, fl, "l.csv");
  ASSERT_EQ(fl.size(), 4u);
  EXPECT_EQ(fl[0], 3.0f);
  EXPECT_TRUE(std::isnan(fl[1]));
  EXPECT_TRUE(std::isnan(fl[2]));  // empty field: missing value
  EXPECT_EQ(fl[3], -150.0f);

  expect_error([&] { parse_csv_numbers<int64_t>("1,2,3\n4,5\n", 3, ints, "a.csv"); },
               "a.csv:2: expected 3 columns, got 2");
  expect_error([&] { parse_csv_numbers<int64_t>("1,2,3,4\n", 3, ints, "a.csv", 7); },
               "a.csv:7: too many columns (expected 3)");
  expect_error([&] { parse_csv_numbers<int64_t>("1,2.0,3\n", 3, ints, "a.csv"); },
               "a.csv:1: bad number '2.0' in column 2");
  expect_error([&] { parse_csv_numbers<int64_t>("1,,3\n", 3, ints, "a.csv"); },
               "a.csv:1: empty field in column 2");
  expect_error([&] { parse_csv_numbers<float>("1;2\n", 1, fl, "f.csv"); },
               "f.csv:1: bad number '1;2'");
}

TEST(Import, StreamingHandlesChunkBoundaries) {
  TempDir tmp("imp_chunks");
  std::string text;
  for (int i = 0; i < 500; ++i) {
    text += std::to_string(i * 7919 % 1000) + (i % 3 ? " " : ",") + std::to_string(i) +
            (i % 5 ? "\n" : "\r\n");
    if (i % 50 == 0) text += "# comment line\n\n";
  }
  text += "999 0";  // last line without newline
  iotest::write_text(tmp / "g.txt", text);
  iotest::write_gz(tmp / "g.txt.gz", text);
  EdgeListData whole;
  parse_edge_list_text(text, whole, "whole");
  for (const char* file : {"g.txt", "g.txt.gz"}) {
    for (size_t chunk : {size_t{1}, size_t{3}, size_t{7}, size_t{64}, size_t{1} << 20}) {
      SCOPED_TRACE(std::string(file) + " chunk " + std::to_string(chunk));
      std::string seen;
      int64_t expected_line = 1;
      EdgeListData parts;
      int64_t lines = for_each_text_chunk(
          tmp / file,
          [&](std::string_view t, int64_t first_line) {
            EXPECT_EQ(first_line, expected_line);
            expected_line += std::count(t.begin(), t.end(), '\n');
            seen.append(t);
            parse_edge_list_text(t, parts, file, first_line);
          },
          chunk);
      EXPECT_EQ(seen, text);
      EXPECT_EQ(lines, std::count(text.begin(), text.end(), '\n') + 1);
      EXPECT_EQ(parts.src, whole.src);
      EXPECT_EQ(parts.dst, whole.dst);
    }
  }
  // Line numbers in errors stay right across chunks.
  iotest::write_gz(tmp / "bad.gz", text.substr(0, text.size() - 5) + "999 zz\n");
  int64_t total_lines = std::count(text.begin(), text.end(), '\n') + 1;
  expect_error([&] { import_edge_list(tmp / "bad.gz", {}, "bad"); },
               tmp / "bad.gz" + ":" + std::to_string(total_lines) + ": bad node id 'zz'");
  // A corrupt gzip stream is an I/O error, not silently short data.
  std::string gz = iotest::slurp(tmp / "g.txt.gz");
  iotest::write_text(tmp / "cut.gz", gz.substr(0, gz.size() / 2));
  expect_error([&] { for_each_text_chunk(tmp / "cut.gz", [](std::string_view, int64_t) {}); },
               "cut.gz: corrupt or truncated gzip stream");
  expect_error([&] { for_each_text_chunk(tmp / "none.txt", [](std::string_view, int64_t) {}); },
               "none.txt: missing file");
}

TEST(Import, EdgeListBuildsDedupedCsr) {
  TempDir tmp("imp_el");
  iotest::write_text(tmp / "g.txt", "0 1\n0 1\n2 1\n1 1\n3 0\n");
  Dataset ds = import_edge_list(tmp / "g.txt", {}, "g");
  EXPECT_EQ(ds.meta.num_nodes, 4);
  EXPECT_EQ(ds.meta.num_edges, 4);  // the repeated 0 -> 1 is merged; the self loop kept
  EXPECT_TRUE(ds.meta.directed);
  EXPECT_TRUE(has_edge(ds.graph, 1, 1));
  EXPECT_TRUE(has_edge(ds.graph, 3, 0));
  EXPECT_FALSE(has_edge(ds.graph, 0, 3));
  EXPECT_FALSE(ds.features.defined());

  EdgeListOptions o;
  o.undirected = true;
  o.num_nodes = 10;
  o.remove_self_loops = true;
  ds = import_edge_list(tmp / "g.txt", o, "g");
  EXPECT_EQ(ds.meta.num_nodes, 10);
  EXPECT_EQ(ds.meta.num_edges, 6);
  EXPECT_FALSE(ds.meta.directed);
  EXPECT_TRUE(has_edge(ds.graph, 0, 3));
  EXPECT_FALSE(has_edge(ds.graph, 1, 1));

  iotest::write_text(tmp / "w.txt", "0 1 0.5\n1 2 1.5\n");
  ds = import_edge_list(tmp / "w.txt", {}, "w");
  ASSERT_TRUE(ds.meta.has_weights);
  EXPECT_EQ(ds.graph.weights.data<float>()[1], 1.5f);  // row 2 holds 1 -> 2

  o = {};
  o.num_nodes = 3;
  expect_error([&] { import_edge_list(tmp / "g.txt", o, "g"); },
               "g.txt:5: node id 3 >= number of nodes 3");
  iotest::write_text(tmp / "empty.txt", "# nothing here\n\n");
  expect_error([&] { import_edge_list(tmp / "empty.txt", {}, "e"); }, "empty.txt: empty graph");
  o.num_nodes = 0;
  expect_error([&] { import_edge_list(tmp / "empty.txt", o, "e"); }, "empty.txt: empty graph");
}

// Writes the OGB raw layout for the given undirected edges.
void write_ogb(const std::string& root, const std::string& edges_csv, int64_t n, int64_t m) {
  iotest::write_gz(root + "/raw/edge.csv.gz", edges_csv);
  iotest::write_gz(root + "/raw/num-node-list.csv.gz", std::to_string(n) + "\n");
  iotest::write_gz(root + "/raw/num-edge-list.csv.gz", std::to_string(m) + "\n");
}

TEST(Import, EdgeListAndOgbTwinAreIdentical) {
  TempDir tmp("imp_twin");
  std::string csv, txt;
  int64_t m = 0;
  for (int64_t i = 0; i < 300; ++i) {
    int64_t u = (i * 37) % 101, v = (i * 53 + 1) % 101;
    csv += std::to_string(u) + "," + std::to_string(v) + "\n";
    txt += std::to_string(u) + " " + std::to_string(v) + "\n";
    ++m;
  }
  csv += "100,0\n";
  txt += "100 0\n";
  ++m;
  write_ogb(tmp / "twin", csv, 101, m);
  iotest::write_text(tmp / "twin.txt", txt);
  OgbImportOptions oo;
  oo.name = "twin";
  oo.require_split = false;
  Dataset a = import_ogb_raw(tmp / "twin", oo);
  EdgeListOptions eo;
  eo.undirected = true;
  Dataset b = import_edge_list(tmp / "twin.txt", eo, "twin");
  ASSERT_EQ(a.meta.num_nodes, b.meta.num_nodes);
  ASSERT_EQ(a.meta.num_edges, b.meta.num_edges);
  EXPECT_EQ(a.meta.directed, b.meta.directed);
  EXPECT_EQ(a.graph.indices.dtype(), b.graph.indices.dtype());
  EXPECT_EQ(std::memcmp(a.graph.indptr.raw(), b.graph.indptr.raw(), a.graph.indptr.nbytes()), 0);
  EXPECT_EQ(std::memcmp(a.graph.indices.raw(), b.graph.indices.raw(), a.graph.indices.nbytes()), 0);
  // Written and reloaded, both give the same files.
  write_dataset(a, tmp / "a");
  write_dataset(b, tmp / "b");
  for (const char* f : {"indptr.npy", "indices.npy"}) {
    EXPECT_EQ(iotest::slurp(tmp / "a/" + f), iotest::slurp(tmp / "b/" + f)) << f;
  }
}

TEST(Import, OgbRawErrorsNameFileAndLine) {
  TempDir tmp("imp_ogb_bad");
  const std::string root = tmp / "d";
  OgbImportOptions no_split;
  no_split.require_split = false;
  write_ogb(root, "0,1\n1,2\n", 3, 3);
  expect_error([&] { import_ogb_raw(root, no_split); },
               "edge.csv.gz: has 2 edges but " + root + "/raw/num-edge-list.csv.gz says 3");
  write_ogb(root, "0,1\n1,3\n", 3, 2);
  expect_error([&] { import_ogb_raw(root, no_split); },
               "raw/edge.csv.gz:2: node id 3 >= number of nodes 3");
  write_ogb(root, "0,1\n1,2\n", 3, 2);
  iotest::write_gz(root + "/raw/node-label.csv.gz", "1\n2.0\n2.5\n");
  expect_error([&] { import_ogb_raw(root, no_split); },
               "node-label.csv.gz:3: label 2.5 is not a non-negative integer");
  iotest::write_gz(root + "/raw/node-label.csv.gz", "1\nnan\n4.0\n");
  Dataset ds = import_ogb_raw(root, no_split);
  EXPECT_EQ(ds.meta.num_classes, 5);
  EXPECT_EQ(ds.labels.data<int64_t>()[1], -1);
  EXPECT_EQ(ds.meta.num_train + ds.meta.num_valid + ds.meta.num_test, 0);
  // Without --no-split, a directory without a split is an error, not a dataset with none.
  expect_error([&] { import_ogb_raw(root, {}); },
               root +
                   "/raw/split: no split folder (OGB node datasets come with "
                   "split/<name>/{train,valid,test}.csv.gz); pass --no-split");
  iotest::write_gz(root + "/raw/node-feat.csv.gz", "1,2\n3,4\n5\n");
  expect_error([&] { import_ogb_raw(root, no_split); },
               "node-feat.csv.gz:3: expected 2 columns, got 1");
  iotest::write_gz(root + "/raw/node-feat.csv.gz", "1,2\n3,nan\n5,6\n");
  expect_error([&] { import_ogb_raw(root, no_split); },
               "node-feat.csv.gz: feature 1 (column 2) of node 1 is NaN (or an empty field); "
               "features must be finite");
  iotest::write_gz(root + "/raw/node-feat.csv.gz", "1,2\n3,4\n,6\n");
  expect_error([&] { import_ogb_raw(root, no_split); },
               "node-feat.csv.gz: feature 0 (column 1) of node 2 is NaN (or an empty field); "
               "features must be finite");
  iotest::write_gz(root + "/raw/node-feat.csv.gz", "1,2\n3,4\n5,6\n");
  iotest::write_gz(root + "/raw/split/s/train.csv.gz", "0\n3\n");
  expect_error([&] { import_ogb_raw(root, {}); },
               "split/s/train.csv.gz:2: split id out of range: 3 is not in [0, 3)");
  iotest::write_gz(root + "/raw/split/s/train.csv.gz", "0\n2\n");
  // Every file of a split is required.
  expect_error([&] { import_ogb_raw(root, {}); },
               root +
                   "/raw/split/s/valid.csv.gz: missing file (a split has train, valid and "
                   "test ids)");
  iotest::write_gz(root + "/raw/split/s/valid.csv.gz", "1\n");
  iotest::write_gz(root + "/raw/split/s/test.csv.gz", "1\n0\n1\n");
  // A repeated id is named at its line in the CSV file (not blamed on an output file).
  expect_error([&] { import_ogb_raw(root, {}); },
               "split/s/test.csv.gz:3: node 1 appears more than once (first on line 1)");
  iotest::write_gz(root + "/raw/split/s/test.csv.gz", "1\n");
  ds = import_ogb_raw(root, {});
  EXPECT_EQ(ds.meta.feature_dim, 2);
  EXPECT_EQ(ds.features.data<float>()[5], 6.0f);
  EXPECT_EQ(ds.meta.num_train, 2);
  EXPECT_EQ(ds.meta.num_valid, 1);
  EXPECT_EQ(ds.meta.num_test, 1);
  write_ogb(root, "", 0, 0);
  expect_error([&] { import_ogb_raw(root, {}); }, "num-node-list.csv.gz: empty graph");
  std::filesystem::remove(root + "/raw/edge.csv.gz");
  expect_error([&] { import_ogb_raw(root, {}); }, "raw/edge.csv.gz: missing file");
}

}  // namespace
}  // namespace dsp
