#pragma once
// The trainer's traffic with its device, in one counted place (LibTorch inside: trainer.cpp).
//
// Every value the trainer reads from its device to the host, and every wait for the work queued
// on the device, goes through a DeviceIo and is counted (core/host_traffic.hpp's fields: syncs,
// reads and their bytes), on the CPU exactly as on a GPU: the calls sit where the CUDA path
// needs them whatever the device, so CPU tests pin what a GPU step costs the host
// (tests/train/test_trainer.cpp: a step in steady state reads nothing and, at one rank, waits
// for nothing). Uploads of host arrays go through pinned memory and do not wait.
#include <torch/torch.h>

#include "core/host_traffic.hpp"

namespace dsp {

// `host` on `device` without a host wait (DeviceIo::upload): the tensor itself when `device` is
// the CPU.
torch::Tensor upload_to_device(const torch::Tensor& host, const torch::Device& device);

class DeviceIo {
 public:
  explicit DeviceIo(torch::Device device) : device_(device) {}
  // The tensor's values on the host, contiguous: a blocking copy from a GPU (counted whatever
  // the device).
  torch::Tensor read(const torch::Tensor& t);
  // Returns once the work queued on the device's current stream is done (another stream or
  // thread is about to read what LibTorch wrote). Counted whatever the device.
  void wait();
  // A host tensor on the device without waiting for it: staged through pinned memory on a GPU
  // (the source may change or go on return); the tensor itself on the CPU.
  torch::Tensor upload(const torch::Tensor& host) const { return upload_to_device(host, device_); }
  const HostTraffic& traffic() const { return traffic_; }
  const torch::Device& device() const { return device_; }

 private:
  torch::Device device_;
  HostTraffic traffic_;
};

}  // namespace dsp
