#include "python/loader.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/logging.hpp"
#include "graph/dataset.hpp"
#include "layout/partition/partition_dir.hpp"

namespace dsp::pyext {
namespace {

// `ids` through the id map that `load_map` reads from the partition directory `dir`
// (load_old2new or load_new2old), or unchanged for a dataset directory; each checked against
// [0, num_nodes) (see to_dsp_ids).
std::vector<int64_t> map_ids(const std::string& dir, Array (*load_map)(const std::string&, int64_t),
                             const int64_t* ids, int64_t n, const std::string& label) {
  const bool partition = is_partition_dir(dir);
  DSP_CHECK_T(IoError, partition || path_exists(dir + "/dataset.json"),
              "{}: neither a partition directory (partition.json) nor a dataset directory "
              "(dataset.json)",
              label);
  Array map;
  int64_t num_nodes = 0;
  if (partition) {
    map = load_map(dir, -1);
    num_nodes = map.dim(0);
  } else {
    num_nodes = load_dataset_meta(dir).num_nodes;
  }
  std::vector<int64_t> out(static_cast<size_t>(n));
  const int64_t* m = partition ? map.data<int64_t>() : nullptr;
  for (int64_t i = 0; i < n; ++i) {
    DSP_CHECK_ARG(ids[i] >= 0 && ids[i] < num_nodes,
                  "{}: ids entry {} is {}, outside the graph's node ids [0, {})", label, i, ids[i],
                  num_nodes);
    out[i] = m ? m[ids[i]] : ids[i];
  }
  return out;
}

// InvalidArgument naming `path` and the first entry of `nodes` that is outside [0, num_nodes) or
// repeats an earlier one; InvalidArgument when there are none.
void check_nodes(const std::vector<int64_t>& nodes, int64_t num_nodes, const std::string& path) {
  DSP_CHECK_ARG(!nodes.empty(), "{}: nodes is empty: there is nothing to load", path);
  std::vector<bool> seen(static_cast<size_t>(num_nodes), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int64_t v = nodes[i];
    DSP_CHECK_ARG(v >= 0 && v < num_nodes,
                  "{}: nodes entry {} is node {}, outside the graph's [0, {})", path, i, v,
                  num_nodes);
    if (seen[v]) {
      const size_t first = std::find(nodes.begin(), nodes.end(), v) - nodes.begin();
      DSP_THROW_T(InvalidArgument,
                  "{}: nodes entry {} is node {} again (entry {}): each node may be given once",
                  path, i, v, first);
    }
    seen[v] = true;
  }
}

// What a split is called in the messages of `dsp train` ("the dataset has no training ids").
const char* split_noun(Split split) {
  return split == Split::kTrain ? "training" : split == Split::kValid ? "validation" : "test";
}

}  // namespace

const OptionTable<LoaderOptions>& loader_options_table() {
  static const OptionTable<LoaderOptions> table = [] {
    using L = LoaderOptions;
    using options::value;
    // clang-format off
#define DSP_LOADER(member) [](L& o) -> auto& { return o.member; }
    // clang-format on
    OptionTable<L> t{
        value<L>("", "batch_size", "seeds (LinkLoader: training edges) per batch and rank",
                 DSP_LOADER(batch_size)),
        value<L>("", "shuffle", "a new order every epoch (false: ascending seed order)",
                 DSP_LOADER(shuffle)),
        value<L>("", "split", "the seeds: train, valid, test or all (the part's every node)",
                 DSP_LOADER(split)),
        value<L>("", "seed", "the sampler's and the shuffle's seed", DSP_LOADER(seed)),
        value<L>("", "prefetch", "batches sampled and loaded ahead (0: on next())",
                 DSP_LOADER(prefetch)),
    };
#undef DSP_LOADER
    options::append(t, options::embed_all<L>(rank_options_table(),
                                             [](L& o) -> RankOptions& { return o.rank; }));
    options::append(t,
                    options::embed_all<L>(seed_order_options_table(),
                                          [](L& o) -> SeedOrderOptions& { return o.seed_order; }));
    options::append(t, options::embed_all<L>(link_options_table(),
                                             [](L& o) -> LinkOptions& { return o.link; }));
    return t;
  }();
  return table;
}

std::vector<int64_t> to_dsp_ids(const std::string& dir, const int64_t* ids, int64_t n,
                                const std::string& label) {
  return map_ids(dir, &load_old2new, ids, n, label);
}

std::vector<int64_t> to_original_ids(const std::string& dir, const int64_t* ids, int64_t n,
                                     const std::string& label) {
  return map_ids(dir, &load_new2old, ids, n, label);
}

void LoaderOptions::validate() const {
  // The checks of `dsp train`'s options, from the same functions (same messages).
  rank_options().validate();  // the rank's own options: RankOptions' own checks
  sampler.validate();
  DSP_CHECK_ARG(batch_size > 0, "batch sizes must be > 0");
  DSP_CHECK_ARG(!has_nodes || split == Split::kTrain,
                "nodes= replaces the split: it cannot be combined with split='{}'", split);
  DSP_CHECK_ARG(!has_nodes || !nodes.empty(), "{}: nodes is empty: there is nothing to load",
                rank.path);
  DSP_CHECK_ARG(prefetch >= 0, "prefetch must be >= 0, got {}", prefetch);
  seed_order.validate();
  link.validate();  // --neg-ratio, --negatives, --exclude: dsp train's messages
  if (link.link()) {
    DSP_CHECK_ARG(!sampler.is_temporal(),
                  "dsp.LinkLoader: temporal sampling samples node seeds at their node times; "
                  "link batches are not supported with it (temporal='off')");
    DSP_CHECK_ARG(split == Split::kTrain && !has_nodes,
                  "link batches are the training edges: split and nodes do not apply");
    DSP_CHECK_ARG(seed_order.order == SeedOrder::kRandom,
                  "link batches shuffle their edges: order='{}' does not apply", seed_order.order);
  }
}

RankOptions LoaderOptions::rank_options() const {
  RankOptions ro = rank;
  ro.seed = seed;
  ro.bind = false;    // the user's process: its other threads are not ours to bind
  ro.trains = false;  // the user's model trains, not ours: no device trainer channel
  ro.log_name = "loader";
  return ro;
}

Loader::Loader(LoaderOptions opts) : opts_(std::move(opts)) {
  opts_.validate();
  rt_ = std::make_unique<RankRuntime>(opts_.rank_options());
  rt_->features().enable_fifo();  // no-op without fifo_rows
  SamplerOptions so = opts_.sampler.options();
  so.seed = opts_.seed;
  if (opts_.link.link()) {
    make_link_batcher();
    seeds_ = link_->edge_indices();  // as dsp train --task link schedules them
    so.require_owned_seeds = false;  // a link batch's endpoints are any node's
  } else {
    seeds_ = opts_.has_nodes ? owned_nodes() : split_seeds();
    std::sort(seeds_.begin(), seeds_.end());
  }
  sampler_ = rt_->make_sampler(so);  // refuses temporal sampling without edge times
  check_node_times(so, rt_->part(), opts_.rank.path, "seed");
  sched_ = std::make_unique<EpochScheduler>(seeds_, opts_.batch_size, opts_.seed);
  if (!link_) {
    opts_.seed_order.apply(*sched_, rt_->part().patch, rt_->part().meta.offsets[rt_->rank()]);
  }
  CoordinatedCommunicator& main_ch = rt_->channel(WorkerKind::kMain);
  main_ch.set_step(-1, 1);
  if (opts_.shuffle) {
    steps_ = sched_->agree_steps(main_ch);
  } else {
    steps_ = (static_cast<int64_t>(seeds_.size()) + opts_.batch_size - 1) / opts_.batch_size;
    main_ch.all_reduce(&steps_, 1, DType::kInt64, ReduceOp::kMax);
  }
}

Loader::~Loader() {
  try {
    finish_epoch();
  } catch (const std::exception& e) {
    DSP_WARN("python", "loader: error while finishing the epoch: {}", e.what());
  }
  sampler_.reset();
}

// The split's ids this rank owns; FormatError naming the path and the split when the split has no
// ids at all (the same on every rank: the split files are shared).
std::vector<int64_t> Loader::split_seeds() const {
  const PartitionData& part = rt_->part();
  const int64_t b = part.meta.offsets[rank()], e = part.meta.offsets[rank() + 1];
  if (opts_.split == Split::kAll) {
    std::vector<int64_t> all(static_cast<size_t>(e - b));
    std::iota(all.begin(), all.end(), b);
    return all;
  }
  int64_t total = 0;
  if (opts_.split == Split::kTrain) {
    for (const PartStats& ps : part.meta.part) total += ps.seeds;
  } else {
    const Array& ids = opts_.split == Split::kValid ? part.valid_idx : part.test_idx;
    total = ids.defined() ? ids.dim(0) : 0;
  }
  DSP_CHECK_FORMAT(total > 0,
                   "{}: the dataset has no {} ids ({}_idx.npy missing or empty): split='{}' has "
                   "nothing to load",
                   opts_.rank.path, split_noun(opts_.split), opts_.split, opts_.split);
  return rt_->local_ids(opts_.split);
}

// Link mode's batcher over this rank's training edges; FormatError naming the path when the
// dataset has none at all (the same on every rank: the counts are the partition's). Undirected
// as the dataset is (exclude auto), as dsp train decides it.
void Loader::make_link_batcher() {
  const PartitionData& part = rt_->part();
  int64_t edges = 0;
  for (const PartStats& ps : part.meta.part) edges += ps.link_train;
  DSP_CHECK_FORMAT(edges > 0,
                   "{}: the dataset has no training edges (link_train.npy missing or empty): "
                   "link prediction needs them (dsp convert --link-split, dsp generate "
                   "--link-split)",
                   opts_.rank.path);
  link_ = std::make_unique<LinkBatcher>(part, opts_.link, opts_.seed,
                                        !part.meta.extra.value("directed", true));
}

// opts_.nodes (original ids) checked, in the partition's ids, those of this rank's part.
std::vector<int64_t> Loader::owned_nodes() const {
  const PartitionData& part = rt_->part();
  check_nodes(opts_.nodes, part.meta.num_nodes, opts_.rank.path);
  std::vector<int64_t> ids = to_dsp_ids(rt_->partition_dir(), opts_.nodes.data(),
                                        static_cast<int64_t>(opts_.nodes.size()), opts_.rank.path);
  const int64_t b = part.meta.offsets[rank()], e = part.meta.offsets[rank() + 1];
  ids.erase(std::remove_if(ids.begin(), ids.end(), [&](int64_t v) { return v < b || v >= e; }),
            ids.end());
  return ids;
}

std::vector<int64_t> Loader::step_seeds(int64_t step) const {
  if (opts_.shuffle) return sched_->batch_seeds(order_, step);
  int64_t n = static_cast<int64_t>(seeds_.size());
  int64_t b = std::min(n, step * opts_.batch_size), e = std::min(n, b + opts_.batch_size);
  return std::vector<int64_t>(seeds_.begin() + b, seeds_.begin() + e);
}

LoadedBatch Loader::run_step(int64_t step) {
  std::vector<int64_t> seeds = step_seeds(step);
  rt_->channel(WorkerKind::kSampler).set_step(epoch_, step);
  SampledBatch sb;
  if (link_) {  // TrainJob::sample_link: the edges' batch, sampled without its excluded edges
    LinkBatch lb = link_->make(seeds, epoch_, step);
    sb = sampler_->sample(lb.seeds, epoch_, step, &lb.exclude);
    sb.pairs = std::move(lb.pairs);
  } else {  // as dsp train: with temporal sampling every seed at its node time
    sb = sampler_->sample(seeds, epoch_, step);
  }
  sb.epoch = epoch_;
  sb.batch = step;
  rt_->channel(WorkerKind::kLoader).set_step(epoch_, step);
  return rt_->features().load(std::move(sb));
}

void Loader::start_epoch(int64_t epoch) {
  finish_epoch();
  epoch_ = epoch;
  step_ = 0;
  if (opts_.shuffle) order_ = sched_->epoch_order(epoch);
  active_ = true;
  if (opts_.prefetch > 0) {
    queue_.clear();
    stop_ = false;
    worker_ = std::thread([this] { produce(); });
  }
}

void Loader::produce() {
  Item last;
  last.end = true;
  try {
    for (int64_t t = 0; t < steps_; ++t) {
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (stop_ && size() == 1) break;  // nobody else waits for the remaining steps
      }
      LoadedBatch lb = run_step(t);
      if (lb.sample.seeds.empty()) continue;
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || queue_.size() < static_cast<size_t>(opts_.prefetch); });
      if (stop_) continue;  // abandoned: keep serving peers, drop the batch
      queue_.push_back(Item{std::move(lb), nullptr, false});
      cv_.notify_all();
    }
  } catch (...) {
    last.error = std::current_exception();
  }
  std::lock_guard<std::mutex> lk(mu_);
  queue_.push_back(std::move(last));
  cv_.notify_all();
}

bool Loader::next(LoadedBatch& out) {
  if (!active_) return false;
  if (opts_.prefetch == 0) {
    while (step_ < steps_) {
      LoadedBatch lb = run_step(step_++);
      if (!lb.sample.seeds.empty()) {
        out = std::move(lb);
        return true;
      }
    }
    active_ = false;
    return false;
  }
  Item item;
  {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return !queue_.empty(); });
    item = std::move(queue_.front());
    queue_.pop_front();
    cv_.notify_all();
  }
  if (item.end) {
    worker_.join();
    active_ = false;
    if (item.error) std::rethrow_exception(item.error);
    return false;
  }
  out = std::move(item.batch);
  return true;
}

void Loader::finish_epoch() {
  if (opts_.prefetch == 0) {
    if (active_ && size() > 1) {
      while (step_ < steps_) run_step(step_++);
    }
    active_ = false;
    return;
  }
  if (worker_.joinable()) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    worker_.join();
  }
  queue_.clear();
  active_ = false;
}

}  // namespace dsp::pyext
