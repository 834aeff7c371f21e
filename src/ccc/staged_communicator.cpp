#include "ccc/staged_communicator.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <numeric>
#include <vector>

#include "ccc/detail/common.hpp"
#include "core/error.hpp"

namespace dsp {
namespace {

class StagedCommunicator final : public Communicator {
 public:
  StagedCommunicator(std::unique_ptr<Communicator> host, std::unique_ptr<DeviceStaging> staging)
      : host_(std::move(host)), st_(std::move(staging)) {}

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string backend() const override { return host_->backend() + "-staged"; }

  std::vector<int64_t> exchange_counts(const std::vector<int64_t>& send_counts,
                                       const OpOptions& o) override {
    return host_->exchange_counts(send_counts, o);
  }
  void all_to_all_v(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                    const std::vector<int64_t>& recv_counts, DType dtype,
                    const OpOptions& o) override {
    if (o.host_buffers) return host_->all_to_all_v(send, send_counts, recv, recv_counts, dtype, o);
    const size_t elem = dtype_size(dtype);
    const size_t sb = bytes(detail::check_counts(send_counts, size(), "all_to_all_v",
                                                 "send_counts"), elem);
    const size_t rb = bytes(detail::check_counts(recv_counts, size(), "all_to_all_v",
                                                 "recv_counts"), elem);
    void* hs = st_->host(0, sb);
    void* hr = st_->host(1, rb);
    if (sb) st_->to_host(hs, send, sb);
    host_->all_to_all_v(hs, send_counts, hr, recv_counts, dtype, o);
    if (rb) st_->to_device(recv, hr, rb);
  }
  void all_reduce(void* buf, int64_t count, DType dtype, ReduceOp op,
                  const OpOptions& o) override {
    if (o.host_buffers) return host_->all_reduce(buf, count, dtype, op, o);
    detail::check_count(count, "all_reduce");
    const size_t n = bytes(count, dtype_size(dtype));
    void* h = st_->host(0, n);
    if (n) st_->to_host(h, buf, n);
    host_->all_reduce(h, count, dtype, op, o);
    if (n) st_->to_device(buf, h, n);
  }
  void broadcast(void* buf, int64_t count, DType dtype, int root, const OpOptions& o) override {
    if (o.host_buffers) return host_->broadcast(buf, count, dtype, root, o);
    detail::check_count(count, "broadcast");
    detail::check_root(root, size(), "broadcast");
    const size_t n = bytes(count, dtype_size(dtype));
    void* h = st_->host(0, n);
    if (n && rank() == root) st_->to_host(h, buf, n);
    host_->broadcast(h, count, dtype, root, o);
    if (n && rank() != root) st_->to_device(buf, h, n);
  }
  void all_gather(const void* send, void* recv, int64_t count, DType dtype,
                  const OpOptions& o) override {
    if (o.host_buffers) return host_->all_gather(send, recv, count, dtype, o);
    detail::check_count(count, "all_gather");
    const size_t n = bytes(count, dtype_size(dtype));
    void* hs = st_->host(0, n);
    void* hr = st_->host(1, n * static_cast<size_t>(size()));
    if (n) st_->to_host(hs, send, n);
    host_->all_gather(hs, hr, count, dtype, o);
    if (n) st_->to_device(recv, hr, n * static_cast<size_t>(size()));
  }
  void barrier(const OpOptions& o) override { host_->barrier(o); }

  CommCounters counters() const override { return host_->counters(); }
  void reset_counters() override { host_->reset_counters(); }
  MemorySpace memory_space() const override { return MemorySpace::kDevice; }
  bool completes_on_return() const override { return host_->completes_on_return(); }
  void synchronize(const OpOptions& o) override { host_->synchronize(o); }
  CommExecutor* executor() override { return host_->executor(); }
  [[noreturn]] void abort_job(const std::string& message) override {
    host_->abort_job(message);
    std::terminate();  // not reached: abort_job never returns (tells the compiler so)
  }

 private:
  static size_t bytes(int64_t count, size_t elem) { return static_cast<size_t>(count) * elem; }

  std::unique_ptr<Communicator> host_;
  std::unique_ptr<DeviceStaging> st_;
};

class HostStaging final : public DeviceStaging {
 public:
  explicit HostStaging(HostAlloc alloc) : alloc_(std::move(alloc)) {
    if (!alloc_) {
      alloc_ = [](size_t bytes) {
        return std::shared_ptr<void>(std::aligned_alloc(kPage, (bytes + kPage - 1) / kPage * kPage),
                                     std::free);
      };
    }
  }
  void* host(int which, size_t bytes) override { return area_[which].reserve(bytes, alloc_); }
  void to_host(void* host, const void* device, size_t bytes) override {
    std::memcpy(host, device, bytes);
  }
  void to_device(void* device, const void* host, size_t bytes) override {
    std::memcpy(device, host, bytes);
  }

 private:
  static constexpr size_t kPage = 4096;
  HostAlloc alloc_;
  StagingArea area_[2];
};

}  // namespace

void* StagingArea::reserve(size_t bytes, const HostAlloc& alloc) {
  if (mem_ && bytes <= cap_) return mem_.get();
  const size_t cap = std::max({bytes, cap_ + cap_ / 2, size_t{4096}});
  mem_.reset();
  cap_ = 0;
  mem_ = alloc(cap);
  DSP_CHECK(mem_ != nullptr, "staging: cannot allocate {} bytes of host memory", cap);
  cap_ = cap;
  return mem_.get();
}

std::unique_ptr<Communicator> make_staged_communicator(std::unique_ptr<Communicator> host,
                                                       std::unique_ptr<DeviceStaging> staging) {
  return std::make_unique<StagedCommunicator>(std::move(host), std::move(staging));
}

std::unique_ptr<DeviceStaging> make_host_staging(HostAlloc alloc) {
  return std::make_unique<HostStaging>(std::move(alloc));
}

}  // namespace dsp
