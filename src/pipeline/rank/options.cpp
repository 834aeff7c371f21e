#include "pipeline/rank/options.hpp"

#include "core/error.hpp"
#include "layout/partition/hotness.hpp"

namespace dsp {

const Names<Transport>& names_of(Transport) {
  using T = Transport;
  static const Names<T> n("transport", {{T::kAuto, "auto"}, {T::kNccl, "nccl"}, {T::kMpi, "mpi"}});
  return n;
}

namespace {

OptionTable<RankOptions> make_table() {
  using options::value;
  using R = RankOptions;
  // clang-format off
#define DSP_RANK(member) [](R& r) -> auto& { return r.member; }
  // clang-format on
  return {
      options::resumable(value<R>(
          "", "path", "partition directory (dsp partition) or dataset directory", DSP_RANK(path))),
      value<R>("", "backend",
               "the job's communicator: auto (default), self, mpi, or torch (the Python module's: "
               "a torch.distributed process group)",
               DSP_RANK(backend)),
      value<R>("", "partition_method",
               "a dataset directory is partitioned on the fly by this method (default metis)",
               DSP_RANK(partition_method)),
      value<R>("--device", "device",
               "cpu (default), cuda or cuda:N: each rank takes the GPU of its node rank (+N)",
               DSP_RANK(device)),
      value<R>("--transport", "transport",
               "GPU ranks' device buffers (gradients, feature rows): auto (default: nccl with a "
               "GPU per rank), nccl, or mpi (staged through pinned host memory; ranks may share a "
               "GPU)",
               DSP_RANK(transport)),
      options::bytes<R>("--topology-memory", "topology_memory",
                        "GPU ranks: device memory the neighbour array may take, e.g. 8G (default: "
                        "half the free device memory); the rest is read from pinned host memory "
                        "through UVA, hottest rows on the device; 0: all through UVA",
                        DSP_RANK(topology_memory)),
      value<R>("--cache-policy", "cache_policy",
               "override the partition's cache: in-degree, random or none", DSP_RANK(cache_policy)),
      value<R>("--cache-ratio", "cache_ratio", "override the share of nodes cached, [0, 1]",
               DSP_RANK(cache_ratio)),
      value<R>("--cache-memory", "cache_memory",
               "--cache-auto: host bytes the cache may take (default: available memory)",
               DSP_RANK(cache_memory)),
      options::resumable(options::bytes<R>(
          "--memory-budget", "memory_budget",
          "host memory each rank may use, e.g. 12G (default: 3/4 of what is available, shared by "
          "the node's ranks): what a dataset directory's partition on the fly, the feature store "
          "and batches or an embedding table need is estimated first and refused with one line "
          "when it does not fit",
          DSP_RANK(memory_budget))),
      options::resumable(value<R>("--log-file", "log_file",
                                  "also append every rank's log lines and the results (epoch "
                                  "lines, summary) to this file",
                                  DSP_RANK(log_file))),
      options::toggle<R>("--emulate-device", "emulate_device",
                         "run this CPU rank as a GPU rank runs, the device sampler and feature "
                         "paths executed on the host: the same results, and the host round trips "
                         "a GPU would make counted (dsp bench sample)",
                         DSP_RANK(emulate_device)),
      value<R>("--fifo-rows", "fifo_rows",
               "BGL's dynamic cache: keep this many of the rows other ranks serve per rank, first "
               "in first out, so a repeat needs no request (default 0: off)",
               DSP_RANK(fifo_rows)),
      value<R>("--fifo-shared-rows", "fifo_shared_rows",
               "with --fifo-rows: a second FIFO level of this many rows in shared memory, shared "
               "by the ranks of a machine (default 0: none)",
               DSP_RANK(fifo_shared_rows)),
  };
#undef DSP_RANK
}

}  // namespace

const OptionTable<RankOptions>& rank_options_table() {
  static const OptionTable<RankOptions> table = make_table();
  return table;
}

void RankOptions::validate() const {
  DSP_CHECK_ARG(!path.empty(), "no partition or dataset directory given");
  DSP_CHECK_ARG(fifo_rows >= 0, "--fifo-rows must be >= 0, got {}", fifo_rows);
  DSP_CHECK_ARG(topology_memory >= -1, "--topology-memory must be >= 0, got {}", topology_memory);
  DSP_CHECK_ARG(fifo_shared_rows >= 0, "--fifo-shared-rows must be >= 0, got {}", fifo_shared_rows);
  DSP_CHECK_ARG(fifo_shared_rows == 0 || fifo_rows > 0,
                "--fifo-shared-rows needs --fifo-rows: the machine's shared level backs each "
                "rank's own FIFO level");
  DSP_CHECK_ARG(device.is_cuda() || transport == Transport::kAuto,
                "--transport {}: only GPU ranks (--device cuda) choose a transport; a CPU rank's "
                "channels are its communicator's (--backend)",
                transport);
  if (!cache_policy.empty()) check_train_time_cache_policy(cache_policy);
  DSP_CHECK_ARG(cache_ratio == -1 || (cache_ratio >= 0 && cache_ratio <= 1),
                "--cache-ratio must be in [0, 1], got {}", cache_ratio);
  DSP_CHECK_ARG(cache_memory >= 0, "--cache-memory must be >= 0, got {}", cache_memory);
  DSP_CHECK_ARG(memory_budget >= 0, "--memory-budget must be >= 0, got {}", memory_budget);
  DSP_CHECK_ARG(!emulate_device || !device.is_cuda(),
                "the emulated device path runs on a CPU rank, not on {}", device.str());
}

}  // namespace dsp
