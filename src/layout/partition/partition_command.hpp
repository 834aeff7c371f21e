#pragma once
// `dsp partition` as one command for the CLI (tools/cmd_partition.cpp) and Python (dsp.partition):
// its options declared once (partition_options: flags, keys = Python keywords, help, defaults),
// checked once (PartitionCommand::validate) and run once (run_partition: the in-place guard and
// the memory estimate before the dataset is loaded, then the partitioning).
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/options.hpp"
#include "layout/partition/partition.hpp"

namespace dsp {

struct PartitionCommand {
  std::string dataset, out;  // the CLI's DATASET and OUT, Python's first two arguments
  PartitionOptions o;        // parts, method and its options, cache, seeds, overwrite
  double cache_ratio = -1;   // given: o.cache_ratio (default 0.1); -1: not given
  bool preaggregate = false;
  std::vector<Preaggregation> preaggregate_kinds;  // with preaggregate; empty: every kind
  // Cache policy presample (GNNLab's PreSC#K): the sampling-only epochs run to count visits.
  std::vector<int> presample_fanouts{15, 10, 5};
  int64_t presample_batch_size = 1024;
  int presample_epochs = 1;
  std::string memory_budget;  // e.g. "12G"; empty: 3/4 of what is available
  bool dry_run = false;       // only the memory estimate against the budget
  std::string json;           // write the figures (times, memory, balance) to this file
  bool quiet = false;         // no progress lines per phase

  // The one check of these options (InvalidArgument with the CLI's messages); fills `o` from the
  // command's own fields (cache ratio, pre-aggregation kinds, verbosity).
  void validate();
};

const OptionTable<PartitionCommand>& partition_options();

// The memory a partition of `cmd.dataset` needs (from dataset.json alone) against its budget.
struct PartitionPlan {
  uint64_t need = 0;    // the estimate, what the process holds included
  uint64_t budget = 0;  // --memory-budget, or the default
  uint64_t available = 0;
  bool fits() const { return need <= budget; }
  std::string describe(const PartitionCommand& cmd) const;  // the --dry-run line
  nlohmann::json to_json() const;
};

// Validates `cmd`, checks the method and OUT (never the dataset's own directory), estimates the
// memory (for dry_run: returns with `plan` set and nothing written; else refuses with one line
// when over the budget), loads the dataset and partitions it, writing the figures to cmd.json if
// given. `presample` builds the visit-count hook of cache policy presample (the sampler module's
// make_presample_fn: layout cannot depend on it). Returns the meta written (empty for dry_run).
PartitionMeta run_partition(PartitionCommand& cmd,
                            const std::function<PresampleFn(const PartitionCommand&)>& presample,
                            PartitionPlan* plan = nullptr);

// Per-part rows, entries, seeds, cache and halo; imbalance (max / mean) per balance constraint;
// for self-reliant parts the replication factors; printed when `print`. Returns the figures.
nlohmann::json partition_report(const std::string& out, const PartitionMeta& m, bool print);

}  // namespace dsp
