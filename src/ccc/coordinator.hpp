#pragma once
// Centralized Communication Coordination (CCC, DSP PPoPP'23 section 4.3).
//
// Several workers of a rank (sampler, loader, trainer) issue collectives concurrently. If rank A
// launches the sampler's all-to-all first and rank B the loader's, each waits for the other: a
// deadlock with NCCL (kernels hold SMs) and with MPI here (one executor thread per rank runs one
// op at a time). CCC makes the launch order global:
//
//  * every op carries an OpId {worker, epoch, batch, op index} that is the same on all ranks (the
//    worker sets its (epoch, batch) with set_step(); the op index counts up within the step);
//  * a worker registers its op with the rank's Coordinator and waits for it to complete;
//  * rank 0 (the leader) launches its registered ops in FIFO order, broadcasting each id on a
//    control communicator just before running it;
//  * a follower receives ids in broadcast order and runs each one as soon as its own worker has
//    registered it (waiting for the worker when it has not).
//
// All of it runs on one executor thread per rank: the control backend's (Communicator::executor;
// for MPI the process-wide MPI executor, so every MPI call of the process is still made by that
// one thread), otherwise the coordinator's own. With a world of one, ops simply run in
// registration order. For a stream-ordered data backend (NCCL: Communicator::completes_on_return
// is false) "running" an op is enqueueing it: the global order is the enqueue order, which is
// what prevents the deadlock, and a worker synchronizes its own communicator before it reads a
// result on the host.
//
// Hangs are bounded: an op that stays registered but unlaunched for longer than the communicator
// timeout (CommOptions / DSP_COMM_TIMEOUT) throws CommError naming the op and the id the rank is
// waiting for; launched ops and the control broadcast use the backend's own timeout.
//
// `ccc = false` (--ccc off) bypasses all of this: each worker runs its ops at once on its own data
// communicator. It exists only to show the deadlock CCC prevents.
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "ccc/communicator.hpp"

namespace dsp {

class CommExecutor;
class Coordinator;

enum class WorkerKind : int32_t { kSampler = 0, kLoader = 1, kTrainer = 2, kMain = 3 };
constexpr int kNumWorkerKinds = 4;
const char* worker_kind_name(WorkerKind k);

struct OpId {
  WorkerKind worker = WorkerKind::kMain;
  int64_t epoch = 0;
  int64_t batch = 0;
  int64_t op = 0;  // index of the op within (worker, epoch, batch)

  auto key() const { return std::make_tuple(static_cast<int32_t>(worker), epoch, batch, op); }
  bool operator==(const OpId& o) const { return key() == o.key(); }
  bool operator!=(const OpId& o) const { return !(*this == o); }
  bool operator<(const OpId& o) const { return key() < o.key(); }
  std::string str() const;  // "loader/e1/b37/op2"
};

struct CoordinatorOptions {
  bool ccc = true;               // false: --ccc off, ops run at once on the worker's thread
  bool record_launches = false;  // keep the full launch sequence (launch_log()), not only its hash
  CommOptions comm;              // timeouts of the control and data communicators
};

// The Communicator one worker sees: every op goes through the Coordinator. Not thread-safe: it
// belongs to one worker thread (set_step and the op counter are that worker's).
class CoordinatedCommunicator : public Communicator {
 public:
  CoordinatedCommunicator(Coordinator* coord, WorkerKind kind, Communicator* data);

  // Starts a new step: later ops are numbered (kind, epoch, batch, 0), (.., 1), ...
  void set_step(int64_t epoch, int64_t batch);
  WorkerKind kind() const { return kind_; }
  // Seconds this worker spent inside collectives (waiting for launch plus running), since
  // construction or reset_wait_seconds().
  double wait_seconds() const { return wait_ns_.load() * 1e-9; }
  void reset_wait_seconds() { wait_ns_ = 0; }

  int rank() const override { return data_->rank(); }
  int size() const override { return data_->size(); }
  std::string backend() const override { return data_->backend(); }

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

  CommCounters counters() const override { return data_->counters(); }
  void reset_counters() override { data_->reset_counters(); }
  MemorySpace memory_space() const override { return data_->memory_space(); }
  bool completes_on_return() const override { return data_->completes_on_return(); }
  // Local, not a collective: waits for this worker's own enqueued ops.
  void synchronize(const OpOptions& o = {}) override { data_->synchronize(o); }
  [[noreturn]] void abort_job(const std::string& message) override;

  using Communicator::all_to_all_v;

 private:
  void launch(const char* name, const std::function<void()>& fn);

  Coordinator* coord_;
  WorkerKind kind_;
  Communicator* data_;
  int64_t epoch_ = 0, batch_ = 0, op_ = 0;
  std::atomic<int64_t> wait_ns_{0};
};

class Coordinator {
 public:
  // control: carries the leader's id broadcasts. data[k]: the communicator worker kind k's ops
  // run on (all may be the same object's peers, but distinct objects so that --ccc off and NCCL
  // get one per worker). executor: the thread that runs every op; null makes a private one (for
  // backends without a process-wide executor).
  Coordinator(std::unique_ptr<Communicator> control,
              std::array<std::unique_ptr<Communicator>, kNumWorkerKinds> data,
              CommExecutor* executor, CoordinatorOptions opts = {});
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  CoordinatedCommunicator& channel(WorkerKind k) { return *channels_[static_cast<int>(k)]; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  std::string backend() const { return control_->backend(); }
  bool ccc() const { return opts_.ccc; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Ops launched by this rank so far, in launch order (empty unless record_launches), and a hash
  // of that sequence (always kept): equal hashes on all ranks mean one global launch order.
  std::vector<OpId> launch_log() const;
  uint64_t launch_hash() const;
  uint64_t launched() const;
  void clear_launch_log();

  // Ends the whole job because of a failure on this rank, through the control backend's
  // abort_job: prints "dsp: <message>" once on stderr and ends every rank (MPI: MPI_Abort, exit
  // code 1). Never returns. Peers may be blocked in collectives this rank will never join, so
  // nothing gentler can end them in bounded time.
  [[noreturn]] void abort_job(const std::string& message);

  // Runs fn as op `id` in the global order and waits for it (called by CoordinatedCommunicator).
  void run(const OpId& id, const char* name, const std::function<void()>& fn);

 private:
  struct Entry {
    OpId id;
    const char* name;
    const std::function<void()>* fn;
    std::promise<void>* done;
    bool taken = false;
  };
  void schedule_locked();
  void dispatch();
  void execute(Entry* e);
  void record(const OpId& id);

  std::unique_ptr<Communicator> control_;
  std::array<std::unique_ptr<Communicator>, kNumWorkerKinds> data_;
  std::array<std::unique_ptr<CoordinatedCommunicator>, kNumWorkerKinds> channels_;
  std::unique_ptr<CommExecutor> own_exec_;
  CommExecutor* exec_;
  CoordinatorOptions opts_;
  std::chrono::milliseconds timeout_;
  int rank_ = 0, size_ = 1;

  mutable std::mutex mu_;
  std::condition_variable idle_cv_;
  std::map<OpId, Entry*> pending_;  // registered, not yet launched
  std::deque<Entry*> fifo_;         // leader: registration order
  bool has_next_ = false;           // follower: id received from the leader, not yet launched
  OpId next_;
  bool dispatching_ = false;
  bool executing_ = false;  // an op is running on the executor (its backend times it)
  OpId last_launched_;
  uint64_t launched_ = 0;
  uint64_t hash_ = 0;
  std::vector<OpId> log_;
  std::mutex direct_mu_;  // --ccc off: guards the launch log only
};

// Makes the data communicator of worker kind `kind`, bootstrapped over the control communicator
// (e.g. NCCL for the trainer: make_nccl_communicator(control, device) in the CUDA build), or
// returns null for the control backend's own.
using DataCommFactory =
    std::function<std::unique_ptr<Communicator>(WorkerKind kind, Communicator& control)>;

// backend: "auto" | "self" | "mpi" (as make_communicator) for the control communicator. Creates
// it, one data communicator per worker kind (of the same backend, or made by `make_data`) and the
// coordinator, running on the control backend's executor.
std::unique_ptr<Coordinator> make_coordinator(const std::string& backend = "auto",
                                              const CoordinatorOptions& opts = {},
                                              const DataCommFactory& make_data = {});

}  // namespace dsp
