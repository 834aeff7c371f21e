#include "core/logging.hpp"

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "core/console.hpp"
#include "core/error.hpp"

namespace dsp {
namespace {
LogLevel initial_level() {
  const char* env = std::getenv("DSP_LOG_LEVEL");
  if (!env || !*env) return LogLevel::kInfo;
  try {
    return parse_log_level(env);
  } catch (const Error&) {
    std::fprintf(stderr, "dsp: ignoring unknown DSP_LOG_LEVEL '%s'\n", env);
    return LogLevel::kInfo;
  }
}
std::atomic<int> g_level{-1};
std::atomic<int> g_rank{-1};
constexpr const char* kNames[] = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "OFF"};
}  // namespace

LogLevel log_level() {
  int l = g_level.load(std::memory_order_relaxed);
  if (l < 0) {
    l = static_cast<int>(initial_level());
    g_level.store(l);
  }
  return static_cast<LogLevel>(l);
}

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }

LogLevel parse_log_level(std::string_view name) {
  for (int i = 0; i <= static_cast<int>(LogLevel::kOff); ++i) {
    std::string_view n = kNames[i];
    if (n.size() == name.size()) {
      bool eq = true;
      for (size_t j = 0; j < n.size(); ++j) eq &= (n[j] == std::toupper(name[j]));
      if (eq) return static_cast<LogLevel>(i);
    }
  }
  DSP_THROW_T(InvalidArgument, "unknown log level '{}' (trace|debug|info|warn|error|off)", name);
}

void set_log_rank(int rank, int size) { g_rank.store(size > 1 ? rank : -1); }

void log_write(LogLevel level, std::string_view subsystem, std::string_view msg) {
  std::string line;
  int rank = g_rank.load(std::memory_order_relaxed);
  if (rank >= 0) line = fmt::format("[r{}] ", rank);
  if (level != LogLevel::kInfo) line += fmt::format("{}: ", kNames[static_cast<int>(level)]);
  if (!subsystem.empty() && level <= LogLevel::kDebug) line += fmt::format("{}: ", subsystem);
  line += msg;
  line += '\n';
  console_diagnostic(line);
}

}  // namespace dsp
