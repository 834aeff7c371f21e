#include "pipeline/rank/options.hpp"

#include "core/error.hpp"
#include "layout/store/hotness.hpp"

namespace dsp {

Transport Transport::parse(const std::string& s) {
  if (s == "auto") return {Kind::kAuto};
  if (s == "nccl") return {Kind::kNccl};
  if (s == "mpi") return {Kind::kMpi};
  DSP_THROW_T(InvalidArgument, "unknown transport '{}' (auto, mpi, nccl)", s);
}

std::string Transport::str() const {
  return kind == Kind::kNccl ? "nccl" : kind == Kind::kMpi ? "mpi" : "auto";
}

void RankOptions::validate() const {
  DSP_CHECK_ARG(!path.empty(), "no partition or dataset directory given");
  DSP_CHECK_ARG(fifo_rows >= 0, "--fifo-rows must be >= 0, got {}", fifo_rows);
  DSP_CHECK_ARG(topology_memory >= -1, "--topology-memory must be >= 0, got {}", topology_memory);
  DSP_CHECK_ARG(fifo_shared_rows >= 0, "--fifo-shared-rows must be >= 0, got {}", fifo_shared_rows);
  DSP_CHECK_ARG(fifo_shared_rows == 0 || fifo_rows > 0,
                "--fifo-shared-rows needs --fifo-rows: the machine's shared level backs each "
                "rank's own FIFO level");
  DSP_CHECK_ARG(device.is_cuda() || transport.kind == Transport::Kind::kAuto,
                "--transport {}: only GPU ranks (--device cuda) choose a transport; a CPU rank's "
                "channels are its communicator's (--backend)",
                transport.str());
  if (!cache_policy.empty()) check_train_time_cache_policy(cache_policy);
  DSP_CHECK_ARG(cache_ratio == -1 || (cache_ratio >= 0 && cache_ratio <= 1),
                "--cache-ratio must be in [0, 1], got {}", cache_ratio);
  DSP_CHECK_ARG(cache_memory >= 0, "--cache-memory must be >= 0, got {}", cache_memory);
  DSP_CHECK_ARG(!emulate_device || !device.is_cuda(),
                "the emulated device path runs on a CPU rank, not on {}", device.str());
}

}  // namespace dsp
