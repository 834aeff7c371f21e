#include "ccc/communicator.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "ccc/mpi/mpi_communicator.hpp"
#include "ccc/self_communicator.hpp"
#include "core/error.hpp"
#include "core/logging.hpp"

namespace dsp {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "?";
}

uint64_t CommCounters::total_sent() const {
  uint64_t s = 0;
  for (auto b : bytes_sent) s += b;
  return s;
}
uint64_t CommCounters::total_recv() const {
  uint64_t s = 0;
  for (auto b : bytes_recv) s += b;
  return s;
}

void Communicator::abort_job(const std::string& message) {
  static std::atomic<bool> printed{false};
  if (!printed.exchange(true)) {
    std::string line = fmt::format("dsp: {}\n", message);
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  }
  std::_Exit(1);
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"}) {
    if (std::getenv(v)) return true;
  }
  return false;
}

std::unique_ptr<Communicator> make_communicator(const std::string& backend,
                                                const CommOptions& opts) {
  std::string b = backend;
  if (b == "auto") b = launched_by_mpi() ? "mpi" : "self";
  std::unique_ptr<Communicator> c;
  if (b == "self") {
    c = std::make_unique<SelfCommunicator>(opts);
  } else if (b == "mpi") {
    c = std::make_unique<MpiCommunicator>(opts);
  } else if (b == "nccl") {
    DSP_THROW_T(InvalidArgument,
                "communicator backend 'nccl' is made by make_nccl_communicator (CUDA build), "
                "bootstrapped over an 'mpi' communicator");
  } else {
    DSP_THROW_T(InvalidArgument, "unknown communicator backend '{}' (auto|self|mpi)", backend);
  }
  set_log_rank(c->rank(), c->size());
  DSP_DEBUG("ccc", "communicator '{}': rank {} of {}", c->backend(), c->rank(), c->size());
  return c;
}

}  // namespace dsp
