// Single-process tests of the communication layer: the self backend, the executor, the factory.
// Multi-rank conformance lives in tests/ccc/mpi (run under mpiexec by ctest).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

#include "ccc/communicator.hpp"
#include "ccc/coordinator.hpp"
#include "ccc/detail/common.hpp"
#include "ccc/executor.hpp"
#include "ccc/self_communicator.hpp"
#include "core/error.hpp"

namespace dsp {
namespace {

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(SelfCommunicator, EveryOpIsACopyAndCountsSelfBytes) {
  SelfCommunicator c;
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.size(), 1);
  EXPECT_EQ(c.backend(), "self");

  EXPECT_EQ(c.exchange_counts({5}), std::vector<int64_t>({5}));
  std::vector<int32_t> send = {1, 2, 3, 4, 5}, recv(5, 0);
  c.all_to_all_v(send.data(), {5}, recv.data(), {5}, DType::kInt32);
  EXPECT_EQ(recv, send);
  c.all_to_all_v(nullptr, {0}, nullptr, {0}, DType::kInt32);  // zero-length segment

  std::vector<double> d = {1.5, -2.0};
  c.all_reduce(d.data(), 2, DType::kFloat64, ReduceOp::kSum);
  EXPECT_EQ(d, std::vector<double>({1.5, -2.0}));
  c.all_reduce(d.data(), 2, DType::kFloat64, ReduceOp::kMax);
  c.all_reduce(d.data(), 2, DType::kFloat64, ReduceOp::kMin);
  EXPECT_EQ(d, std::vector<double>({1.5, -2.0}));

  std::vector<int64_t> b = {7, 8, 9};
  c.broadcast(b.data(), 3, DType::kInt64, 0);
  EXPECT_EQ(b, std::vector<int64_t>({7, 8, 9}));

  std::vector<float> g(4, 0.f), gs = {1.f, 2.f, 3.f, 4.f};
  c.all_gather(gs.data(), g.data(), 4, DType::kFloat32);
  EXPECT_EQ(g, gs);
  c.barrier();

  CommCounters k = c.counters();
  ASSERT_EQ(k.bytes_sent.size(), 1u);
  // exchange 8 + a2a 20 + reduce 3*16 + bcast 24 + gather 16
  EXPECT_EQ(k.bytes_sent[0], 8u + 20 + 48 + 24 + 16);
  EXPECT_EQ(k.bytes_recv[0], 8u + 20 + 48 + 24 + 16);
  EXPECT_EQ(k.ops, 9u);
  EXPECT_EQ(k.total_sent(), k.bytes_sent[0]);
  c.reset_counters();
  EXPECT_EQ(c.counters().total_recv(), 0u);
  EXPECT_EQ(c.counters().ops, 0u);
}

TEST(SelfCommunicator, HostConvenienceAllToAllV) {
  SelfCommunicator c;
  std::vector<int64_t> rc;
  auto out = c.all_to_all_v(std::vector<int64_t>{4, 5, 6}, {3}, &rc);
  EXPECT_EQ(out, std::vector<int64_t>({4, 5, 6}));
  EXPECT_EQ(rc, std::vector<int64_t>({3}));
}

TEST(SelfCommunicator, RejectsBadArguments) {
  SelfCommunicator c;
  int32_t x = 0;
  EXPECT_THROW(c.exchange_counts({1, 2}), InvalidArgument);
  EXPECT_THROW(c.exchange_counts({-1}), InvalidArgument);
  EXPECT_THROW(c.all_to_all_v(&x, {1}, &x, {2}, DType::kInt32), InvalidArgument);
  EXPECT_THROW(c.broadcast(&x, 1, DType::kInt32, 1), InvalidArgument);
  EXPECT_THROW(c.all_reduce(&x, -1, DType::kInt32, ReduceOp::kSum), InvalidArgument);
  try {
    c.all_reduce(&x, 1, DType::kFloat16, ReduceOp::kSum);
    FAIL() << "no throw";
  } catch (const NotSupported& e) {
    EXPECT_STREQ(e.what(), "self does not support all_reduce of float16");
  }
}

TEST(CommTimeout, EnvOverridesDefaultAndOpWins) {
  CommOptions o;
  o.timeout = std::chrono::seconds(7);
  {
    ScopedEnv e("DSP_COMM_TIMEOUT", "1.25");
    EXPECT_EQ(detail::default_timeout(o).count(), 1250);
  }
  {
    ScopedEnv e("DSP_COMM_TIMEOUT", "");
    EXPECT_EQ(detail::default_timeout(o).count(), 7000);
  }
  {
    ScopedEnv e("DSP_COMM_TIMEOUT", "soon");
    EXPECT_THROW(detail::default_timeout(o), InvalidArgument);
    EXPECT_THROW(SelfCommunicator{o}, InvalidArgument);
  }
  {
    ScopedEnv e("DSP_COMM_TIMEOUT", "-1");
    EXPECT_THROW(detail::default_timeout(o), InvalidArgument);
  }
  OpOptions op;
  EXPECT_EQ(detail::op_timeout(op, std::chrono::milliseconds(5)).count(), 5);
  op.timeout = std::chrono::milliseconds(9);
  EXPECT_EQ(detail::op_timeout(op, std::chrono::milliseconds(5)).count(), 9);
}

TEST(MakeCommunicator, SelfAutoAndUnknown) {
  auto c = make_communicator("self");
  EXPECT_EQ(c->backend(), "self");
  if (!launched_by_mpi()) {
    EXPECT_EQ(make_communicator("auto")->backend(), "self");
  }
  try {
    make_communicator("bogus");
    FAIL() << "no throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown communicator backend 'bogus'"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(make_communicator("nccl"), InvalidArgument);
}

// A backend registered at run time (as the Python module registers "torch"): make_communicator
// and make_coordinator make it by name, one factory call per communicator, and the unknown-name
// message lists it.
TEST(MakeCommunicator, RegisteredBackend) {
  static std::atomic<int> made{0};
  register_communicator_backend("test-self", [](const CommOptions& o) {
    ++made;
    return make_self_communicator(o);
  });
  EXPECT_TRUE(is_communicator_backend("test-self"));
  EXPECT_FALSE(is_communicator_backend("nccl"));
  EXPECT_EQ(make_communicator("test-self")->backend(), "self");
  EXPECT_EQ(made.load(), 1);
  auto coord = make_coordinator("test-self");
  EXPECT_EQ(made.load(), 2 + kNumWorkerKinds);  // the control channel and one per worker kind
  EXPECT_EQ(coord->size(), 1);
  try {
    make_communicator("bogus");
    FAIL() << "no throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("(auto|self|mpi|test-self)"), std::string::npos)
        << e.what();
  }
  try {
    make_coordinator("bogus");
    FAIL() << "no throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("coordinator: unknown backend 'bogus' (auto|self|mpi|"
                                         "test-self)"),
              std::string::npos)
        << e.what();
  }
  for (const char* builtin : {"auto", "self", "mpi", "nccl"}) {
    EXPECT_THROW(register_communicator_backend(builtin, make_self_communicator), InvalidArgument)
        << builtin;
  }
}

TEST(CommExecutor, RunsTasksInSubmissionOrderOnOneThread) {
  CommExecutor ex("test");
  std::vector<int> order;
  std::vector<std::future<void>> fs;
  std::thread::id tid;
  for (int i = 0; i < 100; ++i) {
    fs.push_back(ex.submit("t", [&, i] {
      if (i == 0) tid = std::this_thread::get_id();
      EXPECT_EQ(std::this_thread::get_id(), tid);
      EXPECT_TRUE(ex.on_executor_thread());
      order.push_back(i);
    }));
  }
  for (auto& f : fs) f.get();
  std::vector<int> want(100);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(order, want);
  EXPECT_NE(tid, std::this_thread::get_id());
  EXPECT_FALSE(ex.on_executor_thread());
  EXPECT_EQ(ex.submit("v", [] { return 42; }).get(), 42);
  // The counter moves just after a task's future is made ready.
  EXPECT_GE(ex.completed(), 100u);
}

TEST(CommExecutor, ExceptionsReachTheCallerAndTheThreadSurvives) {
  CommExecutor ex;
  auto f = ex.submit("bad", []() -> int { DSP_THROW_T(CommError, "op failed"); });
  EXPECT_THROW(f.get(), CommError);
  EXPECT_THROW(ex.run("bad2", [] { throw std::runtime_error("x"); }), std::runtime_error);
  EXPECT_EQ(ex.run("ok", [] { return 3; }), 3);
}

TEST(CommExecutor, RunFromTheExecutorThreadIsInline) {
  CommExecutor ex;
  int v = ex.run("outer", [&] { return ex.run("inner", [] { return 5; }) + 1; });
  EXPECT_EQ(v, 6);
}

TEST(CommExecutor, ManyThreadsSubmitConcurrently) {
  CommExecutor ex;
  constexpr int kThreads = 8, kPer = 500;
  int64_t sum = 0;  // touched only on the executor: no lock needed
  std::vector<std::thread> ts;
  std::vector<int> last_seen(kThreads, -1);
  std::atomic<int> order_errors{0};
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < kPer; ++i) {
        auto f = ex.submit("add", [&, t, i] {
          // Tasks of one submitter keep their order.
          if (last_seen[t] != i - 1) ++order_errors;
          last_seen[t] = i;
          sum += i;
          return i;
        });
        if (i % 7 == 0) {
          EXPECT_EQ(f.get(), i);
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  ex.run("drain", [] {});
  EXPECT_EQ(sum, int64_t{kThreads} * kPer * (kPer - 1) / 2);
  EXPECT_EQ(order_errors.load(), 0);
}

TEST(CommExecutor, HooksRunOnTheExecutorThread) {
  std::atomic<int> idle{0};
  std::thread::id start_tid, stop_tid;
  bool stopped = false;
  {
    CommExecutor::Hooks h;
    h.on_start = [&] { start_tid = std::this_thread::get_id(); };
    h.on_idle = [&] { ++idle; };
    h.on_stop = [&] {
      stop_tid = std::this_thread::get_id();
      stopped = true;
    };
    h.idle_period = std::chrono::milliseconds(1);
    CommExecutor ex("hooks", std::move(h));
    auto tid = ex.run("id", [] { return std::this_thread::get_id(); });
    EXPECT_EQ(tid, start_tid);
    for (int i = 0; i < 2000 && idle.load() < 3; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_GE(idle.load(), 3);
    ex.stop();
    EXPECT_TRUE(stopped);
    EXPECT_EQ(stop_tid, tid);
    EXPECT_THROW(ex.submit("late", [] {}), Error);
  }
}

TEST(CommExecutor, FailingStartHookFailsConstruction) {
  CommExecutor::Hooks h;
  h.on_start = [] { DSP_THROW_T(CommError, "no MPI today"); };
  EXPECT_THROW(CommExecutor("x", std::move(h)), CommError);
}

}  // namespace
}  // namespace dsp
