// GNNLab's factored roles, the parts that need no peers: the allocation rule, the layout, the
// global queue's wire format. Whole-job equality with the symmetric run and failures of a
// sampler-only rank are checked under mpiexec (tests/train/probe/roles_equal.sh).
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "pipeline/roles.hpp"

namespace dsp {
namespace {

TEST(Roles, GnnlabAllocationRule) {
  // K = T_t / T_s; N_s = ceil(N / (K + 1)), rounded up (GNNLab section 5.2).
  EXPECT_EQ(gnnlab_samplers(8, 1.0, 3.0), 2);  // K = 3: 8 / 4
  EXPECT_EQ(gnnlab_samplers(8, 1.0, 2.0), 3);  // K = 2: ceil(2.67)
  EXPECT_EQ(gnnlab_samplers(4, 1.0, 1.0), 2);  // balanced: half
  EXPECT_EQ(gnnlab_samplers(4, 1.0, 9.0), 1);  // training dominates: at least one sampler
  EXPECT_EQ(gnnlab_samplers(4, 9.0, 1.0), 3);  // sampling dominates: at least one trainer
  EXPECT_EQ(gnnlab_samplers(2, 0.01, 0.04), 1);
  EXPECT_THROW(gnnlab_samplers(1, 1.0, 1.0), InvalidArgument);
  EXPECT_THROW(gnnlab_samplers(4, 0.0, 1.0), InvalidArgument);
}

TEST(Roles, LayoutSpreadsTrainersOverSamplers) {
  RoleLayout l{5, 2};  // trainers 0..2, samplers 3, 4
  EXPECT_EQ(l.trainers(), 3);
  EXPECT_FALSE(l.is_sampler(2));
  EXPECT_TRUE(l.is_sampler(3));
  EXPECT_EQ(l.sampler_for(0), 3);
  EXPECT_EQ(l.sampler_for(1), 4);
  EXPECT_EQ(l.sampler_for(2), 3);
  EXPECT_EQ(l.trainers_of(3), (std::vector<int>{0, 2}));
  EXPECT_EQ(l.trainers_of(4), (std::vector<int>{1}));
  EXPECT_TRUE(l.trainers_of(1).empty());
  try {
    RoleLayout{3, 3}.validate();
    FAIL() << "no trainer left";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "roles: need 1 <= samplers < ranks, got 3 sampler(s) of 3 rank(s)");
  }
}

TEST(Roles, QueuedBatchRoundTripsAndRejectsTruncation) {
  LoadedBatch b;
  b.sample.epoch = 3;
  b.sample.batch = 17;
  b.sample.seeds = {5, 9};
  Block k;
  k.num_dst = 2;
  k.num_src = 3;
  k.indptr = {0, 1, 3};
  k.indices = {2, 0, 2};
  k.weights = {0.5f, 1.0f, 2.0f};
  k.src_ids = {5, 9, 11};
  b.sample.blocks = {k, k};
  b.features = {1, 2, 3, 4, 5, 6};
  b.feature_dim = 2;
  b.labels = {1, 0};
  const std::vector<uint8_t> bytes = pack_batch(b);
  LoadedBatch r = unpack_batch(bytes.data(), bytes.size());
  EXPECT_EQ(r.sample.epoch, 3);
  EXPECT_EQ(r.sample.batch, 17);
  EXPECT_EQ(r.sample.seeds, b.sample.seeds);
  ASSERT_EQ(r.sample.blocks.size(), 2u);
  EXPECT_EQ(r.sample.blocks[1].indptr, k.indptr);
  EXPECT_EQ(r.sample.blocks[1].indices, k.indices);
  EXPECT_EQ(r.sample.blocks[1].weights, k.weights);
  EXPECT_EQ(r.sample.blocks[1].src_ids, k.src_ids);
  EXPECT_EQ(r.sample.blocks[0].num_src, 3);
  EXPECT_EQ(r.features, b.features);
  EXPECT_EQ(r.feature_dim, 2);
  EXPECT_EQ(r.labels, b.labels);
  EXPECT_THROW(unpack_batch(bytes.data(), bytes.size() - 1), FormatError);
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_THROW(unpack_batch(longer.data(), longer.size()), FormatError);
}

}  // namespace
}  // namespace dsp
