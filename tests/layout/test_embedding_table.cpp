// EmbeddingTable (layout/store/embedding_table.hpp) on one rank (the self communicator): initial
// rows keyed by dataset id whatever the partition's numbering; adam and adagrad steps equal the
// dense reference (tests/layout/embedding_reference.hpp) bitwise, repeats summed, untouched rows
// and their state unchanged; save -> load continues bitwise; load refuses another dim, range,
// optimizer, partition or a damaged byte with its exact message and leaves the table as it was.
// Every table test runs on each storage (test::embedding_storages(): host and the emulated device
// storage here), and a file saved from one loads into the other and continues bitwise.
// Multi-rank gathers and gradient sums are in mpi/test_layout_mpi.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "ccc/communicator.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/memory.hpp"
#include "core/rng.hpp"
#include "error_of.hpp"
#include "layout/embedding_reference.hpp"
#include "layout/layout_fixtures.hpp"
#include "layout/store/embedding_table.hpp"

namespace dsp {
namespace {

using test::error_of;

constexpr int64_t kN = 40;

// The storage the current test runs on (test::embedding_storages()), and its factory.
std::string g_storage = "host";
EmbeddingStorageFactory S() { return test::embedding_storage(g_storage); }

class EmbeddingTableOn : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string why = test::embedding_storage_unavailable(GetParam());
    if (!why.empty()) GTEST_SKIP() << "storage " << GetParam() << ": " << why;
    g_storage = GetParam();
  }
  void TearDown() override { g_storage = "host"; }
};

EmbeddingOptions options(EmbeddingOptimizer optimizer, int64_t dim = 6) {
  EmbeddingOptions o;
  o.dim = dim;
  o.optimizer = optimizer;
  o.lr = 0.05;
  o.seed = 11;
  o.init_scale = 0.25;
  return o;
}

// A numbering of kN dataset nodes: new2old[v] is the dataset id of global id v.
std::vector<int64_t> shuffled(uint64_t seed) {
  std::vector<int64_t> p(kN);
  std::iota(p.begin(), p.end(), 0);
  RngStream rs(seed, 0);
  for (int64_t i = kN - 1; i > 0; --i) std::swap(p[i], p[rs.uniform_int(i + 1)]);
  return p;
}

std::vector<int64_t> all_ids() {
  std::vector<int64_t> ids(kN);
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

bool same_bits(const float* a, const float* b, int64_t n) {
  return n == 0 || std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0;
}

// Step k's request: `n` ids drawn from [0, kN / 2) (so rows kN/2.. stay untouched, and repeats
// occur), uniform gradients in [-1, 1).
struct Request {
  std::vector<int64_t> ids;
  std::vector<float> grads;
};

Request request(int k, int64_t n, int64_t dim, int64_t range = kN / 2) {
  Request r;
  RngStream rs(rng_key(5, k), 1);
  for (int64_t i = 0; i < n; ++i) r.ids.push_back(static_cast<int64_t>(rs.uniform_int(range)));
  for (int64_t i = 0; i < n * dim; ++i) r.grads.push_back(2.0f * rs.uniform01f() - 1.0f);
  return r;
}

// The request's contributions in dataset-id space, in position order.
std::vector<test::Contribution> contributions(const Request& r, const std::vector<int64_t>& n2o,
                                              int64_t dim, float scale) {
  std::vector<test::Contribution> cs;
  for (size_t i = 0; i < r.ids.size(); ++i) {
    cs.push_back({n2o[r.ids[i]], r.grads.data() + i * dim, scale});
  }
  return cs;
}

TEST(EmbeddingOptions, ValidateNamesTheOption) {
  EmbeddingOptions o = options(EmbeddingOptimizer::kAdam);
  EXPECT_EQ(error_of<InvalidArgument>([&] { o.validate(); }), "no error");
  o.dim = 0;
  EXPECT_EQ(error_of<InvalidArgument>([&] { o.validate(); }), "--embedding-dim must be > 0, got 0");
  EXPECT_EQ(error_of<InvalidArgument>([] { parse_choice<EmbeddingOptimizer>("sgd"); }),
            "unknown embedding optimizer 'sgd' (adam, adagrad)");
  o = options(EmbeddingOptimizer::kAdam);
  o.lr = 0;
  EXPECT_EQ(error_of<InvalidArgument>([&] { o.validate(); }), "--embedding-lr must be > 0, got 0");
  o = options(EmbeddingOptimizer::kAdam);
  o.beta2 = 1;
  EXPECT_EQ(error_of<InvalidArgument>([&] { o.validate(); }),
            "--embedding-beta2 must be in [0, 1), got 1");
  o = options(EmbeddingOptimizer::kAdagrad);
  o.eps = 0;
  EXPECT_EQ(error_of<InvalidArgument>([&] { o.validate(); }), "--embedding-eps must be > 0, got 0");
  o = options(EmbeddingOptimizer::kAdagrad);
  o.init_scale = -1;
  EXPECT_EQ(error_of<InvalidArgument>([&] { o.validate(); }),
            "--embedding-init-scale must be >= 0, got -1");
}

TEST_P(EmbeddingTableOn, RefusesBadOffsetsAndIds) {
  auto comm = make_communicator("self");
  EXPECT_EQ(error_of<InvalidArgument>([&] {
              EmbeddingTable(*comm, {0, 5, 9}, nullptr, options(EmbeddingOptimizer::kAdam), S());
            }),
            "embedding table: 3 partition offsets for 1 ranks (need 2)");
  EmbeddingTable t(*comm, {0, kN}, nullptr, options(EmbeddingOptimizer::kAdam), S());
  std::vector<float> out(12);
  const int64_t ids[] = {3, kN};
  EXPECT_EQ(error_of<InvalidArgument>([&] { t.gather(ids, 2, out.data()); }),
            "embedding gather: id 40 at position 1 is outside [0, 40)");
  EXPECT_EQ(error_of<InvalidArgument>([&] { t.apply_gradients(ids, 2, out.data(), 1.0f); }),
            "embedding gradients: id 40 at position 1 is outside [0, 40)");
}

TEST(EmbeddingTable, BytesAndMemoryCheck) {
  // values + m + v (3 x 10 x 4 floats), slot + step count (2 x 10 int64)
  EXPECT_EQ(embedding_bytes(10, 4, EmbeddingOptimizer::kAdam), 480u + 160u);
  EXPECT_EQ(embedding_bytes(10, 4, EmbeddingOptimizer::kAdagrad), 320u + 80u);
  // Where it lives: the storage's part on the device for a device table, the slots on the host.
  const EmbeddingFootprint d =
      embedding_footprint(10, 4, EmbeddingOptimizer::kAdam, MemorySpace::kDevice);
  EXPECT_EQ(d.device, 480u + 80u);
  EXPECT_EQ(d.host, 80u);
  EXPECT_EQ(embedding_footprint(10, 4, EmbeddingOptimizer::kAdagrad, MemorySpace::kHost).host,
            400u);
  const std::string dev = error_of([] {
    check_embedding_memory(1000, 64, EmbeddingOptimizer::kAdam, uint64_t(1) << 50,
                           MemorySpace::kDevice, 1);
  });
  EXPECT_EQ(dev,
            "the embedding table (1000 rows x 64, adam) on the device needs about 757.8 KiB of "
            "device memory but 1 B is free: lower --embedding-dim or use more ranks");
  // The host part is the slots only: a budget the whole table would not fit takes it.
  const uint64_t budget = process_rss_bytes() + (uint64_t(1) << 20);
  EXPECT_EQ(error_of([&] {
              check_embedding_memory(100000, 64, EmbeddingOptimizer::kAdam, budget,
                                     MemorySpace::kDevice, 1u << 30);
            }),
            "no error");
  EXPECT_NE(
      error_of([&] { check_embedding_memory(100000, 64, EmbeddingOptimizer::kAdam, budget); }),
      "no error");
  const std::string msg =
      error_of([] { check_embedding_memory(1000, 64, EmbeddingOptimizer::kAdam, 1); });
  EXPECT_NE(msg.find("the embedding table (1000 rows x 64, adam) needs about"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("lower --embedding-dim, use more ranks or raise --memory-budget"),
            std::string::npos)
      << msg;
  EXPECT_EQ(error_of([] {
              check_embedding_memory(1000, 64, EmbeddingOptimizer::kAdam, uint64_t(1) << 50);
            }),
            "no error");
}

// The initial rows are keyed by dataset id: two numberings of the same nodes (and the identity,
// dataset_ids null) give every dataset node the same row, the reference's, in [-s, s).
TEST_P(EmbeddingTableOn, InitialRowsAreKeyedByDatasetId) {
  auto comm = make_communicator("self");
  const EmbeddingOptions o = options(EmbeddingOptimizer::kAdam, 9);
  const std::vector<int64_t> a = shuffled(1), b = shuffled(2);
  EmbeddingTable ta(*comm, {0, kN}, a.data(), o, S()), tb(*comm, {0, kN}, b.data(), o, S()),
      ti(*comm, {0, kN}, nullptr, o, S());
  const std::vector<float> ra = ta.gather(all_ids()), rb = tb.gather(all_ids()),
                           ri = ti.gather(all_ids());
  ASSERT_TRUE(
      same_bits(ra.data(), ta.host_rows().data(), kN * o.dim));  // gather of all ids = the rows
  for (int64_t v = 0; v < kN; ++v) {
    const std::vector<float> want = test::initial_row(o, a[v]);
    EXPECT_TRUE(same_bits(ra.data() + v * o.dim, want.data(), o.dim)) << v;
    EXPECT_TRUE(same_bits(ri.data() + a[v] * o.dim, want.data(), o.dim)) << v;
    const int64_t vb = std::find(b.begin(), b.end(), a[v]) - b.begin();
    EXPECT_TRUE(same_bits(rb.data() + vb * o.dim, want.data(), o.dim)) << v;
    for (float x : want) EXPECT_TRUE(x >= -0.25f && x < 0.25f) << x;
  }
  // A different seed gives different rows.
  EmbeddingOptions o2 = o;
  o2.seed = 12;
  EmbeddingTable t2(*comm, {0, kN}, nullptr, o2, S());
  EXPECT_FALSE(same_bits(t2.host_rows().data(), ti.host_rows().data(), kN * o.dim));
  // Repeats and any order; the pointer API (rows in the table's memory) gives the same rows.
  const std::vector<int64_t> ids = {5, 5, 0, 39, 5};
  const std::vector<float> r = ti.gather(ids), rm = test::gather_in_memory(ti, ids);
  const std::vector<float> rows = ti.host_rows();
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_TRUE(same_bits(r.data() + i * o.dim, rows.data() + ids[i] * o.dim, o.dim));
  }
  EXPECT_TRUE(same_bits(r.data(), rm.data(), static_cast<int64_t>(r.size())));
  EXPECT_EQ(ti.stats().rows_requested, kN + 10);
  EXPECT_EQ(ti.stats().rows_remote, 0);
  EXPECT_EQ(ti.stats().bytes_sent, 0);
}

// k steps of requests with repeats (summed), scale 0.5: the table equals the dense reference
// bitwise (the same float operations in the same order); rows no request touched keep their
// initial values, and their state: the step that first touches them equals the reference's,
// whose state for them is still zero.
void check_steps_equal_reference(EmbeddingOptimizer optimizer) {
  auto comm = make_communicator("self");
  const EmbeddingOptions o = options(optimizer);
  const std::vector<int64_t> n2o = shuffled(3);
  EmbeddingTable t(*comm, {0, kN}, n2o.data(), o, S());
  test::ReferenceTable ref(o, kN);
  for (int k = 0; k < 5; ++k) {
    const Request r = request(k, 80, o.dim);
    test::apply_host_gradients(t, r.ids, r.grads, 0.5f);
    ref.step(contributions(r, n2o, o.dim, 0.5f));
  }
  for (int64_t v = 0; v < kN; ++v) {
    EXPECT_TRUE(same_bits(t.host_rows().data() + v * o.dim, ref.row(n2o[v]), o.dim))
        << name_of(optimizer) << " " << v;
    if (v >= kN / 2) {
      const std::vector<float> init = test::initial_row(o, n2o[v]);
      EXPECT_TRUE(same_bits(t.host_rows().data() + v * o.dim, init.data(), o.dim)) << v;
    }
  }
  // Now the untouched half, and the lr of later steps.
  t.set_lr(0.02);
  ref.o.lr = 0.02;
  const Request r = request(9, 50, o.dim, kN);
  test::apply_host_gradients(t, r.ids, r.grads, 1.0f);
  ref.step(contributions(r, n2o, o.dim, 1.0f));
  EXPECT_TRUE(same_bits(t.host_rows().data(), t.gather(all_ids()).data(), kN * o.dim));
  for (int64_t v = 0; v < kN; ++v) {
    EXPECT_TRUE(same_bits(t.host_rows().data() + v * o.dim, ref.row(n2o[v]), o.dim))
        << name_of(optimizer) << " " << v;
  }
  EXPECT_EQ(t.stats().grad_calls, 6);
  EXPECT_EQ(t.stats().grads_received, 5 * 80 + 50);
}

TEST_P(EmbeddingTableOn, AdamStepsEqualTheDenseReference) {
  check_steps_equal_reference(EmbeddingOptimizer::kAdam);
}
TEST_P(EmbeddingTableOn, AdagradStepsEqualTheDenseReference) {
  check_steps_equal_reference(EmbeddingOptimizer::kAdagrad);
}

// An empty call changes nothing.
TEST_P(EmbeddingTableOn, EmptyCallsChangeNothing) {
  auto comm = make_communicator("self");
  EmbeddingTable t(*comm, {0, kN}, nullptr, options(EmbeddingOptimizer::kAdam), S());
  const std::vector<float> before = t.host_rows();
  t.apply_gradients(nullptr, 0, nullptr, 1.0f);
  t.gather(nullptr, 0, nullptr);
  EXPECT_TRUE(same_bits(before.data(), t.host_rows().data(), kN * 6));
  EXPECT_EQ(t.stats().rows_updated, 0);
  // A rank that owns no rows (an empty part) saves and loads its empty file.
  const std::string dir = testing::temp_dir("embedding_empty");
  std::filesystem::create_directories(dir);
  EmbeddingTable none(*comm, {0, 0}, nullptr, options(EmbeddingOptimizer::kAdam), S());
  none.save(dir + "/t");
  EXPECT_EQ(file_size(dir + "/t"), 112u);
  none.load(dir + "/t");
  EXPECT_EQ(none.ranges().end() - none.ranges().begin(), 0);
  std::filesystem::remove_all(dir);
}

// Two steps, save, load into a fresh table (of another seed: its own rows are overwritten), and
// both continue with the same steps: bitwise equal, the step counts included (adam's bias
// corrections depend on them).
void check_save_load_continues(EmbeddingOptimizer optimizer) {
  auto comm = make_communicator("self");
  const std::string dir = testing::temp_dir(std::string("embedding_") + name_of(optimizer));
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/table.0";
  const std::vector<int64_t> n2o = shuffled(4);
  EmbeddingOptions o = options(optimizer);
  EmbeddingTable a(*comm, {0, kN}, n2o.data(), o, S());
  for (int k = 0; k < 2; ++k) {
    const Request r = request(k, 25, o.dim, kN);
    test::apply_host_gradients(a, r.ids, r.grads, 0.25f);
  }
  a.save(path);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);  // no temp left
  o.seed = 99;
  EmbeddingTable b(*comm, {0, kN}, n2o.data(), o, S());
  b.load(path);
  EXPECT_TRUE(same_bits(a.host_rows().data(), b.host_rows().data(), kN * o.dim));
  for (int k = 2; k < 5; ++k) {
    const Request r = request(k, 25, o.dim, kN);
    test::apply_host_gradients(a, r.ids, r.grads, 0.25f);
    test::apply_host_gradients(b, r.ids, r.grads, 0.25f);
  }
  EXPECT_TRUE(same_bits(a.host_rows().data(), b.host_rows().data(), kN * o.dim))
      << name_of(optimizer);
  std::filesystem::remove_all(dir);
}

TEST_P(EmbeddingTableOn, AdamSaveLoadContinuesBitwise) {
  check_save_load_continues(EmbeddingOptimizer::kAdam);
}
TEST_P(EmbeddingTableOn, AdagradSaveLoadContinuesBitwise) {
  check_save_load_continues(EmbeddingOptimizer::kAdagrad);
}

// A file saved from one storage loads into another (the same bytes), and both continue bitwise;
// every storage of this binary against the host one, both ways.
void check_saves_cross_storages(EmbeddingOptimizer optimizer) {
  auto comm = make_communicator("self");
  const std::string dir = testing::temp_dir(std::string("embedding_cross_") + name_of(optimizer));
  std::filesystem::create_directories(dir);
  const std::vector<int64_t> n2o = shuffled(7);
  const EmbeddingOptions o = options(optimizer);
  EmbeddingTable host(*comm, {0, kN}, n2o.data(), o), dev(*comm, {0, kN}, n2o.data(), o, S());
  for (int k = 0; k < 2; ++k) {
    const Request r = request(k, 30, o.dim, kN);
    test::apply_host_gradients(host, r.ids, r.grads, 0.5f);
    test::apply_host_gradients(dev, r.ids, r.grads, 0.5f);
  }
  host.save(dir + "/host");
  dev.save(dir + "/dev");
  EXPECT_EQ(read_file(dir + "/host"), read_file(dir + "/dev"));  // the same bytes
  EmbeddingOptions other = o;
  other.seed = 5;
  EmbeddingTable host2(*comm, {0, kN}, n2o.data(), other),
      dev2(*comm, {0, kN}, n2o.data(), other, S());
  host2.load(dir + "/dev");
  dev2.load(dir + "/host");
  for (int k = 2; k < 5; ++k) {
    const Request r = request(k, 30, o.dim, kN);
    for (EmbeddingTable* t : {&host, &dev, &host2, &dev2}) {
      test::apply_host_gradients(*t, r.ids, r.grads, 0.5f);
    }
  }
  const std::vector<float> want = host.host_rows();
  for (EmbeddingTable* t : {&dev, &host2, &dev2}) {
    EXPECT_TRUE(same_bits(t->host_rows().data(), want.data(), kN * o.dim)) << t->storage().name();
  }
  dev2.save(dir + "/dev2");
  host.save(dir + "/host");
  EXPECT_EQ(read_file(dir + "/host"), read_file(dir + "/dev2"));
  std::filesystem::remove_all(dir);
}

TEST_P(EmbeddingTableOn, AdamSavesLoadAcrossStorages) {
  check_saves_cross_storages(EmbeddingOptimizer::kAdam);
}
TEST_P(EmbeddingTableOn, AdagradSavesLoadAcrossStorages) {
  check_saves_cross_storages(EmbeddingOptimizer::kAdagrad);
}

TEST_P(EmbeddingTableOn, StatesWhereItsRowsLive) {
  auto comm = make_communicator("self");
  EmbeddingTable t(*comm, {0, kN}, nullptr, options(EmbeddingOptimizer::kAdam), S());
  const bool cuda = GetParam() == "cuda";
  EXPECT_EQ(t.storage().memory(), cuda ? MemorySpace::kDevice : MemorySpace::kHost);
  EXPECT_EQ(t.storage().device().is_cuda(), cuda);
  EXPECT_EQ(t.storage().name(), GetParam() == "emulated" ? "emulated-device" : GetParam());
}

// Flips one byte of `path` at `offset`.
void flip_byte(const std::string& path, size_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x10));
}

TEST_P(EmbeddingTableOn, LoadRefusesAnotherTableOrADamagedFile) {
  auto comm = make_communicator("self");
  const std::string dir = testing::temp_dir("embedding_refusals");
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/table.0", bad = dir + "/bad";
  const std::vector<int64_t> n2o = shuffled(5);
  EmbeddingTable t(*comm, {0, kN}, n2o.data(), options(EmbeddingOptimizer::kAdam), S());
  const Request r = request(0, 10, 6);
  test::apply_host_gradients(t, r.ids, r.grads, 1.0f);
  t.save(path);
  const auto refusal = [&](EmbeddingTable& other, const std::string& file) {
    const std::vector<float> before = other.host_rows();
    const std::string msg = error_of<FormatError>([&] { other.load(file); });
    EXPECT_TRUE(
        same_bits(before.data(), other.host_rows().data(), static_cast<int64_t>(before.size())));
    return msg;
  };
  EmbeddingTable dim7(*comm, {0, kN}, n2o.data(), options(EmbeddingOptimizer::kAdam, 7), S());
  EXPECT_EQ(refusal(dim7, path), path + ": embedding dim 6 but this table's is 7");
  EmbeddingTable ada(*comm, {0, kN}, n2o.data(), options(EmbeddingOptimizer::kAdagrad), S());
  EXPECT_EQ(refusal(ada, path), path + ": adam optimizer state but this table uses adagrad");
  EmbeddingTable wider(*comm, {0, kN + 1}, nullptr, options(EmbeddingOptimizer::kAdam), S());
  EXPECT_EQ(refusal(wider, path),
            path + ": rows [0, 40) of 40 (rank 0 of 1) but this rank owns [0, 41) of 41");
  const std::vector<int64_t> other = shuffled(6);
  EmbeddingTable renumbered(*comm, {0, kN}, other.data(), options(EmbeddingOptimizer::kAdam), S());
  EXPECT_EQ(refusal(renumbered, path),
            path + ": rows [0, 40) are other dataset nodes than this table's (another partition)");
  EmbeddingTable fresh(*comm, {0, kN}, n2o.data(), options(EmbeddingOptimizer::kAdam), S());
  const std::string content = read_file(path);
  // header 112 bytes, then values, m, v (40 x 6 floats each), then 40 step counts
  EXPECT_EQ(content.size(), 112u + 3 * 960 + 320);
  const std::pair<size_t, std::string> damage[] = {{20, "the header"},
                                                   {112 + 500, "the rows"},
                                                   {112 + 960 + 7, "the optimizer state (m)"},
                                                   {112 + 2 * 960 + 959, "the optimizer state (v)"},
                                                   {112 + 3 * 960 + 8, "the step counts"}};
  for (const auto& [offset, what] : damage) {
    write_file_atomic(bad, content);
    flip_byte(bad, offset);
    EXPECT_EQ(refusal(fresh, bad),
              bad + ": checksum mismatch in " + what + ": the file is damaged");
  }
  write_file_atomic(bad, content.substr(0, content.size() - 1));
  EXPECT_EQ(refusal(fresh, bad),
            bad + ": 3311 bytes where the header implies 3312: the file is damaged");
  write_file_atomic(bad, "not a table");
  EXPECT_EQ(refusal(fresh, bad), bad + " is not a dsp embedding table");
  EXPECT_EQ(error_of<IoError>([&] { fresh.load(dir + "/none"); }),
            dir + "/none: no such embedding table file");
  fresh.load(path);  // the intact file still loads
  EXPECT_TRUE(same_bits(fresh.host_rows().data(), t.host_rows().data(), kN * 6));
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Storages, EmbeddingTableOn,
                         ::testing::ValuesIn(test::embedding_storages()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dsp
