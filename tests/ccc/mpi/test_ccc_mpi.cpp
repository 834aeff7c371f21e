// The MPI communicator under mpiexec -n 1..4: the conformance suite (ccc/conformance.hpp), plus
// what only MPI has: the >INT_MAX code paths (forced with a small piece size), ops issued from
// several threads, the shared executor. Output comes from rank 0 only; a failure on any rank fails
// the process.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "ccc/communicator.hpp"
#include "ccc/executor.hpp"
#include "ccc/mpi/mpi_communicator.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"

#include "ccc/conformance.hpp"
#include "ccc/staged_communicator.hpp"
#include "mpi_test_main.hpp"

namespace dsp {
namespace {

MpiCommunicator* g_comm = nullptr;

using namespace dsp::test;

template <class T>
class AllToAllV : public ::testing::Test {};
using A2ATypes = ::testing::Types<int32_t, int64_t, float, double, uint16_t>;
TYPED_TEST_SUITE(AllToAllV, A2ATypes);

TYPED_TEST(AllToAllV, InPieces) {
  g_comm->set_max_count_for_testing(1000);
  check_all_to_all_v<TypeParam>(seg_mod3, "pieces-mod3");
  check_all_to_all_v<TypeParam>(seg_zero, "pieces-zero");
  check_all_to_all_v<TypeParam>(seg_large, "pieces-large");
  g_comm->set_max_count_for_testing(INT32_MAX);
}

template <class T>
class AllReduce : public ::testing::Test {};
using ReduceTypes = ::testing::Types<float, double, int32_t, int64_t>;
TYPED_TEST_SUITE(AllReduce, ReduceTypes);

TYPED_TEST(AllReduce, InPieces) {
  g_comm->set_max_count_for_testing(100);
  check_all_reduce<TypeParam>(1050);
  g_comm->set_max_count_for_testing(INT32_MAX);
}

TEST(AllReduce, RejectsUnsupportedDtype) {
  uint16_t h = 0;
  try {
    g_comm->all_reduce(&h, 1, DType::kFloat16, ReduceOp::kSum);
    FAIL() << "no throw";
  } catch (const NotSupported& e) {
    EXPECT_STREQ(e.what(), "mpi does not support all_reduce of float16");
  }
}

TEST(Broadcast, InPieces) {
  g_comm->set_max_count_for_testing(1000);
  check_broadcast(3333);
  g_comm->set_max_count_for_testing(INT32_MAX);
}

void check_all_gather_host(int64_t count, bool in_place) {
  MpiCommunicator& c = *g_comm;
  const int r = c.rank(), P = c.size();
  std::vector<double> send(count), recv(count * P, -1.0);
  for (int64_t i = 0; i < count; ++i) send[i] = r * 100000.0 + i + 0.5;
  const double* sp = send.data();
  if (in_place) {
    std::copy(send.begin(), send.end(), recv.begin() + r * count);
    sp = recv.data() + r * count;
  }
  c.all_gather(sp, recv.data(), count, DType::kFloat64);
  for (int p = 0; p < P; ++p) {
    for (int64_t i = 0; i < count; ++i) {
      ASSERT_EQ(recv[p * count + i], p * 100000.0 + i + 0.5) << p << " " << i;
    }
  }
}

TEST(AllGather, InPlaceAndInPieces) {
  for (bool in_place : {false, true}) {
    check_all_gather_host(2500, in_place);
    g_comm->set_max_count_for_testing(1000);
    check_all_gather_host(2500, in_place);
    g_comm->set_max_count_for_testing(INT32_MAX);
  }
}

TEST(Threads, ThreeThreadsIssueOpsInOneGlobalOrder) {
  // Op k of the sequence belongs to thread k % 3 on every rank; a turn counter makes every rank
  // issue the same sequence while the calls come from three different threads.
  MpiCommunicator& c = *g_comm;
  const int P = c.size(), r = c.rank();
  constexpr int kOps = 60;
  std::mutex mu;
  std::condition_variable cv;
  int turn = 0;
  std::vector<int> bad(3, 0);
  auto worker = [&](int t) {
    for (int k = t; k < kOps; k += 3) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return turn == k; });
      lock.unlock();
      if (t == 0) {
        int64_t v = r + k;
        c.all_reduce(&v, 1, DType::kInt64, ReduceOp::kSum);
        bad[t] += v != int64_t{P} * k + int64_t{P} * (P - 1) / 2;
      } else if (t == 1) {
        std::vector<int64_t> sc(P, k % 4), rc;
        std::vector<int64_t> send(P * (k % 4), k);
        auto out = c.all_to_all_v(send, sc, &rc);
        for (auto x : out) bad[t] += x != k;
        bad[t] += out.size() != static_cast<size_t>(P * (k % 4));
      } else {
        int32_t v = c.rank() == k % P ? k : -1;
        c.broadcast(&v, 1, DType::kInt32, k % P);
        bad[t] += v != k;
      }
      lock.lock();
      ++turn;
      cv.notify_all();
    }
  };
  std::vector<std::thread> ts;
  for (int t = 0; t < 3; ++t) ts.emplace_back(worker, t);
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad, std::vector<int>({0, 0, 0}));
}

TEST(Threads, MoreCommunicatorsShareTheExecutor) {
  // Each communicator has its own duplicated MPI communicator and op numbering; all of them go
  // through the one executor, from whichever thread calls.
  MpiCommunicator a, b;
  EXPECT_EQ(a.rank(), g_comm->rank());
  EXPECT_EQ(b.size(), g_comm->size());
  std::thread ta([&] {
    for (int i = 0; i < 20; ++i) {
      int64_t v = 1;
      a.all_reduce(&v, 1, DType::kInt64, ReduceOp::kSum);
      EXPECT_EQ(v, a.size());
      b.barrier();
    }
  });
  ta.join();
  int64_t v = 2;
  b.all_reduce(&v, 1, DType::kInt64, ReduceOp::kMax);
  EXPECT_EQ(v, 2);
  EXPECT_EQ(a.counters().ops, 20u);
  EXPECT_EQ(b.counters().ops, 21u);
}

TEST(Latency, SmallOps) {
  MpiCommunicator& c = *g_comm;
  constexpr int kIters = 300;
  c.barrier();
  Stopwatch sw;
  int64_t v = 1;
  for (int i = 0; i < kIters; ++i) c.all_reduce(&v, 1, DType::kInt64, ReduceOp::kSum);
  double ar = sw.seconds() * 1e6 / kIters;
  sw.reset();
  for (int i = 0; i < kIters; ++i) c.barrier();
  double ba = sw.seconds() * 1e6 / kIters;
  sw.reset();
  std::vector<int64_t> sc(c.size(), 16);
  std::vector<float> send(16 * c.size(), 1.f), recv(16 * c.size());
  for (int i = 0; i < kIters; ++i) {
    c.all_to_all_v(send.data(), sc, recv.data(), sc, DType::kFloat32);
  }
  double a2a = sw.seconds() * 1e6 / kIters;
  if (c.rank() == 0) {
    std::printf(
        "[ latency  ] P=%d: all_reduce(1 x int64) %.1f us/op, barrier %.1f us/op, "
        "all_to_all_v(16 floats/peer) %.1f us/op\n",
        c.size(), ar, ba, a2a);
  }
}

}  // namespace
}  // namespace dsp

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  dsp::CommOptions opts;
  // A rank that fails an ASSERT may skip a collective; abort within a minute rather than hang.
  opts.timeout = std::chrono::seconds(60);
  auto comm = std::make_unique<dsp::MpiCommunicator>(opts);
  dsp::g_comm = comm.get();
  dsp::test::HostBuffers host;
  // --staged: the conformance suite runs on the device-space communicator staged over MPI
  // (staged_communicator.hpp), with host memory standing in for the device's.
  std::unique_ptr<dsp::Communicator> staged;
  if (argc > 1 && std::string(argv[1]) == "--staged") {
    staged = dsp::make_staged_communicator(std::make_unique<dsp::MpiCommunicator>(opts),
                                           dsp::make_host_staging());
  }
  dsp::test::conformance_env() = {staged ? staged.get() : comm.get(), &host};
  const int failed = dsp::test::run_tests_on_all_ranks(*comm);
  dsp::g_comm = nullptr;
  staged.reset();
  comm.reset();
  return failed;
}
