// The host communicator backends by name. Each backend's factory lives beside it
// (self_communicator.hpp, mpi/mpi_communicator.hpp; NCCL's in cuda/nccl_communicator.hpp, made
// over a bootstrap communicator by the rank's backends, pipeline/rank/backends.hpp); a new host
// backend adds its line to kBackends and passes tests/ccc/conformance.hpp. Backends defined
// outside ccc (the Python module's "torch") register themselves at run time.
#include <cstdlib>
#include <map>
#include <mutex>

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

// Registered backends, process-wide; only the factory's lookup holds the lock.
struct Registered {
  std::mutex mu;
  std::map<std::string, CommunicatorFactory> factories;
};

Registered& registered() {
  static Registered* r = new Registered;  // never destroyed: communicators may outlive statics
  return *r;
}

CommunicatorFactory find_registered(const std::string& name) {
  Registered& r = registered();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.factories.find(name);
  return it == r.factories.end() ? CommunicatorFactory{} : it->second;
}

std::unique_ptr<Communicator> announced(std::unique_ptr<Communicator> c) {
  set_log_rank(c->rank(), c->size());
  DSP_DEBUG("ccc", "communicator '{}': rank {} of {}", c->backend(), c->rank(), c->size());
  return c;
}

}  // namespace

void register_communicator_backend(const std::string& name, CommunicatorFactory factory) {
  DSP_CHECK_ARG(name != "auto" && name != "nccl" && name != "self" && name != "mpi" && factory,
                "register_communicator_backend: '{}' is a built-in backend name or the factory is "
                "empty",
                name);
  Registered& r = registered();
  std::lock_guard<std::mutex> lock(r.mu);
  r.factories[name] = std::move(factory);
}

bool is_communicator_backend(const std::string& name) {
  if (name == "auto") return true;
  for (const HostBackend& hb : kBackends) {
    if (name == hb.name) return true;
  }
  return static_cast<bool>(find_registered(name));
}

std::string communicator_backend_names() {
  std::string s = "auto";
  for (const HostBackend& hb : kBackends) s += std::string("|") + hb.name;
  Registered& r = registered();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const auto& [name, f] : r.factories) s += "|" + name;
  return s;
}

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
    if (b == hb.name) return announced(hb.make(opts));
  }
  if (CommunicatorFactory f = find_registered(b)) return announced(f(opts));
  DSP_THROW_T(InvalidArgument, "unknown communicator backend '{}' ({})", backend,
              communicator_backend_names());
}

}  // namespace dsp
