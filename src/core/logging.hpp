#pragma once
// Leveled logging through fmt, one line per call, prefixed with the rank when the world has more
// than one. Level from DSP_LOG_LEVEL (trace|debug|info|warn|error|off), default info.
#include <fmt/format.h>

#include <string>
#include <string_view>

namespace dsp {

enum class LogLevel { kTrace = 0, kDebug, kInfo, kWarn, kError, kOff };

LogLevel log_level();
void set_log_level(LogLevel level);
LogLevel parse_log_level(std::string_view name);  // throws InvalidArgument on unknown names
// Called once the communicator knows its place; every line then starts with "[r<rank>]".
void set_log_rank(int rank, int size);
void log_write(LogLevel level, std::string_view subsystem, std::string_view msg);

template <class... Args>
void log(LogLevel level, std::string_view subsystem, fmt::format_string<Args...> f,
         Args&&... args) {
  if (level < log_level()) return;
  log_write(level, subsystem, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace dsp

#define DSP_LOG(level, subsys, ...) ::dsp::log(::dsp::LogLevel::level, subsys, __VA_ARGS__)
#define DSP_DEBUG(subsys, ...) DSP_LOG(kDebug, subsys, __VA_ARGS__)
#define DSP_INFO(subsys, ...) DSP_LOG(kInfo, subsys, __VA_ARGS__)
#define DSP_WARN(subsys, ...) DSP_LOG(kWarn, subsys, __VA_ARGS__)
#define DSP_ERROR(subsys, ...) DSP_LOG(kError, subsys, __VA_ARGS__)
