#pragma once
// Shared by the conformance suite (conformance.hpp) and its fault cases (conformance_faults.hpp),
// which also run in probes that do not link gtest. Device buffers: cuda/test_nccl.cpp.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

namespace dsp::test {

// Buffers in the communicator's memory space, filled from and read back to host memory.
class CommBuffers {
 public:
  virtual ~CommBuffers() = default;
  virtual void* alloc(size_t bytes) = 0;  // lives until reset()
  virtual void put(void* dst, const void* host, size_t bytes) = 0;
  virtual void get(void* host, const void* src, size_t bytes) = 0;
  virtual void reset() = 0;
};

class HostBuffers : public CommBuffers {
 public:
  void* alloc(size_t bytes) override {
    blocks_.emplace_back(std::max<size_t>(bytes, 8));
    return blocks_.back().data();
  }
  void put(void* dst, const void* host, size_t bytes) override {
    if (bytes) std::memcpy(dst, host, bytes);
  }
  void get(void* host, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(host, src, bytes);
  }
  void reset() override { blocks_.clear(); }

 private:
  std::vector<std::vector<unsigned char>> blocks_;
};

}  // namespace dsp::test
