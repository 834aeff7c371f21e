// The host communicator backends by name. Each backend's factory lives beside it
// (self_communicator.hpp, mpi/mpi_communicator.hpp; NCCL's in cuda/nccl_communicator.hpp, made
// over a bootstrap communicator by the rank's backends, pipeline/rank/backends.hpp); a new host
// backend adds its line to kBackends and passes tests/ccc/conformance.hpp.
#include <cstdlib>

#include "ccc/communicator.hpp"
#include "ccc/mpi/mpi_communicator.hpp"
#include "ccc/self_communicator.hpp"
#include "core/error.hpp"
#include "core/logging.hpp"

namespace dsp {
namespace {

struct HostBackend {
  const char* name;
  std::unique_ptr<Communicator> (*make)(const CommOptions&);
};

constexpr HostBackend kBackends[] = {
    {"self", make_self_communicator},
    {"mpi", make_mpi_communicator},
};

}  // namespace

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"}) {
    if (std::getenv(v)) return true;
  }
  return false;
}

std::unique_ptr<Communicator> make_communicator(const std::string& backend,
                                                const CommOptions& opts) {
  const std::string b = backend == "auto" ? (launched_by_mpi() ? "mpi" : "self") : backend;
  DSP_CHECK_ARG(b != "nccl",
                "communicator backend 'nccl' is made by make_nccl_communicator (CUDA build), "
                "bootstrapped over an 'mpi' communicator");
  for (const HostBackend& hb : kBackends) {
    if (b != hb.name) continue;
    std::unique_ptr<Communicator> c = hb.make(opts);
    set_log_rank(c->rank(), c->size());
    DSP_DEBUG("ccc", "communicator '{}': rank {} of {}", c->backend(), c->rank(), c->size());
    return c;
  }
  DSP_THROW_T(InvalidArgument, "unknown communicator backend '{}' (auto|self|mpi)", backend);
}

}  // namespace dsp
