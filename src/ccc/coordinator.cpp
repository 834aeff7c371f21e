#include "ccc/coordinator.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "ccc/detail/common.hpp"
#include "ccc/executor.hpp"
#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/rng.hpp"

namespace dsp {

const char* worker_kind_name(WorkerKind k) {
  switch (k) {
    case WorkerKind::kSampler:
      return "sampler";
    case WorkerKind::kLoader:
      return "loader";
    case WorkerKind::kTrainer:
      return "trainer";
    case WorkerKind::kMain:
      return "main";
  }
  return "?";
}

std::string OpId::str() const {
  return fmt::format("{}/e{}/b{}/op{}", worker_kind_name(worker), epoch, batch, op);
}

// ---------------------------------------------------------------------------------------------
// CoordinatedCommunicator

CoordinatedCommunicator::CoordinatedCommunicator(Coordinator* coord, WorkerKind kind,
                                                 Communicator* data)
    : coord_(coord), kind_(kind), data_(data) {}

void CoordinatedCommunicator::set_step(int64_t epoch, int64_t batch) {
  epoch_ = epoch;
  batch_ = batch;
  op_ = 0;
}

void CoordinatedCommunicator::launch(const char* name, const std::function<void()>& fn) {
  OpId id{kind_, epoch_, batch_, op_++};
  auto t0 = std::chrono::steady_clock::now();
  try {
    coord_->run(id, name, fn);
  } catch (...) {
    wait_ns_ +=
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    throw;
  }
  wait_ns_ +=
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count();
}

std::vector<int64_t> CoordinatedCommunicator::exchange_counts(
    const std::vector<int64_t>& send_counts, const OpOptions& o) {
  std::vector<int64_t> out;
  launch("exchange_counts", [&] { out = data_->exchange_counts(send_counts, o); });
  return out;
}

void CoordinatedCommunicator::all_to_all_v(const void* send,
                                           const std::vector<int64_t>& send_counts, void* recv,
                                           const std::vector<int64_t>& recv_counts, DType dtype,
                                           const OpOptions& o) {
  launch("all_to_all_v",
         [&] { data_->all_to_all_v(send, send_counts, recv, recv_counts, dtype, o); });
}

void CoordinatedCommunicator::all_reduce(void* buf, int64_t count, DType dtype, ReduceOp op,
                                         const OpOptions& o) {
  launch("all_reduce", [&] { data_->all_reduce(buf, count, dtype, op, o); });
}

void CoordinatedCommunicator::broadcast(void* buf, int64_t count, DType dtype, int root,
                                        const OpOptions& o) {
  launch("broadcast", [&] { data_->broadcast(buf, count, dtype, root, o); });
}

void CoordinatedCommunicator::all_gather(const void* send, void* recv, int64_t count, DType dtype,
                                         const OpOptions& o) {
  launch("all_gather", [&] { data_->all_gather(send, recv, count, dtype, o); });
}

void CoordinatedCommunicator::barrier(const OpOptions& o) {
  launch("barrier", [&] { data_->barrier(o); });
}

void CoordinatedCommunicator::abort_job(const std::string& message) { coord_->abort_job(message); }

// ---------------------------------------------------------------------------------------------
// Coordinator

Coordinator::Coordinator(std::unique_ptr<Communicator> control,
                         std::array<std::unique_ptr<Communicator>, kNumWorkerKinds> data,
                         CommExecutor* executor, CoordinatorOptions opts)
    : control_(std::move(control)),
      data_(std::move(data)),
      exec_(executor),
      opts_(std::move(opts)) {
  DSP_CHECK_ARG(control_ != nullptr, "coordinator: control communicator is null");
  rank_ = control_->rank();
  size_ = control_->size();
  for (int k = 0; k < kNumWorkerKinds; ++k) {
    DSP_CHECK_ARG(data_[k] != nullptr, "coordinator: data communicator of {} is null",
                  worker_kind_name(static_cast<WorkerKind>(k)));
    DSP_CHECK_ARG(data_[k]->rank() == rank_ && data_[k]->size() == size_,
                  "coordinator: data communicator of {} is rank {} of {}, control is {} of {}",
                  worker_kind_name(static_cast<WorkerKind>(k)), data_[k]->rank(), data_[k]->size(),
                  rank_, size_);
    channels_[k] =
        std::make_unique<CoordinatedCommunicator>(this, static_cast<WorkerKind>(k), data_[k].get());
  }
  timeout_ = detail::default_timeout(opts_.comm);
  if (!exec_) {
    own_exec_ = std::make_unique<CommExecutor>("ccc");
    exec_ = own_exec_.get();
  }
  DSP_DEBUG("ccc", "coordinator: rank {} of {}, backend {}, ccc {}", rank_, size_,
            control_->backend(), opts_.ccc ? "on" : "off");
}

Coordinator::~Coordinator() {
  std::unique_lock<std::mutex> lock(mu_);
  // A dispatch still running references this object; every op's worker has returned by now
  // unless the job is failing, in which case abort_job ends the process anyway.
  idle_cv_.wait(lock, [this] { return !dispatching_; });
  if (!pending_.empty()) {
    DSP_WARN("ccc", "coordinator destroyed with {} registered op(s) never launched, first {}",
             pending_.size(), pending_.begin()->first.str());
  }
  lock.unlock();
  own_exec_.reset();
}

double Coordinator::executor_cpu_seconds() const { return exec_->cpu_seconds(); }

void Coordinator::record(const OpId& id) {
  uint64_t h = hash_;
  h = mix64(h ^ static_cast<uint64_t>(id.worker));
  h = mix64(h ^ static_cast<uint64_t>(id.epoch));
  h = mix64(h ^ static_cast<uint64_t>(id.batch));
  hash_ = mix64(h ^ static_cast<uint64_t>(id.op));
  ++launched_;
  last_launched_ = id;
  if (opts_.record_launches) log_.push_back(id);
  DSP_LOG(kTrace, "ccc", "launch {}", id.str());
}

std::vector<OpId> Coordinator::launch_log() const {
  std::lock_guard<std::mutex> lock(mu_);
  return log_;
}
uint64_t Coordinator::launch_hash() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hash_;
}
uint64_t Coordinator::launched() const {
  std::lock_guard<std::mutex> lock(mu_);
  return launched_;
}
void Coordinator::clear_launch_log() {
  std::lock_guard<std::mutex> lock(mu_);
  log_.clear();
  hash_ = 0;
  launched_ = 0;
}

void Coordinator::run(const OpId& id, const char* name, const std::function<void()>& fn) {
  DSP_CHECK(!exec_->on_executor_thread(),
            "ccc: op {} issued from the communication executor itself", id.str());
  if (!opts_.ccc) {
    // --ccc off: the worker's op goes straight to its own communicator, in whatever order the
    // workers of this rank happen to reach it.
    {
      std::lock_guard<std::mutex> lock(mu_);
      record(id);
    }
    fn();
    return;
  }
  std::promise<void> done;
  std::future<void> fut = done.get_future();
  Entry e{id, name, &fn, &done};
  {
    std::lock_guard<std::mutex> lock(mu_);
    DSP_CHECK(pending_.emplace(id, &e).second,
              "ccc: op {} registered twice (does the worker call set_step for every step?)",
              id.str());
    if (rank_ == 0) fifo_.push_back(&e);
    schedule_locked();
  }
  // The timeout counts time this process was awake: a rank that was stopped must not blame its
  // peers when it resumes.
  detail::AwakeTimer awake;
  while (timeout_.count() > 0 &&
         fut.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout) {
    if (awake.elapsed() < timeout_) continue;
    std::unique_lock<std::mutex> lock(mu_);
    // Launched, or queued behind an op that is running: the backend's own timeout bounds that op
    // and names the ranks it waits for. A follower still waiting for the leader's next id is
    // inside the control broadcast, whose timeout names the leader when it is not responding.
    if (e.taken || executing_ || (rank_ != 0 && !has_next_)) continue;
    // Never launched: withdraw it, so nothing runs it after this frame is gone.
    pending_.erase(id);
    auto it = std::find(fifo_.begin(), fifo_.end(), &e);
    if (it != fifo_.end()) fifo_.erase(it);
    std::string waiting = rank_ == 0
                              ? std::string("(leader)")
                              : fmt::format("waiting for its worker to issue {}", next_.str());
    DSP_THROW_T(CommError,
                "ccc: collective '{}' {} was not launched within {:.1f} s on rank {} {}; last "
                "launched op: {} ({} launched); do all ranks issue the same collectives?",
                name, id.str(), timeout_.count() / 1e3, rank_, waiting,
                launched_ ? last_launched_.str() : std::string("none"), launched_);
  }
  fut.get();
}

void Coordinator::schedule_locked() {
  if (dispatching_) return;
  dispatching_ = true;
  exec_->submit("ccc dispatch", [this] { dispatch(); });
}

void Coordinator::execute(Entry* e) {
  std::promise<void>* done = e->done;
  try {
    (*e->fn)();
  } catch (...) {
    done->set_exception(std::current_exception());
    return;
  }
  done->set_value();  // the worker may return and free *e from here on
}

// Runs on the executor thread until nothing can be launched, then returns so that the executor
// can serve other work (MPI timeout queries, other communicators); the next registration
// schedules it again.
void Coordinator::dispatch() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    Entry* e = nullptr;
    if (rank_ == 0) {
      if (fifo_.empty()) break;
      e = fifo_.front();
      fifo_.pop_front();
      pending_.erase(e->id);
      e->taken = true;
      executing_ = true;
      record(e->id);
      lock.unlock();
      if (size_ > 1) {
        int64_t msg[4] = {static_cast<int64_t>(e->id.worker), e->id.epoch, e->id.batch, e->id.op};
        try {
          OpOptions o;
          o.label = "ccc id";
          control_->broadcast(msg, 4, DType::kInt64, 0, o);
        } catch (...) {
          e->done->set_exception(std::current_exception());
          lock.lock();
          executing_ = false;
          continue;
        }
      }
      execute(e);
      lock.lock();
      executing_ = false;
      continue;
    }
    // Follower: take the leader's ids in broadcast order. Only listen while some op of ours is
    // registered: the leader cannot complete anything without us anyway.
    if (!has_next_) {
      if (pending_.empty()) break;
      lock.unlock();
      int64_t msg[4] = {0, 0, 0, 0};
      OpOptions o;
      o.label = "ccc id";
      try {
        control_->broadcast(msg, 4, DType::kInt64, 0, o);
      } catch (...) {
        // The control channel failed: every registered op fails with it.
        lock.lock();
        auto err = std::current_exception();
        for (auto& kv : pending_) {
          kv.second->taken = true;
          kv.second->done->set_exception(err);
        }
        pending_.clear();
        break;
      }
      lock.lock();
      next_ = OpId{static_cast<WorkerKind>(msg[0]), msg[1], msg[2], msg[3]};
      has_next_ = true;
    }
    auto it = pending_.find(next_);
    if (it == pending_.end()) break;  // our worker is not there yet; its registration resumes us
    e = it->second;
    pending_.erase(it);
    e->taken = true;
    executing_ = true;
    has_next_ = false;
    record(e->id);
    lock.unlock();
    execute(e);
    lock.lock();
    executing_ = false;
  }
  dispatching_ = false;
  idle_cv_.notify_all();
}

void Coordinator::abort_job(const std::string& message) {
  control_->abort_job(message);
  std::terminate();  // not reached: abort_job never returns (tells the compiler so)
}

std::unique_ptr<Coordinator> make_coordinator(const std::string& backend,
                                              const CoordinatorOptions& opts,
                                              const DataCommFactory& make_data) {
  std::string b = backend;
  if (b == "auto") b = launched_by_mpi() ? "mpi" : "self";
  DSP_CHECK_ARG(b != "nccl" && is_communicator_backend(b), "coordinator: unknown backend '{}' ({})",
                backend, communicator_backend_names());
  auto control = make_communicator(b, opts.comm);
  std::array<std::unique_ptr<Communicator>, kNumWorkerKinds> data;
  for (int k = 0; k < kNumWorkerKinds; ++k) {
    if (make_data) data[k] = make_data(static_cast<WorkerKind>(k), *control);
    if (!data[k]) data[k] = make_communicator(b, opts.comm);
  }
  CommExecutor* exec = control->executor();
  return std::make_unique<Coordinator>(std::move(control), std::move(data), exec, opts);
}

}  // namespace dsp
