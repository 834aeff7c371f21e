// `dsp bench gather PARTITION`: FeatureStore::gather against a per-row memcpy loop and a
// contiguous memcpy (measured in src/bench/gather_bench.cpp); on a GPU rank also the device's
// copy ceilings.
#include "bench_common.hpp"
#include "ccc/communicator.hpp"
#ifdef DSP_HAVE_CUDA
#include "core/cuda/memory.hpp"
#endif
#include "bench/gather_bench.hpp"

namespace dsp::cli {
namespace {

// On a GPU rank, the copy ceilings of a gather into device memory, measured in the same run: a
// device-to-device copy and a pinned host-to-device copy of the same bytes (hot rows are read at
// the first, cold rows through UVA at most at the second).
void add_device_ceilings(const Device& device, size_t bytes, int iters, nlohmann::json& j,
                         bool print) {
#ifdef DSP_HAVE_CUDA
  if (!device.is_cuda()) return;
  const cuda::CopyBandwidth bw = cuda::copy_bandwidth(device.index, bytes, iters);
  const double gather = j["gather_GBps"].get<double>();
  j["device_to_device_GBps"] = bw.device_to_device_gbps;
  j["host_to_device_GBps"] = bw.host_to_device_gbps;
  j["gather_vs_device_to_device"] = gather / bw.device_to_device_gbps;
  j["gather_vs_host_to_device"] = gather / bw.host_to_device_gbps;
  if (!print) return;
  fmt::print("  device-to-device copy    {:8.2f} GB/s   (gather / d2d = {:.2f})\n",
             bw.device_to_device_gbps, gather / bw.device_to_device_gbps);
  fmt::print("  pinned host-to-device    {:8.2f} GB/s   (gather / h2d = {:.2f})\n",
             bw.host_to_device_gbps, gather / bw.host_to_device_gbps);
#else
  (void)device, (void)bytes, (void)iters, (void)j, (void)print;
#endif
}

void print_gather(const nlohmann::json& j) {
  fmt::print("gather bench: {} ranks, {} thread(s), {} rows x {} B per call, {} calls\n",
             j["ranks"].get<int>(), j["threads"].get<int>(), j["batch_rows"].get<int64_t>(),
             j["row_bytes"].get<size_t>(), j["iters"].get<int>());
  fmt::print("  FeatureStore::gather{}{:8.2f} GB/s\n",
             j["resident"].get<bool>() ? "_resident " : "     ", j["gather_GBps"].get<double>());
  fmt::print("  per-row memcpy loop      {:8.2f} GB/s   (gather / loop = {:.2f})\n",
             j["row_loop_GBps"].get<double>(), j["gather_vs_row_loop"].get<double>());
  fmt::print("  contiguous memcpy        {:8.2f} GB/s   (gather / memcpy = {:.2f}; the ceiling)\n",
             j["contiguous_memcpy_GBps"].get<double>(), j["gather_vs_memcpy"].get<double>());
  fmt::print("  hit rate {:.3f}: remote hot {}, local hot {}, cold {} rows\n",
             j["hit_rate"].get<double>(), j["rows_remote_hot"].get<int64_t>(),
             j["rows_local_hot"].get<int64_t>(), j["rows_cold"].get<int64_t>());
}

// The store's arrays, the id permutation (8 B per node) and per gathered row the three buffers
// (the store's output, the loop's and the memcpy's rows) and the ids and request lists.
uint64_t gather_bytes(const GatherBenchOptions& a, const RankRuntime& rt) {
  const Array& f = rt.part().features;
  const uint64_t n = f.defined() ? static_cast<uint64_t>(f.dim(0)) : 0;
  const uint64_t row = n ? f.nbytes() / n : 0;
  const uint64_t out_row = std::max<uint64_t>(row, f.defined() ? 4 * f.dim(1) : 0);
  const uint64_t batch = std::min<uint64_t>(static_cast<uint64_t>(a.batch), n);
  return bench_store_bytes(rt.part(), true, false, rt.cores().node_size) + 8 * n +
         batch * (2 * row + out_row + 48);
}

void run_gather(const GatherBenchOptions& a, const RankOptions& rank) {
  RankRuntime rt(bench_rank(a.partition, a.threads, rank));
  if (rt.features().has_features()) {
    check_bench_memory("dsp bench gather", gather_bytes(a, rt), bench_budget(rt), "--batch");
  }
  Communicator& comm = rt.channel(WorkerKind::kLoader);  // the store's channel: ops in order
  nlohmann::json j = measure_gather(rt.features().store(), comm, rt.part().features, a);
  j["bench"] = "gather";
  j["partition"] = a.partition;
  j["device"] = rt.device().str();
  j["rank"] = comm.rank();
  j["ranks"] = comm.size();
  j["threads"] = a.threads;
  const bool leader = comm.rank() == 0;
  if (leader) print_gather(j);
  const size_t bytes = j["batch_rows"].get<int64_t>() * j["row_bytes"].get<size_t>();
  add_device_ceilings(rt.device(), bytes, a.iters, j, leader);
  if (leader) write_figures(a.json, j);
}

}  // namespace

void add_bench_gather(CLI::App* bench) {
  add_bench_command<GatherBenchOptions>(
      bench, "gather", "Feature gather bandwidth vs a per-row memcpy loop and a contiguous memcpy",
      "PARTITION", "partition directory (dsp partition)", &GatherBenchOptions::partition,
      gather_bench_options(), {"device", "memory_budget"}, run_gather);
}

}  // namespace dsp::cli
