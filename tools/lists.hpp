#pragma once
// Comma-separated option values of the CLI ("15,10,5"), parsed one way for every subcommand: each
// token must be a whole number (so "15x" is an error, not 15), messages name the flag.
#include <string>
#include <vector>

namespace dsp::cli {

std::vector<std::string> split_list(const std::string& s);
// InvalidArgument "<flag>: '<token>' is not an integer" (or a list message for an empty token).
std::vector<int> parse_int_list(const std::string& s, const char* flag);
// Every value must lie in [lo, hi].
std::vector<double> parse_double_list(const std::string& s, const char* flag, double lo, double hi);

}  // namespace dsp::cli
