#include "pipeline/rank/backends.hpp"

#include "ccc/staged_communicator.hpp"
#include "core/error.hpp"
#include "pipeline/cores.hpp"
#ifdef DSP_HAVE_CUDA
#include "ccc/cuda/nccl_communicator.hpp"
#include "ccc/cuda/staging.hpp"
#include "core/cuda/check.hpp"
#include "core/cuda/memory.hpp"
#include "csp/cuda/sampler_backend.hpp"
#include "layout/store/cuda/embedding_storage.hpp"
#include "layout/store/cuda/feature_backend.hpp"
#endif

namespace dsp {

RankPlace place_rank(const Device& requested, Transport transport, int node_rank, int node_size) {
  if (!requested.is_cuda()) return {requested, transport};
#ifdef DSP_HAVE_CUDA
  using K = Transport;
  const int first = requested.index;
  const int gpus = cuda::device_count() - first;
  DSP_CHECK_ARG(gpus > 0, "--device {}: no CUDA device {} is visible to this process",
                requested.str(), first);
  if (transport == K::kAuto) transport = node_size <= gpus ? K::kNccl : K::kMpi;
  DSP_CHECK_ARG(transport == K::kMpi || node_size <= gpus,
                "--device {}: {} rank(s) on this node but {} GPU(s) from cuda:{}: NCCL needs one "
                "GPU per rank (--transport mpi lets ranks share a GPU)",
                requested.str(), node_size, gpus, first);
  return {Device::cuda(first + node_rank % gpus), transport};
#else
  (void)node_rank;
  (void)node_size;
  DSP_THROW_T(InvalidArgument, "--device {}: this dsp was built without CUDA (nvcc not found)",
              requested.str());
#endif
}

namespace {

// The staged transport: the control communicator's backend, its device buffers staged through
// `staging` (pinned host memory on a GPU, plain host memory when emulated).
template <class Staging>
auto staged_channel(Staging staging) {
  return [staging](Communicator& control, const CommOptions& comm) {
    return make_staged_communicator(make_communicator(control.backend(), comm), staging());
  };
}

}  // namespace

RankBackends make_backends(const RankPlace& place, bool emulate_device, int64_t topology_memory) {
  RankBackends b;
  if (emulate_device) {
    b.sampler = emulated_sampler_backend();
    b.features = make_emulated_feature_backend;
    b.embedding = make_emulated_embedding_storage;
    const HostAlloc near = near_memory(place.device).alloc;  // as a GPU's pinned staging
    b.device_channel = staged_channel([near] { return make_host_staging(near); });
    return b;
  }
  if (!place.device.is_cuda()) return b;
#ifdef DSP_HAVE_CUDA
  const int dev = place.device.index;
  cuda::CudaSamplerOptions co;
  co.device = dev;
  if (topology_memory >= 0) co.index_budget = static_cast<size_t>(topology_memory);
  b.sampler = cuda::cuda_sampler_backend(co);
  b.features = cuda::cuda_feature_backend(dev);
  b.embedding = cuda::cuda_embedding_storage(dev);
  if (place.transport == Transport::kNccl) {
    b.device_channel = [dev](Communicator& control, const CommOptions& comm) {
      return make_nccl_communicator(control, dev, comm);
    };
  } else {
    const HostAlloc near = near_memory(place.device).alloc;  // the GPU's NUMA nodes
    b.device_channel = staged_channel([dev, near] { return make_cuda_staging(dev, near); });
  }
#else
  (void)topology_memory;
#endif
  return b;
}

int64_t free_device_memory(const Device& device) {
#ifdef DSP_HAVE_CUDA
  size_t free_bytes = 0, total = 0;
  cuda::CudaDeviceGuard guard(device.index);
  cuda::device_memory(&free_bytes, &total);
  return static_cast<int64_t>(free_bytes);
#else
  DSP_THROW_T(InvalidArgument, "{}: this dsp was built without CUDA (nvcc not found)",
              device.str());
#endif
}

}  // namespace dsp
