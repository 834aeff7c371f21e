// PaGraph's cache sizing (layout/store/cache_sizing.hpp) as the pure function it is.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "layout/store/cache_sizing.hpp"

namespace dsp {
namespace {

CacheSizing base() {
  CacheSizing s;
  s.memory_left = 1000000;
  s.batch_feature_bytes = 100000;
  s.prefetch_batches = 2;
  s.headroom = 0.1;
  s.row_bytes = 400;
  s.max_rows = 1000000;
  return s;
}

TEST(CacheSizing, MemoryLeftMinusHeadroomAndPrefetchReservation) {
  // 1e6 * 0.9 - 3 * 1e5 = 600000 bytes: 1500 rows of 400 bytes.
  EXPECT_EQ(cache_rows_for_memory(base()), 1500);
  CacheSizing s = base();
  s.prefetch_batches = 0;  // only the batch in training: 800000 bytes
  EXPECT_EQ(cache_rows_for_memory(s), 2000);
  s.headroom = 0;
  s.row_bytes = 3;  // floor: 900000 / 3
  EXPECT_EQ(cache_rows_for_memory(s), 300000);
  s.row_bytes = 7;  // 900000 / 7 = 128571.4
  EXPECT_EQ(cache_rows_for_memory(s), 128571);
}

TEST(CacheSizing, ClampedToThePartAndToZero) {
  CacheSizing s = base();
  s.max_rows = 1000;
  EXPECT_EQ(cache_rows_for_memory(s), 1000);
  s = base();
  s.batch_feature_bytes = 300000;  // the reservation exceeds what is left
  EXPECT_EQ(cache_rows_for_memory(s), 0);
  s = base();
  s.memory_left = 0;
  EXPECT_EQ(cache_rows_for_memory(s), 0);
}

TEST(CacheSizing, BadInputIsAClearError) {
  CacheSizing s = base();
  s.row_bytes = 0;
  EXPECT_THROW(cache_rows_for_memory(s), InvalidArgument);
  s = base();
  s.headroom = 1;
  try {
    cache_rows_for_memory(s);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("headroom 1 not in [0, 1)"), std::string::npos)
        << e.what();
  }
  s = base();
  s.memory_left = -1;
  EXPECT_THROW(cache_rows_for_memory(s), InvalidArgument);
}

TEST(CacheSizing, HostAvailableMemoryIsPositive) {
  EXPECT_GT(host_available_memory(), int64_t{1} << 20);
}

}  // namespace
}  // namespace dsp
