#pragma once
// A device-space communicator over a host one: device buffers cross through host staging memory
// (pinned on a GPU) around each op of the host communicator. It is the MPI transport of GPU ranks
// that share a device (NCCL refuses two ranks on one GPU, and the lent GPU machine has one), and
// what CPU tests run the device-space protocols over, with "device" memory being host memory.
//
// Semantics are those of the host communicator (ops complete on return, its executor, its
// timeouts and its abort), with buffers in device memory (memory_space() is kDevice) unless an op
// says they are host memory (OpOptions::host_buffers: passed straight to the host communicator).
// Byte counters are the host communicator's: the payload a rank hands each peer is the same.
#include <cstddef>
#include <functional>
#include <memory>

#include "ccc/communicator.hpp"

namespace dsp {

// Host staging for one device's buffers. Not thread-safe: one per communicator.
class DeviceStaging {
 public:
  virtual ~DeviceStaging() = default;
  // Growth-only host memory: buffer `which` (0: outgoing, 1: incoming) of at least `bytes`.
  virtual void* host(int which, size_t bytes) = 0;
  // Copies complete on return.
  virtual void to_host(void* host, const void* device, size_t bytes) = 0;
  virtual void to_device(void* device, const void* host, size_t bytes) = 0;
};

// Where staging memory comes from: page-aligned host memory of at least `bytes`, released with the
// pointer (pipeline/cores.hpp's near_memory: on the NUMA nodes nearest the device). Empty: the
// staging's own allocation.
using HostAlloc = std::function<std::shared_ptr<void>(size_t bytes)>;

// Growth-only staging memory from an allocator: grows by half at least, contents not kept.
class StagingArea {
 public:
  void* reserve(size_t bytes, const HostAlloc& alloc);

 private:
  std::shared_ptr<void> mem_;
  size_t cap_ = 0;
};

std::unique_ptr<Communicator> make_staged_communicator(std::unique_ptr<Communicator> host,
                                                       std::unique_ptr<DeviceStaging> staging);
// Staging where "device" memory is host memory (the copies are memcpy): CPU tests, and the
// emulated device, whose buffers then come from `alloc` as a GPU's pinned ones would.
std::unique_ptr<DeviceStaging> make_host_staging(HostAlloc alloc = {});

}  // namespace dsp
