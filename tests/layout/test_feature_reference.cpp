// A partition that reads the dataset's features by reference (--feature-storage reference,
// layout/partition/partition.hpp): no features.npy, the ranks map the dataset's file and read row
// new2old[v] for node v. What a user relies on: every rank gathers exactly the rows a copying
// partition gives, a dataset changed or moved under the partition is refused by name, and the disk
// a partition takes is estimated before it is written (layout/partition/partition_disk.hpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "ccc/communicator.hpp"
#include "core/disk.hpp"
#include "core/memory.hpp"
#include "error_of.hpp"
#include "graph/dataset.hpp"
#include "graph/npy.hpp"
#include "layout/layout_fixtures.hpp"
#include "layout/partition/partition.hpp"
#include "layout/partition/partition_disk.hpp"
#include "layout/store/feature_store.hpp"

namespace dsp {
namespace {
namespace fs = std::filesystem;
using test::error_of;
using testing::cora;
using testing::temp_dir;

// Cora as a dataset directory, partitioned into 3 parts by `method` with features copied and by
// reference.
struct ReferenceRig {
  std::string data = temp_dir("ref_data"), copy = temp_dir("ref_copy"), ref = temp_dir("ref_ref");
  PartitionOptions o;
  explicit ReferenceRig(const std::string& method) {
    write_dataset(cora(), data, false);
    const Dataset ds = load_dataset(data);
    o.parts = 3;
    o.method = parse_choice<PartitionMethod>(method);
    o.verbose = false;
    partition_dataset(ds, o, copy);
    o.feature_storage = FeatureStorage::kReference;
    partition_dataset(ds, o, ref);
  }
  ~ReferenceRig() {
    for (const std::string& d : {data, copy, ref}) fs::remove_all(d);
  }
};

// Every node's row, gathered by a one-rank store over part p's view (the other parts' rows are
// cold rows of the shared file either way).
std::vector<unsigned char> all_rows(const std::string& dir, int p) {
  PartitionData d = load_partition(dir, p);
  d.meta.parts = 1;
  d.meta.offsets = {0, d.meta.num_nodes};
  d.part = 0;
  auto comm = make_communicator("self");
  FeatureStore store(d, *comm, {d.cached});
  std::vector<int64_t> ids(d.meta.num_nodes);
  std::iota(ids.begin(), ids.end(), 0);
  return store.gather(ids);
}

TEST(FeatureReference, GathersTheRowsACopyingPartitionHolds) {
  for (const char* method : {"random", "metis"}) {
    SCOPED_TRACE(method);
    ReferenceRig rig(method);
    EXPECT_TRUE(fs::exists(rig.copy + "/features.npy"));
    EXPECT_FALSE(fs::exists(rig.ref + "/features.npy"));
    const PartitionMeta m = load_partition_meta(rig.ref);
    EXPECT_EQ(m.feature_source, fs::canonical(rig.data + "/features.npy").string());
    // Everything but the features is the same directory.
    EXPECT_EQ(m.partition_id, load_partition_meta(rig.copy).partition_id);
    for (int p = 0; p < 3; ++p) {
      const PartitionData d = load_partition(rig.ref, p, 3);
      ASSERT_TRUE(d.feature_rows.defined());
      EXPECT_EQ(all_rows(rig.ref, p), all_rows(rig.copy, p)) << "part " << p;
    }
  }
}

TEST(FeatureReference, AChangedOrMovedDatasetIsRefusedByName) {
  ReferenceRig rig("random");
  const std::string src = fs::canonical(rig.data + "/features.npy").string();
  {  // one value of one row changed in place: the fingerprint covers every row of Cora
    Array f = load_npy(src, DType::kFloat32, 2, /*mmap=*/false);
    std::fstream io(src, std::ios::in | std::ios::out | std::ios::binary);
    const auto header = static_cast<std::streamoff>(fs::file_size(src) - f.nbytes());
    io.seekp(header + 1433 * 4 * 1000 + 8);
    const float x = 123.5f;
    io.write(reinterpret_cast<const char*>(&x), sizeof(x));
  }
  EXPECT_EQ(error_of([&] { load_partition(rig.ref, 0, 3); }),
            fmt::format("{}: not the features {}/partition.json was made from (float32[2708, "
                        "1433], expected 2708 nodes x 1433 features, or other values): the "
                        "dataset changed; partition it again",
                        src, rig.ref));
  fs::remove(src);
  EXPECT_EQ(error_of([&] { load_partition(rig.ref, 1, 3); }),
            fmt::format("{}/partition.json: its features are read from {} (--feature-storage "
                        "reference), which is missing: the dataset was moved or removed; "
                        "partition it again",
                        rig.ref, src));
}

TEST(FeatureReference, RefusedWhereTheRowsCannotBeReadAsTheyAre) {
  const std::string data = temp_dir("ref_refused");
  write_dataset(cora(), data, false);
  const Dataset ds = load_dataset(data);
  PartitionOptions o;
  o.parts = 2;
  o.method = PartitionMethod::kRandom;
  o.verbose = false;
  o.feature_storage = FeatureStorage::kReference;
  o.feature_dtype = FeatureDtype::kFloat16;
  const std::string out = temp_dir("ref_refused_out");
  EXPECT_EQ(error_of([&] { partition_dataset(ds, o, out); }),
            fmt::format("--feature-storage reference reads {}/features.npy through the id map: it "
                        "needs a homogeneous dataset directory with node features and "
                        "--feature-dtype keep",
                        data));
  o.feature_dtype = FeatureDtype::kKeep;
  EXPECT_EQ(error_of([&] { parse_choice<FeatureStorage>("link"); }),
            "unknown feature storage 'link' (copy, reference)");
  EXPECT_FALSE(fs::exists(out));
  fs::remove_all(data);
}

uint64_t tree_bytes(const std::string& dir) {
  uint64_t b = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) b += e.file_size();
  }
  return b;
}

// The estimate is what the writer writes, less the .npy headers and partition.json / part.json
// (a few KiB), for both storages; it counts the features only when they are copied.
TEST(FeatureReference, DiskEstimateIsWhatThePartitionTakes) {
  ReferenceRig rig("random");
  const DatasetMeta meta = load_dataset_meta(rig.data);
  PartitionOptions o = rig.o;
  for (const char* storage : {"copy", "reference"}) {
    SCOPED_TRACE(storage);
    o.feature_storage = parse_choice<FeatureStorage>(storage);
    const PartitionDisk d = estimate_partition_disk(meta, o);
    const uint64_t actual =
        tree_bytes(o.feature_storage == FeatureStorage::kCopy ? rig.copy : rig.ref);
    EXPECT_LE(d.total(), actual);
    EXPECT_GE(d.total() + 64 * 1024, actual);
    EXPECT_EQ(d.features, o.feature_storage == FeatureStorage::kCopy ? 2708ull * 1433 * 4 : 0ull);
  }
  o.feature_storage = FeatureStorage::kCopy;
  const uint64_t need = estimate_partition_disk(meta, o).total();
  const std::string out = temp_dir("ref_disk_out");
  EXPECT_EQ(
      error_of([&] {
        check_disk("dsp partition", out, need, need - 1, "free some, or choose another OUT");
      }),
      fmt::format("dsp partition needs about {} of disk in {} but {} is free: free some, or "
                  "choose another OUT",
                  format_bytes(need), fs::temp_directory_path().string(), format_bytes(need - 1)));
  EXPECT_EQ(error_of([&] { check_disk("dsp partition", out, need, need, "x"); }), "no error");
}

}  // namespace
}  // namespace dsp
