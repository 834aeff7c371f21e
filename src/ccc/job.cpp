#include "ccc/job.hpp"

#include <cstdio>
#include <cstdlib>

#include "ccc/mpi/mpi_communicator.hpp"
#include "core/error.hpp"

namespace dsp {

bool job_has_peers() { return MpiCommunicator::job_size() > 1; }

int job_rank() { return job_has_peers() ? MpiCommunicator::job_rank() : 0; }

void abort_job(const std::string& message, int exit_code) {
  if (job_has_peers()) MpiCommunicator::abort_process(message, exit_code);
  std::fflush(stdout);
  std::fprintf(stderr, "dsp: %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(exit_code);
}

}  // namespace dsp
