#pragma once
// Option values given as text (command-line flags), parsed one way everywhere: a number must be
// the whole token (so "15x" is an error, not 15), lists are comma-separated ("15,10,5"), and
// every message names the flag.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dsp {

std::vector<std::string> split_list(const std::string& s);
// InvalidArgument "<flag>: '<token>' is not an integer" (or a list message for an empty token).
std::vector<int> parse_int_list(const std::string& s, const char* flag);
// Every value must lie in [lo, hi].
std::vector<double> parse_double_list(const std::string& s, const char* flag, double lo, double hi);
// The number the whole of `text` spells, or nothing ("", "15x", out of range).
std::optional<int64_t> whole_int(const std::string& text);
std::optional<double> whole_double(const std::string& text);
// One whole number: InvalidArgument "<flag>: '<text>' is not an integer" (or "a number").
int64_t parse_int(const std::string& text, const char* flag);
double parse_double(const std::string& text, const char* flag);

}  // namespace dsp
