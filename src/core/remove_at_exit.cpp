#include "core/remove_at_exit.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"

extern char** environ;

namespace dsp {

RemoveAtExit::RemoveAtExit(const std::string& path) {
  int fds[2];
  DSP_CHECK_T(IoError, ::pipe2(fds, O_CLOEXEC) == 0, "{}: cannot create a pipe: {}", path,
              std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  // stdin: the pipe's read end; stdout and stderr: /dev/null (the launcher forwards this
  // process's output and must not wait for a helper that still holds it); nothing else.
  posix_spawn_file_actions_adddup2(&fa, fds[0], 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
#endif
  // Its own session: a signal to this process's group (a terminal's Ctrl-C, a launcher ending
  // the job) leaves the helper to do its work.
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  const char* argv[] = {"sh", "-c", "cat >/dev/null; exec rm -rf -- \"$0\"", path.c_str(), nullptr};
  const int err =
      posix_spawn(&helper_, "/bin/sh", &fa, &attr, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(fds[0]);
  if (err != 0) {
    ::close(fds[1]);
    DSP_THROW_T(IoError, "{}: cannot start the process that removes it at exit: {}", path,
                std::strerror(err));
  }
  write_fd_ = fds[1];
}

RemoveAtExit::~RemoveAtExit() {
  if (write_fd_ >= 0) ::close(write_fd_);
  if (helper_ > 0) {
    int status = 0;
    while (::waitpid(helper_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

}  // namespace dsp
