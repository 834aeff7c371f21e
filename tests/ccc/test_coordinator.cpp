// Coordinator with a world of one ("self"): ops of concurrent workers run in registration order,
// ids number ops within a step, errors reach the issuing worker only, --ccc off runs ops directly.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "ccc/coordinator.hpp"
#include "core/error.hpp"

namespace dsp {
namespace {

TEST(Coordinator, IdsNumberOpsWithinAStep) {
  CoordinatorOptions o;
  o.record_launches = true;
  auto c = make_coordinator("self", o);
  EXPECT_EQ(c->size(), 1);
  auto& s = c->channel(WorkerKind::kSampler);
  s.set_step(2, 5);
  int64_t v = 3;
  s.all_reduce(&v, 1, DType::kInt64, ReduceOp::kSum);
  EXPECT_EQ(v, 3);
  s.barrier();
  s.set_step(2, 6);
  auto got = s.all_to_all_v(std::vector<int64_t>{1, 2, 3}, {3});  // exchange_counts + payload
  EXPECT_EQ(got, (std::vector<int64_t>{1, 2, 3}));
  std::vector<OpId> log = c->launch_log();
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[0], (OpId{WorkerKind::kSampler, 2, 5, 0}));
  EXPECT_EQ(log[1], (OpId{WorkerKind::kSampler, 2, 5, 1}));
  EXPECT_EQ(log[2], (OpId{WorkerKind::kSampler, 2, 6, 0}));
  EXPECT_EQ(log[3], (OpId{WorkerKind::kSampler, 2, 6, 1}));
  EXPECT_EQ(log[3].str(), "sampler/e2/b6/op1");
  EXPECT_EQ(c->launched(), 4u);
  EXPECT_NE(c->launch_hash(), 0u);
  EXPECT_GT(s.wait_seconds(), 0.0);
  c->clear_launch_log();
  EXPECT_EQ(c->launched(), 0u);
  EXPECT_EQ(c->launch_hash(), 0u);
}

TEST(Coordinator, ConcurrentWorkersAllComplete) {
  CoordinatorOptions o;
  o.record_launches = true;
  auto c = make_coordinator("self", o);
  std::vector<std::thread> ts;
  for (WorkerKind k : {WorkerKind::kSampler, WorkerKind::kLoader, WorkerKind::kTrainer}) {
    ts.emplace_back([&c, k] {
      auto& ch = c->channel(k);
      for (int64_t b = 0; b < 500; ++b) {
        ch.set_step(0, b);
        float x[4] = {1, 2, 3, 4};
        ch.all_reduce(x, 4, DType::kFloat32, ReduceOp::kMax);
        ASSERT_EQ(x[3], 4.f);
        std::vector<float> g(4);
        ch.all_gather(x, g.data(), 4, DType::kFloat32);
        ASSERT_EQ(g[2], 3.f);
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(c->launched(), 3u * 500 * 2);
  // Each worker's own ops stay in its program order.
  std::vector<OpId> log = c->launch_log();
  std::vector<int64_t> last(kNumWorkerKinds, -1);
  for (const OpId& id : log) {
    int64_t seq = id.batch * 2 + id.op;
    EXPECT_GT(seq, last[static_cast<int>(id.worker)]);
    last[static_cast<int>(id.worker)] = seq;
  }
}

TEST(Coordinator, OpErrorsReachTheIssuingWorkerOnly) {
  auto c = make_coordinator("self");
  auto& l = c->channel(WorkerKind::kLoader);
  l.set_step(0, 0);
  int64_t x = 0;
  EXPECT_THROW(l.all_to_all_v(&x, {1, 1}, &x, {1, 1}, DType::kInt64), InvalidArgument);
  EXPECT_THROW(l.broadcast(&x, 1, DType::kInt64, 3), InvalidArgument);
  l.barrier();  // still usable
  EXPECT_EQ(c->launched(), 3u);
}

TEST(Coordinator, CccOffRunsOpsDirectly) {
  CoordinatorOptions o;
  o.ccc = false;
  o.record_launches = true;
  auto c = make_coordinator("self", o);
  EXPECT_FALSE(c->ccc());
  auto& t = c->channel(WorkerKind::kTrainer);
  t.set_step(1, 1);
  t.barrier();
  ASSERT_EQ(c->launch_log().size(), 1u);
  EXPECT_EQ(c->launch_log()[0], (OpId{WorkerKind::kTrainer, 1, 1, 0}));
  EXPECT_THROW(make_coordinator("carrier-pigeon"), InvalidArgument);
  EXPECT_STREQ(worker_kind_name(WorkerKind::kMain), "main");
}

}  // namespace
}  // namespace dsp
