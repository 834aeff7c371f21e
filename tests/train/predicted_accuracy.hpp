#pragma once
// Test helper shared by test_train and test_train_mpi: the accuracy on a dataset's test nodes of
// the classes `dsp predict` wrote (predictions.npy, row v = node v of the dataset).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "graph/dataset.hpp"
#include "graph/hetero.hpp"
#include "graph/npy.hpp"

namespace dsp::test {

inline double predicted_test_accuracy(const std::string& predictions_npy, const Dataset& ds) {
  const Array pred = load_npy(predictions_npy);
  EXPECT_EQ(pred.dim(0), ds.meta.num_nodes) << predictions_npy;
  if (pred.dim(0) != ds.meta.num_nodes) return -1;
  int64_t correct = 0;
  for (int64_t i = 0; i < ds.test_idx.dim(0); ++i) {
    const int64_t v = ds.test_idx.int_at(i);
    correct += pred.int_at(v) == ds.labels.int_at(v) ? 1 : 0;
  }
  return static_cast<double>(correct) / static_cast<double>(ds.test_idx.dim(0));
}

// A typed dataset's: row v of predictions.npy is node v of the target type.
inline double predicted_test_accuracy(const std::string& predictions_npy, const HeteroDataset& ds) {
  const Array pred = load_npy(predictions_npy);
  const int64_t n = ds.schema.node_types[static_cast<size_t>(ds.schema.target)].count;
  EXPECT_EQ(pred.dim(0), n) << predictions_npy;
  if (pred.dim(0) != n) return -1;
  int64_t correct = 0;
  for (int64_t i = 0; i < ds.test_idx.dim(0); ++i) {
    const int64_t v = ds.test_idx.int_at(i);
    correct += pred.int_at(v) == ds.labels.int_at(v) ? 1 : 0;
  }
  return static_cast<double>(correct) / static_cast<double>(ds.test_idx.dim(0));
}

}  // namespace dsp::test
