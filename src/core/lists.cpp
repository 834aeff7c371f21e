#include "core/lists.hpp"

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

int64_t parse_int(const std::string& text, const char* flag) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::logic_error&) {
    used = 0;
  }
  DSP_CHECK_ARG(!text.empty() && used == text.size(), "{}: '{}' is not an integer", flag, text);
  return v;
}

double parse_double(const std::string& text, const char* flag) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::logic_error&) {
    used = 0;
  }
  DSP_CHECK_ARG(!text.empty() && used == text.size(), "{}: '{}' is not a number", flag, text);
  return v;
}

}  // namespace dsp
