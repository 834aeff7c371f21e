#pragma once
// Pinned host staging for the staged communicator (ccc/staged_communicator.hpp) on a CUDA device:
// the MPI transport of GPU ranks that share a device. CUDA build only (dsp::ccc_nccl).
#include <memory>

#include "ccc/staged_communicator.hpp"

namespace dsp {

// Growth-only pinned buffers: `alloc`'s memory (pipeline/cores.hpp's near_memory: the NUMA nodes
// nearest the GPU) page-locked with cudaHostRegister, or cudaHostAlloc's when `alloc` is empty;
// copies are cudaMemcpy on `device` (the legacy default stream: they wait for work LibTorch queued
// there, and complete on return).
std::unique_ptr<DeviceStaging> make_cuda_staging(int device, HostAlloc alloc = {});

}  // namespace dsp
