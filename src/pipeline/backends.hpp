#pragma once
// The one place a rank's backends are chosen from its device, and the only file of the pipeline
// that knows the CUDA build: the device a rank runs on (rank_device), the sampler's and the
// feature store's backends (CPU and host, the emulated device path, CUDA), the device-space
// channel of its workers (NCCL, or the control backend staged through pinned or host memory) and
// the device memory a cache may take. RankRuntime assembles a rank from these.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "ccc/communicator.hpp"
#include "core/device.hpp"
#include "csp/backend.hpp"
#include "layout/feature_backend.hpp"

namespace dsp {

// Parses the device option and picks this rank's GPU: "cuda" means GPU (node rank), "cuda:N" adds
// N; with the mpi transport ranks share GPUs round robin. InvalidArgument for a CUDA device in a
// build without CUDA, for more ranks on a node than GPUs with the nccl transport, or for a
// transport other than "auto" on the CPU (it would be ignored). `transport` comes back resolved
// ("nccl" or "mpi"; "" on the CPU).
Device rank_device(const std::string& spec, int node_rank, int node_size, std::string* transport);

struct RankBackends {
  SamplerBackendFactory sampler;   // empty: the CPU sampler backend
  FeatureBackendFactory features;  // empty: the host feature backend
  // A worker's device-space channel over its control communicator; empty: host channels.
  std::function<std::unique_ptr<Communicator>(Communicator& control, const CommOptions& comm)>
      device_channel;
};

// The backends of a rank on `device` (rank_device's) with `transport` (rank_device's resolved
// one); `emulate_device` (tests): a CPU rank run as a GPU rank runs, kernels aside.
// `topology_memory`: RankOptions::topology_memory.
RankBackends make_backends(const Device& device, const std::string& transport, bool emulate_device,
                           int64_t topology_memory);

// Free memory of a CUDA `device`, bytes (InvalidArgument in a build without CUDA).
int64_t free_device_memory(const Device& device);

}  // namespace dsp
