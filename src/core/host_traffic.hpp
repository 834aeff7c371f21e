#pragma once
// What a device data path costs the host, counted by its executor (core/host_exec.hpp,
// core/cuda/exec.cuh) as it issues the work: every blocking wait for the device, every
// device-to-host copy, and every growth of the executor's buffers (an allocation: stream-ordered
// on a GPU, so it waits for nothing, but a batch once sizes settle should make none). The emulated
// device path counts exactly what the CUDA one issues, so CPU tests pin these figures
// (tests/csp/test_host_traffic.cpp) and `dsp bench sample|pipeline
// --emulate-device` prints them.
#include <cstddef>
#include <cstdint>

namespace dsp {

struct HostTraffic {
  int64_t syncs = 0;        // blocking waits for the device's work (Exec::sync)
  int64_t reads = 0;        // device-to-host copies (Exec::to_host)
  int64_t read_bytes = 0;   // their bytes
  int64_t allocations = 0;  // growths of the executor's buffers (E::Buffer::reserve)
  // Device-side waits for a consumer's stream before reusing a lent array (Exec::wait on a
  // recorded ReleaseFence, core/release_fence.hpp): ordering instead of a host wait.
  int64_t stream_waits = 0;
  // Replays of a captured sequence (Exec::launch: a CUDA Graph on a GPU): one launch for the
  // kernels, copies and scans a direct run issues one by one.
  int64_t graph_launches = 0;

  void add_read(size_t bytes) {  // a copy of 0 bytes issues nothing
    if (bytes == 0) return;
    reads += 1;
    read_bytes += static_cast<int64_t>(bytes);
  }
  HostTraffic operator-(const HostTraffic& o) const {
    return {syncs - o.syncs,
            reads - o.reads,
            read_bytes - o.read_bytes,
            allocations - o.allocations,
            stream_waits - o.stream_waits,
            graph_launches - o.graph_launches};
  }
};

}  // namespace dsp
