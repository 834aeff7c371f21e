#pragma once
// Executors: the few primitives a device data path is written against, so that one sequence of
// buffers, copies, per-element loops and scans runs on a GPU (CudaExec, core/cuda/exec.cuh, in
// the kernels of the CUDA build) and on the host (HostExec, here) in every CPU test.
//
// An executor E provides:
//   E::Buffer        growth-only storage in E's memory: void* reserve(bytes) (contents are not kept
//                    when it grows), data(), capacity(); made by buffer(): it grows and is freed in
//                    the order of E's stream (no wait for the device), and each growth is counted
//                    in traffic().allocations. It may outlive E (lent to a batch)
//   E::Registration  keeps a host range readable by E's loops (map_host), released on destruction
//   to_device(d, h, bytes), to_host(h, d, bytes), copy(d, s, bytes), zero(d, bytes): the host
//                    bytes of an upload may be reused on return (CudaExec stages them, pinned)
//   for_each(n, f)   calls f(i) (a DSP_HOST_DEVICE functor) for every i in [0, n): in no
//                    particular order, possibly concurrently, so f must not depend on either
//   for_each_block(blocks, threads, shared_bytes, f)  calls f(b, t, shared) for every thread t in
//                    [0, threads) of every block b in [0, blocks): blocks in no particular order,
//                    a block's threads possibly concurrently; `shared` is the block's scratch of
//                    shared_bytes (8-byte aligned; contents undefined on entry), shared by its
//                    threads only. A thread must only use its own part of it (there is no barrier)
//   exclusive_scan(in, out, n)  out[i] = in[0] + ... + in[i - 1] (int64), out[0] = 0
//   inclusive_scan(in, out, n)  out[i] = in[0] + ... + in[i]
//   sort_pairs_descending(keys, vals_in, vals_out, n, key_bits)  vals_out = vals_in ordered by
//                    descending key (keys in [0, 2^key_bits)), stable: equal keys keep their order
//   fence()          a new ReleaseFence (core/release_fence.hpp) for an array E lends out
//   wait(f)          when f was recorded: E's stream waits for that point (device-side, no host
//                    wait; counted in traffic().stream_waits) and f is cleared; else nothing
//   map_host(p, bytes, read_only, reg)  a pointer E's loops can read the host range through
//   sync()           returns once everything issued so far has completed (host reads may follow)
//   capture_begin()  what is issued until capture_end() is recorded instead of run: copies, zeros,
//                    loops, scans and sorts, their arguments taken by value (as a CUDA Graph's
//                    nodes take theirs: what a replay reads is whatever memory holds then). A
//                    read, an upload, a sync, a wait or a buffer growth inside a capture is an
//                    error (the caller grows its buffers by a direct run of the same sequence)
//   capture_end()    the recorded sequence, an E::Graph (movable; valid while the memory it
//                    names is)
//   launch(g)        issues g's sequence, in order with the rest (traffic().graph_launches)
//   scratch_moves()  how often the executor's own working memory (its scans' and sorts') has moved:
//                    a capture that used it is valid while this is unchanged
//   traffic()        the blocking syncs, device-to-host copies and buffer growths so far
//                    (HostTraffic)
//   E::read(h, d, bytes)  static: copies E memory to the host, synchronously, from any thread
//                    (for arrays handed out to other threads: no stream of an E instance)
// Copies and loops are issued in order: each sees the effects of those before it.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/host_traffic.hpp"
#include "core/release_fence.hpp"

namespace dsp {

class HostExec {
  struct HostFence final : ReleaseFence {
    void record_on(void* /*stream*/) override {}
  };

 public:
  class Buffer {
   public:
    Buffer() = default;  // counted nowhere (host code that has no executor)
    explicit Buffer(std::shared_ptr<int64_t> growths) : growths_(std::move(growths)) {}
    // Grows by at least half (as DeviceBuffer does), dropping the contents: sizes that creep up
    // batch after batch settle after a few growths.
    void* reserve(size_t bytes) {
      const size_t words = (bytes + 7) / 8;
      if (words > mem_.size()) {
        if (growths_) *growths_ += 1;
        const size_t grown = std::max(words, mem_.size() + mem_.size() / 2);
        std::vector<uint64_t>().swap(mem_);
        mem_.resize(grown);
      }
      return mem_.data();
    }
    void* data() const { return const_cast<uint64_t*>(mem_.data()); }
    size_t capacity() const { return mem_.size() * sizeof(uint64_t); }

   private:
    std::vector<uint64_t> mem_;         // 8-byte aligned
    std::shared_ptr<int64_t> growths_;  // the executor's count, or null
  };
  struct Registration {};
  class Graph {
   public:
    size_t size() const { return ops_.size(); }

   private:
    friend class HostExec;
    std::vector<std::function<void()>> ops_;
  };

  Buffer buffer() const { return Buffer(growths_); }

  void to_device(void* d, const void* h, size_t bytes) {
    no_capture("an upload");
    move_bytes(d, h, bytes);
  }
  void to_host(void* h, const void* d, size_t bytes) {
    no_capture("a read");
    traffic_.add_read(bytes);
    move_bytes(h, d, bytes);
  }
  void copy(void* d, const void* s, size_t bytes) {
    issue([=] { move_bytes(d, s, bytes); });
  }
  void zero(void* d, size_t bytes) {
    issue([=] {
      if (bytes) std::memset(d, 0, bytes);
    });
  }
  template <class F>
  void for_each(int64_t n, const F& f) {
    issue([n, f] { each(n, f); });
  }
  template <class F>
  void for_each_block(int64_t blocks, int threads, size_t shared_bytes, const F& f) {
    issue([=] { each_block(blocks, threads, shared_bytes, f); });
  }
  void exclusive_scan(const int64_t* in, int64_t* out, int64_t n) {
    issue([=] {
      int64_t acc = 0;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t x = in[i];
        out[i] = acc;
        acc += x;
      }
    });
  }
  void inclusive_scan(const int64_t* in, int64_t* out, int64_t n) {
    issue([=] {
      int64_t acc = 0;
      for (int64_t i = 0; i < n; ++i) out[i] = acc += in[i];
    });
  }
  void sort_pairs_descending(const int64_t* keys, const int64_t* vals_in, int64_t* vals_out,
                             int64_t n, int /*key_bits*/) {
    issue([=] {
      std::vector<int64_t> at(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) at[i] = i;
      std::stable_sort(at.begin(), at.end(),
                       [keys](int64_t a, int64_t b) { return keys[a] > keys[b]; });
      for (int64_t i = 0; i < n; ++i) vals_out[i] = vals_in[at[i]];
    });
  }
  std::shared_ptr<ReleaseFence> fence() const { return std::make_shared<HostFence>(); }
  void wait(ReleaseFence& f) {  // host work is issued in order: the point has passed
    if (!f.recorded()) return;
    no_capture("a fence wait");
    traffic_.stream_waits += 1;
    f.clear();
  }
  const void* map_host(const void* p, size_t /*bytes*/, bool /*read_only*/, Registration&) {
    return p;
  }
  void sync() {
    no_capture("a sync");
    traffic_.syncs += 1;
  }
  void capture_begin() {
    DSP_CHECK(!capture_, "executor: a capture inside a capture");
    capture_ = std::make_unique<Graph>();
    capture_growths_ = *growths_;
  }
  Graph capture_end() {
    DSP_CHECK(capture_ != nullptr, "executor: capture_end without capture_begin");
    Graph g = std::move(*capture_);
    capture_.reset();
    DSP_CHECK(*growths_ == capture_growths_, "executor: a buffer grew inside a capture");
    return g;
  }
  void launch(const Graph& g) {
    no_capture("a graph launch");
    traffic_.graph_launches += 1;
    for (const auto& op : g.ops_) op();
  }
  int64_t scratch_moves() const { return 0; }  // host scans and sorts use none
  HostTraffic traffic() const {
    HostTraffic t = traffic_;
    t.allocations = *growths_;
    return t;
  }
  static void read(void* h, const void* d, size_t bytes) {
    if (bytes) std::memcpy(h, d, bytes);
  }

 private:
  // Runs op now, or records it inside a capture.
  template <class Op>
  void issue(Op&& op) {
    if (capture_) {
      capture_->ops_.emplace_back(std::forward<Op>(op));
    } else {
      op();
    }
  }
  void no_capture(const char* what) const {
    DSP_CHECK(!capture_, "executor: {} inside a capture", what);
  }
  static void move_bytes(void* d, const void* s, size_t bytes) {
    if (bytes) std::memmove(d, s, bytes);
  }
  // A scrambled order (back to front, neighbours swapped): a device gives no order, so the host
  // emulation must not give the natural one either, or order-dependent loops would pass here.
  template <class F>
  static void each(int64_t n, const F& f) {
    for (int64_t k = n - 1; k >= 0; --k) {
      const int64_t i = (k ^ 1) < n ? (k ^ 1) : k;
      f(i);
    }
  }
  // Blocks and threads scrambled as in each; the scratch is refilled with garbage for every
  // block, as a GPU's shared memory holds whatever the previous block left there.
  template <class F>
  static void each_block(int64_t blocks, int threads, size_t shared_bytes, const F& f) {
    std::vector<uint64_t> shared((shared_bytes + 7) / 8 + 1);
    for (int64_t k = blocks - 1; k >= 0; --k) {
      const int64_t b = (k ^ 1) < blocks ? (k ^ 1) : k;
      std::fill(shared.begin(), shared.end(), 0xA5A5A5A5A5A5A5A5ULL ^ static_cast<uint64_t>(b));
      for (int j = threads - 1; j >= 0; --j) f(b, (j ^ 1) < threads ? (j ^ 1) : j, shared.data());
    }
  }

  HostTraffic traffic_;
  std::unique_ptr<Graph> capture_;  // what is being recorded, or null
  int64_t capture_growths_ = 0;
  // Growths of the buffers made by buffer(), which may outlive the executor. One thread grows an
  // executor's buffers (the thread issuing its work), as one thread issues a stream's.
  std::shared_ptr<int64_t> growths_ = std::make_shared<int64_t>(0);
};

}  // namespace dsp
