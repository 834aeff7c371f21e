#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "graph/dataset.hpp"
#include "graph/dataset_cases.hpp"
#include "graph/io_test_util.hpp"

namespace dsp {
namespace {
using iotest::TempDir;
namespace fs = std::filesystem;

void expect_same(const Array& a, const Array& b, const char* what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(a.defined(), b.defined());
  if (!a.defined()) return;
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.shape(), b.shape());
  if (a.nbytes() > 0) {
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);
  }
}

void expect_same(const Dataset& a, const Dataset& b) {
  EXPECT_EQ(a.meta.to_json(), b.meta.to_json());
  EXPECT_EQ(a.graph.num_nodes, b.graph.num_nodes);
  expect_same(a.graph.indptr, b.graph.indptr, "indptr");
  expect_same(a.graph.indices, b.graph.indices, "indices");
  expect_same(a.graph.weights, b.graph.weights, "weights");
  expect_same(a.features, b.features, "features");
  expect_same(a.labels, b.labels, "labels");
  expect_same(a.train_idx, b.train_idx, "train");
  expect_same(a.valid_idx, b.valid_idx, "valid");
  expect_same(a.test_idx, b.test_idx, "test");
}

TEST(Dataset, WriteLoadRoundTripIsExact) {
  TempDir tmp("ds_rt");
  Dataset ds = iotest::small_dataset();
  EXPECT_EQ(ds.meta.num_nodes, 6);
  EXPECT_EQ(ds.meta.num_edges, 8);
  EXPECT_EQ(ds.meta.num_classes, 3);
  EXPECT_TRUE(ds.meta.has_weights);
  EXPECT_EQ(ds.meta.feature_dim, 4);
  std::string dir = tmp / "small";
  write_dataset(ds, dir);
  for (bool mmap : {true, false}) {
    LoadOptions o;
    o.mmap = mmap;
    Dataset back = load_dataset(dir, o);
    expect_same(ds, back);
    EXPECT_EQ(back.features.is_mapped(), mmap);
    EXPECT_EQ(back.dir, dir);
  }
  // Only the dataset directory exists: no staging or temporary leftovers beside or inside it.
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), {}), 1);
  for (const auto& e : fs::directory_iterator(dir)) {
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
  }

  // A second write refuses to replace the directory unless asked to.
  EXPECT_THROW(write_dataset(ds, dir), IoError);
  ds.meta.name = "renamed";
  write_dataset(ds, dir, /*overwrite=*/true);
  EXPECT_EQ(load_dataset(dir).meta.name, "renamed");
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), {}), 1);
}

TEST(Dataset, MinimalDatasetWithoutOptionalArrays) {
  TempDir tmp("ds_min");
  std::vector<int32_t> s = {0, 1}, d = {1, 2};
  Dataset ds;
  ds.graph = build_in_csr<int32_t>(4, s.data(), d.data(), 2, nullptr);
  ds.sync_meta();
  write_dataset(ds, tmp / "min");
  EXPECT_FALSE(fs::exists(tmp / "min/features.npy"));
  Dataset back = load_dataset(tmp / "min");
  expect_same(ds, back);
  EXPECT_FALSE(back.features.defined());
  EXPECT_EQ(back.meta.num_nodes, 4);
}

TEST(Dataset, StagedDirLeavesNothingWhenTheWriterFails) {
  TempDir tmp("ds_staged");
  std::string dir = tmp / "out";
  try {
    StagedDir staged(dir, false);
    write_file_atomic(staged.file("indptr.npy"), "partial");
    throw std::runtime_error("crash midway");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), {}), 0);

  // An invalid dataset is refused before anything is written.
  Dataset ds = iotest::small_dataset();
  ds.meta.num_edges = 3;
  EXPECT_THROW(write_dataset(ds, dir), FormatError);
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), {}), 0);
}

TEST(Dataset, EveryBrokenDirectoryGivesFileAndFault) {
  TempDir tmp("ds_bad");
  for (const auto& c : iotest::break_cases()) {
    SCOPED_TRACE(c.name);
    std::string dir = tmp / c.name;
    write_dataset(iotest::small_dataset(), dir);
    c.do_break(dir);
    for (bool mmap : {true, false}) {
      LoadOptions o;
      o.mmap = mmap;
      try {
        load_dataset(dir, o);
        ADD_FAILURE() << "loaded a broken dataset";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(dir + "/" + c.expect), std::string::npos)
            << "got:      " << e.what() << "\nexpected: " << dir << "/" << c.expect;
        EXPECT_TRUE(dynamic_cast<const FormatError*>(&e) || dynamic_cast<const IoError*>(&e));
      }
    }
  }
  try {
    load_dataset(tmp / "nowhere");
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("nowhere: no such dataset directory"), std::string::npos);
  }
}

TEST(Dataset, MetaFromJsonRejectsArbitraryJson) {
  const DatasetMeta good = iotest::small_dataset().meta;
  EXPECT_EQ(DatasetMeta::from_json(good.to_json(), "w").to_json(), good.to_json());
  auto bad = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& needle) {
    nlohmann::json j = good.to_json();
    edit(j);
    try {
      DatasetMeta::from_json(j, "meta.json");
      ADD_FAILURE() << "accepted " << j.dump();
    } catch (const FormatError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("meta.json: ", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  bad([](auto& j) { j = nlohmann::json::array({1, 2}); }, "expected a JSON object, got array");
  bad([](auto& j) { j = 5; }, "expected a JSON object");
  bad([](auto& j) { j.erase("num_nodes"); }, "missing key 'num_nodes'");
  bad([](auto& j) { j.erase("format_version"); }, "missing key 'format_version'");
  bad([](auto& j) { j["format_version"] = 2; }, "newer than this build");
  bad([](auto& j) { j["num_edges"] = -1; }, "'num_edges' = -1 must be >= 0");
  bad([](auto& j) { j["num_nodes"] = 1.5; }, "'num_nodes' must be an integer, got number");
  bad([](auto& j) { j["num_nodes"] = 18446744073709551615ull; }, "too large");
  bad([](auto& j) { j["directed"] = "yes"; }, "'directed' must be true or false");
  bad([](auto& j) { j["feature_dtype"] = "int32"; }, "'feature_dtype' = 'int32' is not one of");
  bad([](auto& j) { j["index_dtype"] = nullptr; }, "'index_dtype' must be a string, got null");
  bad([](auto& j) { j["name"] = 3; }, "'name' must be a string");
  bad([](auto& j) { j["num_train"] = 7; }, "'num_train' = 7 exceeds num_nodes = 6");
  bad([](auto& j) { j["extra"] = "x"; }, "'extra' must be an object");
  bad(
      [](auto& j) {
        j["num_nodes"] = int64_t{1} << 32;
        j["index_dtype"] = "int32";
      },
      "int32 cannot hold");
}

}  // namespace
}  // namespace dsp
