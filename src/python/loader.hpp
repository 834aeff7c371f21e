#pragma once
// The engine behind dsp.Loader: this rank's part of a partition, the collective sampler, the
// feature store and the epoch schedule, producing the same LoadedBatch stream as `dsp train`
// (same seed -> same seeds per step, same blocks, same features). Torch-free and Python-free, so
// the bindings only convert its batches.
//
// Collectives: every step is a set of collectives all ranks join, so
//  * the number of steps per epoch is agreed once (max over ranks);
//  * steps whose local seed list is empty (a rank with fewer seeds, unshuffled) run internally
//    and are never handed out;
//  * with more than one rank an epoch abandoned early (a `break` in Python, a new epoch started,
//    the loader destroyed) is still run to its end in the background, discarding the batches, so
//    peers that keep iterating are served. With one rank it simply stops.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ccc/coordinator.hpp"
#include "csp/block.hpp"
#include "csp/sampler.hpp"
#include "layout/partition/partition.hpp"
#include "pipeline/link_batch.hpp"
#include "pipeline/rank/runtime.hpp"
#include "pipeline/scheduler.hpp"

namespace dsp::pyext {

struct LoaderOptions {
  // The rank's own options (pipeline/rank/options.hpp; dsp train's flags of the same names):
  // the partition or dataset directory (partitioned on the fly with `rank.partition_method`), the
  // communicator backend, the device (with cuda the features of each batch stay in device memory,
  // LoadedBatch::device_features), transport and topology memory, BGL's FIFO levels. Its seed is
  // `seed`; it never binds the user's process and trains nothing on its channels.
  RankOptions rank;
  SamplerConfig sampler;  // fanouts, kernel, scheme (csp/sampler_options.hpp); its seed is `seed`
  int64_t batch_size = 1024;
  bool shuffle = true;  // false: ascending seed order, no wrap-around
  // train (the part's co-partitioned seeds) | valid | test (the owned ids of the split) | all
  // (every node of the rank's part)
  Split split = Split::kTrain;
  // With has_nodes, the seeds instead of a split (dsp.Loader(nodes=...)): the dataset's original
  // ids, each at most once; every rank keeps those it owns (in partition ids). split stays "train".
  bool has_nodes = false;
  std::vector<int64_t> nodes;
  uint64_t seed = 0;
  int prefetch = 2;  // batches sampled and loaded ahead on a background thread; 0: on next()
  SeedOrderOptions seed_order;  // with shuffle: a shuffle, or BGL's proximity-aware order
  // task "link" (dsp.LinkLoader): the scheduler's seeds are the part's training edges
  // (part<p>/link_train.npy), each step's batch_size edges plus neg_ratio negatives each become
  // a LinkBatch whose endpoints are the CSP seeds, sampled without its excluded edges; the
  // batches carry the pairs (SampledBatch::pairs). split stays "train", no nodes, order random;
  // hits_k is dsp train's only (unused here).
  LinkOptions link;

  void validate() const;             // InvalidArgument with the CLI's messages
  RankOptions rank_options() const;  // the runtime of the Loader's rank
};

// The keywords of dsp.Loader and dsp.LinkLoader but the sampler's and the ones Python handles
// (fanouts, nodes, as_tensor, pin_memory, process_group): the Loader's own (batch_size, shuffle,
// split, seed, prefetch), then dsp train's tables embedded whole (the rank's, the seed order's,
// link prediction's), so a keyword has dsp train's parser and message. The sampler's keywords
// are read with sampler_options_table.
const OptionTable<LoaderOptions>& loader_options_table();

// Node ids between a partition directory's renumbering ("dsp ids", those of batches) and the
// dataset's own ("original ids"): its old2new.npy / new2old.npy; a dataset directory's ids are
// its own (identity). `label` names the directory in errors (the user's path). InvalidArgument
// naming `label`, the entry and the id for an id outside [0, num_nodes); IoError for a directory
// that is neither kind.
std::vector<int64_t> to_dsp_ids(const std::string& dir, const int64_t* ids, int64_t n,
                                const std::string& label);
std::vector<int64_t> to_original_ids(const std::string& dir, const int64_t* ids, int64_t n,
                                     const std::string& label);

class Loader {
 public:
  explicit Loader(LoaderOptions opts);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  int rank() const { return rt_->rank(); }
  int size() const { return rt_->size(); }
  int64_t steps() const { return steps_; }  // per epoch, agreed over ranks
  // Link mode: this rank's training edges (seeds are their indices 0 .. E - 1).
  bool link() const { return link_ != nullptr; }
  const std::vector<int64_t>& local_seeds() const { return seeds_; }
  const RankRuntime& runtime() const { return *rt_; }
  const LoaderOptions& options() const { return opts_; }

  // Begins `epoch` (finishing a previous unfinished one first, see above).
  void start_epoch(int64_t epoch);
  // The next non-empty batch of the current epoch; false at its end. Rethrows errors of the
  // background worker.
  bool next(LoadedBatch& out);
  // Ends the current epoch now (single rank) or after running its remaining steps (several).
  void finish_epoch();

 private:
  struct Item {
    LoadedBatch batch;
    std::exception_ptr error;
    bool end = false;
  };
  std::vector<int64_t> split_seeds() const;  // this rank's seeds of opts_ (unsorted)
  std::vector<int64_t> owned_nodes() const;  // opts_.nodes: checked, renumbered, this rank's
  void make_link_batcher();                  // link mode: checks the edges, builds link_
  LoadedBatch run_step(int64_t step);
  std::vector<int64_t> step_seeds(int64_t step) const;
  void produce();

  LoaderOptions opts_;
  std::unique_ptr<RankRuntime> rt_;  // coordinator, partition (on the fly), feature store
  std::vector<int64_t> seeds_;       // this rank's seeds of the split, ascending
  std::unique_ptr<CollectiveSampler> sampler_;
  std::unique_ptr<LinkBatcher> link_;  // link mode only
  std::unique_ptr<EpochScheduler> sched_;
  int64_t steps_ = 0;

  // Current epoch.
  bool active_ = false;
  int64_t epoch_ = 0;
  int64_t step_ = 0;            // next step (sequential mode)
  std::vector<int64_t> order_;  // scheduler order (shuffle)
  // Background worker (prefetch > 0).
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stop_ = false;
};

}  // namespace dsp::pyext
