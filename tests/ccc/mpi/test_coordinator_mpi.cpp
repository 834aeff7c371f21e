// Coordinator under mpiexec -n 1..4: three workers per rank issue interleaved collectives with
// random delays (a different mix per worker); every result is checked and the launch sequence
// must be identical on every rank. Without CCC this interleaving deadlocks (see the
// pipeline_ccc_off_deadlocks test).
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "ccc/coordinator.hpp"
#include "ccc/mpi/mpi_communicator.hpp"

namespace dsp {
namespace {

void worker_ops(Coordinator& c, WorkerKind k, int64_t steps, std::vector<std::string>* errors) {
  auto& ch = c.channel(k);
  const int P = ch.size(), r = ch.rank();
  const int kind = static_cast<int>(k);
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> delay(0, 300);
  auto fail = [&](const std::string& m) { errors->push_back(m); };
  for (int64_t b = 0; b < steps; ++b) {
    ch.set_step(0, b);
    const int nops = 1 + (kind + b) % 3;  // same on every rank, differs between workers
    for (int i = 0; i < nops; ++i) {
      std::this_thread::sleep_for(std::chrono::microseconds(delay(rng)));
      if ((i + kind) % 2 == 0) {
        int64_t v = kind * 100000 + b * 10 + i;
        ch.all_reduce(&v, 1, DType::kInt64, ReduceOp::kSum);
        if (v != P * (kind * 100000 + b * 10 + i)) fail("all_reduce value");
      } else {
        // Rank r sends p the value (kind, b, i, r, p); length (r + p) % 3 + 1.
        std::vector<int64_t> counts(P), send;
        for (int p = 0; p < P; ++p) {
          counts[p] = (r + p) % 3 + 1;
          for (int64_t j = 0; j < counts[p]; ++j)
            send.push_back(((kind * 7 + i) * 1000 + b) * 64 + r * 8 + p);
        }
        std::vector<int64_t> rc;
        auto got = ch.all_to_all_v(send, counts, &rc);
        size_t at = 0;
        for (int p = 0; p < P; ++p) {
          if (rc[p] != (p + r) % 3 + 1) fail("all_to_all_v count");
          for (int64_t j = 0; j < rc[p]; ++j, ++at) {
            if (got[at] != ((kind * 7 + i) * 1000 + b) * 64 + p * 8 + r) fail("all_to_all_v value");
          }
        }
      }
    }
  }
}

TEST(CoordinatorMpi, InterleavedWorkersOneGlobalLaunchOrder) {
  CommOptions copts;
  copts.timeout = std::chrono::seconds(60);
  MpiCommunicator world(copts);
  CoordinatorOptions o;
  o.record_launches = true;
  o.comm = copts;
  auto c = make_coordinator("mpi", o);
  const int P = c->size();
  const int64_t steps = 200;
  std::vector<std::string> errors[3];
  std::vector<std::thread> ts;
  for (int k = 0; k < 3; ++k) {
    ts.emplace_back([&, k] { worker_ops(*c, static_cast<WorkerKind>(k), steps, &errors[k]); });
  }
  for (auto& t : ts) t.join();
  for (auto& e : errors) EXPECT_TRUE(e.empty()) << e.front();
  std::vector<OpId> log = c->launch_log();
  std::vector<int64_t> flat;
  for (const OpId& id : log) {
    flat.insert(flat.end(), {static_cast<int64_t>(id.worker), id.epoch, id.batch, id.op});
  }
  int64_t n = static_cast<int64_t>(flat.size());
  std::vector<int64_t> ns(P);
  world.all_gather(&n, ns.data(), 1, DType::kInt64);
  for (int p = 0; p < P; ++p) ASSERT_EQ(ns[p], n);
  std::vector<int64_t> all(flat.size() * P);
  world.all_gather(flat.data(), all.data(), n, DType::kInt64);
  for (int p = 1; p < P; ++p) {
    EXPECT_TRUE(std::equal(flat.begin(), flat.end(), all.begin() + p * flat.size()))
        << "rank " << p << " launched in a different order";
  }
  EXPECT_GT(log.size(), 3u * steps);
}

}  // namespace
}  // namespace dsp
