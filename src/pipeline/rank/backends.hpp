#pragma once
// The one place a rank's backends are chosen from its device, and the only file of the pipeline
// that knows the CUDA build: the device a rank runs on (place_rank), the sampler's and the
// feature store's backends (CPU and host, the emulated device path, CUDA), the embedding table's
// storage (host, emulated, CUDA device memory), the device-space
// channel of its workers (NCCL, or the control backend staged through pinned or host memory) and
// the device memory a cache may take. RankRuntime (pipeline/rank/runtime.hpp) assembles a rank
// from these.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "ccc/communicator.hpp"
#include "core/device.hpp"
#include "csp/backend.hpp"
#include "layout/store/embedding_storage.hpp"
#include "layout/store/feature_backend.hpp"
#include "pipeline/rank/options.hpp"

namespace dsp {

// Where a rank runs and how its device buffers move.
struct RankPlace {
  Device device;
  Transport transport =
      Transport::kAuto;  // resolved on a GPU rank (nccl or mpi); auto on a CPU rank
  bool device_channels() const { return device.is_cuda(); }
};

// This rank's GPU from the requested first one (RankOptions::device, cuda:N): GPU N + node rank;
// with the mpi transport ranks share GPUs round robin; the transport resolved. InvalidArgument for
// a CUDA device in a build without CUDA, or for more ranks on a node than GPUs with the nccl
// transport. A CPU rank stays where it is.
RankPlace place_rank(const Device& requested, Transport transport, int node_rank, int node_size);

struct RankBackends {
  SamplerBackendFactory sampler;      // empty: the CPU sampler backend
  FeatureBackendFactory features;     // empty: the host feature backend
  EmbeddingStorageFactory embedding;  // empty: the host embedding storage
  // A worker's device-space channel over its control communicator; empty: host channels.
  std::function<std::unique_ptr<Communicator>(Communicator& control, const CommOptions& comm)>
      device_channel;
};

// The backends of a rank at `place` (place_rank's); `emulate_device` (tests): a CPU rank run as a
// GPU rank runs, kernels aside. `topology_memory`: RankOptions::topology_memory.
RankBackends make_backends(const RankPlace& place, bool emulate_device, int64_t topology_memory);

// Free memory of a CUDA `device`, bytes (InvalidArgument in a build without CUDA).
int64_t free_device_memory(const Device& device);

}  // namespace dsp
