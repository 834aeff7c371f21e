#pragma once
// Checks shared by the generator's unit tests (test_generate.cpp) and its CLI jobs
// (jobs/test_generate_cli.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "graph/dataset.hpp"

namespace dsp::gentest {

inline bool same_bytes(const Array& a, const Array& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

inline bool same_dataset(const Dataset& x, const Dataset& y) {
  return x.graph.num_nodes == y.graph.num_nodes && same_bytes(x.graph.indptr, y.graph.indptr) &&
         same_bytes(x.graph.indices, y.graph.indices) && same_bytes(x.features, y.features) &&
         same_bytes(x.labels, y.labels) && same_bytes(x.train_idx, y.train_idx) &&
         same_bytes(x.valid_idx, y.valid_idx) && same_bytes(x.test_idx, y.test_idx);
}

// Split sizes as given, each split sorted, within [0, n) and disjoint from the others; the meta
// counts them; labels still cover every node.
inline void expect_split_sizes(const Dataset& ds, int64_t train, int64_t valid, int64_t test) {
  const int64_t n = ds.graph.num_nodes;
  EXPECT_EQ(ds.train_idx.numel(), train);
  EXPECT_EQ(ds.valid_idx.numel(), valid);
  EXPECT_EQ(ds.test_idx.numel(), test);
  EXPECT_EQ(ds.meta.num_train, train);
  EXPECT_EQ(ds.meta.num_valid, valid);
  EXPECT_EQ(ds.meta.num_test, test);
  if (ds.labels.defined()) {
    EXPECT_EQ(ds.labels.numel(), n);
  }
  std::vector<char> seen(n, 0);
  for (const Array* split : {&ds.train_idx, &ds.valid_idx, &ds.test_idx}) {
    const int64_t* p = split->data<int64_t>();
    EXPECT_TRUE(std::is_sorted(p, p + split->numel()));
    for (int64_t i = 0; i < split->numel(); ++i) {
      ASSERT_TRUE(p[i] >= 0 && p[i] < n) << p[i];
      ASSERT_EQ(seen[p[i]]++, 0) << "node " << p[i] << " in two splits";
    }
  }
}

}  // namespace dsp::gentest
