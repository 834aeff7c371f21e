#pragma once
// A dataset directory given where a partition directory is expected is partitioned on the fly: by
// rank 0, into a temporary directory with one part per rank, removed when the rank's runtime goes.
// Collective: every rank learns whether it worked.
#include <string>

#include "ccc/coordinator.hpp"
#include "pipeline/rank/options.hpp"

namespace dsp {

class OnTheFlyPartition {
 public:
  OnTheFlyPartition() = default;
  OnTheFlyPartition(const OnTheFlyPartition&) = delete;
  OnTheFlyPartition& operator=(const OnTheFlyPartition&) = delete;
  ~OnTheFlyPartition();

  // The partition directory of `opts.path`: the path itself when it holds a partition.json, else
  // (a dataset.json) a temporary directory rank 0 partitioned it into, with `opts`' method,
  // seed, cache policy and ratio and pre-aggregation. IoError for a directory that is neither;
  // the leader's partitioning error on rank 0, "rank 0 failed ..." elsewhere.
  std::string resolve(const RankOptions& opts, CoordinatedCommunicator& ch);
  bool active() const { return !dir_.empty(); }

 private:
  std::string dir_;  // the temporary directory; empty when none was made
  bool leader_ = false;
};

}  // namespace dsp
