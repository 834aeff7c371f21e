#include "pipeline/pipeline.hpp"

#include <exception>
#include <mutex>
#include <thread>

#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/timer.hpp"
#include "pipeline/bounded_queue.hpp"

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

PipelineMode parse_pipeline_mode(const std::string& s) {
  if (s == "on" || s == "pipelined") return PipelineMode::kPipelined;
  if (s == "off" || s == "sequential") return PipelineMode::kSequential;
  DSP_THROW_T(InvalidArgument, "unknown pipeline mode '{}' (on|off)", s);
}

const char* pipeline_mode_name(PipelineMode m) {
  return m == PipelineMode::kPipelined ? "on" : "off";
}

nlohmann::json StageMetrics::to_json() const {
  return {{"busy_s", busy_s}, {"idle_s", idle_s}, {"comm_s", comm_s}, {"batches", batches}};
}

nlohmann::json EpochMetrics::to_json() const {
  return {{"epoch", epoch},
          {"steps", steps},
          {"mode", pipeline_mode_name(mode)},
          {"wall_s", wall_s},
          {"batches_per_s", batches_per_s},
          {"stages",
           {{"sampler", sampler.to_json()},
            {"loader", loader.to_json()},
            {"trainer", trainer.to_json()}}},
          {"queues", {{"load", load_queue_occupancy}, {"train", train_queue_occupancy}}}};
}

Pipeline::Pipeline(Coordinator& coord, EpochScheduler& sched, PipelineStages stages,
                   PipelineOptions opts)
    : coord_(coord), sched_(sched), stages_(std::move(stages)), opts_(opts) {
  DSP_CHECK_ARG(stages_.sample && stages_.load && stages_.train,
                "pipeline: sample, load and train stages are all required");
  DSP_CHECK_ARG(opts_.queue_capacity >= 1, "pipeline: queue capacity must be >= 1, got {}",
                opts_.queue_capacity);
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
  EpochMetrics m = opts_.mode == PipelineMode::kPipelined ? run_pipelined(epoch, order, steps)
                                                          : run_sequential(epoch, order, steps);
  m.epoch = epoch;
  m.steps = steps;
  m.mode = opts_.mode;
  m.batches_per_s = m.wall_s > 0 ? static_cast<double>(steps) / m.wall_s : 0;
  DSP_DEBUG("pipeline", "epoch {}: {} steps in {:.3f} s ({})", epoch, steps, m.wall_s,
            pipeline_mode_name(opts_.mode));
  return m;
}

EpochMetrics Pipeline::run_sequential(int64_t epoch, const std::vector<int64_t>& order,
                                      int64_t steps) {
  EpochMetrics m;
  CoordinatedCommunicator& cs = coord_.channel(WorkerKind::kSampler);
  CoordinatedCommunicator& cl = coord_.channel(WorkerKind::kLoader);
  CoordinatedCommunicator& ct = coord_.channel(WorkerKind::kTrainer);
  const double c0s = cs.wait_seconds(), c0l = cl.wait_seconds(), c0t = ct.wait_seconds();
  Stopwatch wall;
  const char* worker = "sampler";
  int64_t t = 0;
  try {
    for (; t < steps; ++t) {
      SampledBatch sb;
      {
        worker = "sampler";
        ScopedTimer timer(&m.sampler.busy_s);
        cs.set_step(epoch, t);
        sb = stages_.sample(epoch, t, sched_.batch_seeds(order, t));
        sb.epoch = epoch;
        sb.batch = t;
      }
      LoadedBatch lb;
      {
        worker = "loader";
        ScopedTimer timer(&m.loader.busy_s);
        cl.set_step(epoch, t);
        lb = stages_.load(std::move(sb));
        lb.sample.epoch = epoch;
        lb.sample.batch = t;
      }
      {
        worker = "trainer";
        ScopedTimer timer(&m.trainer.busy_s);
        ct.set_step(epoch, t);
        stages_.train(std::move(lb));
      }
    }
  } catch (const std::exception& e) {
    if (abort_on_error()) {
      coord_.abort_job(fmt::format("error on rank {} in the {} (epoch {}, batch {}): {}",
                                   coord_.rank(), worker, epoch, t, e.what()));
    }
    throw;
  }
  m.wall_s = wall.seconds();
  m.sampler.batches = m.loader.batches = m.trainer.batches = steps;
  m.sampler.idle_s = m.wall_s - m.sampler.busy_s;
  m.loader.idle_s = m.wall_s - m.loader.busy_s;
  m.trainer.idle_s = m.wall_s - m.trainer.busy_s;
  m.sampler.comm_s = cs.wait_seconds() - c0s;
  m.loader.comm_s = cl.wait_seconds() - c0l;
  m.trainer.comm_s = ct.wait_seconds() - c0t;
  return m;
}

EpochMetrics Pipeline::run_pipelined(int64_t epoch, const std::vector<int64_t>& order,
                                     int64_t steps) {
  EpochMetrics m;
  CoordinatedCommunicator& cs = coord_.channel(WorkerKind::kSampler);
  CoordinatedCommunicator& cl = coord_.channel(WorkerKind::kLoader);
  CoordinatedCommunicator& ct = coord_.channel(WorkerKind::kTrainer);
  const double c0s = cs.wait_seconds(), c0l = cl.wait_seconds(), c0t = ct.wait_seconds();
  BoundedQueue<SampledBatch> to_loader(opts_.queue_capacity);
  BoundedQueue<LoadedBatch> to_trainer(opts_.queue_capacity);
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
    if (abort_job) coord_.abort_job(msg);
  };

  Stopwatch wall;
  std::thread sampler([&] {
    int64_t t = 0;
    try {
      for (; t < steps; ++t) {
        SampledBatch sb;
        {
          ScopedTimer timer(&m.sampler.busy_s);
          cs.set_step(epoch, t);
          sb = stages_.sample(epoch, t, sched_.batch_seeds(order, t));
          sb.epoch = epoch;
          sb.batch = t;
        }
        ++m.sampler.batches;
        if (!to_loader.push(std::move(sb))) return;  // aborted
      }
      to_loader.close();
    } catch (...) {
      fail("sampler", t);
    }
  });
  std::thread loader([&] {
    int64_t t = -1;
    try {
      SampledBatch sb;
      while (to_loader.pop(&sb)) {
        t = sb.batch;
        LoadedBatch lb;
        {
          ScopedTimer timer(&m.loader.busy_s);
          cl.set_step(epoch, t);
          lb = stages_.load(std::move(sb));
          lb.sample.epoch = epoch;
          lb.sample.batch = t;
        }
        ++m.loader.batches;
        if (!to_trainer.push(std::move(lb))) return;
      }
      to_trainer.close();
    } catch (...) {
      fail("loader", t);
    }
  });
  std::thread trainer([&] {
    int64_t t = -1;
    try {
      LoadedBatch lb;
      while (to_trainer.pop(&lb)) {
        t = lb.sample.batch;
        DSP_CHECK(t == m.trainer.batches, "pipeline: trainer got batch {} when expecting {}", t,
                  m.trainer.batches);
        {
          ScopedTimer timer(&m.trainer.busy_s);
          ct.set_step(epoch, t);
          stages_.train(std::move(lb));
        }
        ++m.trainer.batches;
      }
    } catch (...) {
      fail("trainer", t);
    }
  });
  sampler.join();
  loader.join();
  trainer.join();
  m.wall_s = wall.seconds();
  if (failure.error) std::rethrow_exception(failure.error);
  DSP_CHECK(m.trainer.batches == steps, "pipeline: epoch {} trained {} of {} batches", epoch,
            m.trainer.batches, steps);
  m.sampler.idle_s = to_loader.push_wait_seconds();
  m.loader.idle_s = to_loader.pop_wait_seconds() + to_trainer.push_wait_seconds();
  m.trainer.idle_s = to_trainer.pop_wait_seconds();
  m.load_queue_occupancy = to_loader.mean_occupancy();
  m.train_queue_occupancy = to_trainer.mean_occupancy();
  m.sampler.comm_s = cs.wait_seconds() - c0s;
  m.loader.comm_s = cl.wait_seconds() - c0l;
  m.trainer.comm_s = ct.wait_seconds() - c0t;
  return m;
}

}  // namespace dsp
