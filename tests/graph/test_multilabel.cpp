// Multi-label datasets (labels.npy int8 [N, L], dataset.json "multilabel"): the format's checks,
// the OGB converter's multi-column node-label and the community generator's --multilabel.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
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

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// small_dataset() with 3 labels per node; node 3 unlabeled.
Dataset multilabel_dataset() {
  Dataset ds = iotest::small_dataset();
  std::vector<int8_t> rows = {1, 0, 1, 0, 0, 0, 1, 1, 1, -1, -1, -1, 0, 1, 0, 1, 1, 0};
  ds.labels = Array::from_vector(std::move(rows), {6, 3});
  ds.meta.num_classes = 0;
  ds.sync_meta();
  return ds;
}

TEST(MultiLabel, SyncMetaWriteLoadRoundTrip) {
  TempDir tmp("ml_roundtrip");
  Dataset ds = multilabel_dataset();
  EXPECT_TRUE(ds.meta.multilabel);
  EXPECT_EQ(ds.meta.num_classes, 3);
  write_dataset(ds, tmp / "d");
  const nlohmann::json j = nlohmann::json::parse(read_file(tmp / "d/dataset.json"));
  EXPECT_EQ(j.at("multilabel"), true);
  Dataset back = load_dataset(tmp / "d");
  EXPECT_TRUE(back.meta.multilabel);
  ASSERT_EQ(back.labels.describe(), "int8[6, 3]");
  EXPECT_EQ(std::memcmp(back.labels.raw(), ds.labels.raw(), 18), 0);
  // A single-label dataset does not write the key (older readers see the file they always did).
  write_dataset(iotest::small_dataset(), tmp / "s");
  EXPECT_FALSE(nlohmann::json::parse(read_file(tmp / "s/dataset.json")).contains("multilabel"));
  EXPECT_FALSE(load_dataset(tmp / "s").meta.multilabel);
}

TEST(MultiLabel, WrongKindOrValuesNameLabelsNpy) {
  TempDir tmp("ml_bad");
  const std::string d = tmp / "d";
  write_dataset(multilabel_dataset(), d);
  // An int64 [N] file where dataset.json says multi-label.
  save_npy(d + "/labels.npy", Array::from_vector(std::vector<int64_t>{0, 1, 2, -1, 1, 0}));
  EXPECT_EQ(error_of([&] { load_dataset(d); }),
            d + "/labels.npy: dataset.json says multilabel = true with 3 labels: expected "
                "int8[6, 3] (a row of 0/1 per node), got int64[6]");
  // Rows of the wrong width.
  save_npy(d + "/labels.npy", Array(DType::kInt8, {6, 2}));
  EXPECT_EQ(error_of([&] { load_dataset(d); }),
            d + "/labels.npy: dataset.json says multilabel = true with 3 labels: expected "
                "int8[6, 3] (a row of 0/1 per node), got int8[6, 2]");
  // A value other than 0/1, and a row only partly -1.
  std::vector<int8_t> rows(18, 0);
  rows[4 * 3 + 1] = 2;
  save_npy(d + "/labels.npy", Array::from_vector(rows, {6, 3}));
  EXPECT_EQ(error_of([&] { load_dataset(d); }),
            d + "/labels.npy: label 1 of node 4 is 2; a multi-label row holds 0/1 values, or -1 "
                "in every column (unlabeled)");
  rows[4 * 3 + 1] = 0;
  rows[2 * 3 + 2] = -1;
  save_npy(d + "/labels.npy", Array::from_vector(rows, {6, 3}));
  EXPECT_EQ(error_of([&] { load_dataset(d); }),
            d + "/labels.npy: label 2 of node 2 is -1; a multi-label row holds 0/1 values, or -1 "
                "in every column (unlabeled)");
  // An int8 [N, L] file where dataset.json says single-label.
  iotest::edit_json(d, [](nlohmann::json& j) { j.erase("multilabel"); });
  save_npy(d + "/labels.npy", Array(DType::kInt8, {6, 3}));
  EXPECT_EQ(error_of([&] { load_dataset(d); }),
            d + "/labels.npy: int8[6, 3] is a multi-label file but dataset.json does not say "
                "\"multilabel\": true; expected int64[6]");
  // write_dataset refuses the same (validated before anything is written).
  Dataset bad = multilabel_dataset();
  bad.meta.multilabel = false;
  EXPECT_EQ(error_of([&] { write_dataset(bad, tmp / "w"); }),
            tmp /
                "w/labels.npy: int8[6, 3] is a multi-label file but dataset.json does not say "
                "\"multilabel\": true; expected int64[6]");
  EXPECT_FALSE(std::filesystem::exists(tmp / "w"));
  // multilabel without label columns.
  iotest::edit_json(d, [](nlohmann::json& j) {
    j["multilabel"] = true;
    j["num_classes"] = 0;
  });
  EXPECT_EQ(error_of([&] { load_dataset(d); }),
            d + "/dataset.json: 'multilabel' is true but num_classes is 0 (it counts the label "
                "columns)");
}

void write_ogb(const std::string& root, const std::string& labels) {
  iotest::write_gz(root + "/raw/edge.csv.gz", "0,1\n1,2\n2,3\n");
  iotest::write_gz(root + "/raw/num-node-list.csv.gz", "4\n");
  iotest::write_gz(root + "/raw/num-edge-list.csv.gz", "3\n");
  iotest::write_gz(root + "/raw/node-label.csv.gz", labels);
}

TEST(MultiLabel, OgbMultiColumnNodeLabelConverts) {
  TempDir tmp("ml_ogb");
  const std::string root = tmp / "proteins";
  OgbImportOptions o;
  o.require_split = false;
  write_ogb(root, "1,0,1\n0,0,0\n,,\n1,1,0\n");  // node 2: every field empty, unlabeled
  Dataset ds = import_ogb_raw(root, o);
  EXPECT_TRUE(ds.meta.multilabel);
  EXPECT_EQ(ds.meta.num_classes, 3);
  ASSERT_EQ(ds.labels.describe(), "int8[4, 3]");
  const std::vector<int8_t> want = {1, 0, 1, 0, 0, 0, -1, -1, -1, 1, 1, 0};
  EXPECT_EQ(std::vector<int8_t>(ds.labels.data<int8_t>(), ds.labels.data<int8_t>() + 12), want);
  // The out-of-core converter writes the same dataset.
  write_dataset(ds, tmp / "a");
  OutOfCoreImportOptions w;
  w.memory_budget = uint64_t{1} << 30;
  w.sort_buffer_bytes = 1 << 12;
  import_ogb_to_dir(root, o, tmp / "b", w);
  Dataset b = load_dataset(tmp / "b");
  EXPECT_TRUE(b.meta.multilabel);
  EXPECT_EQ(iotest::slurp(tmp / "a/labels.npy"), iotest::slurp(tmp / "b/labels.npy"));

  write_ogb(root, "1,0,1\n0,0\n0,0,0\n1,1,0\n");
  EXPECT_EQ(error_of([&] { import_ogb_raw(root, o); }),
            root + "/raw/node-label.csv.gz:2: expected 3 columns, got 2");
  write_ogb(root, "1,0,1\n0,0,0\n0,2,0\n1,1,0\n");
  EXPECT_EQ(error_of([&] { import_ogb_raw(root, o); }),
            root +
                "/raw/node-label.csv.gz:3: label 1 (column 2) is 2; multi-label values must "
                "be 0 or 1 (or every field of the line empty: unlabeled)");
  write_ogb(root, "1,0,1\n0,0,0\n0,,0\n1,1,0\n");
  EXPECT_EQ(error_of([&] { import_ogb_raw(root, o); }),
            root +
                "/raw/node-label.csv.gz:3: label 1 (column 2) is nan; multi-label values "
                "must be 0 or 1 (or every field of the line empty: unlabeled)");
  write_ogb(root, "1,0,1\n0,0,0\n0,1,0\n");
  EXPECT_EQ(error_of([&] { import_ogb_raw(root, o); }),
            root + "/raw/node-label.csv.gz: has 3 rows but the graph has 4 nodes");
}

CommunityOptions multilabel_community() {
  CommunityOptions o;
  o.num_nodes = 4000;
  o.num_edges = 30000;
  o.num_communities = 16;
  o.feature_dim = 16;
  o.multilabel = o.num_classes = 12;
  o.seed = 5;
  return o;
}

TEST(MultiLabel, GeneratedLabelsPlantedOnCommunities) {
  const CommunityOptions o = multilabel_community();
  std::vector<int32_t> comm;
  Dataset ds = generate_community(o, &comm);
  EXPECT_TRUE(ds.meta.multilabel);
  EXPECT_EQ(ds.meta.num_classes, 12);
  ASSERT_EQ(ds.labels.describe(), "int8[4000, 12]");
  const int8_t* y = ds.labels.data<int8_t>();
  // Every column's positive rate is far from 0 and 1; the label noise (0.1) flips about 5% of the
  // entries away from the community's set.
  const int64_t n = o.num_nodes, L = o.multilabel, k = o.num_communities;
  std::vector<std::vector<int64_t>> pos(k, std::vector<int64_t>(L, 0));
  std::vector<int64_t> size(k, 0);
  for (int64_t v = 0; v < n; ++v) {
    ++size[comm[v]];
    for (int64_t j = 0; j < L; ++j) {
      ASSERT_TRUE(y[v * L + j] == 0 || y[v * L + j] == 1);
      pos[comm[v]][j] += y[v * L + j];
    }
  }
  int64_t agree = 0;
  for (int64_t j = 0; j < L; ++j) {
    int64_t col = 0, on_communities = 0;
    for (int64_t c = 0; c < k; ++c) {
      col += pos[c][j];
      const bool on = 2 * pos[c][j] > size[c];  // the community's majority is its planted value
      on_communities += on;
      agree += on ? pos[c][j] : size[c] - pos[c][j];
    }
    const double rate = static_cast<double>(col) / static_cast<double>(n);
    EXPECT_GT(rate, 0.15) << "column " << j;
    EXPECT_LT(rate, 0.5) << "column " << j;
    EXPECT_EQ(on_communities, 5) << "column " << j;  // round(0.3 * 16)
  }
  const double agreement = static_cast<double>(agree) / static_cast<double>(n * L);
  EXPECT_NEAR(agreement, 0.95, 0.01);
  EXPECT_DOUBLE_EQ(ds.meta.extra.at("label_agreement_bound").get<double>(), 0.95);
  // Validated as a dataset.
  EXPECT_NO_THROW(validate_dataset(ds, "generated"));
}

TEST(MultiLabel, GeneratedDeterministicAndOutOfCoreIdentical) {
  TempDir tmp("ml_gen");
  CommunityOptions o = multilabel_community();
  Dataset a = generate_community(o), b = generate_community(o);
  ASSERT_EQ(a.labels.nbytes(), b.labels.nbytes());
  EXPECT_EQ(std::memcmp(a.labels.raw(), b.labels.raw(), a.labels.nbytes()), 0);
  o.seed = 6;
  Dataset c = generate_community(o);
  EXPECT_NE(std::memcmp(a.labels.raw(), c.labels.raw(), a.labels.nbytes()), 0);
  o.seed = 5;
  GenerateWriteOptions w;
  w.memory_budget = uint64_t{1} << 40;
  write_community(o, tmp / "mem", w);
  w.force_out_of_core = true;
  w.sort_buffer_bytes = 64 << 10;
  const GenerateResult r = write_community(o, tmp / "ooc", w);
  EXPECT_TRUE(r.out_of_core);
  for (const char* f : {"labels.npy", "features.npy", "indices.npy", "dataset.json"}) {
    EXPECT_EQ(iotest::slurp(tmp / "mem/" + f), iotest::slurp(tmp / "ooc/" + f)) << f;
  }
  EXPECT_TRUE(load_dataset(tmp / "ooc").meta.multilabel);
}

TEST(MultiLabel, GenerateCommandOptions) {
  CommunityCommand cmd;
  cmd.o = multilabel_community();
  cmd.o.num_classes = CommunityOptions{}.num_classes;  // --classes left out
  cmd.validate();
  EXPECT_EQ(cmd.o.num_classes, 12);
  CommunityCommand bad;
  bad.o = multilabel_community();
  bad.o.num_classes = 5;
  EXPECT_EQ(error_of([&] { bad.validate(); }),
            "--multilabel 12 gives every node 12 labels; --classes 5 contradicts it (leave "
            "--classes out)");
  CommunityOptions t = multilabel_community();
  t.temporal = true;
  EXPECT_EQ(error_of([&] { generate_community(t); }),
            "--multilabel 12: needs 1 to 127 labels, num_classes equal to it (got 12), at least 2 "
            "communities (got 16) and no --temporal");
  // The flag is declared in the generator's option table (the CLI, --config and Python read it).
  bool found = false;
  for (const auto& opt : community_options()) found |= opt.flag == "--multilabel";
  EXPECT_TRUE(found);
}

// The CLI end to end: generate --multilabel, convert an OGB multi-label directory, dsp info.
TEST(MultiLabel, CliGenerateConvertInfo) {
  TempDir tmp("ml_cli");
  auto r = iotest::run_cli(
      "generate community " + tmp / "g" + " -n 500 -m 3000 -k 5 -f 4 --multilabel 6", tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("6 labels per node (multi-label)"), std::string::npos) << r.out;
  r = iotest::run_cli("info " + tmp / "g", tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("labels       multi-label, 6 columns\n"), std::string::npos) << r.out;
  r = iotest::run_cli("generate community " + tmp / "h" + " -n 500 -m 3000 -c 4 --multilabel 6",
                      tmp);
  EXPECT_EQ(r.exit_code, 2);  // a bad argument
  EXPECT_NE(r.err.find("--multilabel 6 gives every node 6 labels; --classes 4 contradicts it"),
            std::string::npos)
      << r.err;
  write_ogb(tmp / "ogb", "1,0\n0,1\n1,1\n0,0\n");
  r = iotest::run_cli("convert --from ogb --no-split " + tmp / "ogb " + tmp / "c", tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = iotest::run_cli("info " + tmp / "c", tmp);
  EXPECT_NE(r.out.find("labels       multi-label, 2 columns\n"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace dsp
