#include "pipeline/rank/runtime.hpp"

#include "core/console.hpp"
#include "core/error.hpp"
#include "core/huge_pages.hpp"
#include "core/logging.hpp"
#include "graph/npy.hpp"
#include "layout/store/embedding_table.hpp"

namespace dsp {

RankRuntime::RankRuntime(RankOptions opts)
    : opts_(std::move(opts)), features_(*this, part_, backends_.features) {
  opts_.validate();
  if (!opts_.log_file.empty()) console_set_log_file(opts_.log_file);
  {
    // Where this rank runs decides its trainer's data channel, so find the node place first, on
    // a communicator of its own.
    auto boot = make_communicator(opts_.backend, opts_.coord.comm);
    const NodePlace node = node_place(*boot);
    place_ = place_rank(opts_.device, opts_.transport, node.rank, node.size);
    backends_ = make_backends(place_, opts_.emulate_device, opts_.topology_memory);
  }
  coord_ = make_coordinator(opts_.backend, opts_.coord, device_channels());
  CoordinatedCommunicator& ch = channel(WorkerKind::kMain);
  ch.set_step(-1, 0);
  cores_ = share_cores(ch, place_.device, opts_.threads, opts_.bind);
  set_thread_pools(cores_.threads);
  part_dir_ = on_the_fly_.resolve(opts_, ch);
  part_ = load_partition(part_dir_, rank(), size());
  // The sampler's neighbour array and the feature rows share the page cache: beyond memory
  // together, each is read as from disk (core/huge_pages.hpp).
  note_random_reads(part_.patch.indices.nbytes() + part_.features.nbytes());
  // PaGraph's PP: the store gathers [x_v | a_v] rows instead of x_v (the meta keeps F).
  if (opts_.preaggregate) {
    part_.features = load_preaggregated(part_, *opts_.preaggregate);
    part_.feature_rows = Array();  // pre-aggregated rows are in new id order
  }
  if (!opts_.cache_policy.empty() || opts_.cache_ratio >= 0) {
    if (!on_the_fly_.active()) features_.override_cache();  // on the fly: the partition used them
  }
  log_startup();
}

RankRuntime::~RankRuntime() {
  note_random_reads(0);  // this rank's arrays are no longer read
}

// A GPU rank's sampler, loader and trainer channels are device-space (CSP's tasks and picks, the
// feature rows and the gradient bucket stay on the device): NCCL bootstrapped over the control
// communicator with the nccl transport (one communicator and stream per worker), else the
// control backend staged through pinned host memory (ranks sharing a GPU; host memory with
// emulate_device). The main channel keeps the control backend.
DataCommFactory RankRuntime::device_channels() const {
  const auto make = backends_.device_channel;  // pipeline/rank/backends.hpp
  if (!make) return {};
  const CommOptions comm = opts_.coord.comm;
  const bool trains = opts_.trains;
  return [=](WorkerKind kind, Communicator& control) -> std::unique_ptr<Communicator> {
    if (kind == WorkerKind::kMain || (kind == WorkerKind::kTrainer && !trains)) return nullptr;
    return make(control, comm);
  };
}

MemorySpace RankRuntime::embedding_memory() const {
  return backends_.embedding && device().is_cuda() ? MemorySpace::kDevice : MemorySpace::kHost;
}

void RankRuntime::check_embedding_fits(int64_t rows, int64_t dim, EmbeddingOptimizer optimizer,
                                       uint64_t budget) const {
  const MemorySpace space = embedding_memory();
  const uint64_t free_bytes =
      space == MemorySpace::kDevice ? static_cast<uint64_t>(free_device_memory(device())) : 0;
  check_embedding_memory(rows, dim, optimizer, budget, space, free_bytes);
}

// Rank 0 prints what every rank got: device, cores, threads.
void RankRuntime::log_startup() {
  constexpr int kLine = 160;
  const std::string channels = channel(WorkerKind::kLoader).backend();
  std::string line =
      fmt::format("rank {}: {}{}, {}", rank(), device().str(),
                  opts_.emulate_device       ? " (device path emulated, " + channels + " channels)"
                  : place_.device_channels() ? " (" + channels + " channels)"
                                             : "",
                  cores_.describe());
  line.resize(kLine, ' ');
  std::vector<char> all(static_cast<size_t>(size()) * kLine);
  OpOptions o;
  o.label = "runtime.startup";
  channel(WorkerKind::kMain).all_gather(line.data(), all.data(), kLine, DType::kUInt8, o);
  if (!leader()) return;
  for (int r = 0; r < size(); ++r) {
    std::string l(all.data() + static_cast<size_t>(r) * kLine, kLine);
    l.erase(l.find_last_not_of(' ') + 1);
    DSP_INFO("runtime", "{}", l);
  }
}

std::unique_ptr<CollectiveSampler> RankRuntime::make_sampler(const SamplerOptions& so,
                                                             bool self_reliant) {
  const SamplerBackendFactory& backend = backends_.sampler;
  if (self_reliant && part_.meta.hops > 0) {
    DSP_CHECK_ARG(static_cast<int>(so.fanouts.size()) <= part_.meta.hops,
                  "{}: the parts replicate {}-hop neighbourhoods (dsp partition --hops {}) but "
                  "the sampler has {} layers",
                  part_dir_, part_.meta.hops, part_.meta.hops, so.fanouts.size());
    if (!self_comm_) {
      local_ = replicated_view(part_);
      self_comm_ = make_communicator("self");
    }
    return std::make_unique<CollectiveSampler>(local_, *self_comm_, so, backend);
  }
  return std::make_unique<CollectiveSampler>(part_, channel(WorkerKind::kSampler), so, backend);
}

PipelineOptions RankRuntime::pipeline_options(PipelineMode mode) const {
  PipelineOptions po;
  po.mode = mode;
  po.threads = cores_.threads;
  if (cores_.bound && static_cast<int>(cores_.cpus.size()) == po.threads) po.cpus = cores_.cpus;
  return po;
}

const Names<Split>& names_of(Split) {
  static const Names<Split> n("split", {{Split::kTrain, "train"},
                                        {Split::kValid, "valid"},
                                        {Split::kTest, "test"},
                                        {Split::kAll, "all"}});
  return n;
}

std::vector<int64_t> RankRuntime::local_ids(Split split) const {
  const Array* ids = split == Split::kTrain   ? &part_.seeds
                     : split == Split::kValid ? &part_.valid_idx
                     : split == Split::kTest  ? &part_.test_idx
                                              : nullptr;
  DSP_CHECK(ids != nullptr, "local_ids: split {} is not one of the dataset's", split);
  std::vector<int64_t> out;
  if (!ids->defined()) return out;
  const int64_t b = part_.meta.offsets[rank()], e = part_.meta.offsets[rank() + 1];
  const int64_t* p = ids->data<int64_t>();
  for (int64_t i = 0; i < ids->dim(0); ++i) {
    if (p[i] >= b && p[i] < e) out.push_back(p[i]);
  }
  return out;
}

}  // namespace dsp
