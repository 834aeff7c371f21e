#pragma once
// The uniform node-wise picks without replacement, computed the slow way for tests.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/rng.hpp"
#include "csp/sample_kernels.hpp"

namespace dsp {

// Floyd's algorithm drawing from the stream one draw at a time: the uniform schemes take exactly
// these picks (TaskDraws only changes how the draws are computed).
inline std::vector<int64_t> floyd_reference(int64_t deg, int k, RngStream s) {
  std::vector<int64_t> pos;
  if (deg <= k) {
    for (int64_t i = 0; i < deg; ++i) pos.push_back(i);
    return pos;
  }
  for (int64_t j = deg - k; j < deg; ++j) {
    const int64_t t = j + 1 <= 0xffffffffLL
                          ? csp::draw_below(s, static_cast<uint32_t>(j + 1))
                          : static_cast<int64_t>(s.next_u64() % static_cast<uint64_t>(j + 1));
    pos.push_back(std::find(pos.begin(), pos.end(), t) == pos.end() ? t : j);
  }
  std::sort(pos.begin(), pos.end());
  return pos;
}

}  // namespace dsp
