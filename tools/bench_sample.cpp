// `dsp bench sample PARTITION`: collective sampling throughput per stage and layer and the bytes
// moved, CSP vs pull (measured in src/bench/sample_bench.cpp).
#include "bench/sample_bench.hpp"
#include "bench_common.hpp"
#include "ccc/communicator.hpp"

namespace dsp::cli {
namespace {

void print_mode(const nlohmann::json& m, int batches) {
  fmt::print(
      "  {:<4} {:8.2f} M sampled edges/s ({:.2f} M per rank), {:9.0f} seeds/s, "
      "{:.2f} ms/batch\n",
      m["mode"].get<std::string>(), m["sampled_edges_per_s"].get<double>() / 1e6,
      m["sampled_edges_per_s_per_rank"].get<double>() / 1e6, m["seeds_per_s"].get<double>(),
      m["ms_per_batch"].get<double>());
  const auto& s = m["ms_per_stage"];
  fmt::print(
      "       stages ms/batch: shuffle {:.2f}, sample {:.2f}, reshuffle {:.2f}, "
      "relabel {:.2f}; layers {}\n",
      s["shuffle"].get<double>(), s["sample"].get<double>(), s["reshuffle"].get<double>(),
      s["relabel"].get<double>(), m["ms_per_layer_from_seeds"].dump());
  fmt::print("       input nodes/batch {:.0f} ({:.1f} KB of features), sources per layer {}\n",
             m["input_nodes_per_batch"].get<double>(),
             m["feature_bytes_per_batch"].get<double>() / 1e3,
             m["sources_per_batch_per_layer"].dump());
  fmt::print("       bytes/epoch (extrapolated from {} batches x {} batches/epoch): {:.1f} MB\n",
             batches, m["batches_per_epoch"].get<int64_t>(),
             m["bytes_per_epoch_extrapolated"].get<double>() / 1e6);
  if (m["host_syncs_per_batch"].get<double>() > 0) {  // a device backend
    fmt::print(
        "       host round trips/batch: {:.1f} blocking syncs, {:.1f} device-to-host reads "
        "({:.1f} per layer, {:.1f} KB); {:.0f} buffer growths in {} batches; {:.1f} graph "
        "replays\n",
        m["host_syncs_per_batch"].get<double>(), m["host_reads_per_batch"].get<double>(),
        m["host_reads_per_layer"].get<double>(), m["host_read_bytes_per_batch"].get<double>() / 1e3,
        m["host_allocations"].get<double>(), batches, m["graph_launches_per_batch"].get<double>());
  }
  if (m.contains("bytes_per_epoch_per_layer")) {
    std::string per;
    for (const auto& b : m["bytes_per_epoch_per_layer"]) {
      per += fmt::format(" {:.1f}", b.get<double>() / 1e6);
    }
    fmt::print("       MB/epoch per layer (from the seeds out):{}\n", per);
  }
}

void print_sample(const SampleBenchOptions& a, const nlohmann::json& j) {
  fmt::print(
      "sample bench: {} rank(s) x {} thread(s), sampler {}{}, fanouts {}, batch {}, {} timed "
      "batches\n",
      j["ranks"].get<int>(), a.threads, j["options"]["sampler"].get<std::string>(),
      a.base.is_temporal() ? " (temporal " + j["options"]["temporal"].get<std::string>() + ")" : "",
      j["options"]["fanouts"].dump(), a.batch_size, a.batches);
  for (const auto& m : j["modes"]) print_mode(m, a.batches);
  if (j.contains("csp_bytes_over_pull")) {
    fmt::print("  CSP moves {:.3f} of pull's bytes\n", j["csp_bytes_over_pull"].get<double>());
  }
}

void run_sample(const SampleBenchOptions& a, const RankOptions& rank) {
  RankRuntime rt(bench_rank(a.partition, a.threads, rank));
  const PartitionData& part = rt.part();
  // The sampler's neighbour array copy, the seeds, and a batch being sampled while the last one's
  // figures are kept.
  check_bench_memory(
      "dsp bench sample",
      bench_store_bytes(part, false, true, rt.cores().node_size) +
          8 * static_cast<uint64_t>(part.seeds.dim(0)) +
          2 * sampled_batch_bytes(a.batch_size, a.base.fanouts, part.meta.num_nodes,
                                  part.meta.num_edges, a.base.kind == SamplerKind::kLayer),
      bench_budget(rt), "--batch-size, --fanouts");
  check_node_times(a.sampler(SampleMode::kCsp), part, a.partition, "seed");
  Communicator& comm = rt.channel(WorkerKind::kSampler);
  std::vector<int64_t> seeds;
  for (int64_t i = 0; i < part.seeds.dim(0); ++i) seeds.push_back(part.seeds.int_at(i));
  const SamplerFactory make = [&rt](const SamplerOptions& so) { return rt.make_sampler(so); };
  nlohmann::json j = measure_sampling(a, make, comm, seeds, part.part);
  // what one batch's input rows weigh as the partition stores them (dsp partition
  // --feature-dtype): the loader's bytes for this sampler
  const double row_bytes =
      static_cast<double>(part.meta.feature_dim) * dtype_size(part.meta.feature_dtype);
  for (auto& m : j["modes"]) {
    m["feature_bytes_per_batch"] = m["input_nodes_per_batch"].get<double>() * row_bytes;
  }
  j.update({{"bench", "sample"},
            {"device", rt.device().str()},
            {"partition", a.partition},
            {"ranks", comm.size()},
            {"threads", a.threads},
            {"options", write_options(sample_bench_options(), a)},
            {"batch_size", a.batch_size},
            {"batches", a.batches},
            {"biased", a.base.biased},
            {"replace", a.base.replace},
            {"num_nodes", part.meta.num_nodes},
            {"num_edges", part.meta.num_edges}});
  if (comm.rank() != 0) return;
  print_sample(a, j);
  write_figures(a.json, j);
}

}  // namespace

void add_bench_sample(CLI::App* bench) {
  add_bench_command<SampleBenchOptions>(
      bench, "sample",
      "Collective sampling throughput (per stage and layer) and bytes moved, CSP vs pull",
      "PARTITION", "partition directory (dsp partition)", &SampleBenchOptions::partition,
      sample_bench_options(), {"device", "topology_memory", "memory_budget", "emulate_device"},
      run_sample);
}

}  // namespace dsp::cli
