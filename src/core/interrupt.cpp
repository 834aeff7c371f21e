#include "core/interrupt.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

namespace dsp {
namespace {

constexpr size_t kNoteBytes = 1024;
// Two buffers: a setter fills the one the handler is not reading, then publishes it.
char g_notes[2][kNoteBytes] = {{0}, {0}};
std::atomic<int> g_current{0};
std::mutex g_note_mu;
volatile sig_atomic_t g_quiet = 0;
volatile sig_atomic_t g_tty = 0;  // stderr is a terminal: the line starts after the echoed ^C

void write_all(const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, p, n);
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void on_interrupt(int sig) {
  if (!g_quiet) write_interrupt_line();
  _exit(128 + sig);
}

}  // namespace

void set_interrupt_note(const std::string& note) {
  std::lock_guard<std::mutex> lock(g_note_mu);
  const int next = 1 - g_current.load();
  const size_t n = std::min(note.size(), kNoteBytes - 1);
  std::memcpy(g_notes[next], note.data(), n);
  g_notes[next][n] = '\0';
  g_current.store(next);
}

std::string interrupt_message() { return std::string("interrupted") + g_notes[g_current.load()]; }

void write_interrupt_line() {
  const char* note = g_notes[g_current.load()];
  const char head[] = "\ndsp: interrupted";
  write_all(head + (g_tty ? 0 : 1), sizeof(head) - (g_tty ? 1 : 2));
  write_all(note, ::strlen(note));
  write_all("\n", 1);
}

void install_interrupt_handlers(bool quiet) {
  g_quiet = quiet ? 1 : 0;
  g_tty = ::isatty(STDERR_FILENO) ? 1 : 0;
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace dsp
