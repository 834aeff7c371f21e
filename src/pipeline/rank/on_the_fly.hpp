#pragma once
// A dataset directory given where a partition directory is expected is partitioned on the fly: by
// rank 0, into a temporary directory with one part per rank, removed when the rank's runtime goes.
// Collective: every rank learns whether it worked. The directory is owner-only (mkdtemp, 0700):
// the partition holds the dataset's features and labels. It is removed also when the job fails
// or rank 0 is killed (RemoveAtExit).
#include <memory>
#include <string>

#include "ccc/coordinator.hpp"
#include "core/remove_at_exit.hpp"
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
  bool active() const { return active_; }

 private:
  std::string dir_;  // rank 0's temporary directory (it removes it); empty elsewhere / when none
  bool leader_ = false, active_ = false;
  std::unique_ptr<RemoveAtExit> remove_at_exit_;  // rank 0's, for dir_
};

}  // namespace dsp
