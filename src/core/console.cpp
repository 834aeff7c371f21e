#include "core/console.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "core/error.hpp"

namespace dsp {
namespace {

struct Console {
  std::mutex mu;
  std::string status;  // drawn on stderr now
  int log_fd = -1;
  bool tty = ::isatty(2) != 0;
};

Console& console() {
  static Console c;
  return c;
}

void write_all(int fd, std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a closed pipe: nothing to tell anyone on it
    s.remove_prefix(static_cast<size_t>(n));
  }
}

// Writes `text` to `fd` (and the log file) with the status line erased around it. Holds c.mu.
void emit(Console& c, FILE* stream, std::string_view text) {
  const bool erase = c.tty && !c.status.empty();
  if (erase) write_all(2, "\r\033[K");
  std::fflush(stream);
  write_all(fileno(stream), text);
  if (c.log_fd >= 0) write_all(c.log_fd, text);
  if (erase) write_all(2, c.status);
}

}  // namespace

void console_result(std::string_view text) {
  std::string line(text);
  if (line.empty() || line.back() != '\n') line += '\n';
  Console& c = console();
  std::lock_guard<std::mutex> lock(c.mu);
  emit(c, stdout, line);
}

void console_diagnostic(std::string_view line) {
  Console& c = console();
  std::lock_guard<std::mutex> lock(c.mu);
  emit(c, stderr, line);
}

void console_status(const std::string& line) {
  Console& c = console();
  if (!c.tty) return;
  std::lock_guard<std::mutex> lock(c.mu);
  write_all(2, "\r\033[K");
  write_all(2, line);
  c.status = line;
}

void console_set_log_file(const std::string& path) {
  Console& c = console();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.log_fd >= 0) ::close(c.log_fd);
  c.log_fd = -1;
  if (path.empty()) return;
  c.log_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  DSP_CHECK_T(IoError, c.log_fd >= 0, "{}: cannot open the log file: {}", path,
              std::strerror(errno));
}

}  // namespace dsp
