#include "pipeline/backends.hpp"

#include "ccc/staged_communicator.hpp"
#include "core/error.hpp"
#ifdef DSP_HAVE_CUDA
#include "ccc/cuda/nccl_communicator.hpp"
#include "ccc/cuda/staging.hpp"
#include "core/cuda/check.hpp"
#include "core/cuda/memory.hpp"
#include "csp/cuda/sampler_backend.hpp"
#include "layout/cuda/feature_backend.hpp"
#endif

namespace dsp {

Device rank_device(const std::string& spec, int node_rank, int node_size, std::string* transport) {
  Device d = Device::parse(spec);
  const std::string want = *transport;
  DSP_CHECK_ARG(want == "auto" || want == "mpi" || want == "nccl",
                "unknown transport '{}' (auto, mpi, nccl)", want);
  transport->clear();
  DSP_CHECK_ARG(d.is_cuda() || want == "auto",
                "--transport {}: only GPU ranks (--device cuda) choose a transport; a CPU rank's "
                "channels are its communicator's (--backend)",
                want);
  if (!d.is_cuda()) return d;
#ifdef DSP_HAVE_CUDA
  const int gpus = cuda::device_count() - d.index;
  DSP_CHECK_ARG(gpus > 0, "--device {}: no CUDA device {} is visible to this process", spec,
                d.index);
  *transport = want == "auto" ? (node_size <= gpus ? "nccl" : "mpi") : want;
  DSP_CHECK_ARG(*transport == "mpi" || node_size <= gpus,
                "--device {}: {} rank(s) on this node but {} GPU(s) from cuda:{}: NCCL needs one "
                "GPU per rank (--transport mpi lets ranks share a GPU)",
                spec, node_size, gpus, d.index);
  return Device::cuda(d.index + node_rank % gpus);
#else
  (void)node_rank;
  (void)node_size;
  DSP_THROW_T(InvalidArgument, "--device {}: this dsp was built without CUDA (nvcc not found)",
              spec);
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

RankBackends make_backends(const Device& device, const std::string& transport, bool emulate_device,
                           int64_t topology_memory) {
  RankBackends b;
  if (emulate_device) {
    b.sampler = emulated_sampler_backend();
    b.features = make_emulated_feature_backend;
    b.device_channel = staged_channel(make_host_staging);
    return b;
  }
  if (!device.is_cuda()) return b;
#ifdef DSP_HAVE_CUDA
  const int dev = device.index;
  cuda::CudaSamplerOptions co;
  co.device = dev;
  if (topology_memory >= 0) co.index_budget = static_cast<size_t>(topology_memory);
  b.sampler = cuda::cuda_sampler_backend(co);
  b.features = cuda::cuda_feature_backend(dev);
  if (transport == "nccl") {
    b.device_channel = [dev](Communicator& control, const CommOptions& comm) {
      return make_nccl_communicator(control, dev, comm);
    };
  } else {
    b.device_channel = staged_channel([dev] { return make_cuda_staging(dev); });
  }
#else
  (void)transport;
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
