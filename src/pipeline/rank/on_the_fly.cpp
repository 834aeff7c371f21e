#include "pipeline/rank/on_the_fly.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/logging.hpp"
#include "core/memory.hpp"
#include "graph/dataset.hpp"
#include "graph/hetero.hpp"
#include "layout/partition/partition.hpp"
#include "layout/partition/partition_disk.hpp"
#include "layout/partition/partition_plan.hpp"
#include "layout/partition/partition_dir.hpp"

namespace dsp {
namespace fs = std::filesystem;
namespace {

PartitionOptions on_the_fly_options(const RankOptions& opts, int parts) {
  PartitionOptions po;
  po.parts = parts;
  po.seed = opts.seed;
  po.method = opts.partition_method;
  po.overwrite = true;
  po.verbose = log_level() <= LogLevel::kDebug;
  if (!opts.cache_policy.empty()) po.cache_policy = opts.cache_policy;
  if (opts.cache_ratio >= 0) po.cache_ratio = opts.cache_ratio;
  if (opts.preaggregate) po.preaggregate = {*opts.preaggregate};
  // The partition lives as long as the job, beside the dataset: its ranks read the dataset's
  // features through the id map rather than from a renumbered copy (the same rows, no second copy
  // on disk; a rank they fit copies them into memory in its own order, host_features.cpp).
  if (!is_hetero_dataset(opts.path) && load_dataset_meta(opts.path).feature_dim > 0) {
    po.feature_storage = FeatureStorage::kReference;
  }
  return po;
}

// Refuses, before the dataset is loaded or anything is created, a partition on the fly whose
// estimate (dsp partition's, layout/partition/partition_plan.hpp) exceeds the rank's budget: one
// line in dsp partition's form, naming --memory-budget and the methods that need less.
void check_partition_memory(const RankOptions& opts, const PartitionOptions& po) {
  const DatasetMeta meta = partition_source_meta(opts.path);
  std::string lower = "raise --memory-budget";
  if (const LighterMethods l = lighter_methods(meta, po); l.bfs_blocks > 0) {
    lower += fmt::format(
        ", or partition it beforehand: dsp partition --method bfs-blocks (about {}) or --method "
        "random (about {})",
        format_bytes(l.bfs_blocks), format_bytes(l.random));
  }
  check_memory(fmt::format("the partition of {} on the fly ({} part{} by {})", opts.path, po.parts,
                           po.parts == 1 ? "" : "s", po.method),
               estimate_partition_memory(meta, po), opts.budget_or(default_memory_budget()), lower);
}

// Rank 0's `s` on every rank.
std::string broadcast_string(CoordinatedCommunicator& ch, const std::string& s) {
  int64_t n = static_cast<int64_t>(s.size());
  ch.broadcast(&n, 1, DType::kInt64, 0);
  std::string out = ch.rank() == 0 ? s : std::string(static_cast<size_t>(n), '\0');
  if (n > 0) ch.broadcast(out.data(), n, DType::kUInt8, 0);
  return out;
}

}  // namespace

OnTheFlyPartition::~OnTheFlyPartition() {
  if (leader_ && !dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

std::string OnTheFlyPartition::resolve(const RankOptions& opts, CoordinatedCommunicator& ch) {
  if (is_partition_dir(opts.path)) return opts.path;
  DSP_CHECK_T(IoError, path_exists(opts.path + "/dataset.json"),
              "{}: neither a partition directory (partition.json) nor a dataset directory "
              "(dataset.json)",
              opts.path);
  leader_ = ch.rank() == 0;
  int64_t ok = 1;
  std::exception_ptr failure;  // rank 0's error, rethrown as it was (a memory refusal stays one)
  std::string out;
  if (leader_) {
    try {
      const PartitionOptions po = on_the_fly_options(opts, ch.size());
      check_partition_memory(opts, po);
      check_partition_disk(fmt::format("the partition of {} on the fly", opts.path),
                           partition_source_meta(opts.path), po,
                           fs::temp_directory_path().string());
      // An owner-only directory of a fresh name (mkdtemp: mode 0700, created exclusively): the
      // partition inside holds the dataset's features and labels, which no other user of a shared
      // temporary directory may read, and no one can have prepared the path beforehand.
      std::string pattern =
          (fs::temp_directory_path() / fmt::format("dsp-{}-XXXXXX", opts.log_name)).string();
      DSP_CHECK_T(IoError, ::mkdtemp(pattern.data()) != nullptr,
                  "cannot create a temporary directory {}: {}", pattern, std::strerror(errno));
      dir_ = pattern;
      remove_at_exit_ = std::make_unique<RemoveAtExit>(dir_);
      out = dir_ + "/partition";
      // A heterogeneous dataset is partitioned as its union graph (graph/hetero.hpp).
      Dataset ds = is_hetero_dataset(opts.path) ? hetero_union(load_hetero_dataset(opts.path))
                                                : load_dataset(opts.path);
      DSP_INFO("runtime", "partitioning {} into {} part(s) ...", opts.path, ch.size());
      partition_dataset(ds, po, out);
    } catch (const Error&) {
      ok = 0;
      failure = std::current_exception();
    }
  }
  ch.broadcast(&ok, 1, DType::kInt64, 0);
  if (!ok) {
    if (leader_) std::rethrow_exception(failure);
    DSP_THROW("rank 0 failed to partition the dataset");
  }
  active_ = true;
  return broadcast_string(ch, out);
}

}  // namespace dsp
