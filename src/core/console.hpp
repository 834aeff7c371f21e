#pragma once
// What a command prints, by stream: results (epoch lines, summaries) on stdout, diagnostics (the
// log) on stderr, a status line (the progress bar) on stderr only when it is a terminal. A
// status line is erased before any other line is written and redrawn after it, so lines never
// splice into it. With a log file (console_set_log_file) every result and log line is also
// appended there (the status line is not). Thread-safe; each line is written in one call.
#include <string>
#include <string_view>

namespace dsp {

// One or more whole lines of results on stdout (a missing final newline is added).
void console_result(std::string_view text);
// One diagnostic line on stderr (logging.cpp's sink); `line` ends with a newline.
void console_diagnostic(std::string_view line);
// Replaces the status line (no newline inside); "" erases it. Ignored unless stderr is a terminal.
void console_status(const std::string& line);
// Appends every later result and diagnostic line of this process to `path` (created if missing);
// "" closes it. IoError naming the file when it cannot be opened.
void console_set_log_file(const std::string& path);

}  // namespace dsp
