#pragma once
// Internal to the generators (generate.cpp, generate_hetero.cpp): the draws they share, so that
// both are pure functions of their options in the same way.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <vector>

#include "core/rng.hpp"

namespace dsp::detail {

// A uniformly random permutation of [0, n): Fisher-Yates where the swap partner of position i
// comes from its own stream, so it is a pure function of (key, n).
inline std::vector<int64_t> random_permutation(int64_t n, uint64_t key) {
  std::vector<int64_t> p(n);
  std::iota(p.begin(), p.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(RngStream(key, i).uniform_int(i + 1));
    std::swap(p[i], p[j]);
  }
  return p;
}

// Fills out[0, count) with standard normals: Box-Muller from two 32-bit draws per pair, both
// branches used (the transcendental functions dominate feature generation).
inline void normals(RngStream& s, float* out, int64_t count) {
  for (int64_t j = 0; j < count; j += 2) {
    float u1 = (static_cast<float>(s.next_u32() >> 8) + 0.5f) * (1.0f / 16777216.0f);
    float u2 = static_cast<float>(s.next_u32() >> 8) * (1.0f / 16777216.0f);
    float r = std::sqrt(-2.0f * std::log(u1));
    float a = 6.2831853f * u2;
    out[j] = r * std::cos(a);
    if (j + 1 < count) out[j + 1] = r * std::sin(a);
  }
}

struct SplitSizes {
  int64_t train = 0, valid = 0, test = 0;
};

// Of n nodes: round(n * fraction) each, clamped in order to the nodes left; test unset: every
// node left.
inline SplitSizes split_sizes(int64_t n, double train_frac, double valid_frac,
                              const std::optional<double>& test_frac) {
  auto share = [n](double f, int64_t left) {
    return std::min<int64_t>(left, std::llround(f * static_cast<double>(n)));
  };
  SplitSizes s;
  s.train = share(train_frac, n);
  s.valid = share(valid_frac, n - s.train);
  const int64_t left = n - s.train - s.valid;
  s.test = test_frac ? share(*test_frac, left) : left;
  return s;
}

// A random train/valid/test split of [0, n) with the given sizes (random_permutation under
// `key`, cut in that order), each split ascending.
inline std::vector<std::vector<int64_t>> split_ids(int64_t n, const SplitSizes& s, uint64_t key) {
  std::vector<int64_t> order = random_permutation(n, key);
  auto take = [&](int64_t b, int64_t e) {
    std::vector<int64_t> v(order.begin() + b, order.begin() + e);
    std::sort(v.begin(), v.end());
    return v;
  };
  return {take(0, s.train), take(s.train, s.train + s.valid),
          take(s.train + s.valid, s.train + s.valid + s.test)};
}

}  // namespace dsp::detail
