#include "core/lists.hpp"

#include <optional>
#include <stdexcept>

#include "core/error.hpp"

namespace dsp {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t c = s.find(',', pos);
    out.push_back(s.substr(pos, c == std::string::npos ? std::string::npos : c - pos));
    if (c == std::string::npos) break;
    pos = c + 1;
  }
  return out;
}

namespace {
template <class T, class Parse>
std::vector<T> parse_list(const std::string& s, const char* flag, const char* kind, Parse parse) {
  std::vector<T> out;
  for (const std::string& tok : split_list(s)) {
    size_t used = 0;
    T v{};
    try {
      v = parse(tok, &used);
    } catch (const std::logic_error&) {
      DSP_THROW_T(InvalidArgument, "{}: '{}' is not a comma-separated list of {}s", flag, s, kind);
    }
    DSP_CHECK_ARG(used == tok.size(), "{}: '{}' is not an {}", flag, tok, kind);
    out.push_back(v);
  }
  return out;
}
}  // namespace

std::vector<int> parse_int_list(const std::string& s, const char* flag) {
  return parse_list<int>(s, flag, "integer",
                         [](const std::string& t, size_t* used) { return std::stoi(t, used); });
}

std::vector<double> parse_double_list(const std::string& s, const char* flag, double lo,
                                      double hi) {
  std::vector<double> v = parse_list<double>(
      s, flag, "number", [](const std::string& t, size_t* used) { return std::stod(t, used); });
  for (double x : v) {
    DSP_CHECK_ARG(x >= lo && x <= hi, "{}: {} is outside [{}, {}]", flag, x, lo, hi);
  }
  return v;
}

namespace {
// The value `parse` reads from the whole of `text`, or nothing (empty, junk after it, out of range).
template <class T, class Parse>
std::optional<T> whole(const std::string& text, Parse parse) {
  size_t used = 0;
  T v{};
  try {
    v = parse(text, &used);
  } catch (const std::logic_error&) {
    return std::nullopt;
  }
  if (text.empty() || used != text.size()) return std::nullopt;
  return v;
}
}  // namespace

std::optional<int64_t> whole_int(const std::string& text) {
  return whole<int64_t>(text, [](const std::string& t, size_t* u) { return std::stoll(t, u); });
}

std::optional<double> whole_double(const std::string& text) {
  return whole<double>(text, [](const std::string& t, size_t* u) { return std::stod(t, u); });
}

int64_t parse_int(const std::string& text, const char* flag) {
  const std::optional<int64_t> v = whole_int(text);
  DSP_CHECK_ARG(v.has_value(), "{}: '{}' is not an integer", flag, text);
  return *v;
}

double parse_double(const std::string& text, const char* flag) {
  const std::optional<double> v = whole_double(text);
  DSP_CHECK_ARG(v.has_value(), "{}: '{}' is not a number", flag, text);
  return *v;
}

}  // namespace dsp
