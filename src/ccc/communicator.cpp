#include "ccc/communicator.hpp"

#include <cstdlib>

#include "core/error.hpp"

namespace dsp {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
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

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"}) {
    if (std::getenv(v)) return true;
  }
  return false;
}

}  // namespace dsp
