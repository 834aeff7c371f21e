#pragma once
// How a process of dsp's CLI ends at an interrupt (SIGINT: Ctrl-C, or SIGTERM: a scheduler, a
// launcher): one line on stderr, "dsp: interrupted<note>", and exit status 128 + the signal (130,
// 143); nothing half-written is left looking valid, because every output is written under a
// temporary name and renamed into place (core/fs.hpp), and the temporary names of a process that
// is gone are removed by the next writer of that output.
//
// The note says where the work stood: the training job keeps it current (" after epoch 3 of 10;
// continue from the checkpoint of epoch 3 with the same command and --resume auto"). On a rank
// of a multi-rank job the MPI runtime handles these signals instead (ccc/mpi/mpi_runtime.hpp):
// every rank ends, and the lowest rank prints this line once when no rank vanished.
#include <string>

namespace dsp {

// Replaces the note (at most 1000 bytes are kept). Thread-safe; not for signal handlers.
void set_interrupt_note(const std::string& note);
// "interrupted" followed by the current note: the line without "dsp: ".
std::string interrupt_message();
// Writes "dsp: <interrupt_message()>\n" to stderr with write(2) only: async-signal-safe.
void write_interrupt_line();
// Installs SIGINT and SIGTERM handlers that write the line (unless `quiet`: a launcher's rank
// other than 0, before the job's communicator exists) and _exit(128 + signal). For the CLI's
// main (a library embedded in a program, such as the Python module, leaves its host's handlers
// alone).
void install_interrupt_handlers(bool quiet);

}  // namespace dsp
