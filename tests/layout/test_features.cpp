// The feature store's device seam (layout/store/feature_backend.hpp): every backend of this binary
// (tests/backends.hpp: host memory and the device path executed on the host here, the CUDA
// backend in the CUDA build's test_layout_backends_cuda) gathers exactly features[ids], bit for
// bit, for row sizes that take every copy width (16, 8, 4, 2, 1 bytes), hot and cold rows, from a
// read-only file mapping. Multi-rank gathers (remote-hot rows) are in mpi/test_layout_mpi.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>

#include "backends.hpp"
#include "ccc/communicator.hpp"
#include "core/fs.hpp"
#include "core/huge_pages.hpp"
#include "core/rng.hpp"
#include "layout/store/feature_store.hpp"

namespace dsp {
namespace {

// Features [N, F] of dtype `dt` written to a file and mapped read-only, as a partition of one part
// holds them; every 3rd node in the cached (hot) list. The file is removed once mapped, or with
// the rig when `keep_file` (a test rewrites it under the mapping).
struct FeatureRig {
  PartitionData part;
  std::vector<unsigned char> bytes;
  size_t row_bytes;
  std::string path;
  FeatureRig(int64_t n, int64_t f, DType dt, bool keep_file = false) {
    row_bytes = static_cast<size_t>(f) * dtype_size(dt);
    bytes.resize(n * row_bytes);
    RngStream s(rng_key(9, n, f), 0);
    for (auto& b : bytes) b = static_cast<unsigned char>(s.next_u32());
    path = (std::filesystem::temp_directory_path() /
            fmt::format("dsp_features_{}_{}_{}.bin", ::getpid(), n, f))
               .string();
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    auto mf = std::make_shared<MappedFile>(path);
    if (!keep_file) std::filesystem::remove(path);
    part.meta.parts = 1;
    part.meta.num_nodes = n;
    part.meta.offsets = {0, n};
    part.part = 0;
    part.features = Array(dt, {n, f}, mf->data(), mf);
    std::vector<int64_t> cached;
    for (int64_t v = n - 1; v >= 0; v -= 3) cached.push_back(v);
    part.cached = Array::from_vector(std::move(cached));
  }
  ~FeatureRig() { std::filesystem::remove(path); }
  FeatureRig(const FeatureRig&) = delete;
  FeatureRig& operator=(const FeatureRig&) = delete;
  std::vector<unsigned char> expect(const std::vector<int64_t>& ids) const {
    std::vector<unsigned char> out(ids.size() * row_bytes);
    for (size_t i = 0; i < ids.size(); ++i) {
      std::memcpy(out.data() + i * row_bytes, bytes.data() + ids[i] * row_bytes, row_bytes);
    }
    return out;
  }
};

class BackendGather : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { DSP_SKIP_UNAVAILABLE_BACKEND(GetParam()); }
};

TEST_P(BackendGather, RowsEqualFeaturesBitForBit) {
  struct Shape {
    int64_t n, f;
    DType dt;
  };
  auto comm = make_communicator("self");
  for (Shape sh : {Shape{3000, 100, DType::kFloat32}, Shape{2000, 6, DType::kFloat32},
                   Shape{2000, 3, DType::kFloat32}, Shape{1500, 7, DType::kFloat16},
                   Shape{1000, 1, DType::kUInt8}, Shape{10, 1024, DType::kFloat32}}) {
    SCOPED_TRACE(std::to_string(sh.n) + "x" + std::to_string(sh.f));
    FeatureRig rig(sh.n, sh.f, sh.dt);
    FeatureStore store(rig.part, *comm, {}, test::feature_backend(GetParam()));
    EXPECT_EQ(store.format().row_bytes, rig.row_bytes);
    std::vector<int64_t> ids(sh.n);
    std::iota(ids.begin(), ids.end(), 0);
    RngStream s(rng_key(1, sh.n), 0);
    for (int64_t i = sh.n - 1; i > 0; --i) std::swap(ids[i], ids[s.uniform_int(i + 1)]);
    ids.resize(sh.n * 2 / 3);
    EXPECT_EQ(store.gather(ids), rig.expect(ids));
    EXPECT_GT(store.stats().rows_local_hot, 0);
    EXPECT_GT(store.stats().rows_cold, 0);
    EXPECT_TRUE(store.gather(std::vector<int64_t>{}).empty());
  }
}

// A gather into backend memory waits on the device once and reads nothing back (the issue's
// bound: at most 1 read per gather), whatever the number of rows; a host backend does neither.
// Counted by the executor (core/host_traffic.hpp), so the emulated figure is CUDA's.
TEST_P(BackendGather, OneSyncAndNoReadPerGatherWhateverItsSize) {
  auto comm = make_communicator("self");
  FeatureRig rig(3000, 16, DType::kFloat32);
  FeatureStore store(rig.part, *comm, {}, test::feature_backend(GetParam()));
  const bool device = store.backend().name() != "host";
  for (int64_t n : {10, 2000}) {
    SCOPED_TRACE(n);
    std::vector<int64_t> ids(n);
    std::iota(ids.begin(), ids.end(), 500);
    std::shared_ptr<void> out = store.allocate_rows(n);
    store.reset_stats();
    store.gather(ids.data(), n, out.get());
    EXPECT_EQ(store.stats().host.syncs, device ? 1 : 0);
    EXPECT_EQ(store.stats().host.reads, 0);
  }
}

// Output rows come from a pool and the work buffers are the executor's, grown geometrically: a
// gather like one before it (the earlier batch's rows released) allocates nothing.
TEST_P(BackendGather, AGatherLikeAnEarlierOneAllocatesNothing) {
  auto comm = make_communicator("self");
  FeatureRig rig(3000, 16, DType::kFloat32);
  FeatureStore store(rig.part, *comm, {}, test::feature_backend(GetParam()));
  const bool device = store.backend().name() != "host";
  std::vector<int64_t> ids(2000);
  std::iota(ids.begin(), ids.end(), 500);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    store.reset_stats();
    std::shared_ptr<void> out = store.allocate_rows(round == 2 ? 1000 : 2000);
    store.gather(ids.data(), round == 2 ? 1000 : 2000, out.get());
    if (round == 0) {
      EXPECT_EQ(store.stats().host.allocations > 0, device);  // counted at all
    } else {
      EXPECT_EQ(store.stats().host.allocations, 0);
    }
  }
}

// Output rows lent to a consumer on another stream (the trainer's kernels) come back at its
// release point: a buffer whose consumer recorded the fence is reused after one device-side wait
// (no host wait), one whose consumer recorded nothing without any; host memory has no fence.
TEST_P(BackendGather, LentRowsComeBackThroughTheirReleaseFence) {
  auto comm = make_communicator("self");
  FeatureRig rig(3000, 16, DType::kFloat32);
  FeatureStore store(rig.part, *comm, {}, test::feature_backend(GetParam()));
  const bool device = store.backend().name() != "host";
  std::vector<int64_t> ids(1000);
  std::iota(ids.begin(), ids.end(), 100);
  for (const bool record : {true, false}) {
    SCOPED_TRACE(record);
    {
      std::shared_ptr<ReleaseFence> fence;
      std::shared_ptr<void> out = store.allocate_rows(1000, &fence);
      store.gather(ids.data(), 1000, out.get());
      EXPECT_EQ(fence != nullptr, device);
      if (fence && record) fence->record(nullptr);
    }  // let go: back in the pool, the last returned
    store.reset_stats();
    std::shared_ptr<void> again = store.allocate_rows(1000);
    store.gather(ids.data(), 1000, again.get());
    EXPECT_EQ(store.stats().host.stream_waits, device && record ? 1 : 0);
  }
}

TEST_P(BackendGather, BadIdsRejectedAndStoreStillWorks) {
  auto comm = make_communicator("self");
  FeatureRig rig(500, 5, DType::kFloat32);
  FeatureStore store(rig.part, *comm, {}, test::feature_backend(GetParam()));
  try {
    store.gather(std::vector<int64_t>{4, 9, 4});
    FAIL() << "duplicate accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("gather: id 4 is requested twice"), std::string::npos);
  }
  try {
    store.gather(std::vector<int64_t>{3, 500});
    FAIL() << "out-of-range id accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("gather: id 500 at position 1 is out of range [0, 500)"),
              std::string::npos);
  }
  std::vector<int64_t> ids = {4, 9, 499, 0};
  EXPECT_EQ(store.gather(ids), rig.expect(ids));
}

// Features read by reference (--feature-storage reference): node v's row is row row_of[v] of the
// mapped file. The gather returns those rows bit for bit, hot and cold, whether the host backend
// copies them into memory in node order (it fits) or reads every row through the map
// (DSP_HUGE_PAGES=0: no copy).
TEST_P(BackendGather, RowsThroughTheRowMapEqualTheMappedRows) {
  auto comm = make_communicator("self");
  const int64_t n = 1200;
  FeatureRig rig(n, 7, DType::kFloat32);
  std::vector<int64_t> row_of(n);
  std::iota(row_of.begin(), row_of.end(), 0);
  RngStream s(rng_key(3, n), 0);
  for (int64_t i = n - 1; i > 0; --i) std::swap(row_of[i], row_of[s.uniform_int(i + 1)]);
  rig.part.feature_rows = Array::from_vector(std::vector<int64_t>(row_of));
  std::vector<int64_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) std::swap(ids[i], ids[s.uniform_int(i + 1)]);
  ids.resize(n / 2);
  std::vector<int64_t> stored(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) stored[i] = row_of[ids[i]];
  for (const char* huge : {"1", "0"}) {
    SCOPED_TRACE(std::string("DSP_HUGE_PAGES=") + huge);
    ::setenv("DSP_HUGE_PAGES", huge, 1);
    FeatureStore store(rig.part, *comm, {}, test::feature_backend(GetParam()));
    EXPECT_EQ(store.gather(ids), rig.expect(stored));
    EXPECT_GT(store.stats().rows_local_hot, 0);
    EXPECT_GT(store.stats().rows_cold, 0);
  }
  ::unsetenv("DSP_HUGE_PAGES");
}

// A store over `rig`'s rows read by reference (row_of: a shuffle), built as one whose features
// are beyond the rank's memory share (DSP_BEYOND_MEMORY) and read through their mapping (no
// huge-page copy).
std::unique_ptr<FeatureStore> beyond_memory_store(FeatureRig& rig, int64_t n, Communicator& comm,
                                                  const std::string& backend,
                                                  std::vector<int64_t>* row_of) {
  row_of->resize(n);
  std::iota(row_of->begin(), row_of->end(), 0);
  RngStream s(rng_key(4, n), 0);
  for (int64_t i = n - 1; i > 0; --i) std::swap((*row_of)[i], (*row_of)[s.uniform_int(i + 1)]);
  rig.part.feature_rows = Array::from_vector(std::vector<int64_t>(*row_of));
  ::setenv("DSP_HUGE_PAGES", "0", 1);
  ::setenv("DSP_BEYOND_MEMORY", "1", 1);
  EXPECT_TRUE(beyond_memory_share(rig.bytes.size()));
  auto store = std::make_unique<FeatureStore>(rig.part, comm, std::vector<Array>{},
                                              test::feature_backend(backend));
  ::unsetenv("DSP_BEYOND_MEMORY");
  ::unsetenv("DSP_HUGE_PAGES");
  return store;
}

// The file's bytes changed under the mapping (each byte + 1): where a row is read from shows.
std::vector<unsigned char> rewrite(const FeatureRig& rig) {
  std::vector<unsigned char> now = rig.bytes;
  for (auto& b : now) b = static_cast<unsigned char>(b + 1);
  std::ofstream(rig.path, std::ios::binary | std::ios::in | std::ios::out)
      .write(reinterpret_cast<const char*>(now.data()), static_cast<std::streamsize>(now.size()));
  return now;
}

bool is_hot(const FeatureRig& rig, int64_t v) {
  const int64_t* hot = rig.part.cached.data<int64_t>();
  return std::find(hot, hot + rig.part.cached.dim(0), v) != hot + rig.part.cached.dim(0);
}

// Features beyond the rank's memory share (no huge-page copy): the host backend reads its rows on
// many threads at once, each waiting on its page, and every backend serves a hot row from the
// cache copy it took at load, a cold one from the file. Rewriting the file under the mapping
// after the load shows where each row was read: hot rows are the load's bytes, cold rows the
// file's new ones, bit for bit, through the row map.
TEST_P(BackendGather, BeyondMemoryHotRowsFromTheCacheCopyColdRowsFromTheFile) {
  auto comm = make_communicator("self");
  const int64_t n = 6000;
  FeatureRig rig(n, 9, DType::kFloat32, /*keep_file=*/true);
  std::vector<int64_t> row_of;
  std::unique_ptr<FeatureStore> store = beyond_memory_store(rig, n, *comm, GetParam(), &row_of);
  const std::vector<unsigned char> now = rewrite(rig);
  std::vector<int64_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  RngStream s(rng_key(5, n), 0);
  for (int64_t i = n - 1; i > 0; --i) std::swap(ids[i], ids[s.uniform_int(i + 1)]);
  ids.resize(n * 2 / 3);  // chunks for several threads
  std::vector<unsigned char> expect(ids.size() * rig.row_bytes);
  for (size_t i = 0; i < ids.size(); ++i) {
    std::memcpy(expect.data() + i * rig.row_bytes,
                (is_hot(rig, ids[i]) ? rig.bytes : now).data() + row_of[ids[i]] * rig.row_bytes,
                rig.row_bytes);
  }
  EXPECT_EQ(store->gather(ids), expect);
  EXPECT_EQ(store->stats().rows_local_hot + store->stats().rows_cold,
            static_cast<int64_t>(ids.size()));
  EXPECT_GT(store->stats().rows_local_hot, 0);
  EXPECT_GT(store->stats().rows_cold, 0);
}

// Superbatches: read_ahead reads the cold rows of the ids it is given (repeats and hot ids
// among them) in one sweep; gathers then serve those from that copy, until the next call replaces
// it. The file rewritten after the call shows it: those cold rows are the sweep's bytes, other
// cold rows the file's new ones, hot rows the cache copy's. The device backend, whose cold rows
// come from host memory it maps, reads nothing ahead and says so.
TEST_P(BackendGather, ReadAheadServesTheGroupsColdRowsFromOneSweep) {
  auto comm = make_communicator("self");
  const int64_t n = 20000;  // 36-byte rows
  FeatureRig rig(n, 9, DType::kFloat32, /*keep_file=*/true);
  std::vector<int64_t> row_of;
  std::unique_ptr<FeatureStore> store = beyond_memory_store(rig, n, *comm, GetParam(), &row_of);
  const bool reads = store->backend().reads_ahead();
  EXPECT_EQ(reads, GetParam() == "cpu");
  // The nodes stored in rows [0, 1000), [9000, 10000) and [18000, 19000): three pieces of the
  // file 288 KB apart (more than a piece's gap); a tenth of them twice.
  auto swept_row = [&](int64_t v) { return row_of[v] % 9000 < 1000; };
  std::vector<int64_t> ahead;
  for (int64_t v = 0; v < n; ++v) {
    if (swept_row(v)) ahead.push_back(v);
    if (swept_row(v) && v % 10 == 0) ahead.push_back(v);
  }
  store->backend().read_ahead(ahead.data(), static_cast<int64_t>(ahead.size()));
  const std::vector<unsigned char> now = rewrite(rig);
  std::vector<int64_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  auto expect = [&](bool from_sweep) {
    std::vector<unsigned char> out(ids.size() * rig.row_bytes);
    int64_t swept = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      const int64_t v = ids[i];
      const bool hot = is_hot(rig, v), in_sweep = from_sweep && !hot && swept_row(v);
      swept += in_sweep;
      std::memcpy(out.data() + i * rig.row_bytes,
                  (hot || in_sweep ? rig.bytes : now).data() + row_of[v] * rig.row_bytes,
                  rig.row_bytes);
    }
    return std::make_pair(out, swept);
  };
  const auto [first, swept] = expect(reads);
  EXPECT_EQ(store->gather(ids), first);
  EXPECT_EQ(store->stats().rows_cold_ahead, swept);
  if (reads) {
    EXPECT_GT(swept, n / 10);
  }
  store->backend().read_ahead(nullptr, 0);  // freed: every cold row from the file again
  EXPECT_EQ(store->gather(ids), expect(false).first);
  EXPECT_EQ(store->stats().rows_cold_ahead, swept);
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendGather, ::testing::ValuesIn(test::backend_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dsp
