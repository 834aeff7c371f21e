#pragma once
// The link-prediction job the train tests run (test_train and test_train_mpi): a featureless
// planted community graph and a small GraphSAGE with learnt embeddings.
#include "graph/generate.hpp"
#include "train/job.hpp"

namespace dsp::test {

// 5000 nodes in 16 communities, no features or labels, its edges split 0.85/0.05/0.10 with
// negatives across communities: a scorer that knows the communities reaches the test Hits@K in
// meta.extra["link_hits_bound"] (about 0.889).
// per_positive > 0: that many negatives for each held-out edge (OGB's ogbl-citation2 layout).
inline Dataset planted_link_graph(int64_t per_positive = 0) {
  CommunityOptions co;
  co.num_nodes = 5000;
  co.num_edges = 50000;
  co.num_communities = 16;
  co.num_classes = 0;
  co.feature_dim = 0;
  co.seed = 1;
  co.link_split = LinkSplitOptions{};
  co.link_split->negatives_per_positive = per_positive;
  return generate_community(co);
}

// --task link on `dir`: sage over [10,5], hidden 64, no dropout or weight decay, embedding lr
// 0.05, `batch` training edges per rank and step, 4 epochs, sequential stages.
inline JobConfig link_job_config(const std::string& dir, int64_t batch = 256) {
  JobConfig c;
  c.rank.path = dir;
  c.link.task = TaskKind::kLink;
  c.train.model.hidden = 64;
  c.train.model.dropout = 0;
  c.train.weight_decay = 0;
  c.embedding.lr = 0.05;
  c.train.num_threads = 1;
  c.sampler.fanouts = {10, 5};
  c.batch_size = batch;
  c.epochs = 4;
  c.pipeline = PipelineMode::kSequential;
  c.progress = false;
  return c;
}

}  // namespace dsp::test
