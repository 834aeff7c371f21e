// Staging memory on the NUMA nodes nearest a rank's device (pipeline/cores.hpp: near_memory), as
// the staged transport's buffers get it (ccc/staged_communicator.hpp: HostAlloc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "ccc/communicator.hpp"
#include "ccc/staged_communicator.hpp"
#include "core/device.hpp"
#include "pipeline/cores.hpp"

namespace dsp {
namespace {

// The memory is page-aligned, usable, and where the system reports its pages, on the nodes the
// device is nearest (here: this process's cpus' nodes).
TEST(NearMemory, PagesLieOnTheNodesNearestTheDevice) {
  const NearMemory near = near_memory(Device::cpu());
  ASSERT_FALSE(near.nodes.empty());
  const size_t bytes = size_t{8} << 20;
  std::shared_ptr<void> mem = near.alloc(bytes);
  ASSERT_NE(mem, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(mem.get()) % 4096, 0u);
  std::memset(mem.get(), 0x5a, bytes);  // touched: every page placed
  const std::vector<int> on = memory_nodes(mem.get(), bytes);
  if (on.empty()) GTEST_SKIP() << "the system does not report where pages lie";
  for (int n : on) {
    EXPECT_TRUE(std::find(near.nodes.begin(), near.nodes.end(), n) != near.nodes.end())
        << "a page on node " << n;
  }
}

// The staged channel's buffers come from the allocator it is given, and an op through them gives
// what the host communicator gives.
TEST(NearMemory, StagedChannelBuffersComeFromItsAllocator) {
  const NearMemory near = near_memory(Device::cpu());
  int64_t calls = 0;
  HostAlloc counted = [&](size_t bytes) {
    ++calls;
    return near.alloc(bytes);
  };
  auto comm = make_staged_communicator(make_communicator("self"), make_host_staging(counted));
  std::vector<float> x(1000), expect(1000);
  std::iota(x.begin(), x.end(), 1.0f);
  expect = x;  // one rank: the sum is the rank's own
  comm->all_reduce(x.data(), 1000, DType::kFloat32, ReduceOp::kSum);
  EXPECT_EQ(x, expect);
  EXPECT_GT(calls, 0);
}

}  // namespace
}  // namespace dsp
