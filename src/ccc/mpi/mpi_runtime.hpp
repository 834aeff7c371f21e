#pragma once
// Internals of the MPI backend shared by mpi_communicator.cpp (the ops) and mpi_runtime.cpp (the
// process-wide runtime): includes mpi.h, so only those two files include it.
//
// The runtime owns the executor thread that makes every MPI call of the process, the registry of
// live communicators, and the job's life cycle on a communicator of its own (a duplicate of
// MPI_COMM_WORLD made at initialization) that carries notices outside any collective:
//  * abort: "I am ending the job and have printed why". A rank that aborts tells every peer first,
//    so that peers killed by the launcher stay silent instead of adding misleading messages.
//  * ping/pong: when the launcher ends the job (SIGTERM), the ranks ask each other who is still
//    there; the lowest surviving rank names the ranks that vanished (killed, crashed, host lost).
//  * bye: a rank that finishes normally (at exit, before MPI_Finalize) tells its peers how many ops
//    it started on each communicator. A peer waiting in an op beyond that count can never complete
//    it: it names the finished rank and ends the job, and tells the finished rank, which names the
//    peer (ranks that ran a different number of epochs get a clear message on every rank, not a
//    hang in MPI_Finalize). The finished rank waits for every peer's bye, bounded by the timeout.
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ccc/detail/common.hpp"
#include "ccc/mpi/mpi_communicator.hpp"

namespace dsp {

class CommExecutor;
class MpiRuntime;

std::string mpi_error_string(int code);

// Data communicators use MPI_ERRORS_RETURN, so failures become exceptions naming the call.
#define DSP_MPI_CHECK(call)                                                              \
  do {                                                                                   \
    int _rc = (call);                                                                    \
    if (_rc != MPI_SUCCESS) {                                                            \
      DSP_THROW_T(::dsp::CommError, "mpi: {} failed: {}", #call, mpi_error_string(_rc)); \
    }                                                                                    \
  } while (0)

// What a rank answers about one communicator; sent as raw bytes (same binary on every rank).
struct StatusReply {
  int64_t seq;                 // ops started on this communicator
  int32_t in_op;               // 1 while op #seq has not completed
  int32_t timing_out;          // 1 while this rank handles a timeout of op #seq
  int32_t process_timing_out;  // 1 while this rank handles a timeout of any op
  char name[32];               // op #seq's name
  char label[64];              // and label
};

struct MpiCommunicator::State {
  State(MpiRuntime* r, int size_hint) : rt(r), book(size_hint) {}
  MpiRuntime* rt;
  MPI_Comm comm = MPI_COMM_NULL;  // collectives and all_to_all_v pieces
  MPI_Comm ctl = MPI_COMM_NULL;   // timeout status queries, never blocked on by collectives
  int64_t index = 0;              // creation order: the same on every rank (creation is collective)
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{0};
  int64_t max_count = INT32_MAX;
  detail::CounterBook book;

  // Executor thread only.
  int64_t seq = 0;  // ops started
  bool in_op = false;
  bool timing_out = false;  // inside timed_out(): peers that also time out let the lowest print
  std::string op_name;
  std::string op_label;
  std::chrono::steady_clock::time_point op_start;
  std::chrono::milliseconds op_timeout{0};
  struct PendingReply {
    StatusReply msg;
    MPI_Request req;
  };
  std::list<PendingReply> replies;

  void begin(const char* name, const OpOptions& o);
  // Waits for the requests while answering status queries and job notices; times out.
  void wait(MPI_Request* reqs, int n);
  void service_queries();
  void free_replies();
  [[noreturn]] void timed_out(double waited_s);
  std::string describe_op() const;  // "collective 'barrier' (op #3, label 'x')"
};

// Process-wide MPI state. Created on first use and never destroyed (its executor is stopped, and
// MPI finalized, by an atexit handler), so no static destructor can run before a communicator
// that still needs it.
class MpiRuntime {
 public:
  static MpiRuntime& get();
  static MpiRuntime* existing();  // null until get() was called
  CommExecutor& exec() { return *exec_; }
  bool finalized() const { return finalized_; }

  // Executor thread only.
  void add(MpiCommunicator::State* s);
  void remove(MpiCommunicator::State* s);  // records its final op count for the bye
  int64_t next_index() { return comms_created_++; }
  // Answers status queries of every live communicator and job notices; acts on a requested abort
  // or a termination signal (neither returns).
  void service_all();
  // Waits for `reqs` (communicator creation) with the same notices and timeout as an op.
  void wait_create(MPI_Request* reqs, int n, int64_t index, std::chrono::milliseconds timeout);
  // A peer that finished after starting fewer than `seq` ops on communicator `index` (so it will
  // never join op #seq), or -1.
  int finished_before(int64_t index, int64_t seq) const;
  // Op #seq of communicator `index` can never complete because `peer` finished: tells the peer,
  // prints why and ends the job.
  [[noreturn]] void past_end(int peer, int64_t index, int64_t seq, const std::string& what);
  // Tells every peer this rank is ending the job, then MPI_Abort.
  [[noreturn]] void abort_now(int code);
  // A peer announced that it is ending the job (and printed why): wait for the launcher to end
  // this rank too, silently; abort after a few seconds if it does not.
  [[noreturn]] void quiet_end();
  bool peer_aborting() const;
  // Receives the job's notices (an abort announced by a peer, pings) without acting on them.
  void poll_notices();

 private:
  MpiRuntime();
  void init_mpi();
  void finalize_mpi();
  void exit_barrier();
  void poll_job();
  void post(int peer, int tag, std::vector<char> bytes);
  void progress_out();
  [[noreturn]] void on_terminate();
  // Watch thread (peer_watch.hpp): `gone` closed their connections without a word.
  void on_vanished(const std::vector<int>& gone);
  // "rank 1 vanished (host b)", "ranks 1, 2 vanished (hosts b, c)".
  std::string vanished_ranks(const std::vector<int>& gone) const;
  [[noreturn]] void finished_peer_went_on();

  struct Peer {
    bool bye = false;
    std::map<int64_t, int64_t> ops;  // from its bye: ops started per communicator index
    bool pong = false;
    bool ack = false;
  };
  struct Outgoing {
    std::vector<char> buf;
    MPI_Request req;
  };
  struct PastEndNote {  // sent as raw bytes (same binary on every rank)
    int64_t index;
    int64_t seq;
    char what[160];
  };

  std::unique_ptr<CommExecutor> exec_;
  std::list<MpiCommunicator::State*> live_;
  bool we_initialized_ = false;
  bool finalized_ = false;
  MPI_Comm job_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::vector<std::string> hosts_;  // by rank, when the peer watch runs (else empty)
  int64_t comms_created_ = 0;
  std::map<int64_t, int64_t> retired_;  // freed communicators: index -> ops started
  std::chrono::milliseconds exit_timeout_{0};
  bool exit_timeout_unbounded_ = false;
  std::vector<Peer> peers_;
  std::list<Outgoing> out_;
  bool past_end_ = false;  // a peer went on after this rank finished
  int past_end_peer_ = -1;
  PastEndNote past_end_note_{};
};

}  // namespace dsp
