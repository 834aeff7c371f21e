#include "ccc/mpi/mpi_communicator.hpp"

#include <algorithm>
#include <climits>
#include <cstring>

#include "ccc/executor.hpp"
#include "ccc/mpi/mpi_runtime.hpp"
#include "core/error.hpp"
#include "core/logging.hpp"

namespace dsp {
namespace {

constexpr int kTagP2P = 103;  // on the data communicator: pieces of all_to_all_v

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
    case DType::kInt8:
      return MPI_INT8_T;
    case DType::kBFloat16:
      return MPI_UINT16_T;  // moved as raw bits, never reduced
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

}  // namespace

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
    s->index = rt.next_index();
    s->timeout = timeout;
    // Nonblocking, so that a peer that finished without creating it is named, not waited for.
    MPI_Request reqs[2];
    DSP_MPI_CHECK(MPI_Comm_idup(MPI_COMM_WORLD, &s->comm, &reqs[0]));
    DSP_MPI_CHECK(MPI_Comm_idup(MPI_COMM_WORLD, &s->ctl, &reqs[1]));
    rt.wait_create(reqs, 2, s->index, timeout);
    DSP_MPI_CHECK(MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN));
    DSP_MPI_CHECK(MPI_Comm_set_errhandler(s->ctl, MPI_ERRORS_RETURN));
    MPI_Comm_rank(s->comm, &s->rank);
    MPI_Comm_size(s->comm, &s->size);
    rt.add(s.get());
    return s;
  });
  set_log_rank(st_->rank, st_->size);
  DSP_DEBUG("ccc", "mpi communicator #{}: rank {} of {}, timeout {} ms", st_->index, st_->rank,
            st_->size, timeout.count());
}

MpiCommunicator::~MpiCommunicator() {
  if (!st_) return;
  State* s = st_.get();
  try {
    s->rt->exec().run("comm_free", [s] {
      s->rt->remove(s);
      if (s->rt->finalized()) return;
      s->free_replies();
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

std::unique_ptr<Communicator> make_mpi_communicator(const CommOptions& opts) {
  return std::make_unique<MpiCommunicator>(opts);
}

}  // namespace dsp
