#include "pipeline/pipeline.hpp"

#include <omp.h>

#include <algorithm>
#include <exception>
#include <mutex>
#include <numeric>
#include <thread>

#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/timer.hpp"
#include "pipeline/bounded_queue.hpp"
#include "pipeline/cores.hpp"
#include "pipeline/pace.hpp"

namespace dsp {

namespace {

std::string describe(const std::exception_ptr& ep) {
  try {
    std::rethrow_exception(ep);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

// The first failure of an epoch; later ones (usually consequences of the first) are dropped.
struct FirstFailure {
  std::mutex mu;
  std::exception_ptr error;
  std::string message;
  bool set(std::exception_ptr ep, std::string msg) {
    std::lock_guard<std::mutex> lock(mu);
    if (error) return false;
    error = std::move(ep);
    message = std::move(msg);
    return true;
  }
};

}  // namespace

const Names<PipelineMode>& names_of(PipelineMode) {
  using P = PipelineMode;
  static const Names<P> n("pipeline mode",
                          {{P::kAuto, "auto"}, {P::kPipelined, "on"}, {P::kSequential, "off"}});
  return n;
}

std::vector<const SampledBatch*> batch_pointers(const std::vector<SampledBatch>& batches) {
  std::vector<const SampledBatch*> out;
  out.reserve(batches.size());
  for (const SampledBatch& sb : batches) out.push_back(&sb);
  return out;
}

nlohmann::json StageMetrics::to_json() const {
  return {{"busy_s", busy_s},
          {"idle_s", idle_s},
          {"comm_s", comm_s},
          {"cpu_s", cpu_s},
          {"batches", batches}};
}

nlohmann::json EpochMetrics::to_json() const {
  return {{"epoch", epoch},
          {"steps", steps},
          {"mode", name_of(mode)},
          {"ran", ran},
          {"wall_s", wall_s},
          {"batches_per_s", batches_per_s},
          {"stages",
           {{"sampler", sampler.to_json()},
            {"loader", loader.to_json()},
            {"trainer", trainer.to_json()}}},
          {"queues",
           {{"load", load_queue_occupancy},
            {"train", train_queue_occupancy},
            {"ahead_max", ahead_max},
            {"pace_throttles", pace_throttles}}},
          {"cpu", {{"process_s", cpu_s}, {"comm_thread_s", comm_cpu_s}}}};
}

Pipeline::Pipeline(Coordinator& coord, EpochScheduler& sched, PipelineStages stages,
                   PipelineOptions opts)
    : coord_(coord), sched_(sched), stages_(std::move(stages)), opts_(std::move(opts)) {
  DSP_CHECK_ARG(stages_.sample && stages_.load && stages_.train,
                "pipeline: sample, load and train stages are all required");
  DSP_CHECK_ARG(opts_.queue_capacity >= 1, "pipeline: queue capacity must be >= 1, got {}",
                opts_.queue_capacity);
  if (opts_.threads <= 0) opts_.threads = std::max(1, omp_get_max_threads());
  DSP_CHECK_ARG(opts_.auto_opts.profile_steps >= 1 && opts_.auto_opts.trial_steps >= 1,
                "pipeline: auto needs profile_steps and trial_steps >= 1");
  DSP_CHECK_ARG(opts_.read_ahead >= 0, "pipeline: read-ahead must be >= 0 batches, got {}",
                opts_.read_ahead);
  DSP_CHECK_ARG(opts_.read_ahead <= 1 || stages_.read_ahead,
                "pipeline: reading {} batches ahead needs a read_ahead stage", opts_.read_ahead);
  set_mode(opts_.mode);
}

void Pipeline::set_mode(PipelineMode m) {
  opts_.mode = m;
  for (int& n : opts_.shares.threads) {
    if (n <= 0) n = opts_.threads;
  }
  phase_ = 0;
  phase_done_ = 0;
  cost_sum_ = {};
  seq_sum_ = trial_sum_ = 0;
  decided_ = false;
}

bool Pipeline::abort_on_error() const {
  switch (opts_.on_error) {
    case OnWorkerError::kThrow:
      return false;
    case OnWorkerError::kAbortJob:
      return true;
    case OnWorkerError::kAuto:
      break;
  }
  return coord_.size() > 1;
}

void Pipeline::enter_stage(WorkerKind k, int threads, const std::vector<int>& cpus) {
  if (!cpus.empty() && !bind_this_thread(cpus)) {
    DSP_DEBUG("pipeline", "could not bind the {} to cpus {}", worker_kind_name(k),
              format_cpu_list(cpus));
  }
  set_omp_threads(threads);
  if (k == WorkerKind::kTrainer) set_blas_threads(threads);
  if (stages_.set_threads) stages_.set_threads(k, threads);
}

namespace {

void add_stage(StageMetrics* into, const StageMetrics& s) {
  into->busy_s += s.busy_s;
  into->idle_s += s.idle_s;
  into->comm_s += s.comm_s;
  into->cpu_s += s.cpu_s;
  into->batches += s.batches;
}

void add_segment(EpochMetrics* m, const EpochMetrics& seg, int64_t n) {
  const double before = static_cast<double>(m->sampler.batches);
  const double w0 = before / std::max<double>(1.0, before + n), w1 = 1.0 - w0;
  m->load_queue_occupancy = w0 * m->load_queue_occupancy + w1 * seg.load_queue_occupancy;
  m->train_queue_occupancy = w0 * m->train_queue_occupancy + w1 * seg.train_queue_occupancy;
  m->ahead_max = std::max(m->ahead_max, seg.ahead_max);
  m->pace_throttles += seg.pace_throttles;
  m->wall_s += seg.wall_s;
  add_stage(&m->sampler, seg.sampler);
  add_stage(&m->loader, seg.loader);
  add_stage(&m->trainer, seg.trainer);
}

}  // namespace

PipelineMode Pipeline::next_segment(int64_t t, int64_t steps, int64_t* n) const {
  const AutoOptions& a = opts_.auto_opts;
  const int64_t left = steps - t;
  switch (phase_) {
    case 0:
      *n = std::min<int64_t>(left, 1 - phase_done_);
      return PipelineMode::kSequential;
    case 1:
      *n = std::min<int64_t>(left, a.profile_steps - phase_done_);
      return PipelineMode::kSequential;
    case 2:
      *n = std::min<int64_t>(left, a.trial_steps - phase_done_);
      return PipelineMode::kPipelined;
    default:
      *n = left;
      return plan_.mode;
  }
}

// Accounts a profiling segment; at the end of a phase, all-reduces the profile (max over ranks:
// the job runs at the pace of its slowest rank) and plans or decides.
void Pipeline::profile_segment(int64_t epoch, const EpochMetrics& seg, int64_t n) {
  const StageMetrics* st[3] = {&seg.sampler, &seg.loader, &seg.trainer};
  if (phase_ == 1) {
    for (int i = 0; i < 3; ++i) {
      cost_sum_[i].wall_s += st[i]->busy_s;
      cost_sum_[i].comm_s += st[i]->comm_s;
      cost_sum_[i].cpu_s += st[i]->cpu_s;
    }
    seq_sum_ += seg.wall_s;
  } else if (phase_ == 2) {
    trial_sum_ += seg.wall_s;
  }
  phase_done_ += n;
  const AutoOptions& a = opts_.auto_opts;
  const int64_t need = phase_ == 0 ? 1 : phase_ == 1 ? a.profile_steps : a.trial_steps;
  if (phase_done_ < need) return;
  CoordinatedCommunicator& main = coord_.channel(WorkerKind::kMain);
  main.set_step(epoch, -3 - phase_);  // -1: step agreement, -2: bench metrics
  OpOptions o;
  o.label = "pipeline auto profile";
  if (phase_ == 1) {
    std::vector<double> v;
    for (const StageCost& c : cost_sum_) v.insert(v.end(), {c.wall_s, c.comm_s, c.cpu_s});
    v.push_back(seq_sum_);
    v.push_back(-static_cast<double>(opts_.threads));  // max of -threads: the fewest cores
    main.all_reduce(v.data(), static_cast<int64_t>(v.size()), DType::kFloat64, ReduceOp::kMax, o);
    const double k = static_cast<double>(a.profile_steps);
    for (int i = 0; i < 3; ++i) {
      profile_.stage[i] = StageCost{v[3 * i] / k, v[3 * i + 1] / k, v[3 * i + 2] / k};
    }
    profile_.seq_batch_s = v[9] / k;
    profile_.cores = static_cast<int>(-v[10]);
    // Every rank plans for the fewest cores of any rank, over its own first cpus when it is
    // bound to them, over virtual cpus (no binding) otherwise.
    const bool bound = static_cast<int>(opts_.cpus.size()) >= profile_.cores;
    std::vector<int> cpus(profile_.cores);
    std::iota(cpus.begin(), cpus.end(), 0);
    if (bound) cpus.assign(opts_.cpus.begin(), opts_.cpus.begin() + profile_.cores);
    plan_ = plan_stages(profile_, cpus, a);
    if (!bound) {
      for (auto& c : plan_.shares.cpus) c.clear();
    }
    phase_ = plan_.trial ? 2 : 3;
  } else if (phase_ == 2) {
    double v = trial_sum_;
    main.all_reduce(&v, 1, DType::kFloat64, ReduceOp::kMax, o);
    profile_.on_batch_s = v / a.trial_steps;
    phase_ = 3;
  } else {
    phase_ = 1;
  }
  phase_done_ = 0;
  if (phase_ != 3) return;
  plan_ = decide(profile_, plan_, a);
  decided_ = true;
  decided_epoch_ = epoch;
  decided_batch_ = seg.steps;
  if (coord_.rank() == 0) {
    DSP_INFO("pipeline", "auto: {}; chose {} ({})", plan_.why, name_of(plan_.mode),
             plan_.mode == PipelineMode::kPipelined ? plan_.shares.describe()
                                                    : "all stages in turn on every thread");
  }
}

nlohmann::json Pipeline::auto_json() const {
  if (!decided_) return nullptr;
  nlohmann::json j = plan_.to_json();
  nlohmann::json st = nlohmann::json::array();
  for (const StageCost& c : profile_.stage) {
    st.push_back({{"wall_s", c.wall_s}, {"comm_s", c.comm_s}, {"cpu_s", c.cpu_s}});
  }
  j["profile"] = {{"stages", st},
                  {"cores", profile_.cores},
                  {"seq_batch_s", profile_.seq_batch_s},
                  {"on_batch_s", profile_.on_batch_s}};
  j["decided_at"] = {{"epoch", decided_epoch_}, {"step", decided_batch_}};
  return j;
}

EpochMetrics Pipeline::run_epoch(int64_t epoch) {
  CoordinatedCommunicator& main = coord_.channel(WorkerKind::kMain);
  main.set_step(epoch, -1);
  int64_t steps = 0;
  try {
    steps = sched_.agree_steps(main);
  } catch (const std::exception& e) {
    if (abort_on_error()) {
      coord_.abort_job(fmt::format("error on rank {} agreeing the steps of epoch {}: {}",
                                   coord_.rank(), epoch, e.what()));
    }
    throw;
  }
  const std::vector<int64_t> order = sched_.epoch_order(epoch);
  const double cpu0 = process_cpu_seconds(), comm_cpu0 = coord_.executor_cpu_seconds();
  EpochMetrics m;
  bool profiled = false;
  std::string ran;
  for (int64_t t = 0; t < steps;) {
    int64_t n = steps - t;
    PipelineMode mode = opts_.mode;
    const bool profiling = opts_.mode == PipelineMode::kAuto && phase_ < 3;
    if (opts_.mode == PipelineMode::kAuto) mode = next_segment(t, steps, &n);
    const StageShares& shares = opts_.mode == PipelineMode::kAuto ? plan_.shares : opts_.shares;
    EpochMetrics seg = mode == PipelineMode::kPipelined
                           ? run_pipelined(epoch, order, t, t + n, shares)
                           : run_sequential(epoch, order, t, t + n);
    seg.steps = t + n;  // the step where the segment ended
    add_segment(&m, seg, n);
    const char* r = name_of(mode);
    ran = ran.empty() || ran == r ? r : "mixed";
    if (profiling) {
      profiled = true;
      profile_segment(epoch, seg, n);
    }
    t += n;
  }
  m.cpu_s = process_cpu_seconds() - cpu0;
  m.comm_cpu_s = coord_.executor_cpu_seconds() - comm_cpu0;
  m.epoch = epoch;
  m.steps = steps;
  m.mode = opts_.mode;
  m.ran = profiled ? "profile" : ran;
  m.batches_per_s = m.wall_s > 0 ? static_cast<double>(steps) / m.wall_s : 0;
  DSP_DEBUG("pipeline", "epoch {}: {} steps in {:.3f} s ({})", epoch, steps, m.wall_s, m.ran);
  return m;
}

// Steps [g0, g1) of a sequential segment: sampled first when they are a read-ahead group, then
// loaded and trained one by one. *worker and *t name the stage and batch in hand.
void Pipeline::run_group(int64_t epoch, const std::vector<int64_t>& order, int64_t g0, int64_t g1,
                         EpochMetrics* m, const char** worker, int64_t* step) {
  CoordinatedCommunicator& cs = coord_.channel(WorkerKind::kSampler);
  CoordinatedCommunicator& cl = coord_.channel(WorkerKind::kLoader);
  CoordinatedCommunicator& ct = coord_.channel(WorkerKind::kTrainer);
  int64_t& t = *step;
  std::vector<SampledBatch> group(static_cast<size_t>(g1 - g0));
  for (t = g0; t < g1; ++t) {
    *worker = "sampler";
    StageTimer timer(&m->sampler.busy_s, &m->sampler.cpu_s, process_cpu_seconds);
    cs.set_step(epoch, t);
    SampledBatch& sb = group[static_cast<size_t>(t - g0)];
    sb = stages_.sample(epoch, t, sched_.batch_seeds(order, t));
    sb.epoch = epoch;
    sb.batch = t;
  }
  t = g0;
  if (opts_.read_ahead > 1) {
    *worker = "loader";
    StageTimer timer(&m->loader.busy_s, &m->loader.cpu_s, process_cpu_seconds);
    stages_.read_ahead(batch_pointers(group));
  }
  for (; t < g1; ++t) {
    LoadedBatch lb;
    {
      *worker = "loader";
      StageTimer timer(&m->loader.busy_s, &m->loader.cpu_s, process_cpu_seconds);
      cl.set_step(epoch, t);
      lb = stages_.load(std::move(group[static_cast<size_t>(t - g0)]));
      lb.sample.epoch = epoch;
      lb.sample.batch = t;
    }
    *worker = "trainer";
    StageTimer timer(&m->trainer.busy_s, &m->trainer.cpu_s, process_cpu_seconds);
    ct.set_step(epoch, t);
    stages_.train(std::move(lb));
  }
}

EpochMetrics Pipeline::run_sequential(int64_t epoch, const std::vector<int64_t>& order, int64_t t0,
                                      int64_t t1) {
  EpochMetrics m;
  CoordinatedCommunicator& cs = coord_.channel(WorkerKind::kSampler);
  CoordinatedCommunicator& cl = coord_.channel(WorkerKind::kLoader);
  CoordinatedCommunicator& ct = coord_.channel(WorkerKind::kTrainer);
  const double c0s = cs.wait_seconds(), c0l = cl.wait_seconds(), c0t = ct.wait_seconds();
  for (WorkerKind k : {WorkerKind::kSampler, WorkerKind::kLoader, WorkerKind::kTrainer}) {
    enter_stage(k, opts_.threads, {});
  }
  Stopwatch wall;
  const char* worker = "sampler";
  int64_t t = t0;  // the batch in hand
  try {
    for (int64_t g0 = t0; g0 < t1;) {
      const int64_t g1 =
          opts_.read_ahead > 1 ? std::min<int64_t>(t1, g0 + opts_.read_ahead) : g0 + 1;
      run_group(epoch, order, g0, g1, &m, &worker, &t);
      g0 = g1;
    }
    if (opts_.read_ahead > 1) stages_.read_ahead({});
  } catch (const std::exception& e) {
    if (abort_on_error()) {
      coord_.abort_job(fmt::format("error on rank {} in the {} (epoch {}, batch {}): {}",
                                   coord_.rank(), worker, epoch, t, e.what()));
    }
    throw;
  }
  m.wall_s = wall.seconds();
  m.sampler.batches = m.loader.batches = m.trainer.batches = t1 - t0;
  m.sampler.idle_s = m.wall_s - m.sampler.busy_s;
  m.loader.idle_s = m.wall_s - m.loader.busy_s;
  m.trainer.idle_s = m.wall_s - m.trainer.busy_s;
  m.sampler.comm_s = cs.wait_seconds() - c0s;
  m.loader.comm_s = cl.wait_seconds() - c0l;
  m.trainer.comm_s = ct.wait_seconds() - c0t;
  return m;
}

namespace {

// The sampler of a pipelined epoch: samples steps [*step, t1), each once the pace controller
// gives it its turn, and pushes them to the loader, closing the queue after the last. Returns
// early, the queue open, when the epoch is aborted. *step is the step in hand.
void sample_steps(const PipelineStages& stages, const EpochScheduler& sched,
                  const std::vector<int64_t>& order, CoordinatedCommunicator& cs, int64_t epoch,
                  int64_t t1, PaceController& pace, BoundedQueue<SampledBatch>& to_loader,
                  StageMetrics& sm, int64_t* step) {
  for (int64_t& t = *step; t < t1; ++t) {
    if (!pace.wait_turn()) return;  // aborted
    SampledBatch sb;
    {
      StageTimer timer(&sm.busy_s, &sm.cpu_s);
      cs.set_step(epoch, t);
      sb = stages.sample(epoch, t, sched.batch_seeds(order, t));
      sb.epoch = epoch;
      sb.batch = t;
    }
    ++sm.batches;
    pace.produced();
    if (!to_loader.push(std::move(sb))) return;  // aborted
  }
  to_loader.close();
}

// The loader of a pipelined epoch: loads every sampled batch and pushes it to the trainer,
// closing the queue after the last. With read-ahead groups (ahead > 1: steps t0 + k ahead on),
// it first waits for a group's batches (up to step t1) and hands them to stages.read_ahead. Returns
// early, the queue open, when the epoch is aborted. *step is the step in hand (-1 before the
// first).
void load_steps(const PipelineStages& stages, CoordinatedCommunicator& cl, int64_t epoch,
                int64_t t0, int64_t t1, int ahead, BoundedQueue<SampledBatch>& to_loader,
                BoundedQueue<LoadedBatch>& to_trainer, StageMetrics& lm, int64_t* step) {
  int64_t& t = *step;
  SampledBatch sb;
  for (;;) {
    const int64_t next = t0 + lm.batches;
    if (ahead > 1 && lm.batches % ahead == 0 && next < t1) {  // a group starts: steps t0 + k ahead
      const std::vector<const SampledBatch*> group =
          to_loader.peek(static_cast<size_t>(std::min<int64_t>(ahead, t1 - next)));
      t = next;
      StageTimer timer(&lm.busy_s, &lm.cpu_s);
      stages.read_ahead(group);
    }
    if (!to_loader.pop(&sb)) break;
    t = sb.batch;
    LoadedBatch lb;
    {
      StageTimer timer(&lm.busy_s, &lm.cpu_s);
      cl.set_step(epoch, t);
      lb = stages.load(std::move(sb));
      lb.sample.epoch = epoch;
      lb.sample.batch = t;
    }
    ++lm.batches;
    if (!to_trainer.push(std::move(lb))) return;
  }
  if (ahead > 1) stages.read_ahead({});
  to_trainer.close();
}

// The trainer of a pipelined epoch: trains every loaded batch, checking they come in step order
// from t0, and tells the pace controller whether it waited for each. *step is the step in hand
// (-1 before the first).
void train_steps(const PipelineStages& stages, CoordinatedCommunicator& ct, int64_t epoch,
                 int64_t t0, BoundedQueue<LoadedBatch>& to_trainer, PaceController& pace,
                 StageMetrics& tm, int64_t* step) {
  int64_t& t = *step;
  LoadedBatch lb;
  for (;;) {
    const bool starved = to_trainer.size() == 0;
    if (!to_trainer.pop(&lb)) break;
    t = lb.sample.batch;
    DSP_CHECK(t == t0 + tm.batches, "pipeline: trainer got batch {} when expecting {}", t,
              t0 + tm.batches);
    {
      StageTimer timer(&tm.busy_s, &tm.cpu_s);
      ct.set_step(epoch, t);
      stages.train(std::move(lb));
    }
    ++tm.batches;
    pace.consumed(starved && tm.batches > 1);  // the first batch always waits
  }
}

// A pipelined epoch's idle times (waits on its queues and on the pace controller), queue
// occupancies and the sampler's lead.
void record_queue_figures(const BoundedQueue<SampledBatch>& to_loader,
                          const BoundedQueue<LoadedBatch>& to_trainer, const PaceController& pace,
                          EpochMetrics* m) {
  m->sampler.idle_s = to_loader.push_wait_seconds() + pace.wait_seconds();
  m->loader.idle_s = to_loader.pop_wait_seconds() + to_trainer.push_wait_seconds();
  m->trainer.idle_s = to_trainer.pop_wait_seconds();
  m->load_queue_occupancy = to_loader.mean_occupancy();
  m->train_queue_occupancy = to_trainer.mean_occupancy();
  m->ahead_max = static_cast<int64_t>(pace.max_ahead());
  m->pace_throttles = pace.throttles();
}

}  // namespace

EpochMetrics Pipeline::run_pipelined(int64_t epoch, const std::vector<int64_t>& order, int64_t t0,
                                     int64_t t1, const StageShares& shares) {
  EpochMetrics m;
  CoordinatedCommunicator& cs = coord_.channel(WorkerKind::kSampler);
  CoordinatedCommunicator& cl = coord_.channel(WorkerKind::kLoader);
  CoordinatedCommunicator& ct = coord_.channel(WorkerKind::kTrainer);
  const double c0s = cs.wait_seconds(), c0l = cl.wait_seconds(), c0t = ct.wait_seconds();
  // Read-ahead groups: the sampler's queue holds a group, and the sampler keeps its lead unpaced
  // (the loader waits for the whole group before it loads the first).
  const int ahead = opts_.read_ahead;
  BoundedQueue<SampledBatch> to_loader(
      std::max<size_t>(opts_.queue_capacity, static_cast<size_t>(ahead)));
  BoundedQueue<LoadedBatch> to_trainer(opts_.queue_capacity);
  // The sampler can be ahead by both queues plus the batch each later worker holds. Only the
  // leader paces its sampler: a follower runs its collectives in the leader's launch order, so
  // the leader's lead bounds every rank's; a follower that throttled on its own could hold back a
  // sampler op the leader ordered before one of its trainer's, and its trainer would then wait
  // behind that op while the sampler waits for the trainer (DSP section 2.7's deadlock again).
  PaceController pace(to_loader.capacity() + opts_.queue_capacity + 2, opts_.pace_window,
                      opts_.pace && ahead <= 1 && coord_.rank() == 0);
  FirstFailure failure;
  const bool abort_job = abort_on_error();

  // Called from a worker's catch block: the first failure wins; unblock everyone; with peers,
  // end the job right here (they may be waiting on a collective of this very worker).
  auto fail = [&](const char* worker, int64_t batch) {
    std::exception_ptr ep = std::current_exception();
    std::string msg = fmt::format("error on rank {} in the {} (epoch {}, batch {}): {}",
                                  coord_.rank(), worker, epoch, batch, describe(ep));
    failure.set(ep, msg);
    to_loader.abort();
    to_trainer.abort();
    pace.abort();
    if (abort_job) coord_.abort_job(msg);
  };

  Stopwatch wall;
  std::thread sampler([&] {
    int64_t t = t0;
    try {
      enter_stage(WorkerKind::kSampler, shares.threads[0], shares.cpus[0]);
      sample_steps(stages_, sched_, order, cs, epoch, t1, pace, to_loader, m.sampler, &t);
    } catch (...) {
      fail("sampler", t);
    }
  });
  std::thread loader([&] {
    int64_t t = -1;
    try {
      enter_stage(WorkerKind::kLoader, shares.threads[1], shares.cpus[1]);
      load_steps(stages_, cl, epoch, t0, t1, ahead, to_loader, to_trainer, m.loader, &t);
    } catch (...) {
      fail("loader", t);
    }
  });
  std::thread trainer([&] {
    int64_t t = -1;
    try {
      enter_stage(WorkerKind::kTrainer, shares.threads[2], shares.cpus[2]);
      train_steps(stages_, ct, epoch, t0, to_trainer, pace, m.trainer, &t);
    } catch (...) {
      fail("trainer", t);
    }
  });
  sampler.join();
  loader.join();
  trainer.join();
  m.wall_s = wall.seconds();
  if (failure.error) std::rethrow_exception(failure.error);
  DSP_CHECK(m.trainer.batches == t1 - t0, "pipeline: epoch {} trained {} of {} batches", epoch,
            m.trainer.batches, t1 - t0);
  record_queue_figures(to_loader, to_trainer, pace, &m);
  m.sampler.comm_s = cs.wait_seconds() - c0s;
  m.loader.comm_s = cl.wait_seconds() - c0l;
  m.trainer.comm_s = ct.wait_seconds() - c0t;
  return m;
}

}  // namespace dsp
