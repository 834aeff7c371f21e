// `dsp bench gather --resident` times the gather dsp train runs on a GPU (FeatureStore::
// gather_resident over ids in the store's memory): on every feature backend of this binary it
// gathers the same id sets as the plain gather (the same hit counts) and says which it timed.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "backends.hpp"
#include "bench/gather_bench.hpp"
#include "ccc/communicator.hpp"

namespace dsp {
namespace {

class GatherBench : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { DSP_SKIP_UNAVAILABLE_BACKEND(GetParam()); }
};

// One part of n nodes with f float32 features each, every 3rd node cached.
PartitionData feature_part(int64_t n, int64_t f) {
  PartitionData part;
  part.meta.parts = 1;
  part.meta.num_nodes = n;
  part.meta.offsets = {0, n};
  std::vector<float> x(static_cast<size_t>(n * f));
  std::iota(x.begin(), x.end(), 0.0f);
  part.features = Array::from_vector(std::move(x), {n, f});
  std::vector<int64_t> cached;
  for (int64_t v = 0; v < n; v += 3) cached.push_back(v);
  part.cached = Array::from_vector(std::move(cached));
  return part;
}

TEST_P(GatherBench, ResidentGathersTheSameRowsAsThePlainGather) {
  const PartitionData part = feature_part(3000, 16);
  auto comm = make_communicator("self");
  GatherBenchOptions o;
  o.batch = 700;
  o.iters = 3;
  nlohmann::json figures[2];
  for (int resident = 0; resident < 2; ++resident) {
    FeatureStore store(part, *comm, {}, test::feature_backend(GetParam()));
    o.resident = resident == 1;
    figures[resident] = measure_gather(store, *comm, part.features, o);
    EXPECT_EQ(figures[resident]["resident"].get<bool>(), o.resident);
    EXPECT_GT(figures[resident]["gather_GBps"].get<double>(), 0.0);
  }
  for (const char* k : {"rows_local_hot", "rows_cold", "rows_remote_hot", "bytes_per_gather"}) {
    EXPECT_EQ(figures[0][k], figures[1][k]) << k;
  }
  EXPECT_GT(figures[1]["rows_local_hot"].get<int64_t>(), 0);
  EXPECT_GT(figures[1]["rows_cold"].get<int64_t>(), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, GatherBench, ::testing::ValuesIn(test::backend_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dsp
