#pragma once
// GNNLab's PreSC#K hotness: run K sampling-only epochs with the real sampler on the unpartitioned
// graph (single process) and count how often each node is an input node of a batch
// (blocks[0].src_ids, i.e. a node whose features the loader would fetch).
#include <cstdint>
#include <vector>

#include "csp/sampler.hpp"
#include "layout/partition/partition_command.hpp"
#include "layout/partition/hotness.hpp"

namespace dsp {

struct PresampleOptions {
  int epochs = 1;  // K
  int64_t batch_size = 1024;
  SamplerOptions sampler;  // fanouts, scheme, seed (require_owned_seeds is ignored)
};

// Visit counts per node (size graph.num_nodes). Epoch e shuffles train_ids with a seeded
// permutation and samples it in consecutive batches of batch_size. Throws InvalidArgument on bad
// options.
std::vector<int64_t> presample_counts(const Csr& graph, const std::vector<int64_t>& train_ids,
                                      const PresampleOptions& opts);

// The hook for hotness_scores / PartitionOptions::presample.
PresampleFn make_presample_fn(const PresampleOptions& opts);
// The hook of a `dsp partition` command's presample options (run_partition's `presample`).
PresampleFn presample_hook(const PartitionCommand& cmd);

// The seeds of batch `batch` of epoch `epoch`: a seeded shuffle of train_ids (a pure function of
// (seed, epoch)), cut into consecutive batches.
std::vector<int64_t> presample_batch(const std::vector<int64_t>& shuffled, int64_t batch_size,
                                     int64_t batch);
std::vector<int64_t> shuffle_ids(const std::vector<int64_t>& ids, uint64_t seed, int64_t epoch);

}  // namespace dsp
