// Link-prediction data: the dataset files (link_*.npy), their checks and their round trip.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "error_of.hpp"
#include "graph/dataset.hpp"
#include "graph/io_test_util.hpp"
#include "graph/npy.hpp"

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

}  // namespace
}  // namespace dsp
