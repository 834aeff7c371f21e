#pragma once
// A dense, single-process reference of EmbeddingTable (layout/store/embedding_table.hpp), written
// straight from the header's formulas: rows indexed by dataset id, gradients summed in the order
// they are given. The arithmetic is the table's, in float with the same operation order, so a
// table whose owners receive the contributions in the same order equals it bitwise.
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/rng.hpp"
#include "layout/store/embedding_table.hpp"

namespace dsp::test {

// The initial row of dataset node `d`.
inline std::vector<float> initial_row(const EmbeddingOptions& o, int64_t d) {
  RngStream rs(embedding_key(o.seed), static_cast<uint64_t>(d));
  std::vector<float> row(static_cast<size_t>(o.dim));
  const float scale = static_cast<float>(o.init_scale);
  for (auto& x : row) x = (2.0f * rs.uniform01f() - 1.0f) * scale;
  return row;
}

// One gradient contribution: dataset node, its gradient row (dim floats), the requester's scale.
struct Contribution {
  int64_t node;
  const float* grad;
  float scale;
};

struct ReferenceTable {
  EmbeddingOptions o;
  std::vector<float> x, s1, s2;  // [n, dim]: values; adam m, v | adagrad s
  std::vector<int64_t> t;        // adam: per-row step count

  ReferenceTable(const EmbeddingOptions& opts, int64_t n) : o(opts) {
    const size_t cells = static_cast<size_t>(n * o.dim);
    for (int64_t d = 0; d < n; ++d) {
      const std::vector<float> r = initial_row(o, d);
      x.insert(x.end(), r.begin(), r.end());
    }
    s1.assign(cells, 0.0f);
    s2.assign(cells, 0.0f);
    t.assign(static_cast<size_t>(n), 0);
  }
  const float* row(int64_t d) const { return x.data() + d * o.dim; }

  // One apply_gradients: the contributions of every requester, in summation order.
  void step(const std::vector<Contribution>& cs) {
    const int64_t n = static_cast<int64_t>(t.size()), dim = o.dim;
    std::vector<float> g(static_cast<size_t>(n * dim), 0.0f);
    std::vector<bool> touched(static_cast<size_t>(n), false);
    for (const Contribution& c : cs) {
      touched[c.node] = true;
      for (int64_t j = 0; j < dim; ++j) g[c.node * dim + j] += c.grad[j] * c.scale;
    }
    const float lr = static_cast<float>(o.lr), eps = static_cast<float>(o.eps);
    const float b1 = static_cast<float>(o.beta1), b2 = static_cast<float>(o.beta2);
    const float c1 = static_cast<float>(1.0 - o.beta1), c2 = static_cast<float>(1.0 - o.beta2);
    for (int64_t d = 0; d < n; ++d) {
      if (!touched[d]) continue;
      t[d] += 1;
      const float bc1 = static_cast<float>(1.0 - std::pow(o.beta1, static_cast<double>(t[d])));
      const float bc2 = static_cast<float>(1.0 - std::pow(o.beta2, static_cast<double>(t[d])));
      for (int64_t j = 0; j < dim; ++j) {
        const size_t k = static_cast<size_t>(d * dim + j);
        const float gj = g[k];
        if (o.optimizer == "adam") {
          s1[k] = b1 * s1[k] + c1 * gj;
          s2[k] = b2 * s2[k] + c2 * (gj * gj);
          x[k] -= lr * (s1[k] / bc1) / (std::sqrt(s2[k] / bc2) + eps);
        } else {
          s1[k] += gj * gj;
          x[k] -= lr * gj / (std::sqrt(s1[k]) + eps);
        }
      }
    }
  }
};

}  // namespace dsp::test
