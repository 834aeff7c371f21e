// FeatureStore::gather under mpiexec -n 1..4, for every backend (tests/backends.hpp), on the MPI
// communicator and on the device-space channel a GPU rank gets ("+staged": MPI staged through
// host memory here, through the GPU's pinned memory in the CUDA binary): exactly features[ids]
// for random, empty, all-cold and all-hot id sets; duplicate and out-of-range ids rejected before
// any communication.
// EmbeddingTable likewise, on every storage (host and the emulated device storage here, the CUDA
// storage in the CUDA binary) and on both channels: gathers of any owner's rows, gradient rows of
// every rank summed in (rank, position) order, and table values that do not depend on the rank
// count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>

#include "ccc/communicator.hpp"
#include "core/error.hpp"
#include "core/quant.hpp"
#include "core/rng.hpp"
#include "graph/generate.hpp"
#include "graph/npy.hpp"
#include "layout/partition/partition.hpp"
#include "layout/store/embedding_table.hpp"
#include "layout/store/feature_store.hpp"

#include "backends.hpp"
#include "graph/hetero_fixture.hpp"
#include "layout/embedding_reference.hpp"
#include "layout/quant_reference.hpp"
#include "mpi_test_main.hpp"
#include "staged_channel.hpp"

namespace dsp {
namespace {

namespace fs = std::filesystem;
Communicator* g_comm = nullptr;
Communicator* g_staged = nullptr;  // device-space channel over MPI, or null where none is made

// Rank 0 partitions a small community graph with the given cache settings; everyone loads it.
struct Fixture {
  std::string dir;
  PartitionData part;
  std::unique_ptr<FeatureStore> store;
  Communicator* channel = nullptr;  // the store's
};

// `param`: "<backend>" or "<backend>+staged" (the store's channel is then g_staged).
Fixture make(const std::string& policy, double ratio, const std::string& param) {
  Communicator& c = *g_comm;
  const size_t plus = param.find('+');
  const std::string backend = param.substr(0, plus);
  Communicator& channel = plus == std::string::npos ? c : *g_staged;
  // Same name on every rank: rank 0's pid, broadcast.
  int64_t pid = ::getpid();
  c.broadcast(&pid, 1, DType::kInt64, 0);
  Fixture f;
  f.channel = &channel;
  f.dir = (fs::temp_directory_path() / fmt::format("dsp_gather_{}_{}_{}_{}", pid, c.size(), policy,
                                                   static_cast<int>(ratio * 100)))
              .string();
  if (c.rank() == 0) {
    CommunityOptions co;
    co.num_nodes = 2000;
    co.num_edges = 12000;
    co.num_communities = 8;
    co.feature_dim = 13;  // odd row size: 52 bytes
    co.seed = 3;
    Dataset ds = generate_community(co);
    PartitionOptions o;
    o.parts = c.size();
    o.cache_policy = policy;
    o.cache_ratio = ratio;
    o.verbose = false;
    o.overwrite = true;
    partition_dataset(ds, o, f.dir);
  }
  c.barrier();
  f.part = load_partition(f.dir, c.rank(), c.size());
  f.store = std::make_unique<FeatureStore>(f.part, channel, std::vector<Array>{},
                                           test::feature_backend(backend));
  return f;
}

void cleanup(Fixture& f) {
  f.store.reset();
  f.part = {};
  g_comm->barrier();
  if (g_comm->rank() == 0) fs::remove_all(f.dir);
}

void expect_rows(const Fixture& f, const std::vector<int64_t>& ids,
                 const std::vector<unsigned char>& got) {
  size_t rb = f.store->format().row_bytes;
  ASSERT_EQ(got.size(), ids.size() * rb);
  const auto* base = static_cast<const unsigned char*>(f.part.features.raw());
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(got.data() + i * rb, base + ids[i] * rb, rb))
        << "row " << i << " (node " << ids[i] << ") differs";
  }
}

// A random set of distinct ids drawn per rank and round.
std::vector<int64_t> random_ids(int64_t n, int64_t k, uint64_t round) {
  std::vector<int64_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  RngStream s(rng_key(11, round), g_comm->rank());
  for (int64_t i = 0; i < k; ++i) std::swap(all[i], all[i + s.uniform_int(n - i)]);
  all.resize(k);
  return all;
}

class Gather : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string& p = GetParam();
    DSP_SKIP_UNAVAILABLE_BACKEND(p.substr(0, p.find('+')));
    if (p.find('+') != std::string::npos && g_staged == nullptr) GTEST_SKIP() << "no staging";
  }
  Fixture make(const std::string& policy, double ratio) {
    return dsp::make(policy, ratio, GetParam());
  }
};

TEST_P(Gather, RandomSetsEqualFeatureRows) {
  Fixture f = make("in-degree", 0.3);
  for (uint64_t round = 0; round < 5; ++round) {
    auto ids =
        random_ids(f.store->format().num_nodes, 50 + 100 * round + 37 * g_comm->rank(), round);
    expect_rows(f, ids, f.store->gather(ids));
  }
  const GatherStats& st = f.store->stats();
  EXPECT_GT(st.rows_local_hot + st.rows_remote_hot, 0);
  EXPECT_GT(st.rows_cold, 0);
  if (g_comm->size() > 1) {
    EXPECT_GT(st.rows_remote_hot, 0);
  }
  EXPECT_EQ(st.bytes_cold, st.rows_cold * static_cast<int64_t>(f.store->format().row_bytes));
  cleanup(f);
}

TEST_P(Gather, EmptyOnSomeRanks) {
  Fixture f = make("in-degree", 0.5);
  std::vector<int64_t> ids;
  if (g_comm->rank() % 2 == 0) ids = random_ids(f.store->format().num_nodes, 200, 9);
  expect_rows(f, ids, f.store->gather(ids));
  std::vector<int64_t> none;
  expect_rows(f, none, f.store->gather(none));
  cleanup(f);
}

TEST_P(Gather, AllCold) {
  Fixture f = make("none", 0.0);
  auto ids = random_ids(f.store->format().num_nodes, 300, 4);
  expect_rows(f, ids, f.store->gather(ids));
  EXPECT_EQ(f.store->stats().rows_cold, 300);
  EXPECT_DOUBLE_EQ(f.store->stats().hit_rate(), 0.0);
  cleanup(f);
}

TEST_P(Gather, AllHot) {
  Fixture f = make("in-degree", 1.0);
  std::vector<int64_t> ids(f.store->format().num_nodes);
  std::iota(ids.begin(), ids.end(), 0);
  std::reverse(ids.begin(), ids.end());
  expect_rows(f, ids, f.store->gather(ids));
  EXPECT_EQ(f.store->stats().rows_cold, 0);
  EXPECT_DOUBLE_EQ(f.store->stats().hit_rate(), 1.0);
  cleanup(f);
}

TEST_P(Gather, DuplicateAndOutOfRangeIdsAreRejected) {
  Fixture f = make("in-degree", 0.2);
  try {
    f.store->gather(std::vector<int64_t>{1, 5, 1});
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("id 1 is requested twice"), std::string::npos);
  }
  try {
    f.store->gather(std::vector<int64_t>{3, f.store->format().num_nodes});
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos);
  }
  // The store still works after rejected requests.
  auto ids = random_ids(f.store->format().num_nodes, 64, 1);
  expect_rows(f, ids, f.store->gather(ids));
  cleanup(f);
}

// gather_resident: `ids` copied to the backend's memory first (as a device sampler leaves a
// block's sources), the rows copied back.
std::vector<unsigned char> gather_resident(FeatureStore& store, const std::vector<int64_t>& ids) {
  const int64_t n = static_cast<int64_t>(ids.size());
  FeatureBackend& be = store.backend();
  std::shared_ptr<void> dev = be.allocate(std::max<size_t>(n * sizeof(int64_t), 8));
  be.copy_from_host(dev.get(), ids.data(), n * sizeof(int64_t));
  std::shared_ptr<void> rows = store.allocate_rows(n);
  store.gather_resident(static_cast<const int64_t*>(dev.get()), n, rows.get());
  std::vector<unsigned char> out(n * store.format().out_row_bytes);
  be.copy_to_host(rows.get(), out.size(), out.data());
  return out;
}

// Ids in the backend's memory, classified there on a device backend: the same rows and the same
// row counts as gather, on random, empty and all-hot sets.
TEST_P(Gather, ResidentIdsGiveTheRowsAndCountsOfGather) {
  Fixture f = make("in-degree", 0.3);
  for (uint64_t round = 0; round < 4; ++round) {
    std::vector<int64_t> ids;
    if (round != 1 || g_comm->rank() % 2 == 0) {
      ids = random_ids(f.store->format().num_nodes, 60 + 150 * round + 31 * g_comm->rank(), round);
    }
    f.store->reset_stats();
    expect_rows(f, ids, f.store->gather(ids));
    const GatherStats want = f.store->stats();
    f.store->reset_stats();
    expect_rows(f, ids, gather_resident(*f.store, ids));
    const GatherStats& got = f.store->stats();
    EXPECT_EQ(got.calls, 1);
    EXPECT_EQ(got.rows_cold, want.rows_cold);
    EXPECT_EQ(got.rows_local_hot, want.rows_local_hot);
    EXPECT_EQ(got.rows_remote_hot, want.rows_remote_hot);
    EXPECT_EQ(got.bytes(), want.bytes());
  }
  if (g_comm->size() > 1) EXPECT_GT(f.store->stats().rows_remote_hot, 0);
  cleanup(f);
}

// The point of resident ids: a device backend reads back only the P + 4 category counts, one
// copy whatever the number of ids, on a device-space channel (a GPU rank's: NCCL, or MPI staged).
TEST_P(Gather, ResidentIdsCostOneReadOfTheirCounts) {
  Fixture f = make("in-degree", 0.3);
  const bool device_channel = f.channel->memory_space() == MemorySpace::kDevice;
  if (!f.store->backend().classifies() || !device_channel) {
    cleanup(f);
    GTEST_SKIP() << GetParam()
                 << (device_channel ? ": ids in host memory (nothing to read back)"
                                    : ": a host channel takes slots and rows through the host");
  }
  const int64_t P = g_comm->size();
  for (const int64_t n : {40, 700}) {
    auto ids = random_ids(f.store->format().num_nodes, n, 7);
    f.store->reset_stats();
    gather_resident(*f.store, ids);  // stats().host: to the end of the gather (no copy back)
    const HostTraffic t = f.store->stats().host;
    EXPECT_EQ(t.reads, 1) << n << " ids";
    EXPECT_EQ(t.read_bytes, (P + 4) * 8) << n << " ids";
  }
  cleanup(f);
}

TEST_P(Gather, ResidentIdOutOfRangeIsRejectedBeforeAnyCommunication) {
  Fixture f = make("in-degree", 0.2);
  if (g_comm->rank() == 0) {
    const int64_t N = f.store->format().num_nodes;
    try {
      gather_resident(*f.store, {3, 7, 11, N + 5, 2});
      FAIL();
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()),
                fmt::format("gather: id {} at position 3 is out of range [0, {})", N + 5, N));
    }
  }
  auto ids = random_ids(f.store->format().num_nodes, 64, 1);  // the store still works
  expect_rows(f, ids, gather_resident(*f.store, ids));
  cleanup(f);
}

// BGL's FIFO levels in the protocol: rows served from them equal the features, rows another rank
// caches are requested once and then found in the FIFO (small enough to evict), and the shared
// level (one per machine: every rank here) serves rows a peer rank fetched.
// A heterogeneous batch's featured types (paper: 4 float32 columns, venue: 2) gathered in one
// round by gather_stores: exactly each type's rows, in as many collectives as one store's gather.
TEST_P(Gather, SeveralStoresInOneRound) {
  Communicator& c = *g_comm;
  const std::string& param = GetParam();
  Communicator& channel = param.find('+') == std::string::npos ? c : *g_staged;
  int64_t pid = ::getpid();
  c.broadcast(&pid, 1, DType::kInt64, 0);
  const std::string dir =
      (fs::temp_directory_path() / fmt::format("dsp_gather_hetero_{}_{}", pid, c.size())).string();
  if (c.rank() == 0) {
    PartitionOptions o;
    o.parts = c.size();
    o.cache_ratio = 0.3;
    o.verbose = false;
    o.overwrite = true;
    partition_dataset(hetero_union(testref::hetero_fixture()), o, dir);
  }
  c.barrier();
  {
    PartitionData part = load_partition(dir, c.rank(), c.size());
    std::vector<PartitionData> views;
    std::vector<std::unique_ptr<FeatureStore>> owned;
    for (int t : {0, 2}) views.push_back(hetero_type_view(part, t));
    for (size_t i = 0; i < views.size(); ++i) {
      owned.push_back(std::make_unique<FeatureStore>(
          views[i], channel, hetero_type_cache_lists(part, {}, i == 0 ? 0 : 2),
          test::feature_backend(param.substr(0, param.find('+')))));
    }
    std::vector<FeatureStore*> stores{owned[0].get(), owned[1].get()};
    for (uint64_t round = 0; round < 3; ++round) {
      std::vector<std::vector<int64_t>> ids;
      for (FeatureStore* st : stores) {
        // rank 1 asks the second store for nothing in round 1: the round still lines up
        const int64_t k = round == 1 && c.rank() == 1 && st == stores[1]
                              ? 0
                              : std::min<int64_t>(st->format().num_nodes, 40 + 30 * round);
        ids.push_back(random_ids(st->format().num_nodes, k, round + 7 * ids.size()));
      }
      std::vector<std::shared_ptr<void>> rows;
      std::vector<void*> outs;
      for (size_t s = 0; s < 2; ++s) {
        rows.push_back(stores[s]->allocate_rows(static_cast<int64_t>(ids[s].size())));
        outs.push_back(rows.back().get());
      }
      const uint64_t ops0 = channel.counters().ops;
      gather_stores(stores, ids, outs);
      const uint64_t ops1 = channel.counters().ops;
      stores[0]->gather(ids[0]);
      EXPECT_EQ(ops1 - ops0, channel.counters().ops - ops1);  // one store's gather: as many
      for (size_t s = 0; s < 2; ++s) {
        const size_t rb = stores[s]->format().row_bytes;
        std::vector<unsigned char> got(ids[s].size() * rb);
        stores[s]->backend().copy_to_host(outs[s], got.size(), got.data());
        const auto* base = static_cast<const unsigned char*>(views[s].features.raw());
        for (size_t i = 0; i < ids[s].size(); ++i) {
          ASSERT_EQ(0, std::memcmp(got.data() + i * rb, base + ids[s][i] * rb, rb))
              << "store " << s << " row " << i << " (type id " << ids[s][i] << ")";
        }
      }
    }
    if (c.size() > 1) EXPECT_GT(stores[0]->stats().rows_remote_hot, 0);
  }
  c.barrier();
  if (c.rank() == 0) fs::remove_all(dir);
}

TEST_P(Gather, FifoLevelsServeEqualRowsAndSaveRequests) {
  Fixture f = make("in-degree", 0.5);
  int64_t pid = ::getpid();
  g_comm->broadcast(&pid, 1, DType::kInt64, 0);
  FifoCacheOptions fo;
  fo.rows = 60;
  fo.shared_rows = 400;
  fo.shared_name = fmt::format("/dsp_test_fifo_{}", pid);
  if (g_comm->rank() == 0) f.store->enable_fifo(fo);  // the creator first, then the attachers
  g_comm->barrier();
  if (g_comm->rank() != 0) f.store->enable_fifo(fo);
  g_comm->barrier();
  for (uint64_t round = 0; round < 8; ++round) {
    // The same sets twice in a row: the second gather finds the peers' rows in the FIFO.
    auto ids = random_ids(f.store->format().num_nodes, 150, round / 2);
    expect_rows(f, ids, f.store->gather(ids));
    auto held = f.store->fifo(0)->held();
    std::sort(held.begin(), held.end());
    held.erase(std::remove(held.begin(), held.end(), int64_t{-1}), held.end());
    EXPECT_EQ(std::adjacent_find(held.begin(), held.end()), held.end()) << "a row held twice";
  }
  const GatherStats& st = f.store->stats();
  if (g_comm->size() > 1) {
    EXPECT_GT(st.rows_fifo + st.rows_fifo_shared, 0);
    EXPECT_GT(st.rows_remote_hot, 0);
    EXPECT_GT(f.store->fifo(0)->stats().evictions, 0);
  }
  g_comm->barrier();  // no rank unlinks the shared level while another still attaches
  cleanup(f);
}

std::vector<std::string> gather_params() {
  std::vector<std::string> v = test::backend_names();
  for (const std::string& b : test::backend_names()) v.push_back(b + "+staged");
  return v;
}

INSTANTIATE_TEST_SUITE_P(Backends, Gather, ::testing::ValuesIn(gather_params()),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '+', '_');
                           return n;
                         });

// ---- Quantized stores (dsp partition --feature-dtype) at 1..4 ranks ----

// Every rank gathers random rows of a bfloat16 / int8 (column, row) / float16 partition, twice
// (the second time partly from its FIFO level): each row decodes to the reference value of its
// source node (quant_reference.hpp), so rows are the same at every rank count and on every
// backend and channel, whether served cold, from the own cache, by a peer or by the FIFO.
TEST_P(Gather, QuantizedRowsDecodeToTheReference) {
  Communicator& c = *g_comm;
  const std::string& param = GetParam();
  Communicator& channel = param.find('+') == std::string::npos ? c : *g_staged;
  int64_t pid = ::getpid();
  c.broadcast(&pid, 1, DType::kInt64, 0);
  const std::string dir =
      (fs::temp_directory_path() / fmt::format("dsp_gather_quant_{}_{}", pid, c.size())).string();
  CommunityOptions co;
  co.num_nodes = 1200;
  co.num_edges = 7000;
  co.num_communities = 6;
  co.feature_dim = 13;
  co.seed = 5;
  const Dataset ds = generate_community(co);  // on every rank: the reference's source
  std::vector<std::vector<float>> rows(co.num_nodes);
  for (int64_t v = 0; v < co.num_nodes; ++v) {
    rows[v].assign(ds.features.data<float>() + v * 13, ds.features.data<float>() + (v + 1) * 13);
  }
  const std::pair<const char*, const char*> modes[] = {
      {"bfloat16", ""}, {"int8", "column"}, {"int8", "row"}, {"float16", ""}};
  for (const auto& [dtype, scale] : modes) {
    SCOPED_TRACE(std::string(dtype) + " " + scale);
    if (c.rank() == 0) {
      PartitionOptions o;
      o.parts = c.size();
      o.cache_ratio = 0.5;
      o.verbose = false;
      o.overwrite = true;
      o.feature_dtype = parse_choice<FeatureDtype>(dtype);
      o.feature_scale = *scale ? parse_choice<FeatureScale>(scale) : FeatureScale::kAuto;
      partition_dataset(ds, o, dir);
    }
    c.barrier();
    const testing::QuantReference ref(dtype, scale, rows);
    PartitionData part = load_partition(dir, c.rank(), c.size());
    const Array new2old = load_npy(dir + "/new2old.npy", DType::kInt64, 1);
    FeatureStore store(part, channel, std::vector<Array>{},
                       test::feature_backend(param.substr(0, param.find('+'))));
    store.enable_fifo({60, 0, ""});
    const size_t ob = store.format().out_row_bytes;
    for (uint64_t round = 0; round < 4; ++round) {
      auto ids = random_ids(store.format().num_nodes, 150 + 20 * c.rank(), round / 2);
      const std::vector<unsigned char> got = store.gather(ids);
      ASSERT_EQ(got.size(), ids.size() * ob);
      for (size_t i = 0; i < ids.size(); ++i) {
        const int64_t v = new2old.data<int64_t>()[ids[i]];
        for (int64_t j = 0; j < 13; ++j) {
          float x;
          if (ob == 13 * 2) {
            uint16_t h;
            std::memcpy(&h, got.data() + i * ob + 2 * j, 2);
            x = half_to_float(h);
          } else {
            std::memcpy(&x, got.data() + i * ob + 4 * j, 4);
          }
          const float want = ref.value(v, j);
          ASSERT_EQ(0, std::memcmp(&x, &want, 4)) << "node " << v << " column " << j;
        }
      }
    }
    const GatherStats& st = store.stats();
    if (c.size() > 1) {
      EXPECT_GT(st.rows_remote_hot, 0);
      EXPECT_GT(st.rows_fifo, 0);
    }
    EXPECT_EQ(st.bytes_remote_hot,
              st.rows_remote_hot * static_cast<int64_t>(store.format().row_bytes));
    store.enable_fifo({});  // resident ids decode on the device to the same bits (no FIFO)
    const auto ids = random_ids(store.format().num_nodes, 170 + 20 * c.rank(), 5);
    EXPECT_EQ(gather_resident(store, ids), store.gather(ids));
    c.barrier();
  }
  if (c.rank() == 0) fs::remove_all(dir);
}

// ---- EmbeddingTable (layout/store/embedding_table.hpp) at 1..4 ranks ----
// 53 nodes numbered by a fixed permutation (new2old), parts of uneven sizes (rank 1's empty at 3
// and 4 ranks); each rank's table is built from its range of new2old, as a job builds it from its
// partition.
constexpr int64_t kEmbN = 53;

struct EmbeddingRig {
  std::vector<int64_t> n2o, offsets;
  EmbeddingOptions o;
  std::unique_ptr<EmbeddingTable> table;
};

// The storage and channel of the current EmbeddingMpi test: "<storage>" (g_comm) or
// "<storage>+staged" (g_staged, a device-space channel: the table's rounds are host buffers on it).
std::string g_emb_param = "host";

class EmbeddingMpi : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string& p = GetParam();
    const std::string storage = p.substr(0, p.find('+'));
    const std::string why = test::embedding_storage_unavailable(storage);
    if (!why.empty()) GTEST_SKIP() << "storage " << storage << ": " << why;
    if (p.find('+') != std::string::npos && g_staged == nullptr) GTEST_SKIP() << "no staging";
    g_emb_param = p;
  }
  void TearDown() override { g_emb_param = "host"; }
};

std::vector<std::string> embedding_params() {
  std::vector<std::string> v;
  for (const std::string& s : test::embedding_storages()) v.insert(v.end(), {s, s + "+staged"});
  return v;
}

EmbeddingRig embedding_rig(EmbeddingOptimizer optimizer) {
  const int P = g_comm->size();
  const size_t plus = g_emb_param.find('+');
  Communicator& channel = plus == std::string::npos ? *g_comm : *g_staged;
  EmbeddingRig r;
  r.n2o.resize(kEmbN);
  std::iota(r.n2o.begin(), r.n2o.end(), 0);
  RngStream rs(77, 0);
  for (int64_t i = kEmbN - 1; i > 0; --i) std::swap(r.n2o[i], r.n2o[rs.uniform_int(i + 1)]);
  for (int p = 0; p <= P; ++p) r.offsets.push_back(kEmbN * p * p / (P * P));  // uneven parts
  if (P >= 3) r.offsets[2] = r.offsets[1];  // and rank 1 owns none
  r.o.dim = 5;
  r.o.optimizer = optimizer;
  r.o.lr = 0.03;
  r.o.seed = 21;
  const int64_t begin = r.offsets[g_comm->rank()];
  r.table = std::make_unique<EmbeddingTable>(channel, r.offsets, r.n2o.data() + begin, r.o,
                                             test::embedding_storage(g_emb_param.substr(0, plus)));
  return r;
}

// Rank `rank`'s request of step `k`: n global ids over [0, N) (repeats; other ranks' ids overlap)
// and uniform gradients in [-1, 1).
struct EmbeddingRequest {
  std::vector<int64_t> ids;
  std::vector<float> grads;
};

EmbeddingRequest embedding_request(int k, int rank, int64_t n, int64_t dim) {
  EmbeddingRequest q;
  RngStream rs(rng_key(9, k, rank), 2);
  for (int64_t i = 0; i < n; ++i) q.ids.push_back(static_cast<int64_t>(rs.uniform_int(kEmbN)));
  for (int64_t i = 0; i < n * dim; ++i) q.grads.push_back(2.0f * rs.uniform01f() - 1.0f);
  return q;
}

bool same_floats(const float* a, const float* b, int64_t n) {  // n = 0: a, b may be null
  return n == 0 || std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0;
}

// Every rank gathers its own ids (repeats, any owner; none on rank 1): the initial rows of their
// dataset nodes, bitwise; rows of other owners are counted as remote.
TEST_P(EmbeddingMpi, GatherReturnsTheRowsOfAnyOwner) {
  EmbeddingRig r = embedding_rig(EmbeddingOptimizer::kAdam);
  const int rank = g_comm->rank();
  const int64_t n = rank == 1 ? 0 : 40 + 7 * rank;
  const EmbeddingRequest q = embedding_request(0, rank, n, 0);
  const std::vector<float> rows = r.table->gather(q.ids);
  // The pointer API (rows in the table's memory) gives the same rows.
  const std::vector<float> in_memory = test::gather_in_memory(*r.table, q.ids);
  EXPECT_TRUE(same_floats(rows.data(), in_memory.data(), static_cast<int64_t>(rows.size())));
  int64_t remote = 0;
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<float> want = test::initial_row(r.o, r.n2o[q.ids[i]]);
    EXPECT_TRUE(same_floats(rows.data() + i * r.o.dim, want.data(), r.o.dim)) << i;
    remote += r.table->ranges().owner(q.ids[i]) != rank;
  }
  // Bytes to other ranks: our remote ids out, and the rows of their ids we own back.
  int64_t served = 0;
  for (int p = 0; p < g_comm->size(); ++p) {
    if (p == rank) continue;
    for (int64_t id : embedding_request(0, p, p == 1 ? 0 : 40 + 7 * p, 0).ids) {
      served += r.table->ranges().owner(id) == rank;
    }
  }
  EXPECT_EQ(r.table->stats().rows_remote, 2 * remote);
  EXPECT_EQ(r.table->stats().bytes_sent, 2 * (remote * 8 + served * r.o.dim * 4));
}

// Four steps in which every rank sends gradients for overlapping ids (scale 1 / (rank + 1)):
// each owner's rows equal the dense reference that sums the contributions in (requester rank,
// position) order, bitwise, and a gather of every id afterwards returns them.
void check_gradients_sum_in_rank_order(EmbeddingOptimizer optimizer) {
  EmbeddingRig r = embedding_rig(optimizer);
  const int P = g_comm->size(), rank = g_comm->rank();
  test::ReferenceTable ref(r.o, kEmbN);
  for (int k = 0; k < 4; ++k) {
    std::vector<EmbeddingRequest> all;
    for (int p = 0; p < P; ++p) all.push_back(embedding_request(k, p, 30 + 5 * p, r.o.dim));
    std::vector<test::Contribution> cs;
    for (int p = 0; p < P; ++p) {
      for (size_t i = 0; i < all[p].ids.size(); ++i) {
        cs.push_back({r.n2o[all[p].ids[i]], all[p].grads.data() + i * r.o.dim, 1.0f / (p + 1)});
      }
    }
    const EmbeddingRequest& mine = all[rank];
    test::apply_host_gradients(*r.table, mine.ids, mine.grads, 1.0f / (rank + 1));
    ref.step(cs);
  }
  const EmbeddingTable& t = *r.table;
  const std::vector<float> own = t.host_rows();
  for (int64_t v = t.ranges().begin(); v < t.ranges().end(); ++v) {
    EXPECT_TRUE(
        same_floats(own.data() + (v - t.ranges().begin()) * r.o.dim, ref.row(r.n2o[v]), r.o.dim))
        << name_of(optimizer) << " global id " << v;
  }
  std::vector<int64_t> every(kEmbN);
  std::iota(every.begin(), every.end(), 0);
  const std::vector<float> rows = r.table->gather(every);
  for (int64_t v = 0; v < kEmbN; ++v) {
    EXPECT_TRUE(same_floats(rows.data() + v * r.o.dim, ref.row(r.n2o[v]), r.o.dim)) << v;
  }
}

TEST_P(EmbeddingMpi, AdamGradientsSumInRankOrder) {
  check_gradients_sum_in_rank_order(EmbeddingOptimizer::kAdam);
}
TEST_P(EmbeddingMpi, AdagradGradientsSumInRankOrder) {
  check_gradients_sum_in_rank_order(EmbeddingOptimizer::kAdagrad);
}

// One workload in dataset-id space whatever the rank count: step k's 120 contributions, the i-th
// sent by rank i % P. The table, mapped by dataset id, equals one process summing them in index
// order: bitwise at P = 1; within 1e-6 at P > 1, where the owners sum in (rank, position) order,
// another float order.
TEST_P(EmbeddingMpi, TableValuesDoNotDependOnTheRankCount) {
  EmbeddingRig r = embedding_rig(EmbeddingOptimizer::kAdam);
  const int P = g_comm->size(), rank = g_comm->rank();
  const int64_t dim = r.o.dim, M = 120;
  std::vector<int64_t> o2n(kEmbN);
  for (int64_t v = 0; v < kEmbN; ++v) o2n[r.n2o[v]] = v;
  EmbeddingOptions o1 = r.o;
  test::ReferenceTable ref(o1, kEmbN);
  for (int k = 0; k < 5; ++k) {
    const EmbeddingRequest w = embedding_request(100 + k, 0, M, dim);  // ids read as dataset ids
    std::vector<test::Contribution> cs;
    std::vector<int64_t> ids;
    std::vector<float> grads;
    for (int64_t i = 0; i < M; ++i) {
      cs.push_back({w.ids[i], w.grads.data() + i * dim, 1.0f / M});
      if (i % P != rank) continue;
      ids.push_back(o2n[w.ids[i]]);
      grads.insert(grads.end(), w.grads.begin() + i * dim, w.grads.begin() + (i + 1) * dim);
    }
    test::apply_host_gradients(*r.table, ids, grads, 1.0f / M);
    ref.step(cs);
  }
  std::vector<int64_t> every(kEmbN);
  std::iota(every.begin(), every.end(), 0);
  const std::vector<float> rows = r.table->gather(every);
  float worst = 0;
  for (int64_t v = 0; v < kEmbN; ++v) {
    for (int64_t j = 0; j < dim; ++j) {
      const float got = rows[v * dim + j], want = ref.row(r.n2o[v])[j];
      if (P == 1) {
        EXPECT_EQ(got, want) << v << " " << j;
      }
      EXPECT_NEAR(got, want, 1e-6f) << v << " " << j;
      worst = std::max(worst, std::abs(got - want));
    }
  }
  if (rank == 0) RecordProperty("max_abs_difference", fmt::format("{:.3g}", worst));
}

INSTANTIATE_TEST_SUITE_P(Storages, EmbeddingMpi, ::testing::ValuesIn(embedding_params()),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '+', '_');
                           return n;
                         });

}  // namespace
}  // namespace dsp

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  dsp::CommOptions opts;
  opts.timeout = std::chrono::seconds(60);
  auto comm = dsp::make_communicator("mpi", opts);
  if (dsp::test::no_cuda_device(comm->rank())) return dsp::test::kSkipExitCode;
  dsp::g_comm = comm.get();
  std::unique_ptr<dsp::Communicator> staged = dsp::test::make_staged_channel(opts, comm->rank());
  dsp::g_staged = staged.get();
  const int failed = dsp::test::run_tests_on_all_ranks(*comm);
  dsp::g_staged = nullptr;
  staged.reset();
  dsp::g_comm = nullptr;
  comm.reset();
  return failed;
}
