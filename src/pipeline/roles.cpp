#include "pipeline/roles.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <mutex>

#include <fmt/format.h>

#include "ccc/self_communicator.hpp"
#include "core/error.hpp"
#include "csp/sampler.hpp"
#include "graph/npy.hpp"
#include "pipeline/load_batch.hpp"

namespace dsp {

RoleAllocation gnnlab_allocation(int ranks, double sample_s, double train_s) {
  DSP_CHECK_ARG(ranks >= 1, "roles: need at least one rank, got {}", ranks);
  DSP_CHECK_ARG(sample_s > 0 && train_s > 0,
                "roles: stage times must be positive (sample {} s, train {} s)", sample_s, train_s);
  RoleAllocation a;
  a.ranks = ranks;
  a.sample_s = sample_s;
  a.train_s = train_s;
  a.k = train_s / sample_s;
  a.formula = ranks / (a.k + 1.0);
  const int n = static_cast<int>(std::ceil(a.formula - 1e-9));
  a.samplers = ranks == 1 ? 0 : std::min(ranks - 1, std::max(1, n));
  std::string note;
  if (ranks == 1) {
    note = ": one rank cannot split roles, symmetric";
  } else if (n >= ranks) {
    note = fmt::format(" (the formula asks for all {} ranks: one must train)", ranks);
  }
  a.why = fmt::format(
      "GNNLab: sample+load {:.4f} s, train {:.4f} s per batch, K = {:.3f}, ceil({} / (K + 1)) = "
      "ceil({:.3f}) = {} -> {} sampler(s), {} trainer(s){}",
      sample_s, train_s, a.k, ranks, a.formula, n, a.samplers, ranks - a.samplers, note);
  return a;
}

nlohmann::json RoleAllocation::to_json() const {
  return {{"ranks", ranks},     {"sample_load_s", sample_s}, {"train_s", train_s}, {"k", k},
          {"formula", formula}, {"samplers", samplers},      {"why", why}};
}

int gnnlab_samplers(int ranks, double sample_s, double train_s) {
  DSP_CHECK_ARG(ranks >= 2, "roles need at least 2 ranks (one sampler, one trainer), got {}",
                ranks);
  return gnnlab_allocation(ranks, sample_s, train_s).samplers;
}

RoleAllocation profile_roles(Coordinator& coord, const EpochScheduler& sched,
                             const PipelineStages& stages,
                             const std::function<double(const LoadedBatch&)>& train_probe,
                             int64_t epoch, int batches) {
  DSP_CHECK_ARG(batches >= 1, "roles: profile of {} batches", batches);
  EpochScheduler s = sched;
  s.set_max_steps(0);  // the profile's batches, whatever cap the job's epochs have
  s.set_steps(std::max<int64_t>(s.local_steps(), batches + 1));
  const std::vector<int64_t> order = s.epoch_order(epoch);
  CoordinatedCommunicator& cs = coord.channel(WorkerKind::kSampler);
  CoordinatedCommunicator& cl = coord.channel(WorkerKind::kLoader);
  double t[2] = {0, 0};  // sample+load, train: seconds over the profiled batches
  for (int64_t b = 0; b <= batches; ++b) {
    const auto t0 = std::chrono::steady_clock::now();
    cs.set_step(-2, b);
    SampledBatch sb = stages.sample(epoch, b, s.batch_seeds(order, b));
    sb.epoch = epoch;
    sb.batch = b;
    cl.set_step(-2, b);
    LoadedBatch lb = stages.load(std::move(sb));
    const double load_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double train_s = train_probe(lb);
    if (b == 0) continue;  // warm-up
    t[0] += load_s;
    t[1] += train_s;
  }
  CoordinatedCommunicator& main = coord.channel(WorkerKind::kMain);
  main.set_step(-2, 0);
  OpOptions o;
  o.label = "roles auto profile";
  main.all_reduce(t, 2, DType::kFloat64, ReduceOp::kMax, o);
  return gnnlab_allocation(coord.size(), t[0] / batches, t[1] / batches);
}

const Names<RoleSwitch>& names_of(RoleSwitch) {
  using R = RoleSwitch;
  static const Names<R> n(
      "role switch",
      {{R::kOff, "off"}, {R::kQueueFull, "on"}, {R::kAlways, "always"}, {R::kNever, "never"}});
  return n;
}

void RoleLayout::validate() const {
  DSP_CHECK_ARG(samplers >= 1 && samplers < ranks,
                "roles: need 1 <= samplers < ranks, got {} sampler(s) of {} rank(s)", samplers,
                ranks);
  DSP_CHECK_ARG(full_at >= 0, "roles: full_at must be >= 0, got {}", full_at);
}

std::vector<int> RoleLayout::slots_of(int rank) const {
  std::vector<int> out;
  for (int v = 0; v < slots(); ++v) {
    if (sampler_for(v) == rank) out.push_back(v);
  }
  return out;
}

int RoleLayout::extra_slot(int rank) const {
  if (switching == RoleSwitch::kOff || !is_sampler(rank)) return -1;
  for (int v = trainers(); v < slots(); ++v) {
    if (sampler_for(v) == rank) return v;
  }
  return -1;
}

nlohmann::json RoleLayout::to_json() const {
  return {{"ranks", ranks},
          {"samplers", samplers},
          {"trainers", trainers()},
          {"slots", slots()},
          {"switching", name_of(switching)}};
}

PartitionData load_whole_partition(const std::string& dir) {
  PartitionData first = load_partition(dir, 0);
  const PartitionMeta meta = first.meta;
  std::vector<int64_t> indptr{0};
  std::vector<uint8_t> indices;
  std::vector<float> weights;
  std::vector<int64_t> times, seeds;
  const size_t isz = dtype_size(meta.index_dtype);
  for (int p = 0; p < meta.parts; ++p) {
    PartitionData d = p == 0 ? first : load_partition(dir, p);
    const int64_t* rp = d.patch.rowptr();
    const int64_t base = indptr.back();
    for (int64_t r = 1; r <= d.patch.num_nodes; ++r) indptr.push_back(base + rp[r]);
    const auto* ib = static_cast<const uint8_t*>(d.patch.indices.raw());
    indices.insert(indices.end(), ib, ib + d.patch.num_edges() * isz);
    if (meta.has_weights) {
      const float* w = d.patch.weights.data<float>();
      weights.insert(weights.end(), w, w + d.patch.num_edges());
    }
    if (meta.has_edge_time) {
      const int64_t* t = d.patch.times.data<int64_t>();
      times.insert(times.end(), t, t + d.patch.num_edges());
    }
    const int64_t* s = d.seeds.data<int64_t>();
    seeds.insert(seeds.end(), s, s + d.seeds.dim(0));
  }
  Csr g;
  g.num_nodes = static_cast<int64_t>(indptr.size()) - 1;
  DSP_CHECK_FORMAT(g.num_nodes == meta.num_nodes, "{}: the parts hold {} rows, the meta says {}",
                   dir, g.num_nodes, meta.num_nodes);
  const int64_t edges = indptr.back();
  g.indptr = Array::from_vector(std::move(indptr));
  g.indices = Array(meta.index_dtype, {edges});
  if (edges > 0) std::memcpy(g.indices.raw_mutable(), indices.data(), indices.size());
  if (meta.has_weights) g.weights = Array::from_vector(std::move(weights));
  if (meta.has_edge_time) g.times = Array::from_vector(std::move(times));
  PartitionData w = single_part(g);
  w.meta.has_edge_time = meta.has_edge_time;
  w.meta.has_node_time = meta.has_node_time;
  w.meta.index_dtype = meta.index_dtype;
  w.meta.feature_dim = meta.feature_dim;
  w.meta.feature_dtype = meta.feature_dtype;
  w.meta.num_classes = meta.num_classes;
  w.meta.multilabel = meta.multilabel;
  w.meta.dataset_name = meta.dataset_name;
  w.meta.method = meta.method;
  w.meta.cache_policy = "none";
  w.meta.part[0].seeds = static_cast<int64_t>(seeds.size());
  w.dir = dir;
  w.seeds = Array::from_vector(std::move(seeds));
  w.cached = Array(DType::kInt64, {0});
  share_node_arrays(first, w);
  return w;
}

std::vector<int64_t> trainer_seeds(const std::string& dir, int trainer, int trainers,
                                   const SeedFilter& filter) {
  const PartitionMeta meta = load_partition_meta(dir);
  DSP_CHECK_ARG(trainers >= 1 && trainer >= 0 && trainer < trainers,
                "roles: trainer {} of {} does not exist", trainer, trainers);
  auto part_seeds = [&](int p) {
    Array a = load_npy(fmt::format("{}/part{}/seeds.npy", dir, p), DType::kInt64, 1);
    std::vector<int64_t> s(a.data<int64_t>(), a.data<int64_t>() + a.dim(0));
    return filter ? filter(std::move(s)) : s;
  };
  std::vector<int64_t> out;
  if (meta.parts % trainers == 0) {
    for (int p = trainer; p < meta.parts; p += trainers) {
      const std::vector<int64_t> s = part_seeds(p);
      out.insert(out.end(), s.begin(), s.end());
    }
  } else {
    std::vector<int64_t> all;
    for (int p = 0; p < meta.parts; ++p) {
      const std::vector<int64_t> s = part_seeds(p);
      all.insert(all.end(), s.begin(), s.end());
    }
    std::sort(all.begin(), all.end());
    for (size_t i = trainer; i < all.size(); i += trainers) out.push_back(all[i]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

constexpr uint64_t kBatchMagic = 0x6473702d62617463ULL;  // "dsp-batc"

class Writer {
 public:
  template <class T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    buf_.insert(buf_.end(), p, p + sizeof(T));
  }
  template <class T>
  void put_vec(const std::vector<T>& v) {
    put<int64_t>(static_cast<int64_t>(v.size()));
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    buf_.insert(buf_.end(), p, p + v.size() * sizeof(T));
  }
  std::vector<uint8_t> take() { return std::move(buf_); }

 private:
  std::vector<uint8_t> buf_;
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  template <class T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, p_ + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  template <class T>
  std::vector<T> get_vec() {
    const int64_t n = get<int64_t>();
    DSP_CHECK_FORMAT(n >= 0 && static_cast<uint64_t>(n) <= (n_ - at_) / sizeof(T),
                     "queued batch: array of {} elements overruns the {}-byte buffer", n, n_);
    std::vector<T> v(static_cast<size_t>(n));
    if (n > 0) std::memcpy(v.data(), p_ + at_, n * sizeof(T));
    at_ += n * sizeof(T);
    return v;
  }
  bool done() const { return at_ == n_; }

 private:
  void need(size_t k) const {
    DSP_CHECK_FORMAT(n_ - at_ >= k, "queued batch: truncated at byte {} of {}", at_, n_);
  }
  const uint8_t* p_;
  size_t n_, at_ = 0;
};

}  // namespace

std::vector<uint8_t> pack_batch(const LoadedBatch& b) {
  DSP_CHECK_ARG(!b.features_on_device(), "roles: the global queue carries host features only");
  Writer w;
  w.put(kBatchMagic);
  w.put(b.sample.epoch);
  w.put(b.sample.batch);
  w.put_vec(b.sample.seeds);
  w.put<int64_t>(static_cast<int64_t>(b.sample.blocks.size()));
  for (const Block& blk : b.sample.blocks) {
    Block host;  // a block whose edges the sampler left on its device, brought back
    if (blk.on_device) {
      host = blk;
      host.edges_to_host();
    }
    const Block& k = blk.on_device ? host : blk;
    w.put(k.num_dst);
    w.put(k.num_src);
    w.put_vec(k.indptr);
    w.put_vec(k.indices);
    w.put_vec(k.weights);
    w.put_vec(k.src_ids);
  }
  w.put_vec(b.features);
  w.put(b.feature_dim);
  w.put_vec(b.labels);
  w.put_vec(b.label_matrix);
  w.put(b.label_columns);
  return w.take();
}

LoadedBatch unpack_batch(const uint8_t* data, size_t size) {
  Reader r(data, size);
  DSP_CHECK_FORMAT(r.get<uint64_t>() == kBatchMagic, "queued batch: bad magic");
  LoadedBatch b;
  b.sample.epoch = r.get<int64_t>();
  b.sample.batch = r.get<int64_t>();
  b.sample.seeds = r.get_vec<int64_t>();
  const int64_t nb = r.get<int64_t>();
  DSP_CHECK_FORMAT(nb >= 0 && nb < 1024, "queued batch: {} blocks", nb);
  b.sample.blocks.resize(static_cast<size_t>(nb));
  for (Block& k : b.sample.blocks) {
    k.num_dst = r.get<int64_t>();
    k.num_src = r.get<int64_t>();
    k.indptr = r.get_vec<int64_t>();
    k.indices = r.get_vec<int64_t>();
    k.weights = r.get_vec<float>();
    k.src_ids = r.get_vec<int64_t>();
  }
  b.features = r.get_vec<float>();
  b.feature_dim = r.get<int64_t>();
  b.labels = r.get_vec<int64_t>();
  b.label_matrix = r.get_vec<int8_t>();
  b.label_columns = r.get<int64_t>();
  DSP_CHECK_FORMAT(r.done(), "queued batch: {} trailing bytes", size);
  return b;
}

// Batches a sampler rank has loaded and its loader has not sent yet, in step order (the pipeline
// hands batches from the sampler to the loader in order), and, with switching, the slots a rank
// trains in the steps its loader has exchanged and its trainer not yet trained.
struct RoleStages::Pending {
  std::mutex mu;
  std::deque<std::pair<int64_t, SlotBatches>> loaded;  // (batch, per slot of this sampler)
  std::deque<std::pair<int64_t, SlotBatches>> ready;   // (batch, the slots this rank trains)
  // What a sampler rank trains without switching (no seeds, one empty block per layer), made
  // once by the sampler thread: the local sampler and store belong to that thread.
  std::unique_ptr<LoadedBatch> empty;
};

RoleStages::RoleStages(Coordinator& coord, RoleLayout layout,
                       const std::vector<std::vector<int64_t>>& seeds, int64_t batch_size,
                       uint64_t seed, LocalStages local, std::function<void(LoadedBatch&&)> train,
                       SlotTrain train_slots)
    : coord_(coord),
      layout_(layout),
      rank_(coord.rank()),
      local_(std::move(local)),
      train_(std::move(train)),
      train_slots_(std::move(train_slots)),
      pending_(std::make_unique<Pending>()) {
  layout_.validate();
  DSP_CHECK_ARG(layout_.ranks == coord.size(), "roles: layout of {} ranks in a job of {}",
                layout_.ranks, coord.size());
  DSP_CHECK_ARG(static_cast<int>(seeds.size()) == layout_.slots(),
                "roles: {} seed lists for {} slots", seeds.size(), layout_.slots());
  const bool switching = layout_.switching != RoleSwitch::kOff;
  DSP_CHECK_ARG(switching ? static_cast<bool>(train_slots_) : static_cast<bool>(train_),
                "roles: a train stage is required ({} switching)",
                switching ? "train_slots with" : "train without");
  for (const auto& s : seeds) scheds_.emplace_back(s, batch_size, seed);
  if (sampler()) {
    DSP_CHECK_ARG(local_.sample && local_.load, "roles: a sampler rank needs local stages");
  }
  if (switching) {
    size_t largest = 0;
    for (size_t v = 1; v < seeds.size(); ++v) {
      if (seeds[v].size() > seeds[largest].size()) largest = v;
    }
    own_ = std::make_unique<EpochScheduler>(seeds[largest], batch_size, seed);
  } else if (sampler()) {
    own_ = std::make_unique<EpochScheduler>(std::vector<int64_t>{}, batch_size, seed);
  } else {
    own_ = std::make_unique<EpochScheduler>(seeds[rank_], batch_size, seed);
  }
  orders_.resize(seeds.size());
  order_epoch_.assign(seeds.size(), -1);
}

RoleStages::~RoleStages() = default;

const std::vector<int64_t>& RoleStages::order(int slot, int64_t epoch) {
  if (order_epoch_[slot] != epoch) {
    EpochScheduler& s = scheds_[slot];
    s.set_max_steps(own_->max_steps());  // --max-steps: the slots stop where the job does
    s.set_steps(own_->full_steps());
    orders_[slot] = s.epoch_order(epoch);
    order_epoch_[slot] = epoch;
  }
  return orders_[slot];
}

SampledBatch RoleStages::sample(int64_t epoch, int64_t batch) {
  SampledBatch sb;
  if (!sampler()) return sb;
  SlotBatches out;
  for (int v : layout_.slots_of(rank_)) {
    const std::vector<int64_t> seeds = scheds_[v].batch_seeds(order(v, epoch), batch);
    LoadedBatch lb = local_.load(local_.sample(epoch, batch, seeds));
    lb.sample.epoch = epoch;
    lb.sample.batch = batch;
    out.emplace_back(v, std::move(lb));
  }
  std::unique_ptr<LoadedBatch> empty;
  if (layout_.switching == RoleSwitch::kOff && !pending_->empty) {
    empty = std::make_unique<LoadedBatch>(local_.load(local_.sample(epoch, batch, {})));
  }
  std::lock_guard<std::mutex> lock(pending_->mu);
  if (empty) pending_->empty = std::move(empty);
  pending_->loaded.emplace_back(batch, std::move(out));
  return sb;
}

namespace {

// A step's message from one rank to another in the global queue: records of (slot, byte count,
// packed batch), back to back.
void append_record(std::vector<uint8_t>& buf, int slot, const std::vector<uint8_t>& bytes) {
  const int64_t head[2] = {slot, static_cast<int64_t>(bytes.size())};
  const auto* h = reinterpret_cast<const uint8_t*>(head);
  buf.insert(buf.end(), h, h + sizeof(head));
  buf.insert(buf.end(), bytes.begin(), bytes.end());
}

}  // namespace

SlotBatches RoleStages::received(const std::vector<uint8_t>& recv,
                                 const std::vector<int64_t>& counts, int64_t epoch,
                                 int64_t batch) const {
  SlotBatches got;
  size_t at = 0;
  for (int from = 0; from < layout_.ranks; ++from) {
    const size_t end = at + static_cast<size_t>(counts[from]);
    while (at < end) {
      int64_t head[2];
      DSP_CHECK_FORMAT(end - at >= sizeof(head), "roles: truncated record from rank {}", from);
      std::memcpy(head, recv.data() + at, sizeof(head));
      at += sizeof(head);
      const int64_t slot = head[0], n = head[1];
      DSP_CHECK_FORMAT(n >= 0 && static_cast<uint64_t>(n) <= end - at,
                       "roles: record of {} bytes from rank {} overruns its {}", n, from,
                       counts[from]);
      DSP_CHECK(slot >= 0 && slot < layout_.slots() && layout_.sampler_for(slot) == from &&
                    layout_.owner(slot) == rank_,
                "roles: rank {} got slot {} from rank {}, which the layout does not send it", rank_,
                slot, from);
      LoadedBatch lb = unpack_batch(recv.data() + at, static_cast<size_t>(n));
      at += static_cast<size_t>(n);
      DSP_CHECK(lb.sample.epoch == epoch && lb.sample.batch == batch,
                "roles: rank {} got batch (e{}, b{}) when expecting (e{}, b{})", rank_,
                lb.sample.epoch, lb.sample.batch, epoch, batch);
      got.emplace_back(static_cast<int>(slot), std::move(lb));
    }
  }
  return got;
}

LoadedBatch RoleStages::exchange(SampledBatch&& sb) {
  std::vector<std::vector<uint8_t>> out(layout_.ranks);
  SlotBatches mine;
  LoadedBatch marker;
  if (sampler()) {
    std::lock_guard<std::mutex> lock(pending_->mu);
    auto& q = pending_->loaded;
    DSP_CHECK(!q.empty() && q.front().first == sb.batch,
              "roles: the loader expected batch {} from the sampler", sb.batch);
    SlotBatches loaded = std::move(q.front().second);
    q.pop_front();
    // The queue is full when the sampler has later steps ready: it would wait for this one.
    const bool full = static_cast<int>(q.size()) >= layout_.full_at;
    const int keep = layout_.switching == RoleSwitch::kAlways ||
                             (layout_.switching == RoleSwitch::kQueueFull && full)
                         ? layout_.extra_slot(rank_)
                         : -1;
    for (auto& [slot, lb] : loaded) {
      if (slot == keep) {
        mine.emplace_back(slot, std::move(lb));
        ++switched_;
      } else {
        append_record(out[layout_.owner(slot)], slot, pack_batch(lb));
      }
    }
    if (layout_.switching == RoleSwitch::kOff) marker = *pending_->empty;
  }
  std::vector<int64_t> counts(layout_.ranks);
  std::vector<uint8_t> send;
  for (int p = 0; p < layout_.ranks; ++p) {
    counts[p] = static_cast<int64_t>(out[p].size());
    send.insert(send.end(), out[p].begin(), out[p].end());
  }
  OpOptions o;
  o.label = "roles:global_queue";
  CoordinatedCommunicator& ch = coord_.channel(WorkerKind::kLoader);
  std::vector<int64_t> rc;
  std::vector<uint8_t> recv = ch.all_to_all_v(send, counts, &rc, o);
  SlotBatches got = received(recv, rc, sb.epoch, sb.batch);
  marker.sample.epoch = sb.epoch;
  marker.sample.batch = sb.batch;
  if (layout_.switching == RoleSwitch::kOff) {
    if (sampler()) return marker;
    DSP_CHECK(got.size() == 1, "roles: trainer {} got {} batches for step {}, expected 1", rank_,
              got.size(), sb.batch);
    return std::move(got.front().second);
  }
  for (auto& g : got) mine.push_back(std::move(g));
  std::sort(mine.begin(), mine.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::lock_guard<std::mutex> lock(pending_->mu);
  pending_->ready.emplace_back(sb.batch, std::move(mine));
  return marker;
}

void RoleStages::train(LoadedBatch&& lb) {
  if (layout_.switching == RoleSwitch::kOff) return train_(std::move(lb));
  SlotBatches mine;
  {
    std::lock_guard<std::mutex> lock(pending_->mu);
    auto& q = pending_->ready;
    DSP_CHECK(!q.empty() && q.front().first == lb.sample.batch,
              "roles: the trainer expected step {} from the loader", lb.sample.batch);
    mine = std::move(q.front().second);
    q.pop_front();
  }
  train_slots_(std::move(mine), layout_.slots());
}

PipelineStages RoleStages::stages() {
  PipelineStages st;
  st.sample = [this](int64_t epoch, int64_t batch, const std::vector<int64_t>&) {
    return sample(epoch, batch);
  };
  st.load = [this](SampledBatch&& sb) { return exchange(std::move(sb)); };
  st.train = [this](LoadedBatch&& lb) { train(std::move(lb)); };
  return st;
}

WholeGraphStages::WholeGraphStages(const std::string& dir, const SamplerOptions& so)
    : part_(load_whole_partition(dir)),
      self_s_(std::make_unique<SelfCommunicator>()),
      self_l_(std::make_unique<SelfCommunicator>()) {
  sampler_ = std::make_unique<CollectiveSampler>(part_, *self_s_, so);
  if (part_.meta.feature_dim > 0) {
    store_ = std::make_unique<FeatureStore>(part_, *self_l_, std::vector<Array>{part_.cached});
  }
}

WholeGraphStages::~WholeGraphStages() = default;

LocalStages WholeGraphStages::stages() {
  LocalStages l;
  l.sample = [this](int64_t epoch, int64_t batch, const std::vector<int64_t>& seeds) {
    return sampler_->sample(seeds, epoch, batch);
  };
  l.load = [this](SampledBatch&& sb) {
    return load_batch(std::move(sb), store_.get(), part_.labels);
  };
  return l;
}

RoleRank make_role_rank(Coordinator& coord, const std::string& dir, RoleLayout layout,
                        int64_t batch_size, uint64_t seed, const SamplerOptions& so,
                        std::function<void(LoadedBatch&&)> train, const SeedFilter& filter,
                        SlotTrain train_slots) {
  layout.validate();
  RoleRank r;
  LocalStages local;
  if (layout.is_sampler(coord.rank())) {
    r.whole = std::make_unique<WholeGraphStages>(dir, so);
    local = r.whole->stages();
  }
  std::vector<std::vector<int64_t>> seeds;
  for (int v = 0; v < layout.slots(); ++v) {
    seeds.push_back(trainer_seeds(dir, v, layout.slots(), filter));
  }
  r.roles = std::make_unique<RoleStages>(coord, layout, seeds, batch_size, seed, std::move(local),
                                         std::move(train), std::move(train_slots));
  return r;
}

}  // namespace dsp
