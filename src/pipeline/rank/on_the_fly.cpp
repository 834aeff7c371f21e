#include "pipeline/rank/on_the_fly.hpp"

#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/logging.hpp"
#include "graph/dataset.hpp"
#include "graph/hetero.hpp"
#include "layout/partition/partition.hpp"

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
  if (!opts.preaggregate.empty()) po.preaggregate = {opts.preaggregate};
  return po;
}

}  // namespace

OnTheFlyPartition::~OnTheFlyPartition() {
  if (leader_ && !dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

std::string OnTheFlyPartition::resolve(const RankOptions& opts, CoordinatedCommunicator& ch) {
  if (path_exists(opts.path + "/partition.json")) return opts.path;
  DSP_CHECK_T(IoError, path_exists(opts.path + "/dataset.json"),
              "{}: neither a partition directory (partition.json) nor a dataset directory "
              "(dataset.json)",
              opts.path);
  leader_ = ch.rank() == 0;
  int64_t pid = ::getpid();
  ch.broadcast(&pid, 1, DType::kInt64, 0);
  static std::atomic<int> counter{0};  // several runtimes in one process get distinct directories
  dir_ = (fs::temp_directory_path() /
          fmt::format("dsp-{}-{}-{}-{}", opts.log_name, pid, ch.size(), counter++))
             .string();
  int64_t ok = 1;
  std::string err;
  if (leader_) {
    try {
      // A heterogeneous dataset is partitioned as its union graph (graph/hetero.hpp).
      Dataset ds = is_hetero_dataset(opts.path) ? hetero_union(load_hetero_dataset(opts.path))
                                                : load_dataset(opts.path);
      DSP_INFO("runtime", "partitioning {} into {} part(s) ...", opts.path, ch.size());
      partition_dataset(ds, on_the_fly_options(opts, ch.size()), dir_);
    } catch (const Error& e) {
      ok = 0;
      err = e.what();
    }
  }
  ch.broadcast(&ok, 1, DType::kInt64, 0);
  if (!ok) {
    if (leader_) throw FormatError(err);
    DSP_THROW("rank 0 failed to partition the dataset");
  }
  return dir_;
}

}  // namespace dsp
