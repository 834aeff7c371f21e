#pragma once
// The fault cases of the communicator conformance suite (ccc/conformance.hpp), written once
// against Communicator&: what communicator.hpp promises when a job goes wrong.
//   timeout       rank C never joins op #2 (an all_reduce in the communicator's memory space): the
//                 other ranks end the job within the op timeout plus the backend's grace, with one
//                 message naming the op and rank C.
//   abort         rank C calls abort_job while its peers wait in a collective it never joins: every
//                 rank ends within seconds, the message printed once, exit code 1.
//   abort-thread  rank C calls abort_job from a thread of its own while its main thread waits in a
//                 collective that its peers never join.
//   vanish        rank C is killed (SIGKILL) while its peers wait in a collective: the lowest other
//                 rank names it and its host at once (mpi backend: ccc/mpi/peer_watch.hpp).
// Each case ends the job, so it runs in a process of its own: a probe's main (faults/
// fault_probe.cpp; cuda/test_nccl.cpp --fault) calls run_fault_case on every rank, and
// faults/expect_fault.sh checks the exit code, the time and the one message from outside.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "ccc/comm_buffers.hpp"
#include "ccc/communicator.hpp"

namespace dsp::test {

// Longer than any bound the checks allow: a rank that sleeps this long has "never arrived".
inline constexpr std::chrono::seconds kNeverArrives{60};

inline const char* fault_case_names() { return "timeout|abort|abort-thread|vanish"; }

// The label of the op rank `culprit` never joins (checked verbatim in the timeout message).
inline std::string fault_label(int culprit) {
  return "conformance: rank " + std::to_string(culprit) + " never arrives";
}

// Op #2 of the timeout case: an all_reduce of device-space buffers where the backend has them,
// completed (synchronize) as a caller that reads the result would.
inline void fault_all_reduce(Communicator& c, CommBuffers& mem, const OpOptions& o) {
  std::vector<int64_t> v(1000, c.rank());
  void* buf = mem.alloc(v.size() * sizeof(int64_t));
  mem.put(buf, v.data(), v.size() * sizeof(int64_t));
  c.all_reduce(buf, static_cast<int64_t>(v.size()), DType::kInt64, ReduceOp::kSum, o);
  c.synchronize(o);
}

inline void run_fault_body(Communicator& c, CommBuffers& mem, const std::string& which,
                           int culprit) {
  const int r = c.rank();
  OpOptions o;
  o.label = "conformance: warm-up";
  c.barrier(o);  // op #1 everywhere: every rank is up
  o.label = fault_label(culprit);
  if (which == "timeout") {
    if (r == culprit) {
      std::this_thread::sleep_for(kNeverArrives);
    } else {
      fault_all_reduce(c, mem, o);
    }
  } else if (which == "abort") {
    if (r == culprit) {
      c.abort_job("conformance: rank " + std::to_string(r) + " ends the job");
    }
    c.barrier(o);  // never completes: the culprit does not join
  } else if (which == "abort-thread") {
    if (r == culprit) {
      std::thread([&c, r] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        c.abort_job("conformance: a thread of rank " + std::to_string(r) + " ends the job");
      }).detach();
      c.barrier(o);  // never completes where there are peers: they do not join
      std::this_thread::sleep_for(kNeverArrives);
    } else {
      std::this_thread::sleep_for(kNeverArrives);
    }
  } else if (which == "vanish") {
    if (r == culprit) {
      std::fflush(stdout);
      ::kill(::getpid(), SIGKILL);
    }
    c.barrier(o);  // never completes: the culprit is gone
  } else {
    std::fprintf(stderr, "unknown fault case '%s' (%s)\n", which.c_str(), fault_case_names());
    std::exit(2);
  }
}

// Runs case `which` on this rank; returns (exit code 3) only when the fault did not end the job,
// which the checks fail. An error the backend throws (NCCL's timeout) ends the job the way dsp's
// ranks end one: abort_job with the error.
inline int run_fault_case(Communicator& c, CommBuffers& mem, const std::string& which,
                          int culprit) {
  if (culprit < 0 || culprit >= c.size()) {
    std::fprintf(stderr, "culprit rank %d not in [0, %d)\n", culprit, c.size());
    return 2;
  }
  try {
    run_fault_body(c, mem, which, culprit);
  } catch (const std::exception& e) {
    c.abort_job("error on rank " + std::to_string(c.rank()) + ": " + e.what());
  }
  std::printf("rank %d: fault case '%s' did not end the job\n", c.rank(), which.c_str());
  std::fflush(stdout);
  return 3;
}

}  // namespace dsp::test
