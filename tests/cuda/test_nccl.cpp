// The NCCL communicator through the conformance suite (ccc/conformance.hpp) with device buffers,
// bootstrapped over MPI. Run by scripts/gpu/check.sh at one rank (NCCL refuses two ranks on one
// GPU; the lent machine has one). With --staged: the staged communicator instead (MPI through
// pinned host memory, ccc/cuda/staging.hpp), which 2 ranks on one GPU can run. Without a GPU
// nothing runs: a line says so and the exit code is ctest's skip code.
// With --fault CASE CULPRIT (after --staged, if given): one fault case of the suite
// (conformance_faults.hpp) instead, checked from outside by tests/ccc/faults/expect_fault.sh;
// NCCL needs a GPU per rank (it refuses two ranks on one), so it skips when there are fewer.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "ccc/conformance.hpp"
#include "ccc/conformance_faults.hpp"
#include "ccc/cuda/nccl_communicator.hpp"
#include "ccc/cuda/staging.hpp"
#include "core/cuda/check.hpp"
#include "mpi_test_main.hpp"

namespace dsp::test {
namespace {

class DeviceBuffers : public CommBuffers {
 public:
  ~DeviceBuffers() override { reset(); }
  void* alloc(size_t bytes) override {
    void* p = nullptr;
    DSP_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 8)));
    blocks_.push_back(p);
    return p;
  }
  // cudaMemcpy from pageable host memory may return before its DMA has landed, and the
  // communicator's stream does not wait for the legacy stream (it is non-blocking): wait here, or
  // an op can read the buffer's tail before it is written (seen on an H200: garbage at element
  // 72160 of a large all_to_all_v segment, in one run of three).
  void put(void* dst, const void* host, size_t bytes) override {
    if (!bytes) return;
    DSP_CUDA_CHECK(cudaMemcpy(dst, host, bytes, cudaMemcpyHostToDevice));
    DSP_CUDA_CHECK(cudaDeviceSynchronize());
  }
  void get(void* host, const void* src, size_t bytes) override {
    if (bytes) DSP_CUDA_CHECK(cudaMemcpy(host, src, bytes, cudaMemcpyDeviceToHost));
  }
  void reset() override {
    for (void* p : blocks_) DSP_CUDA_CHECK_NO_THROW(cudaFree(p));
    blocks_.clear();
  }

 private:
  std::vector<void*> blocks_;
};

}  // namespace
}  // namespace dsp::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  dsp::CommOptions opts;
  opts.timeout = std::chrono::seconds(60);
  auto mpi = dsp::make_communicator("mpi", opts);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    // No GPU: run nothing, say so, exit as skipped (ctest and scripts/gpu/check.sh count it so).
    if (mpi->rank() == 0) std::printf("[  SKIPPED ] nccl conformance: no CUDA device visible\n");
    return dsp::test::kSkipExitCode;
  }
  const int device = mpi->rank() % devices;
  DSP_CUDA_CHECK(cudaSetDevice(device));
  const bool staged = argc > 1 && std::string(argv[1]) == "--staged";
  const int fault_arg = staged ? 2 : 1;
  const bool fault = argc == fault_arg + 3 && std::string(argv[fault_arg]) == "--fault";
  if (fault && !staged && devices < mpi->size()) {
    if (mpi->rank() == 0) {
      std::printf("[  SKIPPED ] nccl fault case: %d ranks need %d GPUs, %d visible\n", mpi->size(),
                  mpi->size(), devices);
    }
    return dsp::test::kSkipExitCode;
  }
  std::unique_ptr<dsp::Communicator> comm;
  if (staged) {
    comm = dsp::make_staged_communicator(dsp::make_communicator("mpi", opts),
                                         dsp::make_cuda_staging(device));
  } else {
    comm = dsp::make_nccl_communicator(*mpi, device, opts);
  }
  dsp::test::DeviceBuffers dev;
  if (fault) {
    return dsp::test::run_fault_case(*comm, dev, argv[fault_arg + 1],
                                     std::stoi(argv[fault_arg + 2]));
  }
  dsp::test::conformance_env() = {comm.get(), &dev};
  const int failed = dsp::test::run_tests_on_all_ranks(*mpi);
  dev.reset();
  comm.reset();
  return failed;
}
