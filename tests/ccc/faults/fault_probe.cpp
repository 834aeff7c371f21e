// One fault case of the conformance suite (conformance_faults.hpp) on one host backend:
//   ccc_fault_probe BACKEND CASE CULPRIT
// BACKEND: self (no launcher), mpi, or staged (the device-space communicator staged over MPI, host
// memory standing in for the device's). Run by ctest through expect_fault.sh, under mpiexec for
// mpi and staged; timeouts come from DSP_COMM_TIMEOUT.
#include <cstdio>
#include <memory>
#include <string>

#include "ccc/communicator.hpp"
#include "ccc/conformance_faults.hpp"
#include "ccc/staged_communicator.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: ccc_fault_probe self|mpi|staged %s CULPRIT\n",
                 dsp::test::fault_case_names());
    return 2;
  }
  const std::string backend = argv[1];
  std::unique_ptr<dsp::Communicator> comm;
  if (backend == "staged") {
    comm = dsp::make_staged_communicator(dsp::make_communicator("mpi"), dsp::make_host_staging());
  } else {
    comm = dsp::make_communicator(backend);
  }
  dsp::test::HostBuffers host;
  return dsp::test::run_fault_case(*comm, host, argv[2], std::stoi(argv[3]));
}
