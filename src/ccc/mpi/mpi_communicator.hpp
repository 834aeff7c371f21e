#pragma once
// MPI backend. Every MPI call of the process is made by one executor thread (shared by all
// MpiCommunicators of the process, and by the coordinator later): public ops hand a task to it
// and wait. The executor initializes MPI itself when nobody has (MPI_THREAD_SERIALIZED, so the
// initializing thread is the calling thread) and finalizes it once at process exit.
//
// Timeouts. Each communicator numbers its ops (all ranks issue them in the same order, so op #k is
// the same collective everywhere) and owns a second, duplicated control communicator. While the
// executor waits on an op, and every 20 ms while it has no work, it answers status queries that
// arrive on the control communicators: (ops started, inside an op or not, that op's name/label).
// When an op passes its deadline (time this process was awake: a rank that was stopped does not
// blame its peers for it) the rank sends a query to every peer, collects answers for
// min(2 s, timeout), prints one line naming the op and the ranks that did not arrive, e.g.
//   dsp: collective 'barrier' (op #3) timed out after 1.0 s on rank 0; ranks that did not
//   arrive: 2 (idle after op #2)
// and aborts the job. A rank that has started op #k or a later one counts as arrived; "not
// responding" means its executor did not answer during the grace period (stopped, hung outside
// MPI, or unreachable). When several ranks time out in the same op, the lowest prints.
//
// Failures end the job with one message (mpi_runtime.hpp has the protocol): a rank that aborts
// tells its peers first, so they stay silent; a rank that vanished (killed by a signal, crashed)
// is named with its host by the lowest surviving rank, at once (peer_watch.hpp: a TCP connection
// per pair of ranks that closes without a word) or when the launcher ends the job; a rank that
// finishes waits at exit for every peer to finish too, and a peer still issuing collectives gets an
// error naming it (e.g. ranks that iterate a different number of epochs), on both sides.
//
// Counts. MPI counts are int. Larger messages are split into pieces of at most INT_MAX elements
// (all_reduce, broadcast; all_gather through a resized contiguous datatype), chosen from the
// count alone so every rank splits alike. all_to_all_v is pairwise nonblocking send/receive, with
// segments longer than INT_MAX elements sent in pieces.
#include <chrono>
#include <memory>

#include "ccc/communicator.hpp"

namespace dsp {

class CommExecutor;

class MpiCommunicator : public Communicator {
 public:
  // Duplicates MPI_COMM_WORLD (initializing MPI on the executor thread if needed).
  explicit MpiCommunicator(const CommOptions& opts = {});
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override;
  int size() const override;
  std::string backend() const override { return "mpi"; }

  std::vector<int64_t> exchange_counts(const std::vector<int64_t>& send_counts,
                                       const OpOptions& o = {}) override;
  void all_to_all_v(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                    const std::vector<int64_t>& recv_counts, DType dtype,
                    const OpOptions& o = {}) override;
  void all_reduce(void* buf, int64_t count, DType dtype, ReduceOp op,
                  const OpOptions& o = {}) override;
  void broadcast(void* buf, int64_t count, DType dtype, int root, const OpOptions& o = {}) override;
  void all_gather(const void* send, void* recv, int64_t count, DType dtype,
                  const OpOptions& o = {}) override;
  void barrier(const OpOptions& o = {}) override;

  CommCounters counters() const override;
  void reset_counters() override;

  using Communicator::all_to_all_v;

  // The default per-op timeout in effect (CommOptions, or DSP_COMM_TIMEOUT); 0 = none.
  std::chrono::milliseconds timeout() const;
  // The process-wide MPI executor thread: every MPI call is made on it.
  CommExecutor* executor() override { return &process_executor(); }
  static CommExecutor& process_executor();
  // Ends the job from any thread because of a failure on this rank: prints "dsp: <message>" once
  // on stderr (nothing when a peer already announced that it ends the job), tells the peers, then
  // MPI_Abort(MPI_COMM_WORLD, exit_code). The executor thread makes those calls (it checks the
  // request while it waits on MPI and while idle); if it does not within 2 s (stuck outside MPI),
  // the calling thread calls MPI_Abort. Without an initialized MPI it just exits.
  [[noreturn]] static void abort_process(const std::string& message, int exit_code = 1);
  [[noreturn]] void abort_job(const std::string& message) override { abort_process(message); }
  // The world this process belongs to once an MpiCommunicator exists (0 before, and after MPI
  // is finalized), and its rank. Never initialize MPI.
  static int job_size();
  static int job_rank();
  // Tests only: use pieces of at most n elements (default INT_MAX), so the paths taken by >2^31
  // element messages run on small buffers. Every rank must set the same value.
  void set_max_count_for_testing(int64_t n);

  struct State;  // MPI handles and executor-side op state; defined in the .cpp (no mpi.h here)

 private:
  std::unique_ptr<State> st_;
};

// The factory of the "mpi" backend (ccc/registry.cpp: make_communicator by name).
std::unique_ptr<Communicator> make_mpi_communicator(const CommOptions& opts);

}  // namespace dsp
