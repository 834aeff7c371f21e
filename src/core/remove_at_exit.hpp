#pragma once
// A temporary path that must not outlive the process that made it, however that process ends: by
// returning, by an error exit that skips destructors (std::_Exit, MPI_Abort: a failed job), or
// killed by a signal, SIGKILL included.
#include <sys/types.h>

#include <string>

namespace dsp {

// Starts a helper process (/bin/sh in a session of its own, holding nothing of this process but
// the read end of a pipe) that waits until the pipe's write end, which only this process holds,
// is closed, then runs rm -rf on `path`. The kernel closes it when this process ends in any way;
// the destructor closes it too (the path is then removed at once). IoError when the helper cannot
// be started.
class RemoveAtExit {
 public:
  explicit RemoveAtExit(const std::string& path);
  ~RemoveAtExit();
  RemoveAtExit(const RemoveAtExit&) = delete;
  RemoveAtExit& operator=(const RemoveAtExit&) = delete;

 private:
  int write_fd_ = -1;
  pid_t helper_ = -1;
};

}  // namespace dsp
