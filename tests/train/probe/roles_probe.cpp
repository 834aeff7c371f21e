// Trains two epochs of GraphSAGE through the pipeline under mpiexec, either symmetric (DSP: every
// rank samples, loads and trains its part) or in GNNLab's factored roles (pipeline/roles.hpp), and
// prints what a user relies on, for roles_equal.sh to compare across runs:
//   batch <slot> <epoch> <batch> <digest>   every batch trained (blocks, features, labels), one
//                                           line each, from the rank that trained it; the slot is
//                                           the symmetric rank whose batch it is
//   params <digest>                         the model after training (rank 0; every replica,
//                                           sampler ranks' included, must be bit-identical)
//   switched <n>                            batches sampler ranks trained themselves (stderr)
// Usage: roles_probe PARTITION SAMPLERS [SWITCH] [fail|failtrain <rank> <batch>]
//   SAMPLERS 0: symmetric over a partition with one part per rank (SWITCH `ordered`: its gradients
//   reduced by Trainer::train_slots, slot = rank); S >= 1: the last S ranks sample for the others,
//   SWITCH off (default), never, on or always (pipeline/roles.hpp). `fail`: that rank's sampler
//   stage throws at that batch (epoch 1); `failtrain`: that rank throws when it trains a batch of
//   that step (epoch 1), which a sampler rank only does after switching.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ccc/coordinator.hpp"
#include "core/error.hpp"
#include "csp/sampler.hpp"
#include "layout/store/feature_store.hpp"
#include "pipeline/load_batch.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/roles.hpp"
#include "train/trainer.hpp"

namespace {

using namespace dsp;

uint64_t fnv(uint64_t h, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}

template <class T>
uint64_t fnv_vec(uint64_t h, const std::vector<T>& v) {
  return fnv(h, v.data(), v.size() * sizeof(T));
}

uint64_t digest(const LoadedBatch& b) {
  uint64_t h = fnv_vec(14695981039346656037ULL, b.sample.seeds);
  for (const Block& k : b.sample.blocks) {
    h = fnv_vec(fnv_vec(fnv_vec(h, k.indptr), k.indices), k.src_ids);
  }
  return fnv_vec(fnv_vec(h, b.features), b.labels);
}

int run(int argc, char** argv) {
  if (argc != 3 && argc != 4 && argc != 7) {
    std::fprintf(stderr,
                 "usage: roles_probe PARTITION SAMPLERS [SWITCH] [fail|failtrain <rank> "
                 "<batch>]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int samplers = std::atoi(argv[2]);
  const std::string sw = argc >= 4 ? argv[3] : "off";
  const bool ordered = samplers == 0 && sw == "ordered";
  const RoleSwitch switching = samplers == 0 ? RoleSwitch::kOff : parse_choice<RoleSwitch>(sw);
  const std::string fail_where = argc == 7 ? argv[4] : "";
  const int fail_rank = argc == 7 ? std::atoi(argv[5]) : -1;
  const int64_t fail_batch = argc == 7 ? std::atoll(argv[6]) : -1;
  auto coord = make_coordinator("mpi");
  const int rank = coord->rank(), P = coord->size();
  const PartitionMeta meta = load_partition_meta(dir);
  SamplerOptions so;
  so.fanouts = {5, 5};
  so.seed = 7;
  TrainConfig tc;
  tc.model.model = ModelKind::kSage;
  tc.model.hidden = 16;
  tc.model.in_dim = meta.feature_dim;
  tc.model.out_dim = meta.num_classes;
  tc.model.layers = 2;
  tc.seed = 3;
  tc.num_threads = 1;
  Trainer trainer(tc, coord->channel(WorkerKind::kTrainer));
  const int64_t batch_size = 32;

  std::vector<std::string> lines;
  int64_t switched = 0;
  auto record = [&](int slot, const LoadedBatch& lb) {
    if (lb.sample.seeds.empty()) return;
    lines.push_back(
        fmt::format("batch {} {} {} {:016x}", slot, lb.sample.epoch, lb.sample.batch, digest(lb)));
    if (rank >= P - samplers && samplers > 0) ++switched;
    if (fail_where == "failtrain" && rank == fail_rank && lb.sample.epoch == 1 &&
        lb.sample.batch == fail_batch) {
      DSP_THROW("injected failure in rank {} training slot {} at batch {}", rank, slot,
                lb.sample.batch);
    }
  };
  auto train = [&](LoadedBatch&& lb) {
    record(rank, lb);
    if (ordered) {
      trainer.train_slots({{rank, &lb}}, P);
    } else {
      trainer.train_step(lb);
    }
  };
  auto train_slots = [&](SlotBatches&& mine, int slots) {
    std::vector<Trainer::SlotBatch> sb;
    for (const auto& [slot, lb] : mine) {
      record(slot, lb);
      sb.push_back({slot, &lb});
    }
    trainer.train_slots(sb, slots);
  };
  auto boom = [rank, fail_where, fail_rank, fail_batch](int64_t epoch, int64_t batch) {
    if (fail_where == "fail" && rank == fail_rank && epoch == 1 && batch == fail_batch) {
      DSP_THROW("injected failure in the sampler-only rank {} at batch {}", rank, batch);
    }
  };
  PipelineOptions po;
  po.threads = 1;
  // Symmetric: this rank's part, collective sampling and gathers.
  std::unique_ptr<PartitionData> part;
  std::unique_ptr<CollectiveSampler> sampler;
  std::unique_ptr<FeatureStore> store;
  RoleRank role;
  std::unique_ptr<EpochScheduler> sym;
  PipelineStages st;
  EpochScheduler* sched = nullptr;
  if (samplers == 0) {
    part = std::make_unique<PartitionData>(load_partition(dir, rank, P));
    sampler = std::make_unique<CollectiveSampler>(*part, coord->channel(WorkerKind::kSampler), so);
    store = std::make_unique<FeatureStore>(*part, coord->channel(WorkerKind::kLoader));
    std::vector<int64_t> seeds(part->seeds.data<int64_t>(),
                               part->seeds.data<int64_t>() + part->seeds.dim(0));
    sym = std::make_unique<EpochScheduler>(seeds, batch_size, 11);
    sched = sym.get();
    st.sample = [&](int64_t e, int64_t b, const std::vector<int64_t>& s) {
      return sampler->sample(s, e, b);
    };
    st.load = [&](SampledBatch&& sb) {
      return load_batch(std::move(sb), store.get(), part->labels);
    };
    st.train = train;
  } else {
    RoleLayout layout{P, samplers};
    layout.switching = switching;
    role = make_role_rank(*coord, dir, layout, batch_size, 11, so, train, {}, train_slots);
    sched = &role.roles->scheduler();
    st = role.roles->stages();
    auto sample = st.sample;
    st.sample = [=](int64_t e, int64_t b, const std::vector<int64_t>& s) {
      boom(e, b);
      return sample(e, b, s);
    };
  }
  Pipeline p(*coord, *sched, st, po);
  for (int e = 0; e < 2; ++e) p.run_epoch(e);
  for (const std::string& l : lines) std::printf("%s\n", l.c_str());
  if (switched > 0) {
    std::fprintf(stderr, "rank %d switched %ld\n", rank, static_cast<long>(switched));
  }
  // Every replica equals rank 0's.
  std::vector<float> mine = trainer.state().flat_parameters();
  std::vector<float> all(mine.size() * P);
  CoordinatedCommunicator& m = coord->channel(WorkerKind::kMain);
  m.set_step(99, 0);
  m.all_gather(mine.data(), all.data(), static_cast<int64_t>(mine.size()), DType::kFloat32);
  for (int q = 1; q < P; ++q) {
    DSP_CHECK(std::memcmp(all.data(), all.data() + q * mine.size(), mine.size() * 4) == 0,
              "rank {}'s model differs from rank 0's", q);
  }
  if (rank == 0) std::printf("params %016lx\n", static_cast<unsigned long>(fnv_vec(1, mine)));
  std::fflush(stdout);
  m.barrier();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "roles_probe: error: %s\n", e.what());
    return 1;
  }
}
