// Runs the stand-in pipeline under mpiexec in a mode whose whole-job outcome ctest checks from
// the outside (expect_failure.sh):
//   pipeline_probe fail <rank> <sampler|loader|trainer> <batch>
//     that worker of that rank throws at that batch: every rank must end, exit != 0, within a
//     bounded time, with the error printed once;
//   pipeline_probe ccc-off
//     the workers' collectives bypass the coordinator (--ccc off): ranks launch them in different
//     orders and deadlock, which the communicator timeout (DSP_COMM_TIMEOUT) turns into an abort.
//     Printing "completed without deadlock" means the demonstration failed.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ccc/coordinator.hpp"
#include "core/error.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/scheduler.hpp"
#include "pipeline/standin.hpp"

int main(int argc, char** argv) {
  using namespace dsp;
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "fail" && mode != "ccc-off") {
    std::fprintf(stderr, "usage: pipeline_probe fail <rank> <worker> <batch> | ccc-off\n");
    return 2;
  }
  const bool fail = mode == "fail";
  if (fail && argc != 5) {
    std::fprintf(stderr, "usage: pipeline_probe fail <rank> <worker> <batch>\n");
    return 2;
  }
  CoordinatorOptions co;
  co.ccc = !fail ? false : true;
  auto coord = make_coordinator("mpi", co);
  const int r = coord->rank(), P = coord->size();
  test::StandInConfig cfg;
  cfg.max_delay_us = 500;
  test::StandIn si(*coord, cfg);
  std::vector<int64_t> seeds;
  for (int64_t i = 0; i < 800; ++i) seeds.push_back(i * P + r);
  EpochScheduler sched(seeds, 4, 1);
  PipelineStages st = si.stages();
  if (fail) {
    const int fail_rank = std::atoi(argv[2]);
    const std::string worker = argv[3];
    const int64_t fail_batch = std::atoll(argv[4]);
    auto boom = [=](const char* w, int64_t b) {
      if (r == fail_rank && worker == w && b == fail_batch) {
        DSP_THROW("injected failure in {} on rank {} at batch {}", w, r, b);
      }
    };
    auto sample = st.sample;
    auto load = st.load;
    auto train = st.train;
    st.sample = [=](int64_t e, int64_t b, const std::vector<int64_t>& s) {
      boom("sampler", b);
      return sample(e, b, s);
    };
    st.load = [=](SampledBatch&& sb) {
      boom("loader", sb.batch);
      return load(std::move(sb));
    };
    st.train = [=](LoadedBatch&& lb) {
      boom("trainer", lb.sample.batch);
      train(std::move(lb));
    };
  }
  Pipeline p(*coord, sched, st);
  for (int e = 0; e < 3; ++e) p.run_epoch(e);
  std::printf("rank %d: completed without %s\n", r, fail ? "the injected failure" : "deadlock");
  return 0;
}
