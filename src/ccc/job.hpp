#pragma once
// The process as one rank of a job, for code that is not a communicator: the CLI's error exit and
// the Python module's uncaught-exception hook. A rank that fails must end every rank at once
// (its peers may wait in a collective it will never join): these say whether there are peers and
// end the job with one message.
#include <string>

namespace dsp {

// True while this process is one rank of a job of more than one rank with live communication
// (dsp created an MPI communicator, and MPI is not finalized). Never initializes MPI.
bool job_has_peers();
// This process's rank in that job (0 when there are no peers).
int job_rank();

// Ends the job because of a failure on this rank: prints "dsp: <message>" once on stderr, then,
// with peers, tells them this rank is ending the job (so they stay silent) and aborts every rank
// (MPI_Abort, exit code `exit_code`); without peers it exits with `exit_code`. Never returns.
[[noreturn]] void abort_job(const std::string& message, int exit_code = 1);

}  // namespace dsp
