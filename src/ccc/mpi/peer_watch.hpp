#pragma once
// Liveness of a job's ranks without MPI (mpi_runtime.cpp starts it when dsp initializes MPI for a
// job of several ranks). Every pair of ranks holds one TCP connection, made at initialization and
// watched by a thread of its own. A rank writes one byte on all of them before it goes:
// 'B' (finished normally), 'A' (ends the job and said why), 'T' (the launcher ends it: from the
// SIGTERM handler, so async-signal-safe). A connection that closes without one belongs to a rank
// that vanished (killed by a signal, crashed, its process gone), which the kernel tells at once.
// MPI cannot tell it in time: over TCP, OpenMPI's transport blocks the survivor's communication
// thread on the dropped connection (it waits for the launcher to relay a help message) until the
// launcher kills the survivor, so the SIGTERM probe of mpi_runtime.hpp never runs. A pair that
// cannot connect (no common network) is logged and left unwatched.
#include <mpi.h>

#include <functional>
#include <string>
#include <vector>

namespace dsp::peer_watch {

// Called on the watch thread, once, with the ranks whose connections closed without a mark (in
// the first 50 ms after the first one), unless a peer marked 'A' or 'T' before.
using VanishedFn = std::function<void(const std::vector<int>& gone)>;

// Collective over `comm` (every rank of the job, on the thread that makes MPI calls). Returns every
// rank's host name, by rank.
std::vector<std::string> start(MPI_Comm comm, int rank, int size, VanishedFn on_vanished);
// Writes `c` on every connection ('B', 'A' or 'T'); async-signal-safe. Later marks are ignored by
// the peers, which act on the first.
void mark(char c);
// A peer marked 'A' or 'T': the job is ending for a reason someone else reports.
bool peer_ending();
// The watch knows that `rank` vanished (its connection closed without a mark).
bool vanished(int rank);

}  // namespace dsp::peer_watch
