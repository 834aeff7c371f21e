#include "layout/store/cache_sizing.hpp"

#include <algorithm>
#include <fstream>
#include <string>

#include "core/error.hpp"

namespace dsp {

int64_t cache_rows_for_memory(const CacheSizing& s) {
  DSP_CHECK_ARG(s.row_bytes > 0, "cache sizing: row_bytes must be positive");
  DSP_CHECK_ARG(s.memory_left >= 0 && s.batch_feature_bytes >= 0 && s.prefetch_batches >= 0 &&
                    s.max_rows >= 0,
                "cache sizing: negative input (memory {}, batch {}, prefetch {}, rows {})",
                s.memory_left, s.batch_feature_bytes, s.prefetch_batches, s.max_rows);
  DSP_CHECK_ARG(s.headroom >= 0 && s.headroom < 1, "cache sizing: headroom {} not in [0, 1)",
                s.headroom);
  const double usable =
      static_cast<double>(s.memory_left) * (1 - s.headroom) -
      static_cast<double>(s.prefetch_batches + 1) * static_cast<double>(s.batch_feature_bytes);
  if (usable <= 0) return 0;
  const double rows = usable / static_cast<double>(s.row_bytes);
  return rows >= static_cast<double>(s.max_rows) ? s.max_rows : static_cast<int64_t>(rows);
}

int64_t host_available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t kib = -1;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  DSP_THROW_T(IoError, "/proc/meminfo: no MemAvailable line");
}

}  // namespace dsp
