// Staging memory on the NUMA nodes nearest a rank's device (pipeline/cores.hpp: near_memory), as
// the staged transport's buffers get it (ccc/staged_communicator.hpp: HostAlloc), and a thread's
// memory bound to those nodes for a while (ThreadMemoryBinding: the Loader's pinned batches).
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

// A thread binding sends what the thread touches first to the nodes it names, and the thread's
// previous policy (also an outer binding's) comes back when it ends.
TEST(ThreadMemoryBinding, TouchedPagesLieOnItsNodesAndThePolicyComesBack) {
  const NearMemory near = near_memory(Device::cpu());
  const std::vector<int> before = thread_memory_nodes();  // empty: not bound (the default)
  {
    ThreadMemoryBinding none({});
    EXPECT_FALSE(none.bound());
    EXPECT_EQ(thread_memory_nodes(), before);
  }
  {
    ThreadMemoryBinding outer(near.nodes);
    if (!outer.bound()) GTEST_SKIP() << "the system refuses to bind this thread's memory";
    EXPECT_EQ(thread_memory_nodes(), near.nodes);
    const std::vector<int> first{near.nodes.front()};
    {
      ThreadMemoryBinding inner(first);
      ASSERT_TRUE(inner.bound());
      EXPECT_EQ(thread_memory_nodes(), first);
      const size_t bytes = size_t{8} << 20;
      std::vector<char> touched(bytes, 0x5a);
      const std::vector<int> on = memory_nodes(touched.data(), bytes);
      if (!on.empty()) {
        EXPECT_EQ(on, first);
      }
    }
    EXPECT_EQ(thread_memory_nodes(), near.nodes);
  }
  EXPECT_EQ(thread_memory_nodes(), before);
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
