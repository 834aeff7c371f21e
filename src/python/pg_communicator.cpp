#include "python/pg_communicator.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>

#include "ccc/communicator.hpp"
#include "ccc/detail/common.hpp"
#include "core/error.hpp"

namespace py = pybind11;

namespace dsp::pyext {
namespace {

using std::chrono::milliseconds;

// How long abort_job waits for the GIL (to write the store key) before it exits regardless.
constexpr auto kAbortGrace = std::chrono::seconds(5);
// How long an op waits for its work at a time (seconds) before it reads the store's abort key
// and its timeout; under AwakeTimer's 1 s stall, so waiting counts as awake.
constexpr double kWaitSlice = 0.5;

py::object* g_group = nullptr;  // never freed: communicators may outlive the module's statics

// A Python object released with the GIL held, whatever thread drops it.
class Held {
 public:
  Held() = default;
  explicit Held(py::object o) : o_(std::move(o)) {}
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;
  Held& operator=(Held&& other) noexcept {  // with the GIL held
    o_ = std::move(other.o_);
    return *this;
  }
  ~Held() {
    if (!o_ || !Py_IsInitialized() || _Py_IsFinalizing()) {
      (void)o_.release();  // the interpreter is gone: leak rather than touch it
      return;
    }
    py::gil_scoped_acquire gil;
    o_ = py::object();
  }
  const py::object& get() const { return o_; }

 private:
  py::object o_;
};

// A numpy uint8 array over `bytes` of caller memory (no copy; the caller keeps it alive).
// The base of the views: an object that owns nothing (never freed: a static py::object would be
// released after the interpreter).
py::handle no_owner() {
  static PyObject* base = PyCapsule_New(reinterpret_cast<void*>(&no_owner), nullptr, nullptr);
  return base;
}

py::array bytes_view(const void* p, int64_t bytes) {
  return py::array(py::dtype("uint8"), {bytes}, {1}, const_cast<void*>(p), no_owner());
}

py::array typed_view(void* p, int64_t count, DType dtype) {
  const char* name = dtype == DType::kFloat32   ? "float32"
                     : dtype == DType::kFloat64 ? "float64"
                     : dtype == DType::kInt32   ? "int32"
                                                : "int64";
  return py::array(py::dtype(name), {count}, {static_cast<py::ssize_t>(dtype_size(dtype))}, p,
                   no_owner());
}

std::vector<int64_t> scaled(const std::vector<int64_t>& counts, size_t elem) {
  std::vector<int64_t> out(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) out[i] = counts[i] * static_cast<int64_t>(elem);
  return out;
}

class PgCommunicator final : public Communicator {
 public:
  PgCommunicator(py::object group, py::object channel, const CommOptions& opts)
      : timeout_(detail::default_timeout(opts)),
        rank_(group.attr("rank").cast<int>()),
        size_(group.attr("size").cast<int>()),
        book_(size_),
        group_(std::move(group)),
        channel_(std::move(channel)) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return kTorchBackend; }

  std::vector<int64_t> exchange_counts(const std::vector<int64_t>& send_counts,
                                       const OpOptions& o) override {
    detail::check_counts(send_counts, size_, "exchange_counts", "send_counts");
    std::vector<int64_t> recv(size_);
    const std::vector<int64_t> ones(size_, 1);
    run("exchange_counts", o, [&] {
      return channel_.get().attr("all_to_all")(
          typed_view(recv.data(), size_, DType::kInt64),
          typed_view(const_cast<int64_t*>(send_counts.data()), size_, DType::kInt64), ones, ones);
    });
    book_.add_symmetric(sizeof(int64_t));
    return recv;
  }

  void all_to_all_v(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                    const std::vector<int64_t>& recv_counts, DType dtype,
                    const OpOptions& o) override {
    const int64_t ns = detail::check_counts(send_counts, size_, "all_to_all_v", "send_counts");
    const int64_t nr = detail::check_counts(recv_counts, size_, "all_to_all_v", "recv_counts");
    const size_t elem = dtype_size(dtype);
    run("all_to_all_v", o, [&] {
      return channel_.get().attr("all_to_all")(bytes_view(recv, nr * static_cast<int64_t>(elem)),
                                               bytes_view(send, ns * static_cast<int64_t>(elem)),
                                               scaled(recv_counts, elem),
                                               scaled(send_counts, elem));
    });
    book_.add_all_to_all(send_counts, recv_counts, elem);
  }

  void all_reduce(void* buf, int64_t count, DType dtype, ReduceOp op, const OpOptions& o) override {
    detail::check_count(count, "all_reduce");
    detail::check_reduce_dtype(dtype, kTorchBackend);
    run("all_reduce", o, [&] {
      return channel_.get().attr("all_reduce")(typed_view(buf, count, dtype), reduce_op_name(op));
    });
    book_.add_symmetric(static_cast<uint64_t>(count) * dtype_size(dtype));
  }

  void broadcast(void* buf, int64_t count, DType dtype, int root, const OpOptions& o) override {
    detail::check_count(count, "broadcast");
    detail::check_root(root, size_, "broadcast");
    const int64_t bytes = count * static_cast<int64_t>(dtype_size(dtype));
    run("broadcast", o,
        [&] { return channel_.get().attr("broadcast")(bytes_view(buf, bytes), root); });
    book_.add_broadcast(static_cast<uint64_t>(bytes), root, rank_);
  }

  void all_gather(const void* send, void* recv, int64_t count, DType dtype,
                  const OpOptions& o) override {
    detail::check_count(count, "all_gather");
    const int64_t bytes = count * static_cast<int64_t>(dtype_size(dtype));
    run("all_gather", o, [&] {
      return channel_.get().attr("all_gather")(bytes_view(recv, bytes * size_),
                                               bytes_view(send, bytes));
    });
    book_.add_symmetric(static_cast<uint64_t>(bytes));
  }

  void barrier(const OpOptions& o) override {
    run("barrier", o, [&] { return channel_.get().attr("barrier")(); });
    book_.add_empty();
  }

  CommCounters counters() const override { return book_.get(); }
  void reset_counters() override { book_.reset(); }

  [[noreturn]] void abort_job(const std::string& message) override { end_job(message, true); }

 private:
  // Launches an op (launch returns its torch Work, with the GIL held) and waits for it with the
  // GIL released.
  void run(const char* op, const OpOptions& o, const std::function<py::object()>& launch);
  // The message under the store's abort key, if a rank has set it ("" otherwise).
  std::string peer_abort();
  [[noreturn]] void end_job(const std::string& message, bool tell_peers);

  milliseconds timeout_;
  int rank_;
  int size_;
  detail::CounterBook book_;
  Held group_;    // dsp._pg.Group: rank, size, the store's abort key
  Held channel_;  // dsp._pg.Channel: this communicator's gloo group
};

// Waits up to `slice` for `work` (torch's Work.wait releases the GIL while it blocks): true once
// it has completed, false while it is pending; a failed op leaves its message in *error.
bool wait_slice(const py::object& work, double slice, std::string* error) {
  try {
    work.attr("wait")(slice);  // raises "timed out" while pending (the op goes on)
    return true;
  } catch (const py::error_already_set&) {
    if (!work.attr("is_completed")().cast<bool>()) return false;
  }
  try {
    work.attr("wait")();  // completed meanwhile, or failed: its own outcome
  } catch (const py::error_already_set& e) {
    *error = e.what();
  }
  return true;
}

void PgCommunicator::run(const char* op, const OpOptions& o,
                         const std::function<py::object()>& launch) {
  const milliseconds limit = detail::op_timeout(o, timeout_);
  std::string error;
  {
    py::gil_scoped_acquire gil;
    Held work;
    try {
      work = Held(launch());
    } catch (const std::exception& e) {  // a Python error, or an argument pybind cannot convert
      error = e.what();
    }
    detail::AwakeTimer timer;
    while (error.empty() && !wait_slice(work.get(), kWaitSlice, &error)) {
      const std::string peer = peer_abort();
      if (!peer.empty()) end_job(peer, false);
      if (limit.count() > 0 && timer.elapsed() > limit) {
        const double s = static_cast<double>(limit.count()) / 1000.0;
        end_job(fmt::format("{} '{}' timed out after {:.1f} s on rank {} (backend {}: a peer did "
                            "not join it)",
                            op, o.label, s, rank_, kTorchBackend),
                true);
      }
    }
  }
  if (error.empty()) return;
  const std::string peer = peer_abort();
  if (!peer.empty()) end_job(peer, false);
  end_job(fmt::format("{} '{}' failed on rank {} (backend {}): {}", op, o.label, rank_,
                      kTorchBackend, error),
          true);
}

std::string PgCommunicator::peer_abort() {
  py::gil_scoped_acquire gil;
  try {
    py::object m = group_.get().attr("abort_message")();
    return m.is_none() ? std::string() : m.cast<std::string>();
  } catch (const py::error_already_set& e) {
    return fmt::format("the process group's store cannot be read (a rank ended?): {}", e.what());
  }
}

void PgCommunicator::end_job(const std::string& message, bool tell_peers) {
  static std::atomic<bool> printed{false};
  if (!printed.exchange(true)) {
    std::fflush(stdout);
    std::fprintf(stderr, "dsp: %s\n", message.c_str());
    std::fflush(stderr);
  }
  // Writing the key needs the GIL, which a stuck thread may hold: exit regardless after a while.
  std::thread([] {
    std::this_thread::sleep_for(kAbortGrace);
    std::_Exit(1);
  }).detach();
  if (tell_peers && Py_IsInitialized() && !_Py_IsFinalizing()) {
    py::gil_scoped_acquire gil;
    try {
      group_.get().attr("set_abort")(message);
    } catch (const py::error_already_set&) {
      // The store is gone too: peers see their ops fail instead.
    }
  }
  std::_Exit(1);
}

}  // namespace

void set_torch_group(py::object group) {
  if (!g_group) g_group = new py::object();
  *g_group = std::move(group);
}

void register_torch_backend() {
  register_communicator_backend(kTorchBackend, [](const CommOptions& opts) {
    py::gil_scoped_acquire gil;
    DSP_CHECK_ARG(g_group && !g_group->is_none(),
                  "backend '{}' needs a torch.distributed process group: dsp.Loader(..., "
                  "process_group=...) after torch.distributed.init_process_group",
                  kTorchBackend);
    py::object channel = g_group->attr("channel")();
    return std::unique_ptr<Communicator>(
        std::make_unique<PgCommunicator>(*g_group, std::move(channel), opts));
  });
}

}  // namespace dsp::pyext
