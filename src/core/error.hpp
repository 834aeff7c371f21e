#pragma once
// Errors are exceptions carrying a user-facing message plus the source location that raised them.
// User input never aborts: it throws one of these, and the CLI turns it into one line and exit 1.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace dsp {

class Error : public std::runtime_error {
 public:
  Error(const std::string& msg, const char* file = "", int line = 0)
      : std::runtime_error(msg), file_(file), line_(line) {}
  const char* file() const { return file_; }
  int line() const { return line_; }
  // "message (at src/x.cpp:12)", for debug logs.
  std::string where() const;

 private:
  const char* file_;
  int line_;
};

// A caller passed something invalid (flags, parameters): the CLI maps it to exit code 2.
class InvalidArgument : public Error {
  using Error::Error;
};
// A file could not be opened, read or written.
class IoError : public Error {
  using Error::Error;
};
// A file exists but its content is wrong (bad magic, dtype, shape, ids out of range...).
class FormatError : public Error {
  using Error::Error;
};
// A collective failed or timed out.
class CommError : public Error {
  using Error::Error;
};
// The operation is not supported by this backend ("X does not support Y").
class NotSupported : public Error {
  using Error::Error;
};

namespace detail {
template <class E>
[[noreturn]] void throw_at(const char* file, int line, std::string msg) {
  throw E(std::move(msg), file, line);
}
}  // namespace detail
}  // namespace dsp

#define DSP_THROW_T(Type, ...) \
  ::dsp::detail::throw_at<Type>(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__))
#define DSP_THROW(...) DSP_THROW_T(::dsp::Error, __VA_ARGS__)

// DSP_CHECK(cond, "format {}", args...): throws dsp::Error with the formatted message.
#define DSP_CHECK_T(Type, cond, ...)           \
  do {                                         \
    if (__builtin_expect(!(cond), 0)) {        \
      DSP_THROW_T(Type, __VA_ARGS__);          \
    }                                          \
  } while (0)
#define DSP_CHECK(cond, ...) DSP_CHECK_T(::dsp::Error, cond, __VA_ARGS__)
#define DSP_CHECK_ARG(cond, ...) DSP_CHECK_T(::dsp::InvalidArgument, cond, __VA_ARGS__)
#define DSP_CHECK_FORMAT(cond, ...) DSP_CHECK_T(::dsp::FormatError, cond, __VA_ARGS__)
