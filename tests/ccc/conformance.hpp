#pragma once
// The communicator conformance suite, written once against Communicator&: every op against a
// closed-form result, uneven and zero-length all_to_all_v segments, every root, exact byte
// counters. A test binary includes this header once, sets conformance_env() (the communicator
// and its buffers) in main, and runs the suite on every rank: MPI at 1..4 ranks
// (mpi/test_ccc_mpi.cpp), NCCL on a GPU (cuda/test_nccl.cpp, device buffers). Timeout and abort,
// which end the job, are the fault cases of conformance_faults.hpp, one process per case.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "ccc/comm_buffers.hpp"
#include "ccc/communicator.hpp"
#include "core/error.hpp"

namespace dsp::test {

struct ConformanceEnv {
  Communicator* comm = nullptr;
  CommBuffers* mem = nullptr;
};
inline ConformanceEnv& conformance_env() {
  static ConformanceEnv env;
  return env;
}

// A host vector staged into the communicator's memory.
template <class T>
void* staged(const std::vector<T>& v) {
  CommBuffers& m = *conformance_env().mem;
  void* p = m.alloc(v.size() * sizeof(T));
  m.put(p, v.data(), v.size() * sizeof(T));
  return p;
}
template <class T>
std::vector<T> fetched(const void* p, size_t n) {
  conformance_env().comm->synchronize();
  std::vector<T> v(n);
  conformance_env().mem->get(v.data(), p, n * sizeof(T));
  return v;
}

// A value that names (source rank, destination rank, index) exactly in every tested type:
// below 2^16, so float16 raw bits, float32 and int32 all hold it.
template <class T>
T encode(int src, int dst, int64_t i) {
  return static_cast<T>((src * 8 + dst) * 1024 + (i % 1024));
}

// Rank r sends seg(r, p) elements to peer p.
using SegFn = int64_t (*)(int src, int dst, int size);

template <class T>
void check_all_to_all_v(SegFn seg, const std::string& label) {
  Communicator& c = *conformance_env().comm;
  const int r = c.rank(), P = c.size();
  std::vector<int64_t> sc(P);
  std::vector<T> send;
  for (int p = 0; p < P; ++p) {
    sc[p] = seg(r, p, P);
    for (int64_t i = 0; i < sc[p]; ++i) send.push_back(encode<T>(r, p, i));
  }
  OpOptions o;
  o.label = label;
  std::vector<int64_t> rc = c.exchange_counts(sc, o);
  const int64_t total = std::accumulate(rc.begin(), rc.end(), int64_t{0});
  void* sbuf = staged(send);
  void* rbuf = conformance_env().mem->alloc(total * sizeof(T));
  c.all_to_all_v(sbuf, sc, rbuf, rc, dtype_of<T>(), o);
  std::vector<T> recv = fetched<T>(rbuf, total);
  conformance_env().mem->reset();
  ASSERT_EQ(rc.size(), static_cast<size_t>(P));
  size_t k = 0;
  for (int p = 0; p < P; ++p) {
    ASSERT_EQ(rc[p], seg(p, r, P)) << label << " from " << p;
    for (int64_t i = 0; i < rc[p]; ++i, ++k) {
      ASSERT_EQ(recv[k], encode<T>(p, r, i)) << label << " from " << p << " at " << i;
    }
  }
  EXPECT_EQ(k, recv.size());
}

inline int64_t seg_mod3(int src, int dst, int) { return (src + dst) % 3; }
inline int64_t seg_zero(int, int, int) { return 0; }
inline int64_t seg_large(int src, int dst, int size) { return 100000 / size + 7 * src + dst; }
inline int64_t seg_only_to_next(int src, int dst, int size) {
  return dst == (src + 1) % size ? 5 : 0;
}

template <class T>
class ConformanceAllToAllV : public ::testing::Test {};
using ConformanceA2ATypes = ::testing::Types<int32_t, int64_t, float, double, uint16_t>;
TYPED_TEST_SUITE(ConformanceAllToAllV, ConformanceA2ATypes);

TYPED_TEST(ConformanceAllToAllV, UnevenZeroAndLargeSegments) {
  check_all_to_all_v<TypeParam>(seg_mod3, "mod3");
  check_all_to_all_v<TypeParam>(seg_zero, "zero");
  check_all_to_all_v<TypeParam>(seg_only_to_next, "next");
  check_all_to_all_v<TypeParam>(seg_large, "large");
}

template <class T>
void check_all_reduce(int64_t count) {
  Communicator& c = *conformance_env().comm;
  const int64_t r = c.rank(), P = c.size();
  std::vector<T> v(count);
  for (int64_t i = 0; i < count; ++i) v[i] = static_cast<T>(r + i % 1000);
  void* s = staged(v);
  void* mx = staged(v);
  void* mn = staged(v);
  c.all_reduce(s, count, dtype_of<T>(), ReduceOp::kSum);
  c.all_reduce(mx, count, dtype_of<T>(), ReduceOp::kMax);
  c.all_reduce(mn, count, dtype_of<T>(), ReduceOp::kMin);
  std::vector<T> hs = fetched<T>(s, count), hmx = fetched<T>(mx, count),
                 hmn = fetched<T>(mn, count);
  conformance_env().mem->reset();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t b = i % 1000;
    ASSERT_EQ(hs[i], static_cast<T>(P * b + P * (P - 1) / 2)) << i;
    ASSERT_EQ(hmx[i], static_cast<T>(P - 1 + b)) << i;
    ASSERT_EQ(hmn[i], static_cast<T>(b)) << i;
  }
}

template <class T>
class ConformanceAllReduce : public ::testing::Test {};
using ConformanceReduceTypes = ::testing::Types<float, double, int32_t, int64_t>;
TYPED_TEST_SUITE(ConformanceAllReduce, ConformanceReduceTypes);

TYPED_TEST(ConformanceAllReduce, SumMaxMinClosedForm) {
  check_all_reduce<TypeParam>(0);
  check_all_reduce<TypeParam>(1);
  check_all_reduce<TypeParam>(4099);
}

inline void check_broadcast(int64_t count) {
  Communicator& c = *conformance_env().comm;
  for (int root = 0; root < c.size(); ++root) {
    std::vector<int64_t> buf(count, -1);
    if (c.rank() == root) {
      for (int64_t i = 0; i < count; ++i) buf[i] = root * 1000003 + i;
    }
    void* d = staged(buf);
    c.broadcast(d, count, DType::kInt64, root);
    buf = fetched<int64_t>(d, count);
    conformance_env().mem->reset();
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(buf[i], root * 1000003 + i) << root;
  }
}

TEST(ConformanceBroadcast, FromEveryRoot) {
  check_broadcast(0);
  check_broadcast(1);
  check_broadcast(3333);
}

inline void check_all_gather(int64_t count) {
  Communicator& c = *conformance_env().comm;
  const int r = c.rank(), P = c.size();
  std::vector<double> send(count), recv(count * P, -1.0);
  for (int64_t i = 0; i < count; ++i) send[i] = r * 100000.0 + i + 0.5;
  void* s = staged(send);
  void* d = staged(recv);
  c.all_gather(s, d, count, DType::kFloat64);
  recv = fetched<double>(d, count * P);
  conformance_env().mem->reset();
  for (int p = 0; p < P; ++p) {
    for (int64_t i = 0; i < count; ++i) {
      ASSERT_EQ(recv[p * count + i], p * 100000.0 + i + 0.5) << p << " " << i;
    }
  }
}

TEST(ConformanceAllGather, RankMajorBlocks) {
  check_all_gather(0);
  check_all_gather(1);
  check_all_gather(2500);
}

// Small control payloads in host memory on any backend (OpOptions::host_buffers): a
// device-space communicator moves them on its host path, a host one ignores the flag.
TEST(ConformanceHostBuffers, EveryOpOnHostMemory) {
  Communicator& c = *conformance_env().comm;
  const int r = c.rank(), P = c.size();
  OpOptions o;
  o.label = "host buffers";
  o.host_buffers = true;
  std::vector<int64_t> sc(P), send;
  for (int p = 0; p < P; ++p) {
    sc[p] = seg_mod3(r, p, P) + 1;
    for (int64_t i = 0; i < sc[p]; ++i) send.push_back(encode<int64_t>(r, p, i));
  }
  std::vector<int64_t> rc = c.exchange_counts(sc, o);
  std::vector<int64_t> recv(std::accumulate(rc.begin(), rc.end(), int64_t{0}), -1);
  c.all_to_all_v(send.data(), sc, recv.data(), rc, DType::kInt64, o);
  size_t k = 0;
  for (int p = 0; p < P; ++p) {
    ASSERT_EQ(rc[p], seg_mod3(p, r, P) + 1);
    for (int64_t i = 0; i < rc[p]; ++i) ASSERT_EQ(recv[k++], encode<int64_t>(p, r, i)) << p;
  }
  int64_t sum[2] = {r, 1};
  c.all_reduce(sum, 2, DType::kInt64, ReduceOp::kSum, o);
  EXPECT_EQ(sum[0], int64_t{P} * (P - 1) / 2);
  EXPECT_EQ(sum[1], P);
  double b[3] = {r + 0.5, r + 1.5, r + 2.5};
  c.broadcast(b, 3, DType::kFloat64, P - 1, o);
  EXPECT_EQ(b[0], P - 0.5);
  EXPECT_EQ(b[2], P + 1.5);
  std::vector<int32_t> g(2 * P, -1);
  const int32_t mine[2] = {10 * r, 10 * r + 1};
  c.all_gather(mine, g.data(), 2, DType::kInt32, o);
  for (int p = 0; p < P; ++p) {
    EXPECT_EQ(g[2 * p], 10 * p);
    EXPECT_EQ(g[2 * p + 1], 10 * p + 1);
  }
}

TEST(ConformanceBarrier, Repeated) {
  for (int i = 0; i < 20; ++i) conformance_env().comm->barrier();
}

TEST(ConformanceCounters, ExactAfterAKnownSequence) {
  Communicator& c = *conformance_env().comm;
  const int r = c.rank(), P = c.size();
  c.barrier();
  c.reset_counters();
  // Asymmetric segments, so a swapped sent/recv would show.
  auto sc_of = [P](int src, int dst) { return int64_t{(src + 2 * dst) % 3 + (dst == 0 ? 4 : 0)}; };
  std::vector<int64_t> sc(P);
  for (int p = 0; p < P; ++p) sc[p] = sc_of(r, p);
  std::vector<int32_t> send(std::accumulate(sc.begin(), sc.end(), int64_t{0}), 1);
  std::vector<int64_t> rc = c.exchange_counts(sc);
  void* s = staged(send);
  void* d = conformance_env().mem->alloc(4 * std::accumulate(rc.begin(), rc.end(), int64_t{0}));
  c.all_to_all_v(s, sc, d, rc, DType::kInt32);
  void* ar = staged(std::vector<double>(10, 1.0));
  c.all_reduce(ar, 10, DType::kFloat64, ReduceOp::kSum);
  void* b = staged(std::vector<int64_t>(7, 0));
  c.broadcast(b, 7, DType::kInt64, P - 1);
  void* g = staged(std::vector<float>(5, 0.f));
  void* gr = staged(std::vector<float>(5 * P, 0.f));
  c.all_gather(g, gr, 5, DType::kFloat32);
  c.barrier();
  c.synchronize();
  conformance_env().mem->reset();

  CommCounters k = c.counters();
  ASSERT_EQ(k.bytes_sent.size(), static_cast<size_t>(P));
  EXPECT_EQ(k.ops, 6u);
  for (int p = 0; p < P; ++p) {
    uint64_t sent = 8 + 4 * sc_of(r, p) + 80 + (r == P - 1 ? 56 : 0) + 20;
    uint64_t recv = 8 + 4 * sc_of(p, r) + 80 + (p == P - 1 ? 56 : 0) + 20;
    EXPECT_EQ(k.bytes_sent[p], sent) << "peer " << p;
    EXPECT_EQ(k.bytes_recv[p], recv) << "peer " << p;
  }
  c.reset_counters();
  EXPECT_EQ(c.counters().total_sent(), 0u);
}

}  // namespace dsp::test
