#pragma once
// `dsp bench gather`: the bandwidth of FeatureStore::gather against a per-row memcpy loop over the
// same mapping and a contiguous memcpy of the same bytes (the ceiling). Its options are declared
// once (gather_bench_options: flags, keys, help, defaults), checked once (validate) and measured
// here, next to the store; the CLI (tools/bench_gather.cpp) prints and writes the figures.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "ccc/communicator.hpp"
#include "core/options.hpp"
#include "graph/array.hpp"
#include "layout/store/feature_store.hpp"

namespace dsp {

struct GatherBenchOptions {
  std::string partition;   // the CLI's PARTITION
  int64_t batch = 100000;  // distinct rows per gather
  int iters = 20;          // timed gathers (after two warm-up rounds)
  int threads = 1;         // OpenMP threads of the gather
  // The ids in the store's memory (uploaded before each timed gather, untimed), gathered by
  // FeatureStore::gather_resident: as dsp train gathers a device sampler's block sources.
  bool resident = false;
  uint64_t seed = 0;       // random seed of the id sets
  std::string json;        // write the figures to this file

  // InvalidArgument "--batch, --iters and --threads must be positive".
  void validate() const;
};

const OptionTable<GatherBenchOptions>& gather_bench_options();

// Times `o.iters` gathers of min(o.batch, N) distinct rows drawn uniformly (after two warm-up
// rounds), each against a per-row memcpy loop over another id set of `features` (the mapping the
// store reads cold rows from; the two run in alternating order) and a contiguous memcpy of the
// same bytes. A timed gather ends when its rows are written (a device backend's last copies
// waited for by a one-byte read of the output). Collective over `comm` (the store's channel).
// Returns this rank's figures: resident, batch_rows, row_bytes, iters, gather_GBps, row_loop_GBps,
// contiguous_memcpy_GBps,
// gather_vs_row_loop, gather_vs_memcpy, hit_rate, rows_remote_hot, rows_local_hot, rows_cold.
nlohmann::json measure_gather(FeatureStore& store, Communicator& comm, const Array& features,
                              const GatherBenchOptions& o);

}  // namespace dsp
