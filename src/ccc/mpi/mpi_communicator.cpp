#include "ccc/mpi/mpi_communicator.hpp"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <thread>

#include "ccc/detail/common.hpp"
#include "ccc/executor.hpp"
#include "core/error.hpp"
#include "core/logging.hpp"

namespace dsp {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTagQuery = 101;  // on the control communicator: int64 op number of the asker
constexpr int kTagReply = 102;  // on the control communicator: StatusReply as bytes
constexpr int kTagP2P = 103;    // on the data communicator: pieces of all_to_all_v

std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(buf, static_cast<size_t>(len));
}

// Data communicators use MPI_ERRORS_RETURN, so failures become exceptions naming the call.
#define DSP_MPI_CHECK(call)                                                              \
  do {                                                                                   \
    int _rc = (call);                                                                    \
    if (_rc != MPI_SUCCESS) {                                                            \
      DSP_THROW_T(::dsp::CommError, "mpi: {} failed: {}", #call, mpi_error_string(_rc)); \
    }                                                                                    \
  } while (0)

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::kInt32:
      return MPI_INT32_T;
    case DType::kInt64:
      return MPI_INT64_T;
    case DType::kFloat16:
      return MPI_UINT16_T;  // moved as raw bits, never reduced
    case DType::kFloat32:
      return MPI_FLOAT;
    case DType::kFloat64:
      return MPI_DOUBLE;
    case DType::kUInt8:
      return MPI_UINT8_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return MPI_SUM;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kMin:
      return MPI_MIN;
  }
  return MPI_OP_NULL;
}

// What a rank answers about one communicator; sent as raw bytes (same binary on every rank).
struct StatusReply {
  int64_t seq;    // ops started on this communicator
  int32_t in_op;  // 1 while op #seq has not completed
  int32_t unused;
  char name[32];   // op #seq's name
  char label[64];  // and label
};

void copy_str(char* dst, size_t cap, const std::string& s) {
  size_t n = std::min(cap - 1, s.size());
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

// Set by MpiCommunicator::abort_process; the executor honours it while it waits and while idle, so
// that MPI_Abort is made by the thread that makes every other MPI call.
std::atomic<bool> g_abort_requested{false};

[[noreturn]] void abort_now() {
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

}  // namespace

// Process-wide MPI state: the executor thread that makes every MPI call, and the registry of live
// communicators whose status queries it answers. Created on first use and never destroyed (its
// executor is stopped, and MPI finalized, by an atexit handler), so no static destructor can run
// before a communicator that still needs it.
class MpiRuntime {
 public:
  static MpiRuntime& get();
  CommExecutor& exec() { return *exec_; }
  bool finalized() const { return finalized_; }
  // Executor thread only.
  void add(MpiCommunicator::State* s) { live_.push_back(s); }
  void remove(MpiCommunicator::State* s) { live_.remove(s); }
  void service_all();

 private:
  MpiRuntime();
  void init_mpi();
  void finalize_mpi();

  std::unique_ptr<CommExecutor> exec_;
  std::list<MpiCommunicator::State*> live_;
  bool we_initialized_ = false;
  bool finalized_ = false;
};

struct MpiCommunicator::State {
  explicit State(MpiRuntime* r, int size_hint) : rt(r), book(size_hint) {}
  MpiRuntime* rt;
  MPI_Comm comm = MPI_COMM_NULL;  // collectives and all_to_all_v pieces
  MPI_Comm ctl = MPI_COMM_NULL;   // timeout status queries, never blocked on by collectives
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{0};
  int64_t max_count = INT_MAX;
  detail::CounterBook book;

  // Executor thread only.
  int64_t seq = 0;
  bool in_op = false;
  std::string op_name;
  std::string op_label;
  Clock::time_point op_start;
  Clock::time_point deadline;
  bool has_deadline = false;
  std::chrono::milliseconds op_timeout{0};
  struct PendingReply {
    StatusReply msg;
    MPI_Request req;
  };
  std::list<PendingReply> replies;

  void begin(const char* name, const OpOptions& o) {
    ++seq;
    in_op = true;
    op_name = name;
    op_label = o.label;
    op_start = Clock::now();
    op_timeout = detail::op_timeout(o, timeout);
    has_deadline = op_timeout.count() > 0;
    deadline = op_start + op_timeout;
  }
  void wait(MPI_Request* reqs, int n);
  void service_queries();
  [[noreturn]] void timed_out();
};

MpiRuntime& MpiRuntime::get() {
  static std::mutex mu;
  static MpiRuntime* rt = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (!rt) {
    rt = new MpiRuntime();  // intentionally leaked, see the class comment
    std::atexit([] {
      try {
        MpiRuntime::get().exec_->stop();
      } catch (...) {
      }
    });
  }
  return *rt;
}

MpiRuntime::MpiRuntime() {
  CommExecutor::Hooks hooks;
  hooks.on_start = [this] { init_mpi(); };
  hooks.on_idle = [this] { service_all(); };
  hooks.on_stop = [this] { finalize_mpi(); };
  hooks.idle_period = std::chrono::milliseconds(20);
  exec_ = std::make_unique<CommExecutor>("mpi", std::move(hooks));
}

void MpiRuntime::init_mpi() {
  int inited = 0, fin = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&fin);
  DSP_CHECK_T(CommError, !fin, "mpi: MPI was already finalized; cannot create a communicator");
  if (!inited) {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    DSP_CHECK_T(CommError, rc == MPI_SUCCESS, "mpi: MPI_Init_thread failed: {}",
                mpi_error_string(rc));
    we_initialized_ = true;
    // FUNNELED would do (this thread is the init thread and makes every call), so accept it.
    DSP_CHECK_T(CommError, provided >= MPI_THREAD_FUNNELED,
                "mpi: MPI_Init_thread provided thread level {}, need at least FUNNELED", provided);
    return;
  }
  // The application initialized MPI on some other thread: our executor may call MPI only if the
  // library accepts calls from any one thread at a time.
  int provided = 0, is_main = 0;
  MPI_Query_thread(&provided);
  MPI_Is_thread_main(&is_main);
  DSP_CHECK_T(CommError, provided >= MPI_THREAD_SERIALIZED || is_main,
              "mpi: MPI was initialized with thread level {}; dsp makes its MPI calls from its "
              "communication thread and needs MPI_THREAD_SERIALIZED (or let dsp initialize MPI)",
              provided);
}

void MpiRuntime::finalize_mpi() {
  for (auto* s : live_) {
    for (auto& r : s->replies) MPI_Request_free(&r.req);
    s->replies.clear();
  }
  if (we_initialized_ && !finalized_) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
  }
  finalized_ = true;
}

void MpiRuntime::service_all() {
  if (finalized_) return;
  if (g_abort_requested.load()) abort_now();
  for (auto* s : live_) s->service_queries();
}

void MpiCommunicator::State::service_queries() {
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kTagQuery, ctl, &flag, &st) != MPI_SUCCESS || !flag) break;
    int64_t asker_seq = 0;
    MPI_Recv(&asker_seq, 1, MPI_INT64_T, st.MPI_SOURCE, kTagQuery, ctl, MPI_STATUS_IGNORE);
    replies.emplace_back();
    PendingReply& r = replies.back();
    std::memset(&r.msg, 0, sizeof(r.msg));
    r.msg.seq = seq;
    r.msg.in_op = in_op ? 1 : 0;
    copy_str(r.msg.name, sizeof(r.msg.name), op_name);
    copy_str(r.msg.label, sizeof(r.msg.label), op_label);
    MPI_Isend(&r.msg, sizeof(r.msg), MPI_BYTE, st.MPI_SOURCE, kTagReply, ctl, &r.req);
  }
  for (auto it = replies.begin(); it != replies.end();) {
    int done = 0;
    MPI_Test(&it->req, &done, MPI_STATUS_IGNORE);
    it = done ? replies.erase(it) : std::next(it);
  }
}

void MpiCommunicator::State::wait(MPI_Request* reqs, int n) {
  // Spin first (most ops finish in microseconds), then yield, then nap: ranks oversubscribe cores
  // here, and a spinning waiter steals the CPU from the rank it is waiting for.
  auto last_service = Clock::now();
  for (long it = 0;; ++it) {
    int done = 0;
    DSP_MPI_CHECK(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE));
    if (done) return;
    if (it < 64) continue;
    auto now = Clock::now();
    if (now - last_service > std::chrono::milliseconds(2)) {
      rt->service_all();
      last_service = now;
    }
    if (has_deadline && now > deadline) timed_out();
    if (g_abort_requested.load()) abort_now();
    if (now - op_start < std::chrono::milliseconds(5)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

void MpiCommunicator::State::timed_out() {
  const double waited = std::chrono::duration<double>(Clock::now() - op_start).count();
  const int64_t my_seq = seq;
  std::vector<MPI_Request> queries;
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    queries.emplace_back();
    MPI_Isend(&my_seq, 1, MPI_INT64_T, p, kTagQuery, ctl, &queries.back());
  }
  std::vector<StatusReply> ans(size);
  std::vector<char> got(size, 0);
  int missing = size - 1;
  auto grace = std::min<std::chrono::milliseconds>(std::chrono::seconds(2), op_timeout);
  auto until = Clock::now() + grace;
  while (missing > 0 && Clock::now() < until) {
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, kTagReply, ctl, &flag, &st);
    if (flag) {
      StatusReply r;
      MPI_Recv(&r, sizeof(r), MPI_BYTE, st.MPI_SOURCE, kTagReply, ctl, MPI_STATUS_IGNORE);
      if (!got[st.MPI_SOURCE]) --missing;
      got[st.MPI_SOURCE] = 1;
      ans[st.MPI_SOURCE] = r;
      continue;
    }
    // Peers stuck in this same op time out too and ask us; answering lets them name the culprit.
    rt->service_all();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::string late;
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    std::string why;
    if (!got[p]) {
      why = "no answer";
    } else if (ans[p].seq >= my_seq) {
      continue;  // started this op (or finished it): arrived
    } else if (ans[p].in_op) {
      why = fmt::format("still in op #{} '{}'", ans[p].seq, ans[p].name);
    } else {
      why = fmt::format("idle after op #{}", ans[p].seq);
    }
    late += fmt::format("{}{} ({})", late.empty() ? "" : ", ", p, why);
  }
  if (late.empty()) late = "none found (every rank answered that it had arrived)";
  std::string label = op_label.empty() ? "" : fmt::format(", label '{}'", op_label);
  std::string line = fmt::format(
      "dsp: collective '{}' (op #{}{}) timed out after {:.1f} s on rank {}; ranks that "
      "did not arrive: {}\n",
      op_name, my_seq, label, waited, rank, late);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);  // MPI_Abort does not return; this keeps [[noreturn]] honest if it ever does
}

namespace {

// Runs one op on the executor with its bookkeeping; `body` issues nonblocking MPI and waits.
template <class F>
void run_op(MpiCommunicator::State& st, const char* name, const OpOptions& o, F&& body) {
  MpiRuntime& rt = *st.rt;
  rt.exec().run(name, [&] {
    DSP_CHECK_T(CommError, !rt.finalized(), "mpi: {} after MPI was finalized", name);
    st.begin(name, o);
    try {
      body();
    } catch (...) {
      st.in_op = false;
      throw;
    }
    st.in_op = false;
  });
}

int64_t clamp_piece(int64_t remaining, int64_t max_count) { return std::min(remaining, max_count); }

}  // namespace

MpiCommunicator::MpiCommunicator(const CommOptions& opts) {
  MpiRuntime& rt = MpiRuntime::get();
  auto timeout = detail::default_timeout(opts);
  st_ = rt.exec().run("comm_create", [&] {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    auto s = std::make_unique<State>(&rt, size);
    DSP_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &s->comm));
    DSP_MPI_CHECK(MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN));
    DSP_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &s->ctl));
    DSP_MPI_CHECK(MPI_Comm_set_errhandler(s->ctl, MPI_ERRORS_RETURN));
    MPI_Comm_rank(s->comm, &s->rank);
    MPI_Comm_size(s->comm, &s->size);
    rt.add(s.get());
    return s;
  });
  st_->timeout = timeout;
  set_log_rank(st_->rank, st_->size);
  DSP_DEBUG("ccc", "mpi communicator: rank {} of {}, timeout {} ms", st_->rank, st_->size,
            timeout.count());
}

MpiCommunicator::~MpiCommunicator() {
  if (!st_) return;
  State* s = st_.get();
  try {
    s->rt->exec().run("comm_free", [s] {
      s->rt->remove(s);
      if (s->rt->finalized()) return;
      for (auto& r : s->replies) MPI_Request_free(&r.req);
      s->replies.clear();
      MPI_Comm_free(&s->comm);
      MPI_Comm_free(&s->ctl);
    });
  } catch (const std::exception& e) {
    // The executor is gone (process exit): MPI is finalized, nothing left to free.
    DSP_DEBUG("ccc", "mpi communicator not freed: {}", e.what());
  }
}

int MpiCommunicator::rank() const { return st_->rank; }
int MpiCommunicator::size() const { return st_->size; }
std::chrono::milliseconds MpiCommunicator::timeout() const { return st_->timeout; }
CommExecutor& MpiCommunicator::process_executor() { return MpiRuntime::get().exec(); }
CommCounters MpiCommunicator::counters() const { return st_->book.get(); }
void MpiCommunicator::reset_counters() { st_->book.reset(); }

void MpiCommunicator::abort_process(const std::string& message) {
  static std::atomic<bool> printed{false};
  if (!printed.exchange(true)) {
    std::string line = fmt::format("dsp: {}\n", message);
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  }
  int inited = 0, fin = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&fin);
  if (!inited || fin) std::_Exit(1);
  MpiRuntime& rt = MpiRuntime::get();
  if (rt.exec().on_executor_thread()) abort_now();
  g_abort_requested = true;
  auto until = Clock::now() + std::chrono::seconds(2);
  while (Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  abort_now();  // the executor is stuck outside MPI; MPI_Abort from here is the last resort
}

void MpiCommunicator::set_max_count_for_testing(int64_t n) {
  DSP_CHECK_ARG(n >= 1 && n <= INT_MAX, "max count {} not in [1, INT_MAX]", n);
  st_->max_count = n;
}

std::vector<int64_t> MpiCommunicator::exchange_counts(const std::vector<int64_t>& send_counts,
                                                      const OpOptions& o) {
  State& s = *st_;
  detail::check_counts(send_counts, s.size, "exchange_counts", "send_counts");
  std::vector<int64_t> recv(s.size, 0);
  run_op(s, "exchange_counts", o, [&] {
    MPI_Request req;
    DSP_MPI_CHECK(MPI_Ialltoall(send_counts.data(), 1, MPI_INT64_T, recv.data(), 1, MPI_INT64_T,
                                s.comm, &req));
    s.wait(&req, 1);
  });
  s.book.add_symmetric(sizeof(int64_t));
  return recv;
}

void MpiCommunicator::all_to_all_v(const void* send, const std::vector<int64_t>& send_counts,
                                   void* recv, const std::vector<int64_t>& recv_counts, DType dtype,
                                   const OpOptions& o) {
  State& s = *st_;
  int64_t send_total = detail::check_counts(send_counts, s.size, "all_to_all_v", "send_counts");
  int64_t recv_total = detail::check_counts(recv_counts, s.size, "all_to_all_v", "recv_counts");
  DSP_CHECK_ARG(send || send_total == 0, "all_to_all_v: send is null but {} elements are sent",
                send_total);
  DSP_CHECK_ARG(recv || recv_total == 0, "all_to_all_v: recv is null but {} elements arrive",
                recv_total);
  const size_t elem = dtype_size(dtype);
  const MPI_Datatype type = mpi_type(dtype);
  DSP_CHECK_ARG(send_counts[s.rank] == recv_counts[s.rank],
                "all_to_all_v: rank {} sends {} elements to itself but expects {}", s.rank,
                send_counts[s.rank], recv_counts[s.rank]);
  // Pairwise nonblocking sends and receives rather than MPI_Ialltoallv: OpenMPI's nonblocking
  // alltoallv does the same underneath (measured: same latency here), and this way nothing depends
  // on int counts or displacements. Ialltoallv would need a fallback past INT_MAX elements, and
  // ranks choosing different paths for one op would deadlock. A segment goes in pieces of at most
  // max_count elements; both ends know its length, and MPI's non-overtaking rule (same source,
  // tag and communicator) matches the k-th piece sent with the k-th piece received, also across
  // consecutive ops.
  run_op(s, "all_to_all_v", o, [&] {
    const int P = s.size;
    std::vector<int64_t> soff(P + 1, 0), roff(P + 1, 0);
    for (int p = 0; p < P; ++p) {
      soff[p + 1] = soff[p] + send_counts[p];
      roff[p + 1] = roff[p] + recv_counts[p];
    }
    const char* sp = static_cast<const char*>(send);
    char* rp = static_cast<char*>(recv);
    std::vector<MPI_Request> reqs;
    // Receives first, so that sends find them posted; peers in rotated order (rank+1, rank+2,
    // ...) so that not every rank sends to rank 0 first.
    for (int i = 1; i < P; ++i) {
      const int p = (s.rank + P - i) % P;
      for (int64_t off = 0; off < recv_counts[p];) {
        int64_t n = clamp_piece(recv_counts[p] - off, s.max_count);
        reqs.emplace_back();
        DSP_MPI_CHECK(MPI_Irecv(rp + (roff[p] + off) * elem, static_cast<int>(n), type, p, kTagP2P,
                                s.comm, &reqs.back()));
        off += n;
      }
    }
    for (int i = 1; i < P; ++i) {
      const int p = (s.rank + i) % P;
      for (int64_t off = 0; off < send_counts[p];) {
        int64_t n = clamp_piece(send_counts[p] - off, s.max_count);
        reqs.emplace_back();
        DSP_MPI_CHECK(MPI_Isend(sp + (soff[p] + off) * elem, static_cast<int>(n), type, p, kTagP2P,
                                s.comm, &reqs.back()));
        off += n;
      }
    }
    if (send_counts[s.rank] > 0) {
      std::memmove(rp + roff[s.rank] * elem, sp + soff[s.rank] * elem,
                   static_cast<size_t>(send_counts[s.rank]) * elem);
    }
    s.wait(reqs.data(), static_cast<int>(reqs.size()));
  });
  s.book.add_all_to_all(send_counts, recv_counts, elem);
}

void MpiCommunicator::all_reduce(void* buf, int64_t count, DType dtype, ReduceOp op,
                                 const OpOptions& o) {
  State& s = *st_;
  detail::check_count(count, "all_reduce");
  detail::check_reduce_dtype(dtype, "mpi");
  DSP_CHECK_ARG(buf || count == 0, "all_reduce: buf is null");
  const size_t elem = dtype_size(dtype);
  run_op(s, "all_reduce", o, [&] {
    char* p = static_cast<char*>(buf);
    int64_t off = 0;
    do {  // at least one call, so that count 0 still synchronizes and can time out
      int64_t n = clamp_piece(count - off, s.max_count);
      MPI_Request req;
      DSP_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, p + off * elem, static_cast<int>(n),
                                   mpi_type(dtype), mpi_op(op), s.comm, &req));
      s.wait(&req, 1);
      off += n;
    } while (off < count);
  });
  s.book.add_symmetric(static_cast<uint64_t>(count) * elem);
}

void MpiCommunicator::broadcast(void* buf, int64_t count, DType dtype, int root,
                                const OpOptions& o) {
  State& s = *st_;
  detail::check_count(count, "broadcast");
  detail::check_root(root, s.size, "broadcast");
  DSP_CHECK_ARG(buf || count == 0, "broadcast: buf is null");
  const size_t elem = dtype_size(dtype);
  run_op(s, "broadcast", o, [&] {
    char* p = static_cast<char*>(buf);
    int64_t off = 0;
    do {
      int64_t n = clamp_piece(count - off, s.max_count);
      MPI_Request req;
      DSP_MPI_CHECK(
          MPI_Ibcast(p + off * elem, static_cast<int>(n), mpi_type(dtype), root, s.comm, &req));
      s.wait(&req, 1);
      off += n;
    } while (off < count);
  });
  s.book.add_broadcast(static_cast<uint64_t>(count) * elem, root, s.rank);
}

void MpiCommunicator::all_gather(const void* send, void* recv, int64_t count, DType dtype,
                                 const OpOptions& o) {
  State& s = *st_;
  detail::check_count(count, "all_gather");
  DSP_CHECK_ARG((send && recv) || count == 0, "all_gather: null buffer");
  const size_t elem = dtype_size(dtype);
  const MPI_Datatype type = mpi_type(dtype);
  char* rp = static_cast<char*>(recv);
  const bool in_place = send == rp + s.rank * count * elem && count > 0;
  run_op(s, "all_gather", o, [&] {
    if (count <= s.max_count) {
      MPI_Request req;
      DSP_MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : send, static_cast<int>(count), type,
                                   recv, static_cast<int>(count), type, s.comm, &req));
      s.wait(&req, 1);
      return;
    }
    // Piece [off, off+n) of every rank's block: one element of a type whose extent is a whole
    // block places rank p's piece at p * count + off.
    const char* sp = static_cast<const char*>(send);
    for (int64_t off = 0; off < count;) {
      int64_t n = clamp_piece(count - off, s.max_count);
      MPI_Datatype piece, block;
      DSP_MPI_CHECK(MPI_Type_contiguous(static_cast<int>(n), type, &piece));
      DSP_MPI_CHECK(MPI_Type_create_resized(piece, 0, static_cast<MPI_Aint>(count * elem), &block));
      DSP_MPI_CHECK(MPI_Type_commit(&block));
      MPI_Request req;
      int rc = MPI_Iallgather(in_place ? MPI_IN_PLACE : sp + off * elem, static_cast<int>(n), type,
                              rp + off * elem, 1, block, s.comm, &req);
      if (rc == MPI_SUCCESS) s.wait(&req, 1);
      MPI_Type_free(&block);
      MPI_Type_free(&piece);
      DSP_CHECK_T(CommError, rc == MPI_SUCCESS, "mpi: MPI_Iallgather failed: {}",
                  mpi_error_string(rc));
      off += n;
    }
  });
  s.book.add_symmetric(static_cast<uint64_t>(count) * elem);
}

void MpiCommunicator::barrier(const OpOptions& o) {
  State& s = *st_;
  run_op(s, "barrier", o, [&] {
    MPI_Request req;
    DSP_MPI_CHECK(MPI_Ibarrier(s.comm, &req));
    s.wait(&req, 1);
  });
  s.book.add_empty();
}

}  // namespace dsp
