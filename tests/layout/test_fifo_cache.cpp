// BGL's FIFO feature cache (layout/store/fifo_cache.hpp): a row is never held twice, the oldest row
// is evicted first, hits return the source rows, and the shared level stays consistent when
// processes and threads insert into it concurrently.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "layout/store/fifo_cache.hpp"

namespace dsp {
namespace {

constexpr int64_t kNodes = 500;
constexpr size_t kRowBytes = 24;

// The source row of node v: bytes derived from v, so any mix-up shows.
std::vector<unsigned char> rows_of(const std::vector<int64_t>& ids) {
  std::vector<unsigned char> out(ids.size() * kRowBytes);
  for (size_t i = 0; i < ids.size(); ++i) {
    for (size_t b = 0; b < kRowBytes; ++b) {
      out[i * kRowBytes + b] = static_cast<unsigned char>(ids[i] * 31 + b * 7 + (ids[i] >> 8));
    }
  }
  return out;
}

// Held nodes are distinct, and every held node's row is its source row.
void expect_consistent(FifoRowCache& c) {
  std::vector<int64_t> held = c.held();
  held.erase(std::remove(held.begin(), held.end(), int64_t{-1}), held.end());
  std::vector<int64_t> sorted = held;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "a row held twice";
  std::vector<uint8_t> hit(held.size(), 0);
  std::vector<unsigned char> rows(held.size() * kRowBytes);
  ASSERT_EQ(c.lookup(held.data(), static_cast<int64_t>(held.size()), hit.data(), rows.data()),
            static_cast<int64_t>(held.size()));
  EXPECT_EQ(rows, rows_of(held));
}

std::vector<int64_t> random_batch(uint64_t key, int64_t k) {
  RngStream s(rng_key(5, key), 0);
  std::vector<int64_t> ids(k);
  for (auto& v : ids) v = static_cast<int64_t>(s.uniform_int(kNodes));
  return ids;  // repeats on purpose: the cache must not hold them twice
}

TEST(FifoCache, EvictsOldestFirstAndNeverHoldsARowTwice) {
  FifoRowCache c(4, kNodes, kRowBytes);
  std::vector<int64_t> a = {0, 1, 2, 3, 2, 1};
  EXPECT_EQ(c.insert(a.data(), rows_of(a).data(), 6), 4);  // the repeats are skipped
  std::vector<int64_t> b = {4, 5};
  EXPECT_EQ(c.insert(b.data(), rows_of(b).data(), 2), 2);
  EXPECT_EQ(c.held(), (std::vector<int64_t>{4, 5, 2, 3}));
  std::vector<int64_t> q = {0, 1, 2, 3, 4, 5};
  std::vector<uint8_t> hit(6, 0);
  std::vector<unsigned char> rows(6 * kRowBytes);
  EXPECT_EQ(c.lookup(q.data(), 6, hit.data(), rows.data()), 4);
  EXPECT_EQ(hit, (std::vector<uint8_t>{0, 0, 1, 1, 1, 1}));
  rows.resize(4 * kRowBytes);
  EXPECT_EQ(rows, rows_of({2, 3, 4, 5}));
  EXPECT_EQ(c.stats().evictions, 2);
}

TEST(FifoCache, RandomInsertsKeepTheInvariant) {
  FifoRowCache c(37, kNodes, kRowBytes);
  for (uint64_t round = 0; round < 200; ++round) {
    std::vector<int64_t> ids = random_batch(round, 1 + static_cast<int64_t>(round % 60));
    c.insert(ids.data(), rows_of(ids).data(), static_cast<int64_t>(ids.size()));
    if (round % 10 == 0) expect_consistent(c);
  }
  expect_consistent(c);
  const FifoStats st = c.stats();
  EXPECT_GT(st.evictions, 0);
  EXPECT_EQ(st.inserts - st.evictions, 37);  // full
}

TEST(FifoCache, SharedLevelAcrossProcessesAndThreads) {
  const std::string name = "/dsp_fifo_test_" + std::to_string(::getpid());
  FifoRowCache c(150, kNodes, kRowBytes, name);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // another rank of the machine: attaches and inserts concurrently
    int rc = 0;
    try {
      FifoRowCache other(150, kNodes, kRowBytes, name);
      for (uint64_t round = 0; round < 300; ++round) {
        std::vector<int64_t> ids = random_batch(1000 + round, 40);
        other.insert(ids.data(), rows_of(ids).data(), 40);
      }
    } catch (...) {
      rc = 1;
    }
    _exit(rc);
  }
  auto work = [&](uint64_t base) {
    for (uint64_t round = 0; round < 300; ++round) {
      std::vector<int64_t> ids = random_batch(base + round, 40);
      c.insert(ids.data(), rows_of(ids).data(), 40);
      std::vector<uint8_t> hit(40, 0);
      std::vector<unsigned char> rows(40 * kRowBytes);
      const int64_t h = c.lookup(ids.data(), 40, hit.data(), rows.data());
      std::vector<int64_t> hits;
      for (int k = 0; k < 40; ++k) {
        if (hit[k]) hits.push_back(ids[k]);
      }
      rows.resize(h * kRowBytes);
      ASSERT_EQ(rows, rows_of(hits));
    }
  };
  std::thread t1(work, 5000), t2(work, 9000);
  t1.join();
  t2.join();
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  expect_consistent(c);
  EXPECT_EQ(c.stats().inserts - c.stats().evictions, 150);
  EXPECT_GT(c.stats().evictions, 300);
}

TEST(FifoCache, AttachingWithAnotherGeometryIsAClearError) {
  const std::string name = "/dsp_fifo_geom_" + std::to_string(::getpid());
  FifoRowCache c(10, kNodes, kRowBytes, name);
  try {
    FifoRowCache other(10, kNodes, kRowBytes + 8, name);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("holds 10 rows of 24 bytes for 500 nodes"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(FifoRowCache(0, kNodes, kRowBytes), InvalidArgument);
  EXPECT_THROW(FifoRowCache(4, kNodes, kRowBytes, "no-slash"), InvalidArgument);
}

TEST(FifoCache, TraceReplayHitRate) {
  // Batches {0,1,2} {1,2,3} {0,4}, 3 slots: batch 2 hits 1 and 2, 3 evicts 0; batch 3 misses.
  std::vector<int64_t> ids = {0, 1, 2, 1, 2, 3, 0, 4};
  std::vector<int64_t> ends = {3, 6, 8};
  EXPECT_DOUBLE_EQ(fifo_hit_rate(ids, ends, 5, 3), 2.0 / 8);
  EXPECT_DOUBLE_EQ(fifo_hit_rate(ids, ends, 5, 5), 3.0 / 8);  // nothing evicted: 1, 2, 0 again
  EXPECT_DOUBLE_EQ(fifo_hit_rate(ids, ends, 5, 0), 0.0);
}

}  // namespace
}  // namespace dsp
