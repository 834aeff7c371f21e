#include "pipeline/rank/on_the_fly.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
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
  if (path_exists(opts.path + "/partition.json")) return opts.path;
  DSP_CHECK_T(IoError, path_exists(opts.path + "/dataset.json"),
              "{}: neither a partition directory (partition.json) nor a dataset directory "
              "(dataset.json)",
              opts.path);
  leader_ = ch.rank() == 0;
  int64_t ok = 1;
  std::string err, out;
  if (leader_) {
    try {
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
      partition_dataset(ds, on_the_fly_options(opts, ch.size()), out);
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
  active_ = true;
  return broadcast_string(ch, out);
}

}  // namespace dsp
